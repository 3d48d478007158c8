//! The lines around each cited line, so a reader can check a claim in its
//! context without opening the logs. Read after the diagnosis, for the few
//! cited lines only; files inside archives are not re-read. A cited line
//! whose text was not kept (a counter reading) gets it here.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::diagnose::{ContextLine, Diagnosis, Evidence};
use crate::ingest::lines::{ChunkReader, lines_of};
use crate::ingest::open::open_decompressed;
use crate::parse::archive::is_member;

/// Lines shown before and after a cited line.
const AROUND: u64 = 3;
/// Context lines are cut like evidence text, shorter.
const MAX_CHARS: usize = 400;

/// Fills `context` of every evidence item whose file is on disk.
pub fn attach(diagnosis: &mut Diagnosis, root: &Path) {
    let mut wanted: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for_each_evidence(diagnosis, &mut |e| {
        if e.line > 0 && !is_member(&e.file) {
            wanted.entry(e.file.clone()).or_default().insert(e.line);
        }
    });
    let mut found: BTreeMap<(String, u64), Vec<ContextLine>> = BTreeMap::new();
    let mut exact: BTreeMap<(String, u64), String> = BTreeMap::new();
    for (file, lines) in &wanted {
        let Some(path) = disk_path(root, file) else {
            continue;
        };
        let (around, lines) = read_around(&path, lines);
        for (line, ctx) in around {
            found.insert((file.clone(), line), ctx);
        }
        for (line, text) in lines {
            exact.insert((file.clone(), line), text);
        }
    }
    for_each_evidence(diagnosis, &mut |e| {
        let key = (e.file.clone(), e.line);
        if let Some(ctx) = found.get(&key) {
            e.context = ctx.clone();
        }
        if e.text.is_empty()
            && let Some(text) = exact.get(&key)
        {
            e.text = text.clone();
        }
    });
}

fn for_each_evidence(d: &mut Diagnosis, f: &mut dyn FnMut(&mut Evidence)) {
    d.verdict.evidence.iter_mut().for_each(&mut *f);
    for c in d
        .verdict
        .cause
        .iter_mut()
        .chain(d.verdict.alternatives.iter_mut())
    {
        c.evidence.iter_mut().for_each(&mut *f);
    }
}

fn disk_path(root: &Path, file: &str) -> Option<PathBuf> {
    if root.is_file() {
        return Some(root.to_path_buf());
    }
    let p = root.join(file);
    p.is_file().then_some(p)
}

type Around = (BTreeMap<u64, Vec<ContextLine>>, BTreeMap<u64, String>);

/// For each wanted line, the lines from `AROUND` before to `AROUND` after it,
/// and the wanted line itself as written.
fn read_around(path: &Path, wanted: &BTreeSet<u64>) -> Around {
    let mut out: BTreeMap<u64, Vec<ContextLine>> = BTreeMap::new();
    let mut exact: BTreeMap<u64, String> = BTreeMap::new();
    let Some(last) = wanted.iter().next_back().map(|l| l + AROUND) else {
        return (out, exact);
    };
    let Ok((stream, _)) = open_decompressed(path) else {
        return (out, exact);
    };
    let mut reader = ChunkReader::new(stream.take(u64::MAX));
    while let Ok(Some(chunk)) = reader.next_chunk() {
        for (n, text) in lines_of(&chunk) {
            if n > last {
                return (out, exact);
            }
            if wanted.contains(&n) {
                exact.insert(n, cited(text));
            }
            let near = wanted.range(n.saturating_sub(AROUND)..=n + AROUND);
            for &w in near {
                out.entry(w).or_default().push(ContextLine {
                    line: n,
                    text: clip(text),
                });
            }
        }
    }
    (out, exact)
}

/// A cited line as evidence shows it: whole, up to a long line's start.
fn cited(text: &[u8]) -> String {
    const MAX: usize = 2000;
    let s = String::from_utf8_lossy(text);
    let s = s.trim_end();
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn clip(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(text);
    let s = s.trim_end();
    match s.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
