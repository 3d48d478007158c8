//! Ranks that printed no timeout while the others did: the stalled rank,
//! or workers their launcher stopped before their own watchdog fired.

mod common;

use common::write;

/// torch 2.4 under torchrun --tee 3 with NCCL_DEBUG_FILE=nccl.%h.%p
/// (NCCL 2.20.5): 8 ranks on two hosts hang in ALLREDUCE 10779. On
/// node001, ranks 0, 1, 3 time out and abort; the agent then stops rank 2,
/// which said nothing. On node002, ranks 4 and 6 time out and the agent at
/// once stops every remaining worker, 6 among them: 5 and 7 were cut off
/// before their watchdogs fired.
fn job() -> tempfile::TempDir {
    swept_job(&[0, 1, 3, 4, 6], &[&[2], &[5, 6, 7]])
}

/// The job of `job()` with other ranks reporting the timeout and other
/// workers stopped by each host's agent: one host of four workers per entry
/// of `stopped`.
fn swept_job(reporters: &[u32], stopped: &[&[u32]]) -> tempfile::TempDir {
    // Local rank N reports at second 4N of the minute, the sweep comes at 47.
    let timed: Vec<Vec<(u32, f64)>> = (0..stopped.len() as u32)
        .map(|node| {
            (node * 4..node * 4 + 4)
                .filter(|r| reporters.contains(r))
                .map(|r| (r, 40.124819694 + f64::from(r % 4)))
                .collect()
        })
        .collect();
    let hosts: Vec<Sweep<'_>> = timed
        .iter()
        .zip(stopped)
        .map(|(reports, swept)| (reports.as_slice(), *swept, 47.156))
        .collect();
    timed_sweeps(&hosts)
}

#[test]
fn workers_stopped_alongside_reporters_were_cut_off_not_stalled_torch_2_4() {
    assert_stalled_and_cut_off(&job(), 2, &[5, 7]);
}

/// Every silent worker was stopped alongside reporters. node001's agent
/// stopped its workers when three of four had reported the timeout, and
/// rank 2 alone had not; node002's stopped them when two had, so 6 and 7
/// were cut off early: rank 2's silence is the one that stands out.
#[test]
fn of_silent_workers_all_cut_off_the_one_whose_host_had_reported_is_stalled_torch_2_4() {
    let dir = swept_job(&[0, 1, 3, 4, 5], &[&[1, 2, 3], &[5, 6, 7]]);
    assert_stalled_and_cut_off(&dir, 2, &[6, 7]);
}

/// The same sweeps with as many reporters on each host: nothing sets one
/// silent rank apart, so both stay suspects.
#[test]
fn silent_workers_cut_off_alike_on_both_hosts_stay_suspects_torch_2_4() {
    let dir = swept_job(&[0, 1, 3, 4, 5, 7], &[&[1, 2, 3], &[5, 6, 7]]);
    let doc = common::analyze_to_json(dir.path());
    assert_eq!(doc["verdict"]["stuck_ranks"], serde_json::json!([2, 6]));
    // Each suspect with its own host, not both "on" the first one's.
    let summary = doc["verdict"]["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("Rank 2 (node001), 6 (node002) never entered"),
        "{summary}"
    );
}

/// Three hosts: on node001 and node002 three of four workers had reported
/// when their agents stopped them, on node003 two. The silent ranks of the
/// first two stay suspects; node003's two were cut off early.
#[test]
fn silent_workers_where_fewer_had_reported_are_set_apart_torch_2_4() {
    let reporters = [0, 1, 3, 4, 5, 7, 8, 9];
    let dir = swept_job(&reporters, &[&[1, 2, 3], &[5, 6, 7], &[9, 10, 11]]);
    let doc = common::analyze_to_json(dir.path());
    assert_eq!(doc["verdict"]["stuck_ranks"], serde_json::json!([2, 6]));
    for rank in [10, 11] {
        assert_eq!(common::rank_row(&doc, rank)["state"], "killed");
    }
}

