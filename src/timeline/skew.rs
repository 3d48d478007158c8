//! Per-host clock skew, estimated from events that happen together.
//!
//! Every rank of a hung collective enqueued it at nearly the same moment: the
//! watchdog line says when it fired and how long the work ran ("ran for E
//! milliseconds"), so `stamp − E` is the enqueue time on that host's clock.
//! Across hosts, the spread of those enqueue times is mostly clock skew. Each
//! host's offset is the median of its ranks' deviations from each
//! collective's median, over every collective seen on two or more hosts; the
//! offsets are then centred on the median host, so a majority with good
//! clocks defines the job's clock.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde::Serialize;

use crate::model::{EventKind, Job};

/// A host's clock offset (its clock minus the job's clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct HostOffset {
    pub host: String,
    /// Milliseconds to subtract from the host's stamps.
    pub offset_ms: i64,
    /// How many collectives the estimate rests on.
    pub anchors: usize,
}

/// Offsets below this are compute jitter, not skew: not applied.
const MIN_SKEW_MS: i64 = 2_000;

pub fn estimate(job: &Job, times: &[Option<NaiveDateTime>]) -> BTreeMap<String, HostOffset> {
    let mut groups: BTreeMap<(String, i64), Vec<(String, i64)>> = BTreeMap::new();
    for (i, ev) in job.events.iter().enumerate() {
        if ev.kind != EventKind::WatchdogTimeout {
            continue;
        }
        let (Some(t), Some(seq), Some(elapsed)) = (times[i], ev.int("seq"), ev.int("elapsed_ms"))
        else {
            continue;
        };
        let Some(host) = host_of(job, i) else {
            continue;
        };
        let enqueued = t.and_utc().timestamp_millis() - elapsed;
        let op = ev.text_field("op").unwrap_or("").to_string();
        groups.entry((op, seq)).or_default().push((host, enqueued));
    }
    let mut deviations: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for members in groups.values() {
        let hosts: std::collections::BTreeSet<&String> = members.iter().map(|(h, _)| h).collect();
        if hosts.len() < 2 {
            continue;
        }
        let reference = median(members.iter().map(|(_, t)| *t).collect());
        for (host, t) in members {
            deviations
                .entry(host.clone())
                .or_default()
                .push(t - reference);
        }
    }
    let raw: BTreeMap<String, (i64, usize)> = deviations
        .into_iter()
        .map(|(h, d)| (h, (median(d.clone()), d.len())))
        .collect();
    let centre = median(raw.values().map(|(o, _)| *o).collect());
    raw.into_iter()
        .map(|(host, (o, n))| {
            let offset = o - centre;
            let offset_ms = if offset.abs() < MIN_SKEW_MS {
                0
            } else {
                offset
            };
            (
                host.clone(),
                HostOffset {
                    host,
                    offset_ms,
                    anchors: n,
                },
            )
        })
        .collect()
}

/// The host an event's clock belongs to.
pub fn host_of(job: &Job, event: usize) -> Option<String> {
    let ev = &job.events[event];
    ev.who.host.as_deref().map(str::to_string).or_else(|| {
        ev.who
            .rank
            .and_then(|r| job.ranks.get(&r))
            .and_then(|r| r.host.clone())
    })
}

fn median(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    // The lower median: with two hosts, the one with fewer ranks' worth of
    // evidence does not get to define the clock by rounding.
    v[(v.len() - 1) / 2]
}
