//! A rank's last line: what the report shows as "this is where it stopped".

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDateTime;

use crate::model::Job;
use crate::timeline::Timeline;

/// A line's place in its rank's output: its time (or the time it is at or
/// after), then its position.
type Place = (Option<NaiveDateTime>, usize);

/// A rank's latest line in files of its own, and in files a launcher merged
/// from many processes.
#[derive(Default)]
struct Latest {
    own: Option<Place>,
    merged: Option<Place>,
}

impl Latest {
    /// The merged file's line only when both times say it came later: a
    /// launcher prints start-up lines for every rank (sorted after the
    /// ranks' own files), while a rank's own file often has no stamps.
    fn last(&self) -> Option<usize> {
        match (self.own, self.merged) {
            (Some((Some(own), _)), Some((Some(merged), i))) if merged > own => Some(i),
            (Some((_, i)), _) | (None, Some((_, i))) => Some(i),
            (None, None) => None,
        }
    }
}

/// The last line of each of `ranks`, in one pass over the events (a large
/// hang has thousands of silent ranks and a million events).
pub fn last_lines<'a>(
    job: &Job,
    timeline: &Timeline,
    ranks: impl IntoIterator<Item = &'a u32>,
) -> BTreeMap<u32, usize> {
    let wanted: BTreeSet<u32> = ranks.into_iter().copied().collect();
    let mut latest: BTreeMap<u32, Latest> = BTreeMap::new();
    for (i, e) in job.events.iter().enumerate() {
        let Some(rank) = e.who.rank.filter(|r| wanted.contains(r)) else {
            continue;
        };
        let own = job
            .files
            .get(e.origin.file.0 as usize)
            .is_some_and(|f| !f.multiplexed);
        let slots = latest.entry(rank).or_default();
        let slot = if own {
            &mut slots.own
        } else {
            &mut slots.merged
        };
        let place = (timeline.at_or_after(i), i);
        if slot.is_none_or(|best| place > best) {
            *slot = Some(place);
        }
    }
    latest
        .into_iter()
        .filter_map(|(rank, l)| Some((rank, l.last()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventKind, FileId, FileInfo, Origin, RawTime};

    fn line(file: u32, line: u64, rank: u32, at: Option<&str>) -> Event {
        let mut e = Event {
            kind: EventKind::TorchInfo,
            pattern: "test",
            origin: Origin {
                file: FileId(file),
                line,
            },
            who: Default::default(),
            level: Default::default(),
            time: at.map_or(RawTime::None, |t| {
                RawTime::Local(NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S").unwrap())
            }),
            fields: Default::default(),
            text: "".into(),
        };
        e.who.rank = Some(rank);
        e
    }

    fn file(id: u32, multiplexed: bool) -> FileInfo {
        FileInfo {
            id: FileId(id),
            multiplexed,
            ..Default::default()
        }
    }

    #[test]
    fn a_ranks_own_file_outranks_a_launcher_log_unless_both_times_say_otherwise() {
        // Files 0 and 2 are ranks 3's and 4's own (3's lines unstamped, 4's
        // stamped); file 1 the launcher's, listed after them. Rank 3's
        // launcher line has a time its own lines lack: its own last line
        // stands. Rank 4's launcher line is later by both clocks: it wins.
        // Rank 5 only appears in the launcher log, where its later stamp
        // wins over its later position.
        let job = Job {
            files: vec![file(0, false), file(1, true), file(2, false)],
            events: vec![
                line(0, 1, 3, None),
                line(0, 2, 3, None),
                line(2, 1, 4, Some("2026-11-30 10:00:02")),
                line(2, 2, 4, Some("2026-11-30 10:00:03")),
                line(1, 1, 5, Some("2026-11-30 10:00:09")),
                line(1, 2, 3, Some("2026-11-30 10:00:00")),
                line(1, 3, 5, Some("2026-11-30 10:00:01")),
                line(1, 4, 4, Some("2026-11-30 10:00:05")),
                line(1, 5, 4, Some("2026-11-30 10:00:01")),
            ],
            ..Job::default()
        };
        let timeline = Timeline::build(&job);
        let last = last_lines(&job, &timeline, &[3, 4, 5, 7]);
        assert_eq!(last, BTreeMap::from([(3, 1), (4, 7), (5, 4)]));
    }
}
