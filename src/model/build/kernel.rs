//! Kernel logs joined to the job.
//!
//! A kernel line names a PCI function (`mlx5_core 0000:3b:00.1 ens1f1np1:`),
//! sometimes a netdev or an RDMA device; NCCL names HCAs by RDMA device
//! (`mlx5_1`) and GPUs by bus id. Per host this builds the table PCI address
//! ↔ RDMA device ↔ netdevs (and GPU ↔ UUID), then places every kernel event:
//! its host, device, port, and the ranks whose GPU, NIC or process it is
//! about. The OOM killer's and segfault lines become deaths of the ranks
//! whose pid they name.
//!
//! A kernel file's host is the syslog host on its lines, else the one its
//! path names (`node005/dmesg.txt`), else the job's only host.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use regex::Regex;
use std::sync::LazyLock;

use crate::grammar::normalize_bus_id;
use crate::model::kernel::{KernelMap, KernelPlace, is_kernel};
use crate::model::{CounterSource, Death, DeathKind, Event, EventIdx, EventKind, Job, Value};

use super::short_host;

/// Predictable device names that spell the PCI address in decimal:
/// `enp59s0f1np1`, `ibp59s0f0`, `rocep59s0f0`, `enP2p59s0f0` (domain 2).
static PCI_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:en|ib|roce)(?:P(?P<dom>\d+))?p(?P<bus>\d+)s(?P<slot>\d+)(?:f(?P<func>\d+))?(?:np\d+|d\d+)?$").unwrap()
});
/// mlx5 / mlx4 RDMA device names numbered in probe order.
static MLX_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^mlx[45]_(?P<n>\d+)$").unwrap());

const NIC_DRIVERS: &[&str] = &["mlx5_core", "mlx5_ib", "mlx4_core", "mlx4_en", "efa"];

pub fn collect(job: &mut Job) {
    attach_continuations(job);
    let hosts = event_hosts(job);
    let mut map = KernelMap::default();
    harvest_names(job, &hosts, &mut map);
    name_rdma_devices(job, &mut map);
    tie_table_netdevs(job, &mut map);
    let by_host = ranks_by_host(job);
    // Each kernel line is placed alone: in parallel (thousands of hosts).
    let places: Vec<(EventIdx, KernelPlace)> = hosts
        .into_par_iter()
        .map(|(idx, host)| (idx, place_event(job, &map, &by_host, idx, host)))
        .collect();
    map.places.extend(places);
    job.kernel = map;
    add_deaths(job);
}

/// Kernel events and their host: the syslog host or path hint on the line,
/// else a job host the file's name spells (`dmesg-node005.txt`), else the
/// job's only host.
fn event_hosts(job: &Job) -> BTreeMap<EventIdx, Option<String>> {
    let only_host = if job.hosts.len() == 1 {
        job.hosts.keys().next().cloned()
    } else {
        None
    };
    let mut by_name: BTreeMap<crate::model::FileId, Option<String>> = BTreeMap::new();
    job.events_where(is_kernel)
        .map(|(i, e)| {
            let host = e.who.host.as_deref().map(|h| short_host(h).to_string());
            let named = || {
                by_name
                    .entry(e.origin.file)
                    .or_insert_with(|| host_in_file_name(job, e.origin.file))
                    .clone()
            };
            (i, host.or_else(named).or_else(|| only_host.clone()))
        })
        .collect()
}

/// The longest job host whose name stands as a token in the file's name.
fn host_in_file_name(job: &Job, file: crate::model::FileId) -> Option<String> {
    let hosts = job.hosts.keys().map(String::as_str);
    super::file_hosts::host_token_in_name(job.file_path(file), hosts).map(str::to_string)
}

