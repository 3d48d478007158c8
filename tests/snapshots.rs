//! Snapshot tests: the full report.json and report.html of every sample, so
//! any change to what a user sees shows up as a reviewable diff
//! (`cargo insta review`). The machine-specific job path and the tool version
//! are redacted.

use std::path::Path;

mod common;

fn render(name: &str) -> (String, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name);
    let a = common::analyze(&dir);
    let input = ncclpm::report::ReportInput {
        job: &a.job,
        timeline: &a.timeline,
        diagnosis: &a.diagnosis,
    };
    let tmp = tempfile::tempdir().unwrap();
    let written = ncclpm::report::write_reports(tmp.path(), &input, false).unwrap();
    let redact = |text: String| {
        text.replace(
            &dir.display().to_string(),
            "<samples>/".to_string().as_str().trim_end_matches('/'),
        )
        .replace(env!("CARGO_PKG_VERSION"), "<version>")
    };
    (
        redact(std::fs::read_to_string(written.json).unwrap()),
        redact(std::fs::read_to_string(written.html.unwrap()).unwrap()),
    )
}

macro_rules! snapshot_sample {
    ($test:ident, $name:literal) => {
        #[test]
        fn $test() {
            let (json, html) = render($name);
            insta::assert_snapshot!(concat!($name, ".json"), json);
            insta::assert_snapshot!(concat!($name, ".html"), html);
        }
    };
}

snapshot_sample!(stalled_compute, "stalled-compute");
snapshot_sample!(ib_retry_exceeded, "ib-retry-exceeded");
snapshot_sample!(rank_crash, "rank-crash");
snapshot_sample!(healthy, "healthy");
