//! What happens in a simulated job, as data: each rank's fate, the NCCL
//! warnings it prints, what each host's kernel, counters and port snapshots
//! show, and the truth an analyzer should find. `causes` builds a story per
//! scenario; the format writers only render it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::clock::Us;
use super::plan::Hung;
use super::versions::Ver;

/// A Python exception a rank raises on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exc {
    /// `torch.cuda.OutOfMemoryError` (RuntimeError before 2.0).
    OutOfMemory,
    /// A bug in the training code: the exception line, e.g.
    /// `KeyError: 'input_ids'`.
    Bug(String),
}

/// One NCCL WARN (with the lines that follow it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warn {
    /// A work completion with an error status on a connection to `peer`
    /// (a global rank), sent from this rank's NIC `nic`.
    IbCompletion { peer: u32, status: u32, nic: u32 },
    /// An IB async event on this rank's NIC.
    IbAsync {
        nic: u32,
        event: &'static str,
        fatal: bool,
    },
    /// `Connection closed by remote peer` from `peer`'s host.
    ConnClosed { peer: u32 },
    /// A socket connect to `addr` (`ip<port>`) that failed with `errno`.
    Connect { addr: String, errno: i32 },
    /// The bootstrap root's thread (on rank 0's process) failing to hand a
    /// rank its ring neighbour: a connect to that rank's address.
    RootConnect { addr: String, errno: i32 },
    /// `ibv_modify_qp` failed towards `peer` on NIC `nic`.
    ModifyQp {
        nic: u32,
        errno: i32,
        peer: u32,
        gid_index: u32,
    },
    /// `ibv_reg_mr` ran out of pinned memory.
    RegMr,
    /// Bootstrap message of the wrong size (peers on different versions).
    Truncated { got: u32, want: u32 },
    /// A CUDA call failed.
    Cuda { msg: String },
}

/// How one rank's run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Trained to the end.
    Finish,
    /// Still training when the job was cancelled.
    Cancelled,
    /// Waited in the hung collective (with this op and size) until the
    /// watchdog fired; `enqueued` is its last enqueued sequence number.
    Timeout {
        op: &'static str,
        numel_in: u64,
        numel_out: u64,
        enqueued: u64,
    },
    /// NCCL reported these errors (at these times); the watchdog raised
    /// the last and aborted.
    NcclError { warns: Vec<(Us, Warn)>, result: u8 },
    /// Stopped writing at `at` with `enqueued` as its last enqueued work.
    Silent { at: Us, enqueued: u64 },
    /// Raised a Python exception at `at`.
    Exception { at: Us, exc: Exc },
    /// Killed by `signal` at `at` (SIGKILL from the OOM killer, SIGSEGV).
    Signal { at: Us, signal: i32 },
    /// A CUDA error from a failing GPU reached the watchdog at `at`.
    CudaError { at: Us, msg: String },
    /// NCCL failed in communicator init with these errors; the Python call
    /// raised after the last.
    InitError { warns: Vec<(Us, Warn)>, result: u8 },
    /// Blocked in communicator init until killed.
    InitBlocked,
    /// Blocked in init too, after its process's bootstrap root thread
    /// printed these errors (the root's failure is not the rank's: NCCL
    /// never hands it back to the caller).
    RootFailed { warns: Vec<(Us, Warn)> },
    /// PyTorch's collective checker (TORCH_DISTRIBUTED_DEBUG=DETAIL) found
    /// that `other` runs a different collective at the same sequence number.
    Mismatch {
        at: Us,
        mine: &'static str,
        other_rank: u32,
        other: &'static str,
    },
}

