//! torchrun's ChildFailedError summary (torch 1.9+ wording): each `[i]:`
//! entry of `Failures:` is its own worker, and the summary's host, pid and
//! rank identify ranks that died before NCCL printed who they were.

use std::path::Path;

mod common;

const AGENT_LOG: &str = "\
[2025-05-22 03:20:05,100] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6) local_rank: 3 (pid: 3407738) of binary: /usr/bin/python
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
========================================================
pretrain_gpt.py FAILED
--------------------------------------------------------
Failures:
[1]:
  time      : 2025-05-22_03:20:03
  host      : dgx006.hpc.internal
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 3407735)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3407735
[2]:
  time      : 2025-05-22_03:20:01
  host      : dgx006.hpc.internal
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 3407736)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3407736
--------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-05-22_03:20:01
  host      : dgx006.hpc.internal
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 3407738)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3407738
========================================================
";

fn write_job(dir: &Path) {
    let host = dir.join("dgx006");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("agent.log"), AGENT_LOG).unwrap();
    // NCCL 2.14 lines of the three workers: init failed before any line
    // that names a rank.
    let mut nccl = String::new();
    for (pid, dev) in [(3407735, 0), (3407736, 1), (3407738, 3)] {
        nccl += &format!(
            "dgx006:{pid}:{pid} [{dev}] NCCL INFO Bootstrap : Using ib0:10.25.0.1<0>\n\
             dgx006:{pid}:{} [{dev}] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument\n",
            pid + 90
        );
    }
    std::fs::write(host.join("nccl.log"), nccl).unwrap();
}

#[test]
fn every_failures_entry_names_its_own_worker_torch_1_9_plus() {
    let tmp = tempfile::tempdir().unwrap();
    write_job(tmp.path());
    let doc = common::analyze_to_json(tmp.path());
    let pid_of = |rank: u64| {
        let row = common::rank_row(&doc, rank);
        (!row.is_null()).then(|| (row["host"].clone(), row["pid"].clone()))
    };
    for (rank, pid) in [(0, 3407735), (1, 3407736), (3, 3407738)] {
        assert_eq!(
            pid_of(rank),
            Some((serde_json::json!("dgx006"), serde_json::json!(pid))),
            "rank {rank}: {:#?}",
            doc["ranks"]
        );
    }
}
