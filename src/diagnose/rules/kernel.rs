//! Kernel logs: link flaps, HCA (NIC driver / firmware) faults, GPU faults
//! (Xid, fallen off the bus) and PCIe AER errors, placed on the host, device
//! and ranks the model stage joined each line to.
//!
//! A weight says how much one kernel line alone tells about the job's
//! failure (`Source::Kernel`); NCCL's victims naming the same host add their
//! own source. Lines far from the job's time window weigh less (when the
//! clocks compare at all), link lines printed while the host booted are
//! probe noise, and known benign floods (ACCESS_REG `bad operation`) are
//! skipped.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDateTime;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::kernel::{KernelPlace, is_kernel};
use crate::model::{CauseKind, Event, EventIdx, EventKind};
use crate::timeline::uptime_us;

use super::Ctx;

/// Link and module lines in the first minutes after boot are the probe.
const BOOT_SETTLE_US: i64 = 300_000_000;
const MAX_SUPPORT: usize = 8;
const MAX_VICTIM_LINES: usize = 4;
/// ibv_wc_status 5 echoes an earlier error.
const WR_FLUSH_ERR: i64 = 5;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let window = job_window(ctx);
    let gpus = JobGpus::of(ctx);
    let mut found = Found::default();
    link_flaps(ctx, window, &mut found);
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        let factor = time_factor(ctx, window, idx);
        match ev.kind {
            EventKind::KernelGpuXid | EventKind::KernelGpuLost => {
                gpu_line(ctx, &gpus, ev, idx, place, factor, &mut found)
            }
            EventKind::KernelPcieAer => aer_line(ctx, &gpus, ev, idx, place, factor, &mut found),
            _ => hca_line(ctx, ev, idx, place, factor, &mut found),
        }
    }
    corrected_aer_bursts(ctx, &gpus, window, &mut found);
    gpu_message_heads(ctx, &mut found);
    found.finish()
}

/// The job's GPUs: bus id → host → the ranks on it (looked up per kernel
/// line, so keyed for lookups rather than scans).
struct JobGpus {
    by_bus: BTreeMap<String, BTreeMap<Option<String>, BTreeSet<u32>>>,
    hosts: BTreeSet<Option<String>>,
}

impl JobGpus {
    fn of(ctx: &Ctx<'_>) -> JobGpus {
        let mut gpus = JobGpus {
            by_bus: BTreeMap::new(),
            hosts: BTreeSet::new(),
        };
        for r in ctx.job.ranks.values() {
            if let Some(bus) = &r.gpu_bus_id {
                gpus.by_bus
                    .entry(bus.clone())
                    .or_default()
                    .entry(r.host.clone())
                    .or_default()
                    .insert(r.rank);
                gpus.hosts.insert(r.host.clone());
            }
        }
        gpus
    }

    /// Ranks on GPU `pci` of `host` (of any host when the line has none).
    fn ranks(&self, host: &Option<String>, pci: &str) -> BTreeSet<u32> {
        let Some(hosts) = self.by_bus.get(pci) else {
            return BTreeSet::new();
        };
        match host {
            Some(_) => hosts.get(host).cloned().unwrap_or_default(),
            None => hosts.values().flatten().copied().collect(),
        }
    }

    /// Some GPU of the job on `host` is known (on any host when it has none).
    fn known_on(&self, host: &Option<String>) -> bool {
        match host {
            Some(_) => self.hosts.contains(host),
            None => !self.hosts.is_empty(),
        }
    }
}

// ---------------------------------------------------------------- collecting support

/// One hypothesis per (cause, host, device or GPU).
type Key = (CauseKind, Option<String>, Option<String>);

#[derive(Default)]
struct Pending {
    supports: Vec<(f64, EventIdx, String)>,
    ranks: BTreeSet<u32>,
    port: Option<u32>,
    /// The strongest line's description.
    detail: Option<(f64, String)>,
    nccl: Vec<(f64, EventIdx, String)>,
    peer_host: Option<String>,
}

