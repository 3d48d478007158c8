//! Process deaths: the rank that died first is the culprit; the ranks that
//! died because of it (watchdog abort, DistBackendError, SIGTERM from the
//! agent) are victims.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDateTime;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host;
use crate::model::{CauseKind, Death, DeathKind, EventIdx, EventKind, Job};

use super::Ctx;

/// The culprit deaths by rank, and when each rank first died.
pub struct CrashSummary<'a> {
    pub by_rank: BTreeMap<u32, Vec<&'a Death>>,
    pub first_time: BTreeMap<u32, Option<NaiveDateTime>>,
}

/// Deaths that are not consequences of the collective failure, by rank.
pub fn culprit_deaths<'a>(ctx: &Ctx<'a>) -> CrashSummary<'a> {
    let mut by_rank: BTreeMap<u32, Vec<&'a Death>> = BTreeMap::new();
    let own_nccl_trouble = ranks_with_watchdog_trouble(ctx.job);
    let waited_for_main = ctx
        .job
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::MainProcessWait | EventKind::UniqueIdWait));
    let runs_nccl_tests = super::peer_path::nccl_tests_run(ctx.job).is_some();
    for d in &ctx.job.deaths {
        let Some(rank) = d.rank else { continue };
        // An exit status alone or an abort, on a rank whose watchdog already
        // fired, is the watchdog's doing: it takes the process down. So is
        // one beside ranks that gave up waiting for the main process.
        let watchdog_abort =
            d.kind != DeathKind::Exception && matches!(d.signal.as_deref(), None | Some("SIGABRT"));
        let gave_up_waiting = own_nccl_trouble.contains(&rank) || (waited_for_main && rank != 0);
        if d.consequence
            || super::host_setup::is_set_up_death(ctx, d)
            || (watchdog_abort && gave_up_waiting)
            || (runs_nccl_tests && reported_test_failure(ctx, d))
        {
            continue;
        }
        by_rank.entry(rank).or_default().push(d);
    }
    let first_time = by_rank
        .iter()
        .map(|(r, ds)| (*r, ds.iter().filter_map(|d| death_time(ctx, d)).min()))
        .collect();
    CrashSummary {
        by_rank,
        first_time,
    }
}

/// An nccl-tests process that exited with the status it returns for a
/// failed CUDA or NCCL call: the failure's report, whatever that failure
/// was, not a crash of its own.
fn reported_test_failure(ctx: &Ctx<'_>, d: &Death) -> bool {
    d.kind == DeathKind::ExitCode
        && d.signal.is_none()
        && d.exitcode.is_some_and(|c| ctx.kb.is_test_failure_exit(c))
}

/// When a death happened on the job's clock: its own stamp (moved by its
/// host's skew), else the last stamped line before its report.
fn death_time(ctx: &Ctx<'_>, d: &Death) -> Option<chrono::NaiveDateTime> {
    ctx.timeline
        .resolve_on(d.host.as_deref(), &d.time)
        .or_else(|| {
            d.evidence
                .first()
                .and_then(|&i| ctx.timeline.at_or_after(i))
        })
}

