//! The command line as a user meets it: exit codes, files written, the
//! terminal verdict, bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ncclpm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ncclpm"))
        .args(args)
        .output()
        .expect("ncclpm runs")
}

fn sample(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name)
        .display()
        .to_string()
}

fn out_dir(dir: &tempfile::TempDir) -> (PathBuf, String) {
    let out = dir.path().join("report");
    let s = out.display().to_string();
    (out, s)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn analyze_prints_the_verdict_and_writes_both_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", &sample("stalled-compute"), "-o", &out_s]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    assert!(text.contains("verdict: HANG"), "{text}");
    assert!(text.contains("stuck rank(s): 6"), "{text}");
    assert!(text.contains("ALLREDUCE seq 4218 pg 0"), "{text}");
    assert!(text.contains("rank_stalled"), "{text}");
    // Top evidence lines are cited as file:line.
    assert!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("> ") && l.contains(".log:")
                || l.contains("nccl.node"))
            .count()
            >= 1,
        "{text}"
    );
    assert!(out.join("report.json").is_file());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Content-Security-Policy"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the report must not reference the network"
    );
}

#[test]
fn json_only_and_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&[
        "analyze",
        &sample("healthy"),
        "-o",
        &out_s,
        "--json-only",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).is_empty());
    assert!(out.join("report.json").is_file());
    assert!(!out.join("report.html").exists());
}

#[test]
fn fail_on_turns_a_matching_verdict_into_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out_s) = out_dir(&tmp);
    let o = ncclpm(&[
        "analyze",
        &sample("rank-crash"),
        "-o",
        &out_s,
        "--quiet",
        "--fail-on",
        "hang,crash",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = ncclpm(&[
        "analyze",
        &sample("healthy"),
        "-o",
        &out_s,
        "--quiet",
        "--fail-on",
        "any",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let o = ncclpm(&[
        "analyze",
        &sample("healthy"),
        "-o",
        &out_s,
        "--fail-on",
        "bogus",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_usage_and_missing_input_exit_2() {
    assert_eq!(ncclpm(&[]).status.code(), Some(2));
    assert_eq!(ncclpm(&["analyze"]).status.code(), Some(2));
    let o = ncclpm(&["analyze", "/nonexistent/ncclpm-job"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/ncclpm-job"));
}

#[test]
fn a_folder_with_nothing_readable_exits_2_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let (_, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", job.to_str().unwrap(), "-o", &out_s]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::write(job.join("core.bin"), [0u8, 1, 2, 3, 0, 0, 0, 9].repeat(64)).unwrap();
    let o = ncclpm(&["analyze", job.to_str().unwrap(), "-o", &out_s]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no readable input") && err.contains("core.bin"),
        "{err}"
    );
}

#[test]
fn junk_next_to_good_logs_is_skipped_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("junk.dat"), [0u8, 0xff, 0, 7].repeat(1000)).unwrap();
    std::fs::write(
        job.join("truncated.log.gz"),
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2],
    )
    .unwrap();
    std::fs::write(
        job.join("rank0.log"),
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n",
    )
    .unwrap();
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", job.to_str().unwrap(), "-o", &out_s, "--quiet"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let skipped = doc["skipped"].as_array().unwrap();
    let files: Vec<&str> = skipped
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert!(files.contains(&"junk.dat"), "{skipped:?}");
    assert!(files.contains(&"truncated.log.gz"), "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|s| !s["reason"].as_str().unwrap().is_empty())
    );
    assert_eq!(doc["verdict"]["collective"]["seq"], 7);
}

#[test]
fn log_text_is_escaped_in_the_html() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(
        job.join("nccl.log"),
        "node1:10:11 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer node2<1234> </script><script>alert(1)</script>\"><img src=x onerror=alert(2)>\n",
    )
    .unwrap();
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", job.to_str().unwrap(), "-o", &out_s, "--quiet"]);
    assert_eq!(o.status.code(), Some(0));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("&lt;script&gt;alert(1)") || html.contains("&#60;script&#62;alert(1)"),
        "the hostile text should appear, escaped"
    );
    assert!(!html.contains("<script>alert"));
    assert!(!html.contains("<img src=x"));
    assert_eq!(
        html.matches("</script>").count(),
        1,
        "only the data block closes a script element"
    );
}

#[test]
fn same_input_same_bytes_whatever_the_thread_count() {
    let run = |threads: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let (out, out_s) = out_dir(&tmp);
        let o = Command::new(env!("CARGO_BIN_EXE_ncclpm"))
            .args(["analyze", &sample("rank-crash"), "-o", &out_s, "--quiet"])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        (
            std::fs::read(out.join("report.json")).unwrap(),
            std::fs::read(out.join("report.html")).unwrap(),
        )
    };
    let one = run("1");
    assert_eq!(one, run("2"));
    assert_eq!(one, run("4"));
}

#[test]
fn user_grammars_are_checked_and_used() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(
        job.join("train.log"),
        "inhouse-fabric: port swp7 on leaf12 flapped 3 times\n",
    )
    .unwrap();
    let grammar = tmp.path().join("inhouse.toml");
    let spec = |expected: u32| {
        format!(
            r#"source = "inhouse"
[[pattern]]
id = "inhouse.port_flap"
event = "ib_async_event"
literals = ["inhouse-fabric:"]
regex = 'inhouse-fabric: port (?P<port_name>\S+) on (?P<switch>\S+) flapped (?P<count>\d+) times'
fields = {{ count = "int" }}
set = {{ event = "port error" }}
[[pattern.samples]]
line = "inhouse-fabric: port swp1 on leaf1 flapped {expected} times"
fields = {{ port_name = "swp1", switch = "leaf1", count = 2, event = "port error" }}
"#
        )
    };
    let (out, out_s) = out_dir(&tmp);
    std::fs::write(&grammar, spec(2)).unwrap();
    let g = grammar.to_str().unwrap();
    let o = ncclpm(&[
        "analyze",
        job.to_str().unwrap(),
        "-o",
        &out_s,
        "--quiet",
        "--grammar",
        g,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "link_flap", "{doc}");
    assert_eq!(cause["evidence"][0]["line"], 1);
    // A sample that does not yield its declared fields stops the run.
    std::fs::write(&grammar, spec(5)).unwrap();
    let o = ncclpm(&[
        "analyze",
        job.to_str().unwrap(),
        "-o",
        &out_s,
        "--grammar",
        g,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("inhouse.port_flap"));
}

#[test]
fn a_hundred_megabyte_line_is_cut_not_buffered() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let mut text = Vec::with_capacity(101 << 20);
    text.extend_from_slice(b"node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n");
    text.extend(std::iter::repeat_n(b'x', 100 << 20));
    text.extend_from_slice(b"\nnode1:1:1 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer node2<1>\n");
    std::fs::write(job.join("big.log"), &text).unwrap();
    drop(text);
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", job.to_str().unwrap(), "-o", &out_s, "--quiet"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        doc["input_health"][0]["truncated_lines"], 1,
        "{}",
        doc["input_health"]
    );
    assert_eq!(
        doc["verdict"]["evidence"][0]["line"], 3,
        "line numbers stay right after the long line"
    );
}

#[test]
fn trace_export_opens_as_trace_event_json() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out_s) = out_dir(&tmp);
    let trace = tmp.path().join("trace.json");
    let o = ncclpm(&[
        "analyze",
        &sample("stalled-compute"),
        "-o",
        &out_s,
        "--quiet",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["node001", "node002"]);
    let spans: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(spans.len(), 7, "one open span per timed-out rank");
    assert!(spans.iter().all(|s| {
        s["args"]["open"] == true
            && s["name"]
                .as_str()
                .unwrap()
                .starts_with("ALLREDUCE seq 4218")
    }));
    assert!(
        events.iter().all(|e| e["ts"].as_i64().unwrap_or(0) >= 0),
        "time zero is the earliest event"
    );
    let culprit_sort = events
        .iter()
        .find(|e| e["name"] == "process_sort_index" && e["args"]["sort_index"] == 0)
        .expect("the culprit's host sorts first");
    assert_eq!(culprit_sort["pid"], 2);
}

