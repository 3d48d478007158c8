//! Counters and fabric snapshots in a whole job: dumps taken before and after
//! the job, an ibstat of a host with a port down, and NCCL logs that map the
//! ranks to hosts and NICs. The verdict must name the flapping link under the
//! stuck rank and cite the counter lines; the report must list the deltas and
//! the fabric findings.

use std::path::Path;

use serde_json::Value;

mod common;

use common::write;

/// The line shapes of samples/ib-retry-exceeded (NCCL 2.20.5, torch, Slurm
/// `--label`): 8 ranks on node001 and node002; ranks 2, 3, 6, 7 send over
/// `NET/IB/1` = mlx5_1. Rank 6 (node002) is silent while the others time out.
fn slurm_log() -> String {
    let mut s = String::from("==== job 48213 on node[001-002], 8 tasks ====\n");
    s.push_str("0: NCCL version 2.20.5+cuda12.4\n");
    let bus = ["18000", "3b000", "86000", "af000"];
    for r in 0..8u32 {
        let (host, ip) = if r < 4 {
            ("node001", "10.3.0.11")
        } else {
            ("node002", "10.3.0.12")
        };
        let l = r % 4;
        let (pid, tid) = (1000 + r, 2000 + r);
        let dev = if l >= 2 { 1 } else { 0 };
        let peer = if r < 4 { r + 4 } else { r - 4 };
        s.push_str(&format!(
            "{r}: {host}:{pid}:{pid} [{l}] NCCL INFO Bootstrap : Using ib0:{ip}<0>\n\
             {r}: {host}:{pid}:{tid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:{ip}<0>\n\
             {r}: {host}:{pid}:{tid} [{l}] NCCL INFO Channel 00/0 : {r}[{l}] -> {peer}[{l}] [send] via NET/IB/{dev}/GDRDMA\n\
             {r}: {host}:{pid}:{tid} [{l}] NCCL INFO comm 0x55f435cff8b{r} rank {r} nranks 8 cudaDev {l} nvmlDev {l} busId {} commId 0x1b7c44e9a03df582 - Init COMPLETE\n",
            bus[l as usize]
        ));
    }
    for r in (0..8u32).filter(|&r| r != 6) {
        s.push_str(&format!(
            "{r}: [rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1315950592, NumelOut=1315950592, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.\n\
             {r}: [rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank {r}] Timeout at NCCL work: 1203, last enqueued NCCL work: 1203, last completed NCCL work: 1202.\n"
        ));
    }
    s
}

fn sysfs(dev: &str, values: &[(&str, u64)]) -> String {
    values
        .iter()
        .map(|(n, v)| format!("/sys/class/infiniband/{dev}/ports/1/counters/{n}:{v}\n"))
        .collect()
}

const IBSTAT_NODE003: &str = "CA 'mlx5_0'\n\tCA type: MT4129\n\tFirmware version: 28.39.1002\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 75\n\t\tSM lid: 334\n\t\tLink layer: InfiniBand\nCA 'mlx5_1'\n\tCA type: MT4129\n\tFirmware version: 28.39.1002\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 40\n\t\tBase lid: 0\n\t\tSM lid: 0\n\t\tLink layer: InfiniBand\n";

fn flapping_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "slurm-48213.out", &slurm_log());
    write(
        root,
        "node002/counters/before/mlx5_1.txt",
        &sysfs(
            "mlx5_1",
            &[
                ("link_downed", 1),
                ("port_rcv_data", 1000),
                ("symbol_error", 12),
            ],
        ),
    );
    write(
        root,
        "node002/counters/after/mlx5_1.txt",
        &sysfs(
            "mlx5_1",
            &[
                ("link_downed", 4),
                ("port_rcv_data", 900000),
                ("symbol_error", 4223),
            ],
        ),
    );
    write(
        root,
        "node002/counters/before/mlx5_0.txt",
        &sysfs("mlx5_0", &[("symbol_error", 0)]),
    );
    write(
        root,
        "node002/counters/after/mlx5_0.txt",
        &sysfs("mlx5_0", &[("symbol_error", 0)]),
    );
    write(root, "node003/ibstat.txt", IBSTAT_NODE003);
    dir
}

/// Every cited line exists verbatim in its file (as tests/corpus.rs checks).
fn assert_citations_real(root: &Path, doc: &Value) {
    let mut all = doc["verdict"]["evidence"].as_array().cloned().unwrap();
    for alt in doc["verdict"]["alternatives"].as_array().unwrap() {
        all.extend(alt["evidence"].as_array().cloned().unwrap());
    }
    for e in all {
        let text = std::fs::read_to_string(root.join(e["file"].as_str().unwrap())).unwrap();
        let n = e["line"].as_u64().unwrap() as usize;
        let line = text.lines().nth(n - 1).unwrap_or("");
        let cited = e["text"].as_str().unwrap().trim_end_matches('…');
        assert!(line.trim_end().starts_with(cited), "{e}: line is {line:?}");
    }
}

#[test]
fn rising_link_counters_under_the_stuck_rank_make_a_link_flap_verdict() {
    let job = flapping_job();
    let doc = common::analyze_to_json(job.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6]), "{v:#}");
    let cause = &v["cause"];
    assert_eq!(cause["kind"], "link_flap", "{v:#}");
    assert_eq!(cause["host"], "node002");
    assert_eq!(cause["device"], "mlx5_1");
    assert_eq!(cause["port"], 1);
    assert!(cause["confidence"].as_f64().unwrap() >= 0.6, "{cause:#}");
    let evidence = cause["evidence"].as_array().unwrap();
    let symbol = evidence
        .iter()
        .find(|e| e["text"] == "/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error:4223")
        .expect("the symbol_error line is cited");
    assert_eq!(symbol["file"], "node002/counters/after/mlx5_1.txt");
    assert_eq!(symbol["line"], 3);
    assert!(
        symbol["why"]
            .as_str()
            .unwrap()
            .starts_with("symbol_error +4,211 on node002 mlx5_1 port 1 (before 12, after 4,223)"),
        "{symbol}"
    );
    assert!(evidence.iter().any(|e| {
        e["text"]
            .as_str()
            .unwrap()
            .ends_with("counters/link_downed:4")
    }));
    assert_citations_real(job.path(), &doc);
}

