//! The program's own faults on its GPUs: app-class Xids (an out-of-bounds
//! access, an MMU fault at an illegal address: Xid 13, 31 …) say the process
//! using the GPU faulted and lost its CUDA context, on a GPU that is fine.
//! That is the process's crash, of the rank on that GPU, not a GPU fault;
//! faults on several GPUs of a host alike are the job's code (one kernel
//! computing a bad address everywhere), told as one crash of those ranks.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::kernel::KernelPlace;
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
        if info.class != "app" || another_tenants(ctx, ev, place) {
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

/// A fault on a GPU none of the host's ranks uses, in a process none of them
/// is: another job's (a shared node), however it ended.
fn another_tenants(ctx: &Ctx<'_>, ev: &crate::model::Event, place: &KernelPlace) -> bool {
    let (Some(host), Some(pci)) = (place.host.as_deref(), place.pci.as_deref()) else {
        return false;
    };
    if !place.ranks.is_empty() {
        return false;
    }
    let on_host: Vec<&crate::model::RankInfo> = ctx
        .job
        .ranks
        .values()
        .filter(|r| r.host.as_deref().map(short_host_of).as_deref() == Some(host))
        .collect();
    let gpus_known = !on_host.is_empty() && on_host.iter().all(|r| r.gpu_bus_id.is_some());
    let pid = ev.int("pid").and_then(|p| u32::try_from(p).ok());
    let ours = |r: &&crate::model::RankInfo| {
        r.gpu_bus_id.as_deref() == Some(pci) || (pid.is_some() && r.pid == pid)
    };
    gpus_known && !on_host.iter().any(ours)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Job, RankInfo, RawTime, Value};

    #[test]
    fn an_xid_on_a_gpu_and_pid_no_rank_of_its_host_uses_is_another_tenants() {
        // Two ranks on n1 at 3b and 5d; the Xid 13 names bus 3b (ours) or
        // ba with a pid of no rank (a shared node's other job).
        let mut job = Job::with_ranks_on(&[(0, "n1"), (1, "n1")]);
        for (r, bus, pid) in [(0, "0000:3b:00.0", 100), (1, "0000:5d:00.0", 101)] {
            let info: &mut RankInfo = job.ranks.get_mut(&r).unwrap();
            info.gpu_bus_id = Some(bus.into());
            info.pid = Some(pid);
        }
        let ours = super::super::tests::xid(13, &[("pid", Value::Int(4242))], RawTime::None);
        let theirs = ours.clone();
        job.events = vec![ours, theirs];
        let place = |pci: &str| KernelPlace {
            host: Some("n1".into()),
            pci: Some(pci.into()),
            gpu: true,
            ..KernelPlace::default()
        };
        Ctx::over(&job, |ctx| {
            assert!(!another_tenants(
                ctx,
                &job.events[0],
                &place("0000:3b:00.0")
            ));
            assert!(another_tenants(ctx, &job.events[1], &place("0000:ba:00.0")));
        });
        // Where the host's ranks' GPUs are not all known, nothing is ruled out.
        let mut unknown = Job::with_ranks_on(&[(0, "n1"), (1, "n1")]);
        unknown.ranks.get_mut(&0).unwrap().gpu_bus_id = Some("0000:3b:00.0".into());
        Ctx::over(&unknown, |ctx| {
            assert!(!another_tenants(
                ctx,
                &job.events[1],
                &place("0000:ba:00.0")
            ));
        });
    }
}
