//! Runs of a job appended to one file: Slurm's `--requeue` with
//! `--open-mode=append`, a wrapper that loops over restarts, a console kept
//! across elastic restarts. The failure of interest is the last run's; an
//! earlier run's errors in the same file would be read as this run's.
//!
//! A run ends in lines that end processes (a watchdog's report, a worker's
//! death, the launcher's notice of a task that exited, a cancelled step).
//! The next one is seen starting when a worker states again, after such a
//! line, what it stated when it first started: its rank (a script's start-up
//! print), or its place in a communicator of the same size (NCCL's init
//! line, from another process: a new pid). Everything up to the last ending
//! line before that restart belongs to the earlier run. A kind of statement
//! that repeats within a run (a script printing its rank every step) says
//! nothing of restarts and is not read for them.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Event, EventKind};

/// What a worker states once per run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    /// A script's statement of its global rank.
    Rank(i64),
    /// NCCL's init line: rank, communicator size, phase.
    Comm(i64, i64, Option<Box<str>>),
}

/// The index of the first event of the file's last run, where an earlier
/// run precedes it.
pub fn last_run_start(events: &[Event]) -> Option<usize> {
    // Each statement and the process that first made it.
    let mut started: BTreeMap<Start, Option<u32>> = BTreeMap::new();
    let mut repeating: BTreeSet<&'static str> = BTreeSet::new();
    // Where each process first wrote: one that wrote before the last
    // ending line was running then, and a restarted worker is a new one.
    let mut first_line: BTreeMap<u32, usize> = BTreeMap::new();
    let mut last_end: Option<usize> = None;
    let mut cut = None;
    for (i, e) in events.iter().enumerate() {
        if let Some(pid) = e.who.pid {
            first_line.entry(pid).or_insert(i);
        }
        if ends_a_process(e) {
            last_end = Some(i);
            continue;
        }
        let Some(start) = start_of(e).filter(|_| !repeating.contains(e.pattern)) else {
            continue;
        };
        let Some(&first_pid) = started.get(&start) else {
            started.insert(start, e.who.pid);
            continue;
        };
        match (last_end, first_pid, e.who.pid) {
            // The same process again (one line in two forms), or another
            // process of the same run (a second group of that size).
            (_, Some(a), Some(b)) if a == b => {}
            (None, Some(_), Some(_)) => {}
            (None, _, _) => {
                repeating.insert(e.pattern);
            }
            // A process that was running before the failure: the same run.
            (Some(end), _, Some(pid)) if first_line.get(&pid).is_some_and(|&at| at <= end) => {}
            (Some(end), _, _) => {
                cut = Some(end + 1);
                started.clear();
                last_end = None;
                started.insert(start, e.who.pid);
            }
        }
    }
    cut
}

fn start_of(e: &Event) -> Option<Start> {
    match e.kind {
        EventKind::TorchInfo => e.int("global_rank").map(Start::Rank),
        EventKind::NcclCommInit => Some(Start::Comm(
            e.int("rank")?,
            e.int("nranks")?,
            e.text_field("phase").map(Box::from),
        )),
        _ => None,
    }
}

/// Lines after which a process of the run is gone: a run that printed one
/// and then starts again has restarted.
fn ends_a_process(e: &Event) -> bool {
    matches!(
        e.kind,
        EventKind::WatchdogTimeout
            | EventKind::WatchdogException
            | EventKind::WorkerFailed
            | EventKind::ChildFailedRoot
            | EventKind::TaskExited
            | EventKind::ProcessSignaled
            | EventKind::JobCancelled
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, Value};

    fn ev(kind: EventKind, fields: &[(&str, Value)]) -> Event {
        Event::with_fields(kind, Fields::from_sorted(fields.iter().cloned()))
    }

    fn rank(r: i64) -> Event {
        ev(EventKind::TorchInfo, &[("global_rank", Value::Int(r))])
    }

    fn init(r: i64, n: i64, pid: u32) -> Event {
        let mut e = ev(
            EventKind::NcclCommInit,
            &[
                ("nranks", Value::Int(n)),
                ("phase", Value::Text("START".into())),
                ("rank", Value::Int(r)),
            ],
        );
        e.who.pid = Some(pid);
        e
    }

    fn timeout() -> Event {
        ev(EventKind::WatchdogTimeout, &[])
    }

    /// Slurm `--requeue --open-mode=append`: two rounds of the same ranks'
    /// start-up lines, the first round's timeouts and srun's report of the
    /// exited tasks between them.
    #[test]
    fn a_second_round_of_start_lines_after_a_failure_starts_the_last_run_slurm() {
        let events = vec![
            rank(0),
            rank(1),
            timeout(),
            ev(EventKind::TaskExited, &[]),
            ev(EventKind::TrainingStep, &[]),
            rank(0),
            rank(1),
            timeout(),
        ];
        assert_eq!(last_run_start(&events), Some(4));
    }

    /// One run creates communicators of one size for several groups (rank
    /// 0 of two groups of four: two processes), its processes' lines
    /// interleaved with another's timeout in one console: no restart. A
    /// process new since the failure in the same place is one.
    #[test]
    fn communicators_of_one_run_and_its_final_failure_are_one_run_nccl_2_21() {
        let events = vec![
            init(0, 8, 10),
            init(0, 4, 10),
            init(4, 8, 14),
            timeout(),
            init(0, 4, 14),
            init(0, 8, 10),
            timeout(),
        ];
        assert_eq!(last_run_start(&events), None);
        let restarted = vec![
            init(0, 8, 10),
            timeout(),
            init(1, 8, 11),
            init(0, 8, 20),
            timeout(),
        ];
        assert_eq!(last_run_start(&restarted), Some(2));
    }

    /// A script that prints its rank with every step: its statements
    /// repeat within the run and mark no restart after a timeout.
    #[test]
    fn statements_a_run_repeats_mark_no_restart() {
        let events = vec![rank(3), rank(3), timeout(), rank(3), timeout()];
        assert_eq!(last_run_start(&events), None);
    }
}
