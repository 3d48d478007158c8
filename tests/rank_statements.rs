//! Lines other than NCCL's that say where a rank ran: torchrun agents list
//! their host's global ranks at rendezvous, and training scripts print
//! the rank each worker is. With no NCCL INFO lines, they are all there is.

mod common;

use common::write;

/// The agent's block as torch 1.9+ prints it (`api.py`, `_rendezvous`).
fn rendezvous(group_rank: u32, first: u32) -> String {
    let ranks: Vec<String> = (first..first + 4).map(|r| r.to_string()).collect();
    format!(
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:\n  \
         restart_count=0\n  master_addr=node001\n  master_port=29500\n  group_rank={group_rank}\n  \
         group_world_size=2\n  local_ranks=[0, 1, 2, 3]\n  role_ranks=[{r}]\n  global_ranks=[{r}]\n  \
         role_world_sizes=[8, 8, 8, 8]\n  global_world_sizes=[8, 8, 8, 8]\n\n",
        r = ranks.join(", ")
    )
}

/// torch 1.13 under torchrun --tee 3, NCCL_DEBUG unset: two hosts of four
/// workers; rank 6 (node002, local rank 2) prints nothing while the other
/// seven time out in ALLREDUCE 1203.
fn silent_rank_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (node, host) in ["node001", "node002"].into_iter().enumerate() {
        let first = node as u32 * 4;
        let mut log = rendezvous(node as u32, first);
        for local in 0..4u32 {
            let rank = first + local;
            if rank == 6 {
                continue;
            }
            log.push_str(&format!(
                "[default{local}]:[E ProcessGroupNCCL.cpp:828] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n"
            ));
        }
        write(dir.path(), &format!("{host}/torchrun.log"), &log);
    }
    dir
}

#[test]
fn the_agents_rendezvous_places_a_rank_that_printed_nothing_torch_1_13() {
    let job = silent_rank_job();
    let doc = common::analyze_to_json(job.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6]), "{v:#}");
    let row = common::rank_row(&doc, 6);
    assert_eq!(row["host"], "node002", "{row:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
}

/// A DeiT-style `init_distributed_mode` print under torchrun --tee 3, torch
/// 2.3 (`[rankN]:` prefixes only on c10 lines): node002's workers print
/// only that line, node001's time out in BARRIER 1 after it.
#[test]
fn a_scripts_distributed_init_line_names_the_rank_behind_its_local_prefix_deit() {
    let dir = tempfile::tempdir().unwrap();
    for (node, host) in ["node001", "node002"].into_iter().enumerate() {
        let mut log = String::new();
        for local in 0..4u32 {
            let rank = node as u32 * 4 + local;
            log.push_str(&format!(
                "[default{local}]:| distributed init (rank {rank}): env://, gpu {local}\n"
            ));
        }
        if node == 0 {
            for local in 0..4u32 {
                log.push_str(&format!(
                    "[default{local}]:[rank{local}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {local}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
                ));
            }
        }
        write(dir.path(), &format!("{host}/torchrun.log"), &log);
    }
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["stuck_ranks"], serde_json::json!([4, 5, 6, 7]), "{v:#}");
    let hosts: Vec<&str> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rank"].as_u64().unwrap() >= 4)
        .map(|r| r["host"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(hosts, ["node002"; 4], "{:#}", doc["ranks"]);
}

/// `srun --label`, NCCL_DEBUG=WARN (Slurm 17+): no line but srun's own
/// names a node. `srun: error: node002: tasks 4-5,7: Aborted` places those
/// tasks, which are the ranks.
#[test]
fn srun_task_errors_place_the_ranks_they_name_slurm() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for r in 0..8u32 {
        log.push_str(&format!(
            "{r}: | distributed init (rank {r}): env://, gpu {}\n",
            r % 4
        ));
    }
    for r in (0..8u32).filter(|&r| r != 6) {
        log.push_str(&format!(
            "{r}: [rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.\n"
        ));
    }
    log.push_str("srun: error: node001: tasks 0-3: Aborted (core dumped)\n");
    log.push_str("srun: error: node002: tasks 4-5,7: Aborted (core dumped)\n");
    write(dir.path(), "slurm-48218.out", &log);
    let doc = common::analyze_to_json(dir.path());
    let hosts: Vec<String> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap_or("-").to_string())
        .collect();
    let named = [0, 1, 2, 3, 4, 5, 7].map(|r| hosts[r].as_str());
    let want = [
        "node001", "node001", "node001", "node001", "node002", "node002", "node002",
    ];
    assert_eq!(named, want, "{:#}", doc["ranks"]);
}

