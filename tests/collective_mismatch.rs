//! Ranks that ran different collectives at one sequence number.

mod common;

/// torch 2.8's pair of lines per rank: the watchdog's timeout, then the
/// group status with the last enqueued and completed work.
fn timed_out(rank: u32, numel: u64, enqueued: u32) -> String {
    format!(
        "[rank{rank}]:[E918 19:29:24.436955737 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7219, OpType=BROADCAST, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=3000000) ran for 3000097 milliseconds before timing out.\n\
         [rank{rank}]:[E918 19:29:24.440481846 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: 7219 PG status: last enqueued work: {enqueued}, last completed work: 7218\n"
    )
}

/// modelscope/ms-swift#10183's shape: two ranks' lines survive, each with
/// another size for BROADCAST 7219. Rank 3 went on to enqueue 7220; rank 2
/// enqueued nothing after 7219: its program stopped at the odd broadcast.
/// Named, but with less confidence than a majority would give.
#[test]
fn an_even_size_split_names_the_side_that_enqueued_nothing_after_it_torch_2_8() {
    let log = format!("{}{}", timed_out(3, 64, 7220), timed_out(2, 24084544, 7219));
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() < 0.7, "{v:#}");

    // Both sides moved on: nothing tells them apart, and it is still a
    // mismatch (one sequence number holds one broadcast), naming no side.
    let log = format!("{}{}", timed_out(3, 64, 7220), timed_out(2, 24084544, 7221));
    let v = &common::report_of(&[("train.log", &log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// A rank's DETAIL fingerprint line, torch 2.4+.
fn fingerprint(rank: u32, seq: u32, shape: &str) -> String {
    format!(
        "[rank{rank}]:[I1017 19:34:58.923985894 ProcessGroupWrapper.cpp:587] [Rank {rank}] Running collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape=[{shape}], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))\n"
    )
}

/// AdvancedPhotonSource/pty-chi#47's shape: TORCH_DISTRIBUTED_DEBUG=DETAIL
/// logs every rank's fingerprint; at sequence 38 rank 2 reduces a [77, 1]
/// tensor where ranks 1 and 3 reduce [100, 1]. Agreeing sequence numbers
/// before it are no mismatch.
#[test]
fn the_rank_whose_logged_fingerprint_differs_from_the_majority_torch_2_4() {
    let mut log = String::new();
    for r in 1..=3 {
        log.push_str(&fingerprint(r, 37, "100, 1"));
    }
    log.push_str(&fingerprint(2, 38, "77, 1"));
    log.push_str(&fingerprint(1, 38, "100, 1"));
    log.push_str(&fingerprint(3, 38, "100, 1"));
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("[77, 1]"),
        "{v:#}"
    );
}

/// torch 1.10–1.12's ProcessGroupWrapper: each rank reports only its own
/// fingerprint (`Rank R is running inconsistent collective: …`, no sequence
/// number), JOTR#4's shape. Three ranks gather 40 rows, rank 3 gathers 41:
/// rank 3 is the odd one.
#[test]
fn inconsistent_collective_reports_name_the_odd_rank_torch_1_11() {
    let mut log = String::new();
    for (rank, rows) in [(0u32, 40u32), (1, 40), (2, 40), (3, 41)] {
        log.push_str(&format!("RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} is running inconsistent collective: CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[{rows}, 256, 8, 8, 8], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))\n"));
    }
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
}

/// NVIDIA/nccl#969's shape (NCCL 2.12–2.19, mpirun `host: ` prefixes): the
/// sender's IB transport finds its send larger than the receive the peer
/// posted. The ranks ran the collective with different sizes (or settings);
/// the line does not say which side is odd, so no rank is named.
#[test]
fn nccl_ib_collective_mismatch_error_is_a_collective_mismatch_nccl_2_18() {
    let h = "so-ucloud-10-10-23-10";
    let log = format!(
        "10.10.23.10: {h}:1307367:1307367 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n\
10.10.23.10: {h}:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536\n\
10.10.23.10: {h}:1307367:1307586 [0] NCCL INFO include/net.h:32 -> 5\n\
10.10.23.10: {h}:1307367:1307586 [0] NCCL INFO transport/net.cc:890 -> 5\n\
10.10.23.10: {h}:1307367:1307586 [0] NCCL INFO proxy.cc:684 -> 5 [Proxy Thread]\n"
    );
    let doc = common::report_of(&[("node_10.10.23.10.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("496640") && summary.contains("65536"),
        "{summary}"
    );
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// FunASR#2317's shape (torch 2.3, two ranks): at seq 3437 rank 0 runs an
/// ALLREDUCE of 4311252 elements, rank 1 one of 1 element (its validation
/// loop). Two ranks, two collectives, neither enqueued past it: a mismatch
/// for certain, with no side to blame.
#[test]
fn an_undecided_even_split_is_a_mismatch_that_names_no_rank_torch_2_3() {
    let mut log = String::new();
    for (rank, numel) in [(0u32, 4311252u64), (1, 1)] {
        log.push_str(&format!("[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3437, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600057 milliseconds before timing out.\n"));
    }
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("4311252") && summary.contains("3437"),
        "{summary}"
    );

    // An all-to-all's inputs may differ per rank (uneven splits): no sign.
    let doc = common::report_of(&[("train.log", &log.replace("ALLREDUCE", "ALLTOALL_BASE"))]);
    assert_ne!(
        doc["verdict"]["cause"]["kind"], "collective_mismatch",
        "{doc:#}"
    );
}

/// ms-swift#3154's shape (torch 2.5, DeepSpeed ZeRO-3, two ranks): at seq
/// 3497 rank 0 all-gathers 1572864 elements and rank 1 512 (they gather
/// different parameters), and both had enqueued later work (3499, 3500),
/// as async collectives always do. One sequence number of one group holds
/// one collective, and an all-gather takes one size on every rank: a
/// mismatch naming no side, moved on or not.
#[test]
fn an_even_split_whose_sides_both_moved_on_is_still_a_mismatch_torch_2_5() {
    let mut log = String::new();
    for (rank, numel, enqueued) in [(0u32, 1572864u64, 3499), (1, 512, 3500)] {
        log.push_str(&format!("[rank{rank}]:[E220 10:59:35.441597707 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3497, OpType=_ALLGATHER_BASE, NumelIn={numel}, NumelOut={}, Timeout(ms)=1800000) ran for 1800039 milliseconds before timing out.\n", 2 * numel));
        log.push_str(&format!("[rank{rank}]:[E220 10:59:35.441948160 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: 3497 PG status: last enqueued work: {enqueued}, last completed work: 3496\n"));
    }
    let v = &common::report_of(&[("train.log", &log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("1572864") && summary.contains("512"),
        "{summary}"
    );
}

/// NVIDIA/nccl#296's shape (NCCL 2.4.8): the kernels asserted a mismatched
/// collective and the reporting rank says so (`… at and around rank 39`),
/// here pasted inside markdown backticks without its prefix.
#[test]
fn nccl_device_mismatch_warning_is_a_collective_mismatch_nccl_2_4() {
    let log = "NCCL version 2.4.8+cuda10.0\n\n`init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs`\n";
    let doc = common::report_of(&[("warn.log", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_ne!(v["status"], "healthy", "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("rank 39"),
        "{v:#}"
    );
}

/// Lightning#8214's shape (NCCL 2.4–2.7, the hang after validation and a
/// checkpoint saved on some ranks): the kernels waited on a peer behind and
/// suspected a mismatch. Weaker than the asserted form, still the lead.
#[test]
fn nccl_suspected_mismatch_warning_is_a_weaker_collective_mismatch_nccl_2_7() {
    let log = "[0] init.cc:1256 NCCL WARN Your program may be hanging, this may be caused by a collective mismatch around rank 1. Please check your collective calls at and around this rank. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n";
    let v = common::verdict_of(&[("output.log", log)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    let c = v["cause"]["confidence"].as_f64().unwrap();
    assert!(c < 0.5, "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("suspected"),
        "{v:#}"
    );
}

/// fairseq#1088's shape (fairseq 0.9, two GPUs, the message wrapped as a
/// terminal shows it): all_gather_list could not unpickle what the other
/// worker sent, since the workers entered it out of step (one skipped the
/// padded last batch of an uneven epoch). The framework's own statement is
/// a mismatch naming no side.
#[test]
fn fairseqs_all_gather_list_out_of_sync_is_a_mismatch_fairseq_0_9() {
    let log = "\
  File \"/home/user/fairseq/fairseq/distributed_utils.py\", line 181, in all_gather_list
    'Unable to unpickle data from other workers. all_gather_list requires all '
Exception: Unable to unpickle data from other workers. all_gather_list requires all 
workers to enter the function together, so this error usually indicates that the 
workers have fallen out of sync somehow.
";
    let v = common::verdict_of(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("fairseq"),
        "{v:#}"
    );
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// fairseq under torch 2.1 on four GPUs: rank 3 ran out of memory and
/// skipped its batch; the other three time out in the next all-reduce.
/// Rank 3 is the odd one.
#[test]
fn a_worker_that_skipped_an_oom_batch_is_the_odd_one_while_the_others_hang_fairseq_0_12() {
    let mut log = String::from(
        "[rank3]:2023-11-02 10:01:12 | WARNING | fairseq.trainer | ran out of memory with exception: CUDA out of memory. Tried to allocate 1.20 GiB (GPU 3; 39.39 GiB total capacity; 36.10 GiB already allocated)\n[rank3]: Skipping batch\n",
    );
    for r in 0..3 {
        log.push_str(&format!("[rank{r}]:[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5012, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=1800000) ran for 1800094 milliseconds before timing out.\n"));
    }
    let v = common::verdict_of(&[("train.log", &log)]);
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    let cited = v["cause"]["evidence"].as_array().unwrap();
    assert!(
        cited
            .iter()
            .any(|e| e["text"].as_str().unwrap().contains("ran out of memory")),
        "{v:#}"
    );
}

/// Lightning#19045's shape (TORCH_DISTRIBUTED_DEBUG=DETAIL, torch 2.1): ranks
/// 1 and 2 each raise the mismatch with the same fingerprint of their own,
/// and rank 1's names rank 0 as the other side before the paste cuts its
/// text (rank 2's is cut sooner). Rank 0, which reports nothing, is the odd
/// one; where the reporters' own fingerprints differ, no rank is singled out.
#[test]
fn the_rank_the_agreeing_reporters_name_is_the_odd_one_when_its_text_is_cut_torch_2_1() {
    let report = |rank: u32, own: &str, tail: &str| {
        format!(
            "RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} is running collective: CollectiveFingerPrint(SequenceNumber=152517, OpType={own}, TensorShape=[1], TensorDtypes=Long, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda{tail}\n"
        )
    };
    let v = common::verdict_of(&[
        (
            "traceback_rank1.log",
            &report(
                1,
                "BROADCAST",
                ", layout=Strided (default))), but Rank 0 is running",
            ),
        ),
        ("traceback_rank2.log", &report(2, "BROADCAST", "")),
    ]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");

    let v = common::verdict_of(&[
        (
            "traceback_rank1.log",
            &report(
                1,
                "BROADCAST",
                ", layout=Strided (default))), but Rank 0 is running",
            ),
        ),
        ("traceback_rank2.log", &report(2, "ALLREDUCE", "")),
    ]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_ne!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// zero-bubble-pp#60's shape (NCCL 2.21, sockets between two hosts): the
/// receiver's socket transport got a larger message than the receive it
/// posted, in a batch of sends and receives: the stages disagree.
#[test]
fn a_socket_message_larger_than_its_receive_is_a_mismatch_nccl_2_21() {
    let log = "\
lzm-h200-10:74737:75914 [1] transport/net_socket.cc:488 NCCL WARN NET/Socket : peer 10.0.5.194<41988> message truncated : receiving 4 bytes instead of 2. If you believe your socket network is in healthy state,           there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks
lzm-h200-10:74737:74737 [1] init.cc:290 NCCL WARN Attempt to use communicator before the previous operation returned ncclSuccess
";
    let v = common::verdict_of(&[("node0.log", log)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("received 4 bytes"), "{summary}");
}

/// A torch 2.2 watchdog line (global `[rankN]:` tag, no group tag).
fn timeout_at(rank: u32, seq: u32, op: &str, numel: u64) -> String {
    format!(
        "[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600049 milliseconds before timing out.\n"
    )
}

/// Qwen2-VL-Finetune#17's shape: text-only batches skip the vision tower on
/// some ranks, so rank 0 waits in ALLREDUCE #959 (545 M elements) that the
/// others finished on their smaller reductions, going on to #963. The rank
/// behind was *in* a collective the others completed: a mismatch, not a
/// stall. torchtune#1107's two ranks (an all-gather the other passed) read
/// the same; numbers far apart are other groups', and point-to-point work
/// is numbered apart.
#[test]
fn a_rank_timed_out_in_a_collective_the_others_finished_ran_another_one_torch_2_2() {
    let mut log = timeout_at(0, 959, "ALLREDUCE", 544997376);
    for rank in 1..6 {
        log.push_str(&timeout_at(rank, 963, "ALLREDUCE", 2560));
    }
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("#959") && summary.contains("#963"),
        "{summary}"
    );

    let log =
        timeout_at(0, 315, "ALLREDUCE", 1) + &timeout_at(1, 313, "_ALLGATHER_BASE", 262668288);
    let doc = common::report_of(&[("train.log", &log)]);
    assert_eq!(doc["verdict"]["cause"]["kind"], "collective_mismatch");
    assert_eq!(doc["verdict"]["stuck_ranks"], serde_json::json!([1]));

    for (far, op) in [(64088, "ALLREDUCE"), (962, "SEND")] {
        let mut log = timeout_at(0, far, op, 4096);
        for rank in 1..6 {
            log.push_str(&timeout_at(rank, 96117, "ALLREDUCE", 4096));
        }
        let doc = common::report_of(&[("train.log", &log)]);
        assert_ne!(
            doc["verdict"]["cause"]["kind"], "collective_mismatch",
            "{far} {op}: {:#}",
            doc["verdict"]
        );
    }
}

/// verl-agent's shape (torch 2.6, two FSDP workers under Ray): rank 1 waits
/// in ALLREDUCE #2635 (1 element) while rank 0 had gone on to
/// _REDUCE_SCATTER_BASE #2667, 32 collectives later. Far apart, yet every
/// rank's own lines name the group by its GUID (`PG GUID 0(default_pg)`):
/// one group, so rank 0 finished #2635 that rank 1 still waits in — the
/// ranks ran different collectives. Untagged numbers that far apart stay
/// other groups' (the test above).
#[test]
fn ranks_far_apart_in_one_named_group_ran_different_collectives_torch_2_6() {
    let log = "\
(WorkerDict pid=3490362) [rank1]:[E1118 20:32:23.955028747 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2635, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800024 milliseconds before timing out.
(WorkerDict pid=3490362) [rank1]:[E1118 20:32:23.957372583 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 2635 PG status: last enqueued work: 2635, last completed work: 2634
(WorkerDict pid=3490084) [rank0]:[E1118 20:32:23.968558948 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2667, OpType=_REDUCE_SCATTER_BASE, NumelIn=46797824, NumelOut=23398912, Timeout(ms)=1800000) ran for 1800053 milliseconds before timing out.
(WorkerDict pid=3490084) [rank0]:[E1118 20:32:23.970332207 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 2667 PG status: last enqueued work: 2667, last completed work: 2666
";
    let v = &common::report_of(&[("worker.log", log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// A CoordExp logbook's shape (torch 2.6, four ranks here): ranks 1–3 time
/// out in BROADCAST #78 with 79 enqueued; rank 0 stopped at 77, and its
/// traceback shows it blocked in `all_gather` (a report gather its code
/// path called, the others' did not). Behind, but waiting in another
/// collective: a mismatch naming rank 0, not a stall. Without the
/// traceback it stays the stall it looks like.
#[test]
fn a_rank_behind_blocked_in_another_collective_ran_a_different_one_torch_2_6() {
    let mut log = String::new();
    for rank in 1..4 {
        log.push_str(&format!("[rank{rank}]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78, OpType=BROADCAST, NumelIn=80, NumelOut=80, Timeout(ms)=600000) ran for 600096 milliseconds before timing out.\n"));
        log.push_str(&format!("[rank{rank}]:[E810 03:04:11.063313477 ProcessGroupNCCL.cpp:2241] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: 78 PG status: last enqueued work: 79, last completed work: 77\n"));
    }
    let stopped = "[rank0]:[E810 03:04:11.562692551 ProcessGroupNCCL.cpp:1858] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective timeout from  rank 1 and we will try our best to dump the debug info. Last enqueued NCCL work: 77, last completed NCCL work: 77.\n";
    let traceback = "\
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/src/training/pipeline.py\", line 2961, in _all_gather_cpu_bytes
[rank0]:     distributed.all_gather(gathered, local, group=group)
[rank0]:   File \"/usr/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py\", line 3949, in all_gather
[rank0]:     work.wait()
[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [192.168.7.7]:57000
";
    let v = &common::report_of(&[("train.log", &format!("{log}{stopped}{traceback}"))])["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("ALLGATHER") && summary.contains("BROADCAST"),
        "{summary}"
    );

    let v = &common::report_of(&[("train.log", &format!("{log}{stopped}"))])["verdict"];
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
}

/// The shape checks that PyTorch's DETAIL mode (torch 1.10+) and
/// Accelerate's debug mode (0.17+) run before a collective raise on a
/// mismatch instead of hanging: the exception is the mismatch, not a crash
/// of its own; neither names the odd side.
#[test]
fn shape_checks_that_raise_on_a_mismatch_are_the_mismatch_torch_1_10_accelerate_0_17() {
    let torch = "work = default_pg.allreduce([tensor], opts)
RuntimeError: Error when verifying shape tensors for collective ALLREDUCE on rank 0. This likely indicates that input shapes into the collective are mismatched across ranks. Got shapes:  10
[ torch.LongTensor{1} ]
";
    let accelerate = "Traceback (most recent call last):
  File \"/home/user/test.py\", line 15, in main
    broadcast_tensor = broadcast(tensor)
  File \"/home/user/accelerate/src/accelerate/utils/operations.py\", line 303, in wrapper
accelerate.utils.operations.DistributedOperationException:

Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.

Operation: `accelerate.utils.operations.broadcast`
Input shapes:
  - Process 0: [1, 5]
  - Process 1: [1, 2, 5]
";
    for (log, said) in [(torch, "input shapes"), (accelerate, "shape mismatches")] {
        let doc = common::report_of(&[("train.log", log)]);
        let cause = &doc["verdict"]["cause"];
        assert_eq!(cause["kind"], "collective_mismatch", "{:#}", doc["verdict"]);
        assert!(
            cause["summary"].as_str().unwrap().contains(said),
            "{cause:#}"
        );
        assert_eq!(doc["verdict"]["stuck_ranks"], serde_json::json!([]));
    }
}
