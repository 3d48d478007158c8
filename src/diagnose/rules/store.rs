//! A rank that could not reach the c10d rendezvous store.
//!
//! Every rank connects to the TCPStore at MASTER_ADDR:MASTER_PORT before any
//! communicator exists. A store at an address only its own host can reach
//! (a container's docker-bridge address, link-local) is the wrong interface;
//! loopback is wrong only where the job spans hosts (on one host a timeout
//! there is a port nobody listens on, or a master that never started). A
//! routable address that times out is a lead only: a port the firewall
//! drops, or a master that was not up yet — unless the store's own server
//! says it was up, waiting for the clients that never joined: then the
//! path between them dropped the connects (a firewall, a security group).

use crate::diagnose::hypothesis::{Hypothesis, Source};
use std::collections::BTreeMap;

use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn unreachable_store(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let job = ctx.job;
    let mut iface = Hypothesis::new(CauseKind::SocketInterface);
    iface.value("variant", "store");
    let mut fw = Hypothesis::new(CauseKind::Firewall);
    let many_hosts = job.spans_hosts();
    let server_waited = job
        .events_where(|k| k == EventKind::StoreConnect)
        .any(|(_, e)| e.text_field("what") == Some("clients_timeout"));
    let (fw_w, iface_w, why) = if server_waited {
        (
            0.5,
            0.3,
            "it was up, waiting for this rank: the path between them dropped the connects",
        )
    } else {
        (0.3, 0.25, "its port was dropped, or the store was not up")
    };
    for (idx, ev) in job.events_where(|k| k == EventKind::StoreConnect) {
        if ev.text_field("what") != Some("timeout") {
            continue;
        }
        let Some(peer) = ev.text_field("peer") else {
            continue;
        };
        let reporter = ev.who.host.as_deref().map(str::to_string);
        let net = local_network(ctx, peer);
        match net {
            Some("loopback") if !many_hosts => continue,
            Some(net) => {
                iface.peer_host = iface.peer_host.take().or(reporter);
                iface
                    .values
                    .entry("detail")
                    .or_insert_with(|| format!("the rendezvous store at `{peer}`, {net}"));
                if iface.support.len() < CITED {
                    iface.support(
                        Source::Torch,
                        0.65,
                        Some(idx),
                        format!("a rank gave up reaching the rendezvous store at {peer}, an address in {net} that its own host alone can reach, if any"),
                    );
                }
            }
            None => {
                let target = ctx.host_of_addr(peer).unwrap_or(peer).to_string();
                for (h, w) in [(&mut fw, fw_w), (&mut iface, iface_w)] {
                    h.host = h.host.take().or_else(|| Some(target.clone()));
                    h.peer_host = h.peer_host.take().or_else(|| reporter.clone());
                    h.values
                        .entry("detail")
                        .or_insert_with(|| format!("the rendezvous store at `{peer}` timed out"));
                    if h.support.len() < CITED {
                        h.support(
                            Source::Torch,
                            w,
                            Some(idx),
                            format!(
                                "a rank gave up reaching the rendezvous store at {peer}: {why}"
                            ),
                        );
                    }
                }
            }
        }
    }
    if iface.support.is_empty() && !job.a_comm_came_up() {
        retries_to_local_address(ctx, &mut iface, many_hosts);
    }
    [iface, fw]
        .into_iter()
        .filter(|h| !h.support.is_empty())
        .collect()
}

