//! The job: every parsed event joined into one picture of ranks, hosts, NICs,
//! process groups and process deaths.

use std::collections::{BTreeMap, BTreeSet};

use compact_str::CompactString;
use schemars::JsonSchema;
use serde::Serialize;

use super::kernel::KernelMap;
use super::{
    BondSlave, CounterDelta, CounterSource, Event, EventKind, FileId, FlightDump, GidEntry,
    GpuSnapshot, LinkNeighbor, PortSnapshot, RawTime, StackDump,
};

/// Index into `Job::events`.
pub type EventIdx = usize;

/// What a file's path says about its writer (see `ingest::path_hints`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathHints {
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    /// The folder that holds exactly one worker process's files (torchrun
    /// log-dir): every file in it belongs to the same rank.
    pub process_dir: Option<String>,
}

/// A file (or archive member) the analysis could not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
}

/// One input file and what reading it found.
#[derive(Debug, Clone, Default)]
pub struct FileInfo {
    pub id: FileId,
    pub path: String,
    pub bytes: u64,
    pub lines: u64,
    pub matched_lines: u64,
    pub truncated_lines: u64,
    pub lossy_lines: u64,
    pub hints: PathHints,
    /// The file's lines come from many processes (a launcher merged them).
    pub multiplexed: bool,
    /// Its matched lines that Ray prefixed as an actor's (`(Worker pid=N)`).
    pub ray_actor_lines: RayActorLines,
}

/// Matched lines of Ray actors, by node: Ray names the node (`ip=…`) only
/// for an actor on another node than the driver's (`print_worker_logs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RayActorLines {
    pub on_driver_node: u64,
    pub elsewhere: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NicInfo {
    pub port: Option<u32>,
    /// `IB` or `RoCE` as NCCL printed it.
    pub link_layer: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct HostInfo {
    pub ips: BTreeSet<String>,
    pub nics: BTreeMap<String, NicInfo>,
    pub ranks: BTreeSet<u32>,
    /// Socket interfaces NCCL listed (`eth0:10.0.0.1`).
    pub socket_ifaces: BTreeSet<String>,
    /// Global addresses the host's own tools listed (`ip addr`, `ifconfig`).
    pub listed_ips: BTreeSet<String>,
    pub nccl_versions: BTreeSet<String>,
}

#[derive(Debug, Clone, Default)]
pub struct RankInfo {
    pub rank: u32,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub local_rank: Option<u32>,
    /// PCI address, `dddd:bb:dd.f`.
    pub gpu_bus_id: Option<String>,
    pub cuda_dev: Option<u32>,
    /// HCAs NCCL listed for this process, in NCCL's index order.
    pub nics_listed: Vec<(String, Option<u32>)>,
    /// HCA indices this rank's network channels use (`via NET/IB/1`).
    pub net_devs_used: BTreeSet<u32>,
    /// The rank logged its channels (`via P2P/IPC`, `via NET/IB/0`): where
    /// none went through the network, it sends over no NIC.
    pub channels_logged: bool,
}

impl RankInfo {
    /// The HCAs this rank's network traffic goes through: the ones its channel
    /// lines name (none where every channel stays within the host), or every
    /// listed one when channels were not logged.
    pub fn nics(&self) -> Vec<(String, Option<u32>)> {
        self.nic_entries().cloned().collect()
    }

    /// [`RankInfo::nics`] without a copy, in NCCL's index order (the kernel
    /// placement asks this of every rank of a host for each of its lines).
    pub fn nic_entries(&self) -> impl Iterator<Item = &(String, Option<u32>)> {
        let listed = self.nics_listed.len();
        let any_used = self.net_devs_used.iter().any(|&i| (i as usize) < listed);
        // Channels all within the host (P2P, SHM): the rank uses no NIC.
        let host_only = self.channels_logged && self.net_devs_used.is_empty();
        self.nics_listed
            .iter()
            .enumerate()
            .filter(move |_| !host_only)
            .filter(move |(i, _)| !any_used || self.net_devs_used.contains(&(*i as u32)))
            .map(|(_, nic)| nic)
    }
}

/// One caller's last calls on one communicator, from NCCL's COLL trace.
#[derive(Debug, Clone, Default)]
pub struct CallTrace {
    /// The communicator as all its members name it: `commId 0x…`, or
    /// `nranks N` where each caller has one communicator of that size.
    pub comm: String,
    /// The caller's global rank, where known, and its rank in the
    /// communicator.
    pub rank: Option<u32>,
    pub comm_rank: Option<u32>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// The calls kept, in order (the last few the caller made).
    pub calls: Vec<EventIdx>,
    /// Calls made before the first kept one and let go.
    pub earlier: u64,
}

/// One rank's view of one process group, from its watchdog and status lines.
#[derive(Debug, Clone, Default)]
pub struct PgRankState {
    /// The sequence number its watchdog timed out on (or failed at).
    pub failed_seq: Option<i64>,
    pub op: Option<String>,
    pub numel_in: Option<i64>,
    pub numel_out: Option<i64>,
    pub last_enqueued: Option<i64>,
    pub last_completed: Option<i64>,
    pub timeout_ms: Option<i64>,
    pub timed_out: bool,
    pub evidence: Vec<EventIdx>,
}

/// How a process died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathKind {
    /// An uncaught Python exception (its own, not a consequence of NCCL).
    Exception,
    /// Killed by a signal (SIGKILL, SIGSEGV, SIGABRT …).
    Signal,
    /// Exited with a non-zero status.
    ExitCode,
    /// Its node failed under it (the scheduler lost the node: power,
    /// kernel panic, hardware).
    NodeLost,
}

