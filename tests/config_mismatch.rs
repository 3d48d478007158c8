//! Hosts on different NCCL releases: which side is the odd one.

mod common;

use common::write;

/// `srun --label`, NCCL_DEBUG=INFO, four hosts of two ranks. node001 (ranks
/// 0, 1) runs NCCL 2.26.2 and says so on every rank; on node002 rank 2's
/// bootstrap message is truncated and PyTorch's error names 2.21.5. No line
/// states the release of node003 or node004, but their `Bootstrap : Using`
/// lines are in the format of NCCL 2.23 and older, so they run 2.21.5 too:
/// node001 is the odd host, not an even split decided by rank 0's side.
#[test]
fn hosts_without_a_stated_release_count_on_the_side_their_line_formats_fit_nccl_2_21_vs_2_26() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for rank in 0..8u32 {
        let host = format!("node00{}", rank / 2 + 1);
        let (pid, local) = (41000 + rank, rank % 2);
        let colon = if rank < 2 { ":" } else { " :" };
        log.push_str(&format!(
            "{rank}: {host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap{colon} Using ib0:10.184.0.{}<0>\n",
            rank / 2 + 1
        ));
        if rank < 2 {
            log.push_str(&format!(
                "{rank}: {host}:{pid}:{pid} [{local}] NCCL INFO NCCL version 2.26.2+cuda12.4\n"
            ));
        }
    }
    log.push_str("2: node002:41002:41057 [0] bootstrap.cc:105 NCCL WARN Message truncated : received 2286 bytes instead of 5534\n");
    log.push_str("2: [rank2]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2315, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5\n");
    log.push_str("0: node001:41000:41061 [0] bootstrap.cc:105 NCCL WARN Message truncated : received 5534 bytes instead of 2286\n");
    log.push_str("0: [rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2315, internal error - please report this issue to the NCCL developers, NCCL version 2.26.2\n");
    write(dir.path(), "slurm-48230.out", &log);
    assert_odd_host(
        dir.path(),
        "node001",
        &[0, 1],
        "no line states node003's NCCL release",
    );
}

/// `srun --label`, two hosts of four ranks, torch 2.4 (its c10 warnings
/// carry nanosecond stamps; its error names `../torch/csrc/…`, as wheels up
/// to 2.5 do), whose wheels ship NCCL 2.20.5 (2.5's: 2.21.5). node001 —
/// rank 0's host — runs 2.19.3 and node002 2.20.5: node001 loaded another
/// NCCL than its PyTorch ships, so it is the odd one of the even split.
#[test]
fn an_even_release_split_leans_to_the_nccl_pytorch_ships_torch_2_4() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for rank in 0..8u32 {
        let host = if rank < 4 { "node001" } else { "node002" };
        let (pid, local) = (52000 + rank, rank % 4);
        log.push_str(&format!("{rank}: [W724 07:09:24.79209{rank}133 Utils.hpp:137] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n"));
        log.push_str(&format!(
            "{rank}: {host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using ib0:10.69.0.{}<0>\n",
            rank / 4 + 1
        ));
    }
    for (rank, host, version) in [(0, "node001", "2.19.3"), (4, "node002", "2.20.5")] {
        log.push_str(&format!("{rank}: NCCL version {version}+cuda12.4\n"));
        log.push_str(&format!("{rank}: {host}:{}:{} [0] bootstrap.cc:72 NCCL WARN Message truncated : received 4933 bytes instead of 2594\n", 52000 + rank, 52100 + rank));
        log.push_str(&format!("{rank}: [rank{rank}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027, internal error - please report this issue to the NCCL developers, NCCL version {version}\n"));
    }
    write(dir.path(), "slurm-2283470.out", &log);
    assert_odd_host(
        dir.path(),
        "node001",
        &[0, 1, 2, 3],
        "whose wheels ship NCCL 2.20.5 or 2.21.5",
    );
}

