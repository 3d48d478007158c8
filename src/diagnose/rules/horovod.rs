//! Horovod's stall inspector says, per rank, which tensors it has not
//! submitted while the others wait for them.
//!
//! One rank (or a few) missing the same tensors never reached the op: it
//! stalled. Ranks each missing a tensor another listed rank did submit ran
//! different ops: their programs diverged (different graphs, names that
//! differ per rank), and which side is odd the block does not say.

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
    cited: Vec<EventIdx>,
}

pub fn stalled_tensors(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let stalls = read_blocks(ctx);
    if stalls.missing.is_empty() {
        return None;
    }
    let h = if diverged(&stalls.missing) {
        mismatch(&stalls)
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

fn stalled(ctx: &Ctx<'_>, stalls: &Stalls) -> Hypothesis {
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    let ranks: BTreeSet<u32> = stalls.missing.keys().copied().collect();
    let tensors = stalls.missing.values().next().cloned().unwrap_or_default();
    if let Some(op) = op_of(first(&tensors)) {
        h.value("op", op);
    }
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
    let name = tensor.strip_prefix("Horovod").unwrap_or(tensor);
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