#[test]
fn the_report_lists_counter_deltas_and_fabric_findings() {
    let job = flapping_job();
    let doc = common::analyze_to_json(job.path());
    let counters = doc["counters"].as_array().unwrap();
    assert!(counters[0]["suspicious"].as_bool().unwrap());
    let se = counters
        .iter()
        .find(|c| c["name"] == "symbol_error" && c["device"] == "mlx5_1")
        .unwrap();
    assert_eq!(se["delta"], 4211);
    assert_eq!(se["nic_used"], true);
    assert_eq!(se["ranks"], serde_json::json!([6, 7]));
    assert!(
        counters.iter().all(|c| c["name"] != "port_rcv_data"),
        "context counters are not listed"
    );
    let fabric = doc["fabric"].as_array().unwrap();
    let down = fabric
        .iter()
        .find(|f| f["host"] == "node003")
        .expect("node003's port is reported");
    assert_eq!(down["kind"], "port_not_active");
    assert_eq!(down["device"], "mlx5_1");
    assert_eq!(down["cause"], "port_degraded");
    assert_eq!(down["file"], "node003/ibstat.txt");
    assert_eq!(down["line"], 15);
    assert_eq!(down["nic_used"], false);
}

/// One before/after pair per counter format, through the whole pipeline.
#[test]
fn before_and_after_pairs_of_every_counter_format() {
    let cases: &[(&str, &str, &str, &str, u64)] = &[
        (
            "sysfs.txt",
            "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:5\n",
            "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:905\n",
            "local_ack_timeout_err",
            900,
        ),
        (
            "perfquery.txt",
            "# Port counters: Lid 7 port 1 (CapMask: 0x1400)\nPortSelect:......................1\nSymbolErrorCounter:..............3\n",
            "# Port counters: Lid 7 port 1 (CapMask: 0x1400)\nPortSelect:......................1\nSymbolErrorCounter:..............65535\n",
            "SymbolErrorCounter",
            65532,
        ),
        (
            "ethtool.txt",
            "NIC statistics:\n     rx_symbol_err_phy: 0\n     link_down_events_phy: 2\n",
            "NIC statistics:\n     rx_symbol_err_phy: 0\n     link_down_events_phy: 7\n",
            "link_down_events_phy",
            5,
        ),
        (
            "rdma.txt",
            "link mlx5_0/1 out_of_sequence -100 rx_write_requests 5\n",
            "link mlx5_0/1 out_of_sequence 50 rx_write_requests 9\n",
            "out_of_sequence",
            150,
        ),
        (
            "mlxlink.txt",
            "Physical Counters and BER Info\n------------------------------\nLink Down Counter                  : 1\n",
            "Physical Counters and BER Info\n------------------------------\nLink Down Counter                  : 3\n",
            "link_down_counter",
            2,
        ),
    ];
    for (file, before, after, name, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &format!("node009/pre/{file}"), before);
        write(dir.path(), &format!("node009/post/{file}"), after);
        let a = common::analyze(dir.path());
        let d = a
            .job
            .counter_deltas
            .iter()
            .find(|d| d.name == *name)
            .unwrap_or_else(|| panic!("{file}: no delta for {name}: {:?}", a.job.counter_deltas));
        assert_eq!(d.delta, Some(*want), "{file}: {d:?}");
        assert_eq!(d.host.as_deref(), Some("node009"), "{file}");
    }
}

#[test]
fn dumps_ordered_by_the_time_in_their_names() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "node004/mlx5_2-20240618-134107.txt",
        &sysfs("mlx5_2", &[("symbol_error", 10)]),
    );
    write(
        dir.path(),
        "node004/mlx5_2-20240618-151500.txt",
        &sysfs("mlx5_2", &[("symbol_error", 2)]),
    );
    let a = common::analyze(dir.path());
    let d = &a.job.counter_deltas[0];
    assert!(d.reset, "{d:?}");
    assert_eq!(d.delta, None);
    let doc = common::analyze_to_json(dir.path());
    let row = &doc["counters"][0];
    assert_eq!(row["suspicious"], false);
    assert!(row["text"].as_str().unwrap().contains("was reset"), "{row}");
}

/// A clean run whose counters rose anyway: the job did not fail, the fabric
/// is degraded, and the ranks behind the port are the stragglers.
#[test]
fn a_finished_job_with_rising_link_errors_is_degraded() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let healthy = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/healthy/mpirun.out");
    write(
        root,
        "mpirun.out",
        &std::fs::read_to_string(healthy).unwrap(),
    );
    write(
        root,
        "node001/counters/before/mlx5_0.txt",
        &sysfs("mlx5_0", &[("symbol_error", 3), ("link_downed", 0)]),
    );
    write(
        root,
        "node001/counters/after/mlx5_0.txt",
        &sysfs("mlx5_0", &[("symbol_error", 9_803), ("link_downed", 2)]),
    );
    let doc = common::analyze_to_json(root);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "degraded", "{v}");
    assert_eq!(v["cause"]["kind"], "link_flap");
    assert_eq!(v["cause"]["host"], "node001");
    assert_eq!(v["cause"]["device"], "mlx5_0");
    assert_eq!(v["collective"], Value::Null);
    // The straggler is the rank behind the erroring NIC: rank 0 receives
    // over mlx5_0 (`via NET/IB/0`); ranks 1 and 2 only talk within node001
    // (`via P2P/CUMEM`), rank 3 sends over mlx5_1.
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]));
}

