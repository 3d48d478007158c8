//! Runs over the real logs in `../shared/corpus` (beside the checkout, in CI
//! too): no input may break the analysis, every cited line must exist as
//! cited, and the verdict kinds must agree with the known truths at least as
//! often as they do today (the floor only moves up).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    p.is_dir().then_some(p)
}

fn cases(part: &str) -> Vec<PathBuf> {
    let Some(root) = corpus() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(part))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// Truth labels of the corpus mapped to verdict kinds (corpus/logs/INDEX.md).
fn label_to_kind(label: &str) -> Option<&'static str> {
    Some(match label {
        "link_flap" => "link_flap",
        "packet_loss_retry_exceeded" => "packet_loss",
        "gid_index_mismatch" => "gid_index",
        "memlock_limit" => "memlock",
        "mtu_mismatch" => "mtu_mismatch",
        "wrong_socket_ifname" => "socket_interface",
        "firewall_ports" => "firewall",
        "rank_crashed" | "oom" => "process_crash",
        "rank_slow_or_stuck_compute" => "rank_stalled",
        "collective_mismatch" => "collective_mismatch",
        "gpu_xid" => "gpu_fault",
        "nccl_bug" => "nccl_bug",
        _ => return None,
    })
}

/// Every evidence line cites a real line of a real file, with its text.
fn check_citations(case: &Path, doc: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut all = doc["verdict"]["evidence"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for alt in doc["verdict"]["alternatives"]
        .as_array()
        .into_iter()
        .flatten()
    {
        all.extend(alt["evidence"].as_array().cloned().unwrap_or_default());
    }
    for e in all {
        let file = e["file"].as_str().unwrap().to_string();
        let lines = files.entry(file.clone()).or_insert_with(|| {
            let bytes = std::fs::read(case.join(&file)).unwrap_or_default();
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::to_string)
                .collect()
        });
        let n = e["line"].as_u64().unwrap() as usize;
        let text = e["text"].as_str().unwrap().trim_end_matches('…');
        match lines.get(n.wrapping_sub(1)) {
            Some(l) if l.trim_end().starts_with(text) => {}
            other => problems.push(format!(
                "{}: {file}:{n} cites {text:?} but the line is {other:?}",
                case.display()
            )),
        }
    }
    problems
}

#[test]
fn every_corpus_case_is_analyzed_and_cites_real_lines() {
    let mut problems = Vec::new();
    for case in cases("logs").into_iter().chain(cases("sys")) {
        let doc = common::analyze_to_json(&case);
        assert_eq!(doc["schema_version"], 1);
        problems.extend(check_citations(&case, &doc));
        problems.extend(check_summaries(&case, &doc));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A summary says what is known and leaves out what is not: no `?` stands
/// in for a host, device or rank the logs did not name.
fn check_summaries(case: &Path, doc: &Value) -> Vec<String> {
    let verdict = &doc["verdict"];
    let alternatives = verdict["alternatives"].as_array().into_iter().flatten();
    std::iter::once(&verdict["cause"])
        .chain(alternatives)
        .filter_map(|c| c["summary"].as_str())
        .filter(|s| s.contains(" ?") || s.contains("? "))
        .map(|s| format!("{}: summary with a placeholder: {s}", case.display()))
        .collect()
}

/// Cases whose truth names a cause the verdict vocabulary has.
const MIN_KIND_AGREEMENT: usize = 11;

#[test]
fn verdict_kinds_agree_with_the_known_truths() {
    let mut agree = 0;
    let mut table = Vec::new();
    for case in cases("logs") {
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("meta.json")).unwrap())
                .unwrap();
        let Some(want) = meta["truth"]["cause"].as_str().and_then(label_to_kind) else {
            continue;
        };
        let doc = common::analyze_to_json(&case);
        let got = doc["verdict"]["cause"]["kind"]
            .as_str()
            .unwrap_or("none")
            .to_string();
        agree += usize::from(got == want);
        table.push(format!(
            "{:24} want {want:20} got {got}",
            case.file_name().unwrap().to_string_lossy()
        ));
    }
    if corpus().is_some() {
        eprintln!("{agree} agree:\n{}", table.join("\n"));
        assert!(
            agree >= MIN_KIND_AGREEMENT,
            "only {agree} cases agree:\n{}",
            table.join("\n")
        );
    }
}

/// Wherever a thread showed the op or the stuck rank, the verdict names it:
/// these are facts in the logs, whatever the cause.
#[test]
fn collective_and_stuck_rank_agree_with_the_labels() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for case in cases("logs") {
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("meta.json")).unwrap())
                .unwrap();
        let truth = &meta["truth"];
        let (want_op, want_rank) = (truth["op"].as_str(), truth["stuck_rank"].as_u64());
        if want_op.is_none() && want_rank.is_none() {
            continue;
        }
        checked += 1;
        let doc = common::analyze_to_json(&case);
        let verdict = &doc["verdict"];
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        if let Some(op) = want_op {
            let got = verdict["collective"]["op"].as_str();
            if got != Some(op) {
                wrong.push(format!("{name}: op {op} wanted, got {got:?}"));
            }
        }
        if let Some(rank) = want_rank {
            let stuck = verdict["stuck_ranks"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !stuck.iter().any(|r| r.as_u64() == Some(rank)) {
                wrong.push(format!("{name}: stuck rank {rank} wanted, got {stuck:?}"));
            }
        }
    }
    if corpus().is_some() {
        assert!(checked >= 15, "only {checked} labelled cases found");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