#[derive(Default)]
struct Found {
    pending: BTreeMap<Key, Pending>,
}

impl Found {
    fn entry(&mut self, kind: CauseKind, place: &KernelPlace) -> &mut Pending {
        let device = if kind == CauseKind::GpuFault {
            place.pci.clone()
        } else {
            place.device().map(str::to_string)
        };
        let p = self
            .pending
            .entry((kind, place.host.clone(), device))
            .or_default();
        p.ranks.extend(place.ranks.iter().copied());
        p.port = p.port.or(place.port);
        p
    }

    fn add(&mut self, kind: CauseKind, place: &KernelPlace, line: Line) {
        if line.weight <= 0.0 {
            return;
        }
        let p = self.entry(kind, place);
        if p.detail.as_ref().is_none_or(|(w, _)| line.weight > *w) {
            p.detail = Some((line.weight, line.detail));
        }
        p.supports.push((line.weight, line.idx, line.why));
    }

    fn finish(self) -> Vec<Hypothesis> {
        self.pending
            .into_iter()
            .filter(|(_, p)| !p.supports.is_empty())
            .map(|((kind, host, device), p)| to_hypothesis(kind, host, device, p))
            .collect()
    }
}

/// What one line contributes.
struct Line {
    weight: f64,
    idx: EventIdx,
    why: String,
    detail: String,
}

fn strongest(mut v: Vec<(f64, EventIdx, String)>, n: usize) -> Vec<(f64, EventIdx, String)> {
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    v.truncate(n);
    v
}

fn to_hypothesis(
    kind: CauseKind,
    host: Option<String>,
    device: Option<String>,
    p: Pending,
) -> Hypothesis {
    let mut h = Hypothesis::new(kind);
    h.host = host;
    if kind == CauseKind::GpuFault {
        h.gpu_bus_id = device;
    } else {
        h.device = device;
        h.port = p.port;
    }
    h.peer_host = p.peer_host;
    h.ranks = p.ranks;
    if let Some((_, detail)) = p.detail {
        h.value("detail", detail);
    }
    for (w, idx, why) in strongest(p.supports, MAX_SUPPORT) {
        h.support(Source::Kernel, w, Some(idx), why);
    }
    for (w, idx, why) in strongest(p.nccl, MAX_VICTIM_LINES) {
        h.support(Source::Nccl, w, Some(idx), why);
    }
    h
}

// ---------------------------------------------------------------- time

type Window = Option<(NaiveDateTime, NaiveDateTime)>;

/// First and last time of the job's own (non-kernel) lines.
fn job_window(ctx: &Ctx<'_>) -> Window {
    let times = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| !is_kernel(e.kind))
        .filter_map(|(i, _)| ctx.timeline.time_of(i));
    times.fold(None, |w, t| match w {
        None => Some((t, t)),
        Some((a, b)) => Some((a.min(t), b.max(t))),
    })
}

/// How much a line counts given its distance from the job's window; 1 when
/// either side has no comparable time.
fn time_factor(ctx: &Ctx<'_>, window: Window, idx: EventIdx) -> f64 {
    let (Some((start, end)), Some(t)) = (window, ctx.timeline.time_of(idx)) else {
        return 1.0;
    };
    let off = if t < start {
        start - t
    } else if t > end {
        t - end
    } else {
        return 1.0;
    };
    match off.num_minutes() {
        m if m <= 10 => 1.0,
        m if m <= 60 => 0.7,
        m if m <= 360 => 0.45,
        _ => 0.25,
    }
}

fn at_boot(ev: &Event) -> bool {
    uptime_us(ev).is_some_and(|u| u < BOOT_SETTLE_US)
}

/// A NIC none of the job's ranks uses (when NCCL listed the host's HCAs) is
/// likely not on the job's path: a management port, an uncabled port.
fn nic_ownership(ctx: &Ctx<'_>, place: &KernelPlace) -> f64 {
    if !place.ranks.is_empty() {
        return 1.0;
    }
    let listed = place
        .host
        .as_ref()
        .and_then(|h| ctx.job.hosts.get(h))
        .map(|h| &h.nics)
        .filter(|n| !n.is_empty());
    match (listed, place.ibdev.as_deref()) {
        (None, _) => 1.0,
        (Some(nics), Some(d)) if nics.contains_key(d) => 0.8,
        (Some(_), Some(_)) => 0.35,
        (Some(_), None) => 0.7,
    }
}

