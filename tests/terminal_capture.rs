//! A terminal's screen capture (lines padded to its width, longer ones
//! wrapped at it) reads as the log it shows.

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
