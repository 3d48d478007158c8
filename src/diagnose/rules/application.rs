//! Application-level causes: ranks that disagree on the collective, and a rank
//! that never reached it while nothing is wrong with it.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::last_lines::last_lines;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventKind, Job};

use super::Ctx;

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(reported_mismatch(ctx).or_else(|| logged_fingerprints(ctx)));
    out.extend(desync_report(ctx));
    out.extend(super::fr_analysis::fr_analysis(ctx));
    out.extend(super::stacks::stack_dumps(ctx));
    out.extend(super::ras_report::ras_report(ctx));
    out.extend(super::barrier::monitored_barrier(ctx));
    out.extend(super::horovod::stalled_tensors(ctx));
    out.extend(super::framework::workers_out_of_step(ctx));
    out.extend(super::main_process::awaited_main_process(ctx));
    out.extend(nccl_caught_mismatch(ctx));
    out.extend(super::calls::calls_disagree(ctx));
    if let Some(hang) = hang {
        out.extend(disagreeing_timeouts(ctx, hang));
        out.extend(super::passed_over::passed_over(ctx, hang));
        out.extend(super::waiting_elsewhere::waiting_elsewhere(ctx, hang));
        out.extend(collective_after_the_end(ctx, hang));
        out.extend(barrier_while_one_rank_works(ctx, hang));
        out.extend(super::main_process::working_while_others_wait(ctx, hang));
        out.extend(super::progress::busy_past_the_timeout(ctx, hang));
        out.extend(stalled_ranks(ctx, hang));
    }
    out
}

/// PyTorch's own check (TORCH_DISTRIBUTED_DEBUG=DETAIL) caught a mismatch.
/// Every rank reports its own fingerprint and one it disagrees with; the
/// ranks whose own fingerprint differs from most others' are the culprits.
fn reported_mismatch(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let reports: Vec<(usize, &crate::model::Event)> = job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::CollectiveMismatch)
        .collect();
    let first = reports.first()?.0;
    // rank → (its fingerprint, the report that says so); a rank's own line wins.
    let mut runs: BTreeMap<u32, (&str, usize)> = BTreeMap::new();
    for &(idx, ev) in &reports {
        if let (Some(r), Some(c)) = (ev.int("rank_a"), ev.text_field("collective_a")) {
            runs.insert(r as u32, (c, idx));
        }
    }
    for &(idx, ev) in &reports {
        if let (Some(r), Some(c)) = (ev.int("rank_b"), ev.text_field("collective_b")) {
            runs.entry(r as u32).or_insert((c, idx));
        }
    }
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let odd = match odd_fingerprints(&runs) {
        Some(odd) => Some(odd),
        None => named_by_the_others(&reports, &mut runs),
    };
    match &odd {
        Some((culprits, majority)) => {
            blame_odd_fingerprints(&mut h, &runs, culprits, majority, 0.85, |rank| {
                format!("rank {rank} runs a different collective from the others")
            });
            if let Some(seq) = fingerprint_field(majority, "SequenceNumber") {
                h.value("seq", seq.to_string());
            }
        }
        None => {
            for &(_, ev) in reports.iter().take(6) {
                h.ranks.extend(ev.int("rank_a").map(|r| r as u32));
                h.ranks.extend(ev.int("rank_b").map(|r| r as u32));
                let side = |r: &str, c: &str| match (ev.int(r), ev.text_field(c)) {
                    (Some(rank), Some(coll)) => Some(format!("rank {rank} runs {coll}")),
                    _ => None,
                };
                let sides: Vec<String> = [
                    side("rank_a", "collective_a"),
                    side("rank_b", "collective_b"),
                ]
                .into_iter()
                .flatten()
                .collect();
                // A check that saw the shapes differ names no side.
                let detail = match ev.text_field("detail") {
                    Some(what) if sides.is_empty() => what.to_string(),
                    _ => sides.join(", while "),
                };
                h.value("detail", detail);
            }
            h.support(
                Source::Torch,
                0.85,
                Some(first),
                "PyTorch detected that ranks run different collectives",
            );
        }
    }
    on_the_one_rank(job, &mut h);
    Some(h)
}