// ---------------------------------------------------------------- links

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkStep {
    Down,
    Up,
    ModuleError,
}

fn link_step(ev: &Event) -> Option<LinkStep> {
    let state = ev.text_field("state").unwrap_or("").to_ascii_lowercase();
    match ev.kind {
        EventKind::KernelNicLink | EventKind::KernelIbPortState => match state.as_str() {
            "down" => Some(LinkStep::Down),
            "up" | "active" => Some(LinkStep::Up),
            _ => None,
        },
        EventKind::KernelNicModule => {
            let status = ev.text_field("status").unwrap_or("").to_ascii_lowercase();
            if ev.text_field("reason").is_some() {
                Some(LinkStep::ModuleError)
            } else if status.contains("unplugged") || status.contains("disabled") {
                Some(LinkStep::Down)
            } else if status.contains("plugged") {
                Some(LinkStep::Up)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// (host, device or PCI address).
type Place = (Option<String>, Option<String>);

/// Link down/up and module events per (host, device): a down during the job
/// is a link fault, down and up again is a flap.
fn link_flaps(ctx: &Ctx<'_>, window: Window, found: &mut Found) {
    let mut groups: BTreeMap<Place, Vec<(EventIdx, LinkStep)>> = BTreeMap::new();
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if let Some(step) = link_step(ev).filter(|_| !at_boot(ev)) {
            let key = (place.host.clone(), place.device().map(str::to_string));
            groups.entry(key).or_default().push((idx, step));
        }
    }
    if groups.is_empty() {
        return;
    }
    let ib_errors: Vec<EventIdx> = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind,
                EventKind::IbCompletionError | EventKind::IbAsyncEvent
            ) && e.int("status") != Some(WR_FLUSH_ERR)
        })
        .map(|(i, _)| i)
        .collect();
    for steps in groups.values() {
        link_group(ctx, window, steps, &ib_errors, found);
    }
}

fn link_group(
    ctx: &Ctx<'_>,
    window: Window,
    steps: &[(EventIdx, LinkStep)],
    ib_errors: &[EventIdx],
    found: &mut Found,
) {
    let count = |s| steps.iter().filter(|(_, x)| *x == s).count();
    let (downs, ups, errors) = (
        count(LinkStep::Down),
        count(LinkStep::Up),
        count(LinkStep::ModuleError),
    );
    if downs + errors == 0 {
        return;
    }
    let base = if downs >= 2 || (downs >= 1 && ups >= 1) {
        0.65
    } else if downs == 1 {
        0.55
    } else {
        0.5
    };
    let place = &ctx.job.kernel.places[&steps[0].0];
    let device = place.device().unwrap_or("the NIC").to_string();
    let detail = format!(
        "kernel: link of {device} went down {downs}×, came up {ups}×{}",
        if errors > 0 {
            format!(", transceiver error {errors}×")
        } else {
            String::new()
        }
    );
    let mut nearest: f64 = 0.0;
    for &(idx, step) in steps {
        let factor =
            time_factor(ctx, window, idx) * nic_ownership(ctx, &ctx.job.kernel.places[&idx]);
        let (weight, why) = match step {
            LinkStep::Down => (base, format!("the kernel saw the link of {device} go down")),
            LinkStep::ModuleError => (
                base,
                format!("the transceiver of {device} reported an error"),
            ),
            LinkStep::Up => (
                0.3,
                format!("the link of {device} came back up: it flapped"),
            ),
        };
        if step != LinkStep::Up {
            nearest = nearest.max(factor);
        }
        let place = &ctx.job.kernel.places[&idx];
        found.add(
            CauseKind::LinkFlap,
            place,
            Line {
                weight: weight * factor,
                idx,
                why,
                detail: detail.clone(),
            },
        );
    }
    add_victims(ctx, place, nearest, ib_errors, found);
}

