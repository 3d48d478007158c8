//! Grammar coverage: lines that look like NCCL, ProcessGroupNCCL or elastic
//! messages but that no specific pattern recognises. A line only the generic
//! fallback (`nccl.warn.other`) takes counts as a gap too: the point is to see
//! what the grammars do not understand yet.

use std::io::{self, Read};

use aho_corasick::AhoCorasick;

use crate::grammar::{Grammar, MatchScratch};
use crate::ingest::InputFile;
use crate::ingest::lines::{ChunkReader, lines_of, stream_buffer};
use crate::ingest::open::open_decompressed;
use crate::ingest::sniff::{FileKind, SNIFF_BYTES, sniff};

use super::frame::frame;
use super::paste::unpaste;

/// A line that looks like a message the grammars should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub line: u64,
    pub text: String,
}

/// The markers that make a line look like a message worth a pattern.
pub struct Linter<'g> {
    grammar: &'g Grammar,
    markers: AhoCorasick,
    ignore_prefixes: Vec<Vec<u8>>,
}

impl<'g> Linter<'g> {
    pub fn new(grammar: &'g Grammar, markers: &[String], ignore_prefixes: &[String]) -> Linter<'g> {
        let markers = AhoCorasick::new(markers).expect("lint markers are plain strings");
        let ignore_prefixes = ignore_prefixes
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        Linter {
            grammar,
            markers,
            ignore_prefixes,
        }
    }

    /// The gaps of one file; table and binary files have none.
    pub fn lint_file(&self, file: &InputFile) -> io::Result<Vec<Gap>> {
        let (mut stream, _) = open_decompressed(&file.path)?;
        let mut head = stream_buffer();
        (&mut stream)
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut head)?;
        let profile = sniff(&head);
        if profile.kind != FileKind::Log {
            return Ok(Vec::new());
        }
        let mut reader = ChunkReader::with_start(stream, head);
        let mut gaps = Vec::new();
        let mut candidates = Vec::new();
        let mut scratch = MatchScratch::default();
        while let Some(chunk) = reader.next_chunk()? {
            for (line_no, line) in lines_of(&chunk) {
                if !self.markers.is_match(line) {
                    continue;
                }
                let clean = unpaste(line);
                let framed = frame(&clean, &profile.launcher);
                let body_start = clean.len() - framed.body.len();
                let body = framed.body.trim_ascii_start();
                if self.ignore_prefixes.iter().any(|p| body.starts_with(p)) {
                    continue;
                }
                self.grammar.candidates(&clean, &mut candidates);
                let known = self
                    .grammar
                    .match_line(&candidates, &clean, body_start, &mut scratch)
                    .is_some_and(|m| !m.pattern.fallback);
                if !known {
                    gaps.push(Gap {
                        line: line_no,
                        text: String::from_utf8_lossy(line).trim_end().to_string(),
                    });
                }
            }
        }
        Ok(gaps)
    }
}
