//! Set-up faults: RoCE GIDs that do not route, a host's locked-memory
//! limit; verbs calls that fail are `verbs.rs`'s, sockets that cannot
//! connect `sockets/`'s.

use std::collections::BTreeSet;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::nccl_major_minor;
use crate::model::{CauseKind, Event, EventIdx, EventKind};

use super::Ctx;

/// Sequence numbers up to this are still the job's set-up collectives.
const SETUP_SEQ: i64 = 2;
/// What a GID clue is worth once the job's connections have come up.
pub(super) const LATE_GID_FACTOR: f64 = 0.3;

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(super::verbs::verbs_failures(ctx));
    out.extend(roce_retries_without_a_peer(ctx, hang));
    out.extend(link_local_roce_gids(ctx, hang));
    out.extend(super::sockets::socket_failures(ctx));
    out.extend(super::bootstrap::failed_bootstrap(ctx));
    out.extend(super::gloo::unusable_interface(ctx));
    out.extend(super::store::unreachable_store(ctx));
    out.extend(super::store::clients_missing(ctx));
    out.extend(super::store::unresolved_name(ctx));
    out
}

/// The locked-memory limit is the host's (its container, its ulimit): every
/// rank there hits it, and a tool's report of the limit seconds the calls
/// that ran into it.
pub(super) fn host_wide_memlock(ctx: &Ctx<'_>, h: &mut Hypothesis) {
    add_host_ranks(ctx, h);
    low_memlock_limit(ctx, h);
}

/// Below this a locked-memory limit is a container's or a distribution's
/// default, far from what RDMA pins (RDMA stacks ask for `unlimited`).
const LOW_MEMLOCK_BYTES: i64 = 256 << 20;

/// A tool's report of a low locked-memory limit (`ulimit -a`,
/// /proc/PID/limits) on the failing host, or on a host no line names:
/// a second source for the limit the failed pinning calls ran into.
fn low_memlock_limit(ctx: &Ctx<'_>, h: &mut Hypothesis) {
    let low = ctx
        .job
        .events_where(|k| k == EventKind::MemlockLimit)
        .filter(|(_, e)| {
            let host = ctx.job.host_of_event(e);
            host.is_none() || h.host.is_none() || host == h.host.as_deref()
        })
        .find_map(|(idx, e)| {
            let bytes = e.int("bytes").or(e.int("kbytes").map(|k| k << 10))?;
            (bytes < LOW_MEMLOCK_BYTES).then_some((idx, bytes))
        });
    if let Some((idx, bytes)) = low {
        h.support(
            Source::Snapshot,
            0.35,
            Some(idx),
            format!(
                "the locked-memory limit is {} kB (`ulimit -l`), where RDMA needs it unlimited",
                bytes >> 10
            ),
        );
    }
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
                .and_then(|p| ctx.host_of_addr(p))
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
pub(super) fn fabric_link_layer(ctx: &Ctx<'_>) -> Option<String> {
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
    // The first line read may carry only its rank (a launcher's copy of
    // the error): the ranks' one host is the place.
    if h.host.is_none() {
        let hosts: BTreeSet<&str> = h
            .ranks
            .iter()
            .filter_map(|&r| ctx.job.short_host_of_rank(r))
            .collect();
        if let [host] = hosts.into_iter().collect::<Vec<_>>()[..] {
            h.host = Some(host.to_string());
        }
    }
    if let Some(info) = h.host.as_deref().and_then(|host| ctx.job.hosts.get(host)) {
        h.ranks.extend(info.ranks.iter().copied());
    }
}

pub(super) fn located(kind: CauseKind, ev: &Event) -> Hypothesis {
    let mut h = Hypothesis::new(kind);
    h.host = ev.who.host.as_deref().map(str::to_string);
    h.device = ev.text_field("hca").map(str::to_string);
    h.port = ev.int("port").map(|p| p as u32);
    h
}
