//! Set-up faults: verbs calls that fail (memlock, GID index, cross-rail);
//! sockets that cannot connect are `sockets.rs`'s.

use std::collections::{BTreeMap, BTreeSet};

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
    out.extend(verbs_failures(ctx));
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

fn errno_is(ev: &Event, code: i64, text: &str) -> bool {
    let error = ev.text_field("error").unwrap_or("").to_ascii_lowercase();
    ev.int("errno") == Some(code) || error.contains(text)
}

/// A queue pair that could not be brought up to its peer: it timed out
/// (ETIMEDOUT) or found no route to the peer's GID (ENETUNREACH, RoCE).
fn qp_cannot_reach(ev: &Event) -> bool {
    errno_is(ev, 110, "timed out") || errno_is(ev, 101, "network is unreachable")
}

/// The queue pair's own GID is all zeros (`local GID ::`): the index names
/// an entry with no address.
fn empty_local_gid(ev: &Event) -> bool {
    ev.text_field("local_gid")
        .and_then(|g| g.parse::<std::net::Ipv6Addr>().ok())
        .is_some_and(|g| g.is_unspecified())
}

fn verbs_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut hyps: BTreeMap<CauseKind, Hypothesis> = BTreeMap::new();
    let link_layer = fabric_link_layer(ctx);
    let gid_forced = ctx.job.env.contains_key("NCCL_IB_GID_INDEX");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::VerbsCallFailed) {
        let call = ev.text_field("call").unwrap_or("");
        let mut add = |kind: CauseKind, weight: f64, why: String| {
            let h = hyps.entry(kind).or_insert_with(|| located(kind, ev));
            if h.device.is_none() {
                h.device = ev.text_field("hca").map(str::to_string);
            }
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
            // The GID index names an empty entry of the port's table (the
            // kernel's ENODATA for a GID slot not valid; NCCL prints it as
            // `local GID ::`): no address at that index, on this host.
            "ibv_modify_qp" if errno_is(ev, 61, "no data available") || empty_local_gid(ev) => {
                let index = ev
                    .int("gid_index")
                    .map_or_else(String::new, |i| format!(" {i}"));
                add(
                    CauseKind::GidIndex,
                    0.8,
                    format!(
                        "the GID index{index} in use holds no GID on this port ({detail}): a wrong RoCE GID index"
                    ),
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
            // The device is listed but this process may not open it: its
            // container or device cgroup does not admit it (nccl#2428: one
            // node's container saw one of its two eRDMA devices; a
            // Singularity job denied every uverbs device).
            "ibv_open_device" => {
                add(
                    CauseKind::ConfigMismatch,
                    0.5,
                    format!(
                        "the process could not open the RDMA device ({detail}): NCCL leaves that NIC out"
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
    if let Some(h) = hyps.get_mut(&CauseKind::ConfigMismatch) {
        h.value("variant", "rdma_access");
        h.value("detail", "`ibv_open_device` failed");
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
    if let Some(h) = hyps.get_mut(&CauseKind::Memlock) {
        host_wide_memlock(ctx, h);
    }
    hyps.into_values().collect()
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
