//! Set-up faults: verbs calls that fail (memlock, GID index, cross-rail) and
//! sockets that cannot connect (interface, firewall).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::nccl_major_minor;
use crate::model::{CauseKind, Event, EventIdx, EventKind, Sym};

use super::Ctx;

/// Sequence numbers up to this are still the job's set-up collectives.
const SETUP_SEQ: i64 = 2;
/// What a GID clue is worth once the job's connections have come up.
pub(super) const LATE_GID_FACTOR: f64 = 0.3;

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(verbs_failures(ctx));
    out.extend(roce_retries_without_a_peer(ctx, hang));
    out.extend(link_local_roce_gids(ctx, hang));
    out.extend(socket_failures(ctx));
    out.extend(super::bootstrap::failed_bootstrap(ctx));
    out.extend(super::gloo::unusable_interface(ctx));
    out.extend(super::store::unreachable_store(ctx));
    out.extend(super::store::clients_missing(ctx));
    out
}

fn errno_is(ev: &Event, code: i64, text: &str) -> bool {
    let error = ev.text_field("error").unwrap_or("").to_ascii_lowercase();
    ev.int("errno") == Some(code) || error.contains(text)
}

/// A queue pair that could not be brought up to its peer: it timed out
/// (ETIMEDOUT) or found no route to the peer's GID (ENETUNREACH, RoCE).
fn qp_cannot_reach(ev: &Event) -> bool {
    errno_is(ev, 110, "timed out") || errno_is(ev, 101, "network is unreachable")
}

fn verbs_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut hyps: BTreeMap<CauseKind, Hypothesis> = BTreeMap::new();
    let link_layer = fabric_link_layer(ctx);
    let gid_forced = ctx.job.env.contains_key("NCCL_IB_GID_INDEX");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::VerbsCallFailed) {
        let call = ev.text_field("call").unwrap_or("");
        let mut add = |kind: CauseKind, weight: f64, why: String| {
            let h = hyps.entry(kind).or_insert_with(|| located(kind, ev));
            h.ranks.extend(ev.who.rank);
            if h.support.len() < 8 {
                h.support(Source::Nccl, weight, Some(idx), why);
            }
        };
        let detail = format!(
            "`{}`",
            ev.text_field("error")
                .map_or_else(|| format!("{call} failed"), |e| format!("{call}: {e}"))
        );
        match call {
            // `ibv_reg_mr_iova2` is the registration NCCL 2.19+ calls when
            // the verbs library has it; a failure there is the same limit.
            // The verbs stack refusing the call itself (DMA-BUF registration
            // on a driver without it) is no limit: nothing to raise.
            "ibv_reg_mr" | "ibv_reg_mr_iova2" | "ibv_create_qp" | "ibv_create_cq"
            | "ibv_reg_dmabuf_mr" | "ibv_alloc_pd"
                if errno_is(ev, 95, "operation not supported") => {}
            "ibv_reg_mr" | "ibv_reg_mr_iova2" | "ibv_create_qp" | "ibv_create_cq"
            | "ibv_reg_dmabuf_mr" | "ibv_alloc_pd" => {
                let w = if errno_is(ev, 12, "cannot allocate memory") {
                    0.75
                } else {
                    0.5
                };
                add(
                    CauseKind::Memlock,
                    w,
                    format!("{call} failed: pinned memory could not be registered ({detail})"),
                );
            }
            "ibv_modify_qp" if errno_is(ev, 22, "invalid argument") => {
                add(
                    CauseKind::GidIndex,
                    0.75,
                    format!(
                        "the queue pair could not use its GID ({detail}): a wrong RoCE GID index"
                    ),
                );
            }
            // An explicit NCCL_IB_GID_INDEX naming an entry this host's
            // table does not populate (indices differ between hosts).
            "ibv_modify_qp" if errno_is(ev, 19, "no such device") => {
                add(
                    CauseKind::GidIndex,
                    0.7,
                    format!(
                        "the queue pair's GID index names no GID on this NIC ({detail}): a wrong RoCE GID index"
                    ),
                );
            }
            "ibv_modify_qp" if qp_cannot_reach(ev) => {
                // NCCL's own hint says cross-rail. A GID that does not route
                // (link-local, RoCE v1) times out the same way: a forced
                // NCCL_IB_GID_INDEX points there, and so does a GID table
                // showing a bad entry (the snapshot rule adds that support).
                let (gid_w, rail_w) = match (link_layer.as_deref(), gid_forced) {
                    (_, true) => (0.6, 0.35),
                    (Some("IB"), false) => (0.25, 0.6),
                    (_, false) => (0.4, 0.5),
                };
                add(
                    CauseKind::GidIndex,
                    gid_w,
                    format!(
                        "queue-pair connection failed ({detail}): the GID in use may not route to the peer"
                    ),
                );
                add(
                    CauseKind::CrossRail,
                    rail_w,
                    format!(
                        "queue-pair connection failed ({detail}): the peer NIC may be on another rail"
                    ),
                );
            }
            _ => {}
        }
    }
    for h in hyps.values_mut() {
        h.value(
            "detail",
            h.support.first().map(|s| s.why.clone()).unwrap_or_default(),
        );
    }
    // A connection that times out fails on both ends: the rank every
    // reporter talks to is the bad end.
    let timeouts: Vec<EventIdx> = ctx
        .job
        .events_where(|k| k == EventKind::VerbsCallFailed)
        .filter(|(_, ev)| ev.text_field("call") == Some("ibv_modify_qp") && qp_cannot_reach(ev))
        .map(|(i, _)| i)
        .collect();
    for kind in [CauseKind::CrossRail, CauseKind::GidIndex] {
        if let Some(h) = hyps.get_mut(&kind) {
            if !super::common_peer::locate_by_address(ctx.job, h, &timeouts) {
                super::common_peer::locate(ctx.job, h);
            }
            super::common_peer::name_the_nic(ctx.job, h);
            super::common_peer::name_the_likely_nic(ctx.job, h);
        }
    }
    // The locked-memory limit is the host's (its container, its ulimit):
    // every rank there hits it, not only those whose failure was logged.
    if let Some(h) = hyps.get_mut(&CauseKind::Memlock) {
        add_host_ranks(ctx, h);
    }
    hyps.into_values().collect()
}

