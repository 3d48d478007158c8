//! Facts that come from tables rather than log lines: NIC / IB counter dumps,
//! fabric snapshots (ibstat, ibstatus, ibv_devinfo, show_gids, mlxlink) and
//! PyTorch Flight Recorder dumps. Each keeps its origin for citation.

use std::num::NonZeroU64;

use schemars::JsonSchema;
use serde::Serialize;

use super::counter_store::CounterStore;
use super::{Origin, Sym};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
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
    /// Host, device and name are shared with the file's other readings
    /// (a large job holds millions).
    pub host: Option<Sym>,
    /// HCA (`mlx5_3`) or netdev (`ens1f0`) the counter belongs to.
    pub device: Sym,
    pub port: Option<u32>,
    pub name: Sym,
    pub value: u64,
    pub source: CounterSource,
    pub phase: Phase,
    /// Width in bits where the counter saturates (legacy IB PMA counters).
    pub width_bits: Option<u8>,
    /// When the dump was taken, as `YYYYMMDDhhmmss`, where its name or
    /// content says (never zero, so the option costs nothing).
    pub taken_at: Option<NonZeroU64>,
    #[serde(skip)]
    pub origin: Origin,
    /// The line as written, for citation; none where the file can be
    /// re-read (the report then reads the cited line again).
    #[serde(skip)]
    pub text: Option<Sym>,
}

/// A table line kept for citation: where it is and its text as written.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceLine {
    pub origin: Origin,
    pub text: Box<str>,
}

/// How one counter moved between a dump taken before and one taken after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterDelta {
    /// Names shared with the job's other deltas (hundreds of thousands at
    /// scale).
    pub host: Option<Sym>,
    pub device: Sym,
    pub port: Option<u32>,
    pub name: Sym,
    pub source: CounterSource,
    pub width_bits: Option<u8>,
    pub before: u64,
    pub after: u64,
    /// `after − before`; `None` when it cannot be known (a counter reset, or
    /// one already saturated before). With `saturated` it is a lower bound.
    pub delta: Option<u64>,
    /// The counter sat at its maximum (2^w − 1) at either end: IB PMA counters
    /// stop there, so the true delta is at least `delta`, or unknown.
    pub saturated: bool,
    /// `after < before`: the counter was cleared or the driver reloaded.
    pub reset: bool,
    /// A 32-bit traffic counter went down: it probably wrapped (once, assumed).
    pub wrap_suspect: bool,
    /// The after reading's line, cited as evidence (its text is empty
    /// where the file can be re-read).
    #[serde(skip)]
    pub cite: SourceLine,
}

#[cfg(test)]
impl CounterDelta {
    /// A counter of `host`'s `device` port 1 that went from `before` to
    /// `after` between two sysfs dumps (for the rules' tests).
    pub fn rose(host: &str, device: &str, name: &str, before: u64, after: u64) -> CounterDelta {
        CounterDelta {
            host: Some(host.into()),
            device: device.into(),
            port: Some(1),
            name: name.into(),
            source: CounterSource::Sysfs,
            width_bits: None,
            before,
            after,
            delta: after.checked_sub(before),
            saturated: false,
            reset: after < before,
            wrap_suspect: false,
            cite: SourceLine {
                origin: Origin {
                    file: super::FileId(0),
                    line: 1,
                },
                text: Box::default(),
            },
        }
    }
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
    /// The NIC's PCI function, where the tool prints it (`ibdev2netdev -v`).
    #[serde(skip)]
    pub pci: Option<String>,
    pub firmware: Option<String>,
    /// The port is Down / Disabled: tools print a placeholder rate (40, 10)
    /// that means nothing. The rate is kept but must not be compared.
    pub rate_placeholder: bool,
    /// mlxlink's Effective Physical BER (after FEC), where shown.
    pub effective_ber: Option<f64>,
    /// mlxlink's Raw Physical BER (before FEC), where shown.
    pub raw_ber: Option<f64>,
    /// mlxlink's troubleshooting recommendation, when it is not "No issue".
    pub recommendation: Option<String>,
    /// The host's tool no longer found the device (`ibpanic: … stat of IB
    /// device 'mlx5_2' failed: No such file or directory`): the driver let
    /// go of it (a fatal NIC fault, the function fell off the bus).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vanished: bool,
    #[serde(skip)]
    pub origin: Option<Origin>,
    /// The line each field was read from (`state`, `rate`, `mtu`, …).
    #[serde(skip)]
    pub lines: LineMap,
}