/// Where too few fingerprints are known to outvote (a paste cut the other
/// side's text): the one rank the reporters name as running another
/// collective, itself reporting nothing, is the odd one when the reporters
/// (two or more) agree among themselves.
fn named_by_the_others<'e>(
    reports: &[(usize, &'e crate::model::Event)],
    runs: &mut BTreeMap<u32, (&'e str, usize)>,
) -> Option<(BTreeSet<u32>, String)> {
    let reporters: BTreeSet<u32> = reports
        .iter()
        .filter_map(|(_, e)| e.int("rank_a").map(|r| r as u32))
        .collect();
    // rank named → (the reporters naming it, the first report that does).
    let mut named: BTreeMap<u32, (BTreeSet<u32>, usize)> = BTreeMap::new();
    for &(idx, e) in reports {
        if let (Some(a), Some(b)) = (e.int("rank_a"), e.int("rank_b")) {
            named
                .entry(b as u32)
                .or_insert((BTreeSet::new(), idx))
                .0
                .insert(a as u32);
        }
    }
    // The reporters agree among themselves (a cut text agrees with any it
    // begins): they are the majority the named rank differs from.
    let own: Vec<&str> = reporters
        .iter()
        .filter_map(|r| Some(runs.get(r)?.0))
        .collect();
    let agree = own.len() >= 2
        && own
            .iter()
            .all(|a| own.iter().all(|b| a.starts_with(b) || b.starts_with(a)));
    let mut odd = named.into_iter().filter(|(b, _)| !reporters.contains(b));
    let (culprit, (by, first)) = odd.next()?;
    if !agree || odd.next().is_some() {
        return None;
    }
    let majority = runs.get(by.first()?)?.0.to_string();
    runs.entry(culprit)
        .or_insert(("another collective (the report of it is cut)", first));
    Some((BTreeSet::from([culprit]), majority))
}

/// DETAIL debugging logs each collective's fingerprint on every rank before
/// it runs. At the first sequence number where at least three ranks logged
/// and a clear majority agrees, the ranks that differ ran another collective
/// (another op, shape or dtype): PyTorch's own check may not have fired (or
/// its report was not kept).
fn logged_fingerprints(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut by_seq: BTreeMap<i64, BTreeMap<u32, (&str, usize)>> = BTreeMap::new();
    for (idx, ev) in ctx
        .job
        .events_where(|k| k == EventKind::CollectiveFingerprint)
    {
        let (Some(rank), Some(seq), Some(fp)) =
            (ev.who.rank, ev.int("seq"), ev.text_field("fingerprint"))
        else {
            continue;
        };
        by_seq
            .entry(seq)
            .or_default()
            .entry(rank)
            .or_insert((fp, idx));
    }
    let (seq, runs, (culprits, majority)) = by_seq
        .into_iter()
        .find_map(|(seq, runs)| odd_fingerprints(&runs).map(|odd| (seq, runs, odd)))?;
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    h.value("seq", seq.to_string());
    blame_odd_fingerprints(&mut h, &runs, &culprits, &majority, 0.8, |rank| {
        format!("rank {rank} logged another collective than the others at sequence number {seq}")
    });
    on_the_one_rank(ctx.job, &mut h);
    Some(h)
}

/// The ranks whose fingerprint differs from the majority's become the
/// hypothesis's ranks, each cited (up to four lines) and described.
fn blame_odd_fingerprints(
    h: &mut Hypothesis,
    runs: &BTreeMap<u32, (&str, usize)>,
    culprits: &BTreeSet<u32>,
    majority: &str,
    weight: f64,
    why: impl Fn(u32) -> String,
) {
    for (rank, (fingerprint, idx)) in runs.iter().filter(|(r, _)| culprits.contains(r)) {
        h.ranks.insert(*rank);
        if h.support.len() < 4 {
            h.support(Source::Torch, weight, Some(*idx), why(*rank));
        }
        h.value(
            "detail",
            format!(
                "rank {rank} runs {}, while the others run {}",
                short_fingerprint(fingerprint),
                short_fingerprint(majority)
            ),
        );
    }
}

/// The hung collective's op, sequence number and group, for the summary.
pub(super) fn name_the_hung_collective(h: &mut Hypothesis, hang: &Hang) {
    h.value(
        "op",
        hang.op.clone().unwrap_or_else(|| "the collective".into()),
    );
    if let Some(seq) = hang.seq {
        h.value("seq", seq.to_string());
    }
    h.value("pg", hang.pg.clone());
}

/// A cause that lies with these ranks sits on the first one's host and GPU,
/// and its text lists them all.
pub(super) fn on_the_ranks(job: &crate::model::Job, h: &mut Hypothesis, ranks: &BTreeSet<u32>) {
    let info = ranks.iter().next().and_then(|r| job.ranks.get(r));
    h.host = info.and_then(|i| i.host.clone());
    h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
}

/// A cause that lies with one rank sits on its host and GPU.
fn on_the_one_rank(job: &crate::model::Job, h: &mut Hypothesis) {
    if let [rank] = h.ranks.iter().copied().collect::<Vec<_>>()[..] {
        let info = job.ranks.get(&rank);
        h.host = info.and_then(|i| i.host.clone());
        h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
    }
}

/// The ranks whose fingerprint differs from the one most ranks share, when
/// at least three ranks are known and one fingerprint is the clear majority.
fn odd_fingerprints(runs: &BTreeMap<u32, (&str, usize)>) -> Option<(BTreeSet<u32>, String)> {
    if runs.len() < 3 {
        return None;
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (coll, _) in runs.values() {
        *counts.entry(coll).or_default() += 1;
    }
    let top = *counts.values().max()?;
    let leaders: Vec<&str> = counts
        .iter()
        .filter(|(_, n)| **n == top)
        .map(|(c, _)| *c)
        .collect();
    let [majority] = leaders[..] else {
        return None;
    };
    let odd: BTreeSet<u32> = runs
        .iter()
        .filter(|(_, (c, _))| *c != majority)
        .map(|(r, _)| *r)
        .collect();
    (!odd.is_empty() && odd.len() * 2 < runs.len()).then(|| (odd, majority.to_string()))
}

/// A fingerprint without its long tensor-options tail.
fn short_fingerprint(fingerprint: &str) -> &str {
    fingerprint
        .split(", TensorDeviceTypes")
        .next()
        .unwrap_or(fingerprint)
}

/// `SequenceNumber=2953` in `CollectiveFingerPrint(SequenceNumber=2953, OpType=…`.
fn fingerprint_field<'a>(fingerprint: &'a str, name: &str) -> Option<&'a str> {
    let at = fingerprint.find(&format!("{name}="))? + name.len() + 1;
    let rest = &fingerprint[at..];
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|v| !v.is_empty())
}

