//! One clock: per-host skew is estimated from collectives that every rank
//! enqueued together, and corrected everywhere.

mod common;

/// 8 ranks on two hosts time out on ALLREDUCE 77 (torch 2.4 stamps); node002's
/// clock runs 20 s ahead, and odd ranks print their timeout a second later
/// (having enqueued a second later too).
fn job(root: &std::path::Path) {
    for (host, first) in [("node001", 0u32), ("node002", 4)] {
        let skew = if host == "node002" { 20 } else { 0 };
        let mut log = String::new();
        for r in first..first + 4 {
            let pid = 100 + r;
            log.push_str(&format!(
                "{host}:{pid}:{pid} [{l}] NCCL INFO comm 0x{r:x}0 rank {r} nranks 8 cudaDev {l} nvmlDev {l} busId {l}1000 commId 0xabc - Init COMPLETE\n",
                l = r - first
            ));
            let secs = 30 + skew + (r % 2);
            log.push_str(&format!(
                "[rank{r}]:[E1129 12:10:{secs:02}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for {} milliseconds before timing out.\n",
                600_000 + 1000 * (r % 2)
            ));
        }
        std::fs::write(root.join(format!("{host}.log")), log).unwrap();
    }
}

#[test]
fn a_skewed_host_gets_its_offset_and_corrected_times() {
    let tmp = tempfile::tempdir().unwrap();
    job(tmp.path());
    let doc = common::analyze_to_json(tmp.path());
    let offsets = doc["clock_offsets"].as_array().unwrap();
    let by_host = |h: &str| {
        offsets.iter().find(|o| o["host"] == h).unwrap()["offset_ms"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(by_host("node001"), 0);
    assert_eq!(by_host("node002"), 20_000);
    let times = evidence_times(&doc);
    assert!(!times.is_empty());
    assert!(
        times.iter().all(|t| t.starts_with("11-29 12:10:3")),
        "corrected into one window: {times:?}"
    );
}

/// `dmesg -T` of a host up for weeks: its boot lines (December 2023)
/// outnumber its lines from the job's day (15 January 2024). The c10
/// stamps (`E0115 17:06:18`, torch 2.4) take the year of the full stamps
/// near their own day, 2024, not the boot's.
#[test]
fn year_less_stamps_take_the_year_of_the_stamps_near_their_day() {
    let tmp = tempfile::tempdir().unwrap();
    job(tmp.path());
    for host in ["node001", "node002"] {
        let log = std::fs::read_to_string(tmp.path().join(format!("{host}.log"))).unwrap();
        std::fs::write(
            tmp.path().join(format!("{host}.log")),
            log.replace("E1129 12:10:", "E0115 12:10:"),
        )
        .unwrap();
        let mut dmesg: String = (0..20)
            .map(|i| format!("[Tue Dec 26 07:52:{i:02} 2023] mlx5_core 0000:{:02x}:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)\n", 0x1a + i))
            .collect();
        dmesg.push_str("[Mon Jan 15 12:09:58 2024] mlx5_core 0000:1a:00.0 enp26s0np0: Link up\n");
        std::fs::create_dir_all(tmp.path().join(host)).unwrap();
        std::fs::write(tmp.path().join(format!("{host}/dmesg.txt")), dmesg).unwrap();
    }
    let doc = common::analyze_to_json(tmp.path());
    let times = evidence_times(&doc);
    assert!(!times.is_empty());
    assert!(
        times.iter().all(|t| t.starts_with("2024-01-15 12:10:3")),
        "{times:?}"
    );
}

/// The times the verdict's evidence lines show.
fn evidence_times(doc: &serde_json::Value) -> Vec<&str> {
    doc["verdict"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["time"].as_str())
        .collect()
}
