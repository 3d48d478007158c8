//! The diagnosis result: the verdict of docs/verdict.md plus what the report
//! needs to show the reasoning.

use schemars::JsonSchema;
use serde::Serialize;

use crate::model::CauseKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Hang,
    Crash,
    InitFailure,
    Degraded,
    Healthy,
    Unknown,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Hang => "hang",
            Status::Crash => "crash",
            Status::InitFailure => "init_failure",
            Status::Degraded => "degraded",
            Status::Healthy => "healthy",
            Status::Unknown => "unknown",
        }
    }
}

/// The collective the job was stuck in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Collective {
    /// OpType as PyTorch prints it (`ALLREDUCE`, `_REDUCE_SCATTER_BASE`, …).
    pub op: Option<String>,
    /// The collective's sequence number in its process group (`SeqNum`).
    pub seq: Option<i64>,
    /// The process group id (`0` is the default group).
    pub pg: Option<String>,
}

/// One log line a claim rests on.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Evidence {
    /// Path relative to the job root (`archive!member` inside archives).
    pub file: String,
    /// 1-based line number; 0 for facts read from a whole file (a binary dump).
    pub line: u64,
    /// The line's time on the job's clock, when it has one.
    pub time: Option<String>,
    /// The rank that wrote the line, when known.
    pub rank: Option<u32>,
    /// The host that wrote the line, when known.
    pub host: Option<String>,
    /// The line as written (capped at 2,000 characters).
    pub text: String,
    /// Why the line matters for the claim.
    pub why: String,
    /// The lines around it (the cited line included), when the file could be
    /// read again.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub context: Vec<ContextLine>,
}

/// One line of context around a cited line.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ContextLine {
    pub line: u64,
    pub text: String,
}

/// One cause hypothesis with its culprit and support.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Cause {
    /// One of the cause kinds of docs/verdict.md.
    pub kind: CauseKind,
    /// 0 to 1: independent sources of support combine, one weak signal stays weak.
    pub confidence: f64,
    /// The culprit host.
    pub host: Option<String>,
    /// The culprit NIC (`mlx5_3`), where the cause is a port or an HCA.
    pub device: Option<String>,
    /// The NIC's port.
    pub port: Option<u32>,
    /// The culprit GPU's PCI address (`0000:86:00.0`).
    pub gpu_bus_id: Option<String>,
    /// The other end of the failing link.
    pub peer_host: Option<String>,
    /// A short name for the cause.
    pub title: String,
    /// One sentence a human reads first.
    pub summary: String,
    /// What to do next, with the commands for the culprit host and device.
    pub remedy: String,
    /// Ranks this hypothesis holds responsible.
    pub ranks: Vec<u32>,
    /// The lines this cause rests on, strongest first.
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Verdict {
    /// hang, crash, init_failure, degraded, healthy or unknown.
    pub status: Status,
    /// The culprits: the ranks the others waited for, not every rank that timed out.
    pub stuck_ranks: Vec<u32>,
    /// The collective that hung; null when none was in flight.
    pub collective: Option<Collective>,
    /// The most likely cause; null only when the status is healthy.
    pub cause: Option<Cause>,
    /// Other causes considered, most likely first.
    pub alternatives: Vec<Cause>,
    /// The lines the verdict rests on: the cause's, then a few victims'.
    pub evidence: Vec<Evidence>,
}

/// What each rank was doing at the end, for the rank table and grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RankState {
    /// The culprit: the rank the others waited for.
    Stuck,
    Crashed,
    /// Stopped by the launcher after another rank failed.
    Killed,
    TimedOut,
    /// Reported an NCCL / network error, no timeout.
    Error,
    /// Has logs, but said nothing while others timed out.
    Silent,
    Completed,
    /// Logs present, no sign of trouble.
    Running,
    /// No log line of this rank was found.
    NoLogs,
}

impl RankState {
    pub fn name(self) -> &'static str {
        match self {
            RankState::Stuck => "stuck",
            RankState::Crashed => "crashed",
            RankState::Killed => "killed",
            RankState::TimedOut => "timed_out",
            RankState::Error => "error",
            RankState::Silent => "silent",
            RankState::Completed => "completed",
            RankState::Running => "running",
            RankState::NoLogs => "no_logs",
        }
    }
}

/// Per rank, what the report lists.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RankRow {
    /// Global rank.
    pub rank: u32,
    pub host: Option<String>,
    /// Process id (NCCL's PID).
    pub pid: Option<u32>,
    /// The rank's GPU, `dddd:bb:dd.f`.
    pub gpu_bus_id: Option<String>,
    /// The HCAs the rank's network traffic uses.
    pub nics: Vec<String>,
    /// Last collective enqueued in the hung process group.
    pub last_enqueued: Option<i64>,
    /// Last collective completed in the hung process group.
    pub last_completed: Option<i64>,
    /// What the rank was doing at the end.
    pub state: RankState,
}

/// Everything the diagnosis concluded.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub verdict: Verdict,
    pub ranks: Vec<RankRow>,
    /// What input was missing and would have helped.
    pub notes: Vec<String>,
    /// Counter rises between the dumps before and after, suspicious first.
    pub counters: Vec<super::CounterRow>,
    /// What the fabric snapshots show is wrong.
    pub fabric: Vec<super::FabricFinding>,
}
