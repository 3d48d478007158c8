//! `summary.jsonl`: one line per job — the verdict's headline fields, or the
//! error that kept the job from being analysed. Read back on reruns (to reuse
//! unchanged jobs) and by `merge`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analyze::Analysis;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub job_id: String,
    /// Path relative to the batch root.
    pub path: String,
    pub fingerprint: String,
    /// Folder of the job's reports, relative to the batch output.
    pub report: Option<String>,
    pub status: Option<String>,
    pub stuck_ranks: Vec<u32>,
    pub op: Option<String>,
    pub seq: Option<i64>,
    pub pg: Option<String>,
    pub cause: Option<String>,
    pub confidence: Option<f64>,
    pub host: Option<String>,
    pub device: Option<String>,
    pub port: Option<u32>,
    pub gpu_bus_id: Option<String>,
    pub peer_host: Option<String>,
    pub ranks: Option<u32>,
    /// When the job failed, as far as its logs say (the last stamped line).
    pub time: Option<String>,
    /// Why the job could not be analysed.
    pub error: Option<String>,
}

impl JobRow {
    pub fn from_analysis(
        job_id: &str,
        path: &str,
        fingerprint: &str,
        report: &str,
        a: &Analysis,
    ) -> JobRow {
        let v = &a.diagnosis.verdict;
        let cause = v.cause.as_ref();
        let last_time = (0..a.job.events.len())
            .filter_map(|i| a.timeline.time_of(i))
            .max();
        JobRow {
            job_id: job_id.into(),
            path: path.into(),
            fingerprint: fingerprint.into(),
            report: Some(report.into()),
            status: Some(v.status.name().into()),
            stuck_ranks: v.stuck_ranks.clone(),
            op: v.collective.as_ref().and_then(|c| c.op.clone()),
            seq: v.collective.as_ref().and_then(|c| c.seq),
            pg: v.collective.as_ref().and_then(|c| c.pg.clone()),
            cause: cause.map(|c| c.kind.name().to_string()),
            confidence: cause.map(|c| c.confidence),
            host: cause.and_then(|c| c.host.clone()),
            device: cause.and_then(|c| c.device.clone()),
            port: cause.and_then(|c| c.port),
            gpu_bus_id: cause.and_then(|c| c.gpu_bus_id.clone()),
            peer_host: cause.and_then(|c| c.peer_host.clone()),
            ranks: a
                .job
                .world_size
                .or_else(|| (!a.job.ranks.is_empty()).then_some(a.job.ranks.len() as u32)),
            // A year-less stamp (c10 `E1129 …` with no dated line) cannot be
            // ordered against other jobs' times: leave it out.
            time: last_time
                .filter(|_| a.timeline.year_known)
                .map(|t| a.timeline.format(&t)),
            error: None,
        }
    }

    pub fn failed(job_id: &str, path: &str, fingerprint: &str, error: String) -> JobRow {
        JobRow {
            job_id: job_id.into(),
            path: path.into(),
            fingerprint: fingerprint.into(),
            error: Some(error),
            ..JobRow::default()
        }
    }
}

/// Rows of an existing summary (missing file: none; bad lines are ignored,
/// they only cost a re-analysis).
pub fn read_rows(path: &Path) -> Vec<JobRow> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect()
}

/// Writes rows, one JSON object per line, sorted by job id.
pub fn write_rows(path: &Path, rows: &[JobRow]) -> std::io::Result<()> {
    let mut sorted: Vec<&JobRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for row in sorted {
        serde_json::to_writer(&mut out, row)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
