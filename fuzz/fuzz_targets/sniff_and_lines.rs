//! Sniffing and line splitting: any bytes, any line cap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ncclpm::ingest::lines::{ChunkReader, lines_of};
use ncclpm::ingest::sniff::sniff;

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    let cap = 1 + usize::from(data.first().copied().unwrap_or(0));
    let mut reader = ChunkReader::with_max_line(data, cap);
    let mut lines = 0u64;
    while let Ok(Some(chunk)) = reader.next_chunk() {
        lines += lines_of(&chunk).count() as u64;
    }
    assert_eq!(lines, reader.stats().lines);
});