/// The job's network connections came up: collectives ran past set-up, or
/// the world communicator finished init on an NCCL that connects its rings
/// and trees during init (2.22 made that lazy by default).
pub(super) fn connections_worked(ctx: &Ctx<'_>, hang: Option<&Hang>) -> bool {
    let job = ctx.job;
    if hang.and_then(|h| h.seq).is_some_and(|s| s > SETUP_SEQ) {
        return true;
    }
    let eager = !job.nccl_versions.is_empty()
        && job
            .nccl_versions
            .iter()
            .all(|v| !version_at_least(v, 2, 22));
    eager
        && job.events.iter().any(|e| {
            e.kind == EventKind::NcclCommInit
                && e.text_field("phase") == Some("COMPLETE")
                && e.int("nranks").map(|n| n as u32) == job.world_size
        })
}

/// Retry-exceeded completions on RoCE whose peer no log maps: before NCCL
/// 2.21 picked the GID itself, index 0 (a link-local or RoCE v1 GID) made
/// every connection to another host time out exactly like this, and setting
/// NCCL_IB_GID_INDEX to the routable RoCE v2 entry is the usual fix. Loss on
/// the wire looks the same from the sender; the counters' packet-loss
/// hypotheses compete with this one.
fn roce_retries_without_a_peer(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    let job = ctx.job;
    if job.env.contains_key("NCCL_IB_GID_INDEX") || !on_roce(ctx) {
        return None;
    }
    let auto_gid = job.nccl_versions.iter().any(|v| version_at_least(v, 2, 21));
    if auto_gid {
        return None;
    }
    let errors: Vec<EventIdx> = job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::IbCompletionError && e.int("status") == Some(12))
        .filter(|(_, e)| {
            e.text_field("peer")
                .and_then(|p| job.host_of_addr(p))
                .is_none()
        })
        .map(|(i, _)| i)
        .take(4)
        .collect();
    gid_lead(ctx, hang, &errors, |_| {
        "transport retries exhausted on RoCE with no peer answering: the GID in use may not route"
            .to_string()
    })
    .map(|mut h| {
        h.value(
            "detail",
            "retry-exceeded completions on RoCE, NCCL_IB_GID_INDEX not set".to_string(),
        );
        h
    })
}