/// A process death, as one or more sources report it.
#[derive(Debug, Clone)]
pub struct Death {
    pub rank: Option<u32>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub kind: DeathKind,
    pub exitcode: Option<i64>,
    pub signal: Option<String>,
    /// One line saying what happened (`torch.cuda.OutOfMemoryError: CUDA out of memory`).
    pub reason: String,
    /// The death was caused by NCCL / the watchdog (a victim, not a culprit).
    pub consequence: bool,
    /// The launcher stopped this process after another one failed.
    pub stopped_by_launcher: bool,
    /// The launcher's SIGTERM did not stop it: it had to be killed.
    pub ignored_sigterm: bool,
    pub time: RawTime,
    pub evidence: Vec<EventIdx>,
}

/// A network connection between two ranks, from NCCL's channel lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NetLink {
    pub src: u32,
    pub dst: u32,
}

/// One NCCL channel line reduced to the two ranks it connects. The process,
/// transport and NIC are those of `anchor`: the channel event kept for the
/// same process, transport and NIC (NCCL prints one line per channel and
/// peer, millions in a large job; only their ends are new facts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PeerLink {
    pub anchor: u32,
    pub src: u32,
    pub dst: u32,
}

#[derive(Debug, Default)]
pub struct Job {
    pub root: String,
    pub files: Vec<FileInfo>,
    /// All events, ordered by (file, line); `who.rank` filled where it could be
    /// resolved.
    pub events: Vec<Event>,
    pub world_size: Option<u32>,
    pub hosts: BTreeMap<String, HostInfo>,
    pub ranks: BTreeMap<u32, RankInfo>,
    /// Peer addresses (IPs, reverse-DNS names) → host.
    pub addr_hosts: BTreeMap<String, String>,
    /// Addresses hosts' own tools listed (`ip addr`) → the hosts listing
    /// each: one host's where only one does (see `listed_host_of`).
    pub listed_addrs: BTreeMap<String, BTreeSet<String>>,
    pub nccl_versions: BTreeSet<String>,
    pub torch_version: Option<String>,
    /// NCCL_* settings seen, with every value and the ranks (or hosts) that had it.
    pub env: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// (process group id, rank) → that rank's view of the group.
    pub pg_states: BTreeMap<(String, u32), PgRankState>,
    /// Watchdog reports no rank could be attributed to, by (group, file):
    /// they still say which collective hung.
    pub anonymous_pg_states: BTreeMap<(String, FileId), PgRankState>,
    /// Each caller's last calls per communicator (NCCL's COLL trace).
    pub call_traces: Vec<CallTrace>,
    pub deaths: Vec<Death>,
    /// Rank pairs NCCL connected, sorted and without repeats.
    pub links: Vec<NetLink>,
    /// Files not read, or read only in part, and why.
    pub skipped: Vec<Skipped>,
    /// How many counter readings the dumps held (the readings themselves
    /// are paired into `counter_deltas` and dropped).
    pub counter_readings: usize,
    /// Counters read both before and after, per host / device / port / name.
    /// Only the counters that moved (rose, reset, saturated or wrapped):
    /// most error counters stay at zero, and millions of still deltas would
    /// only take memory.
    pub counter_deltas: Vec<CounterDelta>,
    /// Counter name → how many ports it was read on before and after,
    /// moved or not (the fabric-wide spread of a counter needs the zeros).
    pub counter_ports: BTreeMap<CompactString, u32>,
    /// Every (host, device) whose counters were read before and after, and
    /// the tool that read them: the host's NICs, moved or not.
    pub counter_devices: BTreeMap<(Option<CompactString>, CompactString), CounterSource>,
    /// Port states from fabric snapshots.
    pub ports: Vec<PortSnapshot>,
    /// GID tables from snapshots.
    pub gids: Vec<GidEntry>,
    /// Flight Recorder dumps, one per rank.
    pub flight: Vec<FlightDump>,
    /// GPUs as `nvidia-smi` showed them.
    pub gpus: Vec<GpuSnapshot>,
    /// The switches at the far end of hosts' cables (LLDP).
    pub neighbors: Vec<LinkNeighbor>,
    /// Member ports of Linux bonds (`/proc/net/bonding`).
    pub bond_slaves: Vec<BondSlave>,
    /// Stack dumps of the job's processes, in file order.
    pub stacks: Vec<StackDump>,
    /// Kernel logs: device names per host, and each kernel event's place.
    pub kernel: KernelMap,
    /// Each event's kind, in event order (see [`Job::index_kinds`]).
    pub(crate) kinds: Vec<EventKind>,
}