/// torchrun --tee 3 with torch 2.1 (no `[rankN]:` prefixes): the one line
/// that states a rank (worker 3's `| distributed init`) must not make the
/// merged console rank 3's file; each watchdog line keeps its own `[Rank N]`,
/// so rank 1's odd size at SeqNum 5 is a collective mismatch of rank 1.
#[test]
fn one_placed_worker_does_not_make_a_merged_console_its_own_file_torch_2_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("[default3]:| distributed init (rank 3): env://, gpu 3\n");
    for rank in 0..4u32 {
        let numel = if rank == 1 { 53295079 } else { 53291510 };
        log.push_str(&format!(
            "[default{rank}]:[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) ran for 1800265 milliseconds before timing out.\n"
        ));
    }
    write(dir.path(), "node001/torchrun.log", &log);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// Lightning 1.2's lines as two nodes print them under one `srun` (no host
/// prefix, interleaved), for the global ranks each node believes it holds.
fn lightning_lines(nodes: &[u32], world: u32) -> String {
    let mut log = String::new();
    for local in 0..4u32 {
        for &node in nodes {
            let rank = node * 4 + local;
            log.push_str(&format!(
                "LOCAL_RANK: {local} - CUDA_VISIBLE_DEVICES: [0,1,2,3]\n\
                 initializing ddp: GLOBAL_RANK: {rank}, MEMBER: {}/{world}\n",
                rank + 1
            ));
        }
    }
    log
}

/// lightning#4389's shape: `srun python train.py --num-nodes 2 --gpus 4`
/// with one task per node; both nodes start as node 0, so ranks 0–3 are
/// claimed twice and 4–7 never, and the group of 8 can never form.
#[test]
fn two_nodes_claiming_the_same_ranks_are_a_rank_layout_lightning_1_2() {
    let v = common::verdict_of_owned(&[("srun_output.log".into(), lightning_lines(&[0, 0], 8))]);
    let cause = common::assert_cause(&v, "config_mismatch", "ranks 4–7 by none");
    assert!(
        cause["summary"]
            .as_str()
            .unwrap()
            .contains("ranks 0–3 of a world of 8 claimed by two workers each"),
        "{cause:#}"
    );
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// Every rank claimed once, or one node's log kept twice in the job folder
/// (a copy beside the original): nothing collides.
#[test]
fn ranks_claimed_once_or_a_log_kept_twice_collide_in_nothing_lightning_1_2() {
    let whole = lightning_lines(&[0, 1], 8);
    let v = common::verdict_of_owned(&[("srun_output.log".into(), whole)]);
    assert!(
        !common::cause_kinds(&v).contains(&"config_mismatch"),
        "{v:#}"
    );
    let half = lightning_lines(&[0], 8);
    let v = common::verdict_of_owned(&[
        ("node1.log".into(), half.clone()),
        ("copy/node1.log".into(), half.clone()),
    ]);
    assert!(
        !common::cause_kinds(&v).contains(&"config_mismatch"),
        "{v:#}"
    );
    // One node's log of a job requeued onto it, appended to: two whole
    // rounds of claims, one after the other.
    let v = common::verdict_of_owned(&[("node1.log".into(), format!("{half}{half}"))]);
    assert!(
        !common::cause_kinds(&v).contains(&"config_mismatch"),
        "{v:#}"
    );
}

/// One log per host, each host's workers prefixed by it (`node001: `):
/// both hosts claim ranks 0–3.
#[test]
fn two_hosts_claiming_the_same_ranks_are_a_rank_layout_lightning_2_1() {
    let mut files = Vec::new();
    for host in ["node001", "node002"] {
        let text: String = (0..4u32)
            .map(|r| {
                format!(
                    "{host}: Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {}/8\n",
                    r + 1
                )
            })
            .collect();
        files.push((format!("{host}.log"), text));
    }
    let v = common::verdict_of_owned(&files);
    common::assert_cause(
        &v,
        "config_mismatch",
        "ranks 0–3 of a world of 8 claimed by two workers each",
    );
}

/// DeepSpeed's multi-node launch through pdsh (DeepSpeed 0.10, NCCL 2.18):
/// pdsh puts `host: ` before every line, and NCCL's own prefix repeats the
/// host (`gpu-l40s-02: gpu-l40s-02:44004:44223 [0] NCCL INFO …`). Each
/// rank's init line still places it on its host with its pid and GPU.
#[test]
fn pdsh_host_labels_before_nccls_own_prefix_place_the_ranks_deepspeed() {
    let mut log = String::from(
        "[2023-11-07 10:12:01,431] [INFO] [runner.py:570:main] cmd = pdsh -S -f 1024 -w gpu-l40s-01,gpu-l40s-02 export NCCL_DEBUG=INFO; cd /home/ml/sft; python -u -m deepspeed.launcher.launch\n",
    );
    for r in 0..8u32 {
        let host = format!("gpu-l40s-0{}", r / 4 + 1);
        let (l, pid) = (r % 4, 44000 + r);
        log.push_str(&format!(
            "{host}: {host}:{pid}:{pid} [{l}] NCCL INFO Bootstrap : Using enp65s0f0np0:10.9.0.2{}<0>\n\
             {host}: {host}:{pid}:{} [{l}] NCCL INFO comm 0x5511{r} rank {r} nranks 8 cudaDev {l} busId {}1000 - Init COMPLETE\n",
            r / 4 + 1,
            pid + 200,
            ["", "4", "8", "c"][l as usize]
        ));
    }
    let doc = common::report_of(&[("deepspeed-launch.log", &log)]);
    let row = common::rank_row(&doc, 6);
    assert_eq!(row["host"], "gpu-l40s-02", "{row:#}");
    assert_eq!(row["pid"], 44006, "{row:#}");
    assert_eq!(row["gpu_bus_id"], "0000:81:00.0", "{row:#}");
}

/// `mpirun --tag-output` with NCCL_DEBUG=WARN, Open MPI 4: every worker
/// prints its script's `[init] rank=R … host=H` line; node03's four print
/// nothing after it while the other eight time out in ALLREDUCE 51. Only
/// the scripts' lines say where the silent ranks ran; a worker's
/// `rank R: … host memory` warning names no host.
#[test]
fn a_scripts_rank_and_host_print_places_ranks_nccl_never_named_ompi_4() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for rank in 0..12u32 {
        let host = format!("node0{}", rank / 4 + 1);
        log.push_str(&format!(
            "[1,{rank}]<stdout>:[init] rank={rank} local_rank={} world_size=12 host={host} device=cuda:{}\n",
            rank % 4,
            rank % 4
        ));
    }
    log.push_str("[1,2]<stdout>:rank 2: prefetch buffer grew to 31.2 GiB host memory\n");
    for rank in 0..8u32 {
        log.push_str(&format!(
            "[1,{rank}]<stderr>:[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600413 milliseconds before timing out.\n"
        ));
    }
    write(dir.path(), "mpirun.out", &log);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["stuck_ranks"], serde_json::json!([8, 9, 10, 11]), "{v:#}");
    assert_eq!(common::rank_row(&doc, 9)["host"], "node03");
    assert_eq!(common::rank_row(&doc, 2)["host"], "node01");
}