/// `perfquery` names the port by LID; the host's `ibstat` (Base lid) says
/// which HCA and port that is, so the delta is placed on `mlx5_1`.
#[test]
fn a_perfquery_lid_is_placed_on_the_hca_ibstat_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let ibstat = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 2\n\t\tSM lid: 1\n\t\tLink layer: InfiniBand\n\
                  CA 'mlx5_1'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 3\n\t\tSM lid: 1\n\t\tLink layer: InfiniBand\n";
    write(dir.path(), "node009/ibstat.txt", ibstat);
    let dump = |downed: u32| {
        format!(
            "# Port counters: Lid 3 port 1 (CapMask: 0x1400)\nPortSelect:......................1\nLinkDownedCounter:...............{downed}\n"
        )
    };
    write(dir.path(), "node009/pre/perfquery.txt", &dump(1));
    write(dir.path(), "node009/post/perfquery.txt", &dump(4));
    let a = common::analyze(dir.path());
    let d = a
        .job
        .counter_deltas
        .iter()
        .find(|d| d.name == "LinkDownedCounter")
        .expect("a delta");
    assert_eq!(
        (d.device.as_str(), d.port, d.delta),
        ("mlx5_1", Some(1), Some(3))
    );
}

fn hw_counters(dev: &str, values: &[(&str, u64)]) -> String {
    values
        .iter()
        .map(|(n, v)| format!("/sys/class/infiniband/{dev}/ports/1/hw_counters/{n}:{v}\n"))
        .collect()
}

/// RoCE, NCCL 2.20.5, no channel lines: ranks on node001 and node002 report
/// retry-exceeded completions from 10.9.0.99, an address no log maps. Their
/// ports show requester-side counters (unanswered sends); node003's port
/// shows the receive side of the loss. Its ranks print nothing after init.
fn lossy_receiver_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.4\n");
    for r in 0..12u32 {
        let host = format!("node00{}", r / 4 + 1);
        let ip = format!("10.3.0.{}", 11 + r / 4);
        let (l, pid) = (r % 4, 1000 + r);
        log.push_str(&format!(
            "{r}: {host}:{pid}:{pid} [{l}] NCCL INFO Bootstrap : Using eth0:{ip}<0>\n\
             {r}: {host}:{pid}:{pid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:{ip}<0>\n\
             {r}: {host}:{pid}:{pid} [{l}] NCCL INFO comm 0x55f435cff8b{r} rank {r} nranks 12 cudaDev {l} nvmlDev {l} busId 18000 commId 0x1b7c44e9a03df582 - Init COMPLETE\n"
        ));
    }
    for (r, host, pid) in [(1u32, "node001", 1001u32), (6, "node002", 1006)] {
        log.push_str(&format!(
            "{r}: {host}:{pid}:{} [{}] transport/net_ib.cc:1289 NCCL WARN NET/IB : Got completion from peer 10.9.0.99<56366> with error 12, opcode 0, len 0, vendor err 129\n",
            pid + 50,
            r % 4
        ));
    }
    for r in 0..8u32 {
        log.push_str(&slurm_timeout(r, 3728, "ALLREDUCE"));
    }
    write(root, "slurm-48214.out", &log);
    let requester = |after: u64| {
        [
            ("local_ack_timeout_err", after),
            ("req_transport_retries_exceeded", after / 1000),
        ]
    };
    for host in ["node001", "node002"] {
        let before = hw_counters("mlx5_0", &requester(0));
        let after = hw_counters("mlx5_0", &requester(2000));
        write(root, &format!("{host}/counters/before/sysfs.txt"), &before);
        write(root, &format!("{host}/counters/after/sysfs.txt"), &after);
    }
    let receiver = |n: u64| [("out_of_sequence", n * 50), ("duplicate_request", n)];
    write(
        root,
        "node003/counters/before/sysfs.txt",
        &hw_counters("mlx5_0", &receiver(0)),
    );
    write(
        root,
        "node003/counters/after/sysfs.txt",
        &hw_counters("mlx5_0", &receiver(1000)),
    );
    dir
}