/// NCCL's completion errors that name the flapping host as the peer (or
/// that the host's own ranks report on that HCA) make the link the cause.
fn add_victims(
    ctx: &Ctx<'_>,
    place: &KernelPlace,
    factor: f64,
    ib_errors: &[EventIdx],
    found: &mut Found,
) {
    let Some(host) = place.host.as_deref() else {
        return;
    };
    let job = ctx.job;
    let mut lines = Vec::new();
    let mut reporters: BTreeMap<String, usize> = BTreeMap::new();
    for &idx in ib_errors {
        let ev = &job.events[idx];
        let completion = ev.kind == EventKind::IbCompletionError;
        let reporter = ev.who.host.as_deref();
        let names_host = completion
            && reporter != Some(host)
            && ev.text_field("peer").and_then(|p| job.host_of_addr(p)) == Some(host);
        let own_port = reporter == Some(host)
            && ev.text_field("hca").is_some()
            && ev.text_field("hca") == place.ibdev.as_deref();
        if names_host {
            *reporters
                .entry(reporter.unwrap_or("?").to_string())
                .or_default() += 1;
            lines.push((
                0.5 * factor,
                idx,
                format!("a victim's transfer to {host} failed"),
            ));
        } else if own_port {
            lines.push((
                0.5 * factor,
                idx,
                format!("NCCL on {host} saw the error on this HCA"),
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let p = found.entry(CauseKind::LinkFlap, place);
    p.nccl.extend(lines);
    p.peer_host = reporters
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(h, _)| h);
}

// ---------------------------------------------------------------- HCA

fn hca_line(
    ctx: &Ctx<'_>,
    ev: &Event,
    idx: EventIdx,
    place: &KernelPlace,
    factor: f64,
    found: &mut Found,
) {
    let Some((weight, detail)) = hca_weight(ctx, ev) else {
        return;
    };
    let device = place.device().unwrap_or("the HCA");
    found.add(
        CauseKind::HcaFault,
        place,
        Line {
            weight: weight * factor * nic_ownership(ctx, place),
            idx,
            why: format!("the kernel reported a fault of {device}: {detail}"),
            detail,
        },
    );
}

/// How much an mlx5 line says the HCA failed, and what it says.
fn hca_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    match ev.kind {
        EventKind::KernelNicHealth => health_weight(ev),
        EventKind::KernelNicCmdError => command_weight(ctx, ev),
        EventKind::KernelCqeError => {
            let w = match &*ev.pattern {
                "kernel.mlx5_cq_error" => 0.4,
                "kernel.mlx5_ib_wc_error" => 0.15,
                _ => 0.25,
            };
            Some((w, "completion-queue error".into()))
        }
        EventKind::KernelNicTxTimeout => {
            if ev.int("recovered") == Some(1) {
                return None;
            }
            let failed = &*ev.pattern == "kernel.mlx5e_reopen_failed";
            let what = if ev.text_field("direction") == Some("rx") {
                "RX timeout"
            } else if failed {
                "could not recover from a TX timeout"
            } else {
                "transmit timeout"
            };
            Some((if failed { 0.5 } else { 0.35 }, what.into()))
        }
        _ => None,
    }
}

fn health_weight(ev: &Event) -> Option<(f64, String)> {
    let step = ev.text_field("step").unwrap_or("");
    Some(match ev.text_field("what")? {
        "fatal_error" => (
            0.8,
            format!("fatal error {} detected", ev.int("sensor").unwrap_or(0)),
        ),
        "health_compromised" => (0.8, "firmware heartbeat stopped".into()),
        "recovery" if step.contains("failed") || step.contains("error state") => {
            (0.8, format!("health recovery: {step}"))
        }
        "recovery" => (0.7, format!("health recovery: {step}")),
        "fw_reset" if step.contains("timeout") => (0.7, format!("firmware reset: {step}")),
        "fw_reset" => (0.6, format!("firmware reset: {step}")),
        "pci_error" => (0.7, "PCI error callback (AER / EEH)".into()),
        "health_buffer" => return health_buffer_weight(ev),
        "high_temperature" => (0.35, "NIC ASIC temperature warning".into()),
        "slot_power" => (0.4, "insufficient PCIe slot power".into()),
        "pcie_downtrained" => (0.2, "PCIe link downtrained".into()),
        _ => return None,
    })
}

/// Health buffer lines: severity ≤ 3 (ERROR) or `rfr 1` mean the adapter is lost.
fn health_buffer_weight(ev: &Event) -> Option<(f64, String)> {
    if let Some(rfr) = ev.int("rfr") {
        return (rfr == 1).then(|| (0.7, "firmware requires a reset (rfr 1)".into()));
    }
    if let Some(synd) = ev.int("synd") {
        let text = ev.text_field("synd_text").unwrap_or("");
        return Some((0.6, format!("health syndrome {synd:#x}: {text}")));
    }
    let severity = ev.int("severity")?;
    let issue = ev.text_field("issue").unwrap_or("health issue");
    Some(if severity <= 3 {
        (0.7, format!("{issue} (severity {severity})"))
    } else {
        (0.2, format!("{issue} (severity {severity})"))
    })
}

fn command_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    if ev.int("benign") == Some(1) {
        return None;
    }
    let command = ev.text_field("command").unwrap_or("a firmware command");
    if ev.int("timeout") != Some(1) {
        let status = ev.text_field("status").unwrap_or("?");
        return Some((
            0.25,
            format!("firmware command {command} failed ({status})"),
        ));
    }
    let w = if ctx.kb.is_wedged_command(command) {
        0.75
    } else if ev.int("recovered") == Some(1) {
        0.25
    } else if ev.int("late") == Some(1) {
        0.4
    } else {
        0.5
    };
    Some((w, format!("firmware command {command} timed out")))
}

// ---------------------------------------------------------------- GPU

fn gpu_line(
    ctx: &Ctx<'_>,
    gpus: &JobGpus,
    ev: &Event,
    idx: EventIdx,
    place: &KernelPlace,
    factor: f64,
    found: &mut Found,
) {
    let Some((weight, detail)) = gpu_weight(ctx, ev) else {
        return;
    };
    let weight = weight * factor * ownership(gpus, place);
    let gpu = place.pci.as_deref().unwrap_or("a GPU");
    found.add(
        CauseKind::GpuFault,
        place,
        Line {
            weight,
            idx,
            why: format!("the GPU driver reported on {gpu}: {detail}"),
            detail,
        },
    );
}

/// Xid weight by its class in the knowledge base; Xid 45 `caused by previous
/// Xid N` weighs as its root; NVLink5 Xids by their `Nonfatal`/`Fatal` word.
fn gpu_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    if ev.kind == EventKind::KernelGpuLost {
        return Some(match ev.text_field("what") {
            Some("gsp_rpc_errors") => (0.6, "GSP RPC errors: the GPU likely needs a reset".into()),
            _ => (0.9, "the GPU has fallen off the bus".into()),
        });
    }
    let code = ev.int("xid")?;
    let root = ev.int("root_xid").filter(|_| code == 45);
    let Some(info) = ctx.kb.xid(root.unwrap_or(code)) else {
        return Some((0.4, format!("Xid {code} (not in the Xid table)")));
    };
    let class = if info.unit_word_decides && ev.text_field("unit_severity") == Some("Nonfatal") {
        "nvlink_nonfatal"
    } else {
        info.class.as_str()
    };
    let weight = ctx.kb.xid_class(class).map_or(0.4, |c| c.weight);
    let head = match root {
        Some(r) => format!("Xid {code} after Xid {r}: {}", info.name),
        None => format!("Xid {code}: {}", info.name),
    };
    let action = info.action.trim_end_matches('.');
    Some((weight, format!("{head}; next: {action}")))
}

