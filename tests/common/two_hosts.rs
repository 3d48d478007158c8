//! A two-host job of eight ranks for tests that add system files to it.
//!
//! The job: hosts node001 and node002, four GPUs each at 0000:18:00.0,
//! 0000:3b:00.0, 0000:86:00.0 and 0000:af:00.0 (NCCL busId 18000 …), rank =
//! host index × 4 + local rank, pid 40000 + rank; HCAs mlx5_0 (local ranks
//! 0, 1) and mlx5_1 (local ranks 2, 3), port 1; ib0 is 10.3.0.11 / 10.3.0.12.

use std::fs;

use serde_json::Value;

pub const BUS: [&str; 4] = ["18000", "3b000", "86000", "af000"];

pub fn host(rank: u32) -> String {
    format!("node00{}", rank / 4 + 1)
}

pub fn ip(rank: u32) -> String {
    format!("10.3.0.1{}", rank / 4 + 1)
}

pub fn pid(rank: u32) -> u32 {
    40000 + rank
}

/// One rank's NCCL_DEBUG_FILE: init, NICs, and its network channel to its
/// counterpart on the other host (over mlx5_0 or mlx5_1 by local rank).
pub fn nccl_file(rank: u32, extra: &[String]) -> String {
    let (h, p, l) = (host(rank), pid(rank), rank % 4);
    let peer = (rank + 4) % 8;
    let pre = format!("{h}:{p}:{} [{l}]", p + 7);
    let mut lines = vec![
        format!(
            "{h}:{p}:{p} [{l}] NCCL INFO Bootstrap : Using ib0:{}<0>",
            ip(rank)
        ),
        format!("{h}:{p}:{p} [{l}] NCCL INFO NCCL version 2.21.5+cuda12.4"),
        format!(
            "{pre} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:{}<0>",
            ip(rank)
        ),
        format!(
            "{pre} NCCL INFO ncclCommInitRankConfig comm 0x55{rank} rank {rank} nranks 8 cudaDev {l} nvmlDev {l} busId {} commId 0x6f3a9d1c2b7e4a05 - Init START",
            BUS[l as usize]
        ),
        format!(
            "{pre} NCCL INFO Channel 00/0 : {rank}[{l}] -> {peer}[{l}] [send] via NET/IB/{}/GDRDMA",
            l / 2
        ),
        format!(
            "{pre} NCCL INFO comm 0x55{rank} rank {rank} nranks 8 cudaDev {l} nvmlDev {l} busId {} commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE",
            BUS[l as usize]
        ),
    ];
    lines.extend(extra.iter().cloned());
    lines.join("\n") + "\n"
}

/// The c10 watchdog line of a rank that timed out in ALLREDUCE 1203.
pub fn watchdog(rank: u32, minute: u32) -> String {
    format!(
        "[rank{rank}]:[E1129 12:{minute:02}:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
    )
}

pub struct Job {
    pub dir: tempfile::TempDir,
}

impl Job {
    /// Every rank's NCCL file (with `extra` lines per rank) and a training log
    /// per host with the watchdog lines of the ranks in `timed_out`.
    pub fn new(extra: &dyn Fn(u32) -> Vec<String>, timed_out: &[u32]) -> Job {
        let dir = tempfile::tempdir().unwrap();
        for rank in 0..8 {
            let h = host(rank);
            let path = dir.path().join(&h).join(format!("nccl.{h}.{}", pid(rank)));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, nccl_file(rank, &extra(rank))).unwrap();
        }
        for h in ["node001", "node002"] {
            let lines: Vec<String> = timed_out
                .iter()
                .filter(|&&r| host(r) == h)
                .map(|&r| watchdog(r, 40))
                .collect();
            fs::write(
                dir.path().join(h).join("train.log"),
                lines.join("\n") + "\n",
            )
            .unwrap();
        }
        Job { dir }
    }

    pub fn write(&self, rel: &str, text: &str) {
        fs::write(self.dir.path().join(rel), text).unwrap();
    }

    pub fn verdict(&self) -> Value {
        let doc = super::analyze_to_json(self.dir.path());
        doc["verdict"].clone()
    }
}

pub fn cites(verdict: &Value, file: &str, text: &str) -> bool {
    verdict["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["file"] == file && e["text"].as_str().unwrap().contains(text))
}

pub fn all_but(skip: u32) -> Vec<u32> {
    (0..8).filter(|&r| r != skip).collect()
}
