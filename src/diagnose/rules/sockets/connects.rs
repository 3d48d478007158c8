//! Failed connects: whom each dialled (the host its address names, the
//! other of two hosts, the one host no line accounts for, or NCCL's
//! bootstrap ring or root), what its error says of a firewall against an
//! interface, and the ranks that dialled as the victims.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{Event, EventIdx, EventKind, Job};

use super::super::Ctx;
use super::super::bootstrap_ring::{self, Dialled, NO_ADDRESS, RingNext};
use super::Leads;

/// What one failed connect's line says.
struct Connect<'a> {
    ev: &'a Event,
    /// The error, lower-case; for a give-up that names no address, what
    /// its pattern says failed (grammars/nccl.toml).
    error: String,
    /// The peer: the host its address belongs to, else the address.
    peer: Option<String>,
    /// The reporting line's host.
    host: Option<String>,
    addressless: bool,
    /// The network of a host-local address the peer advertised (docker0's
    /// 172.17.0.1): it bootstrapped over the wrong interface, and a connect
    /// to it reaches the caller's own host, where nothing listens.
    local_net: Option<&'a str>,
}

impl<'a> Connect<'a> {
    fn read(ctx: &'a Ctx<'_>, ev: &'a Event) -> Connect<'a> {
        let addressless = ev.text_field("peer").is_none();
        let error = match (addressless, ev.text_field("returned")) {
            (true, Some(returned)) => returned,
            _ => ["error", "error2", "error3", "error4"]
                .into_iter()
                .find_map(|f| ev.text_field(f))
                .unwrap_or(""),
        };
        let peer = ev.text_field("peer").map(|p| {
            ctx.host_of_addr(p)
                .map(str::to_string)
                .unwrap_or_else(|| p.to_string())
        });
        Connect {
            ev,
            error: error.to_ascii_lowercase(),
            peer,
            host: ev.who.host.as_deref().map(str::to_string),
            addressless,
            local_net: ev
                .text_field("peer")
                .and_then(|p| ctx.kb.local_only.network_of(p)),
        }
    }
}

/// Places the first eight failed connects on the host they could not
/// reach: each supports both causes, weighted by its error.
pub(super) fn place(ctx: &Ctx<'_>, connect_errors: &[EventIdx], leads: &mut Leads) {
    let job = ctx.job;
    let dialers = dialers_by_peer(job, connect_errors);
    let ring_next = bootstrap_ring::ring_next_hosts(job, connect_errors);
    for &idx in connect_errors.iter().take(8) {
        let c = Connect::read(ctx, &job.events[idx]);
        let dialled = ring_next.get(c.ev.text_field("peer").unwrap_or(NO_ADDRESS));
        let named = named_host(job, &c, &dialers);
        // Only where nothing else names the address's host: the ring's
        // next rank is the host it dialled, its line says nothing more.
        let ring_host = dialled.and_then(|n| n.host.clone());
        let by_ring = (named.is_none() && ring_host.is_some())
            .then_some(dialled)
            .flatten();
        if let Some(next) = dialled.filter(|n| n.host.is_none()) {
            leads.ring_rank.get_or_insert(next.rank);
        }
        let target = named
            .or(ring_host)
            .or_else(|| c.peer.clone().filter(|p| is_ip(p) && c.local_net.is_none()));
        let why = why(&c, target.as_deref().zip(by_ring));
        let (fw, ifc) = weights(job, &c);
        let cut_off = by_ring.is_some_and(|n| n.whom == Dialled::RootFromOddHost);
        for (h, w) in [(&mut leads.fw, fw), (&mut leads.iface, ifc)] {
            blame(h, &c, target.as_ref());
            if cut_off {
                h.peer_host = job.short_host_of_rank(0).map(str::to_string);
                h.value("variant", "cut_off_host");
            }
            h.support(Source::Nccl, w, Some(idx), why.clone());
        }
        keep_details(leads, &c);
    }
}

fn is_ip(p: &str) -> bool {
    p.parse::<std::net::IpAddr>().is_ok()
}

/// The host that could not be reached is the suspect; the ranks that
/// tried to connect are its victims (the same rule as for IB errors). A
/// peer known only by its address is still the suspect: no host of the
/// job printed that address (its ranks logged nothing), and blaming the
/// reporter would name a victim.
fn named_host(
    job: &Job,
    c: &Connect<'_>,
    dialers: &BTreeMap<&str, BTreeSet<String>>,
) -> Option<String> {
    let ip_peer = c.peer.as_deref().filter(|p| is_ip(p));
    let reporter = c.host.as_deref();
    c.peer
        .clone()
        .filter(|p| job.hosts.contains_key(p))
        .or_else(|| ip_peer.and_then(|_| job.other_host_of_two(reporter?)))
        .or_else(|| ip_peer.and_then(|p| job.sole_host_outside(dialers.get(p)?)))
        // A line with no address, between two hosts: the other one.
        .or_else(|| {
            c.addressless
                .then(|| job.other_host_of_two(reporter?))
                .flatten()
        })
}

/// (firewall, socket_interface) support of one failed connect, by its error.
fn weights(job: &Job, c: &Connect<'_>) -> (f64, f64) {
    let error = &c.error;
    let refused = error.contains("refused");
    let unreachable = error.contains("no route") || error.contains("unreachable");
    let timeout = error.contains("timed out")
        || c.ev.text_field("what") == Some("timeouts")
        || c.ev.text_field("timeout").is_some();
    // No route to a peer on the LAN the job's hosts bootstrap on is no
    // routing problem: a firewall that rejects with
    // icmp-host-prohibited (firewalld's default) makes exactly that error.
    let same_lan = unreachable
        && c.ev.text_field("peer").is_some_and(|p| {
            job.hosts
                .values()
                .flat_map(|info| info.ips.iter().chain(&info.listed_ips))
                .any(|ip| ip != p && same_slash24(ip, p))
        });
    match (c.local_net, refused || same_lan, unreachable, timeout) {
        (Some(_), ..) => (0.15, 0.75),
        (_, true, _, _) => (0.5, 0.3),
        (_, _, true, _) => (0.35, 0.5),
        (_, _, _, true) => (0.45, 0.35),
        _ => (0.3, 0.3),
    }
}

/// Names the dialled host on `h`, the reporter as its victim; a line that
/// names no reachable peer blames its own host.
fn blame(h: &mut Hypothesis, c: &Connect<'_>, target: Option<&String>) {
    match target {
        Some(t) => {
            h.host = h.host.take().or(Some(t.clone()));
            h.peer_host = h.peer_host.take().or(c.host.clone());
        }
        // Every host has this address, or the line names none (a give-up
        // of 2.18–2.26 the bootstrap does not place): it names no host,
        // and the reporter is still the victim.
        None if c.local_net.is_some() || c.addressless => {
            h.peer_host = h.peer_host.take().or(c.host.clone());
        }
        None => {
            h.host = h.host.take().or(c.host.clone());
            h.peer_host = h.peer_host.take().or(c.peer.clone());
            h.ranks.extend(c.ev.who.rank);
        }
    }
}

/// Why the line counts; `by_bootstrap`: the host the bootstrap placed it
/// on, and whom it dialled there.
fn why(c: &Connect<'_>, by_bootstrap: Option<(&str, &RingNext)>) -> String {
    let error = &c.error;
    let mut why = match c.local_net {
        Some(net) => format!(
            "a socket connection failed: `{error}`; the peer's address is in {net}, which every host has its own copy of"
        ),
        None => format!("a socket connection failed: `{error}`"),
    };
    let Some((t, next)) = by_bootstrap else {
        return why;
    };
    let Some(rank) = c.ev.who.rank.filter(|r| next.dialled_by.contains(r)) else {
        return why;
    };
    why.push_str(&match next.whom {
        Dialled::RingNext => format!(
            "; before any communicator came up, rank {rank} dials the next rank of NCCL's bootstrap ring, on {t}"
        ),
        Dialled::Root => format!(
            "; before any communicator came up, every rank dials NCCL's bootstrap root in rank 0's process, on {t}: ranks on other hosts failed that connect, none on {t} did"
        ),
        Dialled::RootFromOddHost => format!(
            "; before any communicator came up, every rank dials NCCL's bootstrap root in rank 0's process: the ranks of other hosts reached it, only {t}'s failed"
        ),
    });
    why
}

/// The first error and host-local address seen, as the causes' detail.
fn keep_details(leads: &mut Leads, c: &Connect<'_>) {
    if let (Some(net), Some(addr)) = (c.local_net, c.ev.text_field("peer")) {
        leads.local_peer.get_or_insert_with(|| addr.to_string());
        leads
            .iface
            .values
            .entry("detail")
            .or_insert_with(|| format!("`{addr}`, {net}"));
    }
    for h in [&mut leads.fw, &mut leads.iface] {
        h.values
            .entry("detail")
            .or_insert_with(|| format!("`{}`", c.error));
    }
}

/// The hosts that reported a failed connect to each peer address: the
/// address is none of theirs (a host-local one aside, where each dialled
/// its own copy; they advertised another).
fn dialers_by_peer<'a>(
    job: &'a Job,
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
pub(super) fn unanswered_retries(job: &Job, fw: &mut Hypothesis, iface: &mut Hypothesis) {
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
