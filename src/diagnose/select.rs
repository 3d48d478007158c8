//! Choosing among hypotheses, and the verdict's status and stuck ranks.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventKind, Job};

use super::hang::Hang;
use super::hypothesis::{Hypothesis, Source};
use super::rules::Ctx;
use super::stops;
use super::verdict::Status;

/// Below this a hypothesis is not a verdict: the cause is `unknown`.
const MIN_CONFIDENCE: f64 = 0.35;
const MAX_ALTERNATIVES: usize = 4;

pub struct Choice {
    pub best: Hypothesis,
    pub alternatives: Vec<Hypothesis>,
}

/// Folds hypotheses of one kind about one host together: a crash seen in the
/// launcher's summary and in the peers' closed sockets is one crash.
pub fn merge(job: &Job, hyps: Vec<Hypothesis>) -> Vec<Hypothesis> {
    let (placed, loose): (Vec<Hypothesis>, Vec<Hypothesis>) =
        hyps.into_iter().partition(|h| h.device.is_some());
    let (by_lid, placed): (Vec<Hypothesis>, Vec<Hypothesis>) = placed
        .into_iter()
        .partition(|h| lid_only(h.device.as_deref()));
    let mut out: Vec<Hypothesis> = Vec::new();
    for h in placed {
        match out.iter_mut().find(|o| same_story(o, &h)) {
            Some(o) => absorb(o, h),
            None => out.push(h),
        }
    }
    // A port known only by its LID (perfquery without an ibstat to name it)
    // is the one port of that host the same cause names, when there is one.
    for h in by_lid {
        let mut same = out
            .iter_mut()
            .filter(|o| o.device.is_some() && same_cause_on_host(o, &h));
        match (same.next(), same.next()) {
            (Some(o), None) => absorb(o, h),
            _ => out.push(h),
        }
    }
    // A cause known only by host joins the port on that host that shares
    // its ranks, else the best-supported one, not merely the first.
    for h in loose {
        let best = out
            .iter_mut()
            .filter(|o| same_story(o, &h))
            .rev()
            .max_by(|a, b| {
                let shares = |o: &Hypothesis| !o.ranks.is_disjoint(&h.ranks);
                shares(a)
                    .cmp(&shares(b))
                    .then(a.confidence().total_cmp(&b.confidence()))
            });
        match best {
            Some(o) => absorb(o, h),
            None => match on_a_reporters_host(job, &mut out, &h) {
                Some(o) => absorb(o, h),
                None => out.push(h),
            },
        }
    }
    out
}

/// A cause its reporters on several hosts name without a place (both ends
/// of a queue pair fail alike; the hypothesis sits on the first one's
/// host) is the one port of that kind some source pins on one of their
/// hosts, where exactly one is.
fn on_a_reporters_host<'o>(
    job: &Job,
    out: &'o mut [Hypothesis],
    h: &Hypothesis,
) -> Option<&'o mut Hypothesis> {
    let hosts: BTreeSet<&str> = h
        .ranks
        .iter()
        .filter_map(|&r| job.short_host_of_rank(r))
        .collect();
    if hosts.len() < 2 {
        return None;
    }
    let mut pinned = out.iter_mut().filter(|o| {
        o.kind == h.kind
            && o.device.is_some()
            && o.host
                .as_deref()
                .is_some_and(|host| hosts.contains(short_host_of(host).as_str()))
    });
    match (pinned.next(), pinned.next()) {
        (Some(o), None) => Some(o),
        _ => None,
    }
}

/// A fault pinned to one port of one host stalls the ranks behind that
/// port; failures its peers on other hosts report (both ends of a queue
/// pair fail to connect to a GID that does not route) make them victims,
/// not culprits. Where some of a placed cause's ranks run on its host, the
/// others go. A queue pair that cannot reach its peer (a rail crossed, a
/// GID that does not route) is that too where its host is known, even
/// when no line names its NIC.
pub fn ranks_behind_the_port(job: &Job, hyps: &mut [Hypothesis]) {
    let port_level = |h: &Hypothesis| {
        h.device.is_some() || matches!(h.kind, CauseKind::CrossRail | CauseKind::GidIndex)
    };
    for h in hyps.iter_mut().filter(|h| port_level(h)) {
        let Some(host) = h.host.as_deref().map(short_host_of) else {
            continue;
        };
        let on_host: BTreeSet<u32> = h
            .ranks
            .iter()
            .copied()
            .filter(|&r| job.short_host_of_rank(r) == Some(host.as_str()))
            .collect();
        if !on_host.is_empty() {
            h.ranks = on_host;
        }
    }
}

/// Where one cause explains another's symptoms on the same host and NIC
/// (`[[explains]]` in knowledge.toml), the explained hypothesis's support
/// becomes corroboration of the explaining one, and the explained one goes.
pub fn explain(
    mut hyps: Vec<Hypothesis>,
    explains: &[(CauseKind, Vec<CauseKind>)],
) -> Vec<Hypothesis> {
    for (cause, explained) in explains {
        let mut i = 0;
        while i < hyps.len() {
            let owner = explained
                .contains(&hyps[i].kind)
                .then(|| explainer(&hyps, *cause, &hyps[i]))
                .flatten();
            if let Some(owner) = owner {
                let gone = hyps.remove(i);
                let owner = &mut hyps[if owner > i { owner - 1 } else { owner }];
                if lid_only(owner.device.as_deref()) && !lid_only(gone.device.as_deref()) {
                    // The LID is taken to be that port (see `explainer`):
                    // name it as the snapshots or NCCL would.
                    if let Some(device) = gone.device.clone() {
                        owner.device = Some(device);
                        owner.port = gone.port.or(owner.port);
                    }
                }
                let why = format!("also consistent with {}: ", gone.kind);
                for mut s in gone.support {
                    s.why = format!("{why}{}", s.why);
                    owner.support.push(s);
                }
                // Explained from the other end of its path, the symptom's
                // own host is the owner's peer.
                let other_end = gone.host.filter(|h| owner.host.as_ref() != Some(h));
                let peer = owner.peer_host.take().or(gone.peer_host);
                owner.peer_host = peer
                    .filter(|p| owner.host.as_ref() != Some(p))
                    .or(other_end);
            } else {
                i += 1;
            }
        }
    }
    hyps
}

