//! Dumps collected into one folder, each file named after its host
//! (`node005-ibstat.txt`, `perfquery_node005_after.txt`, …): the host a
//! counter, port or GID row belongs to comes from the job host its file's
//! name spells, whichever way the collection script joined the words.
//! Dumps shown together by `tail -n +1` (`==> before/… <==` over each) are
//! read as the files their headers name. A folder named by the host's FQDN
//! (`hostname -f`) and an archive per host (`node005.tar.gz`) name the host
//! as NCCL prints it, and so does a host's console saved under its name.
//! A folder named by an address belongs to the host whose NCCL lines use it.

use std::fs;
use std::path::Path;

use serde_json::Value;

use ncclpm::model::CauseKind;
use ncclpm::simulate::{self, Layout, Profile, Scenario, SimOptions};

mod common;

/// Where a collection script puts the host in a dump's name in a shared folder.
#[derive(Clone, Copy, Debug)]
enum HostIn {
    /// `h100-r00-n016-perfquery-after.txt`
    First,
    /// `after_perfquery.h100-r00-n016.txt`
    AfterDot,
    /// `perfquery_h100-r00-n016_after.txt`
    BetweenUnderscores,
}

fn flat_name(naming: HostIn, host: &str, phase: Option<&str>, file: &str) -> String {
    let (stem, ext) = file.rsplit_once('.').unwrap_or((file, "txt"));
    match (naming, phase) {
        (HostIn::First, Some(p)) => format!("{host}-{stem}-{p}.{ext}"),
        (HostIn::First, None) => format!("{host}-{stem}.{ext}"),
        (HostIn::AfterDot, Some(p)) => format!("{p}_{stem}.{host}.{ext}"),
        (HostIn::AfterDot, None) => format!("{stem}.{host}.{ext}"),
        (HostIn::BetweenUnderscores, Some(p)) => format!("{stem}_{host}_{p}.{ext}"),
        (HostIn::BetweenUnderscores, None) => format!("{stem}_{host}.{ext}"),
    }
}

/// Simulates a [`slurm_job`], then moves every dump into `sys/`.
fn flat_job(scenario: Scenario, seed: u64, naming: HostIn, dir: &Path) -> Value {
    let truth = slurm_job(scenario, seed, dir);
    let hosts = host_folders(dir);
    let flat = dir.join("sys");
    fs::create_dir_all(&flat).unwrap();
    for (host, name) in hosts {
        move_dumps(&host, &name, None, naming, &flat);
        fs::remove_dir_all(&host).unwrap();
    }
    truth
}

/// A 16-rank job whose logs sit in one Slurm output and whose system
/// dumps sit in `<host>/…`.
fn slurm_job(scenario: Scenario, seed: u64, dir: &Path) -> Value {
    let truth = simulated(
        SeededScenario { scenario, seed },
        Layout::Slurm,
        Profile::Small,
        dir,
    );
    assert_eq!(
        truth["sources"]["counters"], true,
        "this seed writes counters"
    );
    assert_eq!(truth["sources"]["snapshots"], true, "and snapshots");
    truth
}

/// The folders directly under `dir`, with their names, in name order.
fn host_folders(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            (p, name)
        })
        .collect();
    out.sort();
    out
}

/// A scenario and the seed that draws its job.
struct SeededScenario {
    scenario: Scenario,
    seed: u64,
}

/// Simulates a 16-rank job into `dir` and returns its truth.
fn simulated(job: SeededScenario, layout: Layout, profile: Profile, dir: &Path) -> Value {
    let opts = SimOptions {
        scenario: job.scenario,
        ranks: 16,
        seed: job.seed,
        layout: Some(layout),
        nccl_version: None,
        torch_version: None,
        profile,
    };
    serde_json::to_value(&simulate::simulate(&opts, dir).unwrap().truth).unwrap()
}

fn move_dumps(dir: &Path, host: &str, phase: Option<&str>, naming: HostIn, flat: &Path) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            let named = matches!(file.as_str(), "before" | "after").then_some(file.as_str());
            move_dumps(&path, host, named.or(phase), naming, flat);
        } else {
            fs::rename(&path, flat.join(flat_name(naming, host, phase, &file))).unwrap();
        }
    }
}

