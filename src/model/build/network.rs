//! Hosts, addresses, NICs and the network links between ranks.

use regex::Regex;
use rustc_hash::FxHashSet;
use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use crate::model::{EventKind, HostInfo, Job, NetLink, NicInfo, PeerLink};

/// One HCA in NCCL's `NET/IB : Using` list: ` [1]mlx5_3:1/IB` or, 2.23+ merged,
/// ` [0] mlx5_0:1/IB` inside `[0]={…}`; 2.30 may add `:rail` / `::plane`.
static IB_DEVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[(?P<idx>\d+)\]\s?(?P<hca>[A-Za-z][\w.-]*):(?P<port>\d+)(?::\d*)*/(?P<ll>IB|RoCE|UNSPECIFIED)").unwrap()
});
/// One interface in `NET/Socket : Using [0]eth0:10.0.0.1<0>` (or `eth0:10.0.0.1<0>`).
static SOCKET_IFACE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:\[\d+\])?(?P<iface>[\w.-]+):(?P<addr>[^<\s]+)<\d+>").unwrap());

/// The distinct rank pairs the channel lines connect, sorted.
pub fn distinct_links(links: &[PeerLink]) -> Vec<NetLink> {
    // Millions at 16k ranks (4.3 M), nearly all repeats of a few (81 k):
    // kept once each as they come, then sorted.
    let mut seen: FxHashSet<NetLink> = FxHashSet::default();
    let mut distinct: Vec<NetLink> = links
        .iter()
        .map(|l| NetLink {
            src: l.src,
            dst: l.dst,
        })
        .filter(|l| seen.insert(*l))
        .collect();
    distinct.sort_unstable();
    distinct
}

/// Hosts, addresses and NICs from the events; the NICs each rank's
/// channels use from `links`; `distinct` (of [`distinct_links`]) kept as
/// the job's links.
pub fn collect(job: &mut Job, links: &[PeerLink], distinct: Vec<NetLink>) {
    add_links(job, links);
    job.links = distinct;
    // Every rank prints its HCA list, and the ranks of a host (often of the
    // whole job) print the same one: each distinct list is read once.
    let mut device_lists: HashMap<String, Vec<IbDevice>> = HashMap::new();
    let read: Vec<usize> = job
        .events_where(|k| {
            matches!(
                k,
                EventKind::NcclBootstrapIface
                    | EventKind::NcclNetIb
                    | EventKind::NcclNetSocket
                    | EventKind::HostAddress
            )
        })
        .map(|(i, _)| i)
        .collect();
    for i in read {
        let ev = &job.events[i];
        // A shared name: cloning it costs a count, not a copy.
        let host = ev.who.host.clone();
        let rank = ev.who.rank;
        match ev.kind {
            EventKind::NcclBootstrapIface => {
                if let (Some(h), Some(ip)) = (host, ev.text_field("ip").map(str::to_string)) {
                    add_addr(job, &h, &ip);
                }
            }
            EventKind::NcclNetIb => {
                let oob_ip = ev.text_field("oob_ip").map(str::to_string);
                let listed = ev.text_field("devices").unwrap_or("");
                if !device_lists.contains_key(listed) {
                    device_lists.insert(listed.to_string(), ib_devices(listed));
                }
                let devices = &device_lists[listed];
                if let (Some(h), Some(ip)) = (host.as_deref(), oob_ip) {
                    add_addr(job, h, &ip);
                }
                add_ib_devices(job, host.as_deref(), rank, devices);
            }
            EventKind::HostAddress => {
                let global = ev.text_field("scope") == Some("global");
                if let (Some(h), Some(ip), true) = (host, ev.text_field("ip"), global) {
                    let ip = ip.to_string();
                    list_addr(job, &h, ip);
                }
            }
            EventKind::NcclNetSocket => {
                let Some(h) = host else { continue };
                let list = ev.text_field("interfaces").unwrap_or("").to_string();
                for c in SOCKET_IFACE.captures_iter(&list) {
                    add_addr(job, &h, &c["addr"]);
                    let entry = job.hosts.entry(h.to_string()).or_default();
                    entry
                        .socket_ifaces
                        .insert(format!("{}:{}", &c["iface"], &c["addr"]));
                }
            }
            _ => {}
        }
    }
    for (&rank, info) in &job.ranks {
        if let Some(h) = &info.host {
            job.hosts.entry(h.clone()).or_default().ranks.insert(rank);
        }
    }
}

