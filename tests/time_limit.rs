//! Jobs the scheduler ended at their time limit. One still training then
//! ran out of time (chained jobs do so every allocation); one whose output
//! had stopped long before hung until the limit ended it. Either way the
//! tasks srun reports after the cancel are what the cancel stopped.

mod common;

use common::write;

/// `srun --label`, one torchrun per node (torch 2.4, NCCL 2.20.5), rank 0
/// reporting its steps every 41 s; the last step at `last_step`, the
/// scheduler's time limit at 06:00:14, then the agents' SignalException
/// and srun's `Exited with exit code 1` for each node's task.
fn slurm_job(last_step: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: [default0]:NCCL version 2.20.5+cuda12.4\n");
    for (i, minute) in (40..60).enumerate() {
        let at = format!("2024-08-30 05:{minute:02}:03");
        if at.as_str() > last_step {
            break;
        }
        log.push_str(&format!(
            "0: [default0]:[{at}] it  {} | loss 2.4{i:02} | gnorm 0.25 | lr 1.800e-04 | 4.08s/it\n",
            46800 + i * 10
        ));
    }
    log.push_str("slurmstepd: error: *** JOB 9918273 ON sh03-12n05 CANCELLED AT 2024-08-30T06:00:14 DUE TO TIME LIMIT ***\n");
    log.push_str("slurmstepd: error: *** STEP 9918273.0 ON sh03-12n05 CANCELLED AT 2024-08-30T06:00:14 DUE TO TIME LIMIT ***\n");
    for (task, host) in ["sh03-12n05", "sh03-12n06"].iter().enumerate() {
        log.push_str(&format!("{task}: torch.distributed.elastic.multiprocessing.api.SignalException: Process {} got signal: 15\n", 1036400 + task));
        log.push_str(&format!(
            "srun: error: {host}: task {task}: Exited with exit code 1\n"
        ));
    }
    write(dir.path(), "slurm-9918273.out", &log);
    common::analyze_to_json(dir.path())
}

#[test]
fn a_job_still_training_at_its_time_limit_ran_out_of_time_torch_2_4() {
    let doc = slurm_job("2024-08-30 05:59:59");
    let v = &doc["verdict"];
    assert_eq!(v["status"], "healthy", "{v:#}");
    assert!(v["cause"].is_null(), "{v:#}");
}

#[test]
fn a_job_silent_long_before_its_time_limit_is_no_healthy_run_torch_2_4() {
    let doc = slurm_job("2024-08-30 05:41:00");
    let v = &doc["verdict"];
    assert_ne!(v["status"], "healthy", "{v:#}");
    // srun's exits came after the cancel: no process crashed by itself.
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
}

/// torchtitan under `srun` (torch 2.5, NCCL 2.21.5), two hosts: rank 0
/// logs its steps through torchtitan's logger (`[titan] <asctime> - root -
/// INFO - step: …`) up to 35 s before the scheduler preempts the job. Then
/// the ranks on the other host, whose peers the SIGTERM took first, print
/// NCCL's socket errors into their NCCL_DEBUG_FILE (no stamps) and their
/// watchdog's error (stamped after the cancel). All of it is what the
/// preemption did: the job had no fault.
fn preempted_job(last_step: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for (i, second) in (0..60).step_by(5).enumerate() {
        let at = format!("2025-01-08 13:4{}:{second:02},894", i / 12 + 3);
        if at.as_str() > last_step {
            break;
        }
        log.push_str(&format!("[default0]:[titan] {at} - root - INFO - step: {}  loss:  2.31{i:02}  memory: 61.27GiB(77.45%)  tps: 3590  mfu: 40.25%\n", 14600 + i * 10));
    }
    log.push_str("slurmstepd: error: *** JOB 771203 ON gpu-041 CANCELLED AT 2025-01-08T13:44:02 DUE TO PREEMPTION ***\n");
    write(dir.path(), "logs/gpu-041.out", &log);
    for local in 0..2u32 {
        let rank = 2 + local;
        let pid = 73180 + local;
        write(
            dir.path(),
            &format!("logs/gpu-042.{local}.out"),
            &format!(
                "[rank{rank}]:[E108 13:44:03.221208198 ProcessGroupNCCL.cpp:1584] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n"
            ),
        );
        write(
            dir.path(),
            &format!("nccl/gpu-042.{pid}.log"),
            &format!(
                "gpu-042:{pid}:{pid} [{local}] NCCL INFO comm 0x55a{local} rank {rank} nranks 4 cudaDev {local} nvmlDev {local} busId {local}8000 commId 0x91c3 - Init COMPLETE\n\
                 gpu-042:{pid}:{} [{local}] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu-041<56922>\n\
                 gpu-042:{pid}:{} [{local}] NCCL INFO misc/socket.cc:752 -> 6\n",
                pid + 300,
                pid + 300
            ),
        );
    }
    common::analyze_to_json(dir.path())
}

#[test]
fn errors_after_a_preemption_that_came_while_training_are_no_fault_torch_2_5() {
    let doc = preempted_job("2025-01-08 13:43:27,894");
    let v = &doc["verdict"];
    assert_eq!(v["status"], "healthy", "{v:#}");
    assert!(v["cause"].is_null(), "{v:#}");
}

#[test]
fn errors_after_a_preemption_of_a_job_that_logged_no_step_are_still_read_torch_2_5() {
    let doc = preempted_job("2025-01-08 13:23:27,894");
    assert_ne!(doc["verdict"]["status"], "healthy", "{:#}", doc["verdict"]);
}
