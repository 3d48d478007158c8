//! XLA's GPU collectives (JAX, TensorFlow) report NCCL's failures in their
//! own words.

mod common;

/// jax#18391's shape (jaxlib 0.4.20 installed without its NCCL wheel): XLA's
/// stub answers the first all-reduce's `ncclGetUniqueId` with `Unable to load
/// NCCL library`, wrapped as a terminal shows the runtime error. The install,
/// with the remedy that says where JAX's NCCL comes from.
#[test]
fn an_unloadable_nccl_library_is_the_install_jaxlib_0_4_20() {
    let log = "\
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' failed:
external/xla/xla/service/gpu/nccl_utils.cc:133: NCCL operation ncclGetUniqueId(&id) failed: Unable to load NCCL library. Multi-GPU collectives will not work.;
current tracing scope: all-reduce-start; current profiling annotation:
";
    let v = common::verdict_of(&[("train.log", log)]);
    let c = common::assert_cause(&v, "config_mismatch", "Unable to load NCCL library");
    assert!(
        c["remedy"].as_str().unwrap().contains("jax[cuda12]"),
        "{c:#}"
    );
}

/// XLA's status for any other failed NCCL call (jaxlib 0.4.x, XLA
/// nccl_utils.cc before 2023: `FILE:LINE: NCCL operation EXPR failed:
/// ERROR`): the process that printed it lost its peer and raised; the one
/// that segfaulted first is the culprit, the other a victim with an error.
#[test]
fn a_failed_nccl_call_in_xla_words_makes_its_process_a_victim_jaxlib_0_4() {
    let rank0 = "\
2024-05-02 10:11:12.000123: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2826] Execution of replica 0 failed: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation ncclGroupEnd() failed: remote process exited or there was a network error
Traceback (most recent call last):
  File \"/app/train.py\", line 88, in <module>
    state = train_step(state, batch)
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation ncclGroupEnd() failed: remote process exited or there was a network error
";
    let rank1 = "\
Fatal Python error: Segmentation fault

Thread 0x00007f1c2d3fe700 (most recent call first):
  File \"/app/train.py\", line 88 in <module>
";
    let doc = common::report_of(&[("rank0.log", rank0), ("rank1.log", rank1)]);
    let v = &doc["verdict"];
    common::assert_cause(v, "process_crash", "Segmentation fault");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
    assert_eq!(common::rank_row(&doc, 0)["state"], "error", "{doc:#}");
}

/// XLA from 2023 appends NCCL's last warning; where no NCCL pattern reads
/// that warning (here none was kept: `''`), XLA's own words are the event.
#[test]
fn xlas_last_warning_suffix_is_read_with_an_empty_warning_xla_2023() {
    let rank0 = "\
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_api.cc:616: NCCL operation ncclCommInitRankConfig(&comm, nranks, comm_id, rank, &config) failed: remote process exited or there was a network error. Last NCCL warning(error) log entry (may be unrelated) ''.
";
    let rank1 = "\
Fatal Python error: Aborted
";
    let doc = common::report_of(&[("rank0.log", rank0), ("rank1.log", rank1)]);
    assert_eq!(common::rank_row(&doc, 0)["state"], "error", "{doc:#}");
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!([1]),
        "{doc:#}"
    );
}

/// The warning XLA quotes is NCCL's own (`Call to ibv_reg_mr failed with
/// error Cannot allocate memory`): NCCL's pattern reads it, and the quote's
/// closing `'.` is not part of the error the verdict repeats.
#[test]
fn a_quoted_verbs_failure_is_read_without_xlas_closing_quote_xla_2023() {
    let log = "\
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_api.cc:616: NCCL operation ncclCommInitRankConfig(&comm, nranks, comm_id, rank, &config) failed: unhandled system error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) 'Call to ibv_reg_mr failed with error Cannot allocate memory'.
";
    let v = common::verdict_of(&[("worker0.log", log)]);
    let c = common::assert_cause(&v, "memlock", "ibv_reg_mr: Cannot allocate memory`");
    assert!(!c["summary"].as_str().unwrap().contains("'."), "{c:#}");
}