/// The weight a cause's strongest line must have to explain others.
const MIN_EXPLAINER_WEIGHT: f64 = 0.1;

fn strongest_support(h: &Hypothesis) -> f64 {
    h.support.iter().map(|s| s.weight).fold(0.0, f64::max)
}

/// The hypothesis of kind `cause` about the place `h` names. A port known
/// only by its LID is, as in `merge`, the one port of that host the other
/// side names, when it names one: the explained symptom's LID is the one
/// port the cause names there, and a cause known only by a LID (perfquery
/// without an ibstat) is the one named port whose symptom it explains,
/// where the cause names no other port on that host.
fn explainer(hyps: &[Hypothesis], cause: CauseKind, h: &Hypothesis) -> Option<usize> {
    // A cause too faint to stand (a NIC reset days before the job) does
    // not take over the symptoms of the job's own time.
    let of_cause = || {
        hyps.iter()
            .enumerate()
            .filter(|(_, o)| o.kind == cause && strongest_support(o) >= MIN_EXPLAINER_WEIGHT)
    };
    if let Some((i, _)) = of_cause().find(|(_, o)| same_place(o, h)) {
        return Some(i);
    }
    // Loss between two hosts is as well explained by a faulty port at
    // the other end of the path (the host whose ranks reported it), where
    // the cause names one port there that the job's ranks send over (a
    // spare port left down is on no path).
    if let Some(peer) = h.peer_host.as_deref() {
        let mut there = of_cause().filter(|(_, o)| {
            o.device.is_some() && !o.ranks.is_empty() && o.host.as_deref() == Some(peer)
        });
        if let (Some((i, _)), None) = (there.next(), there.next()) {
            return Some(i);
        }
    }
    let h_by_lid = lid_only(Some(h.device.as_deref()?));
    let mut on_host = of_cause().filter(|(_, o)| o.device.is_some() && o.host == h.host);
    match (on_host.next(), on_host.next()) {
        (Some((i, o)), None) if h_by_lid || lid_only(o.device.as_deref()) => Some(i),
        _ => None,
    }
}

/// `Lid 17` (perfquery without an ibstat) or `0000:c0:00.0` (the kernel's
/// mlx5_core lines without one that names the RDMA device): a port known by
/// an address no source tied to its name.
fn lid_only(device: Option<&str>) -> bool {
    let Some(device) = device else {
        return false;
    };
    let lid = device
        .strip_prefix("Lid ")
        .is_some_and(|n| n.trim().parse::<u32>().is_ok());
    lid || (device.contains(':') && crate::grammar::normalize_bus_id(device).is_some())
}

fn same_place(a: &Hypothesis, b: &Hypothesis) -> bool {
    a.host.is_some()
        && a.host == b.host
        && (a.device.is_none() || b.device.is_none() || a.device == b.device)
}

/// One cause on one host, on the same device or where one side does not know
/// the device: the same story told by different sources.
fn same_story(a: &Hypothesis, b: &Hypothesis) -> bool {
    let fits = |x: &Option<String>, y: &Option<String>| x.is_none() || y.is_none() || x == y;
    same_cause_on_host(a, b) && fits(&a.device, &b.device) && fits(&a.gpu_bus_id, &b.gpu_bus_id)
}

fn same_cause_on_host(a: &Hypothesis, b: &Hypothesis) -> bool {
    a.kind == b.kind && a.host == b.host
}

/// Folds `h` into `o`: support adds up; the more precise place and the
/// narrower set of culprit ranks win.
fn absorb(o: &mut Hypothesis, h: Hypothesis) {
    let host_wide = |x: &Hypothesis| x.values.get("scope").is_some_and(|s| s == "host");
    if host_wide(&h) || host_wide(o) {
        // A fault of the whole host (no IB port of it Active) holds every
        // rank there, whichever port's finding it joins.
        o.ranks.extend(h.ranks.iter().copied());
    } else if o.ranks.is_empty() {
        o.ranks = h.ranks.clone();
        for (k, v) in &h.values {
            o.values.insert(k, v.clone());
        }
    } else if !h.ranks.is_empty() && h.ranks != o.ranks {
        let both: std::collections::BTreeSet<u32> =
            o.ranks.intersection(&h.ranks).copied().collect();
        if !both.is_empty() {
            o.ranks = both;
        } else if h.ranks.len() < o.ranks.len() {
            o.ranks = h.ranks.clone();
        }
    }
    for (k, v) in h.values {
        o.values.entry(k).or_insert(v);
    }
    if o.device.is_none() {
        o.device = h.device;
        o.port = h.port;
    }
    o.gpu_bus_id = o.gpu_bus_id.take().or(h.gpu_bus_id);
    o.peer_host = o.peer_host.take().or(h.peer_host);
    o.support.extend(h.support);
}

pub fn choose(ctx: &Ctx<'_>, mut hyps: Vec<Hypothesis>, hang: Option<&Hang>) -> Choice {
    hyps.sort_by(|a, b| {
        b.capped_confidence()
            .total_cmp(&a.capped_confidence())
            .then(a.kind.cmp(&b.kind))
            .then(a.host.cmp(&b.host))
    });
    let decisive = hyps
        .first()
        .is_some_and(|h| h.kind != CauseKind::Unknown && h.capped_confidence() >= MIN_CONFIDENCE);
    if decisive {
        let best = hyps.remove(0);
        // What a rule could not decide is no alternative to a decision.
        hyps.retain(|h| h.kind != CauseKind::Unknown);
        hyps.truncate(MAX_ALTERNATIVES);
        return Choice {
            best,
            alternatives: hyps,
        };
    }
    let mut unknown = Hypothesis::new(CauseKind::Unknown);
    let leads = weak_leads(&hyps);
    let mut detail = missing_inputs(ctx, hang).join(" ");
    if let Some(hint) = one_host_hint(ctx) {
        detail = format!("{hint} {detail}");
    }
    if !leads.is_empty() {
        detail = format!("Weak leads: {}. {detail}", leads.join(", "));
    }
    if let Some(u) = hyps.iter().find(|h| h.kind == CauseKind::Unknown) {
        if let Some(d) = u.values.get("detail") {
            detail = format!("{d} {detail}");
        }
        unknown.support = u.support.clone();
        unknown.host = u.host.clone();
        unknown.device = u.device.clone();
    }
    if let Some(hang) = hang {
        for &idx in hang.evidence.iter().take(3) {
            unknown.support(
                Source::Torch,
                0.2,
                Some(idx),
                "a rank's watchdog saw the collective hang",
            );
        }
    }
    unknown.value("detail", detail.trim().to_string());
    hyps.retain(|h| h.kind != CauseKind::Unknown);
    hyps.truncate(MAX_ALTERNATIVES);
    Choice {
        best: unknown,
        alternatives: hyps,
    }
}