impl Job {
    /// Copies every event's kind into one compact list, which
    /// [`Job::events_where`] walks instead of the events: a large job holds
    /// hundreds of thousands of events, and a walk for a few kinds then
    /// touches only theirs. Called once the events are final.
    pub fn index_kinds(&mut self) {
        self.kinds = self.events.iter().map(|e| e.kind).collect();
    }

    /// The events after `idx` in its file, at most `lines` lines below it,
    /// with their indices (a file's events are kept in line order): a
    /// traceback's or a backtrace's lines after its header.
    pub fn events_below(
        &self,
        idx: EventIdx,
        lines: u64,
    ) -> impl Iterator<Item = (EventIdx, &Event)> {
        let at = &self.events[idx].origin;
        self.events
            .iter()
            .enumerate()
            .skip(idx + 1)
            .take_while(move |(_, e)| e.origin.file == at.file && e.origin.line <= at.line + lines)
    }

    /// The events before `idx` in its file, at most `lines` lines above it,
    /// nearest first: what a console showed just before a report.
    pub fn events_above(
        &self,
        idx: EventIdx,
        lines: u64,
    ) -> impl Iterator<Item = (EventIdx, &Event)> {
        let at = &self.events[idx].origin;
        self.events[..idx]
            .iter()
            .enumerate()
            .rev()
            .take_while(move |(_, e)| e.origin.file == at.file && e.origin.line + lines >= at.line)
    }

    /// Per file, the line of the scheduler's first cancel in it (a user's
    /// scancel, a time limit): what srun reports below it, the cancel did.
    pub fn cancel_lines(&self) -> BTreeMap<FileId, u64> {
        let mut out: BTreeMap<FileId, u64> = BTreeMap::new();
        for (_, ev) in self.events_where(|k| k == EventKind::JobCancelled) {
            let line = out.entry(ev.origin.file).or_insert(ev.origin.line);
            *line = (*line).min(ev.origin.line);
        }
        out
    }

