//! NCCL's RAS client report (`ncclras`, 2.24+) taken while the job hung.

mod common;

use common::verdict_of;

const HEAD: &str = "\
NCCL version 2.26.2 compiled with CUDA 12.6

Communicators... (0.00s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         4         8        32        32   RUNNING  MISMATCH

Warnings
========

";

/// A lone rank that launched fewer all-gathers than the other 31 (2.26+
/// names the op): the others wait for it.
#[test]
fn the_rank_that_launched_fewer_operations_is_stuck_nccl_2_26() {
    let report = format!(
        "{HEAD}#0-0 (fa93daea854b060b) MISMATCH
  Communicator ranks have different AllGather operation counts
  31 ranks have launched up to operation 640
  Rank 21 has launched up to operation 639 -- GPU 5 managed by process 323041 on node 10.137.190.125
"
    );
    let v = verdict_of(&[("ncclras.txt", &report)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([21]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("ALLGATHER"), "{summary}");
    assert_eq!(v["cause"]["host"], "10.137.190.125", "{v:#}");
    assert_eq!(v["collective"]["op"], "ALLGATHER", "{v:#}");
}

/// nccl#1911's report: two ranks queued one more all-gather than the other
/// 30. They are ahead, not stragglers: nobody is named, but the job hung.
#[test]
fn ranks_that_launched_more_are_not_stragglers_nccl_2_26() {
    let report = format!(
        "{HEAD}#0-0 (fa93daea854b060b) MISMATCH
  Communicator ranks have different AllGather operation counts
  30 ranks have launched up to operation 640
  2 ranks have launched up to operation 641
  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124
  Rank 13 -- GPU 5 managed by process 323033 on node 10.137.190.124
"
    );
    let v = verdict_of(&[("ncclras.txt", &report)]);
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
    assert_ne!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}

/// 2.24's wording names no op; two ranks that launched nothing while the
/// rest ran 88 operations are listed under their group line.
#[test]
fn a_group_behind_is_named_from_its_listed_ranks_nccl_2_24() {
    let report = format!(
        "{HEAD}#0-0 (27d4c21a3f63d54d) MISMATCH
  Communicator ranks have different collective operation counts
  14 ranks have launched up to operation 88
  2 ranks have not launched any operations
  Rank 6 -- GPU 6 managed by process 5120 on node gpu-002
  Rank 7 -- GPU 7 managed by process 5121 on node gpu-002
"
    );
    let v = verdict_of(&[("ras.out", &report)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6, 7]), "{v:#}");
}

/// An INCOMPLETE block: a rank whose process did not answer RAS is a lead
/// that it died; a corrupted rank number (nccl#1762) names nobody.
#[test]
fn a_rank_that_did_not_answer_is_a_lead_and_a_corrupt_one_is_dropped_nccl_2_27() {
    let report = format!(
        "{HEAD}#0-0 (b3398875b8b2a063) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 1 -- GPU 0 managed by process 60004 on node 10.4.109.13

#2-0 (93d7000200000001) INCOMPLETE
  Missing communicator data from 255 ranks
  Rank 1057455228 -- [process information not found]
"
    );
    let v = verdict_of(&[("ncclras.txt", &report)]);
    let crash = std::iter::once(&v["cause"])
        .chain(v["alternatives"].as_array().into_iter().flatten())
        .find(|c| c["kind"] == "process_crash")
        .unwrap_or_else(|| panic!("a crash lead: {v:#}"));
    assert!(crash["confidence"].as_f64().unwrap() < 0.5, "{crash:#}");
    assert!(!v.to_string().contains("1057455228, "), "{v:#}");
    let ranks = crash["ranks"].as_array().cloned().unwrap_or_default();
    assert!(!ranks.iter().any(|r| r == 1057455228u64), "{crash:#}");
}

/// The report's DEAD section (NCCL 2.30.7's client_support.cc, the shape of
/// NCCL's RAS documentation after a rank exited): no communicator data, one
/// job process "considered dead", named by pid and node only. The job's own
/// init lines give that pid on that node rank 7: its process went first,
/// and the job failed. A report without the section blames nobody.
#[test]
fn a_process_the_ras_network_declared_dead_is_the_crash_nccl_2_30() {
    let mut init = String::new();
    for (rank, host, pid) in [(3u32, "node0", 3748800u32), (7, "node1", 3748990)] {
        init.push_str(&format!("{host}:{pid}:{pid} [3] NCCL INFO comm 0x55d0 rank {rank} nRanks 8 nNodes 2 localRanks 4 localRank 3 MNNVL 0\n"));
    }
    let report = "\
Communicators... (0.002s)
=============

No communicator data collected!

Errors
======

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 3748990 on node node1 managing GPU 3

Warnings
========
";
    let v = verdict_of(&[("nccl.log", &init), ("ncclras.txt", report)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([7]), "{v:#}");
    assert_eq!(v["cause"]["host"], "node1", "{v:#}");
    assert_ne!(v["status"], "healthy", "{v:#}");
    let without = report.replace("DEAD\n", "").replace(
        "  1 job process is considered dead (unreachable via the RAS network)\n  Process 3748990 on node node1 managing GPU 3\n",
        "",
    );
    let v = verdict_of(&[("nccl.log", &init), ("ncclras.txt", &without)]);
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
}
