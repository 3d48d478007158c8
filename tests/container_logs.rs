//! Logs as container runtimes keep them: a pod's log file (containerd /
//! CRI-O: stamp, stream, tag) and Docker's json-file driver (one JSON entry
//! per line). The same job read from them gets the verdict it gets from
//! plain text.

mod common;

/// Two hosts, rank 1 dies of its own exception, rank 0 then times out.
const PLAIN: [(&str, &str); 2] = [
    (
        "node1",
        "node1:101:101 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1b000 commId 0x7a1 - Init COMPLETE\n\
[rank0]:[E501 10:40:00.123456789 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=ALLREDUCE, NumelIn=128, NumelOut=128, Timeout(ms)=600000) ran for 600003 milliseconds before timing out.\n",
    ),
    (
        "node2",
        "node2:202:202 [0] NCCL INFO comm 0x55d1 rank 1 nranks 2 cudaDev 0 busId 1b000 commId 0x7a1 - Init COMPLETE\n\
[rank1]: Traceback (most recent call last):\n\
[rank1]:   File \"train.py\", line 88, in <module>\n\
[rank1]: ValueError: batch has no labels\n",
    ),
];

fn cri(text: &str) -> String {
    text.lines()
        .map(|l| format!("2024-05-01T10:30:00.000000000Z stderr F {l}\n"))
        .collect()
}

fn docker_json(text: &str) -> String {
    text.lines()
        .map(|l| {
            let entry = serde_json::json!({"log": format!("{l}\n"), "stream": "stderr", "time": "2024-05-01T10:30:00.000000000Z"});
            format!("{entry}\n")
        })
        .collect()
}

fn verdict(encode: fn(&str) -> String) -> serde_json::Value {
    let files: Vec<(String, String)> = PLAIN
        .iter()
        .map(|(host, text)| (format!("{host}/0.log"), encode(text)))
        .collect();
    common::verdict_of_owned(&files)
}

#[test]
fn a_job_read_from_pod_log_files_gets_the_plain_verdict_containerd_1_7() {
    let plain = verdict(str::to_string);
    assert_eq!(plain["cause"]["kind"], "process_crash", "{plain:#}");
    assert_eq!(plain["cause"]["host"], "node2", "{plain:#}");
    let v = verdict(cri);
    for key in ["status", "stuck_ranks"] {
        assert_eq!(v[key], plain[key], "{v:#}");
    }
    assert_eq!(v["cause"]["kind"], plain["cause"]["kind"], "{v:#}");
    assert_eq!(v["cause"]["host"], plain["cause"]["host"], "{v:#}");
}

#[test]
fn a_job_read_from_docker_json_logs_gets_the_plain_verdict_docker_24() {
    let plain = verdict(str::to_string);
    let v = verdict(docker_json);
    for key in ["status", "stuck_ranks"] {
        assert_eq!(v[key], plain[key], "{v:#}");
    }
    assert_eq!(v["cause"]["kind"], plain["cause"]["kind"], "{v:#}");
    assert_eq!(v["cause"]["host"], plain["cause"]["host"], "{v:#}");
    // The evidence shows the decoded line, not the JSON around it.
    let text = v["cause"]["evidence"][0]["text"].as_str().unwrap();
    assert!(!text.contains("\"stream\""), "{text}");
}

/// nccl#733's paste (k9s, a pod's log in its box): every line framed by
/// `│`, padded to the box's width. The frame is the viewer's, not the log's.
#[test]
fn a_log_pasted_from_a_terminal_viewers_box_reads_as_plain_k9s() {
    let boxed: String = PLAIN
        .iter()
        .flat_map(|(_, text)| text.lines())
        .map(|l| format!("│ {l:<220} │\n"))
        .collect();
    let plain = verdict(str::to_string);
    let v = common::verdict_of_owned(&[("k9s.txt".to_string(), boxed)]);
    assert_eq!(v["cause"]["kind"], plain["cause"]["kind"], "{v:#}");
    assert_eq!(v["cause"]["host"], plain["cause"]["host"], "{v:#}");
    assert_eq!(v["stuck_ranks"], plain["stuck_ranks"], "{v:#}");
}