/// `srun --label`, two hosts of four ranks, torch 1.13: its NCCL error is a
/// plain `RuntimeError` (2.0 made it `DistBackendError`, PR #88134) and
/// 1.13's wheels ship NCCL 2.14.3. node001 — rank 0's host — runs 2.18.1,
/// node002 2.14.3: node001 loaded another NCCL, so it is the odd one.
#[test]
fn a_runtime_error_dates_pytorch_before_2_0_and_its_nccl_torch_1_13() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for rank in 0..8u32 {
        let host = if rank < 4 { "node001" } else { "node002" };
        let (pid, local) = (37000 + rank, rank % 4);
        log.push_str(&format!(
            "{rank}: {host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using ib0:10.71.0.{}<0>\n",
            rank / 4 + 1
        ));
    }
    for (rank, host, version) in [(0, "node001", "2.18.1"), (4, "node002", "2.14.3")] {
        log.push_str(&format!("{rank}: NCCL version {version}+cuda11.7\n"));
        log.push_str(&format!("{rank}: {host}:{}:{} [0] bootstrap.cc:72 NCCL WARN Message truncated : received 4595 bytes instead of 4677\n", 37000 + rank, 37100 + rank));
        log.push_str(&format!("{rank}: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, internal error, NCCL version {version}\n"));
    }
    write(dir.path(), "slurm-149866.out", &log);
    assert_odd_host(
        dir.path(),
        "node001",
        &[0, 1, 2, 3],
        "whose wheels ship NCCL 2.14.3",
    );
}

/// `srun --label`, two hosts of four ranks, no PyTorch line that dates its
/// release (NCCL's WARNs only). Each host's collection kept `pip list`:
/// torch 2.8.0 with its `nvidia-nccl-cu12 2.27.3` wheel on both. node001 —
/// rank 0's host, which would otherwise set the reference — runs 2.21.5:
/// it loaded another libnccl.
#[test]
fn the_hosts_package_lists_name_the_nccl_pytorch_loads_pip_24() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for rank in 0..8u32 {
        let host = if rank < 4 { "node001" } else { "node002" };
        let (pid, local) = (61000 + rank, rank % 4);
        log.push_str(&format!(
            "{rank}: {host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using ib0:10.72.0.{}<0>\n",
            rank / 4 + 1
        ));
    }
    for (rank, host, version) in [(0, "node001", "2.21.5"), (4, "node002", "2.27.3")] {
        log.push_str(&format!("{rank}: NCCL version {version}+cuda12.8\n"));
        log.push_str(&format!("{rank}: {host}:{}:{} [0] bootstrap.cc:151 NCCL WARN Message truncated : received 7010 bytes instead of 8331\n", 61000 + rank, 61100 + rank));
    }
    write(dir.path(), "slurm-771204.out", &log);
    for host in ["node001", "node002"] {
        write(
            dir.path(),
            &format!("{host}/pip-list.txt"),
            "$ pip list 2>/dev/null | grep -E '^(torch|nvidia-nccl)'\nnvidia-nccl-cu12                  2.27.3\ntorch                             2.8.0\n",
        );
    }
    assert_odd_host(
        dir.path(),
        "node001",
        &[0, 1, 2, 3],
        "their PyTorch loads NCCL 2.27.3",
    );
}

/// The verdict names `host` as the odd one with its `ranks`, and one piece
/// of its evidence says `why`.
fn assert_odd_host(job: &std::path::Path, host: &str, ranks: &[u64], why: &str) {
    let doc = common::analyze_to_json(job);
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "config_mismatch", "{cause:#}");
    assert_eq!(cause["host"], host, "{cause:#}");
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!(ranks),
        "{cause:#}"
    );
    let reasons: Vec<&str> = cause["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["why"].as_str())
        .collect();
    assert!(reasons.iter().any(|w| w.contains(why)), "{reasons:#?}");
}

