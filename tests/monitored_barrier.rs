//! `monitored_barrier` (PyTorch's Gloo barrier that names its laggards):
//! rank 0's statement decides; the others' "lost rank 0" is a lead to rank 0.

mod common;

use common::verdict_of as verdict;

/// Rank 0 names rank 2 (torch 2.x wording, `[Rank 0]: ` prefix); ranks 1 and
/// 3 lost rank 0 when it gave up. Rank 2 is the one, not the messenger.
#[test]
fn rank_0_naming_the_missing_rank_decides_over_the_others_losing_rank_0_torch_2_1() {
    let rank0 = "[rank0]:[E ProcessGroupGloo.cpp:144] [Rank 0]: Rank 2 failed to pass monitoredBarrier in 1800000 ms\n";
    let other = |r: u32| {
        format!(
            "[rank{r}]:[E ProcessGroupGloo.cpp:138] Rank {r} successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
        )
    };
    let (one, three) = (other(1), other(3));
    let v = verdict(&[
        ("rank0.log", rank0),
        ("rank1.log", &one),
        ("rank3.log", &three),
    ]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() >= 0.75, "{v:#}");
}

/// The torch 1.9 docs' wording (no prefix) and `wait_all_ranks=True`'s list.
#[test]
fn the_unprefixed_and_listed_wordings_name_their_ranks_torch_1_9_and_wait_all_ranks() {
    let v = verdict(&[(
        "train.log",
        "RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms\n Original exception:\n[gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:8594\n",
    )]);
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
    let v = verdict(&[(
        "train.log",
        "[E ProcessGroupGloo.cpp:144] [Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 120000 ms\n",
    )]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1, 2]), "{v:#}");
}

/// DeepSpeed#4488's shape: rank 0 still in a dataset `map` for hours, rank 3
/// gave up at the barrier; rank 0's own log is not there. Rank 0 is the
/// lead, no stronger than the one line allows.
#[test]
fn only_a_rank_that_lost_rank_0_makes_rank_0_a_lead_deepspeed_4488() {
    let log = "\
Map (num_proc=14):  70%|#######   | 652383/930514 [6:39:53<4:31:33, 17.07 examples/s][E ProcessGroupGloo.cpp:138] Rank 3 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.
";
    let v = verdict(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() <= 0.5, "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}
