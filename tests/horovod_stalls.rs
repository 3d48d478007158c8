//! Horovod's stall inspector: the ranks it lists as missing tensors.

mod common;

const WARNING: &str = "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. ";

fn verdict(log: &str) -> serde_json::Value {
    common::verdict_of(&[("horovod.log", log)])
}

/// horovod#1652's shape (TensorFlow, 0.18, under mpirun's tags): each rank
/// built a different head, so each waits for a broadcast the other never
/// submits. Neither side is the odd one.
#[test]
fn ranks_each_lacking_the_others_tensor_ran_different_ops_horovod_0_18() {
    let log = format!(
        "[1,0]<stderr>:[2020-01-17 08:20:34.024110: W horovod/common/operations.cc:779] {WARNING}\n\
         [1,0]<stderr>:Stalled ranks:\n\
         [1,0]<stderr>:0: [HorovodBroadcast_acm_vggface2_kernel_0]\n\
         [1,0]<stderr>:1: [HorovodBroadcast_acm_webface_kernel_0]\n"
    );
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("acm_webface"), "{summary}");
    assert_eq!(v["status"], "hang", "{v:#}");
}

/// PyTorch Lightning under horovodrun's Gloo launcher (Horovod 0.21,
/// lightning#5155's shape): horovodrun tags each line `[rank]<stderr>:`,
/// and a broadcast only rank 1 reached (rank 0 lacks it) meets gradients
/// only rank 0 submitted (rank 1 lacks them).
#[test]
fn horovodruns_own_rank_tags_open_the_stall_block_horovod_0_21() {
    let log = format!(
        "[0]<stderr>:[2020-12-29 16:50:57.724380: W /tmp/pip-install-uk4q7bn5/horovod/horovod/common/stall_inspector.cc:105] {WARNING}\n\
         [0]<stderr>:Missing ranks:\n\
         [0]<stderr>:0: [broadcast.bool.sz]\n\
         [0]<stderr>:1: [allreduce.c_d1.bias, allreduce.c_d1.weight, allreduce.c_d1_bn.bias ...]\n"
    );
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}

/// PyTorch under Horovod 0.28: rank 3 alone has not submitted the
/// gradients every other rank waits to reduce (it is still loading data);
/// after the shutdown time it is marked `!`.
#[test]
fn one_rank_missing_what_all_others_submitted_is_stalled_horovod_0_28() {
    let log = format!(
        "[2024-03-02 10:11:12.345678: W /tmp/pip-req-build/horovod/common/stall_inspector.cc:107] {WARNING}\n\
         Stalled ranks:\n\
         3: [allreduce.layer4.1.conv2.weight, allreduce.layer4.1.bn2.weight, allreduce.fc.bias]\n\
         [2024-03-02 10:12:12.345678: E /tmp/pip-req-build/horovod/common/stall_inspector.cc:107] {WARNING}\n\
         Stalled ranks:\n\
         3!: [allreduce.layer4.1.conv2.weight, allreduce.layer4.1.bn2.weight, allreduce.fc.bias]\n"
    );
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("ALLREDUCE"), "{summary}");
}

/// A line shaped like a rank entry outside a stall block is not one.
#[test]
fn rank_shaped_lines_outside_a_stall_block_say_nothing() {
    let v = verdict("0: [allreduce.noname.1]\nStep 10 loss 2.31\n");
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
}

/// Horovod 0.9–0.15 print the warning as one line that lists, per tensor,
/// the ranks that DID submit it (operations.cc's `[ready ranks: …]`).
/// Rank 3 alone computed the loss's mean while ranks 0–2 reduce gradients
/// (horovod#336's shape): two code paths, rank 3 the odd one.
#[test]
fn ready_ranks_on_the_one_line_warning_split_the_ranks_horovod_0_13() {
    let log = format!(
        "[1,0]<stderr>:WARNING: {WARNING}Stalled ops: HorovodAllreduce_loss_Mean_0 [ready ranks: 3], \
         Opt_Allreduce/HorovodAllreduce_gradients_Conv2D_grad_0 [ready ranks: 2, 0, 1], \
         Opt_Allreduce/HorovodAllreduce_gradients_BiasAdd_grad_0 [ready ranks: 2, 0, 1]\n"
    );
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
}