fn assert_cause_placed(scenario: Scenario, seed: u64) {
    for naming in [HostIn::First, HostIn::AfterDot, HostIn::BetweenUnderscores] {
        let tmp = tempfile::tempdir().unwrap();
        let truth = flat_job(scenario, seed, naming, tmp.path());
        let report = common::analyze_to_json(tmp.path());
        let (want, got) = (&truth["cause"], &report["verdict"]["cause"]);
        for field in ["kind", "host", "device", "port"] {
            assert_eq!(got[field], want[field], "{naming:?} {field}: {got}");
        }
        assert_eq!(
            report["verdict"]["stuck_ranks"], truth["stuck_ranks"],
            "{naming:?}"
        );
        let placed = report["counters"].as_array().unwrap();
        assert!(
            placed.iter().all(|c| c["host"].is_string()),
            "{naming:?}: every counter delta has its host"
        );
    }
}

#[test]
fn congestion_counters_named_by_their_files_find_their_host() {
    assert_cause_placed(Scenario::Fault(CauseKind::Congestion), 4);
}

#[test]
fn an_mtu_mismatch_in_a_snapshot_named_by_its_file_finds_its_host() {
    assert_cause_placed(Scenario::Fault(CauseKind::MtuMismatch), 5);
}

/// What `cd <host>/counters && tail -n +1 before/* after/*` prints.
fn tail_capture(counters: &Path) -> String {
    let mut out = String::new();
    for phase in ["before", "after"] {
        let mut files: Vec<_> = fs::read_dir(counters.join(phase))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_str().unwrap();
            out.push_str(&format!("==> {phase}/{name} <==\n"));
            out.push_str(&fs::read_to_string(&f).unwrap());
            out.push('\n');
        }
    }
    out
}

#[test]
fn counters_shown_together_by_tail_keep_each_dump_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let truth = slurm_job(Scenario::Fault(CauseKind::Congestion), 4, tmp.path());
    for host in fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()) {
        let counters = host.join("counters");
        if counters.is_dir() {
            fs::write(host.join("counters.txt"), tail_capture(&counters)).unwrap();
            fs::remove_dir_all(&counters).unwrap();
        }
    }
    let report = common::analyze_to_json(tmp.path());
    let (want, got) = (&truth["cause"], &report["verdict"]["cause"]);
    for field in ["kind", "host", "device", "port"] {
        assert_eq!(got[field], want[field], "{field}: {got}");
    }
    let cited = report["counters"].as_array().unwrap();
    assert!(!cited.is_empty());
    assert!(
        cited
            .iter()
            .all(|c| c["file"].as_str().unwrap().ends_with("/counters.txt"))
    );
}

/// The folders of a [`slurm_job`], renamed by `rename(host)`.
fn rename_host_folders(dir: &Path, rename: impl Fn(&str) -> String) {
    for (host, name) in host_folders(dir) {
        fs::rename(&host, dir.join(rename(&name))).unwrap();
    }
}

fn assert_placed_as_truth(truth: &Value, report: &Value) {
    let (want, got) = (&truth["cause"], &report["verdict"]["cause"]);
    for field in ["kind", "host", "device", "port"] {
        assert_eq!(got[field], want[field], "{field}: {got}");
    }
}

#[test]
fn folders_named_by_fqdn_hold_the_short_hosts_dumps() {
    let tmp = tempfile::tempdir().unwrap();
    let truth = slurm_job(Scenario::Fault(CauseKind::Congestion), 4, tmp.path());
    rename_host_folders(tmp.path(), |h| format!("{h}.cluster.example.com"));
    let report = common::analyze_to_json(tmp.path());
    assert_placed_as_truth(&truth, &report);
}

#[test]
fn an_archive_per_host_holds_that_hosts_dumps() {
    let tmp = tempfile::tempdir().unwrap();
    let truth = slurm_job(Scenario::Fault(CauseKind::MtuMismatch), 5, tmp.path());
    for (host, name) in host_folders(tmp.path()) {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        tar.append_dir_all(".", &host).unwrap();
        let bytes = tar.into_inner().unwrap().finish().unwrap();
        fs::write(tmp.path().join(format!("{name}.tar.gz")), bytes).unwrap();
        fs::remove_dir_all(&host).unwrap();
    }
    let report = common::analyze_to_json(tmp.path());
    assert_placed_as_truth(&truth, &report);
}

/// torchrun's console tee'd to one file per host at the job's root
/// (`torchrun … 2>&1 | tee $(hostname).log`): the agent's lines, then each
/// worker's under its `[defaultN]:` prefix, instead of `--log-dir` folders.
fn tee_consoles(dir: &Path) {
    for host in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        let logs = host.join("logs");
        if !logs.is_dir() {
            continue;
        }
        let mut console = fs::read_to_string(host.join("agent.log")).unwrap_or_default();
        fs::remove_file(host.join("agent.log")).ok();
        let mut workers: Vec<(u32, std::path::PathBuf)> = Vec::new();
        let mut stack = vec![logs.clone()];
        while let Some(d) = stack.pop() {
            for p in fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(local) = d.file_name().unwrap().to_str().unwrap().parse() {
                    workers.push((local, p));
                }
            }
        }
        workers.sort();
        for (local, file) in workers {
            for line in fs::read_to_string(&file).unwrap().lines() {
                console.push_str(&format!("[default{local}]:{line}\n"));
            }
        }
        fs::remove_dir_all(&logs).unwrap();
        let name = host.file_name().unwrap().to_str().unwrap();
        fs::write(dir.join(format!("{name}.log")), console).unwrap();
    }
}