/// Multi-line NVRM messages name the GPU on their first line only: a
/// continuation that says the GPU fell off the bus takes the PCI address of
/// the `The NVIDIA GPU <bdf>` line just before it in the same file.
fn attach_continuations(job: &mut Job) {
    const MAX_GAP: u64 = 4;
    let mut last: Option<(crate::model::FileId, u64, Value)> = None;
    for ev in &mut job.events {
        if ev.kind == EventKind::KernelDeviceMap && ev.pattern == "kernel.nvrm_gpu_announce" {
            last = ev
                .fields
                .get("pci")
                .map(|p| (ev.origin.file, ev.origin.line, p.clone()));
        } else if ev.kind == EventKind::KernelGpuLost
            && !ev.fields.contains("pci")
            && let Some((file, line, pci)) = &last
            && *file == ev.origin.file
            && ev.origin.line > *line
            && ev.origin.line - line <= MAX_GAP
        {
            ev.fields.insert("pci", pci.clone());
        }
    }
}

fn pci_of(ev: &Event) -> Option<String> {
    ev.text_field("pci").and_then(normalize_bus_id)
}

/// The event is about a GPU.
fn is_gpu_event(ev: &Event) -> bool {
    matches!(ev.kind, EventKind::KernelGpuXid | EventKind::KernelGpuLost)
        || ev.text_field("device") == Some("gpu")
        || ev.text_field("driver") == Some("nvidia")
}

/// The event is about a NIC.
fn is_nic_event(ev: &Event) -> bool {
    let nic_kind = matches!(
        ev.kind,
        EventKind::KernelNicLink
            | EventKind::KernelIbPortState
            | EventKind::KernelNicModule
            | EventKind::KernelNicCmdError
            | EventKind::KernelNicHealth
            | EventKind::KernelNicTxTimeout
            | EventKind::KernelCqeError
    );
    let nic_driver = ev
        .text_field("driver")
        .is_some_and(|d| NIC_DRIVERS.contains(&d));
    nic_driver || (nic_kind && !is_gpu_event(ev))
}

/// PCI ↔ names from the lines themselves.
fn harvest_names(job: &Job, hosts: &BTreeMap<EventIdx, Option<String>>, map: &mut KernelMap) {
    let mut last_gpu: Option<(crate::model::FileId, u64, String)> = None;
    for (&idx, host) in hosts {
        let ev = &job.events[idx];
        let Some(host) = host else { continue };
        let devices = map.hosts.entry(host.clone()).or_default();
        let pci = pci_of(ev);
        if is_gpu_event(ev) {
            if let Some(pci) = &pci {
                let gpu = devices.gpus.entry(pci.clone()).or_default();
                if let Some(uuid) = ev.text_field("uuid") {
                    gpu.uuid = Some(uuid.to_string());
                }
                last_gpu = Some((ev.origin.file, ev.origin.line, pci.clone()));
            } else if let (Some(serial), Some((file, line, gpu_pci))) =
                (ev.text_field("serial"), &last_gpu)
                && *file == ev.origin.file
                && ev.origin.line <= line + 2
            {
                devices.gpus.entry(gpu_pci.clone()).or_default().serial = Some(serial.to_string());
            }
            continue;
        }
        let (Some(pci), true) = (pci, is_nic_event(ev)) else {
            continue;
        };
        let nic = devices.nics.entry(pci).or_default();
        if let Some(driver) = ev.text_field("driver").filter(|d| NIC_DRIVERS.contains(d)) {
            nic.driver = Some(driver.to_string());
        }
        if let Some(ibdev) = ev.text_field("ibdev") {
            nic.ibdev = Some(ibdev.to_string());
            nic.ibdev_guessed = false;
        }
        if let Some(netdev) = ev.text_field("netdev") {
            nic.netdevs.insert(netdev.to_string());
        }
    }
}

