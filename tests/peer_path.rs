//! A hang between the GPUs of one host: no network is involved, so a first
//! transfer that never finishes, without an error, is the peer-to-peer path
//! (ACS, the IOMMU, a driver without P2P for these GPUs).

mod common;

fn test_preamble(hosts: [&str; 2]) -> String {
    format!(
        "# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n\
#\n\
# Using devices\n\
#   Rank  0 Pid 871210 on {} device  0 [0x01] NVIDIA GeForce RTX 4090\n\
#   Rank  1 Pid 871211 on {} device  1 [0x24] NVIDIA GeForce RTX 4090\n\
#\n\
#                                                       out-of-place                       in-place\n\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n\
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
        hosts[0], hosts[1]
    )
}

const ROWS: &str = "           8             2     float     sum      -1     8.49    0.00    0.00      0     8.37    0.00    0.00      0\n\
        2048           512     float     sum      -1     8.38    0.24    0.24      0     8.24    0.25    0.25      0\n";

const FOOTER: &str = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0412 \n#\n";

/// nccl-tests#117's shape (two RTX 4090 in one box, nccl-tests 2.13): the
/// table header and then nothing, no failure line. The run hung in its
/// first size between the two GPUs of that host.
#[test]
fn an_nccl_tests_table_that_stops_on_one_host_is_a_p2p_hang_nccl_tests_2_13() {
    let v = common::verdict_of_owned(&[(
        "all_reduce.log".to_string(),
        test_preamble(["4090-INSTALL", "4090-INSTALL"]),
    )]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "4090-INSTALL", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("NCCL_P2P_DISABLE=1"), "{remedy}");
}