/// A multi-line NVRM message names the GPU on its first line: cite that
/// line too where the GPU's fault is already supported.
fn gpu_message_heads(ctx: &Ctx<'_>, found: &mut Found) {
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if &*ev.pattern != "kernel.nvrm_gpu_announce" {
            continue;
        }
        let key = (CauseKind::GpuFault, place.host.clone(), place.pci.clone());
        if let Some(p) = found.pending.get_mut(&key) {
            let why = "the driver's message about this GPU starts here".to_string();
            p.supports.push((0.3, idx, why));
        }
    }
}

/// A GPU no rank of the job uses (when the job's GPUs on that host are
/// known) is likely another job's.
fn ownership(gpus: &JobGpus, place: &KernelPlace) -> f64 {
    if !place.ranks.is_empty() {
        1.0
    } else if gpus.known_on(&place.host) {
        0.35
    } else {
        0.8
    }
}

// ---------------------------------------------------------------- PCIe AER

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Gpu,
    Nic,
}

/// Whether an AER line's device is one of the job's GPUs or NICs.
fn aer_target(gpus: &JobGpus, ctx: &Ctx<'_>, ev: &Event, place: &KernelPlace) -> Option<Target> {
    let pci = place.pci.as_deref()?;
    let devices = place
        .host
        .as_ref()
        .and_then(|h| ctx.job.kernel.hosts.get(h));
    let rank_gpu = !gpus.ranks(&place.host, pci).is_empty();
    let driver = ev.text_field("driver").unwrap_or("");
    if rank_gpu || driver == "nvidia" || devices.is_some_and(|d| d.gpus.contains_key(pci)) {
        Some(Target::Gpu)
    } else if driver.starts_with("mlx") || devices.is_some_and(|d| d.nics.contains_key(pci)) {
        Some(Target::Nic)
    } else {
        None
    }
}