/// The desync debug report names the laggards itself: ranks that never
/// joined any collective, or finished the previous one but did not join the
/// hung one. (Its rank lists are ranks of the group; for the default group
/// these are the global ranks.)
fn desync_report(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    for (idx, ev) in ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::DesyncReport)
    {
        let role = ev.text_field("role").unwrap_or("");
        if !matches!(role, "never_joined" | "not_joined") {
            continue;
        }
        let ranks: Vec<u32> = ev
            .text_field("ranks")
            .unwrap_or("")
            .split(',')
            .filter_map(|r| r.trim().parse().ok())
            .collect();
        if h.support.len() < 4 {
            h.support(
                Source::Torch,
                0.8,
                Some(idx),
                format!("PyTorch's desync report names rank(s) {ranks:?} as lagging"),
            );
        }
        h.ranks.extend(ranks);
    }
    if h.ranks.is_empty() {
        return None;
    }
    let ranks = h.ranks.clone();
    on_the_ranks(ctx.job, &mut h, &ranks);
    Some(h)
}

/// NCCL itself caught ranks disagreeing on a collective: its IB transport
/// found a send larger than the receive the peer posted for it (2.3–2.19;
/// the sender prints it), its socket transport a message larger than the
/// receive (the receiver prints it), or its kernels asserted a mismatch (2.4–2.6, "at
/// and around" the reporting rank). The ranks ran the collective with
/// different sizes or in a different order, or with NCCL settings that
/// differ. Which side is odd the lines do not say.
fn nccl_caught_mismatch(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::NcclMismatch) {
        if h.support.is_empty() {
            h.value("detail", mismatch_detail(ctx, ev));
        }
        if h.support.len() < 4 {
            // "May be hanging": a peer behind, which a stalled rank also is.
            let (w, why) = if ev.text_field("what") == Some("suspected") {
                (
                    0.4,
                    "NCCL's kernels waited on a peer behind in its collectives and suspected a mismatch",
                )
            } else {
                (
                    0.5,
                    "NCCL found the ranks' collectives disagreeing: different sizes or order, or different NCCL settings",
                )
            };
            h.support(Source::Nccl, w, Some(idx), why);
        }
    }
    (!h.support.is_empty()).then_some(h)
}

