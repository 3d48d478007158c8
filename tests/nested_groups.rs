//! Hangs across several process groups (tensor-, data-parallel): the group
//! the stuck rank is missing from first is the hung one, even where the
//! groups that waited on it report more timeouts.

mod common;

use common::write;

/// 16 ranks on 4 hosts of 4 GPUs (torch 2.4: `[PG <name> (<desc>) Rank n]`
/// prefixes, JSON Flight Recorder dumps). Each host is a tensor-parallel
/// group (names 9–12), each GPU position a data-parallel group across the
/// hosts (names 1–4); every process created the default group, its DP
/// group, then its TP group, so its dump's `pg_status` counts them 0, 1, 2.
/// Rank 5 (host 2) never joined its TP group's BROADCAST #900; its TP
/// peers time out there, and every DP group that holds one of host 2's
/// ranks then times out in its REDUCE_SCATTER #300.
fn job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..16u32 {
        let (host, local) = (r / 4, r % 4);
        let (dp, tp) = (local + 1, host + 9);
        let on_stalled_host = host == 1;
        let stalled = r == 5;
        let tp_enqueued = if stalled { 899 } else { 900 };
        let tp_completed = if on_stalled_host { 899 } else { 900 };
        let dp_enqueued = if on_stalled_host { 299 } else { 300 };
        write(
            dir.path(),
            &format!("fr/nccl_trace_rank_{r}"),
            &dump(r, (dp, dp_enqueued), (tp, tp_enqueued, tp_completed)),
        );
        let mut log = format!(
            "[rank{r}]:[W1014 02:31:20.280434092 Utils.hpp:164] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n"
        );
        if on_stalled_host && !stalled {
            log.push_str(&timeout(
                r,
                (tp, "TENSOR_MODEL_PARALLEL_GROUP", local),
                900,
                "BROADCAST",
                "03:00:34",
            ));
        } else if !on_stalled_host {
            log.push_str(&timeout(
                r,
                (dp, "DATA_PARALLEL_GROUP", host),
                300,
                "_REDUCE_SCATTER_BASE",
                "03:00:38",
            ));
        }
        write(dir.path(), &format!("logs/rank{r}.out"), &log);
    }
    dir
}

fn timeout(r: u32, (pg, desc, in_pg): (u32, &str, u32), seq: u32, op: &str, at: &str) -> String {
    format!(
        "[rank{r}]:[E1014 {at}.809740795 ProcessGroupNCCL.cpp:607] [Rank {in_pg}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600343 milliseconds before timing out.\n\
         [rank{r}]:[E1014 {at}.809879323 ProcessGroupNCCL.cpp:1664] [PG {pg} ({desc}) Rank {in_pg}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {}.\n",
        seq - 1
    )
}

/// A rank's dump: its DP group (local id 1) and TP group (local id 2).
fn dump(
    r: u32,
    (dp, dp_enqueued): (u32, i64),
    (tp, tp_enqueued, tp_completed): (u32, i64, i64),
) -> String {
    let members = |first: u32, step: u32| {
        (0..4)
            .map(|i| (first + i * step).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let entry = |id: u32, name: u32, desc: &str, seq: i64, op: &str, done: bool| {
        format!(
            r#"{{"record_id": {seq}, "pg_id": {id}, "process_group": ["{name}", "{desc}"], "collective_seq_id": {seq},
               "p2p_seq_id": 0, "op_id": {seq}, "profiling_name": "nccl:{op}", "time_created_ns": 1728874200000000000,
               "input_sizes": [[8192]], "output_sizes": [[8192]], "state": "{}", "timeout_ms": 600000,
               "is_p2p": false, "retired": {}, "time_discovered_started_ns": null, "time_discovered_completed_ns": null}}"#,
            if done { "completed" } else { "scheduled" },
            !done
        )
    };
    let dp_completed = dp_enqueued.min(299);
    let entries = [
        entry(
            1,
            dp,
            "DATA_PARALLEL_GROUP",
            dp_enqueued,
            "_reduce_scatter_base",
            dp_enqueued == dp_completed,
        ),
        entry(
            2,
            tp,
            "TENSOR_MODEL_PARALLEL_GROUP",
            tp_enqueued,
            "broadcast",
            tp_enqueued == tp_completed,
        ),
    ];
    format!(
        r#"{{"version": "2.4", "comm_lib_version": "2.20.5",
          "pg_config": {{"0": {{"name": "0", "desc": "default_pg", "ranks": "[{all}]"}},
                         "{dp}": {{"name": "{dp}", "desc": "DATA_PARALLEL_GROUP", "ranks": "[{dp_ranks}]"}},
                         "{tp}": {{"name": "{tp}", "desc": "TENSOR_MODEL_PARALLEL_GROUP", "ranks": "[{tp_ranks}]"}}}},
          "pg_status": {{"0": {{"last_enqueued_collective": 23, "last_started_collective": -1, "last_completed_collective": 23}},
                         "1": {{"last_enqueued_collective": {dp_enqueued}, "last_started_collective": -1, "last_completed_collective": {dp_completed}}},
                         "2": {{"last_enqueued_collective": {tp_enqueued}, "last_started_collective": -1, "last_completed_collective": {tp_completed}}}}},
          "entries": [{}]}}"#,
        entries.join(","),
        all = (0..16)
            .map(|i: u32| i.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        dp_ranks = members(r % 4, 4),
        tp_ranks = members(r / 4 * 4, 1),
    )
}

/// Twelve DP timeouts in four groups against three TP timeouts: three of
/// the DP groups wait on host 2's ranks, which are stuck in their TP
/// group, so their votes go to it; rank 5, behind there, is the culprit.
#[test]
fn the_group_the_others_wait_on_is_the_hung_one_torch_2_4() {
    let dir = job();
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
    assert_eq!(v["collective"]["pg"], "10", "{v:#}");
    assert_eq!(v["collective"]["op"], "BROADCAST", "{v:#}");
    assert_eq!(v["collective"]["seq"], 900, "{v:#}");
}