/// The PCI address a predictable name spells (`rocep59s0f1` → `0000:3b:00.1`).
pub fn pci_from_name(name: &str) -> Option<String> {
    let c = PCI_NAME.captures(name)?;
    let num = |k: &str| {
        c.name(k)
            .map_or(Some(0), |m| m.as_str().parse::<u32>().ok())
    };
    let (dom, bus, slot, func) = (num("dom")?, num("bus")?, num("slot")?, num("func")?);
    (dom <= 0xffff && bus <= 0xff && slot <= 0x1f && func <= 7)
        .then(|| format!("{dom:04x}:{bus:02x}:{slot:02x}.{func:x}"))
}

/// RDMA device names NCCL, the fabric snapshots (ibstat, show_gids) or the
/// RDMA counter dumps use,
/// tied to PCI functions: predictable names spell their address; `mlx5_N`
/// names follow PCI probe order, which is used only when the kernel log
/// shows every mlx5 function up to N and no line names any RDMA device of
/// the host (then marked as guessed).
fn name_rdma_devices(job: &Job, map: &mut KernelMap) {
    let mut names: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (host, info) in &job.hosts {
        names
            .entry(host)
            .or_default()
            .extend(info.nics.keys().map(String::as_str));
    }
    let snapshots = job
        .ports
        .iter()
        .map(|p| (&p.host, &p.device))
        .chain(job.gids.iter().map(|g| (&g.host, &g.device)));
    for (host, device) in snapshots {
        if let Some(h) = host {
            names.entry(h).or_default().insert(device.as_str());
        }
    }
    // NCCL's own IB lines name the device they are about (`NET/IB :
    // mlx5_1:1 Got async event`), where no `NET/IB : Using` line listed them.
    let ib_lines = job.events_where(|k| {
        matches!(
            k,
            EventKind::IbAsyncEvent | EventKind::IbCompletionError | EventKind::VerbsCallFailed
        )
    });
    for (_, ev) in ib_lines {
        if let (Some(host), Some(hca)) = (job.host_of_event(ev), ev.text_field("hca")) {
            names.entry(host).or_default().insert(hca);
        }
    }
    // Dumps under /sys/class/infiniband/<dev> and `rdma statistic` name the
    // host's RDMA devices too (perfquery's LIDs, ethtool's netdevs do not).
    for ((host, device), src) in &job.counter_devices {
        let names_hca = matches!(
            src,
            CounterSource::Sysfs | CounterSource::HwCounters | CounterSource::RdmaStatistic
        );
        if let (true, Some(h)) = (names_hca, host) {
            names.entry(h.as_str()).or_default().insert(device.as_str());
        }
    }
    for (host, hcas) in names {
        let Some(devices) = map.hosts.get_mut(host) else {
            continue;
        };
        for &name in &hcas {
            if let Some(pci) = pci_from_name(name) {
                let nic = devices.nics.entry(pci).or_default();
                nic.ibdev.get_or_insert_with(|| name.to_string());
            }
        }
        let numbered: BTreeMap<usize, &str> = hcas
            .iter()
            .copied()
            .filter_map(|n| {
                MLX_NAME
                    .captures(n)
                    .and_then(|c| c["n"].parse().ok().map(|i| (i, n)))
            })
            .collect();
        let any_named = devices.nics.values().any(|n| n.ibdev.is_some());
        let mlx = |n: &crate::model::kernel::NicNames| {
            n.driver.as_deref().is_some_and(|d| d.starts_with("mlx"))
        };
        let Some(&max) = numbered.keys().next_back() else {
            continue;
        };
        if any_named || devices.nics.values().filter(|n| mlx(n)).count() <= max {
            continue;
        }
        let in_order = devices.nics.values_mut().filter(|n| mlx(n));
        for (i, nic) in in_order.enumerate() {
            if let Some(name) = numbered.get(&i) {
                nic.ibdev = Some(name.to_string());
                nic.ibdev_guessed = true;
            }
        }
    }
}

