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

/// NCCL 2.20 WARN of a worker whose queue pair could not connect; its line
/// names the host, pid and CUDA device but no rank.
fn modify_qp_warn(host: &str, pid: u32, local: u32) -> String {
    format!(
        "{host}:{pid}:{} [{local}] misc/ibvwrap.cc:298 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out errno 110\n",
        pid + 80
    )
}

/// Host gpu-018 ran one torchrun agent (`folder`) or two: worker 0 names
/// its rank (4) in its traceback prefix, worker 1 only printed an NCCL WARN.
fn one_known_worker(folders: [&str; 2]) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    for (local, folder) in folders.iter().enumerate() {
        let dir = tmp
            .path()
            .join("gpu-018/logs")
            .join(folder)
            .join(local.to_string());
        fs::create_dir_all(&dir).unwrap();
        let local = local as u32;
        let stdout = modify_qp_warn("gpu-018", 3797507 + local, local);
        if local == 0 {
            let stderr = "[rank4]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n[rank4]: Last error:\n[rank4]: Call to ibv_modify_qp failed with error Connection timed out errno 110\n";
            fs::write(dir.join("stderr.log"), stderr).unwrap();
        }
        fs::write(dir.join("stdout.log"), stdout).unwrap();
    }
    common::analyze_to_json(tmp.path())
}

#[test]
fn one_agents_worker_of_known_rank_numbers_its_other_workers_torch_2_3() {
    // torchrun numbers one agent's workers base + local rank: worker 0 is
    // rank 4, so worker 1 (attempt_0/1/) is rank 5.
    let report = one_known_worker(["run_x1/attempt_0", "run_x1/attempt_0"]);
    let row = common::rank_row(&report, 5);
    assert_eq!(row["host"], "gpu-018", "{row}");
}

#[test]
fn workers_of_two_agents_on_a_host_are_not_numbered_from_one_known_rank() {
    // Two attempt folders: two agents (or a restart) may number differently.
    let report = one_known_worker(["run_x1/attempt_0", "run_x1/attempt_1"]);
    let ranks: Vec<&serde_json::Value> = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rank"] == 5)
        .collect();
    assert!(ranks.is_empty(), "{ranks:?}");
}
