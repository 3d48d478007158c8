//! The GPUs of one host that never finished a transfer between them. With
//! every rank on one host no network is involved: NCCL moves the data peer
//! to peer (or through shared memory), and PCIe ACS redirecting that
//! traffic, a translating IOMMU, or a driver without peer-to-peer for these
//! GPUs make the first transfer hang without an error line (nccl#257,
//! vllm#9920, nccl-tests#117: fixed by turning ACS or the IOMMU off, or by
//! NCCL_P2P_DISABLE=1). Three signs, each from its own source: every rank
//! waiting in its group's first collective with none behind; an nccl-tests
//! run that stopped before its table's footer; an `lspci -vvv` snapshot
//! with ACS on (`gpu_fault`, `p2p_hang` variant).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind, Job, Level};

use super::Ctx;

/// How far an nccl-tests run got, from its own output.
#[derive(Debug, Default)]
pub struct TestRun {
    /// Hosts its rank lines name.
    pub hosts: BTreeSet<String>,
    /// The ranks its rank lines place on each host.
    pub placed: BTreeMap<String, BTreeSet<u32>>,
    pub ranks: usize,
    pub header: Option<EventIdx>,
    /// The last size (bytes) the table shows, with its line.
    pub last_row: Option<(i64, EventIdx)>,
    pub finished: bool,
    pub first_line: Option<EventIdx>,
}

impl TestRun {
    /// Started, never reached its footer, and printed no failure: it hung
    /// at the next size (or its log was cut there).
    pub fn stopped(&self, job: &Job) -> bool {
        self.first_line.is_some() && !self.finished && !failure_printed(job)
    }
}

/// The nccl-tests run of the job's logs, where there is one.
pub fn nccl_tests_run(job: &Job) -> Option<TestRun> {
    let mut run = TestRun::default();
    for (idx, ev) in
        job.events_where(|k| matches!(k, EventKind::NcclTestsRank | EventKind::NcclTestsTable))
    {
        run.first_line.get_or_insert(idx);
        if ev.kind == EventKind::NcclTestsRank {
            run.ranks += 1;
            if let Some(node) = ev.text_field("node") {
                run.hosts.insert(node.to_string());
                let ranks = run.placed.entry(node.to_string()).or_default();
                ranks.extend(ev.int("rank").map(|r| r as u32));
            }
            continue;
        }
        match ev.text_field("what") {
            Some("header") => run.header = Some(idx),
            Some("row") => run.last_row = ev.int("size").map(|s| (s, idx)),
            Some("done") => run.finished = true,
            _ => {}
        }
    }
    run.first_line.is_some().then_some(run)
}

/// An error any layer printed: the run failed visibly, and the rules that
/// read that error tell why.
fn failure_printed(job: &Job) -> bool {
    job.events.iter().any(|e| {
        e.level >= Level::Error
            || matches!(
                e.kind,
                EventKind::CudaFailure
                    | EventKind::NcclWarn
                    | EventKind::NcclErrorReport
                    | EventKind::NcclErrorChain
            )
    })
}

pub fn stuck_between_gpus(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    if p2p_disabled(ctx.job) {
        return None;
    }
    let run = nccl_tests_run(ctx.job);
    let host = one_host(ctx.job, run.as_ref());
    let driver_node = host.is_none() && on_ray_driver_node(ctx.job);
    if host.is_none() && !driver_node {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::GpuFault);
    h.value("variant", "p2p_hang");
    h.host = host;
    if driver_node {
        h.value("host", "the Ray driver's node");
    }
    let mut details = Vec::new();
    if let Some(detail) = first_collective_never_finished(ctx, hang, &mut h) {
        details.push(detail);
    }
    // One GPU has no peer to hang with (its bootstrap still uses sockets).
    if let Some(run) = run.as_ref().filter(|r| r.stopped(ctx.job) && r.ranks != 1) {
        details.push(test_stopped(run, &mut h));
    }
    let acs = acs_on(ctx.job);
    let translating = iommu_translating(ctx.job);
    if details.is_empty() && acs.is_empty() {
        return None;
    }
    // A library's warning of a translating IOMMU: printed on healthy hosts
    // too, so it backs a hang between the GPUs and never makes one.
    if let (false, Some(first)) = (details.is_empty(), translating) {
        details.push("the IOMMU is not in pass-through mode (no `iommu=pt`)".to_string());
        h.support(
            Source::Nccl,
            0.3,
            Some(first),
            "the kernel runs without `iommu=pt`: the IOMMU translates the peer-to-peer DMA between the GPUs, which hangs multi-GPU work",
        );
    }
    if let Some(&first) = acs.first() {
        details.push(format!(
            "`lspci` shows ACS on at {} PCIe bridge(s)",
            acs.len()
        ));
        h.support(
            Source::Snapshot,
            0.3,
            Some(first),
            "ACS is on at a PCIe bridge: peer-to-peer traffic is sent up to the root complex instead of across the switch",
        );
    }
    h.value("detail", details.join("; "));
    Some(h)
}