/// A host-wide cause lists its host's ranks as one run: NCCL 2.19.3, two
/// hosts of four ranks, every rank of node002 refused pinned memory.
#[test]
fn the_terminal_lists_a_hosts_ranks_as_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    for r in 0..8u32 {
        let host = format!("node{:03}", r / 4 + 1);
        let (l, pid) = (r % 4, 7100 + r);
        let mut text = format!(
            "{host}:{pid}:{pid} [{l}] NCCL INFO NCCL version 2.19.3+cuda12.2\n\
             {host}:{pid}:{pid} [{l}] NCCL INFO ncclCommInitRank comm 0x5a{r} rank {r} nranks 8 cudaDev {l} nvmlDev {l} busId {l}8000 commId 0x1f2e - Init START\n"
        );
        if r >= 4 {
            text.push_str(&format!(
                "{host}:{pid}:{} [{l}] misc/ibvwrap.cc:287 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory errno 12\n",
                pid + 40
            ));
        }
        std::fs::create_dir_all(job.join(&host)).unwrap();
        std::fs::write(job.join(&host).join(format!("nccl.{host}.{pid}")), text).unwrap();
    }
    let (_, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", &job.display().to_string(), "-o", &out_s]);
    let text = stdout(&o);
    assert!(text.contains("stuck rank(s): 4–7 (node002)\n"), "{text}");
    let html = std::fs::read_to_string(tmp.path().join("report/report.html")).unwrap();
    assert!(html.contains("<dd>4–7 (node002)</dd>"), "verdict list");
    assert!(html.contains("Ranks 4–7 (node002) · "), "headline");
}

/// An init failure's call has no sequence number or group: the headline
/// names the call alone (torch 2.3's traceback of a failed barrier).
#[test]
fn an_init_failures_headline_names_its_call_without_placeholders() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir_all(&job).unwrap();
    let mut log = String::new();
    for r in 0..2u32 {
        log.push_str(&format!(
            "[rank{r}]: Traceback (most recent call last):\n\
             [rank{r}]:   File \"/workspace/train.py\", line 41, in <module>\n\
             [rank{r}]:     dist.barrier()\n\
             [rank{r}]:   File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py\", line 75, in wrapper\n\
             [rank{r}]:     return func(*args, **kwargs)\n\
             [rank{r}]:   File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py\", line 3683, in barrier\n\
             [rank{r}]:     work = default_pg.barrier(opts=opts)\n\
             [rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n\
             [rank{r}]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n\
             [rank{r}]: Last error:\n\
             [rank{r}]: socketStartConnect: Connect to 10.3.0.13<40321> failed : Connection refused\n"
        ));
    }
    std::fs::write(job.join("train.log"), log).unwrap();
    let (out, out_s) = out_dir(&tmp);
    let o = ncclpm(&["analyze", &job.display().to_string(), "-o", &out_s]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let c = &report["verdict"]["collective"];
    assert_eq!(c["op"], "BARRIER", "{c:#}");
    assert!(c["seq"].is_null(), "{c:#}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let title = html
        .split("<title>")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap();
    assert!(!title.contains("#?") && !title.contains("pg ?"), "{title}");
    assert!(
        stdout(&o).contains("  collective:    BARRIER\n"),
        "{}",
        stdout(&o)
    );
}
