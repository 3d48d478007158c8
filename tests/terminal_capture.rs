//! A terminal's screen capture (lines padded to its width, longer ones
//! wrapped at it) reads as the log it shows; so does a paste that an issue
//! tracker, an editor or a log collector wrapped at a word.

mod common;

/// A line as a `width`-column terminal shows it: cut into rows, the last
/// padded.
fn rows(line: &str, width: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    chars
        .chunks(width)
        .map(|c| format!("{:<width$}\n", c.iter().collect::<String>()))
        .collect()
}

fn timeout(rank: u32, numel: u64) -> String {
    format!(
        "[rank{rank}]:[E430 05:09:48.828088908 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9387, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600005 milliseconds before timing out."
    )
}

/// torchtune#2651's shape: a capture splits each watchdog line inside its
/// numbers (there at 166 columns, `NumelIn=1, N` / `umelOut=1, …`; here at
/// 132, `SeqNum=93` / `87, OpType=…`). Read whole, the three ranks' sizes
/// disagree at sequence number 9387: rank 5 is odd.
#[test]
fn watchdog_lines_wrapped_by_a_terminal_are_read_whole_torch_2_6() {
    let mut capture = rows(
        "INFO:torchtune.utils._logging:Saving checkpoint. This may take some time.",
        132,
    );
    for (rank, numel) in [(4, 1), (1, 1), (5, 4096)] {
        capture.push_str(&rows(&timeout(rank, numel), 132));
    }
    capture.push_str(&rows("W0430 05:10:01.000 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM", 132));
    assert!(capture.lines().all(|l| l.len() == 132));
    let doc = common::report_of(&[("capture.log", &capture)]);
    let v = &doc["verdict"];
    assert_eq!(v["collective"]["seq"], 9387, "{v:#}");
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
    // Evidence cites the line each watchdog line starts on.
    let lines: Vec<u64> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["cause"]["evidence"].as_array().unwrap())
        .filter(|e| e["text"].as_str().unwrap_or("").contains("[rank5]"))
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert!(
        !lines.is_empty() && lines.iter().all(|&l| l == 6),
        "{lines:?} {v:#}"
    );
}

/// Lines cut at one width with the rest lost (a viewer's truncation) are
/// not padded, and are never joined to the next.
#[test]
fn lines_cut_at_one_width_without_padding_are_left_apart() {
    let cut: String = (0..6)
        .map(|r| format!("{}\n", &timeout(r, 1)[..200]))
        .collect();
    let doc = common::report_of(&[("cut.log", &cut)]);
    let v = &doc["verdict"];
    // Each cut line is still its own rank's timeout.
    let timed_out = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "timed_out")
        .count();
    assert_eq!(timed_out, 6, "{v:#}");
}

/// milabench#269's shape (torch 2.4, a collector that breaks long lines at
/// a word): each watchdog line goes on after `timeout: ` and the PG status
/// after `detected`. Read joined, the ranks' collective and their last
/// enqueued / completed work are known, and evidence cites the line each
/// message starts on.
#[test]
fn watchdog_messages_wrapped_at_a_word_are_read_joined_torch_2_4() {
    let mut log = String::new();
    for rank in [14, 12, 11, 15] {
        log.push_str(&format!(
            "bench.cn-d004 [stderr] [rank{rank}]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: \nWorkNCCL(SeqNum=2070, OpType=REDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.\n"
        ));
    }
    for (rank, enqueued) in [(12, 2070), (3, 2082)] {
        log.push_str(&format!(
            "bench.cn-d004 [stderr] [rank{rank}]:[E909 09:55:29.313379098 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {rank}] Exception (either an error or timeout) detected\nby watchdog at work: 2070, last enqueued NCCL work: {enqueued}, last completed NCCL work: 2069.\n"
        ));
    }
    let doc = common::report_of(&[("cn-d004.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["collective"]["seq"], 2070, "{v:#}");
    assert_eq!(v["collective"]["op"], "REDUCE", "{v:#}");
    let rank = |r: u64| {
        doc["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["rank"] == r)
            .unwrap_or_else(|| panic!("rank {r}: {:#}", doc["ranks"]))
    };
    assert_eq!(rank(3)["last_enqueued"], 2082);
    assert_eq!(rank(12)["last_completed"], 2069);
    assert_eq!(rank(15)["state"], "timed_out");
    let cited: Vec<u64> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert!(cited.iter().all(|l| l % 2 == 1), "{cited:?}");
}

/// pytorch#122850's paste (an e-mail client's 72 columns): the watchdog
/// line and the PG status each span three or four lines, some broken inside
/// the `[PG 0 Rank` tag; a word-wrapped paste whose lines were not broken
/// is left as it was, and a line after a whole sentence is its own.
#[test]
fn a_message_wrapped_over_several_lines_is_read_whole_torch_2_3() {
    let log = "NCCL version 2.19.3+cuda12.0
[rank0]:[E327 17:04:16.986381360 ProcessGroupNCCL.cpp:565] [Rank 0]
Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2,
OpType=ALLREDUCE, NumelIn=12, NumelOut=12, Timeout(ms)=1000) ran for
1099 milliseconds before timing out.
[rank0]:[E327 17:04:16.988036373 ProcessGroupNCCL.cpp:1582] [PG 0 Rank
0] Timeout at NCCL work: 2, last enqueued NCCL work: 2, last completed
   NCCL work: 1.
";
    let doc = common::report_of(&[("test.log", log)]);
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["collective"]["seq"], 2, "{v:#}");
    assert_eq!(v["collective"]["op"], "ALLREDUCE", "{v:#}");
    let r0 = &doc["ranks"][0];
    assert_eq!(r0["last_completed"], 1, "{:#}", doc["ranks"]);
}