    /// Some communicator finished its init (an `Init COMPLETE` line).
    pub fn a_comm_came_up(&self) -> bool {
        self.events_where(|k| k == EventKind::NcclCommInit)
            .any(|(_, e)| e.text_field("phase") == Some("COMPLETE"))
    }

    /// The ranks of a process group, where a Flight Recorder dump lists
    /// them (`pg_config`, keyed by the group's name).
    pub fn group_members(&self, pg: &str) -> Option<BTreeSet<u32>> {
        self.flight
            .iter()
            .flat_map(|d| &d.pg_config)
            .find(|c| c.name == pg && !c.ranks.is_empty())
            .map(|c| c.ranks.iter().copied().collect())
    }

    /// The events whose kind `wanted` accepts, with their indices, in
    /// order. A job whose kinds were not indexed (one built by hand) is
    /// read event by event.
    pub fn events_where(
        &self,
        wanted: impl Fn(EventKind) -> bool,
    ) -> impl Iterator<Item = (EventIdx, &Event)> {
        let indexed = self.kinds.len() == self.events.len();
        (0..self.events.len())
            .filter(move |&i| {
                wanted(if indexed {
                    self.kinds[i]
                } else {
                    self.events[i].kind
                })
            })
            .map(|i| (i, &self.events[i]))
    }

    pub fn event(&self, idx: EventIdx) -> &Event {
        &self.events[idx]
    }

    pub fn file_path(&self, id: FileId) -> &str {
        self.files
            .get(id.0 as usize)
            .map_or("?", |f| f.path.as_str())
    }

    /// The host a peer address (IP or name printed by NCCL) belongs to.
    pub fn host_of_addr(&self, addr: &str) -> Option<&str> {
        let addr = addr.trim_start_matches("::ffff:");
        if let Some(h) = self.addr_hosts.get(addr) {
            return Some(h);
        }
        // Reverse-DNS names: NCCL's host names are the first label.
        let short = addr.split('.').next()?;
        if let Some((host, _)) = self.hosts.get_key_value(short) {
            return Some(host);
        }
        // A name that spells its address (EC2's `ip-10-0-3-201.…`, a
        // Kubernetes pod's `10-92-3-32.ns.pod.cluster.local`) is the host
        // whose lines print that address as their own.
        let spelled = spelled_ipv4(short)?;
        self.addr_hosts.get(&spelled).map(String::as_str)
    }

    /// The one host whose own tools list `addr` among its addresses; none
    /// where several do (docker0's 172.17.0.1 on every host).
    pub fn listed_host_of(&self, addr: &str) -> Option<&str> {
        let addr = addr.trim_start_matches("::ffff:");
        match self.listed_addrs.get(addr)?.iter().collect::<Vec<_>>()[..] {
            [one] => Some(one.as_str()),
            _ => None,
        }
    }

    /// A rank's host as NCCL prints it (the short name), where known;
    /// borrowed (the tree links and the fabric rules ask per edge).
    pub fn short_host_of_rank(&self, rank: u32) -> Option<&str> {
        self.ranks
            .get(&rank)
            .and_then(|i| i.host.as_deref())
            .map(super::build::short_host_in)
    }

    /// The ranks placed on `short_host` (a host's short name).
    pub fn ranks_on_host(&self, short_host: &str) -> BTreeSet<u32> {
        self.ranks
            .keys()
            .copied()
            .filter(|&r| self.short_host_of_rank(r) == Some(short_host))
            .collect()
    }

    /// A job that knows only these ranks and their hosts (for unit tests).
    #[cfg(test)]
    pub fn with_ranks_on(ranks: &[(u32, &str)]) -> Job {
        let mut job = Job::default();
        for &(rank, host) in ranks {
            job.ranks.insert(
                rank,
                RankInfo {
                    rank,
                    host: Some(host.into()),
                    ..RankInfo::default()
                },
            );
        }
        job
    }

