//! Archive reading: gz / zst / tar / zip, nested, truncated or corrupt, with
//! a small decompression cap so bombs end quickly.
#![no_main]
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ncclpm::grammar::Grammar;
use ncclpm::ingest::discover;
use ncclpm::parse::archive::{Limits, parse_input};

static GRAMMAR: LazyLock<Grammar> = LazyLock::new(|| Grammar::builtin().unwrap());

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.tar.gz"), data).unwrap();
    let files = discover(dir.path()).unwrap().files;
    let limits = Limits {
        max_decompressed: 8 << 20,
        // Small enough that plain inputs are also cut into parts.
        split_bytes: 512,
    };
    for f in &files {
        let _ = parse_input(f, &GRAMMAR, limits);
    }
});
