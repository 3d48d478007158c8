//! Which process group a hung collective belongs to, when only some lines
//! name it.

mod common;

use common::write;

/// modelscope/FunASR#2006's shape, torch 2.3: the watchdog's own timeout
/// line says `[Rank N]` and no group; the status line of the same watchdog
/// says `[PG 1 Rank N]`. Ranks 1 and 3 left only the first, rank 2 both:
/// every rank timed out in group 1's ALLREDUCE 15734, not in group 0.
#[test]
fn an_untagged_timeout_takes_the_group_the_status_lines_give_its_work_torch_2_3() {
    let dir = tempfile::tempdir().unwrap();
    let watchdog = |r: u32| {
        format!(
            "[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, NumelIn=220084533, NumelOut=220084533, Timeout(ms)=600000) ran for 600037 milliseconds before timing out.\n"
        )
    };
    let mut log = String::new();
    for r in [1, 3] {
        log.push_str(&watchdog(r));
    }
    log.push_str(&watchdog(2));
    log.push_str("[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 2] Timeout at NCCL work: 15734, last enqueued NCCL work: 15735, last completed NCCL work: 15733.\n");
    write(dir.path(), "train.log", &log);
    let doc = common::analyze_to_json(dir.path());
    let collective = &doc["verdict"]["collective"];
    assert_eq!(collective["pg"], "1", "{collective:#}");
    assert_eq!(collective["seq"], 15734, "{collective:#}");
    for r in [1u64, 2, 3] {
        let row = common::rank_row(&doc, r);
        assert_eq!(row["state"], "timed_out", "{row:#}");
    }
}

/// torch 2.4+: `PG ID` counts the groups each process created, `PG GUID`
/// names the group. Ranks 4 and 5 created their groups in another order,
/// so the same group (GUID 7) is their PG ID 2 and 3; both timed out in it
/// at ALLREDUCE 88 while rank 6, its third member, never reported.
#[test]
fn ranks_meet_in_a_subgroup_by_its_guid_not_their_local_pg_id_torch_2_4() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for (rank, local_id) in [(4u32, 2u32), (5, 3)] {
        log.push_str(&format!("[rank{rank}]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [PG ID {local_id} PG GUID 7 Rank {}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n", rank - 4));
        log.push_str(&format!("[rank{rank}]:[E1201 10:00:00.000100000 ProcessGroupNCCL.cpp:2303] [PG ID {local_id} PG GUID 7 Rank {}]  failure detected by watchdog at work sequence id: 88 PG status: last enqueued work: 88, last completed work: 87\n", rank - 4));
    }
    log.push_str("[rank6]:[W1201 09:50:00.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 6] using GPU 6 to perform barrier as devices used by this process are currently unknown.\n");
    write(dir.path(), "train.log", &log);
    let doc = common::analyze_to_json(dir.path());
    let collective = &doc["verdict"]["collective"];
    assert_eq!(collective["pg"], "7", "{collective:#}");
    assert_eq!(collective["seq"], 88, "{collective:#}");
    for r in [4u64, 5] {
        assert_eq!(common::rank_row(&doc, r)["state"], "timed_out");
    }
}

/// verl-project/verl#1309's shape, torch 2.6 under Ray: global rank 15 is
/// rank 1 of a tensor-parallel subgroup (GUID 20) and times out in its third,
/// one-element broadcast. The subgroup's busy first member is some global
/// rank no line names, not the job's rank 0.
#[test]
fn an_early_subgroup_barrier_does_not_blame_the_jobs_rank_0_torch_2_6() {
    let dir = tempfile::tempdir().unwrap();
    let p = "[2025-05-10 00:18:21] (WorkerDict pid=1230, ip=worker-0) [rank15]:";
    let log = format!(
        "{p}[E510 00:18:19.328053719 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800018 milliseconds before timing out.\n\
         {p}[E510 00:18:19.328151517 ProcessGroupNCCL.cpp:2168] [PG ID 4 PG GUID 20(mesh_tp) Rank 1]  failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 3, last completed work: 2\n"
    );
    write(dir.path(), "ray-worker.txt", &log);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["collective"]["pg"], "20", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// torch 2.4+ tags each watchdog timeout with its group (`[PG ID 2 PG GUID
/// 3(tp) Rank 1]`). With no status line after it (a paste cut there), the
/// tag alone places the timeout: ranks 0–2 wait in the tensor-parallel
/// group's ALLREDUCE #20 while rank 3's own timeout is in the default
/// group's #5. The hung collective is group 3's, and rank 3 is the one it
/// waits for; the two groups' numbers are not compared as one group's.
#[test]
fn a_timeouts_own_group_tag_places_it_torch_2_4() {
    let mut log = String::new();
    for r in 0..3 {
        log.push_str(&format!("[rank{r}]:[E1129 10:30:0{r}.000000000 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 3(tp) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"));
    }
    log.push_str("[rank3]:[E1129 10:30:03.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n");
    let v = common::verdict_of_owned(&[("train.log".to_string(), log)]);
    assert_eq!(v["collective"]["pg"], "3", "{v:#}");
    assert_eq!(v["collective"]["seq"], 20, "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert_ne!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
}
