//! Communicator init lines, read once for the steps that ask about them.
//!
//! Every rank prints a dozen (196 k lines at 16k ranks); rank resolution and
//! the tree links ask about them in several walks, and each field lookup
//! there is a cache miss: their few facts are read in one walk instead.

use crate::model::{EventIdx, EventKind, Job};

/// How far from a `Trees` line its communicator's init line may be.
const INIT_SEARCH: usize = 64;

/// What the model reads of one init line.
pub(super) struct InitLine {
    pub idx: EventIdx,
    pub nranks: Option<i64>,
    /// The layout line of NCCL 2.21+ (`localRank`).
    pub layout: bool,
    /// `Init COMPLETE`.
    pub complete: bool,
}

/// The job's init lines in event order.
pub(super) struct InitLines {
    pub lines: Vec<InitLine>,
}

impl InitLines {
    pub fn of(job: &Job) -> InitLines {
        let lines = job
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EventKind::NcclCommInit)
            .map(|(idx, e)| {
                let phase = e.text_field("phase");
                InitLine {
                    idx,
                    nranks: e.int("nranks"),
                    layout: phase == Some("LAYOUT"),
                    complete: phase == Some("COMPLETE"),
                }
            })
            .collect();
        InitLines { lines }
    }

    /// The size of the communicator a line at `idx` was printed for: from
    /// the next `Init COMPLETE`, else the last init line before it, in the
    /// same file and at most [`INIT_SEARCH`] events away. `None` where
    /// neither is near (an init that failed on NCCL < 2.18.3).
    pub fn comm_nranks(&self, job: &Job, idx: EventIdx) -> Option<i64> {
        let file = job.events.get(idx)?.origin.file;
        // A file's events are contiguous: an init line in the same file
        // has only that file's events between it and `idx`.
        let same_file = |l: &&InitLine| job.events[l.idx].origin.file == file;
        let next = self.lines.partition_point(|l| l.idx <= idx);
        let after = self.lines.get(next).filter(|l| l.idx - idx <= INIT_SEARCH);
        let after = after.filter(same_file).filter(|l| l.complete);
        let before = || {
            let last = self.lines[..next].iter().rfind(|l| l.idx < idx)?;
            Some(last)
                .filter(|l| idx - l.idx <= INIT_SEARCH)
                .filter(same_file)
        };
        after.or_else(before).and_then(|l| l.nranks)
    }
}

/// Finds the init line of each event a walk in event order meets.
pub(super) struct InitCursor<'a> {
    lines: &'a [InitLine],
    at: usize,
}

impl<'a> InitCursor<'a> {
    pub fn new(lines: &'a [InitLine]) -> Self {
        InitCursor { lines, at: 0 }
    }

    /// The init line at `idx`, if that event is one; `idx` must not go back.
    pub fn at(&mut self, idx: EventIdx) -> Option<&'a InitLine> {
        while self.lines.get(self.at).is_some_and(|l| l.idx < idx) {
            self.at += 1;
        }
        self.lines.get(self.at).filter(|l| l.idx == idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Fields, FileId, Origin, Value};

    fn line(file: u32, kind: EventKind, phase: &str, nranks: i64) -> Event {
        let fields = if kind == EventKind::NcclCommInit {
            Fields::from_sorted([
                ("nranks", Value::Int(nranks)),
                ("phase", Value::Text(phase.into())),
            ])
        } else {
            Fields::default()
        };
        Event {
            kind,
            pattern: "test",
            origin: Origin {
                file: FileId(file),
                line: 0,
            },
            who: Default::default(),
            level: Default::default(),
            time: Default::default(),
            fields,
            text: "".into(),
        }
    }

    #[test]
    fn a_trees_line_takes_the_next_complete_init_else_the_last_one_of_its_file() {
        use EventKind::{NcclChannel as Other, NcclCommInit as Init, NcclTrees as Trees};
        let mut events = vec![
            line(0, Init, "START", 8),     // 0
            line(0, Trees, "", 0),         // 1: the COMPLETE at 3
            line(0, Other, "", 0),         // 2
            line(0, Init, "COMPLETE", 16), // 3
            line(0, Trees, "", 0),         // 4: next init is a START: the one before
            line(0, Init, "START", 4),     // 5
            line(1, Trees, "", 0),         // 6: another file's init is not its own
            line(2, Init, "COMPLETE", 2),  // 7
            line(3, Trees, "", 0),         // 8: none near
        ];
        events.extend((0..INIT_SEARCH).map(|_| line(3, Other, "", 0)));
        events.push(line(3, Init, "COMPLETE", 32));
        let job = Job {
            events,
            ..Job::default()
        };
        let inits = InitLines::of(&job);
        let nranks = |idx| inits.comm_nranks(&job, idx);
        assert_eq!(nranks(1), Some(16));
        assert_eq!(nranks(4), Some(16));
        assert_eq!(nranks(6), None);
        assert_eq!(nranks(8), None, "an init 65 events on is too far");
        assert_eq!(nranks(9), Some(32), "one 64 events on is near");
    }
}
