//! The interfaces NCCL chose for its sockets and bootstrap, where one is
//! local to its host (docker0, virbr0, a veth): how much its listing and
//! the channels routed over it say the interface is what failed.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{Event, EventIdx, EventKind, Sym};

use super::super::Ctx;
use super::keep_host_or_reporters;

/// Weighs each local-only interface NCCL listed (the first four) as
/// support for `hyp` (socket_interface); `connects_seen`: a failed connect's line was read.
pub(super) fn weigh(ctx: &Ctx<'_>, connects_seen: bool, hyp: &mut Hypothesis) {
    let job = ctx.job;
    let suspicious = suspicious_interfaces(ctx);
    let came_up = job.a_comm_came_up();
    let retried = !came_up
        && job
            .events_where(|k| k == EventKind::SocketRetry)
            .next()
            .is_some();
    // A system error raised in NCCL's socket code and passed up (its WARN
    // cut or never printed): a socket call failed, the connect most often.
    let socket_call_failed = !came_up
        && job
            .events_where(|k| k == EventKind::NcclErrorChain)
            .any(|(_, e)| {
                e.int("result") == Some(2)
                    && e.text_field("src")
                        .is_some_and(|src| src.ends_with("socket.cc") || src.ends_with("socket.h"))
            });
    // Ranks on several hosts that never finished init needed the interface
    // to reach each other, failure line or not (a log cut before it). A
    // completion error on the network is traffic between them: their
    // bootstrap had exchanged addresses, whatever the logs kept of init.
    let moved_data = job
        .events_where(|k| k == EventKind::IbCompletionError)
        .next()
        .is_some();
    let hosts_never_met = job.hosts.len() > 1 && !came_up && !moved_data;
    for s in suspicious.iter().take(4) {
        let ev = &job.events[s.idx];
        keep_host_or_reporters(hyp, ev);
        let iface = &s.iface;
        let unreachable = format!("NCCL uses `{iface}`, which cannot reach other hosts");
        // The first listed is the one bootstrap binds and the socket
        // transport's default: its connects are the ones retried, and the
        // ones other hosts could not make.
        let first = s.net_dev == 0;
        let connects_failed = connects_seen || (first && (retried || socket_call_failed));
        // A channel routed over the interface is traffic that must cross
        // hosts there, not just an interface on a list.
        // A channel over it is traffic that had to cross hosts there; with
        // nothing failing (communicators up, no connect lost) it is a lead.
        let carries = s.carries_channel
            && (connects_failed || retried || socket_call_failed || hosts_never_met);
        let (w, why) = match (carries, connects_failed, first && hosts_never_met) {
            // Two hosts that print one address for themselves cannot be
            // told apart: a peer dialling it reaches its own host (each
            // host's container on Docker's default bridge is 172.17.0.2).
            _ if first && s.hosts_sharing > 1 => (
                0.6,
                format!(
                    "NCCL uses `{iface}`, and {} hosts of the job list that same address for themselves: a peer dialling it reaches its own host",
                    s.hosts_sharing
                ),
            ),
            (true, ..) => (
                0.6,
                format!(
                    "NCCL routes channels over `{iface}` (NET/Socket/{}), which cannot reach other hosts",
                    s.net_dev
                ),
            ),
            (false, true, _) => (0.6, unreachable),
            (false, false, true) => (
                0.5,
                format!(
                    "{unreachable}; the job's {} hosts never finished NCCL's init",
                    job.hosts.len()
                ),
            ),
            (false, false, false) => (0.3, unreachable),
        };
        hyp.support(Source::Nccl, w, Some(s.idx), why);
        // The first listed is the one bootstrap binds.
        hyp.values
            .entry("detail")
            .or_insert_with(|| format!("`{iface}`"));
    }
}

/// A local-only interface NCCL listed for its sockets or bootstrap.
struct LocalInterface {
    idx: EventIdx,
    /// `name:address`.
    iface: String,
    /// Its index in the NET/Socket list (`[1]veth…`).
    net_dev: u32,
    /// A channel of the same process, or of its host where the process
    /// printed none, runs `via NET/Socket/<net_dev>`.
    carries_channel: bool,
    /// The hosts that list this same address (two or more: each one's
    /// peers dial it and reach themselves).
    hosts_sharing: usize,
}

