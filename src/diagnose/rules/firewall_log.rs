//! A host's own firewall logging the connections it refused (netfilter's
//! LOG target: firewalld's `filter_IN_public_REJECT`, UFW's `[UFW BLOCK]`).
//! Where NCCL's peers failed to connect to that host's address and port,
//! the kernel line says why from the other end: a second, independent
//! source for a firewall on that host. Without an address in NCCL's lines
//! (2.18–2.26 give up a refused connect without one), denials of TCP
//! connections on a host of a job whose connects failed still point there.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind, Job};

use super::Ctx;

pub(super) fn denied_connections(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let connects: Vec<EventIdx> = job
        .events_where(|k| matches!(k, EventKind::SocketError | EventKind::SocketRetry))
        .map(|(idx, _)| idx)
        .collect();
    let first_connect = *connects.first()?;
    let peers = failed_peers(job, &connects);
    let denied = denials_by_host(job, &peers);
    // The host whose denials match NCCL's failed connects; else the one
    // host that denied any, where only one did.
    let matched: Vec<(&String, &(EventIdx, bool))> =
        denied.iter().filter(|(_, (_, m))| *m).collect();
    let (host, &(idx, by_address)) = match (&matched[..], denied.len()) {
        ([one], _) => *one,
        ([], 1) => denied.iter().next()?,
        _ => return None,
    };
    let mut h = Hypothesis::new(CauseKind::Firewall);
    h.host = Some(host.clone());
    h.ranks = job
        .hosts
        .get(host.as_str())
        .map(|info| info.ranks.clone())
        .unwrap_or_default();
    let ev = &job.events[idx];
    let port = ev
        .int("dpt")
        .map_or_else(String::new, |p| format!(" port {p}"));
    h.value(
        "detail",
        format!(
            "{host}'s firewall logged refusing TCP from {} to {}{port}",
            ev.text_field("src").unwrap_or("?"),
            ev.text_field("dst").unwrap_or("?"),
        ),
    );
    let (weight, why) = if by_address {
        (
            0.6,
            "the host's firewall refused a connection NCCL's peers failed to make to it",
        )
    } else {
        (
            0.45,
            "the host's firewall refused TCP connections while NCCL's connects failed",
        )
    };
    h.support(Source::Kernel, weight, Some(idx), why);
    h.support(
        Source::Nccl,
        0.3,
        Some(first_connect),
        "a connection to a peer failed",
    );
    Some(h)
}

/// (address, port where printed) of the failed connects that name a peer.
fn failed_peers(job: &Job, connects: &[EventIdx]) -> BTreeSet<(String, Option<i64>)> {
    connects
        .iter()
        .filter_map(|&idx| {
            let ev = &job.events[idx];
            Some((ev.text_field("peer")?.to_string(), ev.int("peer_port")))
        })
        .collect()
}

/// Each host's first logged TCP denial, preferring one of an address and
/// port NCCL failed to reach (host → (line, whether it matched)).
fn denials_by_host(
    job: &Job,
    peers: &BTreeSet<(String, Option<i64>)>,
) -> BTreeMap<String, (EventIdx, bool)> {
    let mut denied: BTreeMap<String, (EventIdx, bool)> = BTreeMap::new();
    for (idx, ev) in job.events_where(|k| k == EventKind::KernelFirewall) {
        // NCCL and the rendezvous listen on unprivileged ports; a refused
        // ssh or web scan says nothing of them.
        let tcp = ev
            .text_field("proto")
            .is_some_and(|p| p.eq_ignore_ascii_case("TCP"))
            && ev.int("dpt").is_some_and(|p| p >= 1024);
        let Some(host) = job.host_of_event(ev).filter(|_| tcp) else {
            continue;
        };
        let dst = ev.text_field("dst").unwrap_or("");
        let port = ev.int("dpt");
        let matched = peers
            .iter()
            .any(|(peer, p)| peer == dst && (p.is_none() || *p == port));
        let slot = denied
            .entry(crate::model::build::short_host_of(host))
            .or_insert((idx, matched));
        if matched && !slot.1 {
            *slot = (idx, true);
        }
    }
    denied
}