fn aer_line(
    ctx: &Ctx<'_>,
    gpus: &JobGpus,
    ev: &Event,
    idx: EventIdx,
    place: &KernelPlace,
    factor: f64,
    found: &mut Found,
) {
    let weight = match ev.text_field("severity") {
        Some("fatal") => 0.5,
        Some("non-fatal") => 0.35,
        _ => return,
    };
    let Some(target) = aer_target(gpus, ctx, ev, place) else {
        return;
    };
    let pci = place.pci.as_deref().unwrap_or("?");
    let severity = ev.text_field("severity").unwrap_or("");
    let detail = format!("uncorrected ({severity}) PCIe error on {pci}");
    let (kind, place) = aer_place(gpus, target, place);
    found.add(
        kind,
        &place,
        Line {
            weight: weight * factor,
            idx,
            why: format!("PCIe AER: {detail}"),
            detail,
        },
    );
}

/// The hypothesis an AER line supports, with the GPU's ranks filled in.
fn aer_place(gpus: &JobGpus, target: Target, place: &KernelPlace) -> (CauseKind, KernelPlace) {
    let mut place = place.clone();
    if target == Target::Gpu {
        place.gpu = true;
        place.ranks = place
            .pci
            .as_deref()
            .map(|pci| gpus.ranks(&place.host, pci))
            .unwrap_or_default();
        (CauseKind::GpuFault, place)
    } else {
        (CauseKind::HcaFault, place)
    }
}