/// NVIDIA/nccl#1634's shape, NCCL 2.23: three hosts of two ranks, one
/// NCCL_DEBUG_FILE each, hang at ALLREDUCE 12. node001 and node003 load the
/// HPC-X plugin (its `Plugin Path :` line and NCCL's `Loaded net plugin`);
/// node002 finds none and falls back to NCCL's internal one. No `Using
/// network` line survived (NCCL_DEBUG_SUBSYS=INIT): the plugin lines alone
/// single out node002.
#[test]
fn a_host_without_the_network_plugin_the_others_load_is_the_odd_one_nccl_2_23() {
    let dir = tempfile::tempdir().unwrap();
    for rank in 0..6u32 {
        let host = format!("node00{}", rank / 2 + 1);
        let (pid, local) = (61000 + rank, rank % 2);
        let mut log =
            format!("{host}:{pid}:{pid} [{local}] NCCL INFO NCCL version 2.23.4+cuda12.6\n");
        if rank / 2 == 1 {
            log.push_str(&format!("{host}:{pid}:{} [{local}] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n", pid + 9));
        } else {
            log.push_str(&format!("{host}:{pid}:{} [{local}] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n", pid + 9));
            log.push_str(&format!(
                "{host}:{pid}:{} [{local}] NCCL INFO NET/Plugin: Loaded net plugin IBext_v8 (v8)\n",
                pid + 9
            ));
        }
        log.push_str(&format!("{host}:{pid}:{pid} [{local}] NCCL INFO comm 0x5581c0 rank {rank} nranks 6 cudaDev {local} nvmlDev {local} busId {}000 commId 0x8e2f0c1d - Init COMPLETE\n", 18 + local));
        log.push_str(&format!("[rank{rank}]:[E1201 10:31:07.120000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600073 milliseconds before timing out.\n"));
        write(dir.path(), &format!("{host}/nccl.{host}.{pid}.log"), &log);
    }
    assert_odd_host(
        dir.path(),
        "node002",
        &[2, 3],
        "the hosts differ in network plugin",
    );
}

/// NVIDIA/nccl#1267's shape, NCCL 2.14.3: only the failing host's log is at
/// hand. Its ranks could not read the address a peer sent during bootstrap
/// (family 0): the peers speak another release's bootstrap. No line shows
/// the other release, so this is the lead, not a stated mismatch.
#[test]
fn an_undecodable_peer_address_points_at_mixed_releases_nccl_2_14() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for local in 0..2u32 {
        let pid = 1302 + local;
        log.push_str(&format!(
            "instance-8g-96c-1:{pid}:{pid} [{local}] NCCL INFO NCCL version 2.14.3+cuda11.7\n"
        ));
        log.push_str(&format!("instance-8g-96c-1:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using eth0:10.128.0.9<0>\n"));
        log.push_str(&format!("\ninstance-8g-96c-1:{pid}:{} [{local}] misc/socket.cc:717 NCCL WARN ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)\n", pid + 88));
    }
    write(dir.path(), "instance-8g-96c-1_problem_node.log", &log);
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "config_mismatch", "{cause:#}");
    let why: Vec<&str> = cause["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["why"].as_str())
        .collect();
    assert!(
        why.iter().any(|w| w.contains("different NCCL releases")),
        "{why:#?}"
    );
}

