//! The torchrun agent's closing sweep: after one worker failed, it stops the
//! survivors one line each (`Sending process P closing signal SIGTERM`,
//! `Closing process P via signal SIGTERM`), walking its workers in the order
//! it spawned them, which is local-rank order (torch.distributed.elastic's
//! `SubprocessContext._close` walks its handlers, a dict keyed by local
//! rank and filled in order; it skips workers that already exited, which
//! the agent reports as failed). With the failed workers' local ranks, the
//! sweep states every survivor's local rank: with NCCL_DEBUG=WARN the only
//! tie between a stopped pid and its rank.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{EventKind, Job, Sym};

use super::identity::{HostPid, host_offsets, one_agent_hosts};

/// One agent's sweep: its host and the pids in the order it named them.
struct Sweep {
    host: Sym,
    pids: Vec<u32>,
}

/// (host, pid) → rank for the survivors of every sweep that accounts for
/// all of its host's workers: the survivors and the failed ones together
/// are at least as many as the local ranks any host is known to have. A
/// survivor's rank is its host's known one for its local rank, or the
/// host's rank offset plus it; a sweep that disagrees with a pid already
/// tied to a rank ties nothing.
pub(super) fn swept_pid_ranks(
    job: &Job,
    by_pid: &BTreeMap<HostPid, u32>,
    by_local: &BTreeMap<HostPid, u32>,
    failed_locals: &BTreeMap<Sym, BTreeSet<u32>>,
) -> Vec<(HostPid, u32)> {
    let offsets = host_offsets(by_local, &one_agent_hosts(job));
    let locals_per_host = by_local.keys().map(|(_, l)| l + 1).max().unwrap_or(0) as usize;
    let mut out = Vec::new();
    let none_failed = BTreeSet::new();
    for sweep in sweeps(job) {
        let Some(failed) = failed_locals.get(&sweep.host) else {
            continue;
        };
        // DeepSpeed's launcher kills every worker, the failed one too
        // (`Killing subprocess P`, in spawn order): a sweep of as many
        // pids as the host has workers lists them all.
        let failed = if sweep.pids.len() == locals_per_host {
            &none_failed
        } else {
            failed
        };
        let n = sweep.pids.len() + failed.len();
        if n < locals_per_host || failed.iter().any(|&l| l as usize >= n) {
            continue;
        }
        let rank_of = |local: u32| {
            by_local
                .get(&(sweep.host.clone(), local))
                .copied()
                .or_else(|| {
                    let base = offsets.get(&*sweep.host)?;
                    u32::try_from(base + i64::from(local)).ok()
                })
        };
        if let Some(tied) = tie(&sweep, n, failed, rank_of, by_pid) {
            out.extend(tied);
        }
    }
    out
}

/// The ties one sweep states: survivors take the local ranks below `n`
/// that did not fail, in order.
fn tie(
    sweep: &Sweep,
    n: usize,
    failed: &BTreeSet<u32>,
    rank_of: impl Fn(u32) -> Option<u32>,
    by_pid: &BTreeMap<HostPid, u32>,
) -> Option<Vec<(HostPid, u32)>> {
    let distinct = sweep.pids.iter().collect::<BTreeSet<_>>().len() == sweep.pids.len();
    if !distinct {
        return None;
    }
    let survivors = (0..n as u32).filter(|l| !failed.contains(l));
    let mut tied = Vec::with_capacity(sweep.pids.len());
    for (&pid, local) in sweep.pids.iter().zip(survivors) {
        let rank = rank_of(local)?;
        let key = (sweep.host.clone(), pid);
        if by_pid.get(&key).is_some_and(|&r| r != rank) {
            return None;
        }
        tied.push((key, rank));
    }
    Some(tied)
}

