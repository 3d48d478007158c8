//! `ncclpm simulate`: determinism, where the truth goes, and that each
//! scenario leaves its evidence in the sources (and the line shapes) the
//! format docs say a real occurrence would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use ncclpm::model::CauseKind;
use ncclpm::simulate::{self, Layout, Profile, Scenario, SimOptions, Ver};

fn opts(scenario: Scenario, ranks: u32, seed: u64) -> SimOptions {
    SimOptions {
        scenario,
        ranks,
        seed,
        layout: None,
        nccl_version: None,
        torch_version: None,
        profile: Profile::Small,
    }
}

fn run(o: &SimOptions, dir: &Path) -> Value {
    let done = simulate::simulate(o, dir).unwrap();
    serde_json::to_value(&done.truth).unwrap()
}

/// Every file under `root`, relative path → bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// All text of the files whose path contains `part`.
fn text_of(files: &BTreeMap<String, Vec<u8>>, part: &str) -> String {
    files
        .iter()
        .filter(|(k, _)| k.contains(part))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn same_seed_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, layout) in Layout::ALL.into_iter().enumerate() {
        let mut o = opts(Scenario::Fault(CauseKind::LinkFlap), 16, 77);
        o.layout = Some(layout);
        let (a, b) = (
            tmp.path().join(format!("a{i}")),
            tmp.path().join(format!("b{i}")),
        );
        run(&o, &a);
        run(&o, &b);
        assert_eq!(tree(&a), tree(&b), "{layout:?}");
        assert_eq!(
            std::fs::read(tmp.path().join(format!("a{i}.truth.json"))).unwrap(),
            std::fs::read(tmp.path().join(format!("b{i}.truth.json"))).unwrap()
        );
    }
    let c = tmp.path().join("c");
    run(&opts(Scenario::Fault(CauseKind::LinkFlap), 16, 78), &c);
    assert_ne!(tree(&tmp.path().join("a0")), tree(&c));
}

#[test]
fn truth_sits_beside_the_job_folder_and_names_the_verdict_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("job");
    let truth = run(&opts(Scenario::Fault(CauseKind::RankStalled), 16, 5), &dir);
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("job.truth.json")).unwrap()).unwrap();
    assert_eq!(truth, on_disk);
    assert!(!tree(&dir).keys().any(|k| k.contains("truth")));
    for field in ["status", "stuck_ranks", "collective", "cause"] {
        assert!(truth.get(field).is_some(), "{field}");
    }
    for field in ["kind", "host", "device", "port", "gpu_bus_id", "peer_host"] {
        assert!(truth["cause"].get(field).is_some(), "cause.{field}");
    }
    assert_eq!(truth["status"], "hang");
    assert_eq!(truth["collective"]["pg"], "0");
}

#[test]
fn a_non_empty_folder_or_bad_options_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("x"), "x").unwrap();
    assert!(simulate::simulate(&opts(Scenario::Healthy, 16, 1), tmp.path()).is_err());
    let empty = tmp.path().join("e");
    assert!(simulate::simulate(&opts(Scenario::Healthy, 12, 1), &empty).is_err());
    assert!(simulate::simulate(&opts(Scenario::Healthy, 7, 1), &empty).is_err());
}

/// The culprit host's folder for a truth.
fn culprit(truth: &Value) -> String {
    truth["cause"]["host"].as_str().unwrap().to_string()
}

#[test]
fn link_flap_shows_on_the_port_the_counters_and_the_peers() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in 0..4 {
        let dir = tmp.path().join(format!("j{seed}"));
        let truth = run(&opts(Scenario::Fault(CauseKind::LinkFlap), 16, seed), &dir);
        let files = tree(&dir);
        let host = culprit(&truth);
        let dev = truth["cause"]["device"].as_str().unwrap();
        let kernel = text_of(&files, &format!("{host}/"));
        let roce = truth["fabric"] == "RoCE";
        if roce {
            assert!(kernel.contains(": Link down"), "seed {seed}");
            assert!(kernel.contains(": Link up"), "seed {seed}");
        } else if kernel.contains("Port: 1 Link DOWN") {
            assert!(kernel.contains(&format!("{dev}: Port: 1 Link DOWN")));
        }
        let logs = text_of(&files, "");
        assert!(
            logs.contains("status=12") || logs.contains("with error 12"),
            "seed {seed}"
        );
        assert!(logs.contains("port error"), "seed {seed}");
    }
}

