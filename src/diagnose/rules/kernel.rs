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

mod devices;
mod iommu_modes;
mod links;
mod program;

use devices::{aer_line, corrected_aer_bursts, gpu_line, gpu_message_heads, hca_line, iommu_line};
use links::link_flaps;

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
        let line = KernelLine {
            ev,
            idx,
            place,
            factor: time_factor(ctx, window, idx),
        };
        match ev.kind {
            EventKind::KernelGpuXid | EventKind::KernelGpuLost => {
                gpu_line(ctx, &gpus, line, &mut found)
            }
            EventKind::KernelPcieAer => aer_line(ctx, &gpus, line, &mut found),
            EventKind::KernelIommuFault => iommu_line(ctx, &gpus, line, &mut found),
            _ => hca_line(ctx, line, &mut found),
        }
    }
    corrected_aer_bursts(ctx, &gpus, window, &mut found);
    gpu_message_heads(ctx, &mut found);
    let mut out = found.finish();
    iommu_modes::modes_differ(ctx.job, &mut out);
    out.extend(program::program_faults(ctx, window));
    out
}

/// One kernel line as the device rules read it: the event, where the model
/// placed it, and how much its distance from the job's window leaves of it.
#[derive(Clone, Copy)]
pub(super) struct KernelLine<'a> {
    ev: &'a Event,
    idx: EventIdx,
    place: &'a KernelPlace,
    factor: f64,
}

impl<'a> KernelLine<'a> {
    fn parts(self) -> (&'a Event, EventIdx, &'a KernelPlace, f64) {
        (self.ev, self.idx, self.place, self.factor)
    }
}

/// The job's GPUs: bus id → host → the ranks on it (looked up per kernel
/// line, so keyed for lookups rather than scans).
pub(super) struct JobGpus {
    by_bus: BTreeMap<String, BTreeMap<Option<String>, BTreeSet<u32>>>,
    hosts: BTreeSet<Option<String>>,
}