/// A port whose snapshot differs from the healthy default.
#[derive(Debug, Clone, Default)]
pub struct PortOverride {
    pub nic: u32,
    /// ibstat `State` and `Physical state`.
    pub state: Option<(&'static str, &'static str)>,
    /// Active rate in Gb/s and width (`2X`).
    pub rate: Option<(u32, &'static str)>,
    /// Active MTU in bytes.
    pub active_mtu: Option<u32>,
    /// The port has no IPv4 (RoCE v2) GIDs.
    pub no_ipv4_gid: bool,
}

/// What one host's system sources show beyond the healthy baseline.
#[derive(Debug, Clone, Default)]
pub struct HostStory {
    /// Kernel message bodies at true times.
    pub kernel: Vec<(Us, String)>,
    /// Counter growth over the job on top of traffic: (NIC, name, delta).
    pub counters: Vec<(u32, &'static str, u64)>,
    pub ports: Vec<PortOverride>,
    /// A different NCCL on this host.
    pub nccl_version: Option<Ver>,
    /// NCCL's socket interface here, when not the job's (iface, ip).
    pub socket: Option<(String, String)>,
    /// Extra `NCCL_* set by environment` settings printed here.
    pub env: Vec<(String, String)>,
    /// NCCL uses sockets here instead of IB.
    pub sockets_only: bool,
    /// This NIC's cable reaches another rail's leaf switch.
    pub miscabled_nic: Option<u32>,
    /// IB async events of this host's NICs. Every process prints them:
    /// ncclIbInit starts an event thread for every device it finds, used
    /// by that rank or not.
    pub ib_async: Vec<(Us, Warn)>,
}

/// How the job as a whole ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Every rank exits by itself.
    Exits,
    /// The user cancelled it at this time.
    Cancelled(Us),
    /// The scheduler killed what was left at its time limit.
    TimeLimit(Us),
}

/// The expected verdict (docs/verdict.md fields).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Truth {
    pub status: &'static str,
    pub stuck_ranks: Vec<u32>,
    pub collective: Option<TruthCollective>,
    pub cause: Option<TruthCause>,
    /// One line on what happened, for humans.
    pub story: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TruthCollective {
    pub op: String,
    pub seq: u64,
    pub pg: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TruthCause {
    pub kind: &'static str,
    pub host: Option<String>,
    pub device: Option<String>,
    pub port: Option<u32>,
    pub gpu_bus_id: Option<String>,
    pub peer_host: Option<String>,
}

/// The whole story of one job.
#[derive(Debug, Clone)]
pub struct Story {
    pub truth: Truth,
    /// The fate of every rank not in `fates`.
    pub default_fate: Fate,
    pub fates: BTreeMap<u32, Fate>,
    pub hosts: BTreeMap<usize, HostStory>,
    pub end: End,
    /// The collective the job hangs in (or would have run next).
    pub hung: Hung,
    /// When that collective was enqueued.
    pub hang_at: Us,
    /// Steps slow down from this time (congestion, degraded ports).
    pub slow_from: Option<Us>,
    /// TORCH_DISTRIBUTED_DEBUG=DETAIL is set.
    pub detail_debug: bool,
    /// `NCCL_*` settings of every host beyond the usual ones.
    pub env: Vec<(String, String)>,
}

impl Fate {
    /// When the rank's own failure shows (its first error or its death).
    pub fn failed_at(&self) -> Option<Us> {
        match self {
            Fate::NcclError { warns, .. } | Fate::InitError { warns, .. } => {
                warns.iter().map(|w| w.0).min()
            }
            Fate::Silent { at, .. }
            | Fate::Exception { at, .. }
            | Fate::Signal { at, .. }
            | Fate::CudaError { at, .. }
            | Fate::Mismatch { at, .. } => Some(*at),
            _ => None,
        }
    }
}

impl Story {
    pub fn fate(&self, rank: u32) -> &Fate {
        self.fates.get(&rank).unwrap_or(&self.default_fate)
    }

    pub fn host(&self, host: usize) -> Option<&HostStory> {
        self.hosts.get(&host)
    }

    pub fn host_mut(&mut self, host: usize) -> &mut HostStory {
        self.hosts.entry(host).or_default()
    }
}