/// NCCL starts an async-event thread for every IB device it finds, in
/// every process: a port error shows in the NCCL output of every rank on
/// the host, not only in that of the rank using the port.
#[test]
fn every_rank_on_the_host_prints_its_nics_async_events() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let dir = tmp.path().join(format!("j{seed}"));
        let mut o = opts(Scenario::Fault(CauseKind::LinkFlap), 16, seed);
        o.layout = Some(Layout::NcclFiles);
        let truth = run(&o, &dir);
        let host = culprit(&truth);
        let files = tree(&dir);
        let nccl_files: Vec<(&String, &Vec<u8>)> = files
            .iter()
            .filter(|(path, _)| path.starts_with(&format!("{host}/nccl.")))
            .collect();
        assert_eq!(nccl_files.len(), 8, "seed {seed}");
        for (path, bytes) in nccl_files {
            let text = String::from_utf8_lossy(bytes);
            assert!(text.contains("port error"), "seed {seed}: {path}");
        }
    }
}

#[test]
fn gpu_fault_names_the_stuck_ranks_gpu_in_an_xid() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let dir = tmp.path().join(format!("j{seed}"));
        let truth = run(&opts(Scenario::Fault(CauseKind::GpuFault), 16, seed), &dir);
        let files = tree(&dir);
        let bus = truth["cause"]["gpu_bus_id"].as_str().unwrap();
        let pci = &bus[..bus.len() - 2];
        let kernel = text_of(&files, &format!("{}/", culprit(&truth)));
        assert!(
            kernel.contains(&format!("NVRM: Xid (PCI:{pci}): ")),
            "seed {seed}"
        );
        // NCCL's busId for the same GPU (hex without separators or zeros).
        let nccl_bus = ncclpm::simulate::plan::nccl_bus_id(bus);
        assert!(text_of(&files, "").contains(&format!("busId {nccl_bus}")));
    }
}

#[test]
fn snapshots_show_the_degraded_port_mtu_and_gids() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (CauseKind::PortDegraded, "ibstat.txt"),
        (CauseKind::MtuMismatch, "ibv_devinfo.txt"),
        (CauseKind::GidIndex, "show_gids.txt"),
    ];
    for (kind, file) in cases {
        let dir = tmp.path().join(kind.name());
        let truth = run(&opts(Scenario::Fault(kind), 16, 3), &dir);
        let files = tree(&dir);
        let dev = truth["cause"]["device"].as_str().unwrap().to_string();
        let snap = text_of(&files, &format!("{}/{file}", culprit(&truth)));
        match kind {
            CauseKind::PortDegraded => {
                let block = snap
                    .split("CA '")
                    .find(|b| b.starts_with(&format!("{dev}'")))
                    .unwrap();
                assert!(!block.contains("State: Active"), "{block}");
            }
            CauseKind::MtuMismatch => {
                let block = snap
                    .split("hca_id:")
                    .find(|b| b.trim_start().starts_with(&format!("{dev}\n")))
                    .unwrap();
                assert!(!block.contains("active_mtu:\t\t4096"), "{block}");
            }
            _ => {
                let rows: Vec<&str> = snap
                    .lines()
                    .filter(|l| l.starts_with(&format!("{dev}\t")))
                    .collect();
                assert_eq!(rows.len(), 2, "only link-local GIDs: {rows:?}");
                let logs = text_of(&files, "");
                assert!(
                    logs.contains("Call to ibv_modify_qp failed with")
                        && logs.contains("Invalid argument")
                );
            }
        }
    }
}

/// The leaf each NIC of a host reaches, in NIC order, from `lldpctl.txt`.
fn leaves(files: &BTreeMap<String, Vec<u8>>, host: &str) -> Vec<String> {
    text_of(files, &format!("{host}/lldpctl.txt"))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("SysName:"))
        .map(|s| s.trim().to_string())
        .collect()
}

