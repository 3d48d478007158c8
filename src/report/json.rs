//! `report.json`: the verdict contract of docs/verdict.md (schema_version 1).
//! Field order is fixed by these structs; maps are sorted; no clock is
//! recorded, so the same input gives the same bytes.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::diagnose::{CounterRow, FabricFinding, RankRow, Verdict};
use crate::model::Skipped;

use super::ReportInput;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Document<'a> {
    /// Version of this document's layout; bumped only when a field is renamed
    /// or removed (fields are added freely).
    pub schema_version: u32,
    /// The tool that wrote the report.
    pub tool: Tool,
    /// What the input was.
    pub job: JobFacts,
    /// The conclusion: status, stuck ranks, collective, cause, evidence.
    pub verdict: &'a Verdict,
    /// One row per rank of the job.
    pub ranks: &'a [RankRow],
    /// Files (or archive members) not read, or read only in part, and why.
    pub skipped: &'a [Skipped],
    /// What input would have decided or strengthened the verdict.
    pub notes: &'a [String],
    /// Files whose lines were cut or not valid UTF-8.
    pub input_health: Vec<FileHealth>,
    /// Each host's estimated clock offset (its clock minus the job's clock),
    /// from collectives seen on several hosts; all times in this report are
    /// corrected by it.
    pub clock_offsets: Vec<crate::timeline::HostOffset>,
    /// Counter rises between dumps taken before and after the job,
    /// suspicious first.
    pub counters: &'a [CounterRow],
    /// What the fabric snapshots (ibstat, ibv_devinfo, show_gids, mlxlink …) show is wrong.
    pub fabric: &'a [FabricFinding],
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Tool {
    /// Always `ncclpm`.
    pub name: &'static str,
    /// The tool's version.
    pub version: &'static str,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct JobFacts {
    /// The path given to `ncclpm analyze`.
    pub path: String,
    /// World size (the largest communicator), or the ranks seen.
    pub ranks: Option<u32>,
    /// Host names as NCCL prints them (short names), sorted.
    pub hosts: Vec<String>,
    /// The NCCL version (the highest, when hosts differ).
    pub nccl_version: Option<String>,
    /// Every NCCL version seen; more than one is a configuration mismatch.
    pub nccl_versions: Vec<String>,
    /// The PyTorch version, when a log states it.
    pub torch_version: Option<String>,
    /// `NCCL_*` and `TORCH_*` settings the logs show, each with every value
    /// seen (two values for one name: ranks ran with different settings).
    pub settings: BTreeMap<String, Vec<String>>,
    /// Files read (archive members count one each).
    pub files: usize,
    /// Bytes read, after decompression.
    pub bytes: u64,
    /// Lines read.
    pub lines: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileHealth {
    pub file: String,
    pub lines: u64,
    /// Lines longer than the 64 KiB cap, cut there.
    pub truncated_lines: u64,
    /// Matched lines that were not valid UTF-8 (shown with replacement characters).
    pub lossy_lines: u64,
}

pub fn document<'a>(input: &ReportInput<'a>) -> Document<'a> {
    let job = input.job;
    let ranks = job
        .world_size
        .or_else(|| (!job.ranks.is_empty()).then_some(job.ranks.len() as u32));
    Document {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "ncclpm",
            version: env!("CARGO_PKG_VERSION"),
        },
        job: JobFacts {
            path: job.root.clone(),
            ranks,
            hosts: job.hosts.keys().cloned().collect(),
            nccl_version: job.nccl_versions.iter().next_back().cloned(),
            nccl_versions: job.nccl_versions.iter().cloned().collect(),
            torch_version: job.torch_version.clone(),
            settings: job
                .env
                .iter()
                .map(|(name, values)| (name.clone(), values.keys().cloned().collect()))
                .collect(),
            files: job.files.len(),
            bytes: job.files.iter().map(|f| f.bytes).sum(),
            lines: job.files.iter().map(|f| f.lines).sum(),
        },
        verdict: &input.diagnosis.verdict,
        ranks: &input.diagnosis.ranks,
        skipped: &job.skipped,
        notes: &input.diagnosis.notes,
        clock_offsets: input.timeline.offsets.values().cloned().collect(),
        input_health: job
            .files
            .iter()
            .filter(|f| f.truncated_lines > 0 || f.lossy_lines > 0)
            .map(|f| FileHealth {
                file: f.path.clone(),
                lines: f.lines,
                truncated_lines: f.truncated_lines,
                lossy_lines: f.lossy_lines,
            })
            .collect(),
        counters: &input.diagnosis.counters,
        fabric: &input.diagnosis.fabric,
    }
}

/// The document as one line of JSON (what the HTML report embeds).
pub fn to_compact_string(doc: &Document<'_>) -> String {
    serde_json::to_string(doc).expect("report document serializes")
}

/// The document as pretty JSON with a final newline.
pub fn to_string(doc: &Document<'_>) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("report document serializes");
    s.push('\n');
    s
}
