//! `--trace FILE`: the timeline as Chrome / Perfetto trace-event JSON.
//!
//! Hosts are processes (pid = index of the sorted host names + 1), ranks are
//! threads (tid = global rank); lines of no rank sit on a host-level track.
//! A collective a rank timed out in is an `X` span from when it was enqueued
//! (timeout time minus the elapsed time the watchdog printed) to the timeout,
//! marked `open`. Errors and deaths are instants; the diagnosed chain — the
//! culprit's evidence to a victim's timeout — is a flow arrow. `ts` counts
//! microseconds from the first stamped event; every event keeps its source
//! line in `args`.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde_json::{Value, json};

use crate::model::{EventKind, Level};

use super::ReportInput;

/// Track id for a host's lines that belong to no rank.
const HOST_TRACK: u64 = 1_000_000;

pub fn trace_json(input: &ReportInput<'_>) -> String {
    let job = input.job;
    let times: Vec<Option<NaiveDateTime>> = (0..job.events.len())
        .map(|i| input.timeline.time_of(i))
        .collect();
    // Spans start before their timeout line: time zero is the earliest start.
    let starts = job.events.iter().zip(&times).filter_map(|(e, t)| {
        let back = if e.kind == EventKind::WatchdogTimeout {
            e.int("elapsed_ms").unwrap_or(0).max(0)
        } else {
            0
        };
        t.map(|t| t - chrono::Duration::milliseconds(back))
    });
    let Some(origin) = starts.min() else {
        return serde_json::to_string_pretty(&json!({"traceEvents": [], "displayTimeUnit": "ms"}))
            .unwrap();
    };
    let micros = |t: NaiveDateTime| (t - origin).num_microseconds().unwrap_or(0);
    let hosts: BTreeMap<&str, u64> = job
        .hosts
        .keys()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i as u64 + 1))
        .collect();
    let pid_of = |host: Option<&str>| host.and_then(|h| hosts.get(h).copied()).unwrap_or(0);
    let mut out: Vec<Value> = metadata(input, &hosts);
    for (idx, ev) in job.events.iter().enumerate() {
        let Some(t) = times[idx] else { continue };
        let pid = pid_of(
            ev.who
                .host
                .as_deref()
                .or_else(|| rank_host(input, ev.who.rank)),
        );
        let tid = ev.who.rank.map_or(HOST_TRACK, u64::from);
        let args = json!({"line": format!("{}:{}", job.file_path(ev.origin.file), ev.origin.line), "text": ev.text.as_ref()});
        match ev.kind {
            EventKind::WatchdogTimeout => {
                let elapsed = ev.int("elapsed_ms").unwrap_or(0).max(0);
                let name = format!(
                    "{} seq {} (timed out)",
                    ev.text_field("op").unwrap_or("collective"),
                    ev.int("seq").map_or("?".into(), |s| s.to_string())
                );
                out.push(json!({"name": name, "cat": "collective", "ph": "X", "ts": micros(t) - elapsed * 1000,
                    "dur": elapsed * 1000, "pid": pid, "tid": tid, "args": {"open": true, "source": args}}));
            }
            _ if is_instant(ev.kind, ev.level) => {
                let scope = if ev.who.rank.is_some() { "t" } else { "p" };
                out.push(
                    json!({"name": ev.kind.name(), "cat": ev.pattern, "ph": "i", "s": scope,
                    "ts": micros(t), "pid": pid, "tid": tid, "args": args}),
                );
            }
            _ => {}
        }
    }
    out.extend(causal_flow(input, &times, &micros, &pid_of));
    let doc = json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {"tool": "ncclpm", "version": env!("CARGO_PKG_VERSION"), "job": job.root, "time_zero": origin.to_string()},
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("trace serializes");
    text.push('\n');
    text
}

fn rank_host<'a>(input: &'a ReportInput<'_>, rank: Option<u32>) -> Option<&'a str> {
    input.job.ranks.get(&rank?)?.host.as_deref()
}

