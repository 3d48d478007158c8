//! `ncclpm batch` and `ncclpm merge` over a folder of jobs: folders,
//! archives and a corrupt one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ncclpm(args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ncclpm"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples")
}

/// A root of seven jobs: four samples, a second copy of the IB one (a repeat
/// offender), the crash sample as a .tar.gz, and a corrupt archive.
fn make_root(root: &Path) {
    for name in [
        "stalled-compute",
        "ib-retry-exceeded",
        "rank-crash",
        "healthy",
    ] {
        copy_tree(&samples().join(name), &root.join(name));
    }
    copy_tree(&samples().join("ib-retry-exceeded"), &root.join("ib-again"));
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    tar.append_dir_all(".", samples().join("rank-crash"))
        .unwrap();
    let gz = tar.into_inner().unwrap().finish().unwrap();
    std::fs::write(root.join("crash-again.tar.gz"), gz).unwrap();
    let mut bad = std::fs::File::create(root.join("corrupt.tar.gz")).unwrap();
    bad.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 9, 9, 9])
        .unwrap();
}

fn rows(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("summary.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn batch_writes_reports_an_index_and_the_repeat_offenders() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, out) = (tmp.path().join("root"), tmp.path().join("out"));
    make_root(&root);
    let (code, text) = ncclpm(&[
        "batch",
        root.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(
        code, 2,
        "a job that cannot be analysed makes the batch exit 2: {text}"
    );
    let rows = rows(&out);
    assert_eq!(rows.len(), 7);
    let by_id = |id: &str| rows.iter().find(|r| r["job_id"] == id).unwrap().clone();
    assert!(
        by_id("corrupt")["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty())
    );
    assert_eq!(by_id("crash-again")["cause"], "process_crash");
    assert_eq!(by_id("crash-again")["stuck_ranks"], serde_json::json!([5]));
    assert_eq!(by_id("ib-again")["device"], "mlx5_0");
    assert!(out.join("jobs/stalled-compute/report.html").is_file());
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("href=\"jobs/ib-again/report.html\""));
    let fleet: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fleet.json")).unwrap()).unwrap();
    let offenders = fleet["offenders"].as_array().unwrap();
    let nic = offenders
        .iter()
        .find(|o| o["key"] == "node002 mlx5_0 port 1")
        .expect("the NIC both IB jobs blame");
    assert_eq!(
        nic["jobs"],
        serde_json::json!(["ib-again", "ib-retry-exceeded"])
    );
    let gpu = offenders
        .iter()
        .find(|o| o["kind"] == "gpu" && o["key"] == "node002 GPU 0000:3b:00.0")
        .expect("the crashed rank's GPU");
    assert_eq!(
        gpu["jobs"],
        serde_json::json!(["crash-again", "rank-crash"])
    );
    assert!(
        offenders
            .iter()
            .all(|o| o["jobs"].as_array().unwrap().len() >= 2)
    );
    assert!(
        std::fs::read_to_string(out.join("fleet.html"))
            .unwrap()
            .contains("node002 mlx5_0 port 1")
    );
}

#[test]
fn a_rerun_analyses_only_new_or_changed_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, out) = (tmp.path().join("root"), tmp.path().join("out"));
    make_root(&root);
    std::fs::remove_file(root.join("corrupt.tar.gz")).unwrap();
    let args = ["batch", root.to_str().unwrap(), "-o", out.to_str().unwrap()];
    assert_eq!(ncclpm(&args).0, 0);
    let (code, text) = ncclpm(&args);
    assert_eq!(code, 0);
    assert!(text.contains("0 analysed, 6 unchanged"), "{text}");
    let log = root.join("healthy/mpirun.out");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(f, "one more line").unwrap();
    copy_tree(&samples().join("stalled-compute"), &root.join("new-job"));
    let (_, text) = ncclpm(&args);
    assert!(text.contains("7 job(s): 2 analysed, 5 unchanged"), "{text}");
}

#[test]
fn shards_merged_equal_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    make_root(&root);
    let r = root.to_str().unwrap();
    let one = tmp.path().join("one");
    ncclpm(&["batch", r, "-o", one.to_str().unwrap(), "--quiet"]);
    let mut shard_outs = Vec::new();
    for k in 1..=3 {
        let out = tmp.path().join(format!("shard{k}"));
        ncclpm(&[
            "batch",
            r,
            "-o",
            out.to_str().unwrap(),
            "--quiet",
            "--shard",
            &format!("{k}/3"),
        ]);
        shard_outs.push(out.to_str().unwrap().to_string());
    }
    let merged = tmp.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(shard_outs.iter().map(String::as_str));
    args.extend(["-o", merged.to_str().unwrap()]);
    assert_eq!(ncclpm(&args).0, 0);
    let read = |p: &Path, f: &str| std::fs::read_to_string(p.join(f)).unwrap();
    assert_eq!(read(&one, "summary.jsonl"), read(&merged, "summary.jsonl"));
    assert_eq!(read(&one, "fleet.json"), read(&merged, "fleet.json"));
    assert_eq!(
        read(&one, "jobs/rank-crash/report.json"),
        read(&merged, "jobs/rank-crash/report.json")
    );
}

