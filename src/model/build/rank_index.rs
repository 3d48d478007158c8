//! Ranks by the keys other lines name a process by: host and pid, pid
//! alone, host and local rank.

use std::collections::BTreeMap;

use crate::model::Job;

/// The ranks the launcher's lines name by host and pid or local rank, each
/// the lowest rank that fits (as a search of the ranks in order would find):
/// looked up once per line, not searched (thousands of workers stopped).
pub(super) struct RankIndex<'a> {
    by_host_pid: BTreeMap<(&'a str, u32), u32>,
    by_pid: BTreeMap<u32, u32>,
    pub(super) by_host_local: BTreeMap<(&'a str, u32), u32>,
    /// Launcher task ids are the global ranks (`srun --label` with one task
    /// per rank).
    pub(super) task_ranks: bool,
}

impl<'a> RankIndex<'a> {
    pub(super) fn of(job: &'a Job) -> RankIndex<'a> {
        let mut index = RankIndex {
            by_host_pid: BTreeMap::new(),
            by_pid: BTreeMap::new(),
            by_host_local: BTreeMap::new(),
            task_ranks: job
                .events
                .iter()
                .any(|e| e.who.task.is_some() && e.who.task == e.who.rank)
                && !labels_name_other_ranks(job)
                && !labels_hold_workers(job),
        };
        for r in job.ranks.values() {
            if let Some(pid) = r.pid {
                index.by_pid.entry(pid).or_insert(r.rank);
            }
            let Some(host) = r.host.as_deref() else {
                continue;
            };
            if let Some(pid) = r.pid {
                index.by_host_pid.entry((host, pid)).or_insert(r.rank);
            }
            if let Some(local) = r.local_rank {
                index.by_host_local.entry((host, local)).or_insert(r.rank);
            }
        }
        index
    }

    /// The lowest rank with `pid` (on `host`, where one is given).
    pub(super) fn by_pid(&self, host: Option<&str>, pid: u32) -> Option<u32> {
        match host {
            Some(host) => self.by_host_pid.get(&(host, pid)).copied(),
            None => self.by_pid.get(&pid).copied(),
        }
    }
}

/// Whether the lines a launcher labelled mostly name ranks other than their
/// label: `2: [rank17]:…` under `srun --ntasks-per-node=1 torchrun`, where a
/// task is a host's agent (rank 0 under label 0 agrees only by chance).
pub(super) fn labels_name_other_ranks(job: &Job) -> bool {
    let (agree, differ) = job
        .events
        .iter()
        .filter_map(|e| Some((e.who.task?, e.who.rank?)))
        .fold((0usize, 0usize), |(a, d), (t, r)| {
            if t == r { (a + 1, d) } else { (a, d + 1) }
        });
    differ > agree
}

/// Whether a launcher's labelled lines carry torchrun's worker prefixes
/// inside (`2: [default5]:…`) or its agent's own reports (`2: … failed
/// (exitcode: 1) local_rank: 5`, `2: Root Cause …`): under `srun
/// --ntasks-per-node=1 torchrun …` each task is a host's agent, whose
/// workers are the ranks.
pub(super) fn labels_hold_workers(job: &Job) -> bool {
    use crate::model::EventKind::{
        ChildFailedField, ChildFailedRoot, ClosingSignal, ElasticAgent, WorkerFailed,
    };
    job.events.iter().any(|e| {
        e.who.task.is_some()
            && (e.who.local_rank.is_some()
                || matches!(
                    e.kind,
                    WorkerFailed
                        | ChildFailedRoot
                        | ChildFailedField
                        | ClosingSignal
                        | ElasticAgent
                ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(task: u32, rank: u32) -> crate::model::Event {
        let mut ev = crate::model::Event::with_fields(
            crate::model::EventKind::WatchdogTimeout,
            Default::default(),
        );
        ev.who.task = Some(task);
        ev.who.rank = Some(rank);
        ev
    }

    #[test]
    fn labels_of_host_agents_name_other_ranks_srun_torchrun() {
        // `srun --label --ntasks-per-node=1 torchrun …`: task 2 prints rank
        // 17's lines; task 0 printing rank 0's agrees only by chance.
        let mut job = Job::default();
        for (task, rank) in [(0, 0), (2, 17), (1, 9)] {
            job.events.push(labelled(task, rank));
        }
        assert!(labels_name_other_ranks(&job));
        assert!(!RankIndex::of(&job).task_ranks);
        let mut per_rank = Job::default();
        per_rank.events.extend((0..4).map(|r| labelled(r, r)));
        assert!(!labels_name_other_ranks(&per_rank));
        assert!(RankIndex::of(&per_rank).task_ranks);
    }

    #[test]
    fn a_launcher_line_names_the_lowest_rank_its_pid_or_local_rank_fits() {
        let mut job = Job::with_ranks_on(&[(3, "n1"), (5, "n1"), (9, "n2"), (12, "n1")]);
        let mut set = |rank: u32, pid: u32, local: u32| {
            let info = job.ranks.get_mut(&rank).unwrap();
            info.pid = Some(pid);
            info.local_rank = Some(local);
        };
        set(3, 100, 0);
        set(5, 200, 1);
        set(9, 200, 1);
        set(12, 300, 1);
        let index = RankIndex::of(&job);
        assert_eq!(index.by_pid(Some("n1"), 200), Some(5));
        assert_eq!(index.by_pid(Some("n2"), 200), Some(9));
        assert_eq!(index.by_pid(None, 200), Some(5), "any host: the lowest");
        assert_eq!(index.by_pid(Some("n2"), 300), None);
        assert_eq!(index.by_host_local.get(&("n1", 1)), Some(&5));
    }
}