/// Corrected errors count only in bursts on one of the job's devices (a
/// degrading link often precedes Xid 79 or mlx5 `Fatal error 1`).
fn corrected_aer_bursts(ctx: &Ctx<'_>, gpus: &JobGpus, window: Window, found: &mut Found) {
    const BURST: usize = 10;
    let mut bursts: BTreeMap<Place, Vec<EventIdx>> = BTreeMap::new();
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if ev.kind == EventKind::KernelPcieAer && ev.text_field("severity") == Some("corrected") {
            bursts
                .entry((place.host.clone(), place.pci.clone()))
                .or_default()
                .push(idx);
        }
    }
    for idxs in bursts.values().filter(|v| v.len() >= BURST) {
        let place = &ctx.job.kernel.places[&idxs[0]];
        let ev = &ctx.job.events[idxs[0]];
        let Some(target) = aer_target(gpus, ctx, ev, place) else {
            continue;
        };
        let (kind, place) = aer_place(gpus, target, place);
        let detail = format!(
            "{} corrected PCIe errors on {}",
            idxs.len(),
            place.pci.as_deref().unwrap_or("?")
        );
        for &idx in idxs.iter().take(MAX_SUPPORT) {
            found.add(
                kind,
                &place,
                Line {
                    weight: 0.2 * time_factor(ctx, window, idx),
                    idx,
                    why: format!("PCIe AER burst: {detail}"),
                    detail: detail.clone(),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::knowledge::Knowledge;
    use crate::model::{Fields, Job, Level, Origin, RawTime, Value, Who};
    use crate::timeline::Timeline;
    use chrono::NaiveDate;

    fn xid(code: i64, extra: &[(&str, Value)], time: RawTime) -> Event {
        let mut fields = Fields::default();
        fields.insert("xid", Value::Int(code));
        fields.insert("pci", Value::Text("0000:3b:00.0".into()));
        for (k, v) in extra {
            fields.insert(k, v.clone());
        }
        Event {
            kind: EventKind::KernelGpuXid,
            pattern: "kernel.nvrm_xid".into(),
            origin: Origin {
                file: crate::model::FileId(0),
                line: 1,
            },
            who: Who::default(),
            level: Level::Error,
            time,
            fields,
            text: "x".into(),
        }
    }

    fn weight_of(ev: Event) -> f64 {
        let job = Job {
            events: vec![ev],
            ..Job::default()
        };
        let kb = Knowledge::builtin().unwrap();
        let timeline = Timeline::build(&job);
        let ctx = Ctx {
            job: &job,
            timeline: &timeline,
            kb: &kb,
        };
        gpu_weight(&ctx, &job.events[0]).unwrap().0
    }

    #[test]
    fn xid_45_weighs_as_its_root_and_nvlink5_by_its_unit_word() {
        let alone = weight_of(xid(45, &[], RawTime::None));
        let after_149 = weight_of(xid(45, &[("root_xid", Value::Int(149))], RawTime::None));
        assert!(alone < 0.2 && after_149 > 0.6, "{alone} {after_149}");
        let nonfatal = weight_of(xid(
            144,
            &[("unit_severity", Value::Text("Nonfatal".into()))],
            RawTime::None,
        ));
        let fatal = weight_of(xid(
            149,
            &[("unit_severity", Value::Text("Fatal".into()))],
            RawTime::None,
        ));
        assert!(nonfatal < 0.35 && fatal > 0.6);
        assert!(weight_of(xid(13, &[], RawTime::None)) < 0.35);
        assert!(weight_of(xid(79, &[], RawTime::None)) > 0.85);
    }

    #[test]
    fn lines_far_from_the_job_count_less() {
        let at = |d, h| {
            RawTime::Local(
                NaiveDate::from_ymd_opt(2024, 11, d)
                    .unwrap()
                    .and_hms_opt(h, 0, 0)
                    .unwrap(),
            )
        };
        let mut job_line = xid(79, &[], at(29, 12));
        job_line.kind = EventKind::WatchdogTimeout;
        let job = Job {
            events: vec![
                job_line,
                xid(79, &[], at(29, 12)),
                xid(79, &[], at(29, 14)),
                xid(79, &[], at(26, 12)),
                xid(79, &[], RawTime::Uptime { micros: 5 }),
            ],
            ..Job::default()
        };
        let kb = Knowledge::builtin().unwrap();
        let timeline = Timeline::build(&job);
        let ctx = Ctx {
            job: &job,
            timeline: &timeline,
            kb: &kb,
        };
        let w = job_window(&ctx);
        let f: Vec<f64> = (1..5).map(|i| time_factor(&ctx, w, i)).collect();
        assert_eq!(f, [1.0, 0.45, 0.25, 1.0]);
    }
}