/// The verdict's status from the chosen cause and what the logs show.
pub fn status(ctx: &Ctx<'_>, choice: &Choice, hang: Option<&Hang>) -> Status {
    let kind = choice.best.kind;
    let failed = failure_seen(ctx) || hang.is_some();
    if !failed && kind == CauseKind::Unknown {
        // Healthy needs a positive sign: a clean finish, not just silence.
        return if completion_seen(ctx) {
            Status::Healthy
        } else {
            Status::Unknown
        };
    }
    // Ranks that logged different collectives at one sequence number cannot
    // complete it, whether or not a timeout was kept.
    if !failed && kind == CauseKind::CollectiveMismatch {
        return Status::Hang;
    }
    // A launch whose ranks do not fit (two workers claiming one rank, ranks
    // claimed by none) cannot form its process group, whether or not the
    // logs kept the wait's end.
    let rank_layout = choice.best.values.get("variant").map(String::as_str) == Some("rank_layout");
    if !failed && rank_layout && !init_completed(ctx) {
        return Status::InitFailure;
    }
    // A known defect's signature in a log that stops before any failure: the
    // job was headed for it, but whether it failed the logs do not say.
    if !failed && kind == CauseKind::NcclBug {
        return Status::Unknown;
    }
    // Set-up named from NCCL's own lists (an interface no other host can
    // reach) in a log that stops before any failure or finish: it was
    // headed for one, but whether it failed the logs do not say.
    if !failed && is_set_up(kind) && !init_completed(ctx) {
        return Status::Unknown;
    }
    if !failed && stops::only_the_cancels_doing(ctx, &choice.best) {
        return Status::Healthy;
    }
    // A fault of a NIC the job's ranks do not use (a management port) in a
    // job that finished: it could not have slowed the job.
    if !failed && completion_seen(ctx) && on_a_nic_the_job_does_not_use(ctx, &choice.best) {
        return Status::Healthy;
    }
    // A suspect found only in counters, snapshots or the kernel log, while the
    // job itself shows no failure: the fabric is degraded, the job did not fail.
    if !failed {
        return Status::Degraded;
    }
    match kind {
        CauseKind::ProcessCrash => Status::Crash,
        // NCCL's own CUDA call failing while it sets up its transports
        // (enabling peer access, opening a peer's buffer) fails the init.
        CauseKind::GpuFault if nccl_set_up_cuda_failure(ctx, &choice.best.ranks) => {
            Status::InitFailure
        }
        CauseKind::GpuFault if died_on_a_cuda_error(ctx, &choice.best.ranks) => Status::Crash,
        // A fault on the wire or the NIC stops the collective. Where ranks
        // waited in it until their watchdog fired, the job hung (step 4's
        // link flap: errors on the peers, then timeouts on every rank).
        // Where no rank timed out, NCCL's error handling took the processes
        // down first: the job died of the fault, as on-call engineers file it.
        // A wire or NIC fault that struck while the first communicators
        // were still being set up, none ever having come up: the init
        // failed (a queue pair NCCL could not bring up on a wedged NIC).
        CauseKind::LinkFlap
        | CauseKind::PacketLoss
        | CauseKind::MtuMismatch
        | CauseKind::HcaFault
            if init_never_finished(ctx) =>
        {
            Status::InitFailure
        }
        CauseKind::LinkFlap
        | CauseKind::PacketLoss
        | CauseKind::MtuMismatch
        | CauseKind::HcaFault
            if died_of_an_error_first(ctx) =>
        {
            Status::Crash
        }
        // Workers that could not start CUDA on their host's driver, in a job
        // where no communicator ever completed its init and no work was
        // done: the set-up failed (the others waited in NCCL's init).
        CauseKind::ConfigMismatch
            if choice.best.values.get("variant").map(String::as_str) == Some("driver")
                && !init_completed(ctx)
                && !work_done(ctx.job) =>
        {
            Status::InitFailure
        }
        // A set-up fault whose culprits never finished their own init failed
        // the init, however far the other ranks got before they timed out.
        _ if is_set_up(kind)
            && (left_out_of_init(ctx.job, &choice.best.ranks) || init_never_finished(ctx)) =>
        {
            Status::InitFailure
        }
        _ if hang.is_some() => Status::Hang,
        // An nccl-tests run that stopped mid-way without an error hung.
        _ if super::rules::nccl_tests_run(ctx.job).is_some_and(|r| r.stopped(ctx.job)) => {
            Status::Hang
        }
        // Horovod's stall inspector prints while the ranks wait, the
        // Flight Recorder dumps PyTorch's analysis reads are taken when a
        // collective timed out, and stack dumps of ranks waiting in one (or
        // for their data loader) are taken while the job hangs: whatever the
        // cause, the job hung.
        _ if ctx
            .job
            .events
            .iter()
            .any(|e| e.kind == EventKind::HorovodStall || is_fr_block(e))
            || super::rules::dumps_show_a_wait(ctx)
            || super::rules::ras_shows_a_hang(ctx) =>
        {
            Status::Hang
        }
        _ if is_set_up(kind)
            && (!init_completed(ctx)
                || never_came_up(ctx.job, &choice.best.ranks)
                || connected_at_first_use(ctx.job)) =>
        {
            Status::InitFailure
        }
        // Nothing got past set-up, and NCCL was initialising (its init
        // lines) or its bootstrap / connection set-up failed.
        _ if !init_completed(ctx) && ctx.job.events.iter().any(fails_set_up) => Status::InitFailure,
        // A later communicator (a new group, a split) failing its own set-up
        // before any work was done, and the processes ending on it: the job
        // never got past creating them.
        _ if !work_done(ctx.job)
            && !ctx.job.deaths.is_empty()
            && ctx
                .job
                .events
                .iter()
                .any(|e| e.kind != EventKind::NcclCommInit && fails_set_up(e)) =>
        {
            Status::InitFailure
        }
        // A user stopped a job whose training loop had long gone quiet.
        _ if stops::stalled_before_the_stop(ctx) => Status::Hang,
        CauseKind::Unknown => Status::Unknown,
        // Set-up that let the communicators come up but not carry traffic
        // (an interface other hosts cannot reach, a blocked port): the
        // collectives wait on it, and no process died of its own accord.
        _ if is_set_up(kind) && !ctx.job.deaths.iter().any(|d| !d.consequence) => Status::Hang,
        CauseKind::LinkFlap
        | CauseKind::PacketLoss
        | CauseKind::Congestion
        | CauseKind::MtuMismatch
        | CauseKind::PortDegraded
        | CauseKind::HcaFault
        | CauseKind::RankStalled => Status::Hang,
        _ => Status::Crash,
    }
}