/// The sweeps in the logs: an agent's closing lines in one file, on a host
/// that had exactly one sweep (an agent that restarted its workers swept
/// several generations of pids; those are left alone).
fn sweeps(job: &Job) -> Vec<Sweep> {
    // Per agent: its sweeps, each a run of closing lines with nothing
    // between them, stamped within a minute of each other (a restarted
    // agent's next sweep follows a new generation of workers, often with
    // no line of its own between).
    type Run = (u64, Option<chrono::NaiveDateTime>, Vec<u32>);
    let mut by_agent: BTreeMap<(u32, Sym, Option<u32>), Vec<Run>> = BTreeMap::new();
    for (_, ev) in job.events_where(|k| k == EventKind::ClosingSignal) {
        let pid = ev.int("worker_pid").or(ev.int("worker_pid2"));
        let (Some(host), Some(pid)) =
            (ev.who.host.clone(), pid.and_then(|p| u32::try_from(p).ok()))
        else {
            continue;
        };
        let runs = by_agent
            .entry((ev.origin.file.0, host, ev.who.pid))
            .or_default();
        let (line, at) = (ev.origin.line, ev.time.to_local(Some(2000)));
        let same_sweep = |last: u64, then: Option<chrono::NaiveDateTime>| {
            let close = match (then, at) {
                (Some(a), Some(b)) => (b - a).num_seconds().abs() <= 60,
                _ => true,
            };
            line <= last + 1 && close
        };
        match runs.last_mut() {
            Some((last, then, pids)) if same_sweep(*last, *then) => {
                pids.push(pid);
                *last = line;
                *then = at.or(*then);
            }
            _ => runs.push((line, at, vec![pid])),
        }
    }
    // The same agent lines kept in two files (a console and its copy) are
    // one sweep.
    let mut per_host: BTreeMap<Sym, BTreeSet<Vec<u32>>> = BTreeMap::new();
    for ((_, host, _), runs) in by_agent {
        per_host
            .entry(host)
            .or_default()
            .extend(runs.into_iter().map(|(_, _, pids)| pids));
    }
    per_host
        .into_iter()
        .filter(|(_, lists)| lists.len() == 1)
        .filter_map(|(host, lists)| {
            let pids = lists.into_iter().next()?;
            Some(Sweep { host, pids })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(pids: &[u32]) -> Sweep {
        Sweep {
            host: Sym::new("node001"),
            pids: pids.to_vec(),
        }
    }

    fn closing(line: u64, hh_mm: (u32, u32), pid: u32) -> crate::model::Event {
        use crate::model::{Fields, Value};
        let mut ev = crate::model::Event::with_fields(
            EventKind::ClosingSignal,
            Fields::from_sorted([("worker_pid", Value::Int(pid.into()))]),
        );
        ev.origin.line = line;
        ev.who.host = Some(Sym::new("gpu-b07"));
        let at = chrono::NaiveTime::from_hms_opt(hh_mm.0, hh_mm.1, 0).unwrap();
        ev.time = crate::model::RawTime::NoYear {
            month: 11,
            day: 4,
            time: at,
        };
        ev
    }

    /// torchrun with `--max-restarts=1`: its console holds the sweep of
    /// each generation, on adjacent lines when the restart printed nothing
    /// between them; half an hour apart they are two sweeps, not one of
    /// fourteen workers (which would tie pids to another host's ranks).
    #[test]
    fn sweeps_of_two_worker_generations_stay_apart_torch_2_4() {
        let mut job = Job::default();
        for (i, pid) in (88211..88219).enumerate() {
            job.events.push(closing(5 + i as u64, (2, 31), pid));
        }
        for (i, pid) in [90102, 90103, 90104, 90105, 90108, 90109]
            .into_iter()
            .enumerate()
        {
            job.events.push(closing(13 + i as u64, (3, 6), pid));
        }
        job.index_kinds();
        assert!(
            sweeps(&job).is_empty(),
            "a restarted agent's sweeps tie nothing"
        );
        job.events.truncate(8);
        job.index_kinds();
        assert_eq!(sweeps(&job).len(), 1);
    }

    /// DeepSpeed's `sigkill_handler` kills every worker of its host, the
    /// one that failed (local 0) too: four pids of a host of four workers
    /// are locals 0–3, not the survivors 1–4.
    #[test]
    fn a_sweep_of_every_worker_counts_the_failed_one_among_them_deepspeed() {
        let mut job = Job::default();
        for (i, pid) in (31503..31507).enumerate() {
            job.events.push(closing(40 + i as u64, (1, 41), pid));
        }
        job.index_kinds();
        let host = Sym::new("gpu-b07");
        let by_local: BTreeMap<HostPid, u32> =
            (0..4).map(|l| ((host.clone(), l), 16 + l)).collect();
        let failed = BTreeMap::from([(host.clone(), BTreeSet::from([0]))]);
        let tied: BTreeMap<u32, u32> = swept_pid_ranks(&job, &BTreeMap::new(), &by_local, &failed)
            .into_iter()
            .map(|((_, pid), rank)| (pid, rank))
            .collect();
        assert_eq!(tied.get(&31503), Some(&16));
        assert_eq!(tied.get(&31506), Some(&19));
    }

    #[test]
    fn survivors_take_the_local_ranks_that_did_not_fail_in_order() {
        let failed = BTreeSet::from([1]);
        let tied = tie(
            &sweep(&[700, 702, 703]),
            4,
            &failed,
            |l| Some(8 + l),
            &BTreeMap::new(),
        );
        let ranks: Vec<(u32, u32)> = tied
            .unwrap()
            .into_iter()
            .map(|((_, p), r)| (p, r))
            .collect();
        assert_eq!(ranks, [(700, 8), (702, 10), (703, 11)]);
    }

    #[test]
    fn a_pid_known_as_another_rank_voids_the_sweep() {
        let failed = BTreeSet::from([1]);
        let known = BTreeMap::from([((Sym::new("node001"), 702), 11)]);
        assert!(
            tie(
                &sweep(&[700, 702, 703]),
                4,
                &failed,
                |l| Some(8 + l),
                &known
            )
            .is_none()
        );
        assert!(
            tie(
                &sweep(&[700, 700, 703]),
                4,
                &failed,
                |l| Some(8 + l),
                &BTreeMap::new()
            )
            .is_none()
        );
    }
}
