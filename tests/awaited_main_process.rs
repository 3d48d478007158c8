//! Ranks that gave up waiting for the main process: the store wait for the
//! NCCL unique id rank 0 publishes (or for a key a timed-out wait does not
//! name), and the barrier of `main_process_first`.

mod common;

use serde_json::json;

fn verdict(files: &[(&str, &str)]) -> serde_json::Value {
    common::report_of(files)["verdict"].clone()
}

/// ChatGLM-Efficient-Tuning#137's shape (torch 1.13, RuntimeError, no rank
/// prefix): rank 1 timed out in the store waiting for the unique id while
/// rank 0 was still tokenizing the dataset alone. Rank 0 stalled.
#[test]
fn a_store_timeout_for_the_unique_id_names_rank_0_as_stalled_torch_1_13() {
    let log = "Running tokenizer on dataset: 47%|████▊ | 3169000/6811963 [30:11<38:27, 1578.58 examples/s]Traceback (most recent call last):\n\
File \"/work/src/utils/common.py\", line 506, in preprocess_data\n\
with training_args.main_process_first(desc=\"dataset map pre-processing\"):\n\
File \"/env/lib/python3.9/site-packages/transformers/training_args.py\", line 1891, in main_process_first\n\
torch.distributed.barrier()\n\
RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n";
    let doc = common::report_of(&[("train.log", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    // Rank 0 left no line, yet the table shows it, stuck.
    let zero = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 0);
    assert_eq!(zero.map(|r| &r["state"]), Some(&json!("stuck")), "{doc:#}");
}

/// torch 2.4+ DistBackendError behind `[rankN]:`: the store connection broke
/// (`Connection reset by peer`) instead of timing out, so rank 0's side went
/// away: a crash there, not a stall.
#[test]
fn a_broken_store_connection_for_the_unique_id_names_rank_0_as_crashed_torch_2_4() {
    let mut log = String::new();
    for rank in 1..4 {
        log.push_str(&format!("[rank{rank}]: torch.distributed.DistBackendError: [{rank}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may indicate a possible application crash on rank 0 or a network set up issue.\n"));
    }
    let v = verdict(&[("train.log", &log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
}

/// transformers#17106's shape: the other ranks' tracebacks stop in the `with
/// training_args.main_process_first(…)` line (its barrier raised) and the
/// torchrun summary names rank 1's exit code 1 as the first failure. Rank 1
/// gave up waiting; rank 0 was still preprocessing.
#[test]
fn tracebacks_through_main_process_first_blame_rank_0_not_the_first_waiter_to_exit() {
    let mut log = String::new();
    for _ in 0..3 {
        log.push_str("Traceback (most recent call last):\n  File \"./run_clm.py\", line 414, in main\n    with training_args.main_process_first(desc=\"dataset map tokenization\"):\n  File \"/usr/lib/python3.8/contextlib.py\", line 113, in __enter__\n");
    }
    log.push_str("Root Cause (first observed failure):\n[0]:\n  time      : 2022-11-11_07:49:25\n  host      : ido-branch-s2n2k-pxvf4\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 5733)\n  error_file: <N/A>\n  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n");
    let v = verdict(&[("train.log", &log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
}

/// Rank 0 raised its own exception while preprocessing: it crashed, and the
/// others' waits are the consequence (the process rule's verdict stands).
/// Where rank 0 itself reached the barrier and NCCL failed there for all,
/// nobody was waited for.
#[test]
fn rank_0_that_failed_or_arrived_itself_is_not_called_stalled() {
    let mut log = String::from(
        "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"./train.py\", line 88, in <module>\n[rank0]: ValueError: tokenizer has no pad token\n",
    );
    for rank in 1..4 {
        log.push_str(&format!("[rank{rank}]:   File \"/env/transformers/training_args.py\", line 2085, in main_process_first\n[rank{rank}]: torch.distributed.DistBackendError: [{rank}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n"));
    }
    let v = verdict(&[("train.log", &log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("pad token"),
        "{v:#}"
    );

    let mut log = String::new();
    for rank in 0..4 {
        log.push_str(&format!("[rank{rank}]:   File \"/env/transformers/training_args.py\", line 2085, in main_process_first\n[rank{rank}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"));
    }
    let v = verdict(&[("train.log", &log)]);
    assert_ne!(v["cause"]["kind"], "rank_stalled", "{v:#}");
}

/// axolotl#2684's shape (torch 2.3+): rank 1's read from the store at
/// localhost:29500 timed out after the 30-minute timeout while the main
/// process was still tokenizing; the wait names no key, so rank 0 is a
/// weaker claim than the unique-id wait's — and none where rank 0 itself
/// waited or failed.
#[test]
fn a_timed_out_store_wait_names_rank_0_as_stalled_torch_2_3() {
    let wait = |rank: u32| {
        format!(
            "[rank{rank}]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms\n"
        )
    };
    let log = format!(
        "Tokenizing Prompts (num_proc=64):  92%|█████████▏| 328986/359152 [29:58<12:05, 41.59 examples/s]{}[rank1]: Traceback (most recent call last):\n",
        wait(1)
    );
    let v = verdict(&[("train.log", &log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    let confidence = v["cause"]["confidence"].as_f64().unwrap();
    assert!(confidence < 0.6, "{confidence}");
    // Rank 0's own failure explains the wait instead.
    let log = format!(
        "{}{}[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: tokenizer has no pad token\n",
        wait(1),
        wait(2)
    );
    let v = verdict(&[("train.log", &log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
}

/// FastVideo#228's shape (torch 2.5+): the poll's own warning is all a
/// paste kept of the store wait (`… returned 0, likely a timeout`); it is
/// the same wait, with the same weak claim on rank 0.
#[test]
fn a_store_polls_timeout_warning_is_the_same_wait_torch_2_5() {
    let log = "\
[rank2]:[W303 08:23:41.024955281 socket.cpp:462] [c10d] waitForInput: poll for socket SocketImpl(fd=71, addr=[localhost]:43246, remote=[localhost]:29500) returned 0, likely a timeout
[rank2]: Traceback (most recent call last):
";
    let v = verdict(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() < 0.6, "{v:#}");
}

/// ace#851's shape: an unprefixed `Saving latest checkpoint` line at
/// 10:28:25, then ranks 1–7 time out at 10:48:25 after 20 minutes: the
/// collective began as the save did, and rank 0 (which logs the trainer's
/// lines) never joined it. A save two hours before the collective began had
/// long finished: no such claim then.
#[test]
fn a_save_starting_as_the_others_entered_the_collective_names_the_saver() {
    let log = |save_at: &str| {
        let mut log = format!(
            "2026-02-18 {save_at},496 - root - INFO - Saving latest checkpoint model trained for 3 complete epochs and 36738 additional batches\n"
        );
        for rank in 1..8 {
            log.push_str(&format!("[rank{rank}]:[E218 10:48:25.033625188 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1512677, OpType=ALLREDUCE, NumelIn=306176, NumelOut=306176, Timeout(ms)=1200000) ran for 1200027 milliseconds before timing out.\n"));
        }
        log
    };
    let v = verdict(&[("train.log", &log("10:28:25"))]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("saving a checkpoint"),
        "{v:#}"
    );

    let v = verdict(&[("train.log", &log("08:28:25"))]);
    assert!(
        !v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("saving a checkpoint"),
        "{v:#}"
    );
}

/// mmdetection#11096's shape (mmengine, pycocotools, torch 1.x lines with
/// no stamps): the main process prints its COCO evaluation's progress and
/// the other ranks time out in the BROADCAST that shares its result. No
/// stamp dates the evaluation, so its place does: printed just before the
/// first timeout, in the same file. The evaluation's printed results (the
/// AP table) between them would say it finished; a line far before the
/// timeouts says nothing.
#[test]
fn a_coco_evaluation_printed_just_before_the_timeouts_names_the_main_process() {
    let eval = "10/26 11:27:48 - mmengine - INFO - Evaluating bbox...\nLoading and preparing results...\nDONE (t=27.37s)\ncreating index...\nindex created!\nRunning per image evaluation...\nEvaluate annotation type *bbox*\n";
    let timeouts: String = [6, 4, 2, 3]
        .iter()
        .map(|r| format!("[E ProcessGroupNCCL.cpp:828] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=987156, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800741 milliseconds before timing out.\n"))
        .collect();
    let v = verdict(&[("train.log", &format!("{eval}{timeouts}"))]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("evaluating"), "{v:#}");

    let results: String = (0..12)
        .map(|i| {
            format!(
                " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets={i} ] = 0.412\n"
            )
        })
        .collect();
    let v = verdict(&[("train.log", &format!("{eval}{results}{timeouts}"))]);
    assert!(
        !v["cause"]["summary"]
            .as_str()
            .unwrap_or("")
            .contains("evaluating"),
        "{v:#}"
    );
}

/// LlamaFactory#1169's shape (NCCL 2.18.5, torch 2.1): the traceback runs
/// through main_process_first's barrier, but the barrier itself raised
/// `unhandled cuda error` (`Cuda failure 'invalid argument'`): NCCL failed
/// under this rank, it was not waiting for rank 0 — the release's defect in
/// connection set-up explains it.
#[test]
fn a_barrier_that_failed_on_its_own_cuda_error_is_no_wait_for_rank_0_nccl_2_18_5() {
    let log = "  File \"/src/llmtuner/dsets/preprocess.py\", line 216, in preprocess_dataset\n\
    with training_args.main_process_first(desc=\"dataset map pre-processing\"):\n\
  File \"/env/lib/python3.10/site-packages/transformers/training_args.py\", line 2084, in main_process_first\n\
    dist.barrier()\n\
  File \"/env/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py\", line 3696, in barrier\n\
    work = default_pg.barrier(opts=opts)\n\
torch.distributed.DistBackendError: NCCL error in: /opt/conda/conda-bld/pytorch_1695392067780/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.5\n\
ncclUnhandledCudaError: Call to CUDA function failed.\n\
Last error:\n\
Cuda failure 'invalid argument'\n";
    let v = verdict(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "nccl_bug", "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("2.18"),
        "{v:#}"
    );
}

/// accelerate#314's shape (torch 1.x, old WorkNCCL without SeqNum): a
/// process indexing a 200 GB file shows its progress bar at 30:01, 35 %
/// done, as rank 6's 1800 s watchdog fires: it never entered the
/// collective. A bar that had finished, or had run far less than the
/// timeout, says nothing of the kind.
#[test]
fn a_progress_bar_unfinished_after_the_timeout_is_the_work_the_others_waited_for() {
    let log = |bar: &str| {
        format!(
            "<class 'data.read_data.LineShuffler'>: Init /data/NegativeTrain\n\
{bar}\n\
[E ProcessGroupNCCL.cpp:485] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802246 milliseconds before timing \n\
out.\n"
        )
    };
    let busy = " 35%|████████████████████                    | 73811210851/208140108456 [30:01<57:14, 39115047.81MB/s]";
    let v = verdict(&[("output.log", &log(busy))]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("still busy") && summary.contains("30:01 elapsed"),
        "{v:#}"
    );
    assert!(
        v["cause"]["remedy"].as_str().unwrap().contains("timeout"),
        "{v:#}"
    );

    for quiet in [
        "100%|████████████████████████████████████████| 208140108456/208140108456 [30:01<00:00, 39115047.81MB/s]",
        " 35%|████████████████████                    | 73811210851/208140108456 [10:01<17:14, 39115047.81MB/s]",
        // A training loop's own bar, stopped where the loop hung after an
        // epoch that had run twice the timeout.
        "Epoch 3:  12%|█▏        | 120/1000 [1:02:03<9:01:00,  3.10s/it, loss=0.412]",
    ] {
        let v = verdict(&[("output.log", &log(quiet))]);
        let summary = v["cause"]["summary"].as_str().unwrap_or_default();
        assert!(!summary.contains("still busy"), "{v:#}");
    }
}

/// kohya-ss/sd-scripts#971's shape (torch 1.x): rank 0's progress bar was
/// still redrawing itself when rank 1's watchdog line arrived on the same
/// terminal, so the timeout is glued after the bar on one line. Both are
/// read: the bar had run 30:02 of a 30:00 timeout, 87 % done.
#[test]
fn a_timeout_glued_after_a_progress_bar_is_read_with_the_bar() {
    let log = "caching latents...\n 87%|#################################9     | 1582/1818 [30:02<04:26,  1.13s/it][E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1805046 milliseconds before timing out.\n";
    let v = verdict(&[("output.log", log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("30:02 elapsed"),
        "{v:#}"
    );
    assert_eq!(v["collective"]["seq"], 3, "{v:#}");
    // Rank 1 timed out; rank 0, which wrote nothing else, printed the bar.
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// LlamaFactory#360's shape: one waiter's traceback through
/// main_process_first, glued after rank 0's progress bar and cut before its
/// exception line. A traceback stopping in that barrier is the barrier
/// raising: the job hung waiting for rank 0, not merely degraded.
#[test]
fn a_cut_traceback_through_main_process_first_is_a_hang_on_rank_0() {
    let log = "Running tokenizer on dataset:  88%|████████▊ | 383700/433643 [29:55<03:25, 2432.70 examples/s]Traceback (most recent call last):\n  File \"/workspace/src/train_bash.py\", line 14, in <module>\n    main()\n  File \"/workspace/src/llmtuner/dsets/preprocess.py\", line 160, in preprocess_dataset\n    with training_args.main_process_first(desc=\"dataset map pre-processing\"):\n  File \"/usr/lib/python3.10/contextlib.py\", line 135, in __enter__\n    return next(self.gen)\n";
    let v = verdict(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([0]), "{v:#}");
}

/// pytorch#111187's shape (the error pasted before its traceback): the
/// traceback leaves main_process_first through contextlib's `__exit__`, the
/// helper's closing barrier, which only the main process calls once its
/// own work is done. This is the main process failing in NCCL, not a rank
/// waiting for it; a traceback under `__enter__` is a waiter's.
#[test]
fn a_traceback_leaving_main_process_first_through_exit_is_the_main_process_not_a_waiter() {
    let log = |side: &str, line: u32| {
        format!(
            "Traceback (most recent call last):\n\
  File \"/src/llmtuner/dsets/preprocess.py\", line 216, in preprocess_dataset\n\
    with training_args.main_process_first(desc=\"dataset map pre-processing\"):\n\
  File \"/env/lib/python3.10/contextlib.py\", line {line}, in {side}\n\
    next(self.gen)\n"
        )
    };
    let error = "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'invalid argument'\n";
    let v = verdict(&[("worker.log", &format!("{error}{}", log("__exit__", 142)))]);
    assert_ne!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
    let v = verdict(&[("worker.log", &log("__enter__", 135))]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}