#[test]
fn a_hosts_console_named_after_it_holds_that_hosts_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let job = SeededScenario {
        scenario: Scenario::Fault(CauseKind::Memlock),
        seed: 35001,
    };
    let truth = simulated(job, Layout::Torchrun, Profile::Small, tmp.path());
    tee_consoles(tmp.path());
    let report = common::analyze_to_json(tmp.path());
    let v = &report["verdict"];
    assert_eq!(v["cause"]["kind"], truth["cause"]["kind"], "{v}");
    assert_eq!(v["cause"]["host"], truth["cause"]["host"], "{v}");
    assert_eq!(v["stuck_ranks"], truth["stuck_ranks"], "{v}");
}

#[test]
fn dumps_taken_one_after_another_into_one_file_pair_by_their_dates() {
    let tmp = tempfile::tempdir().unwrap();
    let truth = slurm_job(Scenario::Fault(CauseKind::Congestion), 4, tmp.path());
    for host in fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()) {
        let counters = host.join("counters");
        if !counters.is_dir() {
            continue;
        }
        // `for t in before after; do date; ethtool -S …; done >> ethtool-S-….txt`
        for dump in fs::read_dir(counters.join("before")).unwrap() {
            let name = dump.unwrap().file_name();
            let mut both = String::new();
            for (phase, date) in [
                ("before", "Tue Dec  1 08:00:00 UTC 2026"),
                ("after", "Tue Dec  1 09:30:07 UTC 2026"),
            ] {
                both.push_str(&format!("{date}\n"));
                both.push_str(&fs::read_to_string(counters.join(phase).join(&name)).unwrap());
            }
            fs::write(host.join(&name), both).unwrap();
        }
        fs::remove_dir_all(&counters).unwrap();
    }
    let report = common::analyze_to_json(tmp.path());
    assert_placed_as_truth(&truth, &report);
    assert!(!report["counters"].as_array().unwrap().is_empty());
}

/// The address a host's NCCL lines bootstrap from (`Bootstrap : Using
/// bond0:10.67.0.2<0>`), read from any file under `host`.
fn bootstrap_address(host: &Path) -> Option<String> {
    let mut stack = vec![host.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for p in fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let text = String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned();
            if let Some(at) = text.find("Bootstrap : Using ") {
                let rest = &text[at..];
                let addr = rest.split(':').nth(2)?.split('<').next()?;
                return Some(addr.to_string());
            }
        }
    }
    None
}

#[test]
fn folders_named_by_address_belong_to_the_host_that_bootstraps_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let job = SeededScenario {
        scenario: Scenario::Fault(CauseKind::MtuMismatch),
        seed: 5,
    };
    let truth = simulated(job, Layout::Torchrun, Profile::Full, tmp.path());
    assert_eq!(
        truth["sources"]["snapshots"], true,
        "this seed writes snapshots"
    );
    rename_host_folders(tmp.path(), |h| {
        bootstrap_address(&tmp.path().join(h)).expect("NCCL INFO names the address")
    });
    let report = common::analyze_to_json(tmp.path());
    assert_placed_as_truth(&truth, &report);
    assert_eq!(report["verdict"]["stuck_ranks"], truth["stuck_ranks"]);
}

#[test]
fn folders_named_after_a_host_with_a_word_joined_belong_to_that_host() {
    let tmp = tempfile::tempdir().unwrap();
    let truth = slurm_job(Scenario::Fault(CauseKind::MtuMismatch), 5, tmp.path());
    // `counters-node005/before/…` and `sys-node005/ibstat.txt`.
    for (host, name) in host_folders(tmp.path()) {
        fs::rename(
            host.join("counters"),
            tmp.path().join(format!("counters-{name}")),
        )
        .unwrap();
        fs::rename(&host, tmp.path().join(format!("sys-{name}"))).unwrap();
    }
    let report = common::analyze_to_json(tmp.path());
    assert_placed_as_truth(&truth, &report);
    let hosts = report["job"]["hosts"].as_array().unwrap();
    assert!(
        hosts
            .iter()
            .all(|h| !h.as_str().unwrap().starts_with("sys-")),
        "{hosts:?}"
    );
}
