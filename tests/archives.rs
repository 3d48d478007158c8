//! Jobs delivered as archives, read in place: tar, tar.gz, zip, nested, and
//! the broken and hostile ones.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name)
}

/// Every file of a sample folder as (relative path, bytes), sorted.
fn sample_files(name: &str) -> Vec<(String, Vec<u8>)> {
    let root = sample(name);
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry
                .path()
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read(entry.path()).unwrap()));
        }
    }
    out
}

fn tar_bytes(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, &data[..]).unwrap();
    }
    b.into_inner().unwrap()
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn verdict_of(path: &Path) -> serde_json::Value {
    common::analyze_to_json(path)["verdict"].clone()
}

fn same_diagnosis(a: &serde_json::Value, b: &serde_json::Value) {
    for field in ["status", "stuck_ranks", "collective"] {
        assert_eq!(a[field], b[field], "{field}");
    }
    for field in ["kind", "host", "device", "port", "gpu_bus_id", "peer_host"] {
        assert_eq!(a["cause"][field], b["cause"][field], "cause.{field}");
    }
}

#[test]
fn a_tar_gz_of_a_job_reads_like_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("job.tar.gz");
    std::fs::write(&archive, gz(&tar_bytes(&sample_files("rank-crash")))).unwrap();
    let from_archive = verdict_of(&archive);
    same_diagnosis(&from_archive, &verdict_of(&sample("rank-crash")));
    let cited = from_archive["evidence"][0]["file"].as_str().unwrap();
    assert!(cited.starts_with("job.tar.gz!node002/"), "{cited}");
}

/// Every rank of two hosts times out in one ALLREDUCE (torch 2.4); the
/// kernel log in `node002/` (dmesg -T: no host in its lines) shows its
/// mlx5_1 port going down and up as the collective hung. Only the folder
/// says whose port that was.
fn flap_job_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for (h, host) in ["node001", "node002"].iter().enumerate() {
        let mut log = String::new();
        for r in [2 * h, 2 * h + 1] {
            log.push_str(&format!("[rank{r}]:[E1126 10:10:0{r}.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=50, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"));
        }
        files.push((format!("{host}/train.log"), log.into_bytes()));
    }
    let dmesg = "[Tue Nov 26 10:00:04 2024] mlx5_core 0000:ab:00.0 mlx5_1: Port: 1 Link DOWN\n\
                 [Tue Nov 26 10:00:09 2024] mlx5_core 0000:ab:00.0 mlx5_1: Port: 1 Link ACTIVE\n";
    files.push(("node002/dmesg.txt".to_string(), dmesg.as_bytes().to_vec()));
    files
}

/// `tar czf llama70b-run7.tar.gz llama70b-run7/`: every member sits in a
/// folder named like the archive (and like a host: letters and digits).
/// That folder is the job's root: the node folders inside still name the
/// hosts, and the archive's name names none.
#[test]
fn a_tar_gz_of_a_job_folder_reads_like_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    let files = flap_job_files();
    for (path, data) in &files {
        common::write(&job, path, std::str::from_utf8(data).unwrap());
    }
    let wrapped: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(p, d)| (format!("llama70b-run7/{p}"), d))
        .collect();
    let archive = tmp.path().join("llama70b-run7.tar.gz");
    std::fs::write(&archive, gz(&tar_bytes(&wrapped))).unwrap();
    let from_folder = verdict_of(&job);
    assert_eq!(from_folder["cause"]["host"], "node002", "{from_folder:#}");
    same_diagnosis(&verdict_of(&archive), &from_folder);
}

#[test]
fn nested_archives_of_gzipped_node_logs() {
    // A job tarball holding one gzipped tar per node, whose logs are gzipped too.
    let files = sample_files("stalled-compute");
    let mut outer = Vec::new();
    for node in ["node001", "node002"] {
        let inner: Vec<(String, Vec<u8>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with(node))
            .map(|(p, d)| (format!("{p}.gz"), gz(d)))
            .collect();
        outer.push((format!("{node}.tar.gz"), gz(&tar_bytes(&inner))));
    }
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("job.tar");
    std::fs::write(&archive, tar_bytes(&outer)).unwrap();
    same_diagnosis(
        &verdict_of(&archive),
        &verdict_of(&sample("stalled-compute")),
    );
}

#[test]
fn a_zip_of_a_job_reads_like_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("job.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&archive).unwrap());
    for (path, data) in sample_files("ib-retry-exceeded") {
        w.start_file(path, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(&data).unwrap();
    }
    w.finish().unwrap();
    same_diagnosis(
        &verdict_of(&archive),
        &verdict_of(&sample("ib-retry-exceeded")),
    );
}

#[test]
fn truncated_and_corrupt_archives_are_reported_and_the_rest_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let whole = gz(&tar_bytes(&sample_files("stalled-compute")));
    std::fs::write(job.join("truncated.tar.gz"), &whole[..whole.len() / 2]).unwrap();
    let mut corrupt = tar_bytes(&[("a.log".into(), b"x\n".to_vec())]);
    corrupt[300..340].fill(0xff);
    std::fs::write(job.join("corrupt.tar"), corrupt).unwrap();
    std::fs::write(job.join("broken.zip"), b"PK\x03\x04 this is not a zip").unwrap();
    let doc = common::analyze_to_json(&job);
    let skipped: Vec<String> = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s["file"].as_str().unwrap(),
                s["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        skipped.iter().any(|s| s.starts_with("truncated.tar.gz")),
        "{skipped:#?}"
    );
    assert!(
        skipped.iter().any(|s| s.starts_with("corrupt.tar")),
        "{skipped:#?}"
    );
    assert!(
        skipped.iter().any(|s| s.starts_with("broken.zip")),
        "{skipped:#?}"
    );
    // What the truncated archive held before the cut was still read.
    assert!(doc["job"]["files"].as_u64().unwrap() >= 1);
}

#[test]
fn a_decompression_bomb_is_capped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let line = "node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n";
    std::fs::write(job.join("huge.log.gz"), gz(line.repeat(200_000).as_bytes())).unwrap();
    let out = tmp.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_ncclpm"))
        .args([
            "analyze",
            job.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--quiet",
            "--max-decompressed",
            "1M",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let reasons: Vec<&str> = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert!(reasons.iter().any(|r| r.contains("cap")), "{reasons:?}");
    assert!(doc["job"]["bytes"].as_u64().unwrap() <= 1 << 20);
}

#[test]
fn links_and_escaping_paths_inside_a_tar_stay_inside() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = tar::Builder::new(Vec::new());
    let log = b"node1:1:1 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer node2<1>\n";
    for path in ["../../escape.log", "/abs/path.log"] {
        let mut h = tar::Header::new_gnu();
        h.set_size(log.len() as u64);
        h.set_mode(0o644);
        // Write the raw name, bypassing the builder's own path checks.
        h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, &log[..]).unwrap();
    }
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "link.log", "/etc/passwd").unwrap();
    let archive = tmp.path().join("hostile.tar");
    std::fs::write(&archive, b.into_inner().unwrap()).unwrap();
    let doc = common::analyze_to_json(&archive);
    let cited: Vec<&str> = doc["verdict"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    assert!(
        cited.iter().all(|f| !f.contains("..") && !f.contains("!/")),
        "{cited:?}"
    );
    let skipped = doc["skipped"].as_array().unwrap();
    assert!(
        skipped.iter().any(|s| s["file"] == "hostile.tar!link.log"
            && s["reason"].as_str().unwrap().contains("link"))
    );
    assert!(!tmp.path().join("escape.log").exists() && !Path::new("/abs/path.log").exists());
}
