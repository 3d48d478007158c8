//! Horovod's stall inspector says, per rank, which tensors it has not
//! submitted while the others wait for them.
//!
//! One rank (or a few) missing the same tensors never reached the op: it
//! stalled. Ranks each missing a tensor another listed rank did submit ran
//! different ops: their programs diverged (different graphs, names that
//! differ per rank); where one side is fewer ranks than the only other, it
//! is the odd one.
//!
//! Before 0.16 the warning lists, per tensor, the ranks that did submit it
//! (`T [ready ranks: 2, 0, 1]`); the ranks missing are the world's others
//! (the world: the job's ranks, at least up to the highest rank named);
//! some of those releases list the ranks missing instead
//! (`T [missing ranks: 3, 6]`). Ranks missing tensors after a training loop
//! said it had finished ran fewer steps than the others: a mismatch.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind, FileId};

use super::Ctx;

/// Rank lines follow their warning (and each other) this closely.
const BLOCK_GAP: u64 = 3;
/// Lines cited.
const CITED: usize = 4;

/// What the stall blocks say: rank → tensors it has not submitted, and the
/// lines that say so.
#[derive(Default)]
struct Stalls {
    missing: BTreeMap<u32, BTreeSet<String>>,
    /// Tensor → ranks that submitted it (the 0.9–0.15 warning).
    ready: BTreeMap<String, BTreeSet<u32>>,
    cited: Vec<EventIdx>,
}

pub fn stalled_tensors(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut stalls = read_blocks(ctx);
    let ready = std::mem::take(&mut stalls.ready);
    for (tensor, rank) in missing_from_ready(&ready, ctx.job.ranks_at_least()) {
        stalls.missing.entry(rank).or_default().insert(tensor);
    }
    if stalls.missing.is_empty() {
        return shut_down_after_a_finish(ctx);
    }
    let h = if diverged(&stalls.missing) {
        mismatch(&stalls)
    } else if let Some(end) = training_ended(ctx) {
        left_early(ctx, &stalls, end)
    } else {
        stalled(ctx, &stalls)
    };
    Some(h)
}

fn read_blocks(ctx: &Ctx<'_>) -> Stalls {
    let mut out = Stalls::default();
    let mut block: Option<(FileId, u64)> = None;
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::HorovodStall) {
        let (file, line) = (ev.origin.file, ev.origin.line);
        // The 0.9–0.15 warning's `[ready ranks: …]` entries, on its own line
        // or on lines a paste broke it into (its head maybe lost: the
        // entries are Horovod's alone, read without a block).
        if let Some(entries) = ev.text_field("entries") {
            read_entries(entries, READY, &mut out.ready);
            let mut missing = BTreeMap::new();
            read_entries(entries, MISSING, &mut missing);
            for (tensor, ranks) in missing {
                for rank in ranks {
                    out.missing.entry(rank).or_default().insert(tensor.clone());
                }
            }
            out.cited.push(idx);
        }
        match ev.text_field("role") {
            Some("warning") => block = Some((file, line)),
            Some("missing") => {
                let Some((f, last)) = block else { continue };
                if f != file || line <= last || line > last + BLOCK_GAP {
                    continue;
                }
                block = Some((file, line));
                let (Some(rank), Some(tensors)) =
                    (ev.int("missing_rank"), ev.text_field("tensors"))
                else {
                    continue;
                };
                let names = tensors
                    .split(", ")
                    .map(|t| t.trim_end_matches(" ...").trim())
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                out.missing.entry(rank as u32).or_default().extend(names);
                out.cited.push(idx);
            }
            _ => {}
        }
    }
    out
}

const READY: &str = " [ready ranks:";
const MISSING: &str = " [missing ranks:";

/// `T1 [ready ranks: 2, 0, 1], T2 [ready ranks: 3]` into `ready`, where
/// `mark` is `READY`; the `[missing ranks: …]` lists likewise with
/// `MISSING`.
fn read_entries(entries: &str, mark: &str, ready: &mut BTreeMap<String, BTreeSet<u32>>) {
    let mut rest = entries;
    while let Some(at) = rest.find(mark) {
        let before = &rest[..at];
        let tensor = before
            .rsplit(|c: char| c == ',' || c.is_whitespace())
            .next()
            .unwrap_or_default();
        let after = &rest[at + mark.len()..];
        let Some(end) = after.find(']') else { break };
        let ranks = after[..end]
            .split(',')
            .filter_map(|r| r.trim().parse::<u32>().ok());
        if !tensor.is_empty() {
            ready.entry(tensor.to_string()).or_default().extend(ranks);
        }
        rest = &after[end..];
    }
}