fn mismatch_detail(ctx: &Ctx<'_>, ev: &crate::model::Event) -> String {
    let host = ev.who.host.as_deref().unwrap_or("a host");
    if let Some(rank) = ev.int("around_rank") {
        if ev.text_field("what") == Some("suspected") {
            return format!(
                "NCCL's kernels suspected a mismatched collective around rank {rank} (a peer behind it)"
            );
        }
        return format!(
            "NCCL's kernels detected a mismatched collective at and around rank {rank}"
        );
    }
    let size = |f| ev.int(f).map_or("?".to_string(), |n| n.to_string());
    let peer = ev
        .text_field("peer")
        .map(|peer| ctx.host_of_addr(peer).unwrap_or(peer));
    // The socket transport's receiver reports it: what came, what it posted.
    if ev.int("sent_size").is_some() {
        let from = peer.map(|p| format!(" from {p}")).unwrap_or_default();
        return format!(
            "NCCL's socket transport on {host} received {} bytes{from} for a receive of {}",
            size("sent_size"),
            size("posted_size")
        );
    }
    let to = peer.map(|p| format!(" to {p}")).unwrap_or_default();
    format!(
        "NCCL's IB transport from {host}{to} had {} bytes to send to a receive of {}",
        size("local_size"),
        size("remote_size")
    )
}

/// Ranks timed out on the same sequence number but with a different op or
/// size: the minority ran a different collective.
fn disagreeing_timeouts(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    // A rank whose watchdog raised an error prints no op or size: it ran
    // nothing different, it just said less.
    // Torch before 2.0 prints no sizes: the op alone must then decide.
    let ops: BTreeSet<&String> = hang
        .sizes
        .values()
        .filter_map(|(op, _)| op.as_ref())
        .collect();
    let known: BTreeMap<u32, (Option<String>, Option<i64>)> = hang
        .sizes
        .iter()
        .filter(|(_, (op, n))| op.is_some() && (ops.len() > 1 || n.is_some()))
        .map(|(r, (op, n))| (*r, (op.clone(), n.filter(|_| ops.len() == 1))))
        .collect();
    let mut counts: BTreeMap<&(Option<String>, Option<i64>), usize> = BTreeMap::new();
    for k in known.values() {
        *counts.entry(k).or_default() += 1;
    }
    if counts.len() < 2 {
        return None;
    }
    let top = *counts.values().max()?;
    let leaders: Vec<_> = counts.iter().filter(|(_, n)| **n == top).collect();
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    if let Some(seq) = hang.seq {
        h.value("seq", seq.to_string());
    }
    let fmt = |k: &(Option<String>, Option<i64>)| {
        let op = k.0.clone().unwrap_or_else(|| "?".into());
        match k.1 {
            Some(n) => format!("{op} of {n} elements"),
            None => op,
        }
    };
    let (majority, even_split) = match leaders[..] {
        [(majority, _)] => ((*majority).clone(), false),
        // An even split names no minority, unless one side alone stopped
        // issuing work there.
        _ => match moved_on(ctx, hang, &known) {
            Some(side) => (side, true),
            None if sides_disagree(ctx, &known) => {
                return Some(undecided_split(ctx, hang, h, &known, fmt));
            }
            None => return None,
        },
    };
    for (rank, k) in known.iter().filter(|(_, k)| **k != majority) {
        h.ranks.insert(*rank);
        h.value(
            "detail",
            format!(
                "rank {rank} ran {} where the others ran {}",
                fmt(k),
                fmt(&majority)
            ),
        );
        let ev = first_status_line(ctx, hang, *rank);
        // As direct as PyTorch's own fingerprint check: the same sequence
        // number cannot hold two different collectives on healthy ranks.
        let (weight, why) = if even_split {
            (
                0.55,
                format!(
                    "rank {rank} timed out in a different collective at the same sequence number, and enqueued nothing after it while the other side did"
                ),
            )
        } else {
            (
                0.85,
                format!(
                    "rank {rank} timed out in a different collective at the same sequence number"
                ),
            )
        };
        h.support(Source::Torch, weight, ev, why);
    }
    on_the_one_rank(ctx.job, &mut h);
    Some(h)
}

