//! Every table parser (counters, snapshots, Flight Recorder) on any bytes;
//! the first byte picks the parser.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ncclpm::ingest::InputFile;
use ncclpm::ingest::sniff::TableKind;
use ncclpm::model::{FileId, PathHints};
use ncclpm::parse::tables::parse_table;

const DUMPS: [TableKind; 2] = [
    TableKind::FlightRecorderPickle,
    TableKind::FlightRecorderJson,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let kinds: Vec<TableKind> = TableKind::TEXT.into_iter().chain(DUMPS).collect();
    let kind = kinds[usize::from(pick) % kinds.len()];
    let file = InputFile {
        id: FileId(0),
        display: "node1/counters/after/mlx5_0".into(),
        path: "node1/counters/after/mlx5_0".into(),
        size: rest.len() as u64,
        hints: PathHints::default(),
    };
    let _ = parse_table(kind, rest, &file);
});