/// Field name → the line it was read from, sorted by name. A snapshot cites
/// a handful; a map node per snapshot cost 500 bytes, and a 16k-rank job
/// holds 50k snapshots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineMap(Vec<(&'static str, SourceLine)>);

impl LineMap {
    pub fn insert(&mut self, field: &'static str, line: SourceLine) {
        match self.0.binary_search_by(|(k, _)| (*k).cmp(field)) {
            Ok(i) => self.0[i].1 = line,
            Err(i) => self.0.insert(i, (field, line)),
        }
    }

    pub fn get(&self, field: &str) -> Option<&SourceLine> {
        self.0
            .binary_search_by(|(k, _)| (*k).cmp(field))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }

    pub fn contains_key(&self, field: &str) -> bool {
        self.get(field).is_some()
    }

    /// Moves every line to file `id` (the id the job gives the file once
    /// every file is read).
    pub fn set_file(&mut self, id: super::FileId) {
        for (_, line) in &mut self.0 {
            line.origin.file = id;
        }
    }

    /// The lines in field-name order.
    pub fn values(&self) -> impl Iterator<Item = &SourceLine> {
        self.0.iter().map(|(_, l)| l)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &SourceLine)> {
        self.0.iter().map(|(k, l)| (*k, l))
    }
}

impl<const N: usize> From<[(&'static str, SourceLine); N]> for LineMap {
    fn from(lines: [(&'static str, SourceLine); N]) -> LineMap {
        let mut map = LineMap::default();
        for (k, l) in lines {
            map.insert(k, l);
        }
        map
    }
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
    /// The line as written, for citation.
    #[serde(skip)]
    pub text: Box<str>,
}

/// What the switch at the far end of a host's cable says about itself
/// (LLDP, as `lldpcli show neighbors` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkNeighbor {
    pub host: Option<String>,
    /// The host's interface the cable is plugged into (`ens12f0np0`).
    pub netdev: String,
    /// The switch's system name (`leaf-rail3-a`).
    pub switch: String,
    /// The switch's port (`swp8s1`), where it says.
    pub switch_port: Option<String>,
    #[serde(skip)]
    pub origin: Option<Origin>,
    /// The line naming the switch, for citation.
    #[serde(skip)]
    pub line: Option<SourceLine>,
}

/// One member port of a Linux bond, as `/proc/net/bonding/<bond>` shows
/// it. A RoCE LAG's RDMA device (`mlx5_bond_0`) sits on the bond (`bond0`),
/// while `ethtool -S` counts each member netdev: the bond ties them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BondSlave {
    pub host: Option<String>,
    /// The bond's netdev (`bond0`), where the capture names it.
    pub bond: Option<String>,
    /// The member's netdev (`ens1f0np0`).
    pub netdev: String,
    /// The member's own `MII Status:` (carrier): `false` is a member down.
    pub up: Option<bool>,
    pub speed_mbps: Option<u64>,
    /// `Link Failure Count:` since the bond was made.
    pub link_failures: Option<u64>,
    #[serde(skip)]
    pub origin: Option<Origin>,
    /// The member's `Slave Interface:` line, for citation.
    #[serde(skip)]
    pub line: Option<SourceLine>,
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

/// A process group's progress as a Flight Recorder dump states it (−1 = none).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlightPgStatus {
    pub pg_id: String,
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    pub last_completed: Option<i64>,
}

/// A process group's name, description and members (global ranks).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlightPgConfig {
    pub name: String,
    pub desc: Option<String>,
    pub ranks: Vec<u32>,
}

/// A Flight Recorder dump of one rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlightDump {
    /// Global rank (from the file name suffix, or the dump itself).
    pub rank: Option<u32>,
    pub version: Option<String>,
    pub nccl_version: Option<String>,
    pub pg_status: Vec<FlightPgStatus>,
    pub pg_config: Vec<FlightPgConfig>,
    pub entries: Vec<FlightEntry>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// One GPU as `nvidia-smi` (its table or `-q`) showed it, with what the