/// The store's host name does not resolve where the rank runs: no address
/// to connect to at all (a typo, a Kubernetes service or pod name whose DNS
/// record is not published yet, a short name outside the search domain).
pub fn unresolved_name(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::SocketInterface);
    h.value("variant", "store_name");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::StoreConnect) {
        if ev.text_field("what") != Some("unresolved") {
            continue;
        }
        let name = ev.text_field("peer").map(str::to_string);
        let error = ["error", "gai_error", "gai_text"]
            .iter()
            .find_map(|f| ev.text_field(f))
            .unwrap_or("getaddrinfo failed");
        if !h.values.contains_key("detail") {
            let detail = match &name {
                Some(n) => format!("`{n}`: {error}"),
                None => format!("the store's host name: {error}"),
            };
            h.value("detail", detail);
        }
        if let Some(n) = name {
            h.values.entry("name").or_insert(n);
        }
        h.peer_host = h
            .peer_host
            .take()
            .or_else(|| ctx.job.host_of_event(ev).map(str::to_string));
        h.ranks.extend(ev.who.rank);
        if h.support.len() < CITED {
            h.support(
                Source::Torch,
                0.55,
                Some(idx),
                format!("the rendezvous store's host name did not resolve ({error}): the rank had no address to connect to"),
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}

/// Retries that never end in a timeout line (Paddle's client retries until
/// its long timeout; a paste stops while it still does): a host that kept
/// retrying one address only its own host can reach, on a job that spans
/// hosts and never brought a communicator up, was sent to itself; one
/// that no host has is wrong on any job, from its first try. Elsewhere one
/// retry is a store starting late; the repeat is what weighs.
fn retries_to_local_address(ctx: &Ctx<'_>, iface: &mut Hypothesis, many_hosts: bool) {
    let mut seen: BTreeMap<(Option<&str>, &str), (usize, EventIdx)> = BTreeMap::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::StoreConnect) {
        if ev.text_field("what") != Some("retry") {
            continue;
        }
        if let Some(peer) = ev.text_field("peer") {
            let entry = seen
                .entry((ev.who.host.as_deref(), peer))
                .or_insert((0, idx));
            entry.0 += 1;
        }
    }
    for ((reporter, peer), (count, first)) in seen {
        let Some(net) = local_network(ctx, peer) else {
            continue;
        };
        let no_host = ctx.kb.local_only.no_host(peer);
        if !many_hosts && !no_host {
            continue;
        }
        // No host has it: the first try already cannot succeed.
        if (count < 2 && !no_host) || iface.support.len() >= CITED {
            continue;
        }
        iface.peer_host = iface.peer_host.take().or(reporter.map(str::to_string));
        iface
            .values
            .entry("detail")
            .or_insert_with(|| format!("the rendezvous store at `{peer}`, {net}"));
        iface.support(
            Source::Torch,
            0.5,
            Some(first),
            if no_host {
                format!("a host dialled the rendezvous store at {peer} ({count}×), an address in {net}: no host can answer there")
            } else {
                format!("a host retried the rendezvous store at {peer} {count} times, an address in {net} that only its own host can reach, and no communicator came up")
            },
        );
    }
}

fn local_network<'a>(ctx: &'a Ctx<'_>, peer: &str) -> Option<&'a str> {
    if peer == "localhost" {
        Some("loopback")
    } else {
        ctx.kb.local_only.network_of(peer)
    }
}

/// The store's server timed out waiting for processes that never connected:
/// what decides the cause is in their own logs (a crash before the process
/// group, a wrong MASTER_ADDR, a blocked port, a node that never started),
/// so the verdict says which to read. Decisive rules on those logs win.
pub fn clients_missing(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let (idx, ev) = ctx
        .job
        .events_where(|k| k == EventKind::StoreConnect)
        .find(|(_, e)| e.text_field("what") == Some("clients_timeout"))?;
    let (joined, expected) = (ev.int("joined")?, ev.int("expected")?);
    let missing = expected - joined;
    let on = ctx
        .job
        .host_of_event(ev)
        .map_or(String::new(), |h| format!(" on {h}"));
    let mut h = Hypothesis::new(CauseKind::Unknown);
    h.value(
        "detail",
        format!(
            "The rendezvous store{on} waited {}s and {joined} of {expected} processes joined: {missing} never connected. Their own logs say why (a crash before init_process_group, a MASTER_ADDR or MASTER_PORT they cannot reach, a node that never started); collect them.",
            ev.int("seconds").unwrap_or_default()
        ),
    );
    h.support(
        Source::Torch,
        0.2,
        Some(idx),
        "the store's server timed out waiting for processes that never connected",
    );
    Some(h)
}