/// A cross-rail job's LLDP shows the stray cable: the culprit NIC reaches
/// a leaf another NIC of its host reaches too; every other host reaches
/// one leaf per NIC, the same ones in the same order.
#[test]
fn cross_rail_lldp_shows_the_culprit_nic_on_another_rails_leaf() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let dir = tmp.path().join(format!("j{seed}"));
        let truth = run(&opts(Scenario::Fault(CauseKind::CrossRail), 16, seed), &dir);
        let files = tree(&dir);
        let host = culprit(&truth);
        let dev = truth["cause"]["device"].as_str().unwrap();
        let nic: usize = dev.trim_start_matches("mlx5_").parse().unwrap();
        let mine = leaves(&files, &host);
        assert_eq!(
            mine.iter().filter(|l| **l == mine[nic]).count(),
            2,
            "seed {seed}: {mine:?}"
        );
        let hosts: std::collections::BTreeSet<&str> = files
            .keys()
            .filter_map(|p| p.split_once('/'))
            .map(|(h, _)| h)
            .collect();
        for other in hosts
            .into_iter()
            .filter(|h| *h != host && files.contains_key(&format!("{h}/lldpctl.txt")))
        {
            let theirs = leaves(&files, other);
            let distinct: std::collections::BTreeSet<&String> = theirs.iter().collect();
            assert_eq!(
                distinct.len(),
                theirs.len(),
                "seed {seed}: {other} {theirs:?}"
            );
            assert_ne!(theirs[nic], mine[nic], "seed {seed}");
        }
    }
}

/// A release split's job lists every host's packages: the job's PyTorch
/// and the NCCL wheel it pins, alike on both sides of the split.
#[test]
fn config_mismatch_jobs_list_each_hosts_pytorch_and_its_nccl_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let dir = tmp.path().join(format!("j{seed}"));
        let truth = run(
            &opts(Scenario::Fault(CauseKind::ConfigMismatch), 16, seed),
            &dir,
        );
        let files = tree(&dir);
        let lists: Vec<String> = files
            .keys()
            .filter(|p| p.ends_with("/pip-list.txt"))
            .map(|p| text_of(&files, p))
            .collect();
        assert!(lists.len() >= 2, "seed {seed}");
        let torch = truth["torch_version"].as_str().unwrap();
        let nccl = truth["nccl_version"].as_str().unwrap();
        for list in &lists {
            assert!(
                list.lines()
                    .any(|l| l.starts_with("torch ") && l.ends_with(torch)),
                "{list}"
            );
            assert!(
                list.lines()
                    .any(|l| l.starts_with("nvidia-nccl-cu") && l.ends_with(nccl)),
                "{list}"
            );
        }
    }
}

#[test]
fn line_shapes_follow_the_release() {
    let tmp = tempfile::tempdir().unwrap();
    let c10_stamp = regex::Regex::new(r"\[E\d{3,4} \d\d:\d\d:\d\d\.\d{9} ").unwrap();
    let cases = [
        ("2.1.2", "2.18.6", "[E ProcessGroupNCCL.cpp:", false),
        ("2.3.1", "2.20.5", "[rank", false),
        ("2.7.1", "2.26.2", "[rank", true),
    ];
    for (torch, nccl, c10, warn_stamp) in cases {
        let mut o = opts(Scenario::Fault(CauseKind::PacketLoss), 16, 9);
        o.torch_version = Ver::parse(torch);
        o.nccl_version = Ver::parse(nccl);
        o.layout = Some(Layout::Torchrun);
        let dir = tmp.path().join(torch);
        run(&o, &dir);
        let logs = text_of(&tree(&dir), "logs/");
        let timeout = logs
            .lines()
            .find(|l| l.contains("Watchdog caught collective operation timeout"));
        if let Some(t) = timeout {
            assert!(t.starts_with(c10), "{torch}: {t}");
            let stamped = c10_stamp.is_match(t);
            assert_eq!(stamped, Ver::parse(torch).unwrap().ge(2, 4, 0), "{t}");
        }
        let warn = logs.lines().find(|l| l.contains(" NCCL WARN ")).unwrap();
        assert_eq!(warn.starts_with("[20"), warn_stamp, "{nccl}: {warn}");
        assert!(
            !logs
                .lines()
                .any(|l| l.contains("NCCL INFO") && l.starts_with("[20")),
            "INFO lines carry no time"
        );
        assert!(logs.contains(&format!("NCCL version {nccl}+cuda")));
    }
}

