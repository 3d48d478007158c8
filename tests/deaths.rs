//! Processes that die, and how their rank is found.

mod common;

use common::write;

/// NVIDIA/nccl#1538's shape, NCCL 2.22 under HPC-X: UCX's signal handler
/// names the dying process only as `[host:pid …]`. The pid is the one whose
/// NCCL lines say it is rank 2, so rank 2 crashed; it died setting up its
/// connections (the proxy's failed Connect), before any Init COMPLETE.
#[test]
fn a_signal_handler_naming_host_and_pid_gives_the_rank_ucx() {
    let dir = tempfile::tempdir().unwrap();
    let h = "worker-0";
    let mut log = String::new();
    for (rank, pid) in [(1u32, 5664u32), (2, 5665)] {
        log.push_str(&format!(
            "{h}:{pid}:{pid} [{rank}] NCCL INFO NCCL version 2.22.3+cuda12.4\n"
        ));
        log.push_str(&format!("{h}:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm 0x5581c0 rank {rank} nranks 4 cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x8e2f0c1d - Init START\n", 0x18 + rank));
    }
    log.push_str(&format!("\n{h}:5665:5801 [2] proxy.cc:1487 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection\n"));
    log.push_str(&format!("[{h}:5665 :0:5665] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n"));
    write(dir.path(), "worker-0.log", &log);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
}