/// A GID-index lead from failed connections, placed at the first: 0.45 per
/// line, far less once connections had come up (a GID that does not route
/// fails the first connection, not one of a job whose collectives ran).
fn gid_lead(
    ctx: &Ctx<'_>,
    hang: Option<&Hang>,
    hits: &[EventIdx],
    why: impl Fn(&Event) -> String,
) -> Option<Hypothesis> {
    let job = ctx.job;
    let first = *hits.first()?;
    let mut h = located(CauseKind::GidIndex, &job.events[first]);
    let weight = if connections_worked(ctx, hang) {
        0.45 * LATE_GID_FACTOR
    } else {
        0.45
    };
    for &idx in hits {
        let ev = &job.events[idx];
        h.ranks.extend(ev.who.rank);
        h.support(Source::Nccl, weight, Some(idx), why(ev));
    }
    Some(h)
}

/// Failed queue pairs whose own GID is a link-local one built from an
/// Ethernet MAC (`fe80::…ff:fe…`): a RoCE GID that routes nowhere beyond
/// its subnet, the one index 0 or 1 holds. InfiniBand GIDs are link-local
/// too, but built from the port GUID, and are left alone.
fn link_local_roce_gids(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    let job = ctx.job;
    let failed = |e: &Event| {
        (e.kind == EventKind::IbCompletionError && e.int("status") == Some(12))
            || (e.kind == EventKind::VerbsCallFailed
                && e.text_field("call") == Some("ibv_modify_qp"))
    };
    let hits: Vec<EventIdx> = job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            failed(e)
                && e.text_field("local_gid")
                    .is_some_and(mac_derived_link_local)
        })
        .map(|(i, _)| i)
        .take(4)
        .collect();
    // Within one L2 segment a link-local RoCE GID works: a lead, which the
    // loss rules' own evidence can outweigh.
    let mut h = gid_lead(ctx, hang, &hits, |ev| {
        let gid = ev.text_field("local_gid").unwrap_or("");
        format!(
            "the failed queue pair used the link-local RoCE GID {gid}, which does not route beyond its subnet"
        )
    })?;
    h.value(
        "detail",
        "queue pairs on a link-local RoCE GID: pick the RoCE v2 IPv4 entry of `show_gids` with NCCL_IB_GID_INDEX".to_string(),
    );
    Some(h)
}

/// `fe80::` with an EUI-64 interface id from a MAC (`ff:fe` in its middle).
fn mac_derived_link_local(gid: &str) -> bool {
    let Ok(addr) = gid.parse::<std::net::Ipv6Addr>() else {
        return false;
    };
    let b = addr.octets();
    addr.segments()[0] == 0xfe80 && b[11] == 0xff && b[12] == 0xfe
}

/// RoCE, from NCCL's device list or a snapshot's link layer.
fn on_roce(ctx: &Ctx<'_>) -> bool {
    fabric_link_layer(ctx).as_deref() == Some("RoCE")
        || ctx
            .job
            .ports
            .iter()
            .any(|p| p.link_layer.as_deref() == Some("Ethernet"))
}

pub(super) fn version_at_least(v: &str, major: u32, minor: u32) -> bool {
    nccl_major_minor(v).is_some_and(|mm| mm >= (major, minor))
}

