//! Hostile and broken input: each case ends in a report that says what was
//! skipped and why — no panic, no hang, nothing written outside the output
//! folder.

use std::path::Path;
use std::process::Command;

mod common;

fn run(job: &Path, out: &Path) -> (i32, serde_json::Value) {
    let (code, doc, _) = run_via(&[], job, out);
    (code, doc)
}

/// `ncclpm analyze`, started through `wrapper` (a command and its
/// arguments, e.g. `setpriv …`) when one is given; also its stderr.
fn run_via(wrapper: &[&str], job: &Path, out: &Path) -> (i32, serde_json::Value, String) {
    let bin = env!("CARGO_BIN_EXE_ncclpm");
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let o = cmd
        .args([
            "analyze",
            job.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .output()
        .unwrap();
    let code = o.status.code().unwrap_or(-1);
    let doc = std::fs::read_to_string(out.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, doc, String::from_utf8_lossy(&o.stderr).into_owned())
}

const WARN: &str = "node1:10:11 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer node2<1234>";

#[test]
fn invalid_utf8_and_nul_bytes_are_read_around() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let mut bytes = b"garbage \xff\xfe\xc3\x28 and \x00\x00 nul\n".to_vec();
    bytes.extend_from_slice(WARN.as_bytes());
    bytes.extend_from_slice(b" \xe2\x82 cut\n");
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(job.join("rank0.log"), bytes).unwrap();
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0);
    let ev = &doc["verdict"]["evidence"][0];
    assert_eq!(ev["line"], 2);
    assert!(
        ev["text"].as_str().unwrap().contains('\u{fffd}'),
        "lossy, not dropped: {ev}"
    );
    assert_eq!(doc["input_health"][0]["lossy_lines"], 1);
}

#[test]
fn a_link_pointing_outside_the_job_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let outside = tmp.path().join("secret.log");
    std::fs::write(&outside, format!("{WARN}\n")).unwrap();
    std::fs::write(
        job.join("ok.log"),
        "node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, job.join("escape.log")).unwrap();
    std::os::unix::fs::symlink(&job, job.join("loop")).unwrap();
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0);
    let skipped: Vec<&str> = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert!(
        skipped.contains(&"escape.log") && skipped.contains(&"loop"),
        "{skipped:?}"
    );
    assert_eq!(doc["job"]["files"], 1, "only the real file was read");
}

#[test]
fn fifos_and_devices_are_not_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("ok.log"), format!("{WARN}\n")).unwrap();
    let fifo = job.join("pipe");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !made {
        return;
    }
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0, "a FIFO must not block the analysis");
    assert!(
        doc["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["file"] == "pipe")
    );
}

#[test]
fn a_200_megabyte_single_line_costs_no_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let path = job.join("huge.log");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let block = vec![b'z'; 1 << 20];
        for _ in 0..200 {
            f.write_all(&block).unwrap();
        }
        writeln!(f).unwrap();
        writeln!(f, "{WARN}").unwrap();
    }
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0);
    assert_eq!(doc["input_health"][0]["truncated_lines"], 1);
    assert_eq!(doc["verdict"]["evidence"][0]["line"], 2);
}

#[test]
fn many_tiny_files() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    for d in 0..100 {
        let dir = job.join(format!("node{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            std::fs::write(dir.join(format!("r{f}.log")), "x\n").unwrap();
        }
    }
    std::fs::write(job.join("node000/w.log"), format!("{WARN}\n")).unwrap();
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0);
    assert_eq!(doc["job"]["files"], 100_001);
    assert_eq!(doc["verdict"]["evidence"][0]["file"], "node000/w.log");
}

#[test]
fn one_rank_claimed_by_two_hosts_does_not_confuse_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let init = |host: &str, pid: u32, rank: u32| {
        format!(
            "{host}:{pid}:{pid} [0] NCCL INFO comm 0x1 rank {rank} nranks 2 cudaDev 0 busId 18000 - Init COMPLETE\n"
        )
    };
    std::fs::write(
        job.join("a.log"),
        init("nodeA", 10, 0) + &init("nodeB", 20, 0),
    )
    .unwrap();
    std::fs::write(job.join("b.log"), init("nodeC", 30, 1)).unwrap();
    let (code, doc) = run(&job, &tmp.path().join("out"));
    assert_eq!(code, 0);
    assert_eq!(doc["job"]["ranks"], 2);
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 2);
}

