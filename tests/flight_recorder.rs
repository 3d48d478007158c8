//! Flight Recorder dumps (torch 2.5 JSON shape) alone are enough to find the
//! rank that fell behind.

mod common;

fn dump(last_enqueued: i64, open_entry: bool) -> String {
    let entry = |seq: i64, state: &str| {
        format!(
            r#"{{"record_id": {seq}, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": {seq},
               "p2p_seq_id": 0, "op_id": {seq}, "profiling_name": "nccl:all_reduce", "time_created_ns": 1732875000000000000,
               "input_sizes": [[4096]], "output_sizes": [[4096]], "state": "{state}", "timeout_ms": 600000,
               "is_p2p": false, "retired": {}, "time_discovered_started_ns": null, "time_discovered_completed_ns": null}}"#,
            state != "completed"
        )
    };
    let mut entries = vec![entry(last_enqueued - 1, "completed")];
    if open_entry {
        entries.push(entry(last_enqueued, "scheduled"));
    } else {
        entries.push(entry(last_enqueued, "completed"));
    }
    let completed = if open_entry {
        last_enqueued - 1
    } else {
        last_enqueued
    };
    format!(
        r#"{{"version": "2.5", "comm_lib_version": "2.21.5",
          "pg_config": {{"0": {{"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}}},
          "pg_status": {{"0": {{"last_enqueued_collective": {last_enqueued}, "last_started_collective": -1, "last_completed_collective": {completed}}}}},
          "entries": [{}]}}"#,
        entries.join(",")
    )
}

#[test]
fn the_rank_whose_dump_stops_early_is_the_stuck_one() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..4 {
        let text = if rank == 2 {
            dump(19, false)
        } else {
            dump(20, true)
        };
        std::fs::write(tmp.path().join(format!("nccl_trace_rank_{rank}")), text).unwrap();
    }
    let doc = common::analyze_to_json(tmp.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v}");
    assert_eq!(v["collective"]["op"], "ALLREDUCE");
    assert_eq!(v["collective"]["seq"], 20);
    assert_eq!(v["cause"]["kind"], "rank_stalled");
    let cited: Vec<&str> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    assert!(cited.contains(&"nccl_trace_rank_2"), "{cited:?}");
    let row = &doc["ranks"][2];
    assert_eq!(
        (
            row["last_enqueued"].as_i64(),
            row["last_completed"].as_i64()
        ),
        (Some(19), Some(19))
    );
}

#[test]
fn a_corrupt_dump_is_skipped_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("nccl_trace_rank_0"),
        b"\x80\x02}q\x00(X\x07\x00\x00\x00vers",
    )
    .unwrap();
    std::fs::write(tmp.path().join("nccl_trace_rank_1"), dump(5, true)).unwrap();
    let doc = common::analyze_to_json(tmp.path());
    let skipped = doc["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["file"], "nccl_trace_rank_0");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("Flight Recorder")
    );
}

/// A pickled dump (what torch writes by default) in a job folder is read.
#[test]
fn a_pickled_dump_in_a_job_folder_is_read() {
    // {'version': '2.4', 'pg_status': {'0': {'last_enqueued_collective': 7,
    //  'last_started_collective': 7, 'last_completed_collective': 6}}, 'entries': []}
    let mut p: Vec<u8> = vec![0x80, 2, b'}', b'('];
    let s = |p: &mut Vec<u8>, t: &str| {
        p.push(b'X');
        p.extend((t.len() as u32).to_le_bytes());
        p.extend(t.as_bytes());
    };
    let i = |p: &mut Vec<u8>, v: i32| {
        p.push(b'J');
        p.extend(v.to_le_bytes());
    };
    s(&mut p, "version");
    s(&mut p, "2.4");
    s(&mut p, "pg_status");
    p.extend([b'}', b'(']);
    s(&mut p, "0");
    p.extend([b'}', b'(']);
    for (k, v) in [
        ("last_enqueued_collective", 7),
        ("last_started_collective", 7),
        ("last_completed_collective", 6),
    ] {
        s(&mut p, k);
        i(&mut p, v);
    }
    p.extend([b'u', b'u']);
    s(&mut p, "entries");
    p.extend([b']', b'u', b'.']);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("nccl_trace_rank_3"), &p).unwrap();
    let doc = common::analyze_to_json(tmp.path());
    assert!(
        doc["skipped"].as_array().unwrap().is_empty(),
        "{}",
        doc["skipped"]
    );
    let row = common::rank_row(&doc, 3);
    assert!(!row.is_null(), "rank 3 from the file name");
    assert_eq!(
        (
            row["last_enqueued"].as_i64(),
            row["last_completed"].as_i64()
        ),
        (Some(7), Some(6))
    );
}

/// PyTorch's Flight Recorder analysis (`fr_trace`) saved beside the logs,
/// pytorch#140563's shape (torch 2.5 wording): collective 39 has errors and
/// ranks 22 and 110 posted another input size: they ran another collective.
#[test]
fn fr_trace_culprits_with_another_size_ran_another_collective_torch_2_5() {
    let report = "Collective 39 at entry 38 errors\n\
group info: 0:default_pg\n\
collective: nccl:all_reduce\n\
input sizes: [[1025]]\n\
output sizes: [[1025]]\n\
world size: 128\n\
expected ranks: {0, 1, 2, 3}\n\
collective state: scheduled\n\
error msg: Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' does not match found input sizes: '[[262144]]', Culprit rank 110; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' does not match found input sizes: '[[262144]]'\n\
collective stack trace:\n";
    let v = common::verdict_of(&[("fr_trace.out", report)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([22, 110]), "{v:#}");
    assert_eq!(v["collective"]["op"], "ALLREDUCE", "{v:#}");
    assert_eq!(v["collective"]["seq"], 39, "{v:#}");
    assert_eq!(v["collective"]["pg"], "0", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");

    // A rank only in another state (finished while the others are scheduled)
    // is behind or ahead, not running something else.
    let state = report.replace("SIZE_OR_SYNTAX_MISMATCH", "COLLECTIVE_STATE_MISMATCH");
    let v = common::verdict_of(&[("fr_trace.out", &state)]);
    assert_ne!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
}

/// torch 2.7+ wording: ranks that never joined the collective the others
/// entered are the ones the others waited for.
#[test]
fn fr_trace_missing_ranks_are_the_ones_that_never_joined_torch_2_7() {
    let report = "Not all ranks joining collective, sequence number: 77\n\
internal record id: 76\n\
group info: 0:default_pg\n\
collective: nccl:_reduce_scatter_base\n\
missing ranks: {3}\n\
input sizes: [[4096]]\n\
output sizes: [[1024]]\n\
world size: 4\n\
expected ranks: {0, 1, 2, 3}\n\
collective state: scheduled\n";
    let v = common::verdict_of(&[("fr_trace.log", report)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["collective"]["seq"], 77, "{v:#}");
    assert_eq!(v["collective"]["op"], "_REDUCE_SCATTER_BASE", "{v:#}");
}