/// Loss shows at both ends of a path: as retries where it was sent and as
/// sequence gaps where it arrived. With no line mapping the victims' peer
/// address, the one host whose port saw the gaps is the peer they lost.
#[test]
fn unanswered_sends_to_an_unmapped_peer_point_at_the_host_that_saw_the_loss() {
    let job = lossy_receiver_job();
    let doc = common::analyze_to_json(job.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "packet_loss", "{cause:#}");
    assert_eq!(cause["host"], "node003", "{cause:#}");
    assert_eq!(cause["device"], "mlx5_0", "{cause:#}");
    let evidence = cause["evidence"].as_array().unwrap();
    let victims: Vec<&str> = evidence
        .iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .unwrap()
                .contains("Got completion from peer")
        })
        .map(|e| e["host"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(victims, ["node001", "node002"], "{cause:#}");
    assert!(cause["confidence"].as_f64().unwrap() >= 0.6, "{cause:#}");
    // Retries exhausted on RoCE could mean a GID that does not route, but
    // such a GID fails the first connection, not collective 3728.
    let alternatives = doc["verdict"]["alternatives"].as_array().unwrap();
    let gid = alternatives
        .iter()
        .find(|a| a["kind"] == "gid_index")
        .expect("the GID reading stays an alternative");
    assert!(gid["confidence"].as_f64().unwrap() < 0.2, "{gid:#}");
    assert_citations_real(job.path(), &doc);
}

/// Two hosts of four GPUs, NIC i under GPU i. Rank 4 (node002, mlx5_0)
/// sends to ranks 0 and 1 of node001; NCCL connected it to rank 1 across
/// rails (rank 1 receives on NET/IB/1). Rank 4's transfer to node001 runs
/// out of retries; node001's mlx5_1 shows the loss on receive.
fn cross_rail_loss_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.4\n");
    for r in 0..8u32 {
        let (host, ip) = if r < 4 {
            ("node001", "10.3.0.11")
        } else {
            ("node002", "10.3.0.12")
        };
        let (l, pid) = (r % 4, 1000 + r);
        log.push_str(&format!(
            "{r}: {host}:{pid}:{pid} [{l}] NCCL INFO Bootstrap : Using ib0:{ip}<0>\n\
             {r}: {host}:{pid}:{pid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:{ip}<0>\n"
        ));
        let links: &[(u32, u32, u32, &str)] = match r {
            0 => &[(0, 4, 0, "receive")],
            1 => &[(1, 4, 1, "receive")],
            4 => &[(0, 0, 0, "send"), (1, 1, 0, "send")],
            _ => &[],
        };
        for &(ch, peer, dev, dir) in links {
            let (src, dst) = if dir == "send" { (r, peer) } else { (peer, r) };
            log.push_str(&format!(
                "{r}: {host}:{pid}:{} [{l}] NCCL INFO Channel 0{ch}/0 : {src}[{}] -> {dst}[{}] [{dir}] via NET/IB/{dev}/GDRDMA\n",
                pid + 50,
                src % 4,
                dst % 4
            ));
        }
    }
    log.push_str("4: node002:1004:1054 [0] transport/net_ib.cc:1556 NCCL WARN NET/IB : Got completion from peer 10.3.0.11<34762> with error 12, opcode 0, len 0, vendor err 129\n");
    for r in 0..4u32 {
        log.push_str(&slurm_timeout(r, 2707, "ALLREDUCE"));
    }
    write(dir.path(), "slurm-48215.out", &log);
    let receiver = |n: u64| [("out_of_sequence", n * 40), ("duplicate_request", n * 3)];
    for (when, n) in [("before", 0), ("after", 1000)] {
        write(
            dir.path(),
            &format!("node001/counters/{when}/sysfs.txt"),
            &hw_counters("mlx5_1", &receiver(n)),
        );
        write(
            dir.path(),
            &format!("node002/counters/{when}/sysfs.txt"),
            &hw_counters("mlx5_0", &[("local_ack_timeout_err", n * 2)]),
        );
    }
    dir
}

/// The victim names the host; its channel lines leave two of that host's
/// NICs, and the rails do not decide between them once a connection
/// crosses rails: the port that saw the loss does.
#[test]
fn a_victims_links_across_rails_leave_the_port_to_the_counters() {
    let job = cross_rail_loss_job();
    let doc = common::analyze_to_json(job.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "packet_loss", "{cause:#}");
    assert_eq!(cause["host"], "node001", "{cause:#}");
    assert_eq!(cause["device"], "mlx5_1", "{cause:#}");
    assert!(
        cause["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["text"]
                .as_str()
                .unwrap()
                .contains("Got completion from peer")),
        "{cause:#}"
    );
    assert_citations_real(job.path(), &doc);
}

/// NCCL 2.20 on RoCE with GID index 0 link-local on every host is a hazard,
/// but a GID that does not route fails connections with errors. A job whose
/// ranks all just timed out in their first collective, with no error
/// anywhere, was not stopped by it: the hazard stays a weak lead.
#[test]
fn a_gid_hazard_everywhere_does_not_explain_a_hang_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.4\n");
    for r in 0..8u32 {
        log.push_str(&slurm_timeout(r, 1, "BROADCAST"));
    }
    write(dir.path(), "slurm-48216.out", &log);
    write(dir.path(), "node001/show_gids.txt", &common::show_gids(11));
    write(dir.path(), "node002/show_gids.txt", &common::show_gids(12));
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    let gid_leads: Vec<f64> = v["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "gid_index")
        .map(|a| a["confidence"].as_f64().unwrap())
        .collect();
    assert!(!gid_leads.is_empty(), "the hazard is still shown: {v:#}");
    assert!(gid_leads.iter().all(|&c| c < 0.2), "{gid_leads:?}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("Weak leads: gid_index (0.10, 2 places)."),
        "{summary}"
    );
}

fn ethtool(values: &[(&str, u64)]) -> String {
    let mut s = String::from("NIC statistics:\n");
    for (name, v) in values {
        s.push_str(&format!("     {name}: {v}\n"));
    }
    s
}

/// RoCE, no channel lines, every rank timed out: node001 and node002 were
/// paused (received PFC pauses), node003 sent the pauses and stormed. A
/// received pause points downstream, so the congestion is node003's.
#[test]
fn received_pauses_point_at_the_one_port_that_sent_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.21.5+cuda12.4\n");
    for r in 0..12u32 {
        log.push_str(&slurm_timeout(r, 14257, "ALLREDUCE"));
    }
    write(dir.path(), "slurm-48217.out", &log);
    for (when, n) in [("before", 0u64), ("after", 1u64)] {
        for host in ["node001", "node002"] {
            let paused = [
                ("rx_prio3_pause", 50_000 + n * 15_000_000),
                ("rx_prio3_pause_duration", 300_000 + n * 1_400_000_000),
            ];
            write(
                dir.path(),
                &format!("{host}/counters/{when}/ethtool-S-enp44s0np0.txt"),
                &ethtool(&paused),
            );
        }
        let sending = [
            ("tx_prio3_pause", 30_000 + n * 58_000_000),
            ("tx_prio3_pause_duration", 200_000 + n * 4_900_000_000),
        ];
        write(
            dir.path(),
            &format!("node003/counters/{when}/ethtool-S-enp44s0np0.txt"),
            &ethtool(&sending),
        );
    }
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "congestion", "{cause:#}");
    assert_eq!(cause["host"], "node003", "{cause:#}");
    assert_eq!(cause["device"], "enp44s0np0", "{cause:#}");
}