/// The two sides of an even split cannot both be right: the ops differ, or
/// one op that takes the same size on every rank ran with two (one group's
/// sequence number holds one collective, whether or not the ranks enqueued
/// later work, which async collectives always do). An all-to-all's uneven
/// splits are no sign.
fn sides_disagree(ctx: &Ctx<'_>, known: &BTreeMap<u32, (Option<String>, Option<i64>)>) -> bool {
    let ops: BTreeSet<&str> = known.values().filter_map(|(op, _)| op.as_deref()).collect();
    let sizes_must_match =
        matches!(ops.iter().collect::<Vec<_>>()[..], [op] if ctx.kb.same_size_op(op));
    ops.len() > 1 || sizes_must_match
}

/// The first line of `rank`'s state in the hung group (its timeout or its
/// status), to cite for what that state says.
fn first_status_line(ctx: &Ctx<'_>, hang: &Hang, rank: u32) -> Option<usize> {
    ctx.job
        .pg_states
        .get(&(hang.pg.clone(), rank))
        .and_then(|s| s.evidence.first().copied())
}

/// Ranks split evenly between two collectives at one sequence number, with
/// nothing to tell which side is odd: a mismatch for certain (one sequence
/// number cannot hold two collectives), its culprit unnamed.
fn undecided_split(
    ctx: &Ctx<'_>,
    hang: &Hang,
    mut h: Hypothesis,
    known: &BTreeMap<u32, (Option<String>, Option<i64>)>,
    fmt: impl Fn(&(Option<String>, Option<i64>)) -> String,
) -> Hypothesis {
    let sides: Vec<String> = known
        .iter()
        .take(4)
        .map(|(rank, k)| format!("rank {rank} ran {}", fmt(k)))
        .collect();
    h.value("detail", sides.join(", "));
    for rank in known.keys().take(4) {
        let ev = first_status_line(ctx, hang, *rank);
        h.support(
            Source::Torch,
            0.5,
            ev,
            format!("rank {rank} timed out in its own collective at this sequence number; as many ranks ran the other one, so neither side is the odd one"),
        );
    }
    h
}

/// Of two sides that ran different collectives at the hung sequence number,
/// the one whose ranks went on to enqueue later work (their program moved
/// past it) when the other side's enqueued nothing after it: that other
/// side's program stopped at the odd collective. Returns the side that moved
/// on, taken as the reference.
fn moved_on(
    ctx: &Ctx<'_>,
    hang: &Hang,
    known: &BTreeMap<u32, (Option<String>, Option<i64>)>,
) -> Option<(Option<String>, Option<i64>)> {
    let seq = hang.seq?;
    let enqueued = |r: &u32| {
        ctx.job
            .pg_states
            .get(&(hang.pg.clone(), *r))
            .and_then(|s| s.last_enqueued)
    };
    let mut sides: BTreeMap<&(Option<String>, Option<i64>), BTreeSet<bool>> = BTreeMap::new();
    for (rank, k) in known {
        let past = enqueued(rank)? > seq;
        sides.entry(k).or_default().insert(past);
    }
    let went_on: Vec<_> = sides
        .iter()
        .filter(|(_, p)| **p == BTreeSet::from([true]))
        .collect();
    let stopped = sides
        .values()
        .filter(|p| **p == BTreeSet::from([false]))
        .count();
    match went_on[..] {
        [(k, _)] if stopped == sides.len() - 1 => Some((*k).clone()),
        _ => None,
    }
}

