//! Work a process was still doing when the others gave up waiting: its
//! progress bar (preprocessing, tokenizing, indexing a dataset, validation
//! on one rank) had already run as long as the collective's timeout, and had
//! not finished. The process printing it never entered the collective.

use std::collections::BTreeSet;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind};

use super::Ctx;
use super::application::{name_the_hung_collective, on_the_ranks};

/// How long a bar must have run, as shares of the timeout. The work that
/// kept one process away began about when the others entered the collective
/// (both follow the job's start or the same step), so at the watchdog it had
/// run about the timeout: at least 0.9 of it (the watchdog fires on its own
/// clock, the bar rounds to the second) and not much more. A training loop's
/// own bar stops when the loop hangs, after however long the epoch had run:
/// only by chance that long.
const SHARE_OF_TIMEOUT: std::ops::RangeInclusive<f64> = 0.9..=1.25;

pub(super) fn busy_past_the_timeout(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let timeout_ms = ctx
        .job
        .events_where(|k| k == EventKind::WatchdogTimeout)
        .filter(|(_, e)| hang.seq.is_none() || e.int("seq").is_none_or(|s| Some(s) == hang.seq))
        .filter_map(|(_, e)| e.int("timeout_ms"))
        .max()?;
    let (idx, bar) = ctx
        .job
        .events_where(|k| k == EventKind::ProgressBar)
        .filter(|(_, e)| unfinished(e))
        .filter(|(_, e)| e.who.rank.is_none_or(|r| !hang.timed_out.contains(&r)))
        .filter(|(_, e)| {
            elapsed_s(e).is_some_and(|s| {
                SHARE_OF_TIMEOUT.contains(&(s as f64 * 1000.0 / timeout_ms as f64))
            })
        })
        .last()?;
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    h.value("variant", "busy");
    // A bar no prefix ties to a rank is the one rank that neither timed
    // out nor wrote anything else, where there is exactly one.
    let unaccounted: BTreeSet<u32> = hang.silent.union(&hang.no_logs).copied().collect();
    let ranks: BTreeSet<u32> = match (bar.who.rank, unaccounted.len()) {
        (Some(rank), _) => BTreeSet::from([rank]),
        (None, 1) => unaccounted,
        _ => BTreeSet::new(),
    };
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.host = h
        .host
        .take()
        .or_else(|| bar.who.host.as_deref().map(str::to_string));
    let who = match ranks.first() {
        Some(rank) => format!("Rank {rank}"),
        None => "A process".to_string(),
    };
    let on = h
        .host
        .as_ref()
        .map_or(String::new(), |host| format!(" on {host}"));
    h.value("who", format!("{who}{on}"));
    h.ranks = ranks;
    name_the_hung_collective(&mut h, hang);
    h.value("detail", describe(bar, timeout_ms));
    h.support(
        Source::Pattern,
        0.55,
        Some(idx),
        "a progress bar had run as long as the collective's timeout and was not done: the process printing it was still working, not waiting in the collective",
    );
    Some(h)
}

/// The bar shows work left: under 100 %, or time remaining.
fn unfinished(bar: &Event) -> bool {
    match (bar.int("percent"), bar.text_field("remaining")) {
        (Some(p), _) => p < 100,
        (None, Some(left)) => left != "00:00" && left != "0:00",
        (None, None) => true,
    }
}

/// `MM:SS` or `H:MM:SS` in seconds.
fn elapsed_s(bar: &Event) -> Option<i64> {
    bar.text_field("elapsed")?
        .split(':')
        .try_fold(0i64, |acc, part| Some(acc * 60 + part.parse::<i64>().ok()?))
}

fn describe(bar: &Event, timeout_ms: i64) -> String {
    let elapsed = bar.text_field("elapsed").unwrap_or("?");
    let done = bar
        .int("percent")
        .map_or(String::new(), |p| format!("{p} % done, "));
    let left = bar
        .text_field("remaining")
        .filter(|r| *r != "?")
        .map_or(String::new(), |r| format!(", {r} left"));
    format!(
        "its progress bar: {done}{elapsed} elapsed{left}, against a timeout of {} s",
        timeout_ms / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, Value};

    fn bar(percent: Option<i64>, elapsed: &str, remaining: Option<&str>) -> Event {
        let mut f = Fields::default();
        if let Some(p) = percent {
            f.insert("percent", Value::Int(p));
        }
        f.insert("elapsed", Value::Text(elapsed.into()));
        if let Some(r) = remaining {
            f.insert("remaining", Value::Text(r.into()));
        }
        Event::with_fields(EventKind::ProgressBar, f)
    }

    #[test]
    fn elapsed_times_read_with_and_without_hours() {
        assert_eq!(elapsed_s(&bar(None, "30:01", None)), Some(1801));
        assert_eq!(elapsed_s(&bar(None, "1:02:03", None)), Some(3723));
        assert_eq!(elapsed_s(&bar(None, "x:01", None)), None);
    }

    #[test]
    fn a_bar_is_done_at_100_percent_or_with_nothing_left() {
        assert!(unfinished(&bar(Some(35), "30:01", Some("57:14"))));
        assert!(!unfinished(&bar(Some(100), "30:01", Some("00:00"))));
        assert!(!unfinished(&bar(None, "30:01", Some("00:00"))));
        assert!(unfinished(&bar(None, "31:02", None)));
    }
}