/// A Slurm-labelled (`srun --label`) torch 2.x watchdog timeout of `rank`.
fn slurm_timeout(rank: u32, seq: u32, op: &str) -> String {
    format!(
        "{rank}: [rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.\n"
    )
}

/// `ibstat` of a host with four active InfiniBand HCAs, mlx5_0 … mlx5_3.
fn ibstat_four_hcas() -> String {
    (0..4)
        .map(|i| {
            format!(
                "CA 'mlx5_{i}'\n\tCA type: MT4129\n\tFirmware version: 28.39.1002\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: {}\n\t\tSM lid: 334\n\t\tLink layer: InfiniBand\n",
                70 + i
            )
        })
        .collect()
}

/// NCCL_DEBUG=WARN (NCCL 2.20.5, `srun --label`): no line lists a rank's
/// NICs. Rank 7, GPU 3 of node002, cannot bring up its queue pair. With one
/// HCA per GPU on node002, mlx5_3 is the NIC it most likely uses: the
/// verdict names it and says it is a guess.
#[test]
fn a_failing_rank_without_nic_lines_is_placed_on_its_gpus_likely_nic() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.4\n");
    for r in 0..8u32 {
        log.push_str(&format!(
            "{r}: | distributed init (rank {r}): env://, gpu {}\n",
            r % 4
        ));
    }
    log.push_str("7: node002:3298933:3298984 [3] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out\n");
    log.push_str("srun: error: node001: tasks 0-3: Exited with exit code 1\n");
    log.push_str("srun: error: node002: tasks 4-7: Exited with exit code 1\n");
    write(dir.path(), "slurm-48217.out", &log);
    for host in ["node001", "node002"] {
        write(
            dir.path(),
            &format!("{host}/ibstat.txt"),
            &ibstat_four_hcas(),
        );
    }
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "cross_rail", "{cause:#}");
    assert_eq!(cause["host"], "node002", "{cause:#}");
    assert_eq!(cause["device"], "mlx5_3", "{cause:#}");
    assert_eq!(cause["port"], 1, "{cause:#}");
    let guess = cause["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == "node002/ibstat.txt")
        .unwrap_or_else(|| panic!("the NIC's snapshot line is cited: {cause:#}"));
    assert!(
        guess["why"].as_str().unwrap().contains("most likely uses"),
        "{guess:#}"
    );
}

/// NCCL 2.26 prints both ends' GIDs on a queue pair that cannot reach RTR.
/// Three ranks on three hosts report; no channel line says who talks to
/// whom (NCCL_DEBUG=WARN). 10.201.0.8, node003's mlx5_0, is an end of every
/// failure: that NIC is the bad end, the other two are its victims.
#[test]
fn the_address_every_failed_queue_pair_names_is_the_bad_nic_nccl_2_26() {
    let mut log = String::from("0: NCCL version 2.26.2+cuda12.8\n");
    let fail = |task: u32, host: &str, dev: u32, local: &str, remote: &str| {
        format!(
            "{task}: {host}:38423{task}:38424{task} [{dev}] misc/ibvwrap.cc:317 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_{dev}:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:{local}, remote GID ::ffff:{remote}\n"
        )
    };
    log.push_str(&fail(0, "node001", 0, "10.201.0.4", "10.201.0.8"));
    log.push_str(&fail(3, "node002", 1, "10.202.0.7", "10.201.0.8"));
    log.push_str(&fail(4, "node003", 0, "10.201.0.8", "10.202.0.1"));
    for (host, tasks) in [("node001", "0-1"), ("node002", "2-3"), ("node003", "4-5")] {
        log.push_str(&format!(
            "srun: error: {host}: tasks {tasks}: Exited with exit code 1\n"
        ));
    }
    let doc = common::report_of(&[("slurm-48218.out", &log)]);
    let v = &doc["verdict"];
    let cause = &v["cause"];
    assert_eq!(cause["kind"], "cross_rail", "{cause:#}");
    assert_eq!(cause["host"], "node003", "{cause:#}");
    assert_eq!(cause["device"], "mlx5_0", "{cause:#}");
    assert_eq!(cause["port"], 1, "{cause:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([4]), "{v:#}");
}

/// `ibv_devinfo` (rdma-core 28+) of a RoCE host with two HCAs; `mtu0` is
/// mlx5_0's active MTU.
fn ibv_devinfo(mtu0: u32) -> String {
    [("mlx5_0", mtu0), ("mlx5_1", 4096)]
        .iter()
        .map(|(dev, mtu)| {
            let code = if *mtu == 4096 { 5 } else { 3 };
            format!(
                "hca_id:\t{dev}\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{mtu} ({code})\n\t\t\tsm_lid:\t\t\t0\n\t\t\tport_lid:\t\t0\n\t\t\tlink_layer:\t\tEthernet\n\n"
            )
        })
        .collect()
}

/// Two hosts, NCCL_DEBUG=WARN (NCCL 2.19.3): node001's ranks go silent
/// while node002's time out; rank 0's sends to an address no log maps ran
/// out of retries, as node001's mlx5_0 counters show. Of two hosts
/// the sends went to the other one, whose mlx5_0 has an MTU of 1024 where
/// the fabric has 4096: the loss is the MTU's, on node002, not node001's.
#[test]
fn unanswered_sends_between_two_hosts_point_at_the_other_hosts_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.19.3+cuda12.2\n");
    log.push_str("0: node001:2880775:2880898 [0] transport/net_ib.cc:1556 NCCL WARN NET/IB : Got completion from peer 10.199.0.2<44567> with error 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.201.0.1 remoteGid ::ffff:10.201.0.2\n");
    for r in 4..8u32 {
        log.push_str(&slurm_timeout(r, 7050, "ALLREDUCE"));
    }
    log.push_str("srun: error: node001: tasks 0-3: Aborted (core dumped)\n");
    log.push_str("srun: error: node002: tasks 4-7: Aborted (core dumped)\n");
    write(dir.path(), "slurm-48219.out", &log);
    for (host, mtu) in [("node001", 4096), ("node002", 1024)] {
        write(
            dir.path(),
            &format!("{host}/ibv_devinfo.txt"),
            &ibv_devinfo(mtu),
        );
    }
    write_sender_retries(dir.path(), "node001");
    let doc = common::analyze_to_json(dir.path());
    assert_small_mtu_verdict(&doc, "node002", "node001/counters/after/sysfs-counters.txt");
}

/// A sender's unanswered-send counters on its mlx5_0: ACK timeouts, then
/// transport retries exhausted.
fn write_sender_retries(root: &Path, host: &str) {
    for (when, n) in [("before", 0u64), ("after", 1)] {
        let retries = [
            ("local_ack_timeout_err", 680 * n),
            ("req_transport_retries_exceeded", n),
        ];
        let text = hw_counters("mlx5_0", &retries);
        write(
            root,
            &format!("{host}/counters/{when}/sysfs-counters.txt"),
            &text,
        );
    }
}

/// The verdict is `host`'s mlx5_0 MTU, and the senders' file `backing`
/// (their counters, or their completion errors) backs it.
fn assert_small_mtu_verdict(doc: &Value, host: &str, backing: &str) {
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "mtu_mismatch", "{cause:#}");
    assert_eq!(cause["host"], host, "{cause:#}");
    assert_eq!(cause["device"], "mlx5_0", "{cause:#}");
    let cited: Vec<&str> = cause["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    assert!(
        cited.contains(&backing),
        "the senders' retries corroborate: {cited:?}"
    );
}