/// Warnings, errors and deaths are worth a marker; INFO lines are not.
fn is_instant(kind: EventKind, level: Level) -> bool {
    level >= Level::Warn
        || matches!(
            kind,
            EventKind::ProcessSignaled
                | EventKind::WorkerFailed
                | EventKind::PythonException
                | EventKind::NcclCommInit
        )
}

/// Process and thread names, and their sort order (culprit hosts first).
fn metadata(input: &ReportInput<'_>, hosts: &BTreeMap<&str, u64>) -> Vec<Value> {
    let culprit = input
        .diagnosis
        .verdict
        .cause
        .as_ref()
        .and_then(|c| c.host.as_deref());
    let mut out = Vec::new();
    for (host, pid) in hosts {
        let sort = if Some(*host) == culprit { 0 } else { *pid };
        out.push(json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": host}}));
        out.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": sort}}));
        out.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": HOST_TRACK, "args": {"name": format!("{host} (host)")}}));
    }
    for row in &input.diagnosis.ranks {
        let pid = row
            .host
            .as_deref()
            .and_then(|h| hosts.get(h).copied())
            .unwrap_or(0);
        let mut name = format!("rank {}", row.rank);
        if let Some(g) = &row.gpu_bus_id {
            name.push_str(&format!(" · GPU {g}"));
        }
        if let Some(n) = row.nics.first() {
            name.push_str(&format!(" · {n}"));
        }
        out.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": row.rank, "args": {"name": name}}));
        out.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": row.rank, "args": {"sort_index": row.rank}}));
    }
    out
}

/// A flow arrow from the cause's first stamped evidence line to the first
/// victim timeout after it.
fn causal_flow(
    input: &ReportInput<'_>,
    times: &[Option<NaiveDateTime>],
    micros: &dyn Fn(NaiveDateTime) -> i64,
    pid_of: &dyn Fn(Option<&str>) -> u64,
) -> Vec<Value> {
    let job = input.job;
    let Some(cause) = &input.diagnosis.verdict.cause else {
        return Vec::new();
    };
    let find = |file: &str, line: u64| {
        job.events
            .iter()
            .position(|e| e.origin.line == line && job.file_path(e.origin.file) == file)
    };
    // The chain starts at the culprit's own evidence, not at a victim's.
    let culprit = |i: usize| {
        let e = &job.events[i];
        e.who.rank.is_some_and(|r| cause.ranks.contains(&r))
            || (e.who.rank.is_none()
                && e.who.host.is_some()
                && e.who.host.as_deref() == cause.host.as_deref())
    };
    let Some(start) = cause
        .evidence
        .iter()
        .filter_map(|e| find(&e.file, e.line))
        .find(|&i| times[i].is_some() && culprit(i))
    else {
        return Vec::new();
    };
    let t0 = times[start].unwrap();
    let victim = job
        .events
        .iter()
        .enumerate()
        .filter(|(i, e)| {
            e.kind == EventKind::WatchdogTimeout
                && times[*i].is_some_and(|t| t >= t0)
                && e.who.rank.is_none_or(|r| !cause.ranks.contains(&r))
        })
        .min_by_key(|(i, _)| times[*i]);
    let Some((vi, v)) = victim else {
        return Vec::new();
    };
    let s = &job.events[start];
    let place = |e: &crate::model::Event| {
        (
            pid_of(
                e.who
                    .host
                    .as_deref()
                    .or_else(|| rank_host(input, e.who.rank)),
            ),
            e.who.rank.map_or(HOST_TRACK, u64::from),
        )
    };
    let ((sp, st), (vp, vt)) = (place(s), place(v));
    vec![
        json!({"name": cause.kind.name(), "cat": "cause", "ph": "s", "id": 1, "ts": micros(t0), "pid": sp, "tid": st}),
        json!({"name": cause.kind.name(), "cat": "cause", "ph": "f", "bp": "e", "id": 1, "ts": micros(times[vi].unwrap()), "pid": vp, "tid": vt}),
    ]
}