/// A line of NCCL setting up: its init, bootstrap, socket or verbs calls,
/// a proxy connecting, an error returned through bootstrap or init.
fn fails_set_up(e: &crate::model::Event) -> bool {
    match e.kind {
        EventKind::NcclCommInit
        | EventKind::BootstrapError
        | EventKind::SocketError
        | EventKind::VerbsCallFailed
        | EventKind::TopologyFileError
        | EventKind::DuplicateGpu
        | EventKind::InvalidRank => true,
        // Graph capture fails when the program captures, after set-up.
        EventKind::NcclInstall => {
            matches!(
                e.text_field("what"),
                Some(
                    "net_missing"
                        | "config_invalid"
                        | "efa_cuda_register"
                        | "verbs_provider_missing"
                )
            )
        }
        EventKind::StoreConnect => {
            matches!(
                e.text_field("what"),
                Some("timeout" | "clients_timeout" | "unresolved")
            )
        }
        // Its connections, or its own socket (a UDS bind).
        EventKind::ProxyError => matches!(e.text_field("op"), Some("Connect" | "Bind")),
        EventKind::NcclErrorChain => e
            .text_field("src")
            .is_some_and(|src| src.starts_with("bootstrap.cc") || src.starts_with("init.cc")),
        _ => false,
    }
}

/// No rank's watchdog timed out, or a process was taken down by the fault's
/// NCCL error before the first one did: the ranks that reported it died of
/// it (PyTorch tears a process down on an NCCL error), and the timeouts
/// that followed on ranks it never touched are the job's end, not its
/// failure.
fn died_of_an_error_first(ctx: &Ctx<'_>) -> bool {
    let job = ctx.job;
    let mut first_timeout: Option<chrono::NaiveDateTime> = None;
    let mut first_timeout_line: BTreeMap<crate::model::FileId, u64> = BTreeMap::new();
    for (idx, e) in job.events_where(|k| k == EventKind::WatchdogTimeout) {
        if let Some(t) = ctx.timeline.time_of(idx) {
            first_timeout = Some(first_timeout.map_or(t, |f| f.min(t)));
        }
        let line = first_timeout_line
            .entry(e.origin.file)
            .or_insert(e.origin.line);
        *line = (*line).min(e.origin.line);
    }
    if first_timeout_line.is_empty() {
        return true;
    }
    // Torch < 2.4 stamps none of its lines: there, the order within one
    // console says which came first; across files, the wire's own clock
    // does. Retries run out within seconds to a couple of minutes of the
    // fault (NCCL_IB_TIMEOUT × NCCL_IB_RETRY_CNT), the watchdog's 10 to 30
    // minutes after the collective started.
    job.events_where(|k| k == EventKind::WatchdogException)
        .filter(|(_, e)| e.text_field("nccl_error").is_some())
        .any(
            |(idx, e)| match (ctx.timeline.time_of(idx), first_timeout) {
                (Some(at), Some(timeout)) => at < timeout,
                _ => first_timeout_line
                    .get(&e.origin.file)
                    .is_none_or(|&line| e.origin.line < line),
            },
        )
}

/// A culprit rank's own process failed on a CUDA error (its watchdog or an
/// async exception says so) rather than waiting in a collective: the GPU
/// fault crashed it, and the others' timeouts came after.
fn died_on_a_cuda_error(ctx: &Ctx<'_>, culprits: &BTreeSet<u32>) -> bool {
    ctx.job.events.iter().any(|e| {
        e.who.rank.is_some_and(|r| culprits.contains(&r))
            && super::rules::cuda_error_text(e).is_some()
    })
}

/// A culprit's CUDA failure in NCCL's own words, printed after its init
/// started, where no communicator came up.
fn nccl_set_up_cuda_failure(ctx: &Ctx<'_>, culprits: &BTreeSet<u32>) -> bool {
    let job = ctx.job;
    let started = |r: u32| {
        job.events
            .iter()
            .any(|e| e.kind == EventKind::NcclCommInit && e.who.rank == Some(r))
    };
    !init_completed(ctx)
        && job.events.iter().any(|e| {
            e.kind == EventKind::CudaFailure
                && e.pattern.starts_with("nccl.")
                && e.who
                    .rank
                    .is_some_and(|r| culprits.contains(&r) && started(r))
        })
}

/// Causes that keep NCCL from setting up its connections.
fn is_set_up(kind: CauseKind) -> bool {
    matches!(
        kind,
        CauseKind::GidIndex
            | CauseKind::Memlock
            | CauseKind::SocketInterface
            | CauseKind::Firewall
            | CauseKind::CrossRail
    )
}

/// Any sign of failure: an error, a timeout, a death that is not the agent
/// cleaning up after a successful run.
fn failure_seen(ctx: &Ctx<'_>) -> bool {
    let job = ctx.job;
    // Deaths that are consequences (the agent stopping workers, their
    // SignalException) do not make a failure on their own: a cancelled job
    // shows exactly those.
    let cancelled = stops::cancelled_by_a_user(ctx);
    let came_up = job.a_comm_came_up();
    let ran_out_of_time = stops::trained_until_the_time_limit(ctx);
    let stopped = stops::stopped_by_the_scheduler(ctx, cancelled || ran_out_of_time);
    job.deaths.iter().any(|d| !d.consequence)
        || stops::stalled_before_the_stop(ctx)
        || super::rules::nccl_tests_run(job).is_some_and(|r| r.stopped(job))
        || super::rules::dumps_show_a_wait(ctx)
        || super::rules::ras_shows_a_hang(ctx)
        || super::rules::ras_shows_lost_processes(ctx)
        || job.events.iter().enumerate().any(|(i, e)| {
            ((is_failure(e, cancelled) || fails_in_context(e, came_up)) && !stopped(i, e))
                || (stops::cancelled_for_a_reason(e)
                    && !(stops::time_limit(ctx, e) && ran_out_of_time))
        })
}

