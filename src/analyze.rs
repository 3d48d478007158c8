//! Wiring the stages: discover → parse (parallel) → model → timeline → diagnose.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::diagnose::{Diagnosis, diagnose};
use crate::grammar::Grammar;
use crate::grammar::knowledge::Knowledge;
use crate::ingest::{IngestError, InputFile, discover};
use crate::model::{Event, FileInfo, Job, Skipped, SysRecord, build::build};
use crate::parse::{FileParse, parse_file};
use crate::timeline::Timeline;

/// The whole result of analysing one job.
#[derive(Debug)]
pub struct Analysis {
    pub job: Job,
    pub timeline: Timeline,
    pub diagnosis: Diagnosis,
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error("no readable input in {path}: {detail}")]
    NoReadableInput { path: PathBuf, detail: String },
}

/// The frozen knowledge an analysis runs with, built once and shared.
pub struct Engine {
    pub grammar: Grammar,
    pub knowledge: Knowledge,
}

impl Engine {
    /// Analyses a job folder or a single log file.
    pub fn analyze(&self, path: &Path) -> Result<Analysis, AnalyzeError> {
        let found = discover(path)?;
        let parsed: Vec<FileParse> = found
            .files
            .par_iter()
            .map(|f| parse_file(f, &self.grammar))
            .collect();
        let (files, events, records, mut skipped) = collect_parses(&found.files, parsed);
        skipped.extend(found.skipped);
        skipped.sort();
        if files.iter().all(|f| f.lines == 0) && records.is_empty() {
            return Err(AnalyzeError::NoReadableInput {
                path: path.to_path_buf(),
                detail: describe_skips(&skipped),
            });
        }
        let mut job = build(
            display_root(path),
            files,
            events,
            records,
            &self.knowledge.consequences,
        );
        job.skipped = skipped;
        let timeline = Timeline::build(&job);
        let diagnosis = diagnose(&job, &timeline, &self.knowledge);
        Ok(Analysis {
            job,
            timeline,
            diagnosis,
        })
    }
}

/// Everything the files yielded, in file order.
type Collected = (Vec<FileInfo>, Vec<Event>, Vec<SysRecord>, Vec<Skipped>);

/// The file table, all events in (file, line) order, the table records, and
/// the files skipped.
fn collect_parses(inputs: &[InputFile], parsed: Vec<FileParse>) -> Collected {
    let mut files = Vec::with_capacity(inputs.len());
    let mut events = Vec::new();
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for (input, p) in inputs.iter().zip(parsed) {
        if let Some(reason) = p.skipped {
            skipped.push(Skipped {
                file: input.display.clone(),
                reason,
            });
        }
        if let Some(reason) = p.partial {
            skipped.push(Skipped {
                file: input.display.clone(),
                reason: format!("partly read: {reason}"),
            });
        }
        files.push(FileInfo {
            id: input.id,
            path: input.display.clone(),
            bytes: p.stats.bytes,
            lines: p.stats.lines,
            matched_lines: p.matched_lines,
            truncated_lines: p.stats.truncated_lines,
            lossy_lines: p.lossy_lines,
            hints: input.hints.clone(),
            multiplexed: false,
        });
        events.extend(p.events);
        records.extend(p.records);
    }
    (files, events, records, skipped)
}

fn describe_skips(skipped: &[Skipped]) -> String {
    if skipped.is_empty() {
        return "no files found".into();
    }
    let first: Vec<String> = skipped
        .iter()
        .take(3)
        .map(|s| format!("{}: {}", s.file, s.reason))
        .collect();
    format!("{} file(s) skipped ({})", skipped.len(), first.join("; "))
}

fn display_root(path: &Path) -> String {
    path.display().to_string()
}
