//! Two ranks of one communicator on the same GPU: NCCL's init refuses them
//! (`Duplicate GPU detected`, ncclInvalidUsage; from 2.29 unless
//! NCCL_MULTI_RANK_GPU_ENABLE=1). The launch mapped ranks to GPUs wrongly (a
//! process that never selected its local rank's device, CUDA_VISIBLE_DEVICES
//! handing one device to two processes): ranks set up wrongly, in NCCL's own
//! words — or, where its warning was cut, in its init lines, which name each
//! rank's GPU.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind, Job};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn shared_gpu(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "duplicate_gpu");
    let refused = ctx
        .job
        .events_where(|k| k == EventKind::DuplicateGpu)
        .any(|(_, e)| e.text_field("what").is_none());
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::DuplicateGpu) {
        // NCCL 2.30 reports sharing ranks at INFO, allowed or not: a fact
        // only beside its refusal, or where no communicator came up.
        if ev.text_field("what") == Some("detected") && !refused && ctx.job.a_comm_came_up() {
            continue;
        }
        let ranks: Vec<i64> = [ev.int("rank_a"), ev.int("rank_b")]
            .into_iter()
            .flatten()
            .collect();
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.gpu_bus_id = ev.text_field("bus_id").map(str::to_string);
        }
        h.ranks
            .extend(ranks.iter().filter_map(|&r| u32::try_from(r).ok()));
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.8,
                Some(idx),
                "NCCL found two ranks of one communicator on one GPU and refused to set up",
            );
        }
    }
    if let Some(shared) = shared_in_init_lines(ctx.job) {
        h.host = h.host.take().or_else(|| Some(shared.host.clone()));
        h.gpu_bus_id = h.gpu_bus_id.take().or_else(|| Some(shared.bus_id.clone()));
        h.ranks.extend(shared.ranks.iter().copied());
        h.support(
            Source::Nccl,
            0.7,
            Some(shared.idx),
            format!(
                "ranks {} of one communicator started NCCL's init on the same GPU ({}) of {}, and none finished it",
                join(&shared.ranks),
                shared.bus_id,
                shared.host
            ),
        );
    }
    if !h.ranks.is_empty() {
        h.value("detail", ranks_text(&h.ranks));
    }
    (!h.support.is_empty()).then_some(h)
}

fn ranks_text(ranks: &BTreeSet<u32>) -> String {
    match ranks.len() {
        1 => format!("rank {} and another", join(ranks)),
        _ => format!("ranks {}", join(ranks)),
    }
}

fn join(ranks: &BTreeSet<u32>) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Ranks of one communicator that named the same GPU of one host in their
/// init lines, none of which completed that communicator's init.
struct Shared {
    host: String,
    bus_id: String,
    ranks: BTreeSet<u32>,
    idx: EventIdx,
}

fn shared_in_init_lines(job: &Job) -> Option<Shared> {
    type Key<'a> = (&'a str, &'a str, &'a str);
    let inits = || job.events_where(|k| k == EventKind::NcclCommInit);
    // Nearly every communicator of a job completes its init: only the
    // others' lines are grouped.
    let completed: BTreeSet<&str> = inits()
        .filter(|(_, e)| e.text_field("phase") == Some("COMPLETE"))
        .filter_map(|(_, e)| e.text_field("comm_id"))
        .collect();
    let mut by_gpu: BTreeMap<Key<'_>, (BTreeSet<u32>, EventIdx)> = BTreeMap::new();
    for (idx, ev) in inits() {
        let Some(comm_id) = ev.text_field("comm_id") else {
            continue;
        };
        if completed.contains(comm_id) {
            continue;
        }
        let (Some(host), Some(bus), Some(rank)) = (
            job.host_of_event(ev),
            ev.text_field("bus_id"),
            ev.int("rank").and_then(|r| u32::try_from(r).ok()),
        ) else {
            continue;
        };
        let entry = by_gpu
            .entry((comm_id, host, bus))
            .or_insert_with(|| (BTreeSet::new(), idx));
        entry.0.insert(rank);
    }
    by_gpu
        .into_iter()
        .find(|(_, (ranks, _))| ranks.len() > 1)
        .map(|((_, host, bus), (ranks, idx))| Shared {
            host: host.to_string(),
            bus_id: bus.to_string(),
            ranks,
            idx,
        })
}
