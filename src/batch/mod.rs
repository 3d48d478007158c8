//! `ncclpm batch`: every job under a root analysed in parallel, a per-job
//! report, `summary.jsonl`, an index and a fleet view of repeat offenders;
//! incremental reruns; shards for running past one machine, joined by
//! `ncclpm merge`.

pub mod fleet;
pub mod jobs;
mod pages;
pub mod summary;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::analyze::Engine;
use crate::grammar::knowledge::Knowledge;
use crate::report::{ReportInput, write_reports};

pub use jobs::{JobInput, find_jobs};
pub use summary::JobRow;

#[derive(Debug, Clone)]
pub struct BatchOptions {
    pub root: PathBuf,
    pub out: PathBuf,
    /// Worker threads (default: all cores).
    pub threads: Option<usize>,
    /// Analyse only shard K of N (1-based).
    pub shard: Option<(u32, u32)>,
    /// How to recognise a job under the root (default: each child).
    pub job_glob: Option<String>,
}

#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub rows: Vec<JobRow>,
    pub analyzed: usize,
    pub reused: usize,
    pub failed: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(transparent)]
    Jobs(#[from] jobs::JobsError),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {threads} worker threads")]
    Threads {
        threads: usize,
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
}

/// The jobs a run will consider (after sharding), for progress totals.
pub fn planned_jobs(opts: &BatchOptions) -> Result<Vec<JobInput>, BatchError> {
    let mut all = find_jobs(&opts.root, opts.job_glob.as_deref())?;
    if let Some((k, n)) = opts.shard {
        all.retain(|j| jobs::in_shard(&j.id, k, n));
    }
    Ok(all)
}

/// Analyses every (new or changed) job and writes all outputs. `tick` is
/// called once per finished job, for progress display.
pub fn run(
    engine: &Engine,
    opts: &BatchOptions,
    tick: &(dyn Fn() + Sync),
) -> Result<BatchOutcome, BatchError> {
    let todo = planned_jobs(opts)?;
    let previous = summary::read_rows(&opts.out.join("summary.jsonl"));
    let work = || -> Vec<(JobRow, bool)> {
        todo.par_iter()
            .map(|job| {
                let result = analyze_one(engine, opts, job, &previous);
                tick();
                result
            })
            .collect()
    };
    let results = match opts.threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|source| BatchError::Threads { threads: n, source })?
            .install(work),
        None => work(),
    };
    let mut outcome = BatchOutcome::default();
    for (row, reused) in results {
        outcome.reused += usize::from(reused);
        outcome.failed += usize::from(row.error.is_some());
        outcome.analyzed += usize::from(!reused && row.error.is_none());
        outcome.rows.push(row);
    }
    write_outputs(
        &opts.out,
        &opts.root.display().to_string(),
        &outcome.rows,
        &engine.knowledge,
    )?;
    Ok(outcome)
}

/// One job: reused when its fingerprint and report are unchanged.
fn analyze_one(
    engine: &Engine,
    opts: &BatchOptions,
    job: &JobInput,
    previous: &[JobRow],
) -> (JobRow, bool) {
    let fp = jobs::fingerprint(&job.path);
    let report_rel = format!("jobs/{}", job.id);
    let report_dir = opts.out.join(&report_rel);
    let unchanged = previous
        .iter()
        .find(|r| r.job_id == job.id && r.fingerprint == fp && r.error.is_none())
        .filter(|_| report_dir.join("report.json").is_file());
    if let Some(row) = unchanged {
        return (row.clone(), true);
    }
    let analysis = match engine.analyze(&job.path) {
        Ok(a) => a,
        Err(e) => {
            return (
                JobRow::failed(&job.id, &job.rel, &fp, error_chain(&e)),
                false,
            );
        }
    };
    let input = ReportInput {
        job: &analysis.job,
        timeline: &analysis.timeline,
        diagnosis: &analysis.diagnosis,
    };
    if let Err(e) = write_reports(&report_dir, &input, false) {
        return (
            JobRow::failed(&job.id, &job.rel, &fp, error_chain(&e)),
            false,
        );
    }
    (
        JobRow::from_analysis(&job.id, &job.rel, &fp, &report_rel, &analysis),
        false,
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// summary.jsonl, index.html, fleet.json and fleet.html.
pub fn write_outputs(
    out: &Path,
    root: &str,
    rows: &[JobRow],
    kb: &Knowledge,
) -> Result<(), BatchError> {
    let write_err = |path: PathBuf| move |source| BatchError::Write { path, source };
    std::fs::create_dir_all(out).map_err(write_err(out.to_path_buf()))?;
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    let summary_path = out.join("summary.jsonl");
    summary::write_rows(&summary_path, &sorted).map_err(write_err(summary_path.clone()))?;
    let fleet = fleet::fleet(&sorted, kb);
    let mut fleet_json = serde_json::to_string_pretty(&fleet).expect("fleet serializes");
    fleet_json.push('\n');
    for (name, text) in [
        ("fleet.json", fleet_json),
        ("index.html", pages::index_html(root, &sorted)),
        ("fleet.html", pages::fleet_html(&fleet, &sorted)),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(write_err(path.clone()))?;
    }
    Ok(())
}

/// Joins shard outputs: their rows and job reports into one output.
pub fn merge(shards: &[PathBuf], out: &Path, kb: &Knowledge) -> Result<Vec<JobRow>, BatchError> {
    let mut rows: Vec<JobRow> = Vec::new();
    for shard in shards {
        for row in summary::read_rows(&shard.join("summary.jsonl")) {
            if rows.iter().any(|r| r.job_id == row.job_id) {
                continue;
            }
            if let Some(rel) = &row.report {
                copy_dir(&shard.join(rel), &out.join(rel))?;
            }
            rows.push(row);
        }
    }
    write_outputs(out, "merged shards", &rows, kb)?;
    Ok(rows)
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), BatchError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BatchError::Write { path, source }
    };
    if from == to {
        return Ok(());
    }
    std::fs::create_dir_all(to).map_err(err(to))?;
    let entries = std::fs::read_dir(from).map_err(err(from))?;
    for entry in entries.filter_map(|e| e.ok()) {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let dest = to.join(entry.file_name());
            std::fs::copy(entry.path(), &dest).map_err(err(&dest))?;
        }
    }
    Ok(())
}