#[test]
fn slurm_labels_are_right_aligned_to_the_widest_task() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = opts(Scenario::Fault(CauseKind::ProcessCrash), 16, 4);
    o.layout = Some(Layout::Slurm);
    let dir = tmp.path().join("s");
    run(&o, &dir);
    let files = tree(&dir);
    let out = text_of(&files, "slurm-");
    assert!(out.lines().any(|l| l.starts_with(" 3: ")));
    assert!(out.lines().any(|l| l.starts_with("15: ")));
    assert!(out.lines().any(|l| l.starts_with("srun: error: ")));
}

#[test]
fn hosts_clocks_are_skewed_within_thirty_seconds() {
    let p = simulate::Plan::build(&opts(Scenario::Healthy, 512, 8));
    assert!(p.hosts.iter().all(|h| h.skew.abs() <= 30_000_000));
    assert!(p.hosts.iter().any(|h| h.skew != 0));
}

fn ncclpm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ncclpm"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_writes_the_job_and_its_truth_and_refuses_bad_options() {
    let tmp = tempfile::tempdir().unwrap();
    let out: PathBuf = tmp.path().join("job");
    let o = ncclpm(&[
        "simulate",
        "--cause",
        "memlock",
        "--ranks",
        "8",
        "--seed",
        "3",
        "--profile",
        "small",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("truth:"));
    assert!(tmp.path().join("job.truth.json").is_file());
    for bad in [
        vec!["simulate", "--cause", "nope", "x"],
        vec!["simulate", "--cause", "unknown", "x"],
        vec!["simulate", "--cause", "healthy", "--ranks", "12", "x"],
        vec!["simulate", "--cause", "healthy", "--layout", "mpi", "x"],
        vec![
            "simulate",
            "--cause",
            "healthy",
            "--nccl-version",
            "two",
            "x",
        ],
    ] {
        assert_eq!(ncclpm(&bad).status.code(), Some(2), "{bad:?}");
    }
}

/// The distinct `(address, port)` pairs NCCL's connect warnings name.
fn dialled(files: &BTreeMap<String, Vec<u8>>) -> std::collections::BTreeSet<(String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for text in files.values().map(|v| String::from_utf8_lossy(v)) {
        for part in text.split("onnect to ").skip(1) {
            if let Some((addr, rest)) = part.split_once('<') {
                let port = rest.split('>').next().unwrap_or("");
                out.insert((addr.to_string(), port.to_string()));
            }
        }
    }
    out
}

/// NCCL 2.17's root hands out ring neighbours in rank order and stops at
/// the first rank it cannot reach; that rank's predecessor fails its own
/// connect to it. A firewalled host other than the root's shows as two
/// connects to its address (the root's, the predecessor's), each to a
/// port of its own; on the root's host, every other host's ranks fail to
/// reach the root's one port.
#[test]
fn an_unreachable_host_shows_the_roots_first_failure_and_its_ring_predecessors() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut elsewhere, mut at_root) = (0, 0);
    for seed in 0..12 {
        let dir = tmp.path().join(format!("j{seed}"));
        let mut o = opts(Scenario::Fault(CauseKind::Firewall), 32, seed);
        // The last release before 2.18 dropped the address of a refused one.
        o.nccl_version = Ver::parse("2.17.1");
        let truth = run(&o, &dir);
        let pairs = dialled(&tree(&dir));
        let addrs: std::collections::BTreeSet<_> = pairs.iter().map(|p| &p.0).collect();
        assert_eq!(addrs.len(), 1, "seed {seed}: {pairs:?}");
        let stuck = truth["stuck_ranks"].as_array().unwrap();
        if stuck[0] == 0 {
            at_root += 1;
            assert_eq!(pairs.len(), 1, "seed {seed}: one root port");
        } else {
            elsewhere += 1;
            assert_eq!(pairs.len(), 2, "seed {seed}: root and predecessor");
        }
    }
    assert!(elsewhere > 0 && at_root > 0, "{elsewhere} {at_root}");
}