/// Ranks whose own NCCL or watchdog trouble explains an exit or an abort:
/// PyTorch raises (and exits) after a timeout or a NCCL error.
fn ranks_with_watchdog_trouble(job: &Job) -> BTreeSet<u32> {
    job.events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::WatchdogTimeout
                    | EventKind::WatchdogException
                    | EventKind::NcclErrorReport
                    | EventKind::CommAborted
                    | EventKind::VerbsCallFailed
                    | EventKind::BootstrapError
                    | EventKind::SocketError
                    | EventKind::IbCompletionError
                    | EventKind::IbAsyncEvent
                    | EventKind::ProxyError
                    | EventKind::UniqueIdWait
            )
        })
        .filter_map(|e| e.who.rank)
        .collect()
}

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let crashes = culprit_deaths(ctx);
    let reports = super::network::completion_reports(ctx);
    let earliest = crashes.first_time.values().flatten().min().copied();
    let mut out = Vec::new();
    for (rank, deaths) in &crashes.by_rank {
        let mut h = Hypothesis::new(CauseKind::ProcessCrash);
        h.ranks.insert(*rank);
        let info = ctx.job.ranks.get(rank);
        h.host = deaths
            .iter()
            .find_map(|d| d.host.clone())
            .or_else(|| info.and_then(|i| i.host.clone()));
        h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
        h.value("rank", rank.to_string());
        h.value(
            "who",
            format!(
                "Rank {rank}{}",
                h.host
                    .as_ref()
                    .map_or(String::new(), |host| format!(" on {host}"))
            ),
        );
        h.value("reason", clip(&best_reason(deaths), 200));
        add_signal_hint(ctx, &mut h, deaths.iter().copied());
        for d in deaths {
            let (source, weight) = death_weight(ctx, d);
            for &ev in d.evidence.iter().take(1) {
                h.support(source, weight, Some(ev), death_why(d));
            }
            for &ev in d.evidence.iter().skip(1) {
                h.support(
                    source,
                    weight * 0.5,
                    Some(ev),
                    "part of the same failure report",
                );
            }
        }
        // A later death is less likely the first cause.
        let first = crashes.first_time.get(rank).copied().flatten();
        if let (Some(t), Some(e)) = (first, earliest)
            && t > e
        {
            h.support.iter_mut().for_each(|s| s.weight *= 0.6);
        }
        add_peer_reports(ctx, &crashes, &reports, &mut h);
        out.push(h);
    }
    if out.is_empty() {
        out.extend(unranked_crash(ctx).or_else(|| unranked_program_fault(ctx)));
    }
    add_program_faults(ctx, &mut out);
    out.extend(super::shm::shm_exhausted(ctx));
    out.extend(super::gpu_memory::out_of_gpu_memory(ctx));
    out
}

/// A process that died of a fatal signal of its own (a segfault, a bus
/// error, SIGKILL) where no line ties its pid to a rank: a crash on its host
/// still, weaker than one whose rank is known.
fn unranked_crash(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let d = ctx.job.deaths.iter().find(|d| {
        d.rank.is_none()
            && !d.consequence
            // Without a host it could be any of several; alone, the one.
            && (d.host.is_some() || ctx.job.hosts.len() <= 1)
            && (d.kind == DeathKind::NodeLost
                || matches!(
                    d.signal.as_deref(),
                    Some("SIGSEGV" | "SIGBUS" | "SIGKILL" | "SIGILL" | "SIGFPE")
                ))
    })?;
    let mut h = Hypothesis::new(CauseKind::ProcessCrash);
    h.host = d.host.clone();
    let pid = d.pid.map_or(String::new(), |p| format!(" (pid {p})"));
    let host = d
        .host
        .as_ref()
        .map_or(String::new(), |h| format!(" on {h}"));
    // A node the scheduler lost took every process on it, ranks the logs
    // placed there included: no pid to name.
    let (who, weight) = match (d.kind, &d.host) {
        (DeathKind::NodeLost, Some(node)) => {
            h.ranks = ctx
                .job
                .ranks
                .values()
                .filter(|r| r.host.as_deref().map(short_host) == Some(node.as_str()))
                .map(|r| r.rank)
                .collect();
            (format!("The node {node}"), 0.6)
        }
        _ => (format!("A process{host}{pid}"), 0.45),
    };
    h.value("who", who);
    h.value("reason", clip(&d.reason, 200));
    add_signal_hint(ctx, &mut h, [d]);
    for &ev in d.evidence.iter().take(1) {
        h.support(Source::Launcher, weight, Some(ev), death_why(d));
    }
    Some(h)
}

/// An exception no line ties to a rank, of the program's own CUDA work (an
/// illegal memory access, a device-side assert; torch 2.8+ raises it as
/// `torch.AcceleratorError`): the process it killed crashed, on its host
/// where the line names one. Only where the job shows one host or none (on
/// several it could be any process); weaker than a death tied to a rank.
fn unranked_program_fault(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    if ctx.job.spans_hosts() {
        return None;
    }
    let (idx, ev, error) = ctx
        .job
        .events_where(|k| k == EventKind::PythonException)
        .filter(|(_, ev)| ev.who.rank.is_none())
        .find_map(|(idx, ev)| {
            let error = super::cuda_error_text(ev)?;
            (ctx.kb.gpu_error_weight(error) == 0.0).then_some((idx, ev, error))
        })?;
    let mut h = Hypothesis::new(CauseKind::ProcessCrash);
    h.host = ctx.job.host_of_event(ev).map(str::to_string);
    let host = h
        .host
        .as_ref()
        .map_or(String::new(), |h| format!(" on {h}"));
    h.value("who", format!("A process{host}"));
    let exc = ev.text_field("exc_type").unwrap_or("an exception");
    h.value("reason", clip(&format!("{exc}: CUDA error: {error}"), 200));
    h.support(
        Source::Launcher,
        0.4,
        Some(idx),
        format!(
            "a process died of its own CUDA work's error (`{error}`), which no line ties to a rank"
        ),
    );
    Some(h)
}

