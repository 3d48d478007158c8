//! The diagnosis result: the verdict of docs/verdict.md plus what the report
//! needs to show the reasoning.

use serde::Serialize;

use crate::model::CauseKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collective {
    pub op: Option<String>,
    pub seq: Option<i64>,
    pub pg: Option<String>,
}

/// One log line a claim rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub file: String,
    pub line: u64,
    pub time: Option<String>,
    pub rank: Option<u32>,
    pub host: Option<String>,
    pub text: String,
    pub why: String,
}

/// One cause hypothesis with its culprit and support.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    pub kind: CauseKind,
    pub confidence: f64,
    pub host: Option<String>,
    pub device: Option<String>,
    pub port: Option<u32>,
    pub gpu_bus_id: Option<String>,
    pub peer_host: Option<String>,
    pub title: String,
    pub summary: String,
    pub remedy: String,
    /// Ranks this hypothesis holds responsible.
    pub ranks: Vec<u32>,
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub status: Status,
    pub stuck_ranks: Vec<u32>,
    pub collective: Option<Collective>,
    pub cause: Option<Cause>,
    pub alternatives: Vec<Cause>,
    pub evidence: Vec<Evidence>,
}

/// What each rank was doing at the end, for the rank table and grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub gpu_bus_id: Option<String>,
    pub nics: Vec<String>,
    pub last_enqueued: Option<i64>,
    pub last_completed: Option<i64>,
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