/// The training loop said it finished, and then a rank timed out in a
/// collective: the others had left, so that rank ran a collective nobody
/// else did (an extra barrier in a rank-0-only checkpoint path, say).
fn collective_after_the_end(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let job = ctx.job;
    let end = job
        .events
        .iter()
        .position(|e| e.kind == EventKind::TrainingEnded)?;
    let after: Vec<usize> = (end + 1..job.events.len())
        .filter(|&i| {
            job.events[i].kind == EventKind::WatchdogTimeout
                && job.events[i].origin.file == job.events[end].origin.file
        })
        .collect();
    if after.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    h.support(
        Source::Pattern,
        0.4,
        Some(end),
        "the training loop had finished",
    );
    for &i in after.iter().take(4) {
        h.ranks.extend(job.events[i].who.rank);
        h.support(Source::Torch, 0.55, Some(i), "a rank still waited in a collective after training finished: the others never called it");
    }
    if h.ranks.is_empty() {
        h.ranks.extend(hang.timed_out.iter().copied());
    }
    if let Some(seq) = hang.seq {
        h.value("seq", seq.to_string());
    }
    h.value(
        "detail",
        format!(
            "{} issued after the training loop ended",
            hang.op.clone().unwrap_or_else(|| "a collective".into())
        ),
    );
    Some(h)
}

/// Collectives this early and this small are barriers of set-up code; one
/// timing out with no fault anywhere means a rank was busy outside them —
/// in the common pattern, the main process (rank 0) preparing data,
/// downloading or loading a checkpoint while the others waited.
fn barrier_while_one_rank_works(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    const EARLY_SEQ: i64 = 8;
    let seq = hang.seq.filter(|&s| s <= EARLY_SEQ)?;
    let tiny = |n: Option<i64>| n.is_some_and(|n| n <= 1);
    let timeouts: Vec<usize> = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.kind == EventKind::WatchdogTimeout
                && e.int("seq") == Some(seq)
                && tiny(e.int("numel_in").or(e.int("numel_out")))
        })
        .map(|(i, _)| i)
        .collect();
    if timeouts.is_empty() || !hang.laggards.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    let silent: BTreeSet<u32> = hang.silent.iter().copied().collect();
    let stuck = if !silent.is_empty() {
        silent
    // Rank 0 of the job is the main process of the default group only: a
    // subgroup's first member is some other global rank.
    } else if hang.pg == "0" && !hang.timed_out.contains(&0) {
        BTreeSet::from([0])
    } else {
        return None;
    };
    for &i in timeouts.iter().take(3) {
        h.support(
            Source::Pattern,
            0.45,
            Some(i),
            format!("a one-element collective (a barrier) #{seq} timed out: a rank was busy elsewhere, typically the main process doing set-up work alone"),
        );
    }
    on_the_ranks(ctx.job, &mut h, &stuck);
    h.value(
        "op",
        hang.op.clone().unwrap_or_else(|| "the barrier".into()),
    );
    h.value("seq", seq.to_string());
    h.value("pg", hang.pg.clone());
    h.ranks = stuck;
    Some(h)
}

/// Hosts whose launcher stopped its workers after one of them failed
/// (torchrun's `Sending process N closing signal SIGTERM`).
fn hosts_stopped_by_launcher(job: &Job) -> BTreeSet<String> {
    job.events
        .iter()
        .filter(|e| e.kind == EventKind::ClosingSignal)
        .filter_map(|e| e.who.host.as_deref().map(short_host_of))
        .collect()
}

