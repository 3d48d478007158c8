//! A torchrun worker whose own log folder holds no recognised line still
//! exists: its host's other workers give the offset (`rank = offset +
//! local rank`), and its silence while the rest time out names it.

use std::fs;
use std::path::Path;

mod common;

/// torch 2.5 watchdog line, as a `--log-dir` worker's stderr holds it.
fn timeout_line(rank: u32) -> String {
    format!(
        "[rank{rank}]:[E728 16:18:43.545321887 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1880, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n"
    )
}

const DEPRECATED: &str = "[W728 14:24:51.221390597 Utils.hpp:137] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n";

fn worker(root: &Path, host: &str, local: u32, text: &str) {
    let dir = root
        .join(host)
        .join("logs/none_k2j4/attempt_0")
        .join(local.to_string());
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("stderr.log"), text).unwrap();
}

#[test]
fn a_worker_known_only_by_its_folder_is_the_silent_rank() {
    let tmp = tempfile::tempdir().unwrap();
    for local in 0..4 {
        worker(
            tmp.path(),
            "gpu-017",
            local,
            &(DEPRECATED.to_string() + &timeout_line(local)),
        );
    }
    for local in 0..3 {
        worker(
            tmp.path(),
            "gpu-018",
            local,
            &(DEPRECATED.to_string() + &timeout_line(4 + local)),
        );
    }
    worker(tmp.path(), "gpu-018", 3, DEPRECATED);
    let report = common::analyze_to_json(tmp.path());
    let v = &report["verdict"];
    assert_eq!(v["status"], "hang", "{v}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([7]), "{v}");
    assert_eq!(v["cause"]["host"], "gpu-018", "{v}");
    let row = common::rank_row(&report, 7);
    assert_eq!(row["host"], "gpu-018");
}