    /// In a two-host job, the host that is not `me`: the far end of any
    /// connection between hosts, whatever address it printed.
    pub fn other_host_of_two(&self, me: &str) -> Option<String> {
        let me = super::build::short_host_of(me);
        let hosts = self.hosts_seen();
        if hosts.len() != 2 || !hosts.contains(&me) {
            return None;
        }
        hosts.into_iter().find(|h| *h != me)
    }

    /// The one host outside `accounted` whose address no line gives,
    /// where every other host printed its own (NCCL's `Bootstrap : Using
    /// eth0:10.0.0.3<0>`) or is in `accounted` (it reported the failed
    /// connect, so the address it dialled is not its own): an address no
    /// host claims is that host's, whose ranks advertised it and logged
    /// nothing (an empty NCCL_DEBUG_FILE, a rank that hung before its
    /// first line). `None` for one or two hosts (`other_host_of_two`
    /// decides those), or where two or more hosts are left.
    pub fn sole_host_outside(&self, accounted: &BTreeSet<String>) -> Option<String> {
        let short = super::build::short_host_of;
        let hosts = self.hosts_seen();
        if hosts.len() < 3 {
            return None;
        }
        let addressed: BTreeSet<String> = self
            .hosts
            .iter()
            .filter(|(_, info)| !info.ips.is_empty() || !info.listed_ips.is_empty())
            .map(|(h, _)| short(h))
            .chain(self.addr_hosts.values().map(|h| short(h)))
            .collect();
        let mut left = hosts
            .iter()
            .filter(|h| !addressed.contains(*h) && !accounted.contains(*h));
        match (left.next(), left.next()) {
            (Some(h), None) => Some(h.clone()),
            _ => None,
        }
    }

    /// How many ranks the job had at least: its world size, the ranks the
    /// logs name, or the worker processes that left a file of their own
    /// (`NCCL_DEBUG_FILE=nccl.%h.%p` is written, if empty, by every rank).
    pub fn ranks_at_least(&self) -> usize {
        let processes: BTreeSet<(&str, u32)> = self
            .files
            .iter()
            .filter_map(|f| Some((f.hints.host.as_deref()?, f.hints.pid?)))
            .collect();
        let world = self.world_size.map_or(0, |n| n as usize);
        world.max(self.ranks.len()).max(processes.len())
    }

    /// Whether the job ran on several hosts: its inputs name two, or its
    /// launch said so (`--nnodes 2`, torchrun's `min_nodes`) where no line
    /// names a host.
    pub fn spans_hosts(&self) -> bool {
        self.hosts.len() > 1
            || self
                .events_where(|k| k == EventKind::LaunchNodes)
                .any(|(_, e)| e.int("nnodes").is_some_and(|n| n > 1))
    }

    /// Every host the job's inputs show (short names): its ranks' hosts,
    /// the hosts that wrote NCCL lines, and those whose kernel log,
    /// snapshots or counters were collected. Ranks that died before they
    /// logged a line still leave their host's system files.
    pub fn hosts_seen(&self) -> BTreeSet<String> {
        let short = super::build::short_host_of;
        let ranks = self.ranks.values().filter_map(|i| i.host.as_deref());
        let snapshots = self.ports.iter().filter_map(|p| p.host.as_deref());
        let gids = self.gids.iter().filter_map(|g| g.host.as_deref());
        let counters = self
            .counter_devices
            .keys()
            .filter_map(|(h, _)| h.as_deref());
        ranks
            .chain(self.hosts.keys().map(String::as_str))
            .chain(self.kernel.hosts.keys().map(String::as_str))
            .chain(snapshots)
            .chain(gids)
            .chain(counters)
            .map(short)
            .collect()
    }

    /// The host an event came from: its own host tag, else its rank's host.
    pub fn host_of_event<'a>(&'a self, ev: &'a Event) -> Option<&'a str> {
        ev.who.host.as_deref().or_else(|| {
            ev.who
                .rank
                .and_then(|r| self.ranks.get(&r))
                .and_then(|r| r.host.as_deref())
        })
    }

    /// Ranks in the world, from the largest communicator or every rank seen.
    pub fn all_ranks(&self) -> Vec<u32> {
        match self.world_size {
            Some(n) => (0..n).collect(),
            None => self.ranks.keys().copied().collect(),
        }
    }
}

