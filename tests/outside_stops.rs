//! Jobs stopped from outside: a user's scancel, or every host's launcher
//! signalled together (a Kubernetes eviction, a queue's preemption). A
//! stop that came while the job still trained ended a healthy run; one that
//! came long after its training loop went quiet ended a hang.

mod common;

use common::write;

/// Two pods of a PyTorchJob under torchrun (torch 2.4, NCCL 2.20.5), each
/// pod's console one file. Rank 0 logs a step every 20 s up to `last_step`
/// (minutes after 11:00). At 11:40:02 every agent gets SIGTERM (`skew_s`
/// apart); pod 1's rank 8 first prints, unstamped, NCCL's WARN for its peer
/// on pod 0, which the SIGTERM took a moment earlier.
fn evicted_job(last_step: u32, agents: &[u32]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    for pod in 0..2u32 {
        let host = format!("llm-worker-{pod}");
        let mut log = String::new();
        for local in 0..8u32 {
            let rank = pod * 8 + local;
            log.push_str(&format!("[default{local}]:{host}:{p}:{t} [{local}] NCCL INFO comm 0x55d0{rank:02} rank {rank} nranks 16 cudaDev {local} nvmlDev {local} busId {local}b000 commId 0xb4f4 - Init COMPLETE\n", p = 100 + local, t = 800 + local));
        }
        if pod == 0 {
            for i in 0..=last_step * 3 {
                let (m, s) = (i / 3, i % 3 * 20);
                log.push_str(&format!("[default0]:2024-10-08 11:{m:02}:{s:02},120 - INFO - step {} | loss 1.98{} | 0.93s/step\n", 4000 + i * 20, i % 10));
            }
        } else {
            log.push_str("[default0]:\n[default0]:llm-worker-1:100:833 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer llm-worker-0.llm-worker.ml.svc.cluster.local<55103>\n");
            log.push_str("[default0]:llm-worker-1:100:833 [0] NCCL INFO misc/socket.cc:752 -> 6\n");
        }
        if let Some(skew) = agents.get(pod as usize) {
            log.push_str(&format!("W1008 11:40:{:02}.318000 1 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers\n", 2 + skew));
            log.push_str(&format!("W1008 11:40:{:02}.319000 1 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 100 closing signal SIGTERM\n", 2 + skew));
            log.push_str("torch.distributed.elastic.multiprocessing.api.SignalException: Process 1 got signal: 15\n");
        }
        write(dir.path(), &format!("pods/{host}.log"), &log);
    }
    common::analyze_to_json(dir.path())
}

#[test]
fn every_pod_signalled_together_while_training_is_a_healthy_stop_torch_2_4() {
    let doc = evicted_job(39, &[0, 1]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "healthy", "{v:#}");
    assert!(v["cause"].is_null(), "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// Only one pod's agent was signalled (its node reclaimed), before any
/// failure elsewhere: that pod's workers died first, and the other pod's
/// ranks lost their peer to it.
#[test]
fn one_pod_signalled_alone_is_the_crash_of_its_workers_torch_2_4() {
    let doc = evicted_job(39, &[0]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "crash", "{v:#}");
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "llm-worker-0", "{v:#}");
    assert_eq!(
        v["stuck_ranks"],
        serde_json::json!((0..8).collect::<Vec<u32>>()),
        "{v:#}"
    );
}

/// The last step 25 minutes before the eviction, at a 20 s pace: the
/// pods were deleted out of a hang.
#[test]
fn every_pod_signalled_long_after_the_last_step_ended_a_hang_torch_2_4() {
    let doc = evicted_job(15, &[0, 1]);
    assert_eq!(doc["verdict"]["status"], "hang", "{:#}", doc["verdict"]);
}

/// `sbatch` job (torch 2.3, NCCL_DEBUG=WARN): rank 0 logs a step every
/// 22 s until `last`, then the user's scancel at 04:41:17.
fn cancelled_job(last: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.1\n");
    for i in 0..200u32 {
        let secs = 3 * 3600 + 40 * 60 + i * 22;
        let at = format!(
            "2024-06-02 {:02}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        if at.as_str() > last {
            break;
        }
        log.push_str(&format!(
            "0: {at},110 - INFO - step {} | loss 2.0{} | 1.10s/step\n",
            8000 + i * 20,
            i % 10
        ));
    }
    log.push_str("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n");
    log.push_str(
        "slurmstepd: error: *** JOB 552107 ON gn-017 CANCELLED AT 2024-06-02T04:41:17 ***\n",
    );
    write(dir.path(), "slurm-552107.out", &log);
    common::analyze_to_json(dir.path())
}

#[test]
fn a_scancel_of_a_job_that_still_trained_is_healthy_slurm() {
    let doc = cancelled_job("2024-06-02 04:41:00");
    assert_eq!(doc["verdict"]["status"], "healthy", "{:#}", doc["verdict"]);
}

#[test]
fn a_scancel_long_after_the_last_step_ended_a_hang_slurm() {
    let doc = cancelled_job("2024-06-02 04:07:56");
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert!(
        v["cause"].is_null() || v["cause"]["kind"] == "unknown",
        "no line names a cause: {v:#}"
    );
}
