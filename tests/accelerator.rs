//! A pattern's accelerator (src/grammar/accel/) must be only a faster way to
//! run its regex: wherever it answers, it gives exactly the regex's fields,
//! and a grammar with accelerators matches every line as one without them.
//! Checked on every line of the real corpus that holds an accelerated
//! pattern's literal, and on generated lines that sit on and around the
//! edges of the forms the readers know.

use std::path::Path;

use ncclpm::grammar::{BUILTIN, Grammar, MatchScratch, Pattern};
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
    // The line-by-line lane trusts a run reader's answer to mean the
    // pattern was a candidate: its literal is in the line.
    assert!(
        !pattern.reads_runs()
            || pattern
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
    let (mut seen, mut answered) = (0, 0);
    for line in corpus_lines() {
        let is_channel = memchr::memmem::find(&line, b"NCCL INFO Channel ").is_some()
            || memchr::memmem::find(&line, b"NCCL INFO Ring ").is_some();
        if !is_channel {
            continue;
        }
        seen += 1;
        answered += usize::from(agrees(pattern, body(&line)));
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

/// Every line of the corpus and of the samples (text files), in a fixed order.
fn corpus_lines() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    text_files(&root.join("../shared/corpus"), &mut files);
    text_files(&root.join("samples"), &mut files);
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let bytes = std::fs::read(file).unwrap();
            bytes
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn holds_literal(pattern: &Pattern, line: &[u8]) -> bool {
    pattern
        .literals
        .iter()
        .any(|l| memchr::memmem::find(line, l.as_bytes()).is_some())
}

/// The message of a line, as the scanner hands it to a pattern.
fn body(line: &[u8]) -> &[u8] {
    frame(line, &LauncherStyle::default()).body
}

#[test]
fn every_reader_agrees_with_its_regex_on_every_corpus_line_holding_its_literal() {
    let grammar = Grammar::builtin().unwrap();
    let lines = corpus_lines();
    let accelerated: Vec<&Pattern> = grammar
        .patterns()
        .iter()
        .filter(|p| p.has_accelerator())
        .collect();
    assert!(accelerated.len() >= 9, "{}", accelerated.len());
    for pattern in accelerated {
        let (mut seen, mut answered) = (0, 0);
        for line in lines.iter().filter(|l| holds_literal(pattern, l)) {
            seen += 1;
            answered += usize::from(agrees(pattern, body(line)));
        }
        // Each reader must take the usual form of its lines, not only agree
        // by declining.
        assert!(
            seen == 0 || answered > 0,
            "{}: answered none of {seen} lines",
            pattern.id
        );
    }
}

/// The built-in grammars with every `accelerator = …` line taken out: the
/// regexes alone, tried in file order.
fn without_accelerators() -> Grammar {
    let sources: Vec<(String, String)> = BUILTIN
        .iter()
        .map(|(name, text)| {
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with("accelerator = "))
                .collect();
            (name.to_string(), kept.join("\n"))
        })
        .collect();
    Grammar::compile(&sources).unwrap()
}

/// Which pattern matches a line and what it reads, through `grammar`.
fn match_of(
    grammar: &Grammar,
    line: &[u8],
    scratch: &mut MatchScratch,
) -> Option<(String, String)> {
    let mut candidates = Vec::new();
    grammar.candidates(line, &mut candidates);
    let framed = frame(line, &LauncherStyle::default());
    let body_start = line.len() - framed.body.len();
    grammar
        .match_line(&candidates, line, body_start, scratch)
        .map(|m| (m.pattern.id.to_string(), format!("{:?}", m.fields)))
}

#[test]
fn accelerators_change_no_corpus_line_s_match() {
    let fast = Grammar::builtin().unwrap();
    let plain = without_accelerators();
    assert!(plain.patterns().iter().all(|p| !p.has_accelerator()));
    let (mut fast_scratch, mut plain_scratch) = (MatchScratch::default(), MatchScratch::default());
    let mut matched = 0;
    for line in corpus_lines() {
        let want = match_of(&plain, &line, &mut plain_scratch);
        let got = match_of(&fast, &line, &mut fast_scratch);
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&line));
        matched += usize::from(got.is_some());
    }
    assert!(matched > 400, "{matched}");
}

/// The lines each accelerated pattern's generated cases start from: its
/// samples and the corpus lines holding its literal.
fn seed_lines() -> Vec<(usize, Vec<u8>)> {
    let grammar = Grammar::builtin().unwrap();
    let corpus = corpus_lines();
    let mut seeds = Vec::new();
    for (i, pattern) in grammar.patterns().iter().enumerate() {
        if !pattern.has_accelerator() || pattern.id == "nccl.channel" {
            continue;
        }
        let samples = pattern
            .samples
            .iter()
            .map(|(line, _)| line.as_bytes().to_vec());
        let found = corpus
            .iter()
            .filter(|l| holds_literal(pattern, l))
            .take(40)
            .cloned();
        seeds.extend(samples.chain(found).map(|line| (i, body(&line).to_vec())));
    }
    seeds
}

/// Pieces the edits put into a line: the separators, digits and words the
/// readers look for, and what the regexes' Unicode classes hold.
const PIECES: &[&str] = &[
    "",
    " ",
    "  ",
    "0",
    "7",
    "x",
    "-",
    ":",
    ",",
    ".",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    "/",
    "=",
    "\u{b}",
    "\t",
    ";",
    "_",
    "é",
    "٣",
    "\u{a0}",
    "0x",
    "(nil)",
    "[Rank 3] ",
    "Rank ",
    " - Init ",
    "- Init ",
    "START",
    "[RO]",
    "; OOB ",
    " commId 0x1",
    " color -1",
    "NumelIn=",
    "NumelOut=",
    ", ",
    "Timeout(ms)=",
    "WorkNCCL(SeqNum=",
    "CUDA error: ",
    "NCCL error: ",
    "ID ",
    " PG GUID ",
    "due to ",
    ".cpp:",
    "Exception raised from ",
    "Trees ",
];

/// A line with up to four edits, each a byte range replaced by one of
/// `PIECES`; half of them start where a word ends (where the readers'
/// choices are made), the rest anywhere.
fn edited(line: &[u8], edits: &[(usize, usize, usize)]) -> Vec<u8> {
    let mut line = line.to_vec();
    for &(at, cut, piece) in edits {
        let ends: Vec<usize> = (0..line.len())
            .filter(|&i| !line[i].is_ascii_alphanumeric())
            .collect();
        let at = if at % 2 == 0 && !ends.is_empty() {
            ends[(at / 2) % ends.len()]
        } else {
            (at / 2) % (line.len() + 1)
        };
        let end = (at + cut % 4).min(line.len());
        let piece = PIECES[piece % PIECES.len()].as_bytes();
        line.splice(at..end, piece.iter().copied());
    }
    line
}

thread_local! {
    static SEEDS: Vec<(usize, Vec<u8>)> = seed_lines();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn every_reader_agrees_with_its_regex_on_edited_lines(
        seed in any::<usize>(),
        edits in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 0..4),
    ) {
        let grammar = GRAMMAR.with(|g| g.clone());
        SEEDS.with(|seeds| {
            let (pattern, line) = &seeds[seed % seeds.len()];
            agrees(&grammar.patterns()[*pattern], &edited(line, &edits));
        });
    }
}