/// RDMA device ↔ netdev (↔ PCI function) as the tables state them:
/// show_gids' last column, `rdma link … netdev X`, ibdev2netdev. Read facts
/// outrank a probe-order guess. Without them a kernel line that names a NIC
/// only by netdev (`ens1f1np1: Link down`) would stand apart from the RDMA
/// device NCCL names, and one link would look like two.
fn tie_table_netdevs(job: &Job, map: &mut KernelMap) {
    let no_pci: Option<String> = None;
    let ties = job
        .ports
        .iter()
        .map(|p| (&p.host, &p.device, p.port, &p.netdev, &p.pci))
        .chain(
            job.gids
                .iter()
                .map(|g| (&g.host, &g.device, g.port, &g.netdev, &no_pci)),
        );
    for (host, device, port, netdev, pci) in ties {
        let (Some(host), Some(netdev)) = (host, netdev) else {
            continue;
        };
        let Some(devices) = map.hosts.get_mut(short_host(host)) else {
            continue;
        };
        let pci = pci
            .clone()
            .or_else(|| devices.nic_by_name(netdev).map(str::to_string))
            .or_else(|| pci_from_name(netdev));
        match pci {
            Some(pci) => tie_nic(devices, pci, device, netdev),
            None => {
                devices
                    .netdev_ports
                    .insert(netdev.clone(), (device.clone(), port));
            }
        }
    }
}

/// Names the NIC at `pci`, withdrawing a probe-order guess that gave its
/// RDMA device's name to another function.
fn tie_nic(
    devices: &mut crate::model::kernel::HostDevices,
    pci: String,
    ibdev: &str,
    netdev: &str,
) {
    for (other_pci, other) in devices.nics.iter_mut() {
        if *other_pci != pci && other.ibdev_guessed && other.ibdev.as_deref() == Some(ibdev) {
            other.ibdev = None;
            other.ibdev_guessed = false;
        }
    }
    let nic = devices.nics.entry(pci).or_default();
    if nic.ibdev.is_none() || nic.ibdev_guessed {
        nic.ibdev = Some(ibdev.to_string());
        nic.ibdev_guessed = false;
    }
    nic.netdevs.insert(netdev.to_string());
}

/// Ranks per host (a kernel line is matched only against its host's ranks:
/// a flood of lines must not cost a scan of every rank each).
type RanksByHost = BTreeMap<Option<String>, Vec<u32>>;

fn ranks_by_host(job: &Job) -> RanksByHost {
    let mut out: RanksByHost = BTreeMap::new();
    for info in job.ranks.values() {
        out.entry(info.host.clone()).or_default().push(info.rank);
    }
    out
}

fn place_event(
    job: &Job,
    map: &KernelMap,
    by_host: &RanksByHost,
    idx: EventIdx,
    host: Option<String>,
) -> KernelPlace {
    let ev = &job.events[idx];
    let devices = host.as_ref().and_then(|h| map.hosts.get(h));
    let mut place = KernelPlace {
        pci: ev
            .text_field("source")
            .and_then(normalize_bus_id)
            .or_else(|| pci_of(ev)),
        gpu: is_gpu_event(ev),
        ibdev: ev.text_field("ibdev").map(str::to_string),
        netdev: ev.text_field("netdev").map(str::to_string),
        port: ev.int("port").and_then(|p| u32::try_from(p).ok()),
        host,
        ranks: BTreeSet::new(),
    };
    if let Some(devices) = devices.filter(|_| !place.gpu) {
        if place.pci.is_none() {
            let by_name = place.ibdev.as_deref().or(place.netdev.as_deref());
            place.pci = by_name
                .and_then(|n| devices.nic_by_name(n))
                .map(str::to_string);
        }
        if let Some(nic) = place.pci.as_ref().and_then(|p| devices.nics.get(p)) {
            place.ibdev = place.ibdev.take().or_else(|| nic.ibdev.clone());
            place.netdev = place
                .netdev
                .take()
                .or_else(|| nic.netdevs.iter().next().cloned());
        }
        if place.ibdev.is_none()
            && let Some((ibdev, port)) = place
                .netdev
                .as_ref()
                .and_then(|nd| devices.netdev_ports.get(nd))
        {
            place.ibdev = Some(ibdev.clone());
            place.port = place.port.or(*port);
        }
    }
    // Every mlx5 PCI function has exactly one port.
    let mlx5 = ev
        .text_field("driver")
        .is_some_and(|d| d.starts_with("mlx5"));
    if place.port.is_none() && !place.gpu && (place.ibdev.is_some() || mlx5) {
        place.port = nccl_port(job, &place).or(Some(1));
    }
    place.ranks = ranks_of(job, by_host, ev, &place);
    if place.host.is_none() {
        adopt_host_by_pid(job, ev, &mut place);
    }
    place
}

