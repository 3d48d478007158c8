//! Processes that die, and how their rank is found.

mod common;

/// NVIDIA/nccl#1538's shape, NCCL 2.22 under HPC-X: UCX's signal handler
/// names the dying process only as `[host:pid …]`. The pid is the one whose
/// NCCL lines say it is rank 2, so rank 2 crashed; it died setting up its
/// connections (the proxy's failed Connect), before any Init COMPLETE.
#[test]
fn a_signal_handler_naming_host_and_pid_gives_the_rank_ucx() {
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
    let doc = common::report_of(&[("worker-0.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
}

/// OpenRLHF/vLLM under Ray 2.x: the raylet reports a worker that died, by
/// address and pid; that pid's `(RayWorkerWrapper pid=…, ip=…)` lines say it
/// was rank 1. The other ranks' watchdogs then time out waiting for it.
#[test]
fn the_raylets_dead_worker_is_the_rank_of_that_pid_and_address_ray_2() {
    let mut log = String::new();
    for (rank, pid, ip) in [
        (0u32, 90737u32, "172.19.24.109"),
        (1, 90738, "172.19.24.110"),
        (2, 90739, "172.19.24.111"),
    ] {
        log.push_str(&format!("(RayWorkerWrapper pid={pid}, ip={ip}) [rank{rank}]:[W1201 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {rank}] using GPU 0 to perform barrier as devices used by this process are currently unknown.\n"));
    }
    for (rank, pid, ip) in [
        (0u32, 90737u32, "172.19.24.109"),
        (2, 90739, "172.19.24.111"),
    ] {
        log.push_str(&format!("(RayWorkerWrapper pid={pid}, ip={ip}) [rank{rank}]:[E1201 10:30:00.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0 Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"));
    }
    log.push_str("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: fff Worker ID: d89 Node ID: 844 Worker IP address: 172.19.24.110 Worker port: 10012 Worker PID: 90738 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.\n");
    let doc = common::report_of(&[("driver.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// Ray Train 2.x on EC2: a worker's exception reaches the driver as
/// `RayTaskError(OutOfMemoryError): ray::… (pid=N, ip=A, …)`; the trainer
/// actor re-raises it under its own pid first. NCCL names the hosts
/// `ip-10-0-3-42` in the worker logs while Ray prefixes the same
/// processes' lines with `ip=10.0.3.42`: one host, the pid's rank the one
/// that raised. Its peers' `Connection closed` follows.
#[test]
fn a_ray_workers_exception_is_the_crash_of_that_pids_rank_ray_2() {
    let mut driver = String::new();
    let mut files: Vec<(String, String)> = Vec::new();
    for (rank, pid, ip) in [
        (0u32, 2801u32, "10.0.1.17"),
        (1, 2803, "10.0.1.17"),
        (2, 3105, "10.0.3.42"),
        (3, 3108, "10.0.3.42"),
    ] {
        let host = format!("ip-{}", ip.replace('.', "-"));
        let local = rank % 2;
        files.push((
            format!("ray_logs/{ip}/worker-{pid}.out"),
            format!(
                "{host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using ens5:{ip}<0>\n\
                 {host}:{pid}:{t} [{local}] NCCL INFO ncclCommInitRank comm 0x5{pid} rank {rank} nranks 4 cudaDev {local} nvmlDev {local} busId 1{local}0 commId 0xaf57 - Init COMPLETE\n",
                t = pid + 400
            ),
        ));
        if rank != 3 && ip != "10.0.1.17" {
            driver.push_str(&format!("\u{1b}[36m(RayTrainWorker pid={pid}, ip={ip})\u{1b}[0m {host}:{pid}:{t} [{local}] NCCL INFO misc/socket.cc:47 -> 6\n", t = pid + 400));
        }
    }
    driver.push_str("\u{1b}[36m(RayTrainWorker pid=2801)\u{1b}[0m [rank0]:[E122 16:41:07.224000044 ProcessGroupNCCL.cpp:589] [Rank 0] Collective WorkNCCL(SeqNum=17, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n");
    driver.push_str("ray.exceptions.RayTaskError(OutOfMemoryError): \u{1b}[36mray::_Inner.train()\u{1b}[39m (pid=2607, ip=10.0.1.17, actor_id=447b, repr=TorchTrainer)\n");
    driver.push_str("ray.exceptions.RayTaskError(OutOfMemoryError): \u{1b}[36mray::_RayTrainWorker__execute.get_next()\u{1b}[39m (pid=3108, ip=10.0.3.42, actor_id=1640, repr=<ray.train._internal.worker_group.RayTrainWorker object at 0x7f3c81b2e650>)\n");
    driver.push_str("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 1 has a total capacity of 22.06 GiB of which 2.74 GiB is free.\n");
    let mut all: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    all.push(("driver.log", &driver));
    let doc = common::report_of(&all);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert_eq!(v["cause"]["host"], "ip-10-0-3-42", "{v:#}");
    let hosts = doc["job"]["hosts"].as_array().unwrap();
    assert!(
        hosts
            .iter()
            .all(|h| !h.as_str().unwrap().starts_with("10.")),
        "{hosts:?}"
    );
}

/// nccl-tests under mpirun (Open MPI 4): the opal handler prints
/// `[host:pid] Signal: Segmentation fault (11)` for the dying process; the
/// pid's NCCL lines say it is rank 1.
#[test]
fn open_mpis_signal_report_names_the_rank_of_that_host_and_pid_ompi_4() {
    let mut log = String::new();
    for (rank, host, pid) in [(0u32, "jetson-2", 8669u32), (1, "jetson-3", 29969)] {
        log.push_str(&format!(
            "{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"
        ));
        log.push_str(&format!("{host}:{pid}:{pid} [0] NCCL INFO comm 0x5581c0 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x8e2f0c1d - Init COMPLETE\n"));
    }
    log.push_str("[jetson-3:29969] *** Process received signal ***\n[jetson-3:29969] Signal: Segmentation fault (11)\n[jetson-3:29969] Signal code: Address not mapped (1)\n[jetson-3:29969] *** End of error message ***\n");
    let doc = common::report_of(&[("mpirun.out", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// A PyTorch job under mpirun (Open MPI 4, ORTE): ranks 0, 1 and 3 time out
/// in seq 20 while rank 2 wrote nothing of its own. mpirun's non-zero-exit
/// block names the first process that failed by its process name
/// `[[jobid,1],2]`: rank 2 exited with code 1, so it crashed rather than
/// stalled. PRRTE (Open MPI 5) writes `[prterun-host-pid@1,2]` instead.
#[test]
fn mpiruns_first_failed_process_block_names_the_crashed_rank_ompi_4_and_5() {
    for name in ["[[8493,1],2]", "[prterun-gpu01-147515@1,2]"] {
        let mut log = String::new();
        for rank in [0u32, 1, 3] {
            log.push_str(&format!("[rank{rank}]:[E1201 10:30:0{rank}.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"));
        }
        log.push_str("--------------------------------------------------------------------------\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted.\n--------------------------------------------------------------------------\n--------------------------------------------------------------------------\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n");
        log.push_str(&format!(
            "  Process name: {name}\n  Exit code:    1\n--------------------------------------------------------------------------\n"
        ));
        let doc = common::report_of(&[("mpirun.out", &log)]);
        let v = &doc["verdict"];
        assert_eq!(v["cause"]["kind"], "process_crash", "{name}: {v:#}");
        assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{name}: {v:#}");
    }
}

/// pipedream#76's shape with a segfault: UCX's handler reports a fatal
/// signal in NCCL's proxy thread for a pid no line ties to a rank, then
/// torchrun's ChildFailedError. A process on that host crashed, rank
/// unknown. (The thread's own signal, a bus error there, is /dev/shm too
/// small: tests/shared_memory.rs.)
#[test]
fn a_fatal_signal_of_an_unknown_rank_is_a_crash_on_its_host_ucx() {
    let log = "[8d6bf97c3bf4:3039 :0:3095] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)\n\
==== backtrace (tid:   3095) ====\n\
 2 0x000000000007587d ncclGroupEnd()  ???:0\n\
 5 0x00000000000489b1 ???()  /usr/lib/x86_64-linux-gnu/libnccl.so.2:0\n\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n";
    let doc = common::report_of(&[("train.log", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "8d6bf97c3bf4", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("Segmentation fault"),
        "{v:#}"
    );
}

/// torch 2.8's shape: a traceback whose exception names the program's own
/// CUDA fault (`torch.AcceleratorError: CUDA error: an illegal memory
/// access …`) and no rank. A process crashed, rank unknown; a hardware
/// fault's wording is not put on the program, and on several hosts the
/// process could be any.
#[test]
fn a_rankless_cuda_fault_of_the_program_is_a_crash_torch_2_8() {
    let tb = |error: &str| {
        format!(
            "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 180, in main\n    loss.backward()\n\
             torch.AcceleratorError: CUDA error: {error}\n\
             CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        )
    };
    let v = common::verdict_of(&[("train.log", &tb("an illegal memory access was encountered"))]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["status"], "crash", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("illegal memory access"), "{summary}");

    let ecc = common::verdict_of(&[("train.log", &tb("uncorrectable ECC error encountered"))]);
    assert_ne!(ecc["cause"]["kind"], "process_crash", "{ecc:#}");

    let hosts = "node1:10:10 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
                 node2:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n";
    let two = format!("{hosts}{}", tb("an illegal memory access was encountered"));
    let v = common::verdict_of(&[("train.log", &two)]);
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
}

/// AnomalyGPT#43's shape (DeepSpeed 0.x launcher, one node): the command
/// list of the failed worker is wrapped, so `] exits with return code = -9`
/// stands without its `--local_rank`. A worker was SIGKILLed (host memory:
/// the OOM killer); its rank is unknown, the crash is not.
#[test]
fn deepspeeds_wrapped_return_code_minus_9_is_a_crash_of_an_unknown_worker() {
    let log = "[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439\n\
[2023-11-13 16:59:54,783] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9440\n\
[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] ['/opt/conda/bin/python', '-u', 'train_mvtec.py', '--local_rank=1', '--model', 'openllama_peft', '--stage', '1', '--imagebind_ckpt_path', \n\
'../pretrained_ckpt/imagebind_ckpt/imagebind_huge.pth', '--log_path', './ckpt/train_mvtec/log_rest/'\n\
] exits with return code = -9\n";
    let doc = common::report_of(&[("train.log", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert!(
        v["cause"]["remedy"]
            .as_str()
            .unwrap()
            .contains("OOM killer"),
        "{v:#}"
    );
}

/// verl#2950's shape (Ray 2.4x): Ray's memory monitor killed an actor when
/// its node ran low on host memory: a crash on that node, with the OOM
/// hint. A raylet summary of zero killed workers is no death.
#[test]
fn a_worker_rays_memory_monitor_killed_is_a_crash_on_its_node_ray_2_x() {
    let log = "\
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
Memory on the node (IP: 10.20.49.141, ID: 4748aa6d1bc114b8bf58822d0b162796a1d36a79dee5c167c9bf91f5) where the task (actor ID: 9e43ace6a1234e13df7b456b01000000, name=WorkerDict.__init__, pid=4100606, memory used=56.57GB) was running was 239.01GB / 251.53GB (0.950225), which exceeds the memory usage threshold of 0.95.
";
    let v = &common::report_of(&[("driver.log", log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "10.20.49.141", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.to_lowercase().contains("memory"), "{remedy}");

    let log = "(raylet) node_manager.cc:3049: 0 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: e5d953ef03e55e26f13973ea1b5a0fd0ecc729cd820bc89e4aa50451, IP: 10.0.62.231) over the last time period.\n";
    let v = &common::report_of(&[("driver.log", log)])["verdict"];
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
}

/// Slurm 21 under `sbatch --mem`, ranks printing nothing srun labels
/// (k-net#30's shape): the step's cgroup OOM killer took one task, and srun
/// says on which node. Without `--label` a task id is not known to be a
/// rank, but the process that died is still on that host: a crash there,
/// no rank named.
#[test]
fn an_unlabelled_srun_task_killed_out_of_memory_is_a_crash_on_its_node_slurm_21() {
    let log = "\
slurmstepd-gpu20-15: error: Detected 1 oom-kill event(s) in StepId=9411285.0. Some of your processes may have been killed by the cgroup out-of-memory handler.
srun: error: gpu20-15: task 0: Out Of Memory
srun: launch/slurm: _step_signal: Terminating StepId=9411285.0
slurmstepd-gpu20-15: error: *** STEP 9411285.0 ON gpu20-15 CANCELLED AT 2022-05-17T17:58:10 ***
";
    let doc = common::report_of(&[("slurm-9411285.out", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "crash", "{v:#}");
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "gpu20-15", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// HuggingFace m4's Jean Zay log (Slurm 21): hours into training, with no
/// NCCL or CUDA error anywhere, srun reports a node failure and cancels the
/// step for it. The node took its processes down: a crash on that node, not
/// a cancel nor a healthy end.
#[test]
fn a_node_srun_lost_is_a_crash_on_that_node_slurm_21() {
    let log = "\
iteration:  2500/500000   0% | elapsed time: 07:41:19 | per_token_loss: 3.1525
** Finished validation **
srun: error: Node failure on jean-zay-iam37
srun: Job step aborted: Waiting up to 62 seconds for job step to finish.
slurmstepd: error: *** STEP 1943824.0 ON jean-zay-iam17 CANCELLED AT 2023-03-06T03:17:51 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
";
    let doc = common::report_of(&[("slurm-1943824.out", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "crash", "{v:#}");
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "jean-zay-iam37", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("The node jean-zay-iam37"),
        "{v:#}"
    );

    // Ranks NCCL placed on the lost node went down with it.
    let init: String = [
        ("jean-zay-iam17", 0),
        ("jean-zay-iam17", 1),
        ("jean-zay-iam37", 2),
        ("jean-zay-iam37", 3),
    ]
    .iter()
    .map(|(host, rank)| {
        format!(
            "{host}:10{rank}:10{rank} [{}] NCCL INFO comm 0x55d0{rank} rank {rank} nranks 4 cudaDev {} busId 1a000 - Init COMPLETE\n",
            rank % 2,
            rank % 2
        )
    })
    .collect();
    let doc = common::report_of(&[("slurm-1943824.out", &format!("{init}{log}"))]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2, 3]), "{v:#}");
}

/// LUMI's notes (torch 1.13, RCCL 2.11.4): a barrier at start-up raises
/// NCCL's `unhandled system error`, and the agent reports the worker
/// `failed (exitcode: 1)`. Exit code 1 is the uncaught exception the
/// console just showed: NCCL failed under the worker, which is no crash of
/// its own. The same report after an exception of the program's own (out of
/// memory) stays that worker's crash.
#[test]
fn an_exit_code_1_after_an_nccl_error_is_its_consequence_torch_1_13() {
    let log = |error: &str| {
        format!(
            "    work = default_pg.barrier(opts=opts)
{error}
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 15855) of binary: /users/venv/bin/python
"
        )
    };
    let nccl = "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.11.4";
    let doc = common::report_of(&[("slurm.out", &log(nccl))]);
    assert_ne!(
        doc["verdict"]["cause"]["kind"], "process_crash",
        "{:#}",
        doc["verdict"]
    );

    let oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    let doc = common::report_of(&[("slurm.out", &log(oom))]);
    assert_eq!(
        doc["verdict"]["cause"]["kind"], "process_crash",
        "{:#}",
        doc["verdict"]
    );
}

/// torch 2.7 under `mp.spawn` on one host (pytorch#152302's shape): the
/// parent SIGTERMs the other child and raises for the one that failed,
/// whose traceback (cut here) follows. Child 1 died first; a job with such
/// a report is never healthy.
#[test]
fn spawns_report_of_the_child_that_raised_names_it_torch_2_7() {
    let log = "\
W0428 00:47:04.140000 51980 .venv/lib/python3.12/site-packages/torch/multiprocessing/spawn.py:169] Terminating process 52051 via signal SIGTERM

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File \"/home/x/.venv/lib/python3.12/site-packages/torch/multiprocessing/spawn.py\", line 90, in _wrap
    fn(i, *args)
";
    let v = common::verdict_of(&[("spawn.log", log)]);
    assert_eq!(v["status"], "crash", "{v:#}");
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// A child killed by a signal has no traceback: spawn names the signal.
#[test]
fn spawns_report_of_a_child_killed_by_a_signal_names_it_torch_2() {
    let log = "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL\n";
    let v = common::verdict_of(&[("spawn.log", log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// The child's own exception, where the paste kept it, decides: running out
/// of GPU memory is its crash; an NCCL error because a peer went away is a
/// consequence, and names no culprit (torch 2.x `mp.spawn`).
#[test]
fn the_spawned_childs_own_exception_decides_whether_it_crashed_first_torch_2() {
    let report = |exception: &str| {
        format!(
            "-- Process 1 terminated with the following error:\n\
             Traceback (most recent call last):\n  \
             File \"/x/torch/multiprocessing/spawn.py\", line 90, in _wrap\n    \
             fn(i, *args)\n\
             {exception}\n"
        )
    };
    let oom = report("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
    let v = common::verdict_of(&[("spawn.log", &oom)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
    let reason = v["cause"]["summary"].as_str().unwrap();
    assert!(reason.contains("out of memory"), "{reason}");

    let echo = report(
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5",
    );
    let v = common::verdict_of(&[("spawn.log", &echo)]);
    assert_ne!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// A CoordExp logbook's shape (torch 2.6, eight ranks): rank 0's Gloo
/// all-gather raises `[…/gloo/transport/tcp/pair.cc:547] Connection closed
/// by peer [192.168.7.7]:57000` — its peer went away, so rank 0 did not die
/// of its own accord; the peer's leaving is what the verdict must explain:
/// a death on the peer's address, never rank 0's.
#[test]
fn a_gloo_connection_closed_by_its_peer_is_a_consequence_torch_2_6() {
    let log = "\
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/root/miniconda3/envs/ms/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py\", line 3949, in all_gather
[rank0]:     work.wait()
[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [192.168.7.7]:57000
";
    let v = &common::report_of(&[("rank0.log", log)])["verdict"];
    assert!(
        !v["stuck_ranks"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(0)),
        "{v:#}"
    );
    if v["cause"]["kind"] == "process_crash" {
        assert_eq!(v["cause"]["host"], "192.168.7.7", "{v:#}");
    }
}

/// nccl-tests under mpirun (nccl#241's shape): the run printed its table's
/// header, then mpirun names the first process that failed, with exit code 3
/// — nccl-tests' `testNcclError`, the status it returns when a NCCL call
/// failed. That process reported a failure; it did not crash of its own, so
/// it is no crash culprit. The same block with a segfault's code stays one.
#[test]
fn an_nccl_tests_process_exiting_with_its_nccl_error_status_is_no_crash_nccl_tests_2_x() {
    let mut log = String::from(
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n#\n# Using devices\n",
    );
    for rank in 0..10u32 {
        log.push_str(&format!("#   Rank {rank:2} Pid  4474{rank} on node05-ccncluster device {rank:2} [0x{:02x}] GeForce GTX 1080 Ti\n", 0x04 + rank));
    }
    log.push_str("#\n#                                                     out-of-place                       in-place\n#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
    log.push_str("--------------------------------------------------------------------------\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n");
    let with_code = |code: u32| {
        format!(
            "{log}  Process name: [[11192,1],8]\n  Exit code:    {code}\n--------------------------------------------------------------------------\n"
        )
    };
    let doc = common::report_of(&[("mpirun.out", &with_code(3))]);
    let v = &doc["verdict"];
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
    let doc = common::report_of(&[("mpirun.out", &with_code(139))]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([8]), "{v:#}");
}

/// Qwen2-VL-Finetune#135's shape (DeepSpeed launcher, host RAM exhausted
/// while a checkpoint was saved): the kernel's OOM killer took pid 410126,
/// and DeepSpeed's launcher then killed its workers, naming 410126 among
/// them. No rank line names the pid, but it was the job's worker: the job
/// crashed on it. An OOM kill of a pid no launcher names is some other
/// process of the host.
#[test]
fn an_oom_kill_of_a_pid_the_launcher_names_as_its_worker_is_the_crash_deepspeed() {
    let dmesg = "[856341.770960] Out of memory: Killed process 410126 (python) total-vm:79905000kB, anon-rss:22957108kB, file-rss:72036kB, shmem-rss:15143164kB, UID:1000 pgtables:78032kB oom_score_adj:0\n";
    let launcher = "\
[2025-06-02 20:51:24,182] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 410126
[2025-06-02 20:51:24,184] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 410127
";
    let v = &common::report_of(&[("dmesg.txt", dmesg), ("launcher.log", launcher)])["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["status"], "crash", "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("410126"),
        "{v:#}"
    );
    let other = launcher.replace("410126", "410125");
    let v =
        &common::report_of(&[("dmesg.txt", dmesg), ("launcher.log", other.as_str())])["verdict"];
    assert!(
        !v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("OOM killer"),
        "{v:#}"
    );
}

/// `srun --label` over torchrun, torch 2.2 / NCCL 2.19, one console: rank 5
/// on node-b dies of a data-loader ValueError (its agent reports exit code
/// 1); only afterwards do ranks on node-a and node-c print IB completion
/// errors naming node-b's address (status 12). Queue pairs to a dead
/// process retry until they give up: the crash, seen from outside, not a
/// lossy wire.
#[test]
fn transfers_failing_toward_a_host_after_its_process_died_are_the_crash_torch_2_2() {
    let hosts = ["node-a", "node-b", "node-c"];
    let mut log = String::new();
    for r in 0..12u32 {
        let (host, task, l, pid) = (hosts[(r / 4) as usize], r / 4, r % 4, 4100 + r);
        log.push_str(&format!(
            "{task}: [default{l}]:{host}:{pid}:{pid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB bond0:10.12.4.{}<0>\n\
             {task}: [default{l}]:{host}:{pid}:{pid} [{l}] NCCL INFO comm 0x55e1 rank {r} nranks 12 cudaDev {l} busId {:x}000 - Init COMPLETE\n",
            41 + r / 4,
            [0x18, 0x2a, 0x3a, 0x5d][l as usize],
        ));
    }
    log.push_str(
        "1: [default1]:Traceback (most recent call last):\n\
         1: [default1]:  File \"/app/train.py\", line 212, in <module>\n\
         1: [default1]:    batch = next(loader)\n\
         1: [default1]:ValueError: cannot reshape array of size 1531 into shape (2049)\n\
         1: [2024-05-14 11:02:38,132] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 1 (pid: 4105) of binary: /usr/bin/python\n",
    );
    for r in [0u32, 1, 8, 9] {
        let (host, task, l) = (hosts[(r / 4) as usize], r / 4, r % 4);
        log.push_str(&format!(
            "{task}: [default{l}]:{host}:{pid}:{tid} [{l}] transport/net_ib.cc:1333 NCCL WARN NET/IB : Got completion from peer 10.12.4.42<59639> with error 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.12.4.{a} remoteGids::ffff:10.12.4.42\n",
            pid = 4100 + r,
            tid = 4200 + r,
            a = 41 + r / 4
        ));
    }
    let doc = common::report_of(&[("slurm-771204.out", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
}

/// torch 1.12 with NCCL_ASYNC_ERROR_HANDLING=1, NCCL 2.12, nothing stamped:
/// node-b's rank 6 hits an IB retry-exhausted completion and its cleanup
/// loop rethrows the NCCL error (`terminate called …` / `  what():  NCCL
/// error: unhandled system error, NCCL version 2.12.10`) and takes the
/// process down; node-a's ranks time out half an hour later in other files.
/// The error took a rank down before any watchdog fired: a crash.
#[test]
fn an_nccl_error_rethrown_by_torch_1_12_before_the_timeouts_is_a_crash() {
    let b = "node-b:4337:4512 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eno1:10.50.0.12<0>\n\
             node-b:4337:4512 [2] transport/net_ib.cc:1098 NCCL WARN NET/IB : Got completion from peer 10.50.0.11<48213> with error 12, opcode 0, len 0, vendor err 129\n\
             [E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.\n\
             terminate called after throwing an instance of 'std::runtime_error'\n\
             \x20 what():  NCCL error: unhandled system error, NCCL version 2.12.10\n";
    let a: String = (0..4)
        .map(|r| format!("[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1650914, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800542 milliseconds before timing out.\n"))
        .collect();
    let doc = common::report_of(&[
        ("node-b/nccl.node-b.4337.log", b),
        ("node-a/torchrun.log", &a),
    ]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "crash", "{v:#}");
}

/// `srun -l torchrun …` (one task per node, torch 2.2): node-b's agent,
/// label 1, reports its workers dying before `init_process_group` (CUDA
/// error 802 on an NVSwitch host whose Fabric Manager is down), and srun
/// its task's exit. The label is an agent, not rank 1: the host is node-b
/// and the ranks its summary names are the culprits.
#[test]
fn an_agents_label_is_no_rank_and_its_summary_names_the_culprits_torch_2_2() {
    let mut log = String::from(
        "1: RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized\n\
         1: [2024-03-14 09:12:07,508] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 937014) of binary: /usr/bin/python\n\
         1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n\
         1: ============================================================\n\
         1: train.py FAILED\n\
         1: ------------------------------------------------------------\n\
         1: Failures:\n",
    );
    for (i, r) in [5u32, 6, 7].into_iter().enumerate() {
        log.push_str(&format!(
            "1: [{}]:\n1:   time      : 2024-03-14_09:12:06\n1:   host      : node-b.hpc.example.net\n1:   rank      : {r} (local_rank: {})\n1:   exitcode  : 1 (pid: {})\n1:   error_file: <N/A>\n",
            i + 1,
            r - 4,
            937015 + r
        ));
    }
    log.push_str(
        "1: ------------------------------------------------------------\n\
         1: Root Cause (first observed failure):\n\
         1: [0]:\n\
         1:   time      : 2024-03-14_09:12:06\n\
         1:   host      : node-b.hpc.example.net\n\
         1:   rank      : 4 (local_rank: 0)\n\
         1:   exitcode  : 1 (pid: 937014)\n\
         1:   error_file: <N/A>\n\
         srun: error: node-b: task 1: Exited with exit code 1\n",
    );
    let doc = common::report_of(&[("slurm-2231907.out", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["host"], "node-b", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([4, 5, 6, 7]), "{v:#}");
}