/// A rank whose own watchdog caught a CUDA error that is not the hardware's
/// (an illegal memory access, a device-side assert): its kernels failed and
/// PyTorch takes the process down, while the others wait for it in the
/// collective. Often the only line such a rank leaves.
fn add_program_faults(ctx: &Ctx<'_>, out: &mut Vec<Hypothesis>) {
    let faults: Vec<(EventIdx, u32, &str)> = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, ev)| ev.kind == EventKind::WatchdogException)
        .filter_map(|(idx, ev)| Some((idx, ev.who.rank?, ev.text_field("cuda_error")?)))
        .filter(|(_, _, error)| ctx.kb.gpu_error_weight(error) == 0.0)
        .collect();
    // The same fault on many ranks is the job's (a kernel or library defect
    // every rank runs), not one rank that died first.
    let ranks: BTreeSet<u32> = faults.iter().map(|f| f.1).collect();
    if ranks.len() > 1 && ranks.len() * 2 >= ctx.job.ranks.len() {
        return;
    }
    for (idx, rank, error) in faults {
        let ev = &ctx.job.events[idx];
        let why = format!("the rank's own CUDA work failed (`{error}`): the process goes down");
        if let Some(h) = out.iter_mut().find(|h| h.ranks.contains(&rank)) {
            if h.support.len() < 8 {
                h.support(Source::Torch, 0.4, Some(idx), why);
            }
            continue;
        }
        let mut h = Hypothesis::new(CauseKind::ProcessCrash);
        h.ranks.insert(rank);
        let info = ctx.job.ranks.get(&rank);
        h.host = info
            .and_then(|i| i.host.clone())
            .or_else(|| ev.who.host.as_deref().map(str::to_string));
        h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
        h.value("rank", rank.to_string());
        let on = h
            .host
            .as_ref()
            .map_or(String::new(), |host| format!(" on {host}"));
        h.value("who", format!("Rank {rank}{on}"));
        h.value("reason", clip(&format!("CUDA error: {error}"), 200));
        h.support(Source::Torch, 0.7, Some(idx), why);
        out.push(h);
    }
}

/// What the first signal the deaths name most often means, for the remedy.
fn add_signal_hint<'d>(
    ctx: &Ctx<'_>,
    h: &mut Hypothesis,
    deaths: impl IntoIterator<Item = &'d Death>,
) {
    if let Some(hint) = deaths
        .into_iter()
        .filter_map(|d| d.signal.as_deref())
        .find_map(|s| ctx.kb.signal_hint(s))
    {
        h.value("hint", hint);
    }
}

/// A GPU error weighing this much or more decides the cause by itself
/// (`[[gpu_error]]` weights; `unknown error` and launch failures weigh less).
const DECISIVE_GPU_ERROR: f64 = 0.5;

fn death_weight(ctx: &Ctx<'_>, d: &Death) -> (Source, f64) {
    let ev = &ctx.job.events[d.evidence[0]];
    let source = match ev.kind {
        EventKind::PythonException => Source::Torch,
        k if crate::model::kernel::is_kernel(k) => Source::Kernel,
        _ => Source::Launcher,
    };
    let weight = match (d.kind, d.signal.as_deref()) {
        // An exception that quotes a CUDA error the knowledge base calls the
        // GPU's (uncorrectable ECC, no peer access) is the GPU fault's
        // consequence; the GPU rule tells that fault, and it should lead.
        (DeathKind::Exception, _) if ctx.kb.gpu_error_weight(&d.reason) >= DECISIVE_GPU_ERROR => {
            0.45
        }
        (DeathKind::Exception, _) => 0.8,
        (_, Some("SIGKILL" | "SIGSEGV" | "SIGBUS" | "SIGILL" | "SIGFPE")) => 0.75,
        (DeathKind::ExitCode, _) if d.exitcode.is_some_and(|c| c != 0) => 0.6,
        (DeathKind::NodeLost, _) => 0.6,
        _ => 0.45,
    };
    (source, weight)
}

