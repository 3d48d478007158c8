//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod two_hosts;

use std::path::Path;
use std::sync::OnceLock;

use ncclpm::analyze::{Analysis, Engine};
use ncclpm::grammar::Grammar;
use ncclpm::grammar::knowledge::Knowledge;
use ncclpm::report::{ReportInput, json};

/// One engine for all tests of a binary: compiling the grammars is the
/// expensive part of a small analysis.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(Grammar::builtin().unwrap(), Knowledge::builtin().unwrap()))
}

pub fn analyze(path: &Path) -> Analysis {
    engine()
        .analyze(path)
        .unwrap_or_else(|e| panic!("analyze {}: {e}", path.display()))
}

/// The report.json document of a job, parsed back.
pub fn analyze_to_json(path: &Path) -> serde_json::Value {
    let a = analyze(path);
    let input = ReportInput {
        job: &a.job,
        timeline: &a.timeline,
        diagnosis: &a.diagnosis,
    };
    serde_json::from_str(&json::to_string(&json::document(&input))).unwrap()
}

/// The report.json document of a job made of `files` (path, text) in a
/// fresh temporary folder.
pub fn report_of(files: &[(&str, &str)]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        write(dir.path(), rel, text);
    }
    analyze_to_json(dir.path())
}

/// The verdict of a job made of `files` (path, text).
pub fn verdict_of(files: &[(&str, &str)]) -> serde_json::Value {
    report_of(files)["verdict"].clone()
}

/// [`report_of`] for files whose paths and texts were built as strings.
pub fn report_of_owned(files: &[(String, String)]) -> serde_json::Value {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    report_of(&refs)
}

/// [`verdict_of`] for files whose paths and texts were built as strings.
pub fn verdict_of_owned(files: &[(String, String)]) -> serde_json::Value {
    report_of_owned(files)["verdict"].clone()
}

/// The kinds a verdict names: its cause, then its alternatives.
pub fn cause_kinds(verdict: &serde_json::Value) -> Vec<&str> {
    let alternatives = verdict["alternatives"].as_array().into_iter().flatten();
    std::iter::once(&verdict["cause"])
        .chain(alternatives)
        .filter_map(|c| c["kind"].as_str())
        .collect()
}

/// Asserts the verdict's cause kind and that its summary says `said`;
/// returns the cause for further checks.
pub fn assert_cause<'v>(
    verdict: &'v serde_json::Value,
    kind: &str,
    said: &str,
) -> &'v serde_json::Value {
    let cause = &verdict["cause"];
    assert_eq!(cause["kind"], kind, "{verdict:#}");
    let summary = cause["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(said),
        "{said:?} not in {summary:?}\n{cause:#}"
    );
    cause
}

/// Writes `text` to `root/rel`, making its folders: a job folder in a test.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `show_gids` of a RoCE host whose index 0 is the link-local RoCE v1 GID.
pub fn show_gids(last_octet: u32) -> String {
    format!(
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n\
         ---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n\
         mlx5_0\t1\t0\tfe80:0000:0000:0000:966d:aeff:fe6d:f6{last_octet:02x}\t\t\tv1\tenp26s0np0\n\
         mlx5_0\t1\t1\tfe80:0000:0000:0000:966d:aeff:fe6d:f6{last_octet:02x}\t\t\tv2\tenp26s0np0\n\
         mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:0ac9:00{last_octet:02x}\t10.201.0.{last_octet}  \tv1\tenp26s0np0\n\
         mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0ac9:00{last_octet:02x}\t10.201.0.{last_octet}  \tv2\tenp26s0np0\n\
         n_gids_found=4\n"
    )
}

/// The report's row for `rank` in its ranks table (`Null` when absent).
pub fn rank_row(doc: &serde_json::Value, rank: u64) -> &serde_json::Value {
    doc["ranks"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["rank"] == rank))
        .unwrap_or(&serde_json::Value::Null)
}
