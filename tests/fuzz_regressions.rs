//! Inputs with which a fuzzer once broke something, kept and run the way
//! their fuzz target runs them (`fuzz/fuzz_targets/`). `cargo test` builds
//! with debug assertions, so the internal checks a fuzzer tripped run here
//! as well (the run memo reads every line it folds again and compares).
//!
//! - `log_parser/nccl-info-ending-the-line`: a line `host:pid:tid [0] NCCL
//!   INFO` with nothing after the level word, then lines of the same writer.
//!   The frame remembered that prefix's reading and gave the next lines a
//!   message starting with the space the parser had not seen.

use std::path::Path;

use ncclpm::grammar::Grammar;
use ncclpm::ingest::InputFile;
use ncclpm::model::{FileId, PathHints};
use ncclpm::parse::parse_stream;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target);
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    found.sort();
    found
}

#[test]
fn log_parser_inputs_parse_with_every_check_on() {
    let grammar = Grammar::builtin().unwrap();
    let file = |len: usize| InputFile {
        id: FileId(0),
        display: "node1/rank0.log".into(),
        path: "node1/rank0.log".into(),
        size: len as u64,
        hints: PathHints::default(),
    };
    for (name, data) in inputs("log_parser") {
        let parsed = parse_stream(&data[..], &file(data.len()), &grammar);
        assert!(
            parsed.events.len() as u64 <= parsed.stats.lines.max(1),
            "{name}"
        );
    }
}