/// Two hosts of four workers whose watchdogs fired at the given seconds
/// past 14:35 (rank, second) and whose agent then stopped the workers listed
/// at the second given: each host (reporters, stopped, stop second).
/// One host's reporters (rank, second), the workers its agent stopped, and
/// the second it stopped them at.
type Sweep<'a> = (&'a [(u32, f64)], &'a [u32], f64);

fn timed_sweeps(hosts: &[Sweep<'_>]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let world = 4 * hosts.len();
    for (node, (reporters, swept, stop_s)) in hosts.iter().enumerate() {
        let host = format!("node{:03}", node + 1);
        let mut console = String::new();
        for local in 0..4u32 {
            let rank = node as u32 * 4 + local;
            let pid = 5100 + rank;
            write(
                dir.path(),
                &format!("{host}/nccl.{host}.{pid}"),
                &format!(
                    "{host}:{pid}:{} [{local}] NCCL INFO comm 0x55f4{rank:04} rank {rank} nranks {world} cudaDev {local} nvmlDev {local} busId {}000 commId 0x1b7c44e9a03df582 - Init COMPLETE\n",
                    pid + 70,
                    18 + local * 16
                ),
            );
        }
        for &(rank, second) in *reporters {
            let local = rank % 4;
            console.push_str(&format!(
                "[default{local}]:[rank{rank}]:[E0219 14:35:{second:012.9} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10779, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
            ));
        }
        for rank in *swept {
            console.push_str(&format!(
                "W0219 14:35:{stop_s:09.6} 3335705 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {} closing signal SIGTERM\n",
                5100 + rank
            ));
        }
        write(dir.path(), &format!("{host}/torchrun.log"), &console);
    }
    dir
}

/// As many reporters on each host, so their shares tie; but node001's agent
/// stopped rank 2 1.9 s after that host's first timeout, while on node002
/// the last reporter took 6.8 s after its host's first: rank 2 may not have
/// fired yet. Rank 6, stopped 7.8 s after node002's first timeout, was
/// silent longer than any waiting rank took to report: it is the stalled one.
#[test]
fn a_silent_worker_stopped_sooner_than_others_took_to_report_was_cut_off_torch_2_4() {
    let dir = timed_sweeps(&[
        (&[(0, 40.1), (1, 41.0), (3, 42.0)], &[1, 2], 42.0),
        (&[(4, 40.2), (5, 41.0), (7, 47.0)], &[5, 6], 48.0),
    ]);
    assert_stalled_and_cut_off(&dir, 6, &[2]);
}

/// Both silent workers were stopped within the reporters' spread (node003's
/// last took 3.0 s), so neither stands out by that; but rank 2 was stopped
/// 0.35 s after node001's first timeout, when most waiting ranks had not
/// reported yet, and rank 6 2.5 s after node002's, when one reporter of 14
/// still had not: rank 6 is the likelier stalled one (0.8), rank 2 cut off.
#[test]
fn of_silent_workers_stopped_within_the_spread_the_longer_silent_is_stalled_torch_2_4() {
    let dir = timed_sweeps(&[
        (&[(0, 40.0), (1, 40.1), (3, 40.3)], &[3, 2], 40.35),
        (&[(4, 40.0), (5, 41.0), (7, 42.4)], &[7, 6], 42.5),
        (&[(8, 40.0), (9, 40.5), (10, 41.0), (11, 43.0)], &[], 0.0),
        (&[(12, 40.0), (13, 40.2), (14, 40.4), (15, 40.6)], &[], 0.0),
    ]);
    assert_stalled_and_cut_off(&dir, 6, &[2]);
}

/// torch 2.4 under torchrun --tee 3 with NCCL_DEBUG=WARN: no line ties a
/// worker's pid to its rank. 8 ranks on two hosts hang in ALLREDUCE 10779.
/// On node001, ranks 1 and 3 time out and rank 1 aborts first; its agent
/// stops the others by pid in local-rank order (0, 2, 3): 0 and 2 were cut
/// off. On node002, rank 6 printed nothing after start-up while 4, 5, 7
/// timed out, and no agent line stopped it: it is the stalled one.
fn warn_level_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (node, host) in ["node001", "node002"].into_iter().enumerate() {
        let mut console = String::new();
        for local in 0..4u32 {
            console.push_str(&format!("[default{local}]:NCCL version 2.20.5+cuda12.4\n"));
        }
        let reporters: &[u32] = if node == 0 { &[1, 3] } else { &[0, 1, 3] };
        for &local in reporters {
            let rank = node as u32 * 4 + local;
            console.push_str(&format!(
                "[default{local}]:[rank{rank}]:[E0219 14:35:4{local}.124819694 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10779, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
            ));
        }
        if node == 0 {
            for pid in [7100, 7102, 7103] {
                console.push_str(&format!(
                    "W0219 14:35:47.156000 3335705 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} closing signal SIGTERM\n"
                ));
            }
            console.push_str("E0219 14:35:47.556000 3335705 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 (pid: 7101) of binary: /usr/bin/python3\n");
        }
        write(dir.path(), &format!("{host}/torchrun.log"), &console);
    }
    dir
}