/// Ranks behind (or silent) with nothing wrong in their own logs.
fn stalled_ranks(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let world = ctx.job.all_ranks().len().max(1);
    let behind: BTreeSet<u32> = hang.laggards.keys().copied().collect();
    // Many silent ranks mean missing logs, not many stalled ranks.
    let silent_is_meaningful =
        !hang.silent.is_empty() && hang.silent.len() * 4 <= world && !hang.timed_out.is_empty();
    let mut culprits = behind.clone();
    if silent_is_meaningful {
        culprits.extend(hang.silent.iter().copied());
    }
    if culprits.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    on_the_ranks(ctx.job, &mut h, &culprits);
    name_the_hung_collective(&mut h, hang);
    h.ranks = culprits.clone();
    for (rank, last) in &hang.laggards {
        let ev = first_status_line(ctx, hang, *rank);
        h.support(
            Source::Torch,
            0.65,
            ev,
            format!("rank {rank} had only enqueued up to {last}, behind the others"),
        );
    }
    if silent_is_meaningful {
        let victims = hang.timed_out.len();
        let stopped = hosts_stopped_by_launcher(ctx.job);
        let last_lines = last_lines(ctx.job, ctx.timeline, &hang.silent);
        for &rank in &hang.silent {
            // A launcher that stops a host's workers once one of them fails
            // may stop a rank whose own watchdog had not fired yet.
            let (weight, maybe) = match (
                victims >= 2,
                ctx.job
                    .short_host_of_rank(rank)
                    .is_some_and(|h| stopped.contains(h)),
            ) {
                (true, false) => (0.6, ""),
                (true, true) => (
                    0.4,
                    "; the launcher stopped its host's workers, perhaps before its watchdog fired",
                ),
                (false, _) => (0.4, ""),
            };
            let last_line = last_lines.get(&rank).copied();
            h.support(Source::Pattern, weight, last_line, format!("rank {rank} logged no timeout while {victims} other ranks timed out waiting; this is its last line{maybe}"));
        }
        cite_cut_off(ctx.job, hang, &mut h);
        // Every hang has victims that time out; they back a stall only when
        // a rank is shown behind, not when it merely printed nothing (its
        // output may just be lost).
        let corroborated = !hang.laggards.is_empty();
        for &idx in hang
            .evidence
            .iter()
            .filter(|&&i| ctx.job.events[i].kind == EventKind::WatchdogTimeout)
            .take(if corroborated { 3 } else { 0 })
        {
            h.support(
                Source::Torch,
                0.5,
                Some(idx),
                "a victim timed out waiting in the collective",
            );
        }
    }
    Some(h)
}

/// Names the silent ranks set apart as cut off, with the line that stopped
/// them, so the reader sees why they are not suspects.
fn cite_cut_off(job: &Job, hang: &Hang, h: &mut Hypothesis) {
    const SHOWN: usize = 4;
    let stops = job
        .deaths
        .iter()
        .filter(|d| d.stopped_by_launcher)
        .filter_map(|d| Some((d.rank?, d.evidence.first().copied())))
        .filter(|(rank, _)| hang.cut_off.contains(rank));
    for (rank, line) in stops.take(SHOWN) {
        h.support(
            Source::Launcher,
            0.0,
            line,
            format!("rank {rank} logged no timeout either, but its launcher stopped it alongside workers that had already reported the timeout: it was likely cut off before its own watchdog fired"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // torch 2.x TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints.
    const ALLREDUCE: &str = "CollectiveFingerPrint(SequenceNumber=2953, OpType=ALLREDUCE, TensorShape=[1], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default)))";
    const ALLGATHER: &str = "CollectiveFingerPrint(SequenceNumber=2953, OpType=_ALLGATHER_BASE, TensorShape=[1], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default)))";

    #[test]
    fn the_rank_whose_fingerprint_differs_from_most_is_odd() {
        let mut runs = BTreeMap::new();
        for r in 0..6 {
            runs.insert(r, (if r == 4 { ALLGATHER } else { ALLREDUCE }, 0));
        }
        let (odd, majority) = odd_fingerprints(&runs).unwrap();
        assert_eq!(odd, BTreeSet::from([4]));
        assert_eq!(majority, ALLREDUCE);
        assert_eq!(fingerprint_field(&majority, "SequenceNumber"), Some("2953"));
        assert_eq!(
            fingerprint_field(ALLGATHER, "OpType"),
            Some("_ALLGATHER_BASE")
        );
        assert!(!short_fingerprint(ALLGATHER).contains("TensorDeviceTypes"));
    }

    #[test]
    fn two_ranks_or_an_even_split_name_no_odd_rank() {
        let two = BTreeMap::from([(0, (ALLREDUCE, 0)), (1, (ALLGATHER, 1))]);
        assert!(odd_fingerprints(&two).is_none());
        let even = BTreeMap::from([
            (0, (ALLREDUCE, 0)),
            (1, (ALLGATHER, 1)),
            (2, (ALLREDUCE, 2)),
            (3, (ALLGATHER, 3)),
        ]);
        assert!(odd_fingerprints(&even).is_none());
    }
}
