//! Timeline: every event on one clock.
//!
//! Sources print local wall time in different layouts, some without a year
//! (c10 ≥ 2.4, torch._logging), some with an explicit offset (journald,
//! log shippers). This first cut reads them all as the hosts' clock faces (local
//! time), takes the year for year-less stamps from the stamps that have one,
//! and leaves lines without a stamp unplaced. Per-host skew estimation comes
//! with the diagnosis engine (docs/design.md, step 5). Kernel uptimes are
//! placed on the wall clock where their boot's moment can be derived
//! (`boots`).

mod boots;

pub use boots::uptime_us;

use chrono::NaiveDateTime;

use crate::model::{Job, RawTime};

#[derive(Debug, Default)]
pub struct Timeline {
    /// Per event (same index as `Job::events`): its time, when it has one.
    times: Vec<Option<NaiveDateTime>>,
    /// The year of year-less stamps; a leap-year placeholder when no stamp
    /// states one (ordering still works; rendering drops the year).
    pub year: i32,
    pub year_known: bool,
    /// Per event: the boot it belongs to within its file (kernel events).
    boots: Vec<Option<u32>>,
}

/// Placeholder year for year-less stamps: a leap year, so `Feb 29` parses.
const PLACEHOLDER_YEAR: i32 = 2000;

impl Timeline {
    pub fn build(job: &Job) -> Timeline {
        let known = job_year(job);
        let year = known.unwrap_or(PLACEHOLDER_YEAR);
        let mut times: Vec<_> = job
            .events
            .iter()
            .map(|e| e.time.to_local(Some(year)))
            .collect();
        let boots = boots::place(job, &mut times);
        Timeline {
            times,
            year,
            year_known: known.is_some(),
            boots,
        }
    }

    /// The boot of its file a kernel event belongs to (0 = the first).
    pub fn boot_of(&self, event: usize) -> Option<u32> {
        self.boots.get(event).copied().flatten()
    }

    pub fn time_of(&self, event: usize) -> Option<NaiveDateTime> {
        self.times.get(event).copied().flatten()
    }

    /// A stamp that is not an event's (e.g. a death assembled from several).
    pub fn resolve(&self, t: &RawTime) -> Option<NaiveDateTime> {
        t.to_local(Some(self.year))
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

/// The year year-less stamps belong to: the most common year among full stamps.
/// (A job spanning New Year is rare enough to get a wrong year on one side.)
fn job_year(job: &Job) -> Option<i32> {
    let mut counts = std::collections::BTreeMap::new();
    for e in &job.events {
        if let Some(y) = e.time.year() {
            *counts.entry(y).or_insert(0usize) += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(y, _)| y)
}
