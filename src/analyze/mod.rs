//! Wiring the stages: discover → parse (parallel) → model → timeline → diagnose.

mod context;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::diagnose::{Diagnosis, FabricFacts, diagnose};
use crate::grammar::Grammar;
use crate::grammar::knowledge::Knowledge;
use crate::ingest::{IngestError, InputFile, discover};
use crate::model::{Event, FileId, FileInfo, Job, PeerLink, Skipped, SysTables, build::build};
use crate::parse::FileParse;
use crate::parse::archive::{Limits, Parsed, parse_input};
use crate::timeline::Timeline;

/// The whole result of analysing one job.
#[derive(Debug)]
pub struct Analysis {
    pub job: Job,
    pub timeline: Timeline,
    pub diagnosis: Diagnosis,
    /// How long each stage took, in order (for `--timings`; never in a
    /// report, which must not change from run to run).
    pub timings: Vec<(&'static str, Duration)>,
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
    pub limits: Limits,
}

impl Engine {
    /// An engine with the default limits.
    pub fn new(grammar: Grammar, knowledge: Knowledge) -> Engine {
        Engine {
            grammar,
            knowledge,
            limits: Limits::default(),
        }
    }

    /// Analyses a job folder or a single log file.
    pub fn analyze(&self, path: &Path) -> Result<Analysis, AnalyzeError> {
        let mut clock = StageClock::start();
        let found = discover(path)?;
        clock.lap("discover");
        let Collected {
            files,
            events,
            tables,
            links,
            mut skipped,
        } = self.parse_all(&found.files);
        clock.lap("parse");
        skipped.extend(found.skipped);
        skipped.sort();
        if files.iter().all(|f| f.lines == 0) && tables.is_empty() {
            return Err(AnalyzeError::NoReadableInput {
                path: path.to_path_buf(),
                detail: describe_skips(&skipped),
            });
        }
        let mut job = build(
            display_root(path),
            files,
            events,
            tables,
            links,
            &self.knowledge.consequences,
        );
        job.skipped = skipped;
        clock.lap("model");
        // The snapshots' findings need no clock: read beside the timeline.
        let (timeline, fabric) = rayon::join(|| Timeline::build(&job), || FabricFacts::read(&job));
        clock.lap("timeline");
        let mut diagnosis = diagnose(&job, &timeline, fabric, &self.knowledge);
        context::attach(&mut diagnosis, path);
        clock.lap("diagnose");
        Ok(Analysis {
            job,
            timeline,
            diagnosis,
            timings: clock.laps,
        })
    }
}

/// Durations of the stages, each from the end of the one before.
struct StageClock {
    last: Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl StageClock {
    fn start() -> StageClock {
        StageClock {
            last: Instant::now(),
            laps: Vec::new(),
        }
    }

    fn lap(&mut self, stage: &'static str) {
        let now = Instant::now();
        self.laps.push((stage, now - self.last));
        self.last = now;
    }
}

/// Files parsed in parallel per batch. Each batch is appended to the job's
/// tables while the next is parsed, so the parsed-but-not-yet-merged copy of
/// the input's facts never exceeds two batches, and no core waits for the
/// merge.
const PARSE_BATCH: usize = 256;

impl Engine {
    /// The file table, all events in (file, line) order, the table records,
    /// the channel links and the files skipped.
    fn parse_all(&self, inputs: &[InputFile]) -> Collected {
        let mut table = Collected::default();
        let mut pending: Option<(&[InputFile], Vec<Parsed>)> = None;
        for batch in inputs.chunks(PARSE_BATCH) {
            let (parsed, ()) = rayon::join(
                || self.parse_batch(batch),
                || {
                    if let Some((done, parsed)) = pending.take() {
                        table.add_batch(done, parsed);
                    }
                },
            );
            pending = Some((batch, parsed));
        }
        if let Some((done, parsed)) = pending {
            table.add_batch(done, parsed);
        }
        table
    }

    fn parse_batch(&self, batch: &[InputFile]) -> Vec<Parsed> {
        batch
            .par_iter()
            .map(|f| parse_input(f, &self.grammar, self.limits))
            .collect()
    }
}

/// Everything the files yielded, in file order, as it is assembled: every
/// parsed file (archive members included) gets the next id, and its events,
/// records and links are re-pointed at it.
#[derive(Default)]
struct Collected {
    files: Vec<FileInfo>,
    events: Vec<Event>,
    tables: SysTables,
    links: Vec<PeerLink>,
    skipped: Vec<Skipped>,
}

impl Collected {
    /// A batch's files in their order (an archive's members in its place).
    fn add_batch(&mut self, inputs: &[InputFile], parsed: Vec<Parsed>) {
        for (input, p) in inputs.iter().zip(parsed) {
            match p {
                Parsed::File(parse) => self.add(input, parse),
                Parsed::Archive {
                    mut members,
                    skipped,
                } => {
                    // In path order, as a folder's files are: an archive
                    // of a folder reads as the folder does, whatever order
                    // its writer stored the members in.
                    members
                        .sort_by(|a, b| a.file.display.split('/').cmp(b.file.display.split('/')));
                    for m in members {
                        self.add(&m.file, m.parse);
                    }
                    self.skipped.extend(skipped);
                }
            }
        }
    }

    fn add(&mut self, input: &InputFile, mut p: FileParse) {
        let id = FileId(self.files.len() as u32);
        if let Some(reason) = p.skipped.take() {
            self.skipped.push(Skipped {
                file: input.display.clone(),
                reason,
            });
        }
        if let Some(reason) = p.partial.take() {
            let reason = format!("partly read: {reason}");
            self.skipped.push(Skipped {
                file: input.display.clone(),
                reason,
            });
        }
        self.files.push(FileInfo {
            id,
            path: input.display.clone(),
            bytes: p.stats.bytes,
            lines: p.stats.lines,
            matched_lines: p.matched_lines,
            truncated_lines: p.stats.truncated_lines,
            lossy_lines: p.lossy_lines,
            hints: input.hints.clone(),
            multiplexed: false,
            ray_actor_lines: p.ray_actor_lines,
        });
        set_aside_earlier_runs(&mut p, &mut self.skipped, &input.display);
        let base = self.events.len() as u32;
        self.links.extend(p.links.into_iter().map(|l| PeerLink {
            anchor: l.anchor + base,
            ..l
        }));
        self.events.extend(p.events.into_iter().map(|mut e| {
            e.origin.file = id;
            e
        }));
        for r in p.records {
            self.tables.push(r.with_file(id));
        }
    }
}

/// Drops the lines of runs that a later run of the job appended to after
/// them (see `parse::restarts`), and says so among the skipped inputs.
fn set_aside_earlier_runs(p: &mut FileParse, skipped: &mut Vec<Skipped>, file: &str) {
    let Some(cut) = crate::parse::restarts::last_run_start(&p.events) else {
        return;
    };
    let restart_line = p.events[cut].origin.line;
    p.events.drain(..cut);
    let cut = cut as u32;
    p.links.retain(|l| l.anchor >= cut);
    p.links.iter_mut().for_each(|l| l.anchor -= cut);
    skipped.push(Skipped {
        file: file.to_string(),
        reason: format!(
            "lines before {restart_line} set aside: an earlier run of the job, which restarted and appended to this file"
        ),
    });
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