/// tool's own fields say is wrong with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuSnapshot {
    pub host: Option<String>,
    /// The GPU's PCI address, normalised (`0000:07:00.0`).
    pub pci: Option<String>,
    /// The table's GPU number (`-q` prints none).
    pub index: Option<u32>,
    pub product: Option<String>,
    pub findings: Vec<GpuFinding>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// One field of a GPU snapshot that shows a fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFinding {
    /// The `[[gpu_health]]` entry of knowledge.toml it is (`remap_failure`, …).
    pub finding: &'static str,
    /// The value as printed (`Yes`, `4`, `ERR!`).
    pub value: String,
    #[serde(skip)]
    pub line: SourceLine,
}

/// A non-line fact from a table file.
#[derive(Debug, Clone, PartialEq)]
pub enum SysRecord {
    Counter(CounterReading),
    // Boxed: a large job holds millions of counter readings, and the enum is
    // as large as its largest variant.
    Port(Box<PortSnapshot>),
    Gid(Box<GidEntry>),
    Flight(Box<FlightDump>),
    Gpu(Box<GpuSnapshot>),
    Neighbor(Box<LinkNeighbor>),
    BondSlave(Box<BondSlave>),
}

/// The table records of a whole job, by kind, as parsed files are merged.
#[derive(Debug, Default)]
pub struct SysTables {
    pub counters: CounterStore,
    pub ports: Vec<PortSnapshot>,
    pub gids: Vec<GidEntry>,
    pub flight: Vec<FlightDump>,
    pub gpus: Vec<GpuSnapshot>,
    pub neighbors: Vec<LinkNeighbor>,
    pub bond_slaves: Vec<BondSlave>,
}

impl SysTables {
    pub fn push(&mut self, record: SysRecord) {
        match record {
            SysRecord::Counter(c) => self.counters.push(c),
            SysRecord::Port(p) => self.ports.push(*p),
            SysRecord::Gid(g) => self.gids.push(*g),
            SysRecord::Flight(f) => self.flight.push(*f),
            SysRecord::Gpu(g) => self.gpus.push(*g),
            SysRecord::Neighbor(n) => self.neighbors.push(*n),
            SysRecord::BondSlave(b) => self.bond_slaves.push(*b),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
            && self.ports.is_empty()
            && self.gids.is_empty()
            && self.flight.is_empty()
            && self.gpus.is_empty()
            && self.neighbors.is_empty()
            && self.bond_slaves.is_empty()
    }
}

impl SysRecord {
    /// The record re-pointed at file `id` (ids are assigned after parsing).
    pub fn with_file(mut self, id: super::FileId) -> SysRecord {
        match &mut self {
            SysRecord::Counter(c) => c.origin.file = id,
            SysRecord::Port(p) => {
                set_file(&mut p.origin, id);
                p.lines.set_file(id);
            }
            SysRecord::Gid(g) => set_file(&mut g.origin, id),
            SysRecord::Flight(f) => set_file(&mut f.origin, id),
            SysRecord::Neighbor(n) => {
                set_file(&mut n.origin, id);
                if let Some(line) = &mut n.line {
                    line.origin.file = id;
                }
            }
            SysRecord::BondSlave(b) => {
                set_file(&mut b.origin, id);
                if let Some(line) = &mut b.line {
                    line.origin.file = id;
                }
            }
            SysRecord::Gpu(g) => {
                set_file(&mut g.origin, id);
                for f in &mut g.findings {
                    f.line.origin.file = id;
                }
            }
        }
        self
    }
}

fn set_file(origin: &mut Option<Origin>, id: super::FileId) {
    if let Some(o) = origin {
        o.file = id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FileId;

    #[test]
    fn a_port_moved_to_its_files_final_id_cites_its_lines_there() {
        // A snapshot's field lines are read before the job numbers its
        // files: a finding citing the old id named another file.
        let at = |file| SourceLine {
            origin: Origin {
                file: FileId(file),
                line: 38,
            },
            text: "".into(),
        };
        let port = PortSnapshot {
            device: "mlx5_2".into(),
            origin: Some(at(0).origin),
            lines: LineMap::from([("state", at(0))]),
            ..PortSnapshot::default()
        };
        let SysRecord::Port(moved) = SysRecord::Port(Box::new(port)).with_file(FileId(7)) else {
            unreachable!()
        };
        assert_eq!(moved.origin.unwrap().file, FileId(7));
        assert_eq!(moved.lines.get("state").unwrap().origin.file, FileId(7));
    }
}