/// Socket / bootstrap interfaces NCCL picked that are local-only.
fn suspicious_interfaces(ctx: &Ctx<'_>) -> Vec<LocalInterface> {
    let mut out = Vec::new();
    let socket_channels = socket_channels(ctx);
    let mut hosts_of_addr: BTreeMap<String, BTreeSet<Sym>> = BTreeMap::new();
    let listing = |k| matches!(k, EventKind::NcclNetSocket | EventKind::NcclBootstrapIface);
    for (idx, ev) in ctx.job.events_where(listing) {
        let Some(list) = listing_text(ev) else {
            continue;
        };
        for (net_dev, iface, addr) in listed_interfaces(&list) {
            let local = &ctx.kb.local_only;
            if !local.interface(iface) && local.network_of(addr).is_none() {
                continue;
            }
            let carries_channel = ev.kind == EventKind::NcclNetSocket
                && socket_channels.carries(&ev.who.host, ev.who.pid, net_dev);
            if let Some(host) = &ev.who.host {
                let hosts = hosts_of_addr.entry(addr.to_string()).or_default();
                hosts.insert(host.clone());
            }
            out.push(LocalInterface {
                idx,
                iface: format!("{iface}:{addr}"),
                net_dev,
                carries_channel,
                hosts_sharing: 0,
            });
        }
    }
    for s in &mut out {
        let addr = s.iface.split_once(':').map_or("", |(_, a)| a);
        s.hosts_sharing = hosts_of_addr.get(addr).map_or(0, BTreeSet::len);
    }
    // Interfaces that carry channels first: they are what failed.
    out.sort_by_key(|s| !s.carries_channel);
    out
}

/// The interface list a `NET/Socket : Using` or `Bootstrap : Using` line
/// prints, in the socket listing's form.
pub(in crate::diagnose::rules) fn listing_text(ev: &Event) -> Option<String> {
    match ev.kind {
        EventKind::NcclNetSocket => Some(ev.text_field("interfaces").unwrap_or("").to_string()),
        EventKind::NcclBootstrapIface => Some(format!(
            "{}:{}<0>",
            ev.text_field("iface").unwrap_or(""),
            ev.text_field("ip").unwrap_or("")
        )),
        _ => None,
    }
}

/// The interfaces of an NCCL listing (`[0]eth0:10.0.0.1<0> [1]veth9:fe80::1%veth9<0>`,
/// ≤2.6's bare `lo:127.0.0.1<0>`): (index, name, address) each.
pub(in crate::diagnose::rules) fn listed_interfaces(
    list: &str,
) -> impl Iterator<Item = (u32, &str, &str)> {
    list.split_whitespace()
        .enumerate()
        .filter_map(|(pos, item)| {
            let net_dev = socket_index(item).unwrap_or(pos as u32);
            let item =
                item.trim_start_matches(|c: char| c == '[' || c.is_ascii_digit() || c == ']');
            let (iface, rest) = item.split_once(':')?;
            Some((net_dev, iface, rest.split('<').next().unwrap_or(rest)))
        })
}

/// `[1]veth…` → 1.
fn socket_index(item: &str) -> Option<u32> {
    item.strip_prefix('[')?.split_once(']')?.0.parse().ok()
}

/// Where channels are routed `via NET/Socket/N`: by process, and by host
/// for the processes whose channel lines were not kept (every process of a
/// host lists the same interfaces in the same order).
struct SocketChannels {
    by_process: BTreeSet<(Option<Sym>, Option<u32>, i64)>,
    by_host: BTreeSet<(Option<Sym>, i64)>,
    processes: BTreeSet<(Option<Sym>, Option<u32>)>,
}

impl SocketChannels {
    fn carries(&self, host: &Option<Sym>, pid: Option<u32>, dev: u32) -> bool {
        let dev = i64::from(dev);
        if self.processes.contains(&(host.clone(), pid)) {
            self.by_process.contains(&(host.clone(), pid, dev))
        } else {
            host.is_some() && self.by_host.contains(&(host.clone(), dev))
        }
    }
}

fn socket_channels(ctx: &Ctx<'_>) -> SocketChannels {
    let mut out = SocketChannels {
        by_process: BTreeSet::new(),
        by_host: BTreeSet::new(),
        processes: BTreeSet::new(),
    };
    for (_, e) in ctx.job.events_where(|k| k == EventKind::NcclChannel) {
        out.processes.insert((e.who.host.clone(), e.who.pid));
        if e.text_field("transport") != Some("NET/Socket") {
            continue;
        }
        let Some(dev) = e.int("net_dev") else {
            continue;
        };
        out.by_process.insert((e.who.host.clone(), e.who.pid, dev));
        out.by_host.insert((e.who.host.clone(), dev));
    }
    out
}
