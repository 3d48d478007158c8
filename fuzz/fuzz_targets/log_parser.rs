//! The whole log path of one file: framing, launcher prefixes, every grammar
//! pattern, the kernel and clock parsers it may dispatch to.
#![no_main]
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ncclpm::grammar::Grammar;
use ncclpm::ingest::InputFile;
use ncclpm::model::{FileId, PathHints};
use ncclpm::parse::parse_stream;

static GRAMMAR: LazyLock<Grammar> = LazyLock::new(|| Grammar::builtin().unwrap());

fuzz_target!(|data: &[u8]| {
    let file = InputFile {
        id: FileId(0),
        display: "node1/rank0.log".into(),
        path: "node1/rank0.log".into(),
        size: data.len() as u64,
        hints: PathHints::default(),
    };
    let parsed = parse_stream(data, &file, &GRAMMAR);
    assert!(parsed.events.len() as u64 <= parsed.stats.lines.max(1));
});
