//! A job whose runs were appended to one file (Slurm `--requeue` with
//! `--open-mode=append`): the failure of interest is the last run's, and the
//! earlier run's lines are set aside with a note saying so.

mod common;

fn round(log: &mut String, run: u32) {
    log.push_str(&format!("job 88123 (restart {run}) on node[01-02]\n"));
    for r in 0..8u32 {
        log.push_str(&format!(
            "{r}: rank {r} local_rank {} host node0{} device=cuda:{}\n",
            r % 4,
            r / 4 + 1,
            r % 4
        ));
    }
}

/// Slurm 23, torch 2.4, NCCL_DEBUG unset: the first run died of rank 3's
/// exception (srun reports its exit, the step is cancelled); the requeued
/// run hangs in ALLREDUCE 500, where every rank but 6 times out.
#[test]
fn the_last_run_of_an_appended_slurm_file_is_the_one_analysed_slurm_23() {
    let mut log = String::new();
    round(&mut log, 0);
    log.push_str(
        "3: Traceback (most recent call last):\n\
         3:   File \"/app/train.py\", line 88, in <module>\n\
         3: ValueError: cannot reshape array of size 1531 into shape (2049)\n\
         srun: error: node01: task 3: Exited with exit code 1\n\
         slurmstepd: error: *** STEP 88123.0 ON node01 CANCELLED AT 2024-11-19T02:45:31 ***\n",
    );
    round(&mut log, 1);
    for r in (0..8u32).filter(|&r| r != 6) {
        log.push_str(&format!(
            "{r}: [rank{r}]:[E1119 06:27:21.338666134 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=500, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n"
        ));
    }
    let doc = common::report_of(&[("slurm-88123.out", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6]), "{v:#}");
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
    let skipped = doc["skipped"].to_string();
    assert!(skipped.contains("an earlier run"), "{skipped}");
}

/// One run whose script prints its rank with every step: the prints after
/// the first timeout are no second run, and nothing is set aside.
#[test]
fn a_rank_printed_every_step_marks_no_second_run_torch_2_4() {
    let mut log = String::new();
    for step in 0..2 {
        for r in 0..4u32 {
            log.push_str(&format!(
                "{r}: step {step} rank {r} host node01 loss 2.31\n"
            ));
        }
    }
    log.push_str("0: [rank0]:[E1119 06:27:21.338666134 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n");
    for r in 1..4u32 {
        log.push_str(&format!("{r}: step 2 rank {r} host node01 loss 2.30\n"));
    }
    let doc = common::report_of(&[("slurm-7.out", &log)]);
    assert!(
        !doc["skipped"].to_string().contains("earlier run"),
        "{:#}",
        doc["skipped"]
    );
}