#[test]
fn bad_shards_are_usage_errors() {
    assert_eq!(
        ncclpm(&["batch", ".", "-o", "/tmp/x", "--shard", "4/3"]).0,
        2
    );
    assert_eq!(
        ncclpm(&["batch", ".", "-o", "/tmp/x", "--shard", "0/3"]).0,
        2
    );
}

/// What a job's truth blames, as the fleet view keys it.
fn truth_entities(truth: &serde_json::Value) -> Vec<(String, String)> {
    let c = &truth["cause"];
    let Some(host) = c["host"].as_str() else {
        return Vec::new();
    };
    let mut out = vec![("host".to_string(), host.to_string())];
    if let Some(dev) = c["device"].as_str() {
        let port = c["port"]
            .as_u64()
            .map_or(String::new(), |p| format!(" port {p}"));
        out.push(("nic".into(), format!("{host} {dev}{port}")));
    }
    if let Some(gpu) = c["gpu_bus_id"].as_str() {
        out.push(("gpu".into(), format!("{host} GPU {gpu}")));
    }
    out
}

/// Simulated jobs whose truths share a host, a NIC or a GPU: every entity two
/// or more truths blame is a repeat offender in the fleet view, with those
/// jobs, and no healthy job is blamed for anything.
#[test]
fn fleet_offenders_match_the_simulated_truth() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, truths, out) = (
        tmp.path().join("root"),
        tmp.path().join("truths"),
        tmp.path().join("out"),
    );
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&truths).unwrap();
    let mut jobs = Vec::new();
    for seed in ["1", "2"] {
        for cause in ["link_flap", "packet_loss", "gpu_fault"] {
            jobs.push((format!("{cause}-{seed}"), cause, seed));
        }
    }
    jobs.push(("healthy-3".into(), "healthy", "3"));
    for (id, cause, seed) in &jobs {
        let job = truths.join(id);
        let (code, text) = ncclpm(&[
            "simulate",
            "--cause",
            cause,
            "--ranks",
            "16",
            "--seed",
            seed,
            "--profile",
            "small",
            "-q",
            job.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{text}");
        // The truth stays outside the batch root, as it would in real life.
        copy_tree(&job, &root.join(id));
    }
    let (code, text) = ncclpm(&[
        "batch",
        root.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{text}");

    let mut want: std::collections::BTreeMap<(String, String), Vec<String>> = Default::default();
    for (id, _, _) in &jobs {
        let truth: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(truths.join(format!("{id}.truth.json"))).unwrap(),
        )
        .unwrap();
        for entity in truth_entities(&truth) {
            want.entry(entity).or_default().push(id.clone());
        }
    }
    let fleet: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fleet.json")).unwrap()).unwrap();
    let offenders = fleet["offenders"].as_array().unwrap();
    let repeated: Vec<_> = want.iter().filter(|(_, ids)| ids.len() >= 2).collect();
    assert!(
        repeated.iter().any(|((kind, _), _)| kind == "nic"),
        "the scenario must repeat a NIC: {want:?}"
    );
    for ((kind, key), ids) in repeated {
        let found = offenders
            .iter()
            .find(|o| o["kind"] == kind.as_str() && o["key"] == key.as_str())
            .unwrap_or_else(|| panic!("{kind} {key} (blamed by {ids:?}) is no offender"));
        let got: Vec<&str> = found["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j.as_str().unwrap())
            .collect();
        for id in ids {
            assert!(
                got.contains(&id.as_str()),
                "{key}: {id} missing from {got:?}"
            );
        }
    }
    assert!(
        offenders.iter().all(|o| !o["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j == "healthy-3")),
        "a healthy job blames nothing"
    );
}