/// A line with no host in a multi-host job: a pid that only one rank has
/// (an Xid's or the OOM killer's) names the rank, and so the host.
fn adopt_host_by_pid(job: &Job, ev: &Event, place: &mut KernelPlace) {
    let Some(pid) = ev.int("pid").and_then(|p| u32::try_from(p).ok()) else {
        return;
    };
    let mut owners = job.ranks.values().filter(|r| r.pid == Some(pid));
    if let (Some(only), None) = (owners.next(), owners.next())
        && only.host.is_some()
    {
        place.host.clone_from(&only.host);
        place.ranks = BTreeSet::from([only.rank]);
    }
}

/// The port NCCL uses on this HCA (mlx5 functions have one port: 1).
fn nccl_port(job: &Job, place: &KernelPlace) -> Option<u32> {
    let host = job.hosts.get(place.host.as_deref()?)?;
    host.nics.get(place.ibdev.as_deref()?)?.port
}

/// Ranks on the event's host whose GPU, HCA or process it names. A line
/// without a host matches ranks only when the job has a single host.
fn ranks_of(job: &Job, by_host: &RanksByHost, ev: &Event, place: &KernelPlace) -> BTreeSet<u32> {
    let candidates: Vec<u32> = match &place.host {
        Some(h) => by_host
            .get(&Some(h.clone()))
            .into_iter()
            .chain(by_host.get(&None).filter(|_| job.hosts.len() <= 1))
            .flatten()
            .copied()
            .collect(),
        None if job.hosts.len() <= 1 => job.ranks.keys().copied().collect(),
        None => Vec::new(),
    };
    let pid = ev.int("pid").and_then(|p| u32::try_from(p).ok());
    let mut ranks = BTreeSet::new();
    for info in candidates.iter().filter_map(|r| job.ranks.get(r)) {
        let by_gpu = place.gpu && place.pci.is_some() && info.gpu_bus_id == place.pci;
        let by_pid = pid.is_some() && info.pid == pid;
        let by_nic = !place.gpu
            && place
                .ibdev
                .as_ref()
                .is_some_and(|d| info.nic_entries().any(|(n, _)| n == d));
        if by_gpu || by_pid || by_nic {
            ranks.insert(info.rank);
        }
    }
    ranks
}

