//! Failed jobs written by others: 288 job folders (as their archives) that
//! writers who never read this code made from the docs and the corpus
//! alone (48 in each of the thirty-sixth to forty-first sessions), each
//! with the verdict its writer holds true beside it (`<job>.truth.json`):
//! RoCE / IB fabric faults, process and GPU faults in jobs of several
//! process groups, set-up faults under five launchers, messy collections
//! (archives, skewed clocks, missing hosts, time limits, preemption), GPU
//! faults across releases, fabric evidence from snapshots and counters,
//! application hangs in real training stacks, awkward packaging, RoCE
//! fabrics, Kubernetes and cloud jobs, jobs of up to 2048 ranks, host
//! and kernel faults, older stacks, NVLink and intra-node paths, thin
//! evidence and restarts, cloud fabrics and network plugins, cross-host
//! consistency, large jobs of many process groups, fabric faults seen
//! through host tools, modern stacks in odd packaging, partial and
//! skewed collections, older and other launchers, faults inside one host,
//! and near-misses that call for honest uncertainty. The
//! analysis must agree with them at
//! least as often as it does today (the floors only move up).
//!
//! Where the writers' conventions differ from this tool's (a pod's name or
//! its node as the host) the miss stays a miss.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

/// Jobs right per field today: status, kind, stuck ranks, host, device.
const FLOORS: [(&str, usize); 5] = [
    ("status", 268),
    ("kind", 266),
    ("stuck ranks", 257),
    ("host", 269),
    ("device", 277),
];

fn jobs() -> Vec<(PathBuf, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/foreign");
    let mut out = Vec::new();
    let sets = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path());
    for set in sets.filter(|p| p.is_dir()) {
        for entry in std::fs::read_dir(set).unwrap() {
            let path = entry.unwrap().path();
            let Some(name) = path.to_str().and_then(|p| p.strip_suffix(".truth.json")) else {
                continue;
            };
            let truth = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            out.push((packed_job(name), truth));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The job's archive beside its truth: `.tar.gz` mostly, as its writer
/// packed it otherwise (`.tar`, `.tar.zst`).
fn packed_job(name: &str) -> PathBuf {
    [".tar.gz", ".tar.zst", ".tar"]
        .iter()
        .map(|ext| PathBuf::from(format!("{name}{ext}")))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no archive for {name}"))
}

/// A bus id as the truth writes it or the report does (`0000:9a:00.0`).
fn same_device(want: &Value, got: &Value) -> bool {
    let norm = |v: &Value| {
        v.as_str().map(|s| {
            s.to_ascii_lowercase()
                .trim_start_matches(['0', ':'])
                .to_string()
        })
    };
    want.is_null() || norm(want) == norm(got)
}

/// Which fields of the verdict match the writer's truth.
fn agreement(truth: &Value, report: &Value) -> [bool; 5] {
    let v = &report["verdict"];
    let cause = &v["cause"];
    let sorted = |x: &Value| {
        let mut r: Vec<i64> = x
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        r.sort_unstable();
        r
    };
    let device = if cause["device"].is_null() {
        &cause["gpu_bus_id"]
    } else {
        &cause["device"]
    };
    [
        v["status"] == truth["status"],
        cause["kind"] == truth["kind"] || (cause.is_null() && truth["kind"].is_null()),
        sorted(&v["stuck_ranks"]) == sorted(&truth["stuck_ranks"]),
        truth["host"].is_null() || cause["host"] == truth["host"],
        same_device(&truth["device"], device),
    ]
}

#[test]
fn the_analysis_agrees_with_jobs_written_by_others_at_least_as_often_as_today() {
    let jobs = jobs();
    assert_eq!(jobs.len(), 288);
    let mut right = [0usize; 5];
    let mut misses = Vec::new();
    for (archive, truth) in &jobs {
        let got = agreement(truth, &common::analyze_to_json(archive));
        for (i, ok) in got.iter().enumerate() {
            right[i] += usize::from(*ok);
            if !ok {
                let job = archive.file_name().unwrap().to_string_lossy();
                misses.push(format!("{job}: {}", FLOORS[i].0));
            }
        }
    }
    println!("{}", misses.join("\n"));
    for ((field, floor), n) in FLOORS.iter().zip(right) {
        println!("{field}: {n}/{}", jobs.len());
        assert!(
            n >= *floor,
            "{field}: {n} of {} is below its floor {floor}",
            jobs.len()
        );
    }
}
