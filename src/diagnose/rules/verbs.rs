//! Verbs calls that fail at set-up: memory that cannot be registered
//! (memlock), a queue pair that cannot use its GID (gid_index) or reach
//! its peer (cross_rail or a GID that does not route), an RDMA device the
//! process may not open (config_mismatch).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventIdx, EventKind, Job};

use super::Ctx;
use super::setup::{fabric_link_layer, host_wide_memlock, located};

/// Support one failed call gives a cause: (kind, weight, why).
type Claim = (CauseKind, f64, String);

pub(super) fn verbs_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut hyps: BTreeMap<CauseKind, Hypothesis> = BTreeMap::new();
    let link_layer = fabric_link_layer(ctx);
    let gid_forced = ctx.job.env.contains_key("NCCL_IB_GID_INDEX");
    let along_rails = timeouts_follow_rails(ctx.job);
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::VerbsCallFailed) {
        let shape = Shape {
            link_layer: link_layer.as_deref(),
            gid_forced,
            along_rails,
        };
        for (kind, weight, why) in claims(ev, &shape) {
            let h = hyps.entry(kind).or_insert_with(|| located(kind, ev));
            if h.device.is_none() {
                h.device = ev.text_field("hca").map(str::to_string);
            }
            h.ranks.extend(ev.who.rank);
            if h.support.len() < 8 {
                h.support(Source::Nccl, weight, Some(idx), why);
            }
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
    locate_unreachable_peer(ctx, &mut hyps);
    if let Some(h) = hyps.get_mut(&CauseKind::Memlock) {
        host_wide_memlock(ctx, h);
    }
    hyps.into_values().collect()
}

/// What the job says about its fabric and its failures as a whole.
struct Shape<'a> {
    link_layer: Option<&'a str>,
    /// NCCL_IB_GID_INDEX was set for the job.
    gid_forced: bool,
    /// The queue pairs timed out on some NIC positions only, on several hosts.
    along_rails: bool,
}

/// What one failed verbs call says, by the call and its errno.
fn claims(ev: &Event, shape: &Shape<'_>) -> Vec<Claim> {
    let call = ev.text_field("call").unwrap_or("");
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
            if errno_is(ev, 95, "operation not supported") =>
        {
            vec![]
        }
        "ibv_reg_mr" | "ibv_reg_mr_iova2" | "ibv_create_qp" | "ibv_create_cq"
        | "ibv_reg_dmabuf_mr" | "ibv_alloc_pd" => {
            let w = if errno_is(ev, 12, "cannot allocate memory") {
                0.75
            } else {
                0.5
            };
            vec![(
                CauseKind::Memlock,
                w,
                format!("{call} failed: pinned memory could not be registered ({detail})"),
            )]
        }
        "ibv_modify_qp" => modify_qp_claims(ev, &detail, shape),
        // The device is listed but this process may not open it: its
        // container or device cgroup does not admit it (nccl#2428: one
        // node's container saw one of its two eRDMA devices; a
        // Singularity job denied every uverbs device).
        "ibv_open_device" => vec![(
            CauseKind::ConfigMismatch,
            0.5,
            format!(
                "the process could not open the RDMA device ({detail}): NCCL leaves that NIC out"
            ),
        )],
        _ => vec![],
    }
}

/// A queue pair that could not be brought to its peer: a GID index that
/// names no usable GID, or a peer it cannot reach.
fn modify_qp_claims(ev: &Event, detail: &str, shape: &Shape<'_>) -> Vec<Claim> {
    let gid = |w: f64, why: String| vec![(CauseKind::GidIndex, w, why)];
    // The GID index names an empty entry of the port's table (the
    // kernel's ENODATA for a GID slot not valid; NCCL prints it as
    // `local GID ::`): no address at that index, on this host.
    if errno_is(ev, 61, "no data available") || empty_local_gid(ev) {
        let index = ev
            .int("gid_index")
            .map_or_else(String::new, |i| format!(" {i}"));
        return gid(
            0.8,
            format!(
                "the GID index{index} in use holds no GID on this port ({detail}): a wrong RoCE GID index"
            ),
        );
    }
    if errno_is(ev, 22, "invalid argument") {
        return gid(
            0.75,
            format!("the queue pair could not use its GID ({detail}): a wrong RoCE GID index"),
        );
    }
    // An explicit NCCL_IB_GID_INDEX naming an entry this host's table
    // does not populate (indices differ between hosts).
    if errno_is(ev, 19, "no such device") {
        return gid(
            0.7,
            format!(
                "the queue pair's GID index names no GID on this NIC ({detail}): a wrong RoCE GID index"
            ),
        );
    }
    if !qp_cannot_reach(ev) {
        return vec![];
    }
    // NCCL's own hint says cross-rail. A GID that does not route
    // (link-local, RoCE v1) times out the same way: a forced
    // NCCL_IB_GID_INDEX points there, and so does a GID table showing a
    // bad entry (the snapshot rule adds that support). One GID index
    // serves every NIC of a host, so timeouts confined to the same few NIC
    // positions on several hosts follow rails, not the index.
    let (gid_w, rail_w) = match (shape.link_layer, shape.gid_forced) {
        _ if shape.along_rails => (0.3, 0.65),
        (_, true) => (0.6, 0.35),
        (Some("IB"), false) => (0.25, 0.6),
        (_, false) => (0.4, 0.5),
    };
    vec![
        (
            CauseKind::GidIndex,
            gid_w,
            format!(
                "queue-pair connection failed ({detail}): the GID in use may not route to the peer"
            ),
        ),
        (
            CauseKind::CrossRail,
            rail_w,
            format!("queue-pair connection failed ({detail}): the peer NIC may be on another rail"),
        ),
    ]
}

/// A connection that times out fails on both ends: the rank every
/// reporter talks to is the bad end.
fn locate_unreachable_peer(ctx: &Ctx<'_>, hyps: &mut BTreeMap<CauseKind, Hypothesis>) {
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
    if let Some(h) = hyps.get_mut(&CauseKind::CrossRail) {
        super::cabling::place_on_the_miscabled_nic(ctx.job, h);
    }
}

/// The ranks whose queue pairs timed out sit on several hosts but at only
/// some of the GPU positions those hosts run: their NICs' rails cannot
/// reach each other, while the other rails connected.
fn timeouts_follow_rails(job: &Job) -> bool {
    let position = |r: u32| {
        let info = job.ranks.get(&r)?;
        info.local_rank.or(info.cuda_dev)
    };
    let failing: BTreeSet<u32> = job
        .events_where(|k| k == EventKind::VerbsCallFailed)
        .filter(|(_, ev)| ev.text_field("call") == Some("ibv_modify_qp") && qp_cannot_reach(ev))
        .filter_map(|(_, ev)| ev.who.rank)
        .collect();
    let hosts: BTreeSet<&str> = failing
        .iter()
        .filter_map(|&r| job.short_host_of_rank(r))
        .collect();
    let failing_at: Option<BTreeSet<u32>> = failing.iter().map(|&r| position(r)).collect();
    let Some(failing_at) = failing_at else {
        return false;
    };
    let run_at: BTreeSet<u32> = job
        .ranks
        .keys()
        .filter(|&&r| job.short_host_of_rank(r).is_some_and(|h| hosts.contains(h)))
        .filter_map(|&r| position(r))
        .collect();
    hosts.len() >= 2 && !failing_at.is_empty() && failing_at.len() < run_at.len()
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
