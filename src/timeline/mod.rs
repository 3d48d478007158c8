//! Timeline: every event on one clock.
//!
//! Sources print local wall time in different layouts, some without a year
//! (c10 ≥ 2.4, torch._logging), some with an explicit offset (journald,
//! log shippers). This first cut reads them all as the hosts' clock faces (local
//! time) and takes the year for year-less stamps from the stamps that have
//! one. Kernel uptimes are placed on the wall clock where their boot's moment
//! can be derived (`boots`). Each host's clock skew is estimated from events
//! that happen together and subtracted (`skew`). A line without a stamp keeps
//! no time of its own, but is placed at or after the last stamped line before
//! it in its file (`at_or_after`).

mod boots;
mod skew;

pub use boots::uptime_us;
pub use skew::HostOffset;

use chrono::{Datelike, NaiveDate, NaiveDateTime};
use rayon::prelude::*;

use std::collections::BTreeMap;

use crate::model::{FileId, Job, RawTime};

#[derive(Debug, Default)]
pub struct Timeline {
    /// Per event (same index as `Job::events`): its time, or for a line
    /// without a stamp the last stamped time before it in its file.
    times: Vec<Option<NaiveDateTime>>,
    /// Per event: whether `times` holds its own stamp. (One list for both
    /// kinds of time: a 16k-rank job has 700k events.)
    stamped: Vec<bool>,
    /// The year of year-less stamps; a leap-year placeholder when no stamp
    /// states one (ordering still works; rendering drops the year).
    pub year: i32,
    pub year_known: bool,
    /// Per event: the boot it belongs to within its file (kernel events).
    boots: Vec<Option<u32>>,
    /// Estimated clock offset per host (only hosts with anchors).
    pub offsets: BTreeMap<String, HostOffset>,
}

/// Placeholder year for year-less stamps: a leap year, so `Feb 29` parses.
const PLACEHOLDER_YEAR: i32 = 2000;
/// Full stamps this many days from the year-less ones' middle day count as
/// the job's days.
const NEAR_DAYS: i64 = 2;

impl Timeline {
    pub fn build(job: &Job) -> Timeline {
        let known = job_year(job);
        let year = known.unwrap_or(PLACEHOLDER_YEAR);
        let mut times: Vec<_> = job
            .events
            .par_iter()
            .map(|e| e.time.to_local(Some(year)))
            .collect();
        let boots = boots::place(job, &mut times);
        let offsets = skew::estimate(job, &times);
        correct_skew(job, &mut times, &offsets);
        let stamped = times.iter().map(Option::is_some).collect();
        fill_unstamped(job, &mut times);
        Timeline {
            times,
            stamped,
            year,
            year_known: known.is_some(),
            boots,
            offsets,
        }
    }

    /// The event's time, or for an unstamped line the time it is at or after.
    pub fn at_or_after(&self, event: usize) -> Option<NaiveDateTime> {
        self.times.get(event).copied().flatten()
    }

    /// The boot of its file a kernel event belongs to (0 = the first).
    pub fn boot_of(&self, event: usize) -> Option<u32> {
        self.boots.get(event).copied().flatten()
    }

    pub fn time_of(&self, event: usize) -> Option<NaiveDateTime> {
        match self.stamped.get(event) {
            Some(true) => self.times[event],
            _ => None,
        }
    }

    /// A stamp that is not an event's (e.g. a death assembled from several).
    pub fn resolve(&self, t: &RawTime) -> Option<NaiveDateTime> {
        t.to_local(Some(self.year))
    }

    /// A stamp from `host`'s clock, moved onto the job's clock.
    pub fn resolve_on(&self, host: Option<&str>, t: &RawTime) -> Option<NaiveDateTime> {
        let offset = host
            .and_then(|h| self.offsets.get(h))
            .map_or(0, |o| o.offset_ms);
        self.resolve(t)
            .map(|t| t - chrono::Duration::milliseconds(offset))
    }