#[test]
fn agent_sweep_names_stopped_workers_by_local_rank_order_torch_2_4() {
    assert_stalled_and_cut_off(&warn_level_job(), 6, &[0, 2]);
}

/// The verdict names `stalled` alone, and the ranks `cut_off` are killed.
fn assert_stalled_and_cut_off(dir: &tempfile::TempDir, stalled: u64, cut_off: &[u64]) {
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([stalled]), "{v:#}");
    for &rank in cut_off {
        let row = common::rank_row(&doc, rank);
        assert_eq!(row["state"], "killed", "{:#}", doc["ranks"]);
        let told = format!("rank {rank} logged no timeout either");
        let cited = v["evidence"].as_array().unwrap().iter();
        assert!(
            cited
                .filter_map(|e| e["why"].as_str())
                .any(|w| w.starts_with(&told)),
            "{v:#}"
        );
    }
}

/// torch 2.2 watchdog lines of the ranks listed, no world size printed.
fn timeouts_of(ranks: &[u32]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log: String = ranks
        .iter()
        .map(|r| format!("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15037, OpType=_ALLGATHER_BASE, NumelIn=131072512, NumelOut=524290048, Timeout(ms)=600000) ran for 600055 milliseconds before timing out.\n"))
        .collect();
    common::write(dir.path(), "train.log", &log);
    dir
}

/// meta-pytorch/torchtune#1165's shape: ranks 1–3 time out, rank 0 (saving
/// the checkpoint) left no line. Ranks count from 0, so rank 0 existed and
/// is the one they waited for. An excerpt of two ranks out of many names no
/// one: four ranks are missing.
#[test]
fn the_one_rank_below_the_highest_that_left_no_line_is_the_one_waited_for_torch_2_2() {
    let dir = timeouts_of(&[1, 2, 3]);
    let doc = common::analyze_to_json(dir.path());
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!([0]),
        "{:#}",
        doc["verdict"]
    );
    let dir = timeouts_of(&[3, 5]);
    let doc = common::analyze_to_json(dir.path());
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!([]),
        "{:#}",
        doc["verdict"]
    );
    let notes = doc["notes"].to_string();
    assert!(notes.contains("No logs from rank(s) 0, 1, 2, 4"), "{notes}");
}

