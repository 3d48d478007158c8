//! NCCL's COLL trace (`NCCL_DEBUG_SUBSYS=COLL`): one line per call with the
//! communicator's launch count; members that called different collectives
//! at one launch ran a mismatch.

mod common;

/// Who prints a call line: host, pid, device, its communicator pointer
/// and size.
struct Caller<'a> {
    host: &'a str,
    pid: u32,
    dev: u32,
    comm: &'a str,
    nranks: u32,
}

/// One call line as NCCL 2.3+ prints it (`%zi` before 2.20, `%zu` since:
/// the same text).
fn call(c: &Caller<'_>, op: &str, op_count: u64, count: u64, dtype: u32) -> String {
    let Caller {
        host,
        pid,
        dev,
        comm,
        nranks,
    } = c;
    format!(
        "{host}:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f88e4000000 recvbuff 0x7f88e4000000 count {count} datatype {dtype} op 0 root 0 comm {comm} [nranks={nranks}] stream 0x55f20d2f5db0\n"
    )
}

/// NVIDIA/nccl#147's shape (2018): the maintainer's grep over each rank's
/// log (`LOG1.N.txt:` kept), one line per process: the first Broadcast of
/// one process carries 25503912 elements of datatype 6, the five others'
/// 53 of datatype 4; the last line is cut before its root.
#[test]
fn the_process_that_broadcast_another_size_at_the_first_launch_is_odd_nccl_2_3() {
    let mut log = String::new();
    for (i, pid) in [32615u32, 32617, 32619, 32621, 32623, 32625]
        .iter()
        .enumerate()
    {
        let (count, dtype) = if i == 0 { (25503912, 6) } else { (53, 4) };
        let comm = format!("0x7f{i}8e005a260");
        let caller = Caller {
            host: "learnfair062",
            pid: *pid,
            dev: i as u32,
            comm: &comm,
            nranks: 8,
        };
        let line = call(&caller, "Broadcast", 0, count, dtype);
        let line = if i == 5 {
            line[..line.find(" root").unwrap() + 5].to_string() + "\n"
        } else {
            line
        };
        log.push_str(&format!("LOG1.{i}.txt:{line}"));
    }
    let doc = common::report_of(&[("coll_trace.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["cause"]["host"], "learnfair062", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("process 32615"), "{summary}");
    assert!(summary.contains("25503912"), "{summary}");
}

/// A rank's debug file (NCCL_DEBUG_FILE=nccl.%h.%p): its init line for the
/// world communicator (2.19: commId), then its calls.
fn rank_file(rank: u32, calls: &[(&str, u64, u64)]) -> (String, String) {
    let pid = 4100 + rank;
    let comm = format!("0x55{rank}0c9d0");
    let mut log = format!(
        "node1:{pid}:{pid} [{rank}] NCCL INFO comm {comm} rank {rank} nranks 4 cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x2114bc51af4fb978 - Init COMPLETE\n",
        18 + rank
    );
    let caller = Caller {
        host: "node1",
        pid,
        dev: rank,
        comm: &comm,
        nranks: 4,
    };
    for (op, op_count, count) in calls {
        log.push_str(&call(&caller, op, *op_count, *count, 7));
    }
    (format!("nccl.node1.{pid}.log"), log)
}

fn report(files: &[(String, String)]) -> serde_json::Value {
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    common::report_of(&files)
}

/// Twenty agreeing all-reduces, then rank 2 reduces another size at launch
/// 0x14: only each rank's last calls are kept, and they suffice.
#[test]
fn the_rank_that_reduced_another_size_at_one_launch_is_named_nccl_2_19() {
    let files: Vec<(String, String)> = (0..4)
        .map(|rank| {
            let mut calls: Vec<(&str, u64, u64)> =
                (0..20).map(|n| ("AllReduce", n, 4194304)).collect();
            calls.push(("AllReduce", 20, if rank == 2 { 1048576 } else { 4194304 }));
            rank_file(rank, &calls)
        })
        .collect();
    let doc = report(&files);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    assert_eq!(v["collective"]["op"], "ALLREDUCE", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("rank 2 called AllReduce of 1048576 float32 elements"),
        "{summary}"
    );
    assert!(summary.contains("launch 20"), "{summary}");
    let cited: Vec<u64> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["file"].as_str().unwrap().contains("4102"))
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert!(cited.contains(&22), "rank 2's odd call is cited: {v:#}");

    // Two against two: a mismatch, neither side named.
    let files: Vec<(String, String)> = (0..4)
        .map(|rank| rank_file(rank, &[("AllReduce", 0, if rank < 2 { 8 } else { 16 })]))
        .collect();
    let v = &report(&files)["verdict"];
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// Calls launched together share one count (ncclGroupStart/End, 2.9+),
/// and point-to-point calls differ per caller by design: neither is a
/// mismatch, nor are calls that agree.
#[test]
fn grouped_launches_point_to_point_calls_and_agreeing_calls_are_no_mismatch_nccl_2_19() {
    let grouped: Vec<(String, String)> = (0..4)
        .map(|rank| rank_file(rank, &[("AllReduce", 5, 10), ("AllReduce", 5, 20)]))
        .collect();
    let p2p: Vec<(String, String)> = (0..4)
        .map(|rank| {
            let op = if rank % 2 == 0 { "Send" } else { "Recv" };
            rank_file(rank, &[("AllReduce", 2, 64), (op, 3, 100)])
        })
        .collect();
    let agreeing: Vec<(String, String)> = (0..4)
        .map(|rank| rank_file(rank, &[("AllReduce", 0, 64), ("Broadcast", 1, 9)]))
        .collect();
    for files in [grouped, p2p, agreeing] {
        let v = &report(&files)["verdict"];
        assert_ne!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    }
}