/// Four hosts, NCCL_DEBUG=WARN (NCCL 2.19.3): ranks on node001 and node003
/// report sends to the same address no log maps running out of retries, as
/// their mlx5_0 counters show; node004's mlx5_0 has an MTU of 1024 where
/// the fabric has 4096 and no counter of its own rose. The sends were lost
/// on the way into that port: the verdict is its MTU, not a sender's port.
#[test]
fn unanswered_sends_to_an_unmapped_peer_point_at_the_one_port_with_a_small_mtu() {
    let dir = small_mtu_job();
    for host in ["node001", "node003"] {
        write_sender_retries(dir.path(), host);
    }
    let doc = common::analyze_to_json(dir.path());
    assert_small_mtu_verdict(&doc, "node004", "node001/counters/after/sysfs-counters.txt");
}

/// The same job with no counter dumps: the victims' completion errors alone
/// point at the small MTU.
#[test]
fn victims_sends_to_an_unmapped_peer_back_the_one_port_with_a_small_mtu() {
    let dir = small_mtu_job();
    let doc = common::analyze_to_json(dir.path());
    assert_small_mtu_verdict(&doc, "node004", "slurm-48220.out");
}

/// Four hosts of four ranks, NCCL 2.19.3 at WARN: ranks 0 (node001) and 8
/// (node003) report retry-exceeded completions from 10.199.0.4, which no
/// log maps; every other rank times out; node004's mlx5_0 runs MTU 1024.
fn small_mtu_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.19.3+cuda12.2\n");
    for (r, host) in [(0u32, "node001"), (8, "node003")] {
        log.push_str(&format!("{r}: {host}:28807{r}:28808{r} [0] transport/net_ib.cc:1556 NCCL WARN NET/IB : Got completion from peer 10.199.0.4<44567> with error 12, opcode 0, len 0, vendor err 129\n"));
    }
    for r in (1..16u32).filter(|r| *r != 8) {
        log.push_str(&slurm_timeout(r, 7050, "ALLREDUCE"));
    }
    write(dir.path(), "slurm-48220.out", &log);
    for host in ["node001", "node002", "node003", "node004"] {
        let mtu = if host == "node004" { 1024 } else { 4096 };
        write(
            dir.path(),
            &format!("{host}/ibv_devinfo.txt"),
            &ibv_devinfo(mtu),
        );
    }
    dir
}

/// NCCL_DEBUG=WARN under `srun --label`, no snapshots: every rank timed out
/// and node002's mlx5_3 saw packets out of sequence. The hw_counters dumps
/// show each host's four RDMA devices, one per GPU, so local rank 3 of
/// node002 (rank 7) is the rank most likely on that port.
#[test]
fn counter_dumps_alone_tie_a_lossy_port_to_its_likely_rank() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.19.3+cuda12.2\n");
    for r in 0..8u32 {
        log.push_str(&slurm_timeout(r, 205, "ALLREDUCE"));
    }
    log.push_str("srun: error: node001: tasks 0-3: Aborted (core dumped)\n");
    log.push_str("srun: error: node002: tasks 4-7: Aborted (core dumped)\n");
    write(dir.path(), "slurm-48220.out", &log);
    for (when, n) in [("before", 0u64), ("after", 1)] {
        for host in ["node001", "node002"] {
            let text: String = (0..4)
                .map(|d| {
                    let lost = if host == "node002" && d == 3 {
                        7616 * n
                    } else {
                        0
                    };
                    hw_counters(&format!("mlx5_{d}"), &[("out_of_sequence", lost)])
                })
                .collect();
            write(
                dir.path(),
                &format!("{host}/counters/{when}/sysfs-counters.txt"),
                &text,
            );
        }
    }
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "packet_loss", "{v:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
    assert_eq!(v["cause"]["device"], "mlx5_3", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([7]), "{v:#}");
}

