//! A pattern's accelerator (grammar/accel.rs) must be only a faster way to
//! run its regex: wherever it answers, it gives exactly the regex's fields.
//! Checked on every channel line of the real corpus and on generated lines
//! that sit on and around the edges of the form it knows.

use std::path::Path;

use ncclpm::grammar::{Grammar, Pattern};
use ncclpm::ingest::launcher::LauncherStyle;
use ncclpm::parse::frame::frame;
use proptest::prelude::*;

fn channel_pattern(grammar: &Grammar) -> &Pattern {
    grammar
        .patterns()
        .iter()
        .find(|p| p.id == "nccl.channel")
        .expect("the built-in grammar has nccl.channel")
}

/// Whether the accelerator answered (and then agreed with the regex and
/// found its pattern's literal; anything else fails the test). `false`: it
/// left the line to the regex.
fn agrees(pattern: &Pattern, body: &[u8]) -> bool {
    let Some(fast) = pattern.accelerated(body) else {
        return false;
    };
    // The line-by-line lane trusts an answer to mean the pattern was a
    // candidate: its literal is in the line.
    assert!(
        pattern
            .literals
            .iter()
            .any(|l| body.windows(l.len()).any(|w| w == l.as_bytes())),
        "the accelerator answered on a line without its literal: {:?}",
        String::from_utf8_lossy(body)
    );
    let mut locs = pattern.capture_locations();
    let slow = pattern.regex_match(body, &mut locs).map(|m| m.fields);
    assert_eq!(
        slow.as_ref(),
        Some(&fast),
        "accelerator and regex disagree on {:?}",
        String::from_utf8_lossy(body)
    );
    true
}

fn text_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            text_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "txt" || e == "log") {
            out.push(path);
        }
    }
}

#[test]
fn the_channel_reader_agrees_with_its_regex_on_every_corpus_and_sample_line() {
    let grammar = Grammar::builtin().unwrap();
    let pattern = channel_pattern(&grammar);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    text_files(&root.join("../shared/corpus"), &mut files);
    text_files(&root.join("samples"), &mut files);
    files.sort();
    let (mut seen, mut answered) = (0, 0);
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for line in bytes.split(|&b| b == b'\n') {
            let is_channel = memchr::memmem::find(line, b"NCCL INFO Channel ").is_some()
                || memchr::memmem::find(line, b"NCCL INFO Ring ").is_some();
            if !is_channel {
                continue;
            }
            seen += 1;
            let framed = frame(line, &LauncherStyle::default());
            answered += usize::from(agrees(pattern, framed.body));
        }
    }
    if seen > 0 {
        // Ring-order lines (`Channel 00/02 : 0 1 2 3`) are not peer lines;
        // the reader must still take the peer lines, which are most.
        assert!(answered * 2 > seen, "answered {answered} of {seen}");
    }
}

/// Mostly one of `usual`, sometimes one of `odd`: every part of a generated
/// line must usually be right for the whole line to reach the reader's end.
fn mostly(
    usual: &'static [&'static str],
    odd: &'static [&'static str],
) -> impl Strategy<Value = String> {
    prop_oneof![
        9 => proptest::sample::select(usual).prop_map(String::from),
        1 => proptest::sample::select(odd).prop_map(String::from),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        9 => (0u64..100_000).prop_map(|n| if n < 100 { format!("{n:02}") } else { n.to_string() }),
        1 => proptest::sample::select(&["99999999999999999999", "", "٣", "1٣"][..]).prop_map(String::from),
    ]
}

fn dev() -> impl Strategy<Value = String> {
    mostly(&["0", "3", "7", "41000", "1b000"], &["", "g", "4g"])
}

prop_compose! {
    fn channel_line()(
        head in mostly(&["Channel ", "Ring "], &["Chan ", "channel "]),
        channel in number(),
        conn in prop_oneof![Just(None), number().prop_map(Some)],
        sep in mostly(&[" : "], &[" :", ": "]),
        src in number(),
        src_dev in dev(),
        arrow in mostly(&[" -> "], &[" ->", " => "]),
        dst in number(),
        dst_dev in dev(),
        gap in mostly(&[" "], &["", "  "]),
        dir in mostly(&["", "[send] ", "[receive] "], &["[recv] ", "[send]"]),
        via in mostly(&["via "], &["via", "through "]),
        transport in mostly(
            &["NET/IB", "NET/Socket", "P2P", "SHM", "COLLNET", "COLLNETDirect"],
            &["NET/", "NET//", "NET/IB\u{b}x", "NET/ÏB", "NET/I\u{a0}B", "P2Px", "COLLNETé", "NVLS", ""],
        ),
        suffix in mostly(
            &["", "/0", "/12", "/0/GDRDMA", "/0/GDRDMA/Shared", "/IPC/read", "/CUMEM", "/direct/direct"],
            &["/", "/ x", "/\u{b}", "/é", "/1é", "/１", "/0x", " trailing", "/GDRDMA extra", "/a\u{b}b", "/a\u{a0}b", "/\u{2003}"],
        ),
    ) -> String {
        let conn = conn.map(|c| format!("/{c}")).unwrap_or_default();
        format!(
            "{head}{channel}{conn}{sep}{src}[{src_dev}]{arrow}{dst}[{dst_dev}]{gap}{dir}{via}{transport}{suffix}"
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn the_channel_reader_agrees_with_its_regex_on_generated_lines(line in channel_line()) {
        let grammar = GRAMMAR.with(|g| g.clone());
        agrees(channel_pattern(&grammar), line.as_bytes());
    }
}

thread_local! {
    static GRAMMAR: std::rc::Rc<Grammar> = std::rc::Rc::new(Grammar::builtin().unwrap());
}
