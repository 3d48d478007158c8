//! Application-level causes: ranks that disagree on the collective, and a rank
//! that never reached it while nothing is wrong with it.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(reported_mismatch(ctx));
    out.extend(desync_report(ctx));
    if let Some(hang) = hang {
        out.extend(disagreeing_timeouts(ctx, hang));
        out.extend(collective_after_the_end(ctx, hang));
        out.extend(barrier_while_one_rank_works(ctx, hang));
        out.extend(stalled_ranks(ctx, hang));
    }
    out
}

/// PyTorch's own check (TORCH_DISTRIBUTED_DEBUG=DETAIL) caught a mismatch.
fn reported_mismatch(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    for (idx, ev) in ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::CollectiveMismatch)
        .take(6)
    {
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
        h.value("detail", sides.join(", while "));
        h.support(
            Source::Torch,
            0.85,
            Some(idx),
            "PyTorch detected that ranks run different collectives",
        );
    }
    (!h.support.is_empty()).then_some(h)
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
    let first = *h.ranks.iter().next()?;
    let info = ctx.job.ranks.get(&first);
    h.host = info.and_then(|i| i.host.clone());
    h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
    h.value(
        "rank",
        h.ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    Some(h)
}

/// Ranks timed out on the same sequence number but with a different op or
/// size: the minority ran a different collective.
fn disagreeing_timeouts(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    // A rank whose watchdog raised an error prints no op or size: it ran
    // nothing different, it just said less.
    let known: BTreeMap<u32, &(Option<String>, Option<i64>)> = hang
        .sizes
        .iter()
        .filter(|(_, (op, n))| op.is_some() && n.is_some())
        .map(|(r, k)| (*r, k))
        .collect();
    let kinds: BTreeSet<_> = known.values().collect();
    if kinds.len() < 2 {
        return None;
    }
    let majority: (Option<String>, Option<i64>) = (**kinds
        .iter()
        .max_by_key(|k| known.values().filter(|v| **v == ***k).count())?)
    .clone();
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    h.value("seq", hang.seq.map(|s| s.to_string()).unwrap_or_default());
    let fmt = |k: &(Option<String>, Option<i64>)| {
        format!(
            "{} of {} elements",
            k.0.clone().unwrap_or_else(|| "?".into()),
            k.1.map_or("?".into(), |n| n.to_string())
        )
    };
    for (rank, k) in known.iter().filter(|(_, k)| ***k != majority) {
        h.ranks.insert(*rank);
        h.value(
            "detail",
            format!(
                "rank {rank} ran {} where the others ran {}",
                fmt(k),
                fmt(&majority)
            ),
        );
        let ev = ctx
            .job
            .pg_states
            .get(&(hang.pg.clone(), *rank))
            .and_then(|s| s.evidence.first().copied());
        h.support(
            Source::Torch,
            0.7,
            ev,
            format!("rank {rank} timed out in a different collective at the same sequence number"),
        );
    }
    Some(h)
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
    h.value("seq", hang.seq.map_or("?".into(), |s| s.to_string()));
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
    } else if !hang.timed_out.contains(&0) {
        BTreeSet::from([0])
    } else {
        BTreeSet::new()
    };
    for &i in timeouts.iter().take(3) {
        h.support(
            Source::Pattern,
            0.45,
            Some(i),
            format!("a one-element collective (a barrier) #{seq} timed out: a rank was busy elsewhere, typically the main process doing set-up work alone"),
        );
    }
    if let Some(&r) = stuck.iter().next() {
        let info = ctx.job.ranks.get(&r);
        h.host = info.and_then(|i| i.host.clone());
        h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
    }
    h.value(
        "rank",
        stuck
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    h.value(
        "op",
        hang.op.clone().unwrap_or_else(|| "the barrier".into()),
    );
    h.value("seq", seq.to_string());
    h.value("pg", hang.pg.clone());
    h.ranks = stuck;
    Some(h)
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
    let first = *culprits.iter().next()?;
    let info = ctx.job.ranks.get(&first);
    h.host = info.and_then(|i| i.host.clone());
    h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
    h.value(
        "rank",
        culprits
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    h.value(
        "op",
        hang.op.clone().unwrap_or_else(|| "the collective".into()),
    );
    h.value("seq", hang.seq.map_or("?".into(), |s| s.to_string()));
    h.value("pg", hang.pg.clone());
    h.ranks = culprits.clone();
    for (rank, last) in &hang.laggards {
        let ev = ctx
            .job
            .pg_states
            .get(&(hang.pg.clone(), *rank))
            .and_then(|s| s.evidence.first().copied());
        h.support(
            Source::Torch,
            0.65,
            ev,
            format!("rank {rank} had only enqueued up to {last}, behind the others"),
        );
    }
    if silent_is_meaningful {
        let victims = hang.timed_out.len();
        let weight = if victims >= 2 { 0.6 } else { 0.4 };
        for &rank in &hang.silent {
            let last_line = ctx
                .job
                .events
                .iter()
                .rposition(|e| e.who.rank == Some(rank));
            h.support(Source::Pattern, weight, last_line, format!("rank {rank} logged no timeout while {victims} other ranks timed out waiting; this is its last line"));
        }
        for &idx in hang
            .evidence
            .iter()
            .filter(|&&i| ctx.job.events[i].kind == EventKind::WatchdogTimeout)
            .take(3)
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