/// DeepSpeed 0.14 under pdsh, NCCL_DEBUG=WARN: the launcher's
/// `global_rank_mapping` is the only statement of where each rank ran.
/// Rank 11 on gpu-d03 can't reach 10.20.3.14 (`No route to host`);
/// `ip -br addr` saved per host says that address is gpu-d04's, on the LAN
/// the others use: a host that rejects the connects (firewalld's default
/// reject answers EHOSTUNREACH), not a wrong interface.
#[test]
fn deepspeeds_rank_mapping_places_ranks_and_listed_addresses_name_the_peer_deepspeed_0_14() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = ["gpu-d01", "gpu-d02", "gpu-d03", "gpu-d04"];
    let mut log = String::new();
    for h in hosts {
        log.push_str(&format!(
            "{h}: [2024-12-04 15:41:05,951] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class 'list'>, {{'gpu-d01': [0, 1, 2, 3], 'gpu-d02': [4, 5, 6, 7], 'gpu-d03': [8, 9, 10, 11], 'gpu-d04': [12, 13, 14, 15]}})\n"
        ));
    }
    log.push_str("gpu-d03: gpu-d03:31877:31877 [3] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.20.3.14<45811> returned 113(No route to host) errno 115(Operation now in progress)\n");
    log.push_str("gpu-d03: [rank11]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n");
    write(dir.path(), "run1/deepspeed.log", &log);
    for (i, h) in hosts.iter().enumerate() {
        write(
            dir.path(),
            &format!("netinfo/{h}.txt"),
            &format!(
                "$ ip -br addr show bond0\nbond0            UP             10.20.3.{}/24 fe80::ba3f:d2ff:fe21:44a0/64 \n",
                11 + i
            ),
        );
    }
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(common::rank_row(&doc, 11)["host"], "gpu-d03");
    assert_eq!(
        common::rank_row(&doc, 13)["host"],
        "gpu-d04",
        "a rank that wrote nothing"
    );
    assert_eq!(v["cause"]["host"], "gpu-d04", "{v:#}");
    assert_eq!(v["cause"]["kind"], "firewall", "{v:#}");
}