#[test]
fn nothing_is_written_outside_the_output_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("a.log"), format!("{WARN}\n")).unwrap();
    let before: Vec<_> = walkdir::WalkDir::new(tmp.path())
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .collect();
    let out = tmp.path().join("out");
    run(&job, &out);
    let after: Vec<_> = walkdir::WalkDir::new(tmp.path())
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| !p.starts_with(&out))
        .collect();
    assert_eq!(before, after);
}

/// A log still being written when it is read: appended to, and cut short,
/// between the listing and the reading. What was there is used; the report
/// says the file moved under the reader.
#[test]
fn a_file_that_changes_while_read_is_used_and_reported() {
    use ncclpm::grammar::Grammar;
    use ncclpm::parse::archive::{Limits, Parsed, parse_input};

    let tmp = tempfile::tempdir().unwrap();
    let (growing, shrinking) = (tmp.path().join("rank0.log"), tmp.path().join("rank1.log"));
    std::fs::write(&growing, format!("{WARN}\n")).unwrap();
    std::fs::write(&shrinking, format!("{WARN}\n{WARN}\n")).unwrap();
    let listed = ncclpm::ingest::discover(tmp.path()).unwrap().files;
    std::fs::write(&growing, format!("{WARN}\n{WARN}\n{WARN}\n")).unwrap();
    std::fs::write(&shrinking, format!("{WARN}\n")).unwrap();

    let grammar = Grammar::builtin().unwrap();
    for (file, how, events) in [(&listed[0], "grew", 3), (&listed[1], "shrank", 1)] {
        let Parsed::File(p) = parse_input(file, &grammar, Limits::default()) else {
            panic!("a plain file");
        };
        let note = p.partial.clone().unwrap_or_default();
        assert!(note.contains(how), "{}: {note:?}", file.display);
        assert_eq!(p.events.len(), events, "{}", file.display);
    }
}

/// A JSON-lines export is read as the text its entries hold, fewer bytes
/// than the file: that is no change under the reader.
#[test]
fn a_json_lines_log_read_whole_is_not_reported_as_changed() {
    use ncclpm::grammar::Grammar;
    use ncclpm::parse::archive::{Limits, Parsed, parse_input};

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("export.jsonl");
    let entry = |msg: &str| {
        format!(
            "{{\"timestamp\": \"2025-03-11T01:55:03Z\", \"kubernetes\": {{\"pod_name\": \"w-0\"}}, \"message\": {}}}\n",
            serde_json::to_string(msg).unwrap()
        )
    };
    std::fs::write(&path, entry(WARN) + &entry(WARN)).unwrap();
    let listed = ncclpm::ingest::discover(tmp.path()).unwrap().files;
    let grammar = Grammar::builtin().unwrap();
    let Parsed::File(p) = parse_input(&listed[0], &grammar, Limits::default()) else {
        panic!("a plain file");
    };
    assert_eq!(p.partial, None);
    assert_eq!(p.events.len(), 2);
}

/// A file the analyzer may not read (mode 000) is skipped with the reason;
/// the rest is analysed. Root reads everything, so as root the analyzer
/// runs as `nobody` (setpriv) to meet the permission check.
#[test]
fn an_unreadable_file_is_skipped_and_said() {
    use std::os::unix::fs::PermissionsExt;

    let tmp = tempfile::tempdir().unwrap();
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let job = tmp.path().join("job");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&job).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(job.join("rank0.log"), format!("{WARN}\n")).unwrap();
    let secret = job.join("rank1.log");
    std::fs::write(&secret, format!("{WARN}\n")).unwrap();
    open(&secret, 0o000);
    open(tmp.path(), 0o755);
    open(&job, 0o755);
    open(&job.join("rank0.log"), 0o644);
    open(&out, 0o777);

    let as_root = std::fs::File::open(&secret).is_ok();
    let wrapper: &[&str] = if as_root {
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        &[]
    };
    let (code, doc, stderr) = run_via(wrapper, &job, &out);
    if as_root && code != 0 && stderr.contains("setpriv") {
        eprintln!("setpriv cannot drop privileges here; the permission case is not exercised");
        return;
    }
    assert_eq!(code, 0, "{stderr}");
    let skipped = doc["skipped"].as_array().unwrap();
    let entry = skipped
        .iter()
        .find(|s| s["file"] == "rank1.log")
        .unwrap_or_else(|| panic!("rank1.log not reported: {skipped:#?}"));
    assert!(
        entry["reason"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .contains("permission"),
        "{entry}"
    );
    assert_eq!(doc["verdict"]["evidence"][0]["file"], "rank0.log");
}