/// `ip-10-0-3-201` or `10-92-3-32` → `10.0.3.201` / `10.92.3.32`.
pub(crate) fn spelled_ipv4(label: &str) -> Option<String> {
    let digits = label.strip_prefix("ip-").unwrap_or(label);
    let parts: Vec<&str> = digits.split('-').collect();
    let octets = parts.len() == 4 && parts.iter().all(|p| p.parse::<u8>().is_ok());
    octets.then(|| parts.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, Origin};

    fn event(kind: EventKind, line: u64) -> Event {
        Event {
            kind,
            pattern: "test",
            origin: Origin {
                file: FileId(0),
                line,
            },
            who: Default::default(),
            level: Default::default(),
            time: Default::default(),
            fields: Fields::default(),
            text: "".into(),
        }
    }

    #[test]
    fn a_walk_by_kind_finds_the_same_events_indexed_or_not() {
        use EventKind::{NcclChannel, NcclTrees, WatchdogTimeout};
        let kinds = [
            NcclChannel,
            NcclTrees,
            NcclChannel,
            WatchdogTimeout,
            NcclTrees,
        ];
        let mut job = Job {
            events: (0..).zip(kinds).map(|(i, k)| event(k, i)).collect(),
            ..Job::default()
        };
        let walk = |job: &Job| -> Vec<(EventIdx, u64)> {
            job.events_where(|k| matches!(k, NcclTrees | WatchdogTimeout))
                .map(|(i, e)| (i, e.origin.line))
                .collect()
        };
        let by_hand = walk(&job);
        assert_eq!(by_hand, [(1, 1), (3, 3), (4, 4)]);
        job.index_kinds();
        assert_eq!(walk(&job), by_hand);
        // An event added after indexing: the index no longer covers the
        // events, so they are read one by one again.
        job.events.push(event(NcclTrees, 5));
        assert_eq!(walk(&job).last(), Some(&(5, 5)));
    }

    #[test]
    fn a_rank_uses_the_nics_its_channels_name_else_every_listed_one() {
        let listed = |n: &str, port| (n.to_string(), Some(port));
        let mut info = RankInfo {
            nics_listed: vec![
                listed("mlx5_0", 1),
                listed("mlx5_3", 1),
                listed("mlx5_4", 2),
            ],
            ..RankInfo::default()
        };
        let names = |i: &RankInfo| -> Vec<String> { i.nics().into_iter().map(|n| n.0).collect() };
        assert_eq!(names(&info), ["mlx5_0", "mlx5_3", "mlx5_4"]);
        info.net_devs_used = BTreeSet::from([2, 0]);
        assert_eq!(names(&info), ["mlx5_0", "mlx5_4"]);
        // An index NCCL never listed names nothing.
        info.net_devs_used = BTreeSet::from([7]);
        assert_eq!(names(&info), ["mlx5_0", "mlx5_3", "mlx5_4"]);
        info.net_devs_used = BTreeSet::from([1, 7]);
        assert_eq!(names(&info), ["mlx5_3"]);
    }

    #[test]
    fn a_peer_name_that_spells_an_address_is_the_host_printing_it_eks_and_pod_dns() {
        let mut job = Job::default();
        job.addr_hosts
            .insert("10.0.3.201".into(), "mistral7b-sft-worker-3".into());
        let by_name = |n: &str| job.host_of_addr(n).map(str::to_string);
        assert_eq!(
            by_name("ip-10-0-3-201.us-west-2.compute.internal").as_deref(),
            Some("mistral7b-sft-worker-3")
        );
        assert_eq!(
            by_name("10-0-3-201.default.pod.cluster.local").as_deref(),
            Some("mistral7b-sft-worker-3")
        );
        assert_eq!(by_name("ip-10-0-3-202.us-west-2.compute.internal"), None);
        assert_eq!(spelled_ipv4("gpu-10-0-3-1"), None);
        assert_eq!(spelled_ipv4("ip-10-0-3-999"), None);
    }
}