/// `text` as each of node002's ranks (4–7 of `slurm_log`) prints it, from
/// its async-event thread.
fn on_node002(text: &str) -> String {
    (4..8u32)
        .map(|r| {
            format!(
                "{r}: node002:{}:{} [{}] {text}\n",
                1000 + r,
                2100 + r,
                r % 4
            )
        })
        .collect()
}

/// Every process prints the async events of every NIC on its host (NCCL
/// starts an event thread per device it finds, used or not). Before 2.20
/// the line names no device, so the ranks that printed it are not the
/// culprits: rank 6, whose own sends failed, is.
#[test]
fn an_async_event_every_rank_of_a_host_printed_blames_none_of_them_nccl_2_18() {
    let mut log = slurm_log().replace("2.20.5", "2.18.3");
    log.push_str(&on_node002(
        "transport/net_ib.cc:86 NCCL WARN NET/IB : Got async event : port error",
    ));
    log.push_str("6: node002:1006:2206 [2] transport/net_ib.cc:1418 NCCL WARN NET/IB : Got completion from peer 10.3.0.11<57751> with error 12, opcode 0, len 0, vendor err 129 (Send)\n");
    let doc = common::report_of(&[("slurm-48213.out", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6]), "{v:#}");
}

/// From 2.20 the line names its device: the ranks that use it are the
/// cause's, not every rank that printed it.
#[test]
fn an_async_event_every_rank_printed_is_placed_on_its_devices_users_nccl_2_20() {
    let mut log = slurm_log();
    log.push_str(&on_node002(
        "transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_1:1 Got async event : port error",
    ));
    let doc = common::report_of(&[("slurm-48213.out", &log)]);
    let v = &doc["verdict"];
    let alternatives = v["alternatives"].as_array().unwrap().iter();
    let flap = std::iter::once(&v["cause"])
        .chain(alternatives)
        .find(|c| c["kind"] == "link_flap")
        .unwrap_or_else(|| panic!("no link_flap: {v:#}"));
    assert_eq!(flap["device"], "mlx5_1");
    assert_eq!(flap["ranks"], serde_json::json!([6, 7]), "{flap:#}");
}

/// One sysfs dump per host, taken after the hang only: the values are
/// totals since the driver loaded, so nothing is blamed on them and the
/// report says a second dump would give deltas.
#[test]
fn counters_read_once_give_no_verdict_and_ask_for_a_second_dump() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    common::write(root, "slurm-48213.out", &slurm_log());
    for host in ["node001", "node002"] {
        let errors = if host == "node002" { 4212 } else { 0 };
        common::write(
            root,
            &format!("{host}/counters.txt"),
            &sysfs(
                "mlx5_0",
                &[
                    ("symbol_error", errors),
                    ("link_downed", 3),
                    ("port_rcv_errors", errors),
                ],
            ),
        );
    }
    let doc = common::analyze_to_json(root);
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("NIC counters from one dump only")),
        "{notes:#?}"
    );
    assert!(
        doc["counters"].as_array().unwrap().is_empty(),
        "{:#}",
        doc["counters"]
    );
}

/// NVIDIA/nccl#2157's shape, NCCL 2.29+: IB resiliency marks a NIC of the
/// connection failed and moves its queue pairs: a link went down on that
/// host. The summary reads well without a device name.
#[test]
fn ib_resiliency_marking_a_device_failed_is_a_link_on_that_host_nccl_2_29() {
    let dir = tempfile::tempdir().unwrap();
    common::write(
        dir.path(),
        "GPU-606-sender.log",
        "[2026-05-04 19:55:27] GPU-606:534134:535429 [1] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: ncclIbResiliencyHandleDeviceFailure: Device 0 marked as failed. Initiating recovery? Yes (send comm=0x7f03e8086000, outstandingRecovery=0)\n",
    );
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "link_flap", "{cause:#}");
    assert_eq!(cause["host"], "GPU-606", "{cause:#}");
    assert!(
        !cause["summary"].as_str().unwrap().contains('?'),
        "{cause:#}"
    );
}

/// NVIDIA/nccl#394's shape (NCCL ≤2.19 async-event format, mpirun `node01: `
/// prefixes): the port's GID table changed under the running job, then the
/// host's queue pairs stopped completing (status 12). The address change
/// moved the GID NCCL's index names; retries exhausted are its consequence,
/// not lossy links. A GID change on a host without failed completions blames
/// nothing (the second job).
#[test]
fn a_gid_table_change_before_failed_completions_is_a_gid_index_lead_nccl_2_19() {
    let h = "VM-0-14-centos";
    let change = |pid: u32| {
        format!(
            "node01: {h}:{pid}:196 [0] transport/net_ib.cc:73 NCCL WARN NET/IB : Got async event : GID table change\nnode01:\n"
        )
    };
    let failed = |pid: u32| {
        format!(
            "node01: {h}:{pid}:593 [0] transport/net_ib.cc:816 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 32633, vendor err 129\nnode01: {h}:{pid}:593 [0] NCCL INFO include/net.h:28 -> 2\nnode01: {h}:{pid}:593 [0] NCCL INFO transport/net.cc:295 -> 2\nnode01: {h}:{pid}:593 [0] NCCL INFO transport.cc:179 -> 2 [Proxy Thread]\n"
        )
    };
    let doc = common::report_of(&[(
        "node01.log",
        &(change(106) + &change(107) + &failed(108) + &failed(109)),
    )]);
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "gid_index", "{cause:#}");
    assert_eq!(cause["host"], h, "{cause:#}");

    let calm = tempfile::tempdir().unwrap();
    let other = failed(108).replace(h, "VM-0-15-centos");
    write(calm.path(), "node01.log", &(change(106) + &other));
    let doc = common::analyze_to_json(calm.path());
    assert_ne!(doc["verdict"]["cause"]["kind"], "gid_index", "{doc:#}");
}