/// Megatron-LM under NCCL 2.17 (nccl#1241's shape) and verl under Ray with
/// 2.20 (verl#161's): NCCL's init finds two ranks on one GPU, in its WARN
/// or after torch's `Last error:`. The ranks were set up wrongly.
#[test]
fn two_ranks_on_one_gpu_are_a_placement_error_nccl_2_17_and_2_20() {
    let warn = "gpu-a07:4410:4410 [1] init.cc:795 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000\n";
    let v = common::verdict_of(&[("gpu-a07/nccl.log", warn)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:1b:00.0", "{v:#}");
    assert_eq!(v["cause"]["host"], "gpu-a07", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0, 1]), "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("set_device"), "{remedy}");

    let torch = "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Duplicate GPU detected : rank 3 and rank 2 both on CUDA device e2000
";
    let v = common::verdict_of(&[("driver.log", torch)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:e2:00.0", "{v:#}");
}

/// metaseq#554's shape (torch 1.13, NCCL 2.14.3): PyTorch's error report
/// repeats NCCL's last warning after `Last error:`, and the paste cut it
/// after the ranks. The two ranks on one GPU are still named.
#[test]
fn a_duplicate_gpu_report_cut_after_its_ranks_still_names_them_torch_1_13() {
    let log = "\
RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1666642975993/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.14.3
ncclInternalError: Internal check failed.
Last error:
Duplicate GPU detected : rank 5 and rank 0 b
";
    let v = common::verdict_of(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0, 5]), "{v:#}");
}

/// An AzureML Kubernetes job (NCCL 2.7, each line behind the platform's
/// `<date> [<pod>, unknown_ip]` prefix): a worker was started as rank 2 of
/// a world of 2. The launch's ranks and world size do not fit.
#[test]
fn a_rank_outside_the_world_is_the_launchs_layout_nccl_2_7() {
    let log = "\
2021-02-05 05:32:39 [job-1612503130-worker-1, unknown_ip] job-1612503130-worker-1:25:25 [0] NCCL INFO Bootstrap : Using [0]eth0:10.244.1.7<0>
2021-02-05 05:32:39 [job-1612503130-worker-1, unknown_ip] job-1612503130-worker-1:25:25 [0] init.cc:981 NCCL WARN Invalid rank requested : 2/2
";
    let v = common::verdict_of(&[("worker-1.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("rank 2 of a world of 2"), "{summary}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// pytorch#46248's shape (PyTorch's DDP tests, NCCL 2.7): three processes
/// of two GPUs each join a communicator of six ranks, one process having
/// been told the world is three. NCCL's bootstrap root (2.3–2.22) says so.
#[test]
fn processes_giving_different_rank_counts_are_the_launchs_layout_nccl_2_7() {
    let log = "\
taurusml26:67298:67298 [0] NCCL INFO Launch mode Parallel
taurusml26:67298:67405 [0] bootstrap.cc:190 NCCL WARN Bootstrap Root : mismatch in rank count from procs 6 : 3
";
    let v = common::verdict_of(&[("test.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("gave 6 and 3 ranks"), "{summary}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// NCCL 2.23+ says the same in one line of every field the root compares
/// (`nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0`, 2.30 adding `offset`);
/// where only the root counts differ, the processes were set up for
/// different numbers of bootstrap roots.
#[test]
fn processes_giving_different_sizes_or_roots_are_the_launchs_layout_nccl_2_23_and_2_30() {
    let sizes = "gpu-01:4410:4460 [0] bootstrap.cc:335 NCCL WARN Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0, offset 0 vs 0\n";
    let v = common::verdict_of(&[("nccl.log", sizes)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("gave 16 and 8 ranks"), "{summary}");
    let roots = "gpu-01:4410:4460 [0] bootstrap.cc:318 NCCL WARN Bootstrap Root : mismatch in info from procs, nranks 64 vs 64, nroots 4 vs 1, iroot 0 vs 0\n";
    let v = common::verdict_of(&[("nccl.log", roots)]);
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("gave 4 and 1 bootstrap roots"),
        "{summary}"
    );
}

/// Lightning#14986's shape (Slurm, two hosts of four GPUs, NCCL 2.10): the
/// ranks the task layout gave collide, and the bootstrap root gets rank 1
/// twice. NCCL's words decide it, before any communicator forms.
#[test]
fn a_rank_checked_in_twice_is_the_launchs_layout_nccl_2_10() {
    let log = "\
hpc-25-14:18569:18569 [0] NCCL INFO Bootstrap : Using em1:172.18.28.81<0>
hpc-25-15:21312:21312 [0] NCCL INFO Bootstrap : Using em1:172.18.28.82<0>
hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked in
";
    let v = common::verdict_of(&[("output.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("two processes claimed rank 1"),
        "{summary}"
    );
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// nccl#653's shape (Megatron under `srun --label`, NCCL 2.24+ wording, the
/// host field empty): NCCL_ALGO forced CollNet where no CollNet network
/// exists, so no algorithm can run the first all-reduce. Without a setting
/// the same message is NCCL's internal error, not the job's set-up.
#[test]
fn an_algorithm_setting_that_leaves_none_is_the_jobs_set_up_nccl_2_24() {
    let log = "201: :41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to CollNet.\n";
    let v = common::verdict_of(&[("srun.out", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("NCCL_ALGO=CollNet"), "{summary}");
    assert_ne!(v["status"], "degraded", "{v:#}");
    let bare =
        "201: :41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n";
    let v = common::verdict_of(&[("srun.out", bare)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    // The setting printed at init names it where the warning does not.
    let with_env =
        format!("node1:5:5 [0] NCCL INFO NCCL_ALGO set by environment to CollNet\n{bare}");
    let v = common::verdict_of(&[("srun.out", &with_env)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

fn init_line(rank: u32, phase: &str) -> String {
    format!(
        "trt-worker-0:4{rank}:98{rank} [0] NCCL INFO ncclCommInitRank comm 0x7a1225{rank} rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 100000 commId 0xaa9becea043c4e6c - Init {phase}\n"
    )
}

/// TensorRT-LLM#9263's shape (NCCL 2.27, two ranks in one pod): both init
/// lines name the same GPU (busId 100000) of one host, and NCCL's warning
/// is cut after its first rank. The init lines still say which two ranks.
#[test]
fn two_ranks_starting_init_on_one_gpu_are_the_duplicate_gpu_nccl_2_27() {
    let log = format!(
        "{}{}[2025-11-18 09:33:30] trt-worker-0:40:980 [0] init.cc:737 NCCL WARN Duplicate GPU detected : rank 0\n",
        init_line(0, "START"),
        init_line(1, "START")
    );
    let v = common::verdict_of_owned(&[("trtllm.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0, 1]), "{v:#}");
    // NCCL prints the bus id as one hex number: 100000 is 0001:00:00.0.
    assert_eq!(v["cause"]["gpu_bus_id"], "0001:00:00.0", "{v:#}");
    // Without the warning, the init lines alone say the same.
    let log = format!("{}{}", init_line(0, "START"), init_line(1, "START"));
    let v = common::verdict_of_owned(&[("trtllm.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// NCCL 2.29+ lets ranks share a GPU with NCCL_MULTI_RANK_GPU_ENABLE=1:
/// an init that completed was allowed, and is no fault.
#[test]
fn ranks_sharing_a_gpu_whose_init_completed_are_no_fault_nccl_2_29() {
    let log = format!(
        "{}{}{}{}",
        init_line(0, "START"),
        init_line(1, "START"),
        init_line(0, "COMPLETE"),
        init_line(1, "COMPLETE")
    );
    let v = common::verdict_of_owned(&[("trtllm.log".to_string(), log)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// NCCL 2.29's and 2.30's refusals name no ranks; they are the same fault.
#[test]
fn the_multi_rank_gpu_refusal_is_the_duplicate_gpu_nccl_2_29_and_2_30() {
    for line in [
        "node3:5512:5512 [1] init.cc:946 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.\n",
        "node3:5512:5512 [1] graph/topo.cc:1977 NCCL WARN Multiple ranks detected using the same GPU on this node. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.\n",
    ] {
        let v = common::verdict_of(&[("nccl.log", line)]);
        assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
        assert_eq!(v["cause"]["host"], "node3", "{v:#}");
    }
}

/// horovod#148's shape (NCCL 2.2, lines without the `NCCL` word): two VMs
/// both called `node1` (eth1 100.102.32.176 and .175). NCCL before 2.5.6
/// tells hosts apart by name alone, rings the four GPUs `via P2P/IPC`, and
/// cannot open the other machine's CUDA IPC handle. One host name, two
/// addresses on one interface: two machines that share a name, not a GPU
/// fault. From 2.5.6 on (the boot id joins the name) it is no cause.
#[test]
fn one_host_name_with_two_addresses_is_two_machines_nccl_2_2() {
    let log = |version: &str| {
        format!(
            "{version}node1:18225:18239 [0] INFO NET : Using interface eth1:100.102.32.176<0>\n\
node1:18226:18240 [1] INFO NET : Using interface eth1:100.102.32.176<0>\n\
node1:22671:22795 [1] INFO NET : Using interface eth1:100.102.32.175<0>\n\
node1:22670:22794 [0] INFO NET : Using interface eth1:100.102.32.175<0>\n\
node1:22670:22794 [0] INFO [0] Ring 0 :    0   1   2   3\n\
node1:22671:22795 [1] INFO 1 -> 0 via P2P/IPC\n\
node1:22671:22795 [1] transport/p2p.cu:431 WARN failed to open CUDA IPC handle : 30 unknown error\n"
        )
    };
    let v = &common::report_of(&[("output.log", &log(""))])["verdict"];
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["cause"]["host"], "node1", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("100.102.32.175 and 100.102.32.176"),
        "{summary}"
    );
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("NCCL_HOSTID"), "{remedy}");

    let v = &common::report_of(&[("output.log", &log("NCCL version 2.7.8+cuda11.0\n"))])["verdict"];
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// Two shapes of a device the process may not open: nccl#2428 (NCCL 2.21,
/// eRDMA; one node's container admits one of its two uverbs devices, so its
/// rank builds every channel on the other NIC) and a Singularity job whose
/// container is denied every HCA (NCCL 2.20.5: `Call to ibv_open_device
/// failed`, then `No device found` and sockets). The container's set-up:
/// `config_mismatch` in its `rdma_access` variant, with the checks inside
/// the container. A listed device that opened names nothing.
#[test]
fn an_rdma_device_the_process_may_not_open_is_the_containers_set_up_nccl_2_20_and_2_21() {
    let one = "node-b:211:211 [1] NCCL INFO NET/IB : Unable to open device erdma_1\nnode-b:211:211 [1] NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE [RO]; OOB eth0:10.0.0.2<0>\n";
    let all = "holygpu8a16301:7001:7001 [0] misc/ibvwrap.cc:110 NCCL WARN Call to ibv_open_device failed\nholygpu8a16301:7001:7001 [0] transport/net_ib.cc:240 NCCL WARN NET/IB : Unable to open device mlx5_0\nholygpu8a16301:7001:7001 [0] NCCL INFO NET/IB : No device found.\nholygpu8a16301:7001:7001 [0] NCCL INFO NET/Socket : Using [0]ib0:10.31.183.43<0>\n";
    for (log, device) in [(one, "erdma_1"), (all, "mlx5_0")] {
        let v = common::verdict_of(&[("rank1.log", log)]);
        assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
        assert_eq!(v["cause"]["device"], device, "{v:#}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(remedy.contains("/dev/infiniband"), "{remedy}");
    }
    let opened = "node-b:211:211 [1] NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE [1]erdma_1:1/RoCE [RO]; OOB eth0:10.0.0.2<0>\n";
    let v = common::verdict_of(&[("rank1.log", opened)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// NVIDIA/nccl#234's story with NCCL_DEBUG=INFO, NCCL 2.8.4 (its WARN-level
/// `Failed to open libibverbs.so[.1]`) under `mpirun --tag-output`: two
/// hosts, gpu-a runs NET/IB, gpu-b
/// finds no libibverbs and runs sockets; the ring's connection between
/// them fails. gpu-b is the odd host and its missing libibverbs is cited
/// as why. The same line on a job where every host runs sockets, with
/// every init complete, is no failure.
#[test]
fn a_host_without_libibverbs_is_why_it_runs_sockets_nccl_2_8_and_2_30() {
    let dir = tempfile::tempdir().unwrap();
    for (rank, host) in [(0u32, "gpu-a"), (1, "gpu-b")] {
        let pid = 7100 + rank;
        let mut log = format!("{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.8.4+cuda11.2\n");
        if host == "gpu-b" {
            log.push_str(&format!("{host}:{pid}:{pid} [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"));
            log.push_str(&format!("{host}:{pid}:{pid} [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n{host}:{pid}:{pid} [0] NCCL INFO Using network Socket\n"));
        } else {
            log.push_str(&format!("{host}:{pid}:{pid} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n{host}:{pid}:{pid} [0] NCCL INFO Using network IB\n"));
        }
        log.push_str(&format!("{host}:{pid}:{} [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3\n", pid + 30));
        let tagged: String = log
            .lines()
            .map(|l| format!("[1,{rank}]<stdout>:{l}\n"))
            .collect();
        write(dir.path(), &format!("{host}/mpirun.{host}.log"), &tagged);
    }
    assert_odd_host(
        dir.path(),
        "gpu-b",
        &[1],
        "found no libibverbs on this host",
    );
    let doc = common::analyze_to_json(dir.path());
    let detail = doc["verdict"]["cause"]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + doc["verdict"]["cause"]["remedy"]
            .as_str()
            .unwrap_or_default();
    assert!(detail.contains("libibverbs"), "{detail}");

    let all_sockets = tempfile::tempdir().unwrap();
    let log = "node3:88:88 [0] NCCL INFO NCCL version 2.30.3+cuda12.9\nnode3:88:88 [0] NCCL INFO Count not open libibverbs.so\nnode3:88:88 [0] NCCL INFO Count not open libibverbs.so.1\nnode3:88:88 [0] NCCL INFO Using network Socket\nnode3:88:90 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nnode3:89:91 [1] NCCL INFO comm 0x55d1 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE\n";
    write(all_sockets.path(), "nccl.log", log);
    let doc = common::analyze_to_json(all_sockets.path());
    assert_eq!(doc["verdict"]["status"], "healthy", "{doc:#}");
}

/// NCCL 2.23.4+ compares the releases of the communicator's ranks at init
/// and fails on the first that differs (`Mismatched NCCL version detected :
/// rank 8 version 22703 rank 0 version 22605`): a release mismatch in
/// NCCL's own words, where no banner of the other host was kept.
#[test]
fn nccls_own_peer_release_check_is_a_release_mismatch_nccl_2_23() {
    let log = "gpu-03:4410:4410 [0] NCCL INFO NCCL version 2.26.5+cuda12.9\ngpu-03:4410:4410 [0] init.cc:1043 NCCL WARN Mismatched NCCL version detected : rank 8 version 22703 rank 0 version 22605\ngpu-03:4410:4410 [0] NCCL INFO init.cc:1584 -> 5\n";
    let v = common::verdict_of(&[("gpu-03/nccl.log", log)]);
    common::assert_cause(&v, "config_mismatch", "NCCL versions differ");
}

/// NCCL 2.30.3+ stops init when its ranks found different numbers of NICs:
/// rank 0 names each rank with fewer at INFO, then warns. The ranks named
/// and their host (from their own init lines) are the odd ones; with
/// NCCL_IGNORE_NET_MISMATCH the same INFO lines are no failure.
#[test]
fn ranks_with_fewer_nics_are_named_when_init_stops_nccl_2_30() {
    let dir = tempfile::tempdir().unwrap();
    let rank0 = "b200-17:5101:5101 [0] NCCL INFO ncclCommInitRankConfig comm 0xaaa1 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x5be1 - Init START\nb200-17:5101:5101 [0] NCCL INFO Rank 13 has 7 local Net devices (max 8).\nb200-17:5101:5101 [0] init.cc:1338 NCCL WARN Detected mixed local Net device counts across ranks (min 7, max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to continue.\nb200-17:5101:5101 [0] NCCL INFO init.cc:1590 -> 2\n";
    let rank13 = "b200-18:6213:6213 [5] NCCL INFO ncclCommInitRankConfig comm 0xbbb5 rank 13 nranks 16 cudaDev 5 nvmlDev 5 busId 9b000 commId 0x5be1 - Init START\n";
    common::write(dir.path(), "b200-17/nccl.b200-17.5101.log", rank0);
    common::write(dir.path(), "b200-18/nccl.b200-18.6213.log", rank13);
    let doc = common::analyze_to_json(dir.path());
    let c = &doc["verdict"]["cause"];
    assert_eq!(c["kind"], "config_mismatch", "{c:#}");
    assert_eq!(c["host"], "b200-18", "{c:#}");
    assert_eq!(c["ranks"], serde_json::json!([13]), "{c:#}");
    assert!(
        c["remedy"]
            .as_str()
            .unwrap()
            .contains("NCCL_IGNORE_NET_MISMATCH"),
        "{c:#}"
    );

    let ignored = "b200-17:5101:5101 [0] NCCL INFO Rank 13 has 7 local Net devices (max 8).\nb200-17:5101:5101 [0] NCCL INFO comm 0xaaa1 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x5be1 - Init COMPLETE\n";
    let v = common::verdict_of(&[("nccl.log", ignored)]);
    assert_eq!(v["status"], "healthy", "{v:#}");
}

/// nccl#897's shape, NCCL 2.18 with a host prefix: three identical hosts,
/// two of which send and receive over IB with GPUDirect RDMA while the third
/// (no nvidia-peermem loaded) stages through host memory. A host with some
/// channels of each kind (a NIC too far from a GPU) is no deviation.
fn gdr_job(third_host_lines: &[&str]) -> serde_json::Value {
    let mut log = String::new();
    for (host, pid) in [("gpu-01", 1100), ("gpu-02", 2200)] {
        for (ch, peer) in [(0, 8), (1, 16)] {
            log += &format!(
                "{host}:{pid}:{} [0] NCCL INFO Channel {ch:02}/0 : {peer}[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
                pid + 50
            );
        }
    }
    for line in third_host_lines {
        log += &format!("gpu-03:3300:3350 [0] NCCL INFO {line}\n");
    }
    common::report_of(&[("job.log", &log)])
}

#[test]
fn a_host_whose_ib_channels_all_go_without_gpudirect_is_set_up_apart_nccl_2_18() {
    let doc = gdr_job(&[
        "Channel 00/0 : 0[0] -> 16[0] [receive] via NET/IB/0",
        "Channel 01/0 : 8[0] -> 16[0] [receive] via NET/IB/1",
    ]);
    let v = &doc["verdict"];
    let alts = v["alternatives"].as_array().cloned().unwrap_or_default();
    let cm = std::iter::once(&v["cause"])
        .chain(alts.iter())
        .find(|c| c["kind"] == "config_mismatch")
        .unwrap_or_else(|| panic!("no config_mismatch: {v:#}"));
    assert_eq!(cm["host"], "gpu-03", "{cm:#}");
    let summary = cm["summary"].as_str().unwrap();
    assert!(summary.contains("GPUDirect RDMA"), "{summary}");
    assert!(summary.contains("host memory"), "{summary}");
    let remedy = cm["remedy"].as_str().unwrap();
    assert!(remedy.contains("modprobe nvidia-peermem"), "{remedy}");
}

#[test]
fn a_host_with_some_channels_of_each_kind_is_no_gpudirect_deviation_nccl_2_18() {
    let doc = gdr_job(&[
        "Channel 00/0 : 0[0] -> 16[0] [receive] via NET/IB/0/GDRDMA",
        "Channel 01/0 : 8[0] -> 16[0] [receive] via NET/IB/3",
    ]);
    let v = &doc["verdict"];
    let text = v.to_string();
    assert!(!text.contains("GPUDirect RDMA: "), "{v:#}");
}