/// IB or RoCE, when every NIC NCCL listed agrees.
fn fabric_link_layer(ctx: &Ctx<'_>) -> Option<String> {
    let layers: BTreeSet<&str> = ctx
        .job
        .hosts
        .values()
        .flat_map(|h| h.nics.values())
        .filter_map(|n| n.link_layer.as_deref())
        .collect();
    (layers.len() == 1).then(|| layers.into_iter().next().unwrap().to_string())
}

/// All ranks of the hypothesis's host join its ranks.
fn add_host_ranks(ctx: &Ctx<'_>, h: &mut Hypothesis) {
    if let Some(info) = h.host.as_deref().and_then(|host| ctx.job.hosts.get(host)) {
        h.ranks.extend(info.ranks.iter().copied());
    }
}

fn located(kind: CauseKind, ev: &Event) -> Hypothesis {
    let mut h = Hypothesis::new(kind);
    h.host = ev.who.host.as_deref().map(str::to_string);
    h.device = ev.text_field("hca").map(str::to_string);
    h.port = ev.int("port").map(|p| p as u32);
    h
}

/// Bootstrap and socket connects that fail, and the interfaces NCCL chose.
fn socket_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
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
    // to reach each other, failure line or not (a log cut before it).
    let hosts_never_met = job.hosts.len() > 1 && !came_up;
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
        let (w, why) = match (s.carries_channel, connects_failed, first && hosts_never_met) {
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
    for &idx in connect_errors.iter().take(8) {
        let ev = &job.events[idx];
        let error = ev
            .text_field("error")
            .or(ev.text_field("error2"))
            .or(ev.text_field("error3"))
            .unwrap_or("")
            .to_ascii_lowercase();
        let peer = ev.text_field("peer").map(|p| {
            job.host_of_addr(p)
                .map(str::to_string)
                .unwrap_or_else(|| p.to_string())
        });
        let host = ev.who.host.as_deref().map(str::to_string);
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
            .or_else(|| peer.clone().filter(|p| is_ip(p) && local_net.is_none()));
        for (h, w) in [(&mut fw_hyp, fw), (&mut iface_hyp, ifc)] {
            match &target {
                Some(t) => {
                    h.host = h.host.take().or(Some(t.clone()));
                    h.peer_host = h.peer_host.take().or(host.clone());
                }
                // Every host has this address: it names none of them, and
                // the reporter is still the victim.
                None if local_net.is_some() => {
                    h.peer_host = h.peer_host.take().or(host.clone());
                }
                None => {
                    h.host = h.host.take().or(host.clone());
                    h.peer_host = h.peer_host.take().or(peer.clone());
                    h.ranks.extend(ev.who.rank);
                }
            }
            let why = match local_net {
                Some(net) => format!(
                    "a socket connection failed: `{error}`; the peer's address is in {net}, which every host has its own copy of"
                ),
                None => format!("a socket connection failed: `{error}`"),
            };
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
        if h.host.is_none()
            && let Some(addr) = &local_peer
        {
            h.values
                .insert("host", format!("the host whose ranks advertised {addr}"));
        }
        // A connect whose line names neither end (NCCL 2.2–2.3 print no
        // address, and without their `NCCL` tag no host): the peer it dialled.
        if h.host.is_none() && h.kind == CauseKind::Firewall {
            h.values
                .entry("host")
                .or_insert_with(|| "the peer host".to_string());
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
        let list = match ev.kind {
            EventKind::NcclNetSocket => ev.text_field("interfaces").unwrap_or("").to_string(),
            EventKind::NcclBootstrapIface => format!(
                "{}:{}<0>",
                ev.text_field("iface").unwrap_or(""),
                ev.text_field("ip").unwrap_or("")
            ),
            _ => continue,
        };
        for (pos, item) in list.split_whitespace().enumerate() {
            let net_dev = socket_index(item).unwrap_or(pos as u32);
            let item =
                item.trim_start_matches(|c: char| c == '[' || c.is_ascii_digit() || c == ']');
            if let Some((iface, rest)) = item.split_once(':') {
                let addr = rest.split('<').next().unwrap_or(rest);
                let local = &ctx.kb.local_only;
                if local.interface(iface) || local.network_of(addr).is_some() {
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