/// (tensor, rank) for each rank of the world that did not submit a tensor
/// others did. The world is at least `known` ranks and every rank named.
fn missing_from_ready(ready: &BTreeMap<String, BTreeSet<u32>>, known: usize) -> Vec<(String, u32)> {
    let highest = ready
        .values()
        .flatten()
        .max()
        .map_or(0, |&r| r as usize + 1);
    let world = known.max(highest) as u32;
    ready
        .iter()
        .flat_map(|(tensor, ranks)| {
            (0..world)
                .filter(|r| !ranks.contains(r))
                .map(move |r| (tensor.clone(), r))
        })
        .collect()
}

/// Two listed ranks each lack a tensor the other one submitted.
fn diverged(missing: &BTreeMap<u32, BTreeSet<String>>) -> bool {
    let sets: Vec<&BTreeSet<String>> = missing.values().collect();
    sets.iter().enumerate().any(|(i, a)| {
        sets[i + 1..]
            .iter()
            .any(|b| a.difference(b).next().is_some() && b.difference(a).next().is_some())
    })
}

fn mismatch(stalls: &Stalls) -> Hypothesis {
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    if let Some(odd) = odd_side(&stalls.missing) {
        h.ranks = odd;
    }
    let detail: Vec<String> = stalls
        .missing
        .iter()
        .take(4)
        .map(|(rank, tensors)| format!("rank {rank} lacks `{}`", first(tensors)))
        .collect();
    h.value(
        "detail",
        format!("Horovod's stall inspector: {}", detail.join(", ")),
    );
    for &idx in stalls.cited.iter().take(CITED) {
        h.support(
            Source::Pattern,
            0.7,
            Some(idx),
            "Horovod waits on each listed rank for tensors other ranks submitted: the ranks submitted different ops",
        );
    }
    h
}

/// Where the ranks fall in exactly two groups by what they lack, the
/// smaller group (a lone rank on another code path than the rest).
fn odd_side(missing: &BTreeMap<u32, BTreeSet<String>>) -> Option<BTreeSet<u32>> {
    let mut groups: BTreeMap<&BTreeSet<String>, BTreeSet<u32>> = BTreeMap::new();
    for (&rank, tensors) in missing {
        groups.entry(tensors).or_default().insert(rank);
    }
    let mut sides: Vec<BTreeSet<u32>> = groups.into_values().collect();
    if sides.len() != 2 {
        return None;
    }
    sides.sort_by_key(BTreeSet::len);
    (sides[0].len() < sides[1].len()).then(|| sides.swap_remove(0))
}

/// Support of Horovod's shutdown with no other failure before it.
const SHUT_DOWN_ALONE: f64 = 0.4;

