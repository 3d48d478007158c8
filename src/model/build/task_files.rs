//! One output file per task: `srun --output=logs/%x-%j-%t.out` (or mpirun's
//! `--output-filename`) names each file by the task's number, which is its
//! rank where every task is one rank. A line such a file holds without its
//! own rank prefix (NCCL's WARN at `NCCL_DEBUG=WARN`, torch 2.1's untagged
//! watchdog lines) is that rank's.
//!
//! Only a whole set is read so: files alike but for a trailing number that
//! runs 0, 1, … without a gap, four or more, each written by one process
//! (a host's file holds several), none of whose lines names another rank.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::model::{FileId, Job};

static NUMBERED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<stem>.*[-_.])(?P<n>\d{1,6})(?P<ext>\.(?:out|log|err|txt))?$").unwrap()
});

/// Fewer files than this could be a few hosts' numbered files.
const MIN_SET: usize = 4;

/// Gives each numbered task file's rank to its lines that name none.
pub(super) fn assign_ranks(job: &mut Job) {
    let ranks = task_file_ranks(job);
    if ranks.is_empty() {
        return;
    }
    for ev in &mut job.events {
        if ev.who.rank.is_none()
            && let Some(&rank) = ranks.get(&ev.origin.file)
        {
            ev.who.rank = Some(rank);
        }
    }
}

/// File → the rank its number names, for every complete set.
fn task_file_ranks(job: &Job) -> BTreeMap<FileId, u32> {
    let mut sets: BTreeMap<(&str, &str), Vec<(u32, FileId)>> = BTreeMap::new();
    for f in &job.files {
        if f.hints.rank.is_some() || f.hints.local_rank.is_some() {
            continue;
        }
        let Some(c) = NUMBERED.captures(&f.path) else {
            continue;
        };
        let (Some(stem), Some(n)) = (c.name("stem"), c["n"].parse::<u32>().ok()) else {
            continue;
        };
        let ext = c.name("ext").map_or("", |m| m.as_str());
        sets.entry((stem.as_str(), ext))
            .or_default()
            .push((n, f.id));
    }
    let writers = writers_by_file(job);
    let mut out = BTreeMap::new();
    for mut set in sets.into_values() {
        set.sort_unstable();
        let gapless = set.iter().enumerate().all(|(i, &(n, _))| n as usize == i);
        let one_process_each = set.iter().all(|&(n, file)| {
            writers
                .get(&file)
                .is_none_or(|w| w.pids.len() <= 1 && w.ranks.iter().all(|&r| r == n))
        });
        if set.len() >= MIN_SET && gapless && one_process_each {
            out.extend(set.into_iter().map(|(n, file)| (file, n)));
        }
    }
    out
}

#[derive(Default)]
struct Writers {
    pids: BTreeSet<u32>,
    ranks: BTreeSet<u32>,
}

fn writers_by_file(job: &Job) -> BTreeMap<FileId, Writers> {
    let mut out: BTreeMap<FileId, Writers> = BTreeMap::new();
    for ev in &job.events {
        let w = out.entry(ev.origin.file).or_default();
        w.pids.extend(ev.who.pid);
        w.ranks.extend(ev.who.rank);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventKind, FileInfo};

    fn file(id: u32, path: &str) -> FileInfo {
        FileInfo {
            id: FileId(id),
            path: path.into(),
            bytes: 0,
            lines: 0,
            matched_lines: 0,
            truncated_lines: 0,
            lossy_lines: 0,
            hints: Default::default(),
            multiplexed: false,
            ray_actor_lines: Default::default(),
        }
    }

    fn line(file: u32, pid: Option<u32>, rank: Option<u32>) -> Event {
        let mut ev = Event::with_fields(EventKind::IbAsyncEvent, Default::default());
        ev.origin.file = FileId(file);
        ev.who.pid = pid;
        ev.who.rank = rank;
        ev
    }

    #[test]
    fn srun_output_per_task_gives_its_number_as_the_rank_slurm_percent_t() {
        let mut files: Vec<FileInfo> = (0..6)
            .map(|i| file(i, &format!("logs/llm13b-99812-{i}.out")))
            .collect();
        files.push(file(6, "logs/slurm-99812.out"));
        let mut job = Job {
            files,
            events: vec![line(5, Some(35581), None), line(6, None, None)],
            ..Job::default()
        };
        assign_ranks(&mut job);
        assert_eq!(job.events[0].who.rank, Some(5));
        assert_eq!(job.events[1].who.rank, None, "not of the set");
    }

    #[test]
    fn a_set_with_a_gap_or_a_shared_file_names_no_rank() {
        // Hosts' files (several processes each) or a set missing a number.
        let mut job = Job {
            files: (0..5).map(|i| file(i, &format!("node-{i}.log"))).collect(),
            events: vec![line(2, Some(1), None), line(2, Some(2), None)],
            ..Job::default()
        };
        assign_ranks(&mut job);
        assert_eq!(job.events[0].who.rank, None);
        let mut gap = Job {
            files: [0, 1, 2, 4, 5]
                .iter()
                .map(|&i| file(i, &format!("task_{i}.out")))
                .collect(),
            events: vec![line(4, Some(1), None)],
            ..Job::default()
        };
        assign_ranks(&mut gap);
        assert_eq!(gap.events[0].who.rank, None);
    }
}
