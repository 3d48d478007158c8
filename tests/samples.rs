//! Whole-job runs over `samples/`: every sample's verdict must match the
//! expected fields in `samples/<case>.expected.json` (kept outside the job
//! folder so the analysis never reads it).

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples")
}

fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(samples_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn check_case(name: &str) -> Vec<String> {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(samples_dir().join(format!("{name}.expected.json"))).unwrap(),
    )
    .unwrap();
    let report = common::analyze_to_json(&samples_dir().join(name));
    let v = &report["verdict"];
    let mut problems = Vec::new();
    let mut same = |what: &str, got: &Value, want: &Value| {
        if got != want {
            problems.push(format!("{name}: {what}: got {got}, expected {want}"));
        }
    };
    same("status", &v["status"], &expected["status"]);
    same("stuck_ranks", &v["stuck_ranks"], &expected["stuck_ranks"]);
    same("collective", &v["collective"], &expected["collective"]);
    match (&expected["cause"], &v["cause"]) {
        (Value::Null, got) => same("cause", got, &Value::Null),
        (want, got) => {
            for field in ["kind", "host", "device", "port", "gpu_bus_id", "peer_host"] {
                same(&format!("cause.{field}"), &got[field], &want[field]);
            }
            let min = expected["min_confidence"].as_f64().unwrap_or(0.0);
            let conf = got["confidence"].as_f64().unwrap_or(0.0);
            if conf < min {
                problems.push(format!(
                    "{name}: confidence {conf} below the expected minimum {min}"
                ));
            }
            if got["evidence"].as_array().is_none_or(|e| e.is_empty()) {
                problems.push(format!("{name}: the cause cites no evidence"));
            }
        }
    }
    problems
}

#[test]
fn every_sample_gets_its_expected_verdict() {
    let cases = cases();
    assert!(
        cases.len() >= 4,
        "samples/ should hold at least four jobs, found {cases:?}"
    );
    let problems: Vec<String> = cases.iter().flat_map(|c| check_case(c)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_sample_has_an_expected_verdict_file() {
    for case in cases() {
        assert!(
            samples_dir()
                .join(format!("{case}.expected.json"))
                .is_file(),
            "samples/{case}.expected.json is missing"
        );
    }
}