fn add_addr(job: &mut Job, host: &str, addr: &str) {
    let addr = addr.split('%').next().unwrap_or(addr);
    let ips = &mut host_entry(job, host).ips;
    if !ips.contains(addr) {
        ips.insert(addr.to_string());
    }
    if !job.addr_hosts.contains_key(addr) {
        job.addr_hosts.insert(addr.to_string(), host.to_string());
    }
}

/// An address a host's own tool listed; loopback names no host.
fn list_addr(job: &mut Job, host: &str, ip: String) {
    let loopback = ip
        .parse::<std::net::IpAddr>()
        .is_ok_and(|a| a.is_loopback() || a.is_unspecified());
    if loopback {
        return;
    }
    host_entry(job, host).listed_ips.insert(ip.clone());
    job.listed_addrs
        .entry(ip)
        .or_default()
        .insert(host.to_string());
}

/// One HCA of a `NET/IB : Using` list.
struct IbDevice {
    hca: String,
    port: Option<u32>,
    link_layer: String,
}

fn ib_devices(listed: &str) -> Vec<IbDevice> {
    IB_DEVICE
        .captures_iter(listed)
        .map(|c| IbDevice {
            hca: c["hca"].to_string(),
            port: c["port"].parse().ok(),
            link_layer: c["ll"].to_string(),
        })
        .collect()
}

fn add_ib_devices(job: &mut Job, host: Option<&str>, rank: Option<u32>, devices: &[IbDevice]) {
    if let Some(h) = host {
        let nics = &mut host_entry(job, h).nics;
        for d in devices {
            let nic = NicInfo {
                port: d.port,
                link_layer: Some(d.link_layer.clone()),
            };
            match nics.get_mut(&d.hca) {
                Some(known) => *known = nic,
                None => {
                    nics.insert(d.hca.clone(), nic);
                }
            }
        }
    }
    if let Some(info) = rank.and_then(|r| job.ranks.get_mut(&r))
        && info.nics_listed.is_empty()
    {
        info.nics_listed = devices.iter().map(|d| (d.hca.clone(), d.port)).collect();
    }
}

/// The host's entry, made if it is new (without a copy of the name when it
/// is not).
fn host_entry<'j>(job: &'j mut Job, host: &str) -> &'j mut HostInfo {
    if !job.hosts.contains_key(host) {
        job.hosts.insert(host.to_string(), HostInfo::default());
    }
    job.hosts.get_mut(host).expect("just inserted")
}

/// `Channel … : a[..] -> b[..] [send] via NET/IB/1` lines: rank a sends to b;
/// the HCA index belongs to the rank that logged the line.
fn add_links(job: &mut Job, links: &[PeerLink]) {
    // Links come grouped by the channel event they belong to (millions of
    // links, thousands of events): read each event once.
    for group in links.chunk_by(|a, b| a.anchor == b.anchor) {
        let Some(ev) = job.events.get(group[0].anchor as usize) else {
            continue;
        };
        let net_dev = ev.int("net_dev").and_then(|d| u32::try_from(d).ok());
        // PXN (`NET/IB/3(19)`): the NIC is the proxy rank's, which drives
        // it for this one; the logger's own traffic leaves over NVLink.
        let proxy = ev.int("proxy").and_then(|r| u32::try_from(r).ok());
        let receive = ev.text_field("dir") == Some("receive");
        let loggers: BTreeSet<u32> = match ev.who.rank {
            Some(rank) => BTreeSet::from([rank]),
            None => group
                .iter()
                .map(|l| if receive { l.dst } else { l.src })
                .collect(),
        };
        for rank in loggers {
            if let Some(info) = job.ranks.get_mut(&rank) {
                info.channels_logged = true;
                if proxy.is_none_or(|p| p == rank) {
                    info.net_devs_used.extend(net_dev);
                }
            }
        }
        if let Some(info) = proxy.and_then(|p| job.ranks.get_mut(&p)) {
            info.net_devs_used.extend(net_dev);
        }
    }
}
