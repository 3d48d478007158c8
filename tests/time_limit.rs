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