/// An event that is a failure by its kind; srun's `Terminated` for the
/// tasks it stopped for a cancel is none.
pub(super) fn is_failure(e: &crate::model::Event, cancelled: bool) -> bool {
    if cancelled && e.kind == EventKind::TaskExited && e.text_field("what") == Some("Terminated") {
        return false;
    }
    // `housekeeping`: an async event grammars/nccl.toml marks as the
    // fabric's routine (a subnet manager's reregistration), not a fault;
    // `benign_alone`: one that is a failure only through what follows it
    // (a GID table change breaks only the verbs calls that then fail).
    if e.kind == EventKind::IbAsyncEvent
        && (e.text_field("housekeeping").is_some() || e.text_field("benign_alone").is_some())
    {
        return false;
    }
    matches!(
        e.kind,
        EventKind::IbCompletionError
                | EventKind::IbAsyncEvent
                | EventKind::VerbsCallFailed
                | EventKind::SocketError
                | EventKind::BootstrapError
                | EventKind::OfiError
                | EventKind::ShmFailure
                | EventKind::NvlsFailure
                | EventKind::ProxyError
                | EventKind::CudaFailure
                | EventKind::WatchdogTimeout
                | EventKind::WatchdogException
                | EventKind::PgStatus
                | EventKind::NcclErrorReport
                | EventKind::CommAborted
                | EventKind::HeartbeatStuck
                | EventKind::CollectiveMismatch
                | EventKind::WorkerFailed
                | EventKind::TaskExited
                | EventKind::UniqueIdWait
                | EventKind::StoreWait
                // Only a traceback (or a dump of the hung process) shows
                // a process inside main_process_first: its barrier raised.
                | EventKind::MainProcessWait
                | EventKind::BarrierReport
                | EventKind::HorovodStall
                | EventKind::TopologyFileError
                | EventKind::ProcessSignaled
                | EventKind::InvalidRank
                | EventKind::NoAlgorithm
    )
}

/// An event whose kind is a failure only with what it says, or only while
/// no communicator came up.
fn fails_in_context(e: &crate::model::Event, came_up: bool) -> bool {
    // Gloo's loopback fallback is only a warning, a store connect that will
    // be retried only a retry; their failures are failures.
    (e.kind == EventKind::GlooInterface
            && e.text_field("what") != Some("loopback_fallback"))
            || (e.kind == EventKind::StoreConnect
                && matches!(e.text_field("what"), Some("timeout" | "clients_timeout")))
            // A store name that did not resolve while no communicator
            // came up (torch 1.13+ retries it, so alone later it is not).
            || (e.kind == EventKind::StoreConnect
                && e.text_field("what") == Some("unresolved")
                && !came_up)
            // NCCL retrying a refused or timed-out connect while no
            // communicator came up: its set-up was failing.
            || (e.kind == EventKind::SocketRetry && !came_up)
            // nccl-tests relaying a failed check: the run failed, even
            // where the check's own line was cut from the log.
            || (e.kind == EventKind::NcclTestsTable && e.text_field("what") == Some("failure"))
            // NCCL 2.30 reports ranks sharing a GPU at INFO, allowed or not.
            || (e.kind == EventKind::DuplicateGpu && e.text_field("what") != Some("detected"))
            // Install lines a grammar marks `sign` (a plugin's load
            // error, no libibverbs: how a host without that network
            // looks) are signs, not failures.
            || (e.kind == EventKind::NcclInstall && e.text_field("sign").is_none())
            // A traceback ending in a CUDA error: that process died of it.
            || (e.kind == EventKind::PythonException
                && super::rules::cuda_error_text(e).is_some())
            || (e.kind == EventKind::AppDesync && e.text_field("what") == Some("all_gather_list"))
            || is_fr_block(e)
        || (e.kind == EventKind::NcclErrorChain && e.int("result").is_some_and(|r| r != 0))
}

/// The job finished: the launcher said so, communicators were destroyed
/// cleanly, or the user cancelled it without a fault.
/// Also a sign: the world communicator came up (or, without INFO output,
/// NCCL printed its banner) and nothing at all went wrong afterwards (before
/// torch 2.6 a clean exit prints no teardown line, and the agent logs
/// success only at INFO).
fn completion_seen(ctx: &Ctx<'_>) -> bool {
    let world = ctx.job.world_size;
    // With NCCL_DEBUG=INFO, init prints far more than its banner: a log
    // that stops after the banner and some set-up lines (a truncated paste,
    // a process killed mid-init) shows no finish.
    let info_logged = nccl_info_logged(ctx.job);
    ctx.job.events.iter().any(|e| {
        e.kind == EventKind::JobCompleted
            || e.kind == EventKind::JobCancelled
            || (e.kind == EventKind::ElasticAgent && e.text_field("signal").is_some())
            || (e.kind == EventKind::NcclCommTeardown && e.text_field("what") == Some("Destroy"))
            || (e.kind == EventKind::NcclCommInit
                && e.text_field("phase") == Some("COMPLETE")
                && e.int("nranks").map(|n| n as u32) == world)
            // Without NCCL_DEBUG=INFO the banner is all NCCL prints: it
            // came up, and (the caller checked) nothing failed after.
            || (e.kind == EventKind::NcclVersion && !info_logged)
    })
}

fn on_a_nic_the_job_does_not_use(ctx: &Ctx<'_>, h: &Hypothesis) -> bool {
    let Some(device) = h.device.as_deref() else {
        return false;
    };
    let usage = super::nic_use::NicUse::new(ctx.job);
    usage.of(h.host.as_deref(), device) == super::nic_use::Use::Unused
}

/// A block of PyTorch's Flight Recorder analysis: a collective it found
/// wrong (its field lines alone say nothing).
fn is_fr_block(e: &crate::model::Event) -> bool {
    e.kind == EventKind::FrAnalysis && matches!(e.text_field("what"), Some("errors" | "missing"))
}