fn death_why(d: &Death) -> String {
    match (d.kind, &d.signal, d.exitcode) {
        (DeathKind::Exception, _, _) => {
            "the rank raised its own exception (not a consequence of NCCL)".into()
        }
        (DeathKind::NodeLost, _, _) => "the node the process ran on failed under it".into(),
        (_, Some(sig), _) => format!("the rank's process was killed by {sig}"),
        (_, None, Some(c)) => format!("the rank's process exited with code {c}"),
        _ => "the rank's process died".into(),
    }
}

fn best_reason(deaths: &[&Death]) -> String {
    deaths
        .iter()
        .find(|d| d.kind == DeathKind::Exception)
        .or_else(|| deaths.iter().find(|d| d.signal.is_some()))
        .or(deaths.first())
        .map(|d| d.reason.clone())
        .unwrap_or_default()
}

/// A rank on `host` died of its own accord before the first of `reports`
/// (completion errors) naming that host: on one clock where both are
/// stamped, else by their order in one console.
pub(super) fn died_before_reports(
    ctx: &Ctx<'_>,
    crashes: &CrashSummary<'_>,
    host: &str,
    reports: &[super::network::Report],
) -> bool {
    let Some(first) = reports
        .iter()
        .find(|r| r.peer_host.as_deref() == Some(host))
        .map(|r| r.idx)
    else {
        return false;
    };
    crashes.by_rank.iter().any(|(rank, deaths)| {
        let on_host = deaths
            .iter()
            .find_map(|d| d.host.as_deref())
            .or_else(|| ctx.job.ranks.get(rank)?.host.as_deref())
            .is_some_and(|h| short_host(h) == host);
        on_host && deaths.iter().any(|d| earlier_than(ctx, d, first))
    })
}

fn earlier_than(ctx: &Ctx<'_>, d: &Death, report: EventIdx) -> bool {
    let Some(&said) = d.evidence.first() else {
        return false;
    };
    match (death_time(ctx, d), ctx.timeline.time_of(report)) {
        (Some(died), Some(failed)) => died < failed,
        _ => {
            let (a, b) = (&ctx.job.events[said].origin, &ctx.job.events[report].origin);
            a.file == b.file && a.line < b.line
        }
    }
}

/// Victims repeat each other; a few of their lines make the point.
const MAX_PEER_REPORTS: usize = 5;

/// Other ranks saying their connection to this host was closed or reset is
/// what a crash looks like from the outside.
fn add_peer_reports(
    ctx: &Ctx<'_>,
    crashes: &CrashSummary<'_>,
    reports: &[super::network::Report],
    h: &mut Hypothesis,
) {
    let Some(host) = h.host.clone() else { return };
    let mut added = 0;
    for (idx, ev) in ctx.job.events.iter().enumerate() {
        if added == MAX_PEER_REPORTS {
            break;
        }
        if ev.kind != EventKind::SocketError {
            continue;
        }
        let Some(peer) = ev.text_field("peer") else {
            continue;
        };
        let names_host = ctx.host_of_addr(peer) == Some(host.as_str());
        if names_host && ev.who.host.as_deref() != Some(host.as_str()) {
            h.support(
                Source::Nccl,
                0.3,
                Some(idx),
                format!("a peer lost its connection to {host}"),
            );
            added += 1;
        }
    }
    if added < MAX_PEER_REPORTS && died_before_reports(ctx, crashes, &host, reports) {
        let naming = reports
            .iter()
            .filter(|r| r.peer_host.as_deref() == Some(host.as_str()));
        for r in naming.take(MAX_PEER_REPORTS - added) {
            h.support(
                Source::Nccl,
                0.3,
                Some(r.idx),
                format!(
                    "a peer's transfers to {host} ran out of retries after the process there died"
                ),
            );
        }
    }
}

pub(super) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