/// Horovod shut down (its SHUT_DOWN_ERROR, raised on every rank once one
/// stopped) and the logs hold no failure of another kind: no other
/// exception, no signal, no CUDA or NCCL error. Of the two reasons Horovod
/// gives, that leaves the other: a rank finished its loop while the others
/// still submitted tensors (uneven batches or steps per worker), a
/// mismatch; which rank, the logs do not say.
fn shut_down_after_a_finish(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let is_shutdown = |e: &crate::model::Event| {
        e.kind == EventKind::PythonException
            && e.text_field("message")
                .is_some_and(|m| ctx.kb.horovod_shut_down(m))
    };
    let (idx, _) = job
        .events_where(|k| k == EventKind::PythonException)
        .find(|(_, e)| is_shutdown(e))?;
    let other_failure = job
        .events_where(|k| {
            matches!(
                k,
                EventKind::PythonException
                    | EventKind::ProcessSignaled
                    | EventKind::CudaFailure
                    | EventKind::NcclErrorReport
                    | EventKind::KernelOomKill
            )
        })
        .any(|(_, e)| !is_shutdown(e));
    if other_failure {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    h.value(
        "detail",
        "Horovod shut down with no exception before it: a rank finished while the others still submitted tensors, so the workers ran different numbers of steps",
    );
    h.support(
        Source::Pattern,
        SHUT_DOWN_ALONE,
        Some(idx),
        "Horovod shut down, and no rank's exception caused it: one rank had finished execution while others still called collectives",
    );
    if let Some(end) = training_ended(ctx) {
        h.support(
            Source::Pattern,
            0.45,
            Some(end),
            "a worker's training loop had ended while others still submitted tensors",
        );
    }
    Some(h)
}

/// A training loop that said it finished (TensorFlow's `Loss for final
/// step`): its line.
fn training_ended(ctx: &Ctx<'_>) -> Option<EventIdx> {
    ctx.job
        .events_where(|k| k == EventKind::TrainingEnded)
        .map(|(idx, _)| idx)
        .next()
}

/// The ranks missing the tensors had left their training loop while the
/// others still trained: they ran fewer steps (uneven data per worker), a
/// mismatch naming them, not a stall.
fn left_early(ctx: &Ctx<'_>, stalls: &Stalls, end: EventIdx) -> Hypothesis {
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let ranks: BTreeSet<u32> = stalls.missing.keys().copied().collect();
    let tensors = stalls.missing.values().next().cloned().unwrap_or_default();
    h.value(
        "detail",
        format!(
            "Horovod waits on rank(s) {} for `{}` after a training loop had ended: the workers ran different numbers of steps",
            ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            first(&tensors)
        ),
    );
    h.support(
        Source::Pattern,
        0.45,
        Some(end),
        "a worker's training loop had ended while others still submitted tensors",
    );
    for &idx in stalls.cited.iter().take(CITED) {
        h.support(
            Source::Pattern,
            0.7,
            Some(idx),
            "Horovod waits on the listed ranks for tensors the others submitted, after a training loop ended: those ranks ran fewer steps",
        );
    }
    h.ranks = ranks.clone();
    super::application::on_the_ranks(ctx.job, &mut h, &ranks);
    h
}

fn stalled(ctx: &Ctx<'_>, stalls: &Stalls) -> Hypothesis {
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    let ranks: BTreeSet<u32> = stalls.missing.keys().copied().collect();
    let tensors = stalls.missing.values().next().cloned().unwrap_or_default();
    h.value(
        "op",
        op_of(first(&tensors)).unwrap_or_else(|| "the collective".to_string()),
    );
    h.value(
        "detail",
        format!(
            "Horovod's stall inspector lists it as not having submitted `{}`.",
            first(&tensors)
        ),
    );
    for &idx in stalls.cited.iter().take(CITED) {
        h.support(
            Source::Pattern,
            0.75,
            Some(idx),
            "Horovod's stall inspector names the rank(s) whose tensors every other rank waits for",
        );
    }
    h.ranks = ranks.clone();
    super::application::on_the_ranks(ctx.job, &mut h, &ranks);
    h
}

fn first(tensors: &BTreeSet<String>) -> &str {
    tensors.iter().next().map_or("?", String::as_str)
}

/// The op a Horovod tensor name carries: TensorFlow's `HorovodAllreduce_…`,
/// PyTorch's `allreduce.…`.
fn op_of(tensor: &str) -> Option<String> {
    // TensorFlow puts the op's name scope before it (`Model/…/HorovodAllgather_…`).
    let name = tensor.rsplit('/').next().unwrap_or(tensor);
    let name = name.strip_prefix("Horovod").unwrap_or(name);
    let op: String = name
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let op = op.to_ascii_uppercase();
    matches!(
        op.as_str(),
        "ALLREDUCE" | "ALLGATHER" | "BROADCAST" | "ALLTOALL" | "REDUCESCATTER"
    )
    .then_some(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_names_carry_their_op_in_tensorflow_and_pytorch() {
        assert_eq!(
            op_of("HorovodBroadcast_acm_kernel_0").as_deref(),
            Some("BROADCAST")
        );
        assert_eq!(
            op_of("allreduce.layer1.weight").as_deref(),
            Some("ALLREDUCE")
        );
        assert_eq!(op_of("grouped_allreduce.x"), None);
    }

    #[test]
    fn ready_ranks_of_the_one_line_warning_give_the_ranks_missing_v0_15() {
        let mut ready = BTreeMap::new();
        read_entries(
            "HorovodAllreduce_loss_0 [ready ranks: 3], Opt/HorovodAllreduce_grad_0 [ready ranks: 2, 0, 1]",
            READY,
            &mut ready,
        );
        assert_eq!(ready["HorovodAllreduce_loss_0"], BTreeSet::from([3]));
        assert_eq!(
            ready["Opt/HorovodAllreduce_grad_0"],
            BTreeSet::from([0, 1, 2])
        );
        let missing = missing_from_ready(&ready, 0);
        assert!(missing.contains(&("HorovodAllreduce_loss_0".into(), 0)));
        assert!(missing.contains(&("Opt/HorovodAllreduce_grad_0".into(), 3)));
        assert_eq!(missing.len(), 4);
        // A world known to be larger: the ranks above every named one too.
        assert_eq!(missing_from_ready(&ready, 5).len(), 6);
    }

    #[test]
    fn the_smaller_of_two_sides_is_the_odd_one() {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let mut m = BTreeMap::new();
        for r in 0..3 {
            m.insert(r, set(&["loss"]));
        }
        m.insert(3, set(&["grad"]));
        assert_eq!(odd_side(&m), Some(BTreeSet::from([3])));
        m.insert(4, set(&["grad"]));
        m.insert(5, set(&["grad"]));
        assert_eq!(odd_side(&m), None);
        m.insert(6, set(&["other"]));
        assert_eq!(odd_side(&m), None);
    }

    #[test]
    fn ranks_lacking_what_the_other_submitted_diverged() {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        let mut m = BTreeMap::new();
        m.insert(0, set(&["a"]));
        m.insert(1, set(&["b"]));
        assert!(diverged(&m));
        m.insert(1, set(&["a", "b"]));
        assert!(!diverged(&m));
    }
}
