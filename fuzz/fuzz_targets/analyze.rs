//! The whole analysis on a job of one file holding the input, then the
//! report: no panic from the first byte read to the last one written.
#![no_main]
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ncclpm::analyze::Engine;
use ncclpm::grammar::Grammar;
use ncclpm::grammar::knowledge::Knowledge;
use ncclpm::parse::archive::Limits;
use ncclpm::report::{ReportInput, write_reports};

static ENGINE: LazyLock<Engine> = LazyLock::new(|| {
    let mut e = Engine::new(Grammar::builtin().unwrap(), Knowledge::builtin().unwrap());
    e.limits = Limits {
        max_decompressed: 8 << 20,
        // Small enough that plain inputs are also cut into parts.
        split_bytes: 512,
    };
    e
});

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("rank0.log"), data).unwrap();
    if let Ok(analysis) = ENGINE.analyze(&job) {
        let input = ReportInput {
            job: &analysis.job,
            timeline: &analysis.timeline,
            diagnosis: &analysis.diagnosis,
        };
        let _ = write_reports(&dir.path().join("out"), &input, false);
        let _ = ncclpm::report::trace::trace_json(&input);
    }
});