/// NCCL ran with NCCL_DEBUG=INFO: its set-up lines are there.
fn nccl_info_logged(job: &Job) -> bool {
    job.events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::NcclCommInit
                | EventKind::NcclBootstrapIface
                | EventKind::NcclNetIb
                | EventKind::NcclNetSocket
                | EventKind::NcclNetSelected
                | EventKind::NcclChannel
                | EventKind::SocketRetry
                | EventKind::NcclErrorChain
        )
    })
}

/// Some rank finished initialising a communicator.
fn init_completed(ctx: &Ctx<'_>) -> bool {
    ctx.job.a_comm_came_up() || !ctx.job.pg_states.is_empty()
}

/// The culprits of a set-up fault never finished their own init (no `Init
/// COMPLETE` of theirs, where the others printed theirs): the job failed in
/// NCCL's init on their side, however far the other ranks got.
fn never_came_up(job: &Job, culprits: &BTreeSet<u32>) -> bool {
    if culprits.is_empty() || !job.pg_states.is_empty() {
        return false;
    }
    !job.events_where(|k| k == EventKind::NcclCommInit)
        .any(|(_, e)| {
            e.text_field("phase") == Some("COMPLETE")
                && e.who.rank.is_some_and(|r| culprits.contains(&r))
        })
}

/// NCCL's init began (its `Init START` lines) or its bootstrap failed, and
/// no communicator ever came up: whatever waited afterwards waited on the
/// init.
fn init_never_finished(ctx: &Ctx<'_>) -> bool {
    let job = ctx.job;
    let started = job
        .events_where(|k| k == EventKind::NcclCommInit)
        .next()
        .is_some();
    (started || job.events.iter().any(fails_set_up)) && !init_completed(ctx) && !work_done(job)
}

/// The culprits never printed their own `Init COMPLETE` where the others
/// did, and no work was ever done: the others' timeouts in the first
/// collective wait on an init that never finished.
fn left_out_of_init(job: &Job, culprits: &BTreeSet<u32>) -> bool {
    let completed: BTreeSet<u32> = job
        .events_where(|k| k == EventKind::NcclCommInit)
        .filter(|(_, e)| e.text_field("phase") == Some("COMPLETE"))
        .filter_map(|(_, e)| e.who.rank)
        .collect();
    !culprits.is_empty()
        && !completed.is_empty()
        && culprits.is_disjoint(&completed)
        && !work_done(job)
}

/// NCCL 2.22+ connects its peers at the first collective that needs them
/// (NCCL_RUNTIME_CONNECT), after every `Init COMPLETE`: a verbs call that
/// failed there, with no work ever completed (no collective a status line
/// counts as done, no training step) and the processes ending on it,
/// failed the set-up all the same.
fn connected_at_first_use(job: &Job) -> bool {
    let verbs_failed = job
        .events_where(|k| k == EventKind::VerbsCallFailed)
        .next()
        .is_some();
    verbs_failed && !work_done(job) && !job.deaths.is_empty()
}

/// Some work was done: a collective a status line counts as completed, a
/// training step reported.
fn work_done(job: &Job) -> bool {
    job.pg_states
        .values()
        .any(|st| st.last_completed.is_some_and(|c| c > 0))
        || job
            .events_where(|k| matches!(k, EventKind::TrainingStep | EventKind::ProgressBar))
            .next()
            .is_some()
}

/// The culprits: the chosen cause's ranks, else the ranks that fell behind.
/// A cause placed on a host without its ranks: the ones there that never
/// wrote a line are those the others waited for.
///
/// Without ranks of its own, a cause takes, in this order, the ranks shown
/// behind, those on its host that reported an NCCL error (whose own traffic
/// failed, while their siblings merely waited), the silent ones, and those
/// on its host that left no log.
pub fn stuck_ranks(
    job: &Job,
    choice: &Choice,
    hang: Option<&Hang>,
    erroring: &BTreeSet<u32>,
) -> Vec<u32> {
    if !choice.best.ranks.is_empty() {
        return choice.best.ranks.iter().copied().collect();
    }
    let host = choice.best.host.as_deref().map(short_host_of);
    let on_host = |r: &&u32| host.is_some() && job.short_host_of_rank(**r) == host.as_deref();
    let errored_here = || erroring.iter().filter(on_host).take(8).copied();
    // A host gone whole (its pod killed, the node lost or rebooted): where
    // the crash is known only by its host and none of the host's ranks
    // printed a failure of its own, they all died with it.
    let gone_whole = || -> Vec<u32> {
        let all: Vec<u32> = job.ranks.keys().filter(on_host).copied().collect();
        let by_host = choice.best.values.get("scope").map(String::as_str) == Some("host");
        let whole = choice.best.kind == CauseKind::ProcessCrash
            && by_host
            && all.len() <= 64
            && !all.iter().any(|r| erroring.contains(r));
        if whole { all } else { Vec::new() }
    };
    // Ranks of the host that died of their own accord (an agent's failure
    // summary names them) where none printed an error line of its own:
    // workers that failed before NCCL or torch could say anything.
    let died_here = || -> Vec<u32> {
        let died: BTreeSet<u32> = job
            .deaths
            .iter()
            .filter(|d| !d.consequence)
            .filter_map(|d| d.rank)
            .filter(|r| on_host(&r))
            .collect();
        if died.len() <= 64 {
            died.into_iter().collect()
        } else {
            Vec::new()
        }
    };
    let Some(hang) = hang else {
        let errored: Vec<u32> = errored_here().collect();
        return match (errored.is_empty(), gone_whole()) {
            (false, _) => errored,
            (true, whole) if !whole.is_empty() => whole,
            _ => died_here(),
        };
    };
    let mut ranks: BTreeSet<u32> = hang.laggards.keys().copied().collect();
    if ranks.is_empty() {
        ranks.extend(errored_here());
    }
    if ranks.is_empty() && hang.silent.len() <= 8 {
        ranks.extend(hang.silent.iter().copied());
    }
    if ranks.is_empty() {
        ranks.extend(hang.no_logs.iter().filter(on_host).take(8));
    }
    // Every rank that wrote reported the timeout; one left no line at all:
    // it is the one they waited for.
    if ranks.is_empty()
        && hang.silent.is_empty()
        && hang.timed_out.len() >= 2
        && let [rank] = hang.no_logs.iter().copied().collect::<Vec<_>>()[..]
    {
        ranks.insert(rank);
    }
    if ranks.is_empty() {
        ranks.extend(gone_whole());
    }
    ranks.into_iter().collect()
}

