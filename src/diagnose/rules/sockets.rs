//! Sockets that cannot connect: NCCL's bootstrap and socket transport, Gloo
//! and Open MPI's TCP transport on an interface other hosts cannot reach
//! (`socket_interface`), or connections a firewall refuses (`firewall`).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, Event, EventIdx, EventKind, Sym};

use super::Ctx;
use super::bootstrap_ring::Dialled;

/// Bootstrap and socket connects that fail, and the interfaces NCCL chose.
pub(super) fn socket_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let job = ctx.job;
    let mut connect_errors: Vec<EventIdx> = Vec::new();
    let mut iface_hyp = Hypothesis::new(CauseKind::SocketInterface);
    let mut fw_hyp = Hypothesis::new(CauseKind::Firewall);
    // A peer address every host has (docker0's): no log says whose it was.
    let mut local_peer: Option<String> = None;
    let read = |k| matches!(k, EventKind::BootstrapError | EventKind::SocketError);
    for (idx, ev) in job.events_where(read) {
        match ev.kind {
            EventKind::BootstrapError
                if ev
                    .text_field("error")
                    .is_some_and(|e| e.contains("interface")) =>
            {
                keep_host_or_reporters(&mut iface_hyp, ev);
                iface_hyp.support(
                    Source::Nccl,
                    0.75,
                    Some(idx),
                    "NCCL found no usable socket interface",
                );
                if let Some(error) = ev.text_field("error") {
                    let error = format!("`{error}`");
                    iface_hyp.values.entry("detail").or_insert(error);
                }
            }
            EventKind::BootstrapError
                if ev.text_field("error") == Some("address family")
                    && job.env.contains_key("NCCL_SOCKET_IFNAME") =>
            {
                let iface = job
                    .env
                    .get("NCCL_SOCKET_IFNAME")
                    .and_then(|values| values.keys().next())
                    .map_or("", String::as_str);
                keep_host_or_reporters(&mut iface_hyp, ev);
                iface_hyp.support(
                    Source::Nccl,
                    0.6,
                    Some(idx),
                    format!("NCCL_SOCKET_IFNAME is `{iface}`; with no such interface on the host NCCL connects with an address it never filled in (an unknown address family)"),
                );
                iface_hyp.value("detail", format!("NCCL_SOCKET_IFNAME=`{iface}`"));
            }
            EventKind::SocketError if ev.text_field("op") == Some("connect") => {
                connect_errors.push(idx)
            }
            // bind() refusing the address NCCL chose (EADDRNOTAVAIL): the
            // address is not this host's to use: an IPv6 link-local one
            // without its scope, another host's (NCCL_COMM_ID), a stale one.
            EventKind::SocketError
                if ev.text_field("op") == Some("bind")
                    && ev
                        .text_field("error")
                        .is_some_and(|e| e.contains("Cannot assign requested address")) =>
            {
                keep_host_or_reporters(&mut iface_hyp, ev);
                iface_hyp.support(
                    Source::Nccl,
                    0.6,
                    Some(idx),
                    "NCCL could not bind the address of the interface it chose (`Cannot assign requested address`): that address is not usable on this host",
                );
            }
            // Open MPI dialled one process and another answered: two hosts
            // share the address it dialled (a docker0 or virbr0 every host
            // has), on an interface its TCP transport should not use.
            EventKind::SocketError if ev.text_field("what") == Some("wrong_peer") => {
                keep_host_or_reporters(&mut iface_hyp, ev);
                if iface_hyp.support.len() < 6 {
                    iface_hyp.support(
                        Source::Launcher,
                        0.6,
                        Some(idx),
                        "an MPI TCP connection reached another process than the one dialled: two hosts share the address it used",
                    );
                }
                iface_hyp
                    .values
                    .entry("detail")
                    .or_insert_with(|| "an address two hosts share".to_string());
            }
            // Traffic with a peer at an address every host has its own copy
            // of: the peer advertised an interface only it can reach.
            EventKind::SocketError => {
                let Some((peer, net)) = ev
                    .text_field("peer")
                    .and_then(|p| Some((p, ctx.kb.local_only.network_of(p)?)))
                else {
                    continue;
                };
                local_peer.get_or_insert_with(|| peer.to_string());
                iface_hyp.peer_host = iface_hyp
                    .peer_host
                    .take()
                    .or_else(|| ev.who.host.as_deref().map(str::to_string));
                if iface_hyp.support.len() < 6 {
                    iface_hyp.support(
                        Source::Nccl,
                        0.5,
                        Some(idx),
                        format!("a socket to {peer} failed; that address is {net}, which every host has its own copy of"),
                    );
                }
                iface_hyp
                    .values
                    .entry("detail")
                    .or_insert_with(|| format!("`{peer}`, {net}"));
            }
            _ => {}
        }
    }
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
        keep_host_or_reporters(&mut iface_hyp, ev);
        let iface = &s.iface;
        let unreachable = format!("NCCL uses `{iface}`, which cannot reach other hosts");
        // The first listed is the one bootstrap binds and the socket
        // transport's default: its connects are the ones retried, and the
        // ones other hosts could not make.
        let first = s.net_dev == 0;
        let connects_failed =
            !connect_errors.is_empty() || (first && (retried || socket_call_failed));
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
        iface_hyp.support(Source::Nccl, w, Some(s.idx), why);
        // The first listed is the one bootstrap binds.
        iface_hyp
            .values
            .entry("detail")
            .or_insert_with(|| format!("`{iface}`"));
    }
    let dialers = dialers_by_peer(job, &connect_errors);
    let ring_next = super::bootstrap_ring::ring_next_hosts(job, &connect_errors);
    // The ring's next rank where no line places it: the host is its.
    let mut ring_rank: Option<u32> = None;
    for &idx in connect_errors.iter().take(8) {
        let ev = &job.events[idx];
        let error = ev
            .text_field("error")
            .or(ev.text_field("error2"))
            .or(ev.text_field("error3"))
            .or(ev.text_field("error4"))
            .unwrap_or("")
            .to_ascii_lowercase();
        let peer = ev.text_field("peer").map(|p| {
            ctx.host_of_addr(p)
                .map(str::to_string)
                .unwrap_or_else(|| p.to_string())
        });
        let host = ev.who.host.as_deref().map(str::to_string);
        let addressless = ev.text_field("peer").is_none();
        let ring_next_of_dialled = ring_next.get(
            ev.text_field("peer")
                .unwrap_or(super::bootstrap_ring::NO_ADDRESS),
        );
        // What an address-less give-up says failed (grammars/nccl.toml).
        let error = match (addressless, ev.text_field("returned")) {
            (true, Some(returned)) => returned.to_ascii_lowercase(),
            _ => error,
        };
        let refused = error.contains("refused");
        let unreachable = error.contains("no route") || error.contains("unreachable");
        let timeout = error.contains("timed out")
            || ev.text_field("what") == Some("timeouts")
            || ev.text_field("timeout").is_some();
        // A peer that advertised a host-local address (docker0's
        // 172.17.0.1) bootstrapped over the wrong interface: a connect to it
        // reaches the caller's own host, where nothing listens.
        let local_net = ev
            .text_field("peer")
            .and_then(|p| ctx.kb.local_only.network_of(p));
        // No route to a peer on the LAN the job's hosts bootstrap on is no
        // routing problem: a firewall that rejects with
        // icmp-host-prohibited (firewalld's default) makes exactly that error.
        let same_lan = unreachable
            && ev.text_field("peer").is_some_and(|p| {
                job.hosts
                    .values()
                    .flat_map(|info| &info.ips)
                    .any(|ip| ip != p && same_slash24(ip, p))
            });
        let (fw, ifc) = match (local_net, refused || same_lan, unreachable, timeout) {
            (Some(_), ..) => (0.15, 0.75),
            (_, true, _, _) => (0.5, 0.3),
            (_, _, true, _) => (0.35, 0.5),
            (_, _, _, true) => (0.45, 0.35),
            _ => (0.3, 0.3),
        };
        // The host that could not be reached is the suspect; the ranks that
        // tried to connect are its victims (the same rule as for IB errors).
        // A peer known only by its address is still the suspect: no host
        // of the job printed that address (its ranks logged nothing), and
        // blaming the reporter would name a victim.
        let is_ip = |p: &String| p.parse::<std::net::IpAddr>().is_ok();
        let target = peer
            .clone()
            .filter(|p| job.hosts.contains_key(p))
            .or_else(|| {
                peer.as_ref()
                    .filter(|p| is_ip(p))
                    .and_then(|_| job.other_host_of_two(host.as_deref()?))
            })
            .or_else(|| {
                peer.as_ref()
                    .filter(|p| is_ip(p))
                    .and_then(|p| job.sole_host_outside(dialers.get(p.as_str())?))
            })
            // A line with no address, between two hosts: the other one.
            .or_else(|| {
                addressless
                    .then(|| job.other_host_of_two(host.as_deref()?))
                    .flatten()
            });
        // Only where nothing else names the address's host: the ring's
        // next rank is the host it dialled, its line says nothing more.
        let ring_host = ring_next_of_dialled.and_then(|n| n.host.clone());
        let by_ring = target.is_none() && ring_host.is_some();
        if let Some(next) = ring_next_of_dialled.filter(|n| n.host.is_none()) {
            ring_rank.get_or_insert(next.rank);
        }
        let target = target
            .or(ring_host)
            .or_else(|| peer.clone().filter(|p| is_ip(p) && local_net.is_none()));
        for (h, w) in [(&mut fw_hyp, fw), (&mut iface_hyp, ifc)] {
            match &target {
                Some(t) => {
                    h.host = h.host.take().or(Some(t.clone()));
                    h.peer_host = h.peer_host.take().or(host.clone());
                }
                // Every host has this address, or the line names none (a
                // give-up of 2.18–2.26 the ring does not place): it names no
                // host, and the reporter is still the victim.
                None if local_net.is_some() || addressless => {
                    h.peer_host = h.peer_host.take().or(host.clone());
                }
                None => {
                    h.host = h.host.take().or(host.clone());
                    h.peer_host = h.peer_host.take().or(peer.clone());
                    h.ranks.extend(ev.who.rank);
                }
            }
            let mut why = match local_net {
                Some(net) => format!(
                    "a socket connection failed: `{error}`; the peer's address is in {net}, which every host has its own copy of"
                ),
                None => format!("a socket connection failed: `{error}`"),
            };
            let ring_dialler = ev
                .who
                .rank
                .filter(|r| ring_next_of_dialled.is_some_and(|n| n.dialled_by.contains(r)));
            if by_ring
                && let (Some(t), Some(rank), Some(next)) =
                    (&target, ring_dialler, ring_next_of_dialled)
            {
                why.push_str(&match next.whom {
                    Dialled::RingNext => format!(
                        "; before any communicator came up, rank {rank} dials the next rank of NCCL's bootstrap ring, on {t}"
                    ),
                    Dialled::Root => format!(
                        "; before any communicator came up, every rank dials NCCL's bootstrap root in rank 0's process, on {t}: ranks on other hosts failed that connect, none on {t} did"
                    ),
                });
            }
            h.support(Source::Nccl, w, Some(idx), why);
        }
        if let (Some(net), Some(addr)) = (local_net, ev.text_field("peer")) {
            local_peer.get_or_insert_with(|| addr.to_string());
            iface_hyp
                .values
                .entry("detail")
                .or_insert_with(|| format!("`{addr}`, {net}"));
        }
        fw_hyp
            .values
            .entry("detail")
            .or_insert_with(|| format!("`{error}`"));
        iface_hyp
            .values
            .entry("detail")
            .or_insert_with(|| format!("`{error}`"));
    }
    if connect_errors.is_empty() {
        unanswered_retries(job, &mut fw_hyp, &mut iface_hyp);
    }
    for h in [&mut iface_hyp, &mut fw_hyp] {
        // Where no host is named, what the lines do say of it: the ring's
        // rank it is, the address its ranks advertised; for a connect
        // whose line names neither end (NCCL 2.2–2.3 print no address,
        // and without their `NCCL` tag no host), the peer it dialled.
        let whose = match (ring_rank, &local_peer) {
            (Some(rank), Some(addr)) => {
                Some(format!("rank {rank}'s host, whose ranks advertised {addr}"))
            }
            (None, Some(addr)) => Some(format!("the host whose ranks advertised {addr}")),
            (Some(rank), None) => Some(format!("rank {rank}'s host")),
            (None, None) => (h.kind == CauseKind::Firewall).then(|| "the peer host".to_string()),
        };
        if h.host.is_none()
            && let Some(whose) = whose
        {
            h.values.insert("host", whose);
        }
        if h.ranks.is_empty()
            && let Some(host) = h.host.clone()
        {
            h.ranks = job
                .ranks
                .values()
                .filter(|r| r.host.as_deref() == Some(host.as_str()))
                .map(|r| r.rank)
                .collect();
        }
    }
    // Only Open MPI's own TCP lines: its transport, not NCCL's, is pinned.
    let by_mpi = |h: &Hypothesis| {
        h.support.iter().all(|s| {
            s.event
                .is_some_and(|i| job.events[i].text_field("via") == Some("mpi"))
        })
    };
    for h in [&mut iface_hyp, &mut fw_hyp] {
        if !h.support.is_empty() && by_mpi(h) {
            h.value("variant", "mpi_tcp");
        }
    }
    [iface_hyp, fw_hyp]
        .into_iter()
        .filter(|h| !h.support.is_empty())
        .collect()
}