    /// How the report prints a time.
    pub fn format(&self, t: &NaiveDateTime) -> String {
        let full = crate::model::time::format_local(t);
        if self.year_known {
            full
        } else {
            full[5..].to_string()
        }
    }
}

/// Moves every stamped event of a skewed host onto the job's clock.
fn correct_skew(
    job: &Job,
    times: &mut [Option<NaiveDateTime>],
    offsets: &BTreeMap<String, HostOffset>,
) {
    if offsets.values().all(|o| o.offset_ms == 0) {
        return;
    }
    for (i, t) in times.iter_mut().enumerate() {
        let Some(time) = t else { continue };
        let offset = skew::host_of(job, i)
            .and_then(|h| offsets.get(&h))
            .map_or(0, |o| o.offset_ms);
        *time -= chrono::Duration::milliseconds(offset);
    }
}

/// Gives each event without a stamp the last stamped time before it in the
/// same file (events are in file order).
fn fill_unstamped(job: &Job, times: &mut [Option<NaiveDateTime>]) {
    // A file's events mostly come in one run: the map is consulted only
    // where the file changes.
    let mut last: BTreeMap<FileId, NaiveDateTime> = BTreeMap::new();
    let mut run: Option<(FileId, Option<NaiveDateTime>)> = None;
    for (time, ev) in times.iter_mut().zip(&job.events) {
        let file = ev.origin.file;
        let current = match &mut run {
            Some((f, t)) if *f == file => t,
            _ => {
                if let Some((f, Some(t))) = run {
                    last.insert(f, t);
                }
                &mut run.insert((file, last.get(&file).copied())).1
            }
        };
        match *time {
            Some(t) => *current = Some(t),
            None => *time = *current,
        }
    }
}

/// The year year-less stamps belong to: of the years full stamps state, the
/// one that puts the year-less stamps' middle day nearest to the most full
/// stamps (a kernel log's boot lines may outnumber its lines from the job's
/// days, in an earlier year), then the most common, then the latest.
/// (A job spanning New Year is rare enough to get a wrong year on one side.)
fn job_year(job: &Job) -> Option<i32> {
    // Counted by day, not kept per stamp: a large job has a million stamps.
    let mut dated: BTreeMap<NaiveDate, usize> = BTreeMap::new();
    let mut yearless = [[0usize; 32]; 13];
    for e in &job.events {
        match e.time {
            RawTime::NoYear { month, day, .. } if month <= 12 && day <= 31 => {
                yearless[month as usize][day as usize] += 1;
            }
            t => {
                if let Some(local) = t.year().and_then(|_| t.to_local(None)) {
                    *dated.entry(local.date()).or_default() += 1;
                }
            }
        }
    }
    let middle = middle_day(&yearless);
    let mut by_year: BTreeMap<i32, (usize, usize)> = BTreeMap::new();
    for (day, n) in &dated {
        let e = by_year.entry(day.year()).or_default();
        e.1 += n;
    }
    for (year, (near, _)) in by_year.iter_mut() {
        let Some(mid) = middle.and_then(|(m, d)| NaiveDate::from_ymd_opt(*year, m, d)) else {
            continue;
        };
        let span =
            mid - chrono::Duration::days(NEAR_DAYS)..=mid + chrono::Duration::days(NEAR_DAYS);
        *near = dated.range(span).map(|(_, n)| n).sum();
    }
    by_year
        .into_iter()
        .map(|(year, (near, n))| (near, n, year))
        .max()
        .map(|(_, _, year)| year)
}

/// The (month, day) half the year-less stamps fall on or before.
fn middle_day(counts: &[[usize; 32]; 13]) -> Option<(u32, u32)> {
    let total: usize = counts.iter().flatten().sum();
    let mut seen = 0;
    for (m, days) in counts.iter().enumerate() {
        for (d, n) in days.iter().enumerate() {
            seen += n;
            if *n > 0 && seen * 2 >= total {
                return Some((m as u32, d as u32));
            }
        }
    }
    None
}
