//! Facts that come from tables rather than log lines: NIC / IB counter dumps,
//! fabric snapshots (ibstat, ibstatus, ibv_devinfo, show_gids, mlxlink) and
//! PyTorch Flight Recorder dumps. Each keeps its origin for citation.

use serde::Serialize;

use super::Origin;

/// When a counter dump was taken relative to the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Before,
    After,
    /// A single dump, or one whose place could not be told from its path.
    Unknown,
}

/// Which tool printed a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterSource {
    /// `/sys/class/infiniband/<dev>/ports/<p>/counters/`.
    Sysfs,
    /// `/sys/class/infiniband/<dev>/ports/<p>/hw_counters/`.
    HwCounters,
    Perfquery,
    Ethtool,
    RdmaStatistic,
    Mlxlink,
}

/// One counter value from one dump.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterReading {
    pub host: Option<String>,
    /// HCA (`mlx5_3`) or netdev (`ens1f0`) the counter belongs to.
    pub device: String,
    pub port: Option<u32>,
    pub name: String,
    pub value: u64,
    pub source: CounterSource,
    pub phase: Phase,
    /// Width in bits where the counter saturates (legacy IB PMA counters).
    pub width_bits: Option<u8>,
    #[serde(skip)]
    pub origin: Origin,
}

/// The state of one port as a snapshot tool printed it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PortSnapshot {
    pub host: Option<String>,
    pub device: String,
    pub port: Option<u32>,
    /// `Active`, `Down`, `Initializing`, `Armed` (normalised to these words).
    pub state: Option<String>,
    /// `LinkUp`, `Disabled`, `Polling`, …
    pub phys_state: Option<String>,
    pub rate_gbps: Option<f64>,
    pub width: Option<String>,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: Option<String>,
    pub active_mtu: Option<u32>,
    pub max_mtu: Option<u32>,
    pub lid: Option<u32>,
    pub sm_lid: Option<u32>,
    pub netdev: Option<String>,
    pub firmware: Option<String>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// One RoCE / IB GID table entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GidEntry {
    pub host: Option<String>,
    pub device: String,
    pub port: Option<u32>,
    pub index: u32,
    pub gid: String,
    pub ipv4: Option<String>,
    /// `v1` / `v2` (RoCE version), or `IB`.
    pub version: Option<String>,
    pub netdev: Option<String>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// One entry of a Flight Recorder dump.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlightEntry {
    pub pg_id: Option<String>,
    pub pg_name: Option<String>,
    pub pg_desc: Option<String>,
    pub collective_seq_id: Option<i64>,
    pub p2p_seq_id: Option<i64>,
    pub op: Option<String>,
    pub is_p2p: bool,
    pub input_sizes: Vec<Vec<i64>>,
    pub output_sizes: Vec<Vec<i64>>,
    pub state: Option<String>,
    pub time_created_ns: Option<i64>,
    pub time_started_ns: Option<i64>,
    pub time_completed_ns: Option<i64>,
    pub timeout_ms: Option<i64>,
    pub retired: Option<bool>,
}

/// A Flight Recorder dump of one rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlightDump {
    /// Global rank (from the file name suffix, or the dump itself).
    pub rank: Option<u32>,
    pub version: Option<String>,
    pub nccl_version: Option<String>,
    /// pg id → (last enqueued, last started, last completed).
    #[allow(clippy::type_complexity)] // the dump's own tuple, kept as read
    pub pg_status: Vec<(String, Option<i64>, Option<i64>, Option<i64>)>,
    /// pg name → (description, global ranks).
    pub pg_config: Vec<(String, Option<String>, Vec<u32>)>,
    pub entries: Vec<FlightEntry>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// A non-line fact from a table file.
#[derive(Debug, Clone, PartialEq)]
pub enum SysRecord {
    Counter(CounterReading),
    Port(PortSnapshot),
    Gid(GidEntry),
    Flight(FlightDump),
}