/// What input would have decided (or strengthened) the diagnosis.
/// A job whose ranks all ran on one host and failed without a deciding
/// line: inside one host NCCL moves data peer to peer, which PCIe ACS or a
/// translating IOMMU silently breaks (nccl#257, vllm#9920: a hang with no
/// error, fixed by turning them off). Where no kernel line decides it, say
/// what would.
fn one_host_hint(ctx: &Ctx<'_>) -> Option<String> {
    let job = ctx.job;
    // Hosts that wrote no NCCL init line still count: any line's host, an
    // nccl-tests run's rank lines, a channel through the network.
    let one_host = job.hosts_seen().len() <= 1 && super::rules::on_one_host(job);
    (one_host && !single_rank(job)).then(|| {
        "Every rank ran on one host: a hang there without an error line is often peer-to-peer traffic that PCIe ACS or the IOMMU blocks; run once with NCCL_P2P_DISABLE=1, and check `sudo lspci -vvv | grep ACSCtl` (SrcValid+ means ACS is on) and `dmesg -T | grep -i -e DMAR -e AMD-Vi` on the host.".to_string()
    })
}

/// A job of one rank: so its communicators say, or one rank is all the
/// logs know of and no channel line (which has two ends) names another.
fn single_rank(job: &crate::model::Job) -> bool {
    match job.world_size {
        Some(n) => n == 1,
        None => {
            job.all_ranks().len() == 1
                && job
                    .events_where(|k| k == EventKind::NcclChannel)
                    .next()
                    .is_none()
        }
    }
}