/// pytorch#141069's shape (torch 2.3): rank 2 prints the watchdog's timeout,
/// ranks 1 and 3 only `Timeout at NCCL work: 19, last enqueued …: 19` — a
/// timeout report of its own. Rank 0 wrote nothing: it is the one waited for,
/// not the two ranks that said less.
#[test]
fn timeout_at_nccl_work_lines_count_as_timeouts_torch_2_3() {
    let mut log = String::from(
        "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=19, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800093 milliseconds before timing out.\n",
    );
    for rank in [2u32, 3, 1] {
        log.push_str(&format!("[rank{rank}]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank {rank}] Timeout at NCCL work: 19, last enqueued NCCL work: 19, last completed NCCL work: 18.\n"));
    }
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// OpenRLHF#1126's shape (torch 2.6): rank 2 printed no timeout of its own,
/// only the dump signal another rank's timeout sent it, whose `Last enqueued
/// NCCL work` is the hung seq: it entered the collective and waits there.
/// The rank that left no line is the one they wait for, not rank 2.
#[test]
fn a_rank_whose_dump_signal_shows_the_hung_work_enqueued_is_a_waiter_torch_2_6() {
    let mut log = String::from(
        "[rank2]:[E901 05:20:03.118859045 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump signal due to a collective timeout from  rank 3 and we will try our best to dump the debug info. Last enqueued NCCL work: 460631, last completed NCCL work: 460630.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run.\n",
    );
    for rank in [0u32, 3] {
        log.push_str(&format!("[rank{rank}]:[E901 05:20:03.123992144 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=460631, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n[rank{rank}]:[E901 05:20:03.124073319 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: 460631 PG status: last enqueued work: 460631, last completed work: 460630\n"));
    }
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// torchtune#2651's shape (torch 2.6, a terminal capture wrapped at a fixed
/// width): rank 1's `failure detected by watchdog at work sequence id: 9387
/// PG status:` lost its numbers to the next line. The seq alone says rank 1
/// was in the hung work; the rank that left no line is the one waited for.
#[test]
fn a_status_line_cut_after_pg_status_still_places_its_rank_in_the_hung_work_torch_2_6() {
    let mut log = String::new();
    for rank in [2u32, 3] {
        log.push_str(&format!("[rank{rank}]:[E430 05:09:48.828088908 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9387, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.\n"));
    }
    log.push_str("[rank1]:[E430 05:09:48.894055132 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 9387 PG status: \nlast enqueued work: 9387, last completed work: 9386\n[rank1]:[E430 05:09:48.894115326 ProcessGroupNCCL.cpp:2103] [PG ID 0 PG GUID 0(default_pg) Rank 1] First PG on this rank to signal dumping.\n");
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// vLLM#42354's shape: a timeout pasted over three lines, the work
/// descriptor on the second and its `Timeout(ms)` cut onto the third. The
/// hung collective (op and seq) is still read from the descriptor.
#[test]
fn a_work_descriptor_wrapped_before_its_timeout_still_names_the_collective() {
    let log = "[Rank 1] Watchdog caught collective operation timeout:\n\
WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, NumelIn=1404928, NumelOut=2809856,\n         Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n";
    let doc = common::report_of(&[("rank1.log", log)]);
    let c = &doc["verdict"]["collective"];
    assert_eq!(c["op"], "_ALLGATHER_BASE", "{c:#}");
    assert_eq!(c["seq"], 12590, "{c:#}");
}

/// torch 1.8–1.13 under NCCL_BLOCKING_WAIT=1: the waiting thread raises
/// `RuntimeError: [Rank N] Caught collective operation timeout: …` and the
/// agent reports the worker's exit code 1. Those exits follow the timeouts:
/// no rank crashed, and the one that never arrived is still the one named.
#[test]
fn a_raised_blocking_wait_timeout_makes_its_exit_no_crash_torch_1_11() {
    let raised = |r: u32| {
        format!(
            "RuntimeError: [Rank {r}] Caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800872 milliseconds before timing out.\n\
             ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: {r} (pid: {}) of binary: /usr/bin/python\n",
            4200 + r
        )
    };
    let files: Vec<(String, String)> = (1..4u32)
        .map(|r| (format!("rank{r}.log"), raised(r)))
        .chain([(
            "rank0.log".to_string(),
            "Preparing test set: 40%\n".to_string(),
        )])
        .collect();
    let v = common::verdict_of_owned(&files);
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
    assert_eq!(v["collective"]["seq"], 3, "{v:#}");
}

/// myria3d#123's shape with NCCL_BLOCKING_WAIT=1 (torch 1.x, and 2.4's
/// group prefix): the waiting ranks report their blocking waits timing out,
/// not the watchdog; rank 0, still preparing its data, said nothing.
#[test]
fn blocking_wait_timeouts_name_the_rank_that_never_arrived_torch_1_13_and_2_4() {
    let old = |r: u32| {
        format!(
            "[E ProcessGroupNCCL.cpp:541] [Rank {r}] Work WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) timed out in blocking wait (NCCL_BLOCKING_WAIT=1).\n"
        )
    };
    let new = |r: u32| {
        format!(
            "[rank{r}]:[E1030 17:06:14.410228412 ProcessGroupNCCL.cpp:1251] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Work WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) timed out in blocking wait (TORCH_NCCL_BLOCKING_WAIT=1).\n"
        )
    };
    for line in [old, new] {
        let files: Vec<(String, String)> = (1..4u32)
            .map(|r| (format!("rank{r}.log"), line(r)))
            .chain([(
                "rank0.log".to_string(),
                "Preparing test set: 40%\n".to_string(),
            )])
            .collect();
        let v = common::verdict_of_owned(&files);
        assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
        assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
        assert_eq!(v["collective"]["op"], "ALLREDUCE", "{v:#}");
        assert_eq!(v["collective"]["seq"], 3, "{v:#}");
    }
}

/// Slurm, torch 2.3 (NCCL 2.20.5): three hosts of two ranks; gpu-b02's
/// ranks print their init and then nothing while the others time out in
/// ALLREDUCE 8815. With `unreachable`, `sinfo -R` marks gpu-b02 `Not
/// responding` and the collection script's ssh could not reach it.
fn node_gone_job(unreachable: bool) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    for (node, host) in ["gpu-b01", "gpu-b02", "gpu-b03"].iter().enumerate() {
        let mut log = String::new();
        for local in 0..2u32 {
            let rank = node as u32 * 2 + local;
            let pid = 58100 + rank;
            log.push_str(&format!("{host}:{pid}:{pid} [{local}] NCCL INFO comm 0x56{rank:02} rank {rank} nranks 6 cudaDev {local} nvmlDev {local} busId {local}b000 commId 0xca0d - Init COMPLETE\n"));
        }
        if *host != "gpu-b02" {
            for local in 0..2u32 {
                let rank = node as u32 * 2 + local;
                log.push_str(&format!("[rank{rank}]:[E912 02:49:00.118000000 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8815, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600032 milliseconds before timing out.\n"));
                log.push_str(&format!("[rank{rank}]:[E912 02:49:00.119000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: 8815, last enqueued NCCL work: 8815, last completed NCCL work: 8814.\n"));
            }
        }
        write(dir.path(), &format!("logs/{host}.out"), &log);
    }
    if unreachable {
        write(
            dir.path(),
            "sinfo-R.txt",
            "REASON               USER      TIMESTAMP           NODELIST\nNot responding       slurm     2024-09-12T02:44:07 gpu-b02\n",
        );
        write(
            dir.path(),
            "collect.log",
            "+ ssh gpu-b02 'sudo dmesg -T' > sys/gpu-b02.dmesg.txt\nssh: connect to host gpu-b02 port 22: No route to host\n",
        );
    }
    common::analyze_to_json(dir.path())
}

#[test]
fn silent_ranks_of_a_node_that_stopped_answering_leave_the_cause_undecided_slurm() {
    let doc = node_gone_job(true);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2, 3]), "{v:#}");
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    assert_eq!(v["cause"]["confidence"], 0.0, "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("gpu-b02 stopped answering")),
        "{v:#}"
    );
    let doc = node_gone_job(false);
    let summary = doc["verdict"]["cause"]["summary"].as_str().unwrap_or("");
    assert!(!summary.contains("stopped answering"), "{summary}");
}