impl JobGpus {
    pub(super) fn of(ctx: &Ctx<'_>) -> JobGpus {
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
    pub(super) fn ranks(&self, host: &Option<String>, pci: &str) -> BTreeSet<u32> {
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

    /// How much a fault of a GPU on `host` that `ranks` use counts: a GPU no
    /// rank uses, where the job's GPUs on that host are known, is likely
    /// another job's.
    pub(super) fn ownership(&self, host: &Option<String>, ranks: &BTreeSet<u32>) -> f64 {
        if !ranks.is_empty() {
            1.0
        } else if self.known_on(host) {
            0.35
        } else {
            0.8
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
    /// The cause text variant the strongest line of its kind is told in
    /// (`iommu`), with that line's weight: it holds where that line is the
    /// strongest of all.
    variant: Option<(f64, &'static str)>,
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

    /// A line told in a variant of its cause's text.
    fn add_variant(
        &mut self,
        kind: CauseKind,
        place: &KernelPlace,
        line: Line,
        variant: &'static str,
    ) {
        let weight = line.weight;
        self.add(kind, place, line);
        let p = self.entry(kind, place);
        if weight > 0.0 && p.variant.is_none_or(|(w, _)| weight > w) {
            p.variant = Some((weight, variant));
        }
    }

    /// IOMMU faults of several GPUs of one host are one fault of the host's
    /// IOMMU set-up (translation on where peers write into each other's
    /// memory), not of any one GPU: every rank on those GPUs is stuck.
    fn host_wide_iommu(&mut self) {
        let iommu = |k: &Key, p: &Pending| {
            k.0 == CauseKind::GpuFault && p.variant.is_some_and(|(_, v)| v == "iommu")
        };
        let mut by_host: BTreeMap<Option<String>, Vec<Key>> = BTreeMap::new();
        for (k, p) in &self.pending {
            if iommu(k, p) && k.2.is_some() {
                by_host.entry(k.1.clone()).or_default().push(k.clone());
            }
        }
        for (host, keys) in by_host.into_iter().filter(|(_, k)| k.len() >= 2) {
            let gpus = keys.len();
            let mut whole = Pending::default();
            for k in keys {
                let Some(p) = self.pending.remove(&k) else {
                    continue;
                };
                whole.supports.extend(p.supports);
                whole.ranks.extend(p.ranks);
                whole.variant = whole.variant.or(p.variant);
            }
            let weight = whole.supports.iter().map(|s| s.0).fold(0.0, f64::max);
            whole.detail = Some((weight, format!("the IOMMU refused DMA of {gpus} GPUs")));
            self.pending
                .insert((CauseKind::GpuFault, host, None), whole);
        }
    }

    fn finish(mut self) -> Vec<Hypothesis> {
        self.host_wide_iommu();
        self.pending
            .into_iter()
            .filter(|(_, p)| !p.supports.is_empty())
            .map(|((kind, host, device), p)| to_hypothesis(kind, host, device, p))
            .collect()
    }
}

/// (host, device or PCI address).
type Place = (Option<String>, Option<String>);

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
    if let Some((w, detail)) = p.detail {
        if let Some((_, variant)) = p.variant.filter(|(vw, _)| *vw >= w) {
            h.value("variant", variant);
        }
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
        m if m <= 1440 => 0.25,
        // Days away: a fault the host recovered from (or had yet to meet),
        // a clue to the host's history at most.
        _ => 0.1,
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
        (Some(nics), None) if ethernet_beside_infiniband(nics, place.netdev.as_deref()) => 0.2,
        (Some(_), None) => 0.7,
    }
}

/// Every NIC NCCL listed is an InfiniBand port, and the event names an
/// Ethernet interface (`ens6f1np1`, `bond1`): an IB port's own interface
/// is IPoIB's `ib…`, so this one carries storage or management traffic,
/// not the job's.
fn ethernet_beside_infiniband(
    nics: &std::collections::BTreeMap<String, crate::model::NicInfo>,
    netdev: Option<&str>,
) -> bool {
    let all_ib = nics.values().all(|n| n.link_layer.as_deref() == Some("IB"));
    all_ib && netdev.is_some_and(|n| !n.starts_with("ib"))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::{Fields, Job, Level, Origin, RawTime, Value, Who};
    use chrono::NaiveDate;

    pub(crate) fn xid(code: i64, extra: &[(&'static str, Value)], time: RawTime) -> Event {
        let mut fields = Fields::default();
        fields.insert("xid", Value::Int(code));
        fields.insert("pci", Value::Text("0000:3b:00.0".into()));
        for (k, v) in extra {
            fields.insert(k, v.clone());
        }
        Event {
            kind: EventKind::KernelGpuXid,
            pattern: "kernel.nvrm_xid",
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
                xid(79, &[], at(28, 20)),
            ],
            ..Job::default()
        };
        let f: Vec<f64> = Ctx::over(&job, |ctx| {
            let w = job_window(ctx);
            (1..6).map(|i| time_factor(ctx, w, i)).collect()
        });
        // Two hours after: 0.45; three days before: 0.1; no wall time:
        // 1; sixteen hours before: 0.25.
        assert_eq!(f, [1.0, 0.45, 0.1, 1.0, 0.25]);
    }
    #[test]
    fn an_ethernet_port_beside_infiniband_hcas_is_off_the_jobs_path() {
        let nic = |layer: &str| crate::model::NicInfo {
            port: Some(1),
            link_layer: Some(layer.to_string()),
        };
        let ib: std::collections::BTreeMap<String, crate::model::NicInfo> = [
            ("mlx5_0".to_string(), nic("IB")),
            ("mlx5_1".to_string(), nic("IB")),
        ]
        .into();
        assert!(ethernet_beside_infiniband(&ib, Some("ens6f1np1")));
        assert!(!ethernet_beside_infiniband(&ib, Some("ibp12s0")));
        assert!(!ethernet_beside_infiniband(&ib, None));
        let roce: std::collections::BTreeMap<String, crate::model::NicInfo> =
            [("mlx5_0".to_string(), nic("RoCE"))].into();
        assert!(!ethernet_beside_infiniband(&roce, Some("ens6f1np1")));
    }
}
