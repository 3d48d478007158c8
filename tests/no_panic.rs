//! Property tests: no byte input makes a parser panic. Each parser gets
//! arbitrary bytes, and log-shaped bytes built from the prefixes real files
//! start with, so the generator reaches deep into the parsers.

use proptest::prelude::*;

use ncclpm::ingest::InputFile;
use ncclpm::ingest::launcher::{LauncherStyle, parse_prefix};
use ncclpm::ingest::lines::{ChunkReader, lines_of};
use ncclpm::ingest::sniff::{TableKind, sniff};
use ncclpm::model::{FileId, PathHints};
use ncclpm::parse::frame::frame;
use ncclpm::parse::paste::unpaste;
use ncclpm::parse::tables::parse_table;
use ncclpm::parse::{nccl, parse_stream, stamps, torch};

mod common;

const PIECES: &[&str] = &[
    "[rank3]:",
    "[default1]:",
    "[1,2]<stdout>:",
    " 3: ",
    "worker-0: ",
    "(WorkerDict pid=1, ip=x) ",
    "[2025-05-02 14:03:11] ",
    "2019-06-02T16:13:44.884Z: ",
    "18:11:06.680 ",
    "node1:12:13 [0] ",
    "NCCL INFO ",
    "NCCL WARN ",
    "transport/net_ib.cc:1 ",
    "[E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:607] ",
    "[E ProcessGroupNCCL.cpp:1] ",
    "W0409 07:28:49.530000 1359 x.py:1] ",
    "ERROR:torch.distributed:",
    "Got completion from peer 10.0.0.1<1> with status=12 opcode=0 len=0 vendor err 129",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1)",
    "[PG 0 Rank 1] Timeout at NCCL work: 3, last enqueued NCCL work: 3, last completed NCCL work: 2.",
    "comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
    "](http://x/)",
    "> ",
    "[",
    "]",
    ":",
    "\t",
    " ",
    "\u{fffd}",
    "é",
    "\r",
    "0",
    "99999999999999999999",
];

fn log_shaped() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

fn styles() -> Vec<LauncherStyle> {
    vec![
        LauncherStyle::default(),
        LauncherStyle {
            slurm_label: true,
            mpich_rank: true,
            pdsh_hosts: vec![b"worker-0".to_vec()],
        },
    ]
}

fn input_file(path: &str) -> InputFile {
    InputFile {
        id: FileId(0),
        display: path.to_string(),
        path: path.into(),
        size: 0,
        hints: PathHints::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn prefix_parsers_never_panic(line in prop_oneof![log_shaped(), proptest::collection::vec(any::<u8>(), 0..200)]) {
        for style in styles() {
            let f = frame(&line, &style);
            prop_assert!(f.body.len() <= line.len());
            let _ = parse_prefix(&line, &style);
        }
        let _ = nccl::parse_prefix(&line);
        let _ = torch::c10_prefix(&line);
        let _ = torch::glog_prefix(&line);
        let _ = torch::python_logging_prefix(&line);
        let _ = torch::logger_tail_prefix(&line);
        let _ = stamps::date_time(&line);
        let _ = stamps::month_day(&line);
        let _ = unpaste(&line);
    }

    #[test]
    fn sniffing_and_line_splitting_never_panic(data in proptest::collection::vec(any::<u8>(), 0..2000), cap in 1usize..300) {
        let _ = sniff(&data);
        let mut reader = ChunkReader::with_max_line(&data[..], cap);
        let mut lines = 0u64;
        while let Some(chunk) = reader.next_chunk().unwrap() {
            lines += lines_of(&chunk).count() as u64;
        }
        prop_assert_eq!(lines, reader.stats().lines);
    }

    #[test]
    fn whole_file_parsing_never_panics(data in prop_oneof![log_shaped(), proptest::collection::vec(any::<u8>(), 0..3000)]) {
        let file = input_file("node1/rank0.log");
        let parsed = parse_stream(&data[..], &file, &common::engine().grammar);
        prop_assert!(parsed.events.len() as u64 <= parsed.stats.lines.max(1));
    }

    #[test]
    fn table_parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let file = input_file("nccl_trace_rank_3");
        for kind in [TableKind::FlightRecorderPickle, TableKind::FlightRecorderJson] {
            let _ = parse_table(kind, &data, &file);
            let mut pickle = vec![0x80, 2];
            pickle.extend(&data);
            let _ = parse_table(kind, &pickle, &file);
        }
    }
}