/// The same warning as a paste breaks it, one tensor a line and its head
/// lost: every broadcast is ready on six of ranks 0–6, never on rank 2,
/// which never reached the broadcasts (horovod#530's shape, 0.15).
#[test]
fn a_rank_absent_from_every_ready_list_is_stalled_horovod_0_15() {
    let log = "Stalled ops: HorovodBroadcast_Logits_weights_0 [ready ranks: 5, 6, 3, 1, 4, 0], \n\
               \n\
               HorovodBroadcast_Logits_biases_0 [ready ranks: 5, 6, 3, 1, 4, 0], \n\
               HorovodBroadcast_Mixed_7c_moving_mean_0 [ready ranks: 5, 6, 3, 1, 4, 0]\n";
    let v = verdict(log);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("BROADCAST"), "{summary}");
}

/// Some releases before 0.16 list the ranks that did NOT submit a tensor
/// (`[missing ranks: 3, 6]`), the TensorFlow op behind its name scope; on
/// their own those ranks stalled in the all-gather.
#[test]
fn missing_ranks_entries_name_the_ranks_directly_horovod_0_13() {
    let stall = "Stalled ops:\n\
                 NmtModel/Allreduce/HorovodAllgather_NmtModel_gradients_Gather_grad_Reshape_0 [missing ranks: 3, 6]\n\
                 NmtModel/Allreduce/HorovodAllreduce_NmtModel_gradients_layer_norm_0 [missing ranks: 3, 6]\n";
    let v = verdict(stall);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3, 6]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("ALLGATHER"), "{summary}");

    // horovod#498's shape: two workers' Estimator loops had logged their
    // final step while the others still reduce: the missing ranks ran
    // fewer steps (uneven data per worker), a mismatch naming them.
    let log = format!(
        "INFO:tensorflow:Loss for final step: 3.3031716.\nstart wait for other node.\n{stall}"
    );
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3, 6]), "{v:#}");
}

/// horovod#1407's shape (Horovod 0.19, PyTorch, mpirun's merged output):
/// every rank raises Horovod's shutdown error and nothing else failed. Of
/// the two reasons Horovod gives, no exception was seen, so a rank finished
/// its loop while the others still called collectives (uneven batches per
/// worker): a mismatch. With another rank's exception before it, the
/// shutdown is that exception's consequence and says no such thing.
#[test]
fn horovods_shutdown_with_no_exception_before_it_is_a_rank_that_finished_early() {
    let shutdown = "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, you should see the exception in the log before the first shutdown message.\n";
    let log = format!("  0%|          | 0/4 [00:00<?, ?it/s][1,3]<stdout>:25\n\n{shutdown}");
    let v = &common::report_of(&[("mpirun.log", log.as_str())])["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("different numbers of steps"),
        "{v:#}"
    );
    let log = format!(
        "[1,2]<stderr>:ValueError: could not broadcast input array from shape (3,224,224) into shape (3,256,256)\n{shutdown}"
    );
    let v = &common::report_of(&[("mpirun.log", log.as_str())])["verdict"];
    assert_ne!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
}

/// horovodrun (Horovod 0.22, PyTorch): rank 5 alone took another code
/// path, so every rank lacks what the others submitted; rank 0's block
/// lists all sixteen under its `[0]<stderr>:` tag (digits a Slurm label
/// would also start with), then every rank raises HorovodInternalError
/// once Horovod shut down: a consequence, not a crash.
#[test]
fn one_rank_on_another_path_under_horovodruns_tags_then_shut_down_horovod_0_22() {
    let mut log = format!(
        "[0]<stderr>:[2021-11-23 16:41:05.768880: W /tmp/pip/horovod/common/stall_inspector.cc:116] {WARNING}\n[0]<stderr>:Missing ranks:\n"
    );
    for r in 0..16 {
        let lacks = if r == 5 {
            "allreduce.module.backbone.layer4.bias, allreduce.module.head.weight ..."
        } else {
            "allreduce.module.aux_head.bias, allreduce.module.aux_head.weight"
        };
        log.push_str(&format!("[0]<stderr>:{r}: [{lacks}]\n"));
    }
    log.push_str("[0]<stderr>:One or more rank (marked by \"!\") is stalled for longer than 300 seconds. Will shutdown.\n");
    for r in 0..16 {
        log.push_str(&format!("[{r}]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.\n"));
    }
    let v = verdict(&log);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}
