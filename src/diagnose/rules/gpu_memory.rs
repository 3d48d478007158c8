//! NCCL running out of GPU memory: its buffers, channels and a gather's
//! IPC buffers are allocated on the GPU as a collective first needs them
//! (a new peer, a new communicator, a checkpoint's gather). Where the
//! program's own tensors already fill the GPU, that allocation fails, the
//! process's NCCL call fails, and its peers wait for it or lose it: a crash
//! of that process, told in terms of GPU memory (`gpu_memory` variant of
//! `process_crash`).

use std::collections::BTreeSet;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn out_of_gpu_memory(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let of = |what: &'static str| {
        ctx.job
            .events_where(|k| k == EventKind::CudaFailure)
            .filter(move |(_, ev)| ev.text_field("what") == Some(what))
    };
    let said_oom: Vec<(EventIdx, &crate::model::Event)> = of("out_of_memory").collect();
    // An allocation NCCL names as failed without the CUDA error (a paste's
    // `Last error:`) is a lead unless another CUDA failure says why.
    let any_other_failure = ctx
        .job
        .events_where(|k| k == EventKind::CudaFailure)
        .any(|(_, ev)| ev.text_field("what").is_none());
    let (failures, weight) = if !said_oom.is_empty() {
        (said_oom, 0.6)
    } else if !any_other_failure {
        (of("alloc_failed").collect(), 0.5)
    } else {
        return None;
    };
    let (_, first) = failures.first()?;
    let ranks: BTreeSet<u32> = failures.iter().filter_map(|(_, e)| e.who.rank).collect();
    let hosts: BTreeSet<&str> = failures
        .iter()
        .filter_map(|(_, e)| ctx.job.host_of_event(e))
        .collect();
    let mut h = Hypothesis::new(CauseKind::ProcessCrash);
    h.value("variant", "gpu_memory");
    if hosts.len() == 1 {
        h.host = hosts.first().map(|host| host.to_string());
    }
    let on = h
        .host
        .as_ref()
        .map_or(String::new(), |host| format!(" on {host}"));
    let who = match ranks.iter().copied().collect::<Vec<_>>()[..] {
        [rank] => {
            h.value("rank", rank.to_string());
            let info = ctx.job.ranks.get(&rank);
            h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
            format!("Rank {rank}{on}")
        }
        [] => match first.who.pid {
            Some(pid) => format!("A process{on} (pid {pid})"),
            None => format!("A process{on}"),
        },
        ref several => format!("Ranks {}{on}", list(several)),
    };
    h.value("who", who);
    h.ranks = ranks;
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(
            Source::Nccl,
            if h.support.is_empty() { weight } else { 0.15 },
            Some(idx),
            "NCCL could not allocate GPU memory for its buffers: the process's NCCL call fails",
        );
    }
    Some(h)
}

fn list(ranks: &[u32]) -> String {
    let shown: Vec<String> = ranks.iter().take(8).map(u32::to_string).collect();
    let more = ranks.len().saturating_sub(8);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