/// The OOM killer's victims and segfaulted processes that are ranks.
fn add_deaths(job: &mut Job) {
    let mut deaths: BTreeMap<(Option<u32>, bool), Death> = BTreeMap::new();
    let worker_pids: BTreeSet<(Option<&str>, i64)> = job
        .events_where(|k| k == EventKind::ClosingSignal)
        .filter_map(|(_, e)| {
            let pid = e.int("worker_pid").or(e.int("worker_pid2"))?;
            Some((e.who.host.as_deref().map(short_host), pid))
        })
        .collect();
    // The same host, or a side whose host no line names.
    let a_worker = |host: Option<&str>, pid: i64| {
        let host = host.map(short_host);
        worker_pids
            .iter()
            .any(|(h, p)| *p == pid && (h.is_none() || host.is_none() || *h == host))
    };
    // Old kernels name the process they chose, then the one they killed: a
    // child of it where it had one. The chosen one died only where no kill
    // line of that host survived (a paste of the first line alone).
    let killed_on: BTreeSet<Option<&str>> = job
        .kernel
        .places
        .iter()
        .filter(|(idx, _)| {
            let ev = &job.events[**idx];
            ev.kind == EventKind::KernelOomKill && ev.text_field("selected").is_none()
        })
        .map(|(_, place)| place.host.as_deref())
        .collect();
    for (&idx, place) in &job.kernel.places {
        let ev = &job.events[idx];
        let oom = ev.kind == EventKind::KernelOomKill;
        if !oom && ev.kind != EventKind::KernelSegfault {
            continue;
        }
        if ev.text_field("selected").is_some() && killed_on.contains(&place.host.as_deref()) {
            continue;
        }
        let Some(pid) = ev.int("pid") else {
            continue;
        };
        // A pid no rank line names, but one a launcher stopped as its
        // worker (`Killing subprocess 410126`): a process of the job died,
        // its rank unknown.
        let rank = place.ranks.iter().next().copied();
        if rank.is_none() && !a_worker(place.host.as_deref(), pid) {
            continue;
        }
        let comm = ev.text_field("comm").unwrap_or("?");
        let d = deaths.entry((rank, oom)).or_insert_with(|| Death {
            rank,
            host: place.host.clone(),
            pid: u32::try_from(pid).ok(),
            kind: DeathKind::Signal,
            exitcode: None,
            signal: Some(if oom { "SIGKILL" } else { "SIGSEGV" }.to_string()),
            reason: if oom {
                format!("killed by the kernel's OOM killer ({comm}, pid {pid})")
            } else {
                format!("{comm} (pid {pid}) died of a {}", trap_name(ev))
            },
            consequence: false,
            stopped_by_launcher: false,
            ignored_sigterm: false,
            time: ev.time,
            evidence: Vec::new(),
        });
        d.evidence.push(idx);
    }
    job.deaths.extend(deaths.into_values());
}