pub fn missing_inputs(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<String> {
    let job = ctx.job;
    let mut notes = Vec::new();
    let has = |k: EventKind| job.events_where(|e| e == k).next().is_some();
    if !has(EventKind::NcclCommInit) && nccl_info_logged(job) {
        notes.push("No `ncclCommInitRank … Init COMPLETE` line: the logs stop before NCCL finished initialising (or were cut); the full log of every rank would show where set-up stopped.".to_string());
    } else if !has(EventKind::NcclCommInit) {
        notes.push("No NCCL init lines: run with NCCL_DEBUG=INFO (NCCL_DEBUG_FILE=nccl.%h.%p) to map ranks to hosts, GPUs and NICs.".to_string());
    }
    if let Some(h) = hang {
        if !h.no_logs.is_empty() {
            let list: Vec<String> = h.no_logs.iter().take(16).map(u32::to_string).collect();
            let more = if h.no_logs.len() > 16 {
                format!(" and {} more", h.no_logs.len() - 16)
            } else {
                String::new()
            };
            notes.push(format!(
                "No logs from rank(s) {}{more}: the rank the others wait for may be among them.",
                list.join(", ")
            ));
        }
        if h.laggards.is_empty() && !has(EventKind::PgStatus) {
            notes.push("No last-enqueued / last-completed numbers (torch ≥ 2.3 prints them) or Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE=2000) to tell which rank fell behind.".to_string());
            // Taken while the job still hangs: where each rank waits.
            if job.stacks.is_empty() && !has(EventKind::RasReport) {
                notes.push("No stack dumps or RAS report: while a job hangs, `py-spy dump --pid <pid>` of every rank (or `ncclras` on any node, NCCL 2.24+) shows which ranks wait in the collective and which never reached it.".to_string());
            }
        }
    }
    let kernel = job
        .events
        .iter()
        .any(|e| e.kind.name().starts_with("kernel_"));
    if !kernel {
        notes.push("No kernel log: `dmesg -T` (or `journalctl -k`) from every host would show link, NIC and GPU faults.".to_string());
    }
    if job.counter_readings > 0 && job.counter_devices.is_empty() {
        notes.push("NIC counters from one dump only: no port was read both before and after the failure, and a single dump holds totals since the driver loaded (or the counters were last cleared), not what the job saw. Dump the same counters again on the same hosts to get deltas.".to_string());
    }
    if job.counter_readings == 0 {
        notes.push("No NIC counters: dumps of /sys/class/infiniband/*/ports/*/{counters,hw_counters} (or `perfquery -x`, `ethtool -S`) before and after the job would show errors and drops per port.".to_string());
    }
    notes
}

/// The three strongest causes short of a verdict, each once, with its best
/// confidence and where it points (`gid_index (0.10, 8 places)`).
fn weak_leads(sorted: &[Hypothesis]) -> Vec<String> {
    let mut leads: Vec<(CauseKind, f64, Option<String>, usize)> = Vec::new();
    for h in sorted.iter().filter(|h| h.kind != CauseKind::Unknown) {
        if let Some(lead) = leads.iter_mut().find(|l| l.0 == h.kind) {
            lead.3 += 1;
        } else if leads.len() < 3 {
            let place = h.host.as_ref().map(|host| match &h.device {
                Some(device) => format!("{host} {device}"),
                None => host.clone(),
            });
            leads.push((h.kind, h.capped_confidence(), place, 1));
        }
    }
    leads
        .into_iter()
        .map(|(kind, confidence, place, n)| match (place, n) {
            (_, 2..) => format!("{kind} ({confidence:.2}, {n} places)"),
            (Some(place), _) => format!("{kind} ({confidence:.2}, {place})"),
            (None, _) => format!("{kind} ({confidence:.2})"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loss_on(host: &str, device: &str) -> Hypothesis {
        let mut h = Hypothesis::new(CauseKind::PacketLoss);
        h.host = Some(host.into());
        h.device = Some(device.into());
        h.support(
            Source::Counters,
            0.4,
            None,
            format!("{device} lost packets"),
        );
        h
    }

    #[test]
    fn a_port_no_rank_sends_over_is_off_the_job() {
        let mut job = Job::with_ranks_on(&[(0, "n1"), (1, "n2")]);
        for info in job.ranks.values_mut() {
            info.nics_listed = vec![("mlx5_bond_0".into(), Some(1))];
        }
        let on = |device: &str| {
            let mut h = Hypothesis::new(CauseKind::LinkFlap);
            h.host = Some("n1".into());
            h.device = Some(device.into());
            Ctx::over(&job, |ctx| on_a_nic_the_job_does_not_use(ctx, &h))
        };
        assert!(on("mlx5_2"), "a port the ranks do not list");
        assert!(!on("mlx5_bond_0"));
    }

    #[test]
    fn an_async_gid_table_change_alone_is_no_failure_nccl_2_21() {
        // The GID change as grammars/nccl.toml marks it (its samples hold
        // the mark for both releases' wordings).
        let async_event = |fields: &[(&'static str, &str)]| {
            let mut f = crate::model::Fields::default();
            for (k, v) in fields {
                f.insert(k, crate::model::Value::Text((*v).into()));
            }
            crate::model::Event::with_fields(EventKind::IbAsyncEvent, f)
        };
        let gid = async_event(&[("event", "GID table change"), ("benign_alone", "yes")]);
        assert!(!is_failure(&gid, false));
        assert!(is_failure(
            &async_event(&[("event", "local catastrophic error")]),
            false
        ));
    }

    #[test]
    fn a_port_known_by_its_lid_joins_the_one_named_port_of_its_host() {
        let merged = merge(
            &Job::default(),
            vec![loss_on("n1", "Lid 17"), loss_on("n1", "mlx5_7")],
        );
        assert_eq!(merged.len(), 1, "{merged:?}");
        assert_eq!(merged[0].device.as_deref(), Some("mlx5_7"));
        assert_eq!(merged[0].support.len(), 2);
    }

    #[test]
    fn a_nic_known_by_its_pci_address_joins_the_one_named_port_of_its_host() {
        // The kernel's mlx5_core health lines name `0000:c0:00.0`; NCCL's
        // async fatal event names mlx5_5 on the same host.
        let merged = merge(
            &Job::default(),
            vec![
                cause_on(CauseKind::HcaFault, "n1", "0000:c0:00.0"),
                cause_on(CauseKind::HcaFault, "n1", "mlx5_5"),
            ],
        );
        assert_eq!(merged.len(), 1, "{merged:?}");
        assert_eq!(merged[0].device.as_deref(), Some("mlx5_5"));
        let two_named = merge(
            &Job::default(),
            vec![
                cause_on(CauseKind::HcaFault, "n1", "0000:c0:00.0"),
                cause_on(CauseKind::HcaFault, "n1", "mlx5_5"),
                cause_on(CauseKind::HcaFault, "n1", "mlx5_6"),
            ],
        );
        assert_eq!(two_named.len(), 3, "{two_named:?}");
    }

    fn cause_on(kind: CauseKind, host: &str, device: &str) -> Hypothesis {
        let mut h = loss_on(host, device);
        h.kind = kind;
        h
    }

    #[test]
    fn a_cause_explains_loss_on_a_port_known_by_its_lid_where_it_names_one_port() {
        let explains = [(CauseKind::LinkFlap, vec![CauseKind::PacketLoss])];
        let flap = || cause_on(CauseKind::LinkFlap, "n1", "mlx5_6");
        let one = explain(vec![loss_on("n1", "Lid 128"), flap()], &explains);
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!(one[0].kind, CauseKind::LinkFlap);
        assert_eq!(one[0].support.len(), 2);
        let second = cause_on(CauseKind::LinkFlap, "n1", "mlx5_7");
        let two = explain(vec![loss_on("n1", "Lid 128"), flap(), second], &explains);
        assert_eq!(two.len(), 3, "{two:?}");
        let named = explain(vec![loss_on("n1", "mlx5_2"), flap()], &explains);
        assert_eq!(named.len(), 2, "{named:?}");
    }

    #[test]
    fn a_port_fault_at_the_other_end_of_the_path_explains_the_loss() {
        // The victims on n1 named n2 as the peer that stopped answering;
        // n1's own port runs another MTU: the loss is that port's.
        let explains = [(CauseKind::MtuMismatch, vec![CauseKind::PacketLoss])];
        let mut loss = loss_on("n2", "mlx5_0");
        loss.peer_host = Some("n1".into());
        let mut mtu = cause_on(CauseKind::MtuMismatch, "n1", "mlx5_0");
        // A spare port nobody sends over is on no path: it explains nothing.
        assert_eq!(explain(vec![loss.clone(), mtu.clone()], &explains).len(), 2);
        mtu.ranks = BTreeSet::from([4]);
        let one = explain(vec![loss.clone(), mtu.clone()], &explains);
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!(one[0].kind, CauseKind::MtuMismatch);
        assert_eq!(one[0].host.as_deref(), Some("n1"));
        assert_eq!(one[0].peer_host.as_deref(), Some("n2"));
        // A fault on a third host explains nothing.
        let elsewhere = cause_on(CauseKind::MtuMismatch, "n3", "mlx5_0");
        assert_eq!(explain(vec![loss, elsewhere], &explains).len(), 2);
    }

    #[test]
    fn a_cause_known_by_its_lid_explains_the_loss_on_the_one_named_port_of_its_host() {
        // perfquery without ibstat names the erroring port `Lid 11`; NCCL
        // names the port that lost packets: the LID is taken to be it.
        let explains = [(CauseKind::LinkFlap, vec![CauseKind::PacketLoss])];
        let flap = || cause_on(CauseKind::LinkFlap, "n1", "Lid 11");
        let one = explain(vec![loss_on("n1", "mlx5_1"), flap()], &explains);
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!(one[0].kind, CauseKind::LinkFlap);
        assert_eq!(one[0].device.as_deref(), Some("mlx5_1"));
        assert_eq!(one[0].support.len(), 2);
        // Two erroring ports on the host, or the LID on another host: apart.
        let second = cause_on(CauseKind::LinkFlap, "n1", "Lid 12");
        let two = explain(vec![loss_on("n1", "mlx5_1"), flap(), second], &explains);
        assert_eq!(two.len(), 3, "{two:?}");
        let elsewhere = explain(vec![loss_on("n2", "mlx5_1"), flap()], &explains);
        assert_eq!(elsewhere.len(), 2, "{elsewhere:?}");
    }

    #[test]
    fn a_lid_stays_apart_where_several_ports_or_another_host_could_be_it() {
        let two = merge(
            &Job::default(),
            vec![
                loss_on("n1", "Lid 17"),
                loss_on("n1", "mlx5_6"),
                loss_on("n1", "mlx5_7"),
            ],
        );
        assert_eq!(two.len(), 3, "{two:?}");
        let elsewhere = merge(
            &Job::default(),
            vec![loss_on("n1", "Lid 17"), loss_on("n2", "mlx5_7")],
        );
        assert_eq!(elsewhere.len(), 2, "{elsewhere:?}");
    }
}
