//! One large plain log (a Slurm output of every rank, a multi-GB NCCL debug
//! file) is cut at line starts into parts that are scanned in parallel, then
//! stitched back in order: line numbers continue across parts, and channel
//! links point at the stitched event list.
//!
//! Lines are independent to the scanner (multi-line constructs are joined
//! later, from the events' order and line numbers), so the stitched parse
//! holds the same lines as a sequential one. The one difference: a
//! `repeats_differ_in` match is folded only within its part, and a
//! `keep_last` pattern keeps its last matches per part, so a few more
//! repeats and calls may be kept.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use rayon::prelude::*;

use crate::grammar::Grammar;
use crate::ingest::InputFile;
use crate::ingest::lines::ChunkReader;
use crate::ingest::sniff::{FileKind, FileProfile, sniff};

use super::scan::{FileParse, dedup_links, scan_lines};

/// How far past a cut point the next line start is looked for; a cut with
/// no newline that close joins its part to the next.
const MAX_SEEK_FOR_NEWLINE: usize = 1 << 20;

/// Parses `file` (plain, on disk, `head` its first bytes) in `parts` parts,
/// or `None` when it is not a log to split.
pub fn parse_split(
    file: &InputFile,
    grammar: &Grammar,
    head: &[u8],
    parts: usize,
) -> Option<FileParse> {
    let profile = sniff(head);
    // A terminal capture's wrapped lines are joined in one pass.
    let capture = super::unwrap::padded_width(head).is_some();
    if profile.kind != FileKind::Log || capture || super::clock_file::parse(file, head).is_some() {
        return None;
    }
    let cuts = match line_start_cuts(file, parts) {
        Ok(c) if c.len() > 2 => c,
        _ => return None,
    };
    let pieces: Vec<(FileParse, u64)> = cuts
        .par_windows(2)
        .map(|w| scan_part(file, grammar, &profile, w[0], w[1]))
        .collect();
    Some(stitch(pieces))
}

/// Byte offsets `0 = c0 < c1 < … < size`, each `ci` a line start.
fn line_start_cuts(file: &InputFile, parts: usize) -> io::Result<Vec<u64>> {
    let size = File::open(&file.path)?.metadata()?.len();
    let mut f = File::open(&file.path)?;
    let mut cuts = vec![0u64];
    let mut buf = vec![0u8; 64 << 10];
    for k in 1..parts as u64 {
        let from = (size * k / parts as u64).max(*cuts.last().unwrap_or(&0));
        if let Some(cut) = next_line_start(&mut f, from, &mut buf)?
            && cut > *cuts.last().unwrap_or(&0)
            && cut < size
        {
            cuts.push(cut);
        }
    }
    cuts.push(size);
    Ok(cuts)
}

/// The first line start at or after `from` (just past a newline).
fn next_line_start(f: &mut File, from: u64, buf: &mut [u8]) -> io::Result<Option<u64>> {
    f.seek(SeekFrom::Start(from.saturating_sub(1)))?;
    let mut pos = from.saturating_sub(1);
    let mut looked = 0usize;
    while looked < MAX_SEEK_FOR_NEWLINE {
        let n = f.read(buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(pos + i as u64 + 1));
        }
        pos += n as u64;
        looked += n;
    }
    Ok(None)
}

fn scan_part(
    file: &InputFile,
    grammar: &Grammar,
    profile: &FileProfile,
    start: u64,
    end: u64,
) -> (FileParse, u64) {
    let opened = File::open(&file.path).and_then(|mut f| {
        f.seek(SeekFrom::Start(start))?;
        Ok(f)
    });
    match opened {
        Ok(f) => scan_lines(
            ChunkReader::new(f.take(end - start)),
            file,
            grammar,
            profile,
        ),
        Err(e) => (
            FileParse {
                partial: Some(format!("bytes {start}..{end} could not be read: {e}")),
                ..Default::default()
            },
            0,
        ),
    }
}

/// The parts' parses as one: events in order with their line numbers moved
/// by the lines before their part, links re-anchored, counts summed.
fn stitch(pieces: Vec<(FileParse, u64)>) -> FileParse {
    let mut out = FileParse::default();
    let mut lines_before = 0u64;
    for (mut part, lines) in pieces {
        let anchor_base = out.events.len() as u32;
        for ev in &mut part.events {
            ev.origin.line += lines_before;
        }
        for link in &mut part.links {
            link.anchor += anchor_base;
        }
        out.events.append(&mut part.events);
        out.links.append(&mut part.links);
        out.stats.lines += part.stats.lines;
        out.stats.bytes += part.stats.bytes;
        out.stats.truncated_lines += part.stats.truncated_lines;
        out.matched_lines += part.matched_lines;
        out.lossy_lines += part.lossy_lines;
        if out.partial.is_none() {
            out.partial = part
                .partial
                .map(|p| format!("{p} (in the part from line {})", lines_before + 1));
        }
        lines_before += lines;
    }
    dedup_links(&mut out);
    out
}