/// Every rank that reported waits in the group's first collective, the same
/// one, and none is behind or silent: they all entered it and it never
/// finished. It ties below a rank the logs show stalled.
fn first_collective_never_finished(
    ctx: &Ctx<'_>,
    hang: Option<&Hang>,
    h: &mut Hypothesis,
) -> Option<String> {
    let hang = hang?;
    let first = hang.seq.is_some_and(|s| s <= 1)
        || hang
            .timed_out
            .iter()
            .all(|&r| never_completed(ctx.job, &hang.pg, r));
    // A line that kept no size (a cut paste, the watchdog's terminate
    // line) disagrees with none.
    let ops: BTreeSet<&str> = hang
        .sizes
        .values()
        .filter_map(|(op, _)| op.as_deref())
        .collect();
    let sizes: BTreeSet<i64> = hang.sizes.values().filter_map(|(_, n)| *n).collect();
    let agree = ops.len() <= 1 && sizes.len() <= 1;
    // A rank with no line at all may be cut from a paste; many are ranks
    // the logs do not cover, one of which may be the one not there.
    let all_in = hang.laggards.is_empty()
        && hang.silent.is_empty()
        && hang.cut_off.is_empty()
        && hang.no_logs.len() * 3 <= hang.timed_out.len();
    if !(first && agree && all_in && hang.timed_out.len() >= 2) {
        return None;
    }
    h.ranks.extend(hang.timed_out.iter().copied());
    for &idx in hang.evidence.iter().take(2) {
        h.support(
            Source::Pattern,
            0.4,
            Some(idx),
            "every rank on this host entered the first collective and none finished it: the transfer between their GPUs never completed",
        );
    }
    let op = hang.op.as_deref().unwrap_or("collective");
    Some(format!(
        "{} ranks waited in their first {op} and none finished it",
        hang.timed_out.len()
    ))
}

fn never_completed(job: &Job, pg: &str, rank: u32) -> bool {
    job.pg_states
        .get(&(pg.to_string(), rank))
        .is_some_and(|st| st.last_completed.is_some_and(|c| c < 1))
}

fn test_stopped(run: &TestRun, h: &mut Hypothesis) -> String {
    let (detail, idx, weight) = match (run.last_row, run.header) {
        (Some((size, idx)), _) => (
            format!("the nccl-tests table stops after {size} bytes, with no failure printed"),
            idx,
            0.4,
        ),
        (None, Some(idx)) => (
            "the nccl-tests table stops before its first size, with no failure printed".to_string(),
            idx,
            0.4,
        ),
        (None, None) => (
            "the nccl-tests run stops before its table, with no failure printed".to_string(),
            run.first_line.unwrap_or(0),
            0.35,
        ),
    };
    h.support(
        Source::Pattern,
        weight,
        Some(idx),
        "an nccl-tests run on one host stopped here without an error: the transfer between its GPUs hung",
    );
    detail
}

/// The one host every rank ran on, from the logs' hosts or the test's rank
/// lines; none where several hosts (or no host at all) appear, or where a
/// channel goes through the network (the logs of one host of several).
fn one_host(job: &Job, run: Option<&TestRun>) -> Option<String> {
    let mut hosts: BTreeSet<&str> = job.hosts.keys().map(String::as_str).collect();
    if let Some(run) = run {
        hosts.extend(run.hosts.iter().map(String::as_str));
    }
    // Stops at a second host: a large job's events are many.
    for host in job.events.iter().filter_map(|e| e.who.host.as_deref()) {
        if hosts.len() > 1 {
            return None;
        }
        hosts.insert(host);
    }
    let [host] = hosts.into_iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    (!over_network(job)).then(|| host.to_string())
}

/// Every rank of the job ran on one host, where the logs show one (with
/// an nccl-tests run's rank lines, and no channel over the network), or
/// all its lines are Ray actors' on the driver's node.
pub fn on_one_host(job: &Job) -> bool {
    one_host(job, nccl_tests_run(job).as_ref()).is_some() || on_ray_driver_node(job)
}

/// No line names a host, and every line that names a rank is a Ray
/// actor's that Ray printed without its node: Ray adds `ip=` to an actor's
/// prefix only where the actor runs on another node than the driver
/// (`print_worker_logs`, Ray 1.x–2.x), so all of them ran beside it.
fn on_ray_driver_node(job: &Job) -> bool {
    if !job.hosts_seen().is_empty() || over_network(job) {
        return false;
    }
    let beside_driver = |file: usize| {
        job.files.get(file).is_some_and(|f| {
            f.ray_actor_lines.on_driver_node > 0 && f.ray_actor_lines.elsewhere == 0
        })
    };
    let mut ranked = job
        .events
        .iter()
        .filter(|e| e.who.rank.is_some())
        .peekable();
    ranked.peek().is_some() && ranked.all(|e| beside_driver(e.origin.file.0 as usize))
}

/// A channel of the job goes through the network.
fn over_network(job: &Job) -> bool {
    job.events_where(|k| k == EventKind::NcclChannel)
        .any(|(_, e)| {
            e.text_field("transport")
                .is_some_and(|t| t.starts_with("NET/") || t.starts_with("COLLNET"))
        })
}

/// NCCL_P2P_DISABLE=1 takes peer-to-peer out of the picture.
fn p2p_disabled(job: &Job) -> bool {
    job.env
        .get("NCCL_P2P_DISABLE")
        .is_some_and(|values| values.keys().any(|v| v.trim() == "1"))
}

/// A warning that the kernel runs without `iommu=pt`.
fn iommu_translating(job: &Job) -> Option<EventIdx> {
    job.events_where(|k| k == EventKind::IommuTranslating)
        .find(|(_, e)| e.text_field("option") == Some("iommu=pt"))
        .map(|(idx, _)| idx)
}

/// `ACSCtl:` lines with source validation or request redirection on.
fn acs_on(job: &Job) -> Vec<EventIdx> {
    job.events_where(|k| k == EventKind::PciAcs)
        .filter(|(_, e)| {
            e.text_field("src_valid") == Some("+") || e.text_field("req_redir") == Some("+")
        })
        .map(|(idx, _)| idx)
        .collect()
}