/// rccl#1423's shape: `rdma link` run again and again on one host, the
/// port cycling Down/Polling → Down/LinkUp → Active. One file, in order: the
/// link went down and came back, a flap. The same two states in before and
/// after snapshots say so too; in two files of no known phase they may have
/// been taken in either order, and say nothing of the kind.
#[test]
fn a_port_seen_down_then_active_again_is_a_flap_iproute2_rdma_link() {
    let down = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state DOWN physical_state POLLING\n";
    let up = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP\n";
    let came_back = |files: &[(&str, &str)]| {
        let doc = common::report_of(files);
        doc["fabric"].as_array().unwrap().iter().any(|f| {
            f["kind"] == "link_came_back" && f["device"] == "mlx5_7" && f["cause"] == "link_flap"
        })
    };
    let rerun = format!(
        "{down}link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state DOWN physical_state LINK_UP\n{up}"
    );
    assert!(came_back(&[("node7/rdma_link.txt", &rerun)]));
    let doc = common::report_of(&[("node7/rdma_link.txt", &rerun)]);
    assert_eq!(
        doc["verdict"]["cause"]["kind"], "link_flap",
        "{:#}",
        doc["verdict"]
    );
    assert_eq!(doc["verdict"]["cause"]["device"], "mlx5_7");
    assert!(came_back(&[
        ("node7/before/rdma_link.txt", down),
        ("node7/after/rdma_link.txt", up)
    ]));
    assert!(!came_back(&[
        ("node7/rdma_link_a.txt", down),
        ("node7/rdma_link_b.txt", up)
    ]));
    // Active, then down: not back; the port is down (another finding).
    assert!(!came_back(&[(
        "node7/rdma_link.txt",
        &format!("{up}{down}")
    )]));
}

/// NCCL 2.14 (torch 1.13, torchrun per host): mid-run the subnet manager
/// asks every client to re-register, and every process prints NCCL's WARN
/// of the async event at the same second; training goes on and finishes
/// (`done` on every rank, NCCL's communicators destroyed). Housekeeping,
/// not a fault: the run is healthy. A `port error` in its place is not.
#[test]
fn a_subnet_managers_reregistration_is_no_failure_nccl_2_14() {
    let job = |event: &str| {
        let dir = tempfile::tempdir().unwrap();
        for (h, host) in ["n0401", "n0402"].iter().enumerate() {
            let mut log = String::new();
            for l in 0..2u32 {
                let (r, pid) = (h as u32 * 2 + l, 1600 + l);
                log.push_str(&format!("[default{l}]:{host}:{pid}:{pid} [{l}] NCCL INFO comm 0x55{r} rank {r} nranks 4 cudaDev {l} busId {l}1000 - Init COMPLETE\n"));
                log.push_str(&format!("[default{l}]:{host}:{pid}:{} [{l}] transport/net_ib.cc:83 NCCL WARN NET/IB : Got async event : {event}\n", pid + 300));
            }
            for l in 0..2u32 {
                let r = h as u32 * 2 + l;
                log.push_str(&format!(
                    "[default{l}]:2023-05-21 20:55:02,982 INFO rank {r}: done\n"
                ));
                log.push_str(&format!("[default{l}]:{host}:{}:{} [{l}] NCCL INFO comm 0x55{r} rank {r} nranks 4 cudaDev {l} busId {l}1000 - Destroy COMPLETE\n", 1600 + l, 1600 + l));
            }
            write(dir.path(), &format!("logs/{host}.log"), &log);
        }
        common::analyze_to_json(dir.path())
    };
    let doc = job("client reregistration");
    assert_eq!(doc["verdict"]["status"], "healthy", "{:#}", doc["verdict"]);
    let doc = job("port error");
    assert_ne!(doc["verdict"]["status"], "healthy", "{:#}", doc["verdict"]);
}

/// The same fabric counted by mlx5's all-priority counters (`rx_pause_ctrl_phy`,
/// `tx_pause_ctrl_phy`, `tx_pause_storm_warning_events`): received pauses
/// still point at the one port that sent them and stormed.
#[test]
fn pauses_counted_by_mlx5s_ctrl_counters_point_at_the_sender_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("0: NCCL version 2.20.5+cuda12.4\n");
    for r in 0..12u32 {
        log.push_str(&slurm_timeout(r, 107937, "ALLREDUCE"));
    }
    write(dir.path(), "slurm-48218.out", &log);
    for (when, n) in [("before", 0u64), ("after", 1u64)] {
        for host in ["node001", "node002"] {
            write(
                dir.path(),
                &format!("{host}/counters/{when}/ethtool-S-enp156s0np0.txt"),
                &ethtool(&[("rx_pause_ctrl_phy", 40_000 + n * 7_955_000)]),
            );
        }
        let sending = [
            ("tx_pause_ctrl_phy", 30_000 + n * 8_183_754),
            ("tx_pause_storm_warning_events", n * 31),
        ];
        write(
            dir.path(),
            &format!("node003/counters/{when}/ethtool-S-enp156s0np0.txt"),
            &ethtool(&sending),
        );
    }
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "congestion", "{cause:#}");
    assert_eq!(cause["host"], "node003", "{cause:#}");
}
