//! The program's own faults on its GPUs: app-class Xids (an out-of-bounds
//! access, an MMU fault at an illegal address: Xid 13, 31 …) say the process
//! using the GPU faulted and lost its CUDA context, on a GPU that is fine.
//! That is the process's crash, of the rank on that GPU, not a GPU fault;
//! faults on several GPUs of a host alike are the job's code (one kernel
//! computing a bad address everywhere), told as one crash of those ranks.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind};

use super::{Ctx, Window, time_factor};

/// What one app-class Xid alone says about the job's failure.
const WEIGHT: f64 = 0.4;
/// Lines cited per host.
const CITED: usize = 4;

#[derive(Default)]
struct HostFaults {
    gpus: BTreeSet<String>,
    ranks: BTreeSet<u32>,
    lines: Vec<(f64, EventIdx, String)>,
    first: Option<String>,
}

pub(super) fn program_faults(ctx: &Ctx<'_>, window: Window) -> Vec<Hypothesis> {
    let mut by_host: BTreeMap<Option<String>, HostFaults> = BTreeMap::new();
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if ev.kind != EventKind::KernelGpuXid {
            continue;
        }
        let Some(info) = ev.int("xid").and_then(|code| ctx.kb.xid(code)) else {
            continue;
        };
        if info.class != "app" {
            continue;
        }
        let f = by_host.entry(place.host.clone()).or_default();
        f.gpus.extend(place.pci.clone());
        f.ranks.extend(place.ranks.iter().copied());
        let head = format!("Xid {}: {}", info.code, info.name);
        f.first.get_or_insert_with(|| head.clone());
        let why =
            format!("the program faulted on its GPU ({head}): its process lost its CUDA context");
        f.lines
            .push((WEIGHT * time_factor(ctx, window, idx), idx, why));
    }
    by_host
        .into_iter()
        .map(|(host, f)| hypothesis(host, f))
        .collect()
}

fn hypothesis(host: Option<String>, mut f: HostFaults) -> Hypothesis {
    let mut h = Hypothesis::new(CauseKind::ProcessCrash);
    let on = host.as_ref().map_or(String::new(), |h| format!(" on {h}"));
    let who = match (f.ranks.len(), f.ranks.first()) {
        (1, Some(r)) => {
            h.value("rank", r.to_string());
            format!("Rank {r}{on}")
        }
        (0, _) if f.gpus.len() == 1 => format!(
            "The process on GPU {}{on}",
            f.gpus.first().map_or("?", String::as_str)
        ),
        _ => format!("The processes{on}"),
    };
    let first = f.first.take().unwrap_or_default();
    let reason = if f.gpus.len() > 1 {
        format!(
            "their program faulted on {} GPUs alike ({first}): the job's code, not the GPUs",
            f.gpus.len()
        )
    } else {
        format!("it faulted on its GPU ({first}); the GPU is fine")
    };
    if f.gpus.len() == 1 {
        h.gpu_bus_id = f.gpus.pop_first();
    }
    h.host = host;
    h.ranks = f.ranks;
    h.value("who", who);
    h.value("reason", reason);
    f.lines
        .sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (w, idx, why) in f.lines.into_iter().take(CITED) {
        h.support(Source::Kernel, w, Some(idx), why);
    }
    h
}