fn trap_name(ev: &Event) -> &str {
    ev.text_field("trap").unwrap_or("segmentation fault")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, FileId, HostInfo, Level, NicInfo, Origin, RankInfo, RawTime, Who};

    fn ev(
        line: u64,
        kind: EventKind,
        host: &str,
        pattern: &'static str,
        fields: &[(&'static str, Value)],
    ) -> Event {
        let mut f = Fields::default();
        for (k, v) in fields {
            f.insert(k, v.clone());
        }
        Event {
            kind,
            pattern,
            origin: Origin {
                file: FileId(1),
                line,
            },
            who: Who {
                host: Some(host.into()),
                ..Who::default()
            },
            level: Level::Info,
            time: RawTime::None,
            fields: f,
            text: "x".into(),
        }
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    /// Two hosts, four ranks each; node002's ranks 6 and 7 use mlx5_1.
    fn base_job() -> Job {
        let mut job = Job::default();
        for host in ["node001", "node002"] {
            let mut info = HostInfo::default();
            for n in ["mlx5_0", "mlx5_1"] {
                info.nics.insert(
                    n.into(),
                    NicInfo {
                        port: Some(1),
                        link_layer: Some("IB".into()),
                    },
                );
            }
            job.hosts.insert(host.into(), info);
        }
        let gpus = [
            "0000:18:00.0",
            "0000:3b:00.0",
            "0000:86:00.0",
            "0000:af:00.0",
        ];
        for r in 0..8u32 {
            let host = if r < 4 { "node001" } else { "node002" };
            let nic = if r % 4 < 2 { "mlx5_0" } else { "mlx5_1" };
            job.ranks.insert(
                r,
                RankInfo {
                    rank: r,
                    host: Some(host.into()),
                    pid: Some(1000 + r),
                    gpu_bus_id: Some(gpus[r as usize % 4].into()),
                    nics_listed: vec![(nic.into(), Some(1))],
                    ..RankInfo::default()
                },
            );
        }
        job
    }

    #[test]
    fn link_line_joins_pci_netdev_ibdev_and_ranks() {
        let mut job = base_job();
        job.events = vec![
            ev(
                1,
                EventKind::KernelIbPortState,
                "node002",
                "kernel.ib_port_state",
                &[
                    ("driver", text("mlx5_core")),
                    ("pci", text("0000:3b:00.1")),
                    ("ibdev", text("mlx5_1")),
                    ("port", Value::Int(1)),
                ],
            ),
            ev(
                2,
                EventKind::KernelNicLink,
                "node002",
                "kernel.mlx5_link_down",
                &[
                    ("driver", text("mlx5_core")),
                    ("pci", text("0000:3b:00.1")),
                    ("netdev", text("ens1f1np1")),
                    ("state", text("down")),
                ],
            ),
        ];
        collect(&mut job);
        let place = job.kernel.place(1).unwrap();
        assert_eq!(place.host.as_deref(), Some("node002"));
        assert_eq!(place.ibdev.as_deref(), Some("mlx5_1"));
        assert_eq!(place.netdev.as_deref(), Some("ens1f1np1"));
        assert_eq!(place.port, Some(1));
        assert_eq!(place.ranks, BTreeSet::from([6, 7]));
        let nic = &job.kernel.hosts["node002"].nics["0000:3b:00.1"];
        assert_eq!(nic.ibdev.as_deref(), Some("mlx5_1"));
        assert!(nic.netdevs.contains("ens1f1np1"));
    }

    #[test]
    fn xid_joins_the_rank_on_that_gpu_of_that_host() {
        let mut job = base_job();
        job.events = vec![ev(
            7,
            EventKind::KernelGpuXid,
            "node002",
            "kernel.nvrm_xid",
            &[("pci", text("0000:3b:00.0")), ("xid", Value::Int(79))],
        )];
        collect(&mut job);
        let place = job.kernel.place(0).unwrap();
        assert!(place.gpu);
        assert_eq!(place.ranks, BTreeSet::from([5]));
    }

    #[test]
    fn oom_kill_of_a_rank_pid_is_a_death() {
        let mut job = base_job();
        job.events = vec![ev(
            3,
            EventKind::KernelOomKill,
            "node001",
            "kernel.oom_killed",
            &[("pid", Value::Int(1002)), ("comm", text("python"))],
        )];
        collect(&mut job);
        let d = &job.deaths[0];
        assert_eq!((d.rank, d.signal.as_deref()), (Some(2), Some("SIGKILL")));
        assert!(d.reason.contains("OOM killer"));
        // The same pid on another host is not this rank.
        let mut job = base_job();
        job.events = vec![ev(
            3,
            EventKind::KernelOomKill,
            "node002",
            "kernel.oom_killed",
            &[("pid", Value::Int(1002))],
        )];
        collect(&mut job);
        assert!(job.deaths.is_empty());
    }

    #[test]
    fn multi_line_fallen_off_takes_the_gpu_of_the_line_before() {
        let mut job = base_job();
        job.events = vec![
            ev(
                10,
                EventKind::KernelDeviceMap,
                "node001",
                "kernel.nvrm_gpu_announce",
                &[("pci", text("0000:86:00.0")), ("device", text("gpu"))],
            ),
            ev(
                12,
                EventKind::KernelGpuLost,
                "node001",
                "kernel.nvrm_fallen_off_tail",
                &[],
            ),
        ];
        collect(&mut job);
        assert_eq!(job.kernel.place(1).unwrap().ranks, BTreeSet::from([2]));
    }

    #[test]
    fn host_less_lines_find_their_host_by_file_name_or_unique_pid() {
        let mut job = base_job();
        job.files = vec![
            crate::model::FileInfo::default(),
            crate::model::FileInfo {
                id: FileId(1),
                path: "logs/dmesg-node002.txt".into(),
                ..Default::default()
            },
        ];
        let mut xid = ev(
            1,
            EventKind::KernelGpuXid,
            "x",
            "kernel.nvrm_xid",
            &[("pci", text("0000:3b:00.0")), ("xid", Value::Int(79))],
        );
        xid.who.host = None;
        let mut oom = ev(2, EventKind::KernelOomKill, "x", "kernel.oom_killed", &[]);
        oom.who.host = None;
        oom.origin.file = FileId(0);
        oom.fields.insert("pid", Value::Int(1006));
        job.events = vec![xid, oom];
        collect(&mut job);
        let xid = job.kernel.place(0).unwrap();
        assert_eq!(
            (xid.host.as_deref(), &xid.ranks),
            (Some("node002"), &BTreeSet::from([5]))
        );
        let oom = job.kernel.place(1).unwrap();
        assert_eq!(
            (oom.host.as_deref(), &oom.ranks),
            (Some("node002"), &BTreeSet::from([6]))
        );
        assert_eq!(job.deaths[0].rank, Some(6));
    }

    /// Linux ≤4.18: `Kill process 1006 … or sacrifice child` chose rank 6,
    /// `Killed process 4254` was its child (a data-loader worker): the rank
    /// was not the victim. With the first line alone, it was.
    #[test]
    fn an_oom_choice_is_a_death_only_without_the_kill_line_linux_4_15() {
        let chose = || {
            ev(
                1,
                EventKind::KernelOomKill,
                "node002",
                "kernel.oom_selected",
                &[("pid", Value::Int(1006)), ("selected", text("yes"))],
            )
        };
        let killed = ev(
            2,
            EventKind::KernelOomKill,
            "node002",
            "kernel.oom_killed",
            &[("pid", Value::Int(4254))],
        );
        let mut job = base_job();
        job.events = vec![chose(), killed];
        collect(&mut job);
        assert!(job.deaths.is_empty(), "{:?}", job.deaths);
        let mut job = base_job();
        job.events = vec![chose()];
        collect(&mut job);
        assert_eq!(job.deaths[0].rank, Some(6));
    }

    #[test]
    fn predictable_names_spell_the_pci_address() {
        assert_eq!(
            pci_from_name("rocep59s0f1").as_deref(),
            Some("0000:3b:00.1")
        );
        assert_eq!(
            pci_from_name("enp65s0f0np0").as_deref(),
            Some("0000:41:00.0")
        );
        assert_eq!(pci_from_name("enP2p1s0").as_deref(), Some("0002:01:00.0"));
        assert_eq!(pci_from_name("mlx5_0"), None);
        assert_eq!(pci_from_name("ens1f0"), None);
    }

    #[test]
    fn mlx5_names_follow_probe_order_only_when_every_function_is_seen() {
        let mut job = base_job();
        let link = |line, pci: &str| {
            ev(
                line,
                EventKind::KernelNicLink,
                "node001",
                "kernel.mlx5_link_up",
                &[
                    ("driver", text("mlx5_core")),
                    ("pci", text(pci)),
                    ("netdev", text("x")),
                ],
            )
        };
        job.events = vec![link(1, "0000:3b:00.0"), link(2, "0000:3b:00.1")];
        collect(&mut job);
        let nic = &job.kernel.hosts["node001"].nics["0000:3b:00.1"];
        assert_eq!(
            (nic.ibdev.as_deref(), nic.ibdev_guessed),
            (Some("mlx5_1"), true)
        );
        let mut job = base_job();
        job.events = vec![link(2, "0000:3b:00.1")];
        collect(&mut job);
        assert_eq!(job.kernel.hosts["node001"].nics["0000:3b:00.1"].ibdev, None);
    }
}
