//! A large plain log is cut at line starts and its parts parsed in parallel:
//! the stitched parse must read like a sequential one (same lines, same line
//! numbers, same links), whatever the cut points.

use std::collections::BTreeSet;
use std::path::Path;

use ncclpm::grammar::{Grammar, MatchScratch};
use ncclpm::ingest::discover::discover;
use ncclpm::ingest::launcher::LauncherStyle;
use ncclpm::parse::archive::{Limits, Parsed, parse_input};
use ncclpm::parse::frame::frame;
use ncclpm::parse::scan::FileParse;

/// A Slurm-style log of many ranks: NCCL channel lines (folded repeats and
/// links) with call-trace lines among some (only the last kept), init lines
/// and watchdog timeouts, every line different.
fn big_log() -> String {
    let mut s = String::new();
    for r in 0..1500u32 {
        let (host, pid, dev) = (r / 8, 4000 + r, r % 8);
        let peer = (r + 1) % 1500;
        s += &format!(
            "{r}: node{host:03}:{pid}:{pid} [{dev}] NCCL INFO comm 0x55d{r:x} rank {r} nranks 1500 cudaDev {dev} busId {dev}a000 commId 0x1 - Init COMPLETE\n"
        );
        for c in 0..4 {
            s += &format!(
                "{r}: node{host:03}:{pid}:{} [{dev}] NCCL INFO Channel {c:02}/0 : {r}[{dev}a000] -> {peer}[{dev}a000] [send] via NET/IB/{dev}/GDRDMA\n",
                pid + 70
            );
            // NCCL's call trace between them: only each caller's last
            // calls are kept.
            if r % 100 == 0 {
                for n in 0..3 {
                    s += &format!(
                        "{r}: node{host:03}:{pid}:{pid} [{dev}] NCCL INFO AllReduce: opCount {:x} sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0x55d{r:x} [nranks=1500] stream 0x2\n",
                        c * 3 + n
                    );
                }
            }
        }
        if r % 3 == 0 {
            s += &format!(
                "{r}: [rank{r}]:[E1129 10:{:02}:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600{:03} milliseconds before timing out.\n",
                r % 60,
                r % 1000
            );
        }
    }
    s
}

fn parse(dir: &Path, split_bytes: u64) -> FileParse {
    let grammar = Grammar::builtin().unwrap();
    let files = discover(dir).unwrap().files;
    let limits = Limits {
        split_bytes,
        ..Limits::default()
    };
    match parse_input(&files[0], &grammar, limits) {
        Parsed::File(p) => p,
        Parsed::Archive { .. } => panic!("not an archive"),
    }
}

/// The pattern the grammar matches on `line`, read alone.
fn matched_pattern(grammar: &Grammar, line: &str) -> Option<&'static str> {
    let mut candidates = Vec::new();
    grammar.candidates(line.as_bytes(), &mut candidates);
    let framed = frame(line.as_bytes(), &LauncherStyle::default());
    let body_start = line.len() - framed.body.len();
    let mut scratch = MatchScratch::default();
    grammar
        .match_line(&candidates, line.as_bytes(), body_start, &mut scratch)
        .map(|m| m.pattern.id)
}

#[test]
fn a_split_parse_reads_like_a_sequential_one() {
    let tmp = tempfile::tempdir().unwrap();
    let text = big_log();
    std::fs::write(tmp.path().join("slurm-1.out"), &text).unwrap();
    let whole = parse(tmp.path(), u64::MAX);
    let split = parse(tmp.path(), 16 << 10);
    let lines: Vec<&str> = text.lines().collect();

    assert_eq!(split.stats.lines, whole.stats.lines);
    assert_eq!(split.stats.bytes, text.len() as u64);
    assert_eq!(split.matched_lines, whole.matched_lines);
    // Every event sits on the line it came from: its text is that line, or,
    // for a topology line whose text is read again when cited, that line
    // matches the event's pattern.
    let grammar = Grammar::builtin().unwrap();
    for ev in &split.events {
        let line = lines[ev.origin.line as usize - 1];
        if ev.text.is_empty() {
            assert!(ev.kind.read_by_fields_alone(), "{ev:?}");
            assert_eq!(
                matched_pattern(&grammar, line),
                Some(ev.pattern),
                "line {}",
                ev.origin.line
            );
        } else {
            assert_eq!(line, &*ev.text, "line {}", ev.origin.line);
        }
    }
    assert!(split.events.iter().any(|e| !e.text.is_empty()));
    // The same lines became events, except repeats folded (and calls let go)
    // only within a part.
    let key = |p: &FileParse| -> BTreeSet<(u64, &'static str)> {
        p.events
            .iter()
            .map(|e| (e.origin.line, e.pattern))
            .collect()
    };
    let (w, s) = (key(&whole), key(&split));
    assert!(
        w.is_subset(&s),
        "{:?}",
        w.difference(&s).take(5).collect::<Vec<_>>()
    );
    assert!(
        s.difference(&w)
            .all(|(_, p)| *p == "nccl.channel" || *p == "nccl.coll_call")
    );
    let calls = |p: &FileParse| {
        p.events
            .iter()
            .filter(|e| e.pattern == "nccl.coll_call")
            .count()
    };
    assert_eq!(
        calls(&whole),
        15 * 8,
        "the last eight of each caller's twelve"
    );
    // (Cut points inside a process's channel lines keep one more repeat:
    // the file really was parsed in parts.)
    assert!(s.len() > w.len(), "the file was not split");
    assert!(split.events.len() > whole.events.len() / 2);
    // Links name the same rank pairs, anchored on events of their own process.
    let pairs = |p: &FileParse| -> BTreeSet<(u32, u32)> {
        p.links.iter().map(|l| (l.src, l.dst)).collect()
    };
    assert_eq!(pairs(&split), pairs(&whole));
    assert_eq!(pairs(&split).len(), 1500);
    for l in &split.links {
        let anchor = &split.events[l.anchor as usize];
        let line = lines[anchor.origin.line as usize - 1];
        assert!(line.contains(&format!(": {}[", l.src)), "{line}");
    }
}