/// The hosts that reported a failed connect to each peer address: the
/// address is none of theirs (a host-local one aside, where each dialled
/// its own copy; they advertised another).
fn dialers_by_peer<'a>(
    job: &'a crate::model::Job,
    connect_errors: &[EventIdx],
) -> BTreeMap<&'a str, BTreeSet<String>> {
    let mut dialers: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for &idx in connect_errors {
        let ev = &job.events[idx];
        if let (Some(peer), Some(host)) = (ev.text_field("peer"), job.host_of_event(ev)) {
            dialers.entry(peer).or_default().insert(short_host_of(host));
        }
    }
    dialers
}

/// NCCL's INFO retries of a refused or timed-out connect, where no final
/// failure survived (a cut log, WARN lines lost with stdout's buffer): a
/// lead only, and none once a communicator finished init, since a peer
/// that starts listening late is refused for a while in healthy jobs too.
fn unanswered_retries(job: &crate::model::Job, fw: &mut Hypothesis, iface: &mut Hypothesis) {
    if job.a_comm_came_up() {
        return;
    }
    for (idx, ev) in job.events_where(|k| k == EventKind::SocketRetry).take(2) {
        let error = ev.text_field("error").unwrap_or("").to_ascii_lowercase();
        let (fw_w, ifc_w) = if error.contains("refused") {
            (0.3, 0.2)
        } else {
            (0.25, 0.25)
        };
        for (h, w) in [(&mut *fw, fw_w), (&mut *iface, ifc_w)] {
            h.peer_host = h
                .peer_host
                .take()
                .or(ev.who.host.as_deref().map(str::to_string));
            h.support(
                Source::Nccl,
                w,
                Some(idx),
                format!(
                    "NCCL kept retrying a connect (`{error}`) and no line shows it got through"
                ),
            );
            h.values
                .entry("detail")
                .or_insert_with(|| format!("`{error}`, retrying"));
        }
    }
}

/// The hypothesis keeps its host, else takes the reporting line's.
fn keep_host_or_reporters(h: &mut Hypothesis, ev: &Event) {
    h.host = h
        .host
        .take()
        .or_else(|| ev.who.host.as_deref().map(str::to_string));
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
pub(super) fn listing_text(ev: &Event) -> Option<String> {
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
pub(super) fn listed_interfaces(list: &str) -> impl Iterator<Item = (u32, &str, &str)> {
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

/// Two IPv4 addresses in one /24: one LAN under any mask an operator uses
/// for a cluster network (a finer one would split a rack).
fn same_slash24(a: &str, b: &str) -> bool {
    let net = |s: &str| {
        s.parse::<std::net::Ipv4Addr>()
            .ok()
            .map(|ip| ip.octets()[..3].to_vec())
    };
    net(a).is_some_and(|n| Some(n) == net(b))
}