/// tinygrad's P2P driver thread (8×4090, NCCL 2.26.5): rows up to 2048
/// bytes, then nothing. Where it stopped is part of the story.
#[test]
fn rows_that_stop_mid_table_name_the_last_size_nccl_2_26() {
    let log = format!("{}{ROWS}", test_preamble(["box1", "box1"]));
    let v = common::verdict_of_owned(&[("out.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("after 2048 bytes"), "{summary}");
}

/// A run that reached its footer finished: no hang, no blame.
#[test]
fn a_finished_nccl_tests_run_is_no_hang() {
    let log = format!("{}{ROWS}{FOOTER}", test_preamble(["box1", "box1"]));
    let v = common::verdict_of_owned(&[("out.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_ne!(v["status"], "hang", "{v:#}");
}

/// Ranks on two hosts talk over the network: a stopped table there is not
/// the GPUs of one host.
#[test]
fn a_stopped_run_across_two_hosts_is_not_put_on_the_gpus_of_one() {
    let log = format!("{}{ROWS}", test_preamble(["node1", "node2"]));
    let v = common::verdict_of_owned(&[("out.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// nccl-tests#217's shape (`-g 1`, NCCL 2.21.5): one GPU, set-up lines,
/// then nothing. One GPU has no peer to hang with; its own sockets did
/// (security software held them): not the GPUs' path.
#[test]
fn a_stopped_run_of_one_gpu_is_not_a_p2p_hang_nccl_2_21() {
    let log = "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n\
#\n\
# Using devices\n\
#  Rank  0 Group  0 Pid  69438 on ws1 device  0 [0x01] NVIDIA RTX A6000\n\
ws1:69438:69438 [0] NCCL INFO Bootstrap : Using enp3s0f0:10.50.56.33<0>\n\
NCCL version 2.21.5+cuda12.4\n\
ws1:69438:69444 [0] NCCL INFO NET/IB : No device found.\n";
    let v = common::verdict_of(&[("out.log", log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let two = log.replace("nGpus 1", "nGpus 2").replace(
        "#  Rank  0 Group  0 Pid  69438 on ws1 device  0 [0x01] NVIDIA RTX A6000\n",
        "#  Rank  0 Group  0 Pid  69438 on ws1 device  0 [0x01] NVIDIA RTX A6000\n#  Rank  1 Group  0 Pid  69438 on ws1 device  1 [0x02] NVIDIA RTX A6000\n",
    );
    let v = common::verdict_of(&[("out.log", &two)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// nccl-tests' first releases (built against NCCL 1.x, nccl-tests#5's
/// shape) print a failure without `Test `: the run failed visibly, it did
/// not stop silently in a transfer.
#[test]
fn a_failure_of_the_first_nccl_tests_releases_is_no_silent_stop_nccl_1_3() {
    let log = "# NCCL Tests compiled with NCCL 1.0\n\
# Using devices\n\
#   Rank  0 on     node03 device  0 [0x00] Tesla P100-PCIE-16GB\n\
#   Rank  1 on     node03 device  1 [0x00] Tesla P100-PCIE-16GB\n\
\n\
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n\
NCCL failure all_reduce.cu:95 'unhandled cuda error'\n";
    let v = common::verdict_of(&[("out.log", log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_ne!(v["status"], "hang", "{v:#}");
}

/// nccl-tests relays a failed check up its call chain (` .. host pid N:
/// Test failure common.cu:L`, TESTCHECK, 2018+): a paste that kept only
/// those lines still shows a run that failed, not one that stopped
/// silently in a transfer.
#[test]
fn relayed_test_failures_are_a_failure_not_a_silent_stop_nccl_tests_2_13() {
    let log = format!(
        "{} .. 4090-INSTALL pid 871210: Test failure common.cu:1454\n .. 4090-INSTALL pid 871210: Test failure all_reduce.cu:90\n",
        test_preamble(["4090-INSTALL", "4090-INSTALL"])
    );
    let v = common::verdict_of_owned(&[("all_reduce.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_ne!(v["status"], "hang", "{v:#}");
}

/// nccl#606's shape: a run that printed its devices and NCCL's set-up, then
/// nothing, and an `lspci -vvv` of the host with ACS source validation on
/// two bridges. The snapshot is a second, independent source.
#[test]
fn acs_on_in_an_lspci_snapshot_strengthens_the_p2p_hang_pciutils_3() {
    let head = "# nThread 1 nGpus 2 minBytes 8 maxBytes 16777216 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n\
#   Rank  0 Pid    253 on nccl-tests device  0 [0xc1] NVIDIA RTX A6000\n\
#   Rank  1 Pid    253 on nccl-tests device  1 [0xc2] NVIDIA RTX A6000\n\
nccl-tests:253:253 [0] NCCL INFO Bootstrap : Using eno1np0:172.31.45.15<0>\n\
NCCL version 2.11.4+cuda11.1\n";
    let alone = common::verdict_of(&[("output.log", head)]);
    assert_eq!(alone["cause"]["kind"], "gpu_fault", "{alone:#}");
    let lspci = "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n\
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n\
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n";
    let both = common::verdict_of(&[("output.log", head), ("nccl-tests/lspci.txt", lspci)]);
    assert_eq!(both["cause"]["kind"], "gpu_fault", "{both:#}");
    let (a, b) = (
        alone["cause"]["confidence"].as_f64().unwrap(),
        both["cause"]["confidence"].as_f64().unwrap(),
    );
    assert!(b > a, "{a} → {b}");
    assert!(
        both["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("ACS on at 2"),
        "{both:#}"
    );
}

fn first_collective_timeouts(last_enqueued: [i64; 4]) -> String {
    let mut log = String::new();
    for r in 0..4 {
        log.push_str(&format!("gpu-box:580{r}:590{r} [{r}] NCCL INFO comm 0x55d0 rank {r} nranks 4 cudaDev {r} busId {r}0000 commId 0x7a1 - Init COMPLETE\n"));
    }
    for (r, enq) in last_enqueued.iter().enumerate() {
        // A rank that never enqueued the collective has no timeout to report.
        if *enq < 1 {
            continue;
        }
        log.push_str(&format!("[rank{r}]:[E1112 09:49:50.022718554 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=128, NumelOut=128, Timeout(ms)=600000) ran for 600003 milliseconds before timing out.\n"));
        log.push_str(&format!("[rank{r}]:[E1112 09:49:50.032579059 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at work: 1, last enqueued NCCL work: {enq}, last completed NCCL work: -1.\n"));
    }
    log
}

/// vllm#10156's shape (4×A10G on one host, torch 2.5): every rank waits in
/// its first ALLREDUCE, none behind, none finished. The GPUs' peer path is
/// the lead, with every waiting rank named.
#[test]
fn every_rank_of_one_host_stuck_in_its_first_collective_is_a_p2p_hang_torch_2_5() {
    let v = common::verdict_of_owned(&[(
        "test_script.log".to_string(),
        first_collective_timeouts([1, 1, 1, 1]),
    )]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "gpu-box", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}

/// The same shape with one rank that never reached the collective (silent
/// after its init): that rank is what the others wait for, not the GPUs'
/// path.
#[test]
fn a_rank_behind_in_the_first_collective_is_no_p2p_hang_torch_2_5() {
    let v = common::verdict_of_owned(&[(
        "test_script.log".to_string(),
        first_collective_timeouts([1, 1, 0, 1]),
    )]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
}

/// With NCCL_P2P_DISABLE=1 the GPUs do not talk peer to peer.
#[test]
fn p2p_disabled_takes_the_peer_path_out_nccl_2_21() {
    let log = format!(
        "gpu-box:5801:5801 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n{}",
        first_collective_timeouts([1, 1, 1, 1])
    );
    let v = common::verdict_of_owned(&[("test_script.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// litgpt#1832's shape (4 GPUs on one host, torch 2.3): only ranks 1 and 3
/// report their first BROADCAST timing out; ranks 0 and 2 left no line. Half
/// the ranks unaccounted for is no proof that every rank got this far.
#[test]
fn half_the_ranks_without_a_line_is_no_p2p_hang_torch_2_3() {
    let mut log = String::new();
    for r in [1, 3] {
        log.push_str(&format!("babel-0-31:7{r}:7{r} [{r}] NCCL INFO comm 0x55d0 rank {r} nranks 4 cudaDev {r} busId {r}0000 commId 0x7a1 - Init COMPLETE\n"));
        log.push_str(&format!("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800437 milliseconds before timing out.\n"));
    }
    let v = common::verdict_of_owned(&[("slurm.out".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// rccl#1129's shape (two MI100 in one box, RCCL 2.18.3, rccl-tests): RCCL
/// warns at init that the kernel runs without `iommu=pt`, then the table
/// header and nothing. The warning is RCCL's advice, printed on healthy
/// hosts too: it is no failure of its own (the stopped run still reads as a
/// hang), and it backs the GPUs' peer path as a second sign. Alone, with the
/// run finished, it blames nobody.
#[test]
fn rccls_missing_iommu_pt_warning_backs_a_hang_between_the_gpus_rccl_2_18() {
    let warn = "deep-visionscaper3:38629:38629 [0] /long_pathname_so_that_rpms_can_package_the_debug_info/src/extlibs/rccl/build/hipify/src/init.cc:132 NCCL WARN Missing \"iommu=pt\" from kernel command line which can lead to system instablity or hang!\n";
    let run = test_preamble(["deep-visionscaper3", "deep-visionscaper3"]);
    let plain = common::verdict_of(&[("all_reduce.log", &run)]);
    let warned =
        common::verdict_of_owned(&[("all_reduce.log".to_string(), format!("{warn}{run}"))]);
    assert_eq!(warned["cause"]["kind"], "gpu_fault", "{warned:#}");
    assert_eq!(warned["status"], "hang", "{warned:#}");
    let (a, b) = (
        plain["cause"]["confidence"].as_f64().unwrap(),
        warned["cause"]["confidence"].as_f64().unwrap(),
    );
    assert!(b > a, "{a} → {b}");
    let finished = common::verdict_of_owned(&[(
        "all_reduce.log".to_string(),
        format!("{warn}{run}{ROWS}{FOOTER}"),
    )]);
    assert_ne!(finished["cause"]["kind"], "gpu_fault", "{finished:#}");
    assert_ne!(finished["status"], "hang", "{finished:#}");
}

/// nccl#2408's shape: sendrecv_perf across two hosts relays its failed
/// checks, mpirun reports the non-zero exit, and each host's kernel log has
/// an Xid 31 page fault of the process. The relays are the run failing: a
/// crash of the faulting process, never a job that merely ran degraded.
#[test]
fn relayed_failures_beside_a_page_fault_are_a_crash_nccl_tests_2_16() {
    let log = format!(
        "{} .. node-a pid 871210: Test failure common.cu:1454\n .. node-b pid 871211: Test failure common.cu:1454\nprterun detected that one or more processes exited with non-zero status,\nthus causing the job to be terminated. Exit code: 7\n",
        test_preamble(["node-a", "node-b"])
    );
    let dmesg = "[Tue Jun  3 10:15:02 2025] NVRM: Xid (PCI:0000:18:00): 31, pid=871210, name=sendrecv_perf, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2b_80000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n";
    let v = common::verdict_of_owned(&[
        ("sendrecv.log".to_string(), log),
        ("node-a/dmesg.txt".to_string(), dmesg.to_string()),
    ]);
    assert_eq!(v["status"], "crash", "{v:#}");
}

/// NCCL 2.12.7+ failing init because NVML reports P2P disabled between two
/// GPUs it found connected by NVLink (an NVLink fault, or an NVSwitch
/// system's Fabric Manager not running): the GPUs' link, on that host, with
/// the Fabric Manager and the NVLink status in the remedy.
#[test]
fn p2p_disabled_between_nvlink_gpus_is_the_link_nccl_2_12_and_2_28() {
    let log = "dgx-a100-3:2211:2211 [0] NCCL INFO NCCL version 2.18.3+cuda12.1\ndgx-a100-3:2211:2211 [0] NCCL INFO ncclCommInitRank comm 0x5581 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 7000 commId 0x11 - Init START\ndgx-a100-3:2212:2212 [1] NCCL INFO ncclCommInitRank comm 0x5582 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId f000 commId 0x11 - Init START\ndgx-a100-3:2211:2250 [0] graph/paths.cc:356 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\ndgx-a100-3:2211:2250 [0] NCCL INFO graph/paths.cc:673 -> 1\nRuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3\n";
    let v = common::verdict_of(&[("nccl.log", log)]);
    let c = common::assert_cause(&v, "gpu_fault", "GPUs 1 and 0");
    assert_eq!(c["host"], "dgx-a100-3", "{c:#}");
    assert!(
        c["remedy"].as_str().unwrap().contains("fabricmanager"),
        "{c:#}"
    );
    // The processes on those NVML devices, and the first one's GPU.
    assert_eq!(c["ranks"], serde_json::json!([0, 1]), "{c:#}");
    assert_eq!(c["gpu_bus_id"], "0000:0f:00.0", "{c:#}");
}

/// vLLM's tensor-parallel workers under Ray 2.x, all on the driver's node:
/// Ray prefixes their lines `(RayWorkerVllm pid=N)` and adds `, ip=…` only
/// for actors on another node. Every rank waits in the first all-reduce
/// (one line kept no size: the watchdog's terminate line, cut).
fn ray_watchdog(prefix: &str) -> String {
    format!(
        "({prefix}pid=5101) [E ProcessGroupNCCL.cpp:474] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800431 milliseconds before timing out.\n\
({prefix}pid=5100) [E ProcessGroupNCCL.cpp:915] [Rank 0] NCCL watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800\n"
    )
}

#[test]
fn ray_actors_without_a_node_ran_beside_the_driver_ray_2_x() {
    let v = common::verdict_of_owned(&[("serve.log".to_string(), ray_watchdog("RayWorkerVllm "))]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], serde_json::Value::Null, "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("the Ray driver's node"), "{summary}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0, 1]), "{v:#}");
}

/// The same lines from actors Ray placed on another node (`ip=`): their
/// hosts are not known to be one.
#[test]
fn ray_actors_on_named_nodes_are_not_put_on_one_host_ray_2_x() {
    let log = ray_watchdog("RayWorkerVllm ")
        .replacen("pid=5101)", "pid=5101, ip=10.0.0.7)", 1)
        .replacen("pid=5100)", "pid=5100, ip=10.0.0.8)", 1);
    let v = common::verdict_of_owned(&[("serve.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}
