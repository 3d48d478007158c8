//! `report.json` is documented by a JSON Schema shipped in the repository
//! (`docs/report.schema.json`), generated from the report's types with their
//! field docs. This test fails when the two drift apart (regenerate with
//! `UPDATE_SCHEMA=1 cargo test --test schema`) and validates every sample's
//! report against the shipped schema.

use std::path::Path;

mod common;

fn schema_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.schema.json")
}

fn generated() -> String {
    let schema = schemars::schema_for!(ncclpm::report::json::Document<'static>);
    let mut text = serde_json::to_string_pretty(&schema).unwrap();
    text.push('\n');
    text
}

#[test]
fn the_shipped_schema_matches_the_report_types() {
    let fresh = generated();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_path(), &fresh).unwrap();
    }
    let shipped = std::fs::read_to_string(schema_path()).unwrap_or_default();
    assert!(
        shipped == fresh,
        "docs/report.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test --test schema`"
    );
}

#[test]
fn every_sample_report_validates_against_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(&generated()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    for entry in std::fs::read_dir(samples)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
    {
        let doc = common::analyze_to_json(&entry.path());
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{}: {}",
            entry.path().display(),
            errors.join("; ")
        );
    }
}
