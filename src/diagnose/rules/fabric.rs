//! Counters and fabric snapshots as causes: suspicious counter rises point to
//! link flaps, packet loss or congestion on one port; snapshot findings to a
//! degraded port, an MTU mismatch or an unusable RoCE GID.
//!
//! Each hypothesis sits on the counter's host, HCA and port, and holds the
//! ranks that send over that NIC (the stuck ones among them, when the hang
//! names some), so the report can name the NIC under a stuck rank. All rises
//! of one story on one port are one source: the strongest counts.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::counter_review::{CounterRow, review};
use crate::diagnose::fabric_check::{FabricFinding, FindingKind, check};
use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::last_lines::last_lines;
use crate::diagnose::nic_use::NicUse;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventKind, Job};

use super::Ctx;
use super::network::{RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, Report, completion_reports};
use super::setup::LATE_GID_FACTOR;

/// Supports kept per hypothesis (the strongest).
const MAX_SUPPORT: usize = 8;

/// What a requester-side counter is worth on the peer it points at.
const REQUESTER_FACTOR: f64 = 0.6;

type Place = (CauseKind, Option<String>, String, Option<u32>);

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>, review: &FabricReview) -> Vec<Hypothesis> {
    let (rows, findings) = review;
    let stuck = stuck_ranks(hang);
    let mut by_place: BTreeMap<Place, Hypothesis> = BTreeMap::new();
    let loss_at = lone_origin(rows, CauseKind::PacketLoss).or_else(|| lone_small_mtu(findings));
    counter_rises(ctx, rows, loss_at, &stuck, &mut by_place);
    snapshot_findings(ctx, hang, findings, &stuck, &mut by_place);
    // After the findings: the loss may be a small MTU's, whose port only a
    // snapshot names.
    if let Some(host) = loss_at {
        unanswered_sends_to(ctx, host, &mut by_place);
    }
    finish(ctx, by_place, &stuck)
}

/// Each suspicious counter rise supports its story on its port, or where
/// it was a requester's unanswered sends, on the peer they went to.
fn counter_rises(
    ctx: &Ctx<'_>,
    rows: &[CounterRow],
    loss_at: Option<&str>,
    stuck: &BTreeSet<u32>,
    by_place: &mut BTreeMap<Place, Hypothesis>,
) {
    let congestion_at = lone_origin(rows, CauseKind::Congestion);
    // Of two hosts, a requester's network sends all went to the other.
    let two_hosts = Some(ctx.job.hosts_seen()).filter(|h| h.len() == 2);
    let other_of_two = |r: &CounterRow| {
        let me = short_host_of(r.host.as_deref()?);
        let hosts = two_hosts.as_ref().filter(|_| r.requester_side)?;
        hosts
            .contains(&me)
            .then(|| hosts.iter().find(|h| **h != me).cloned())?
    };
    for r in rows.iter().filter(|r| r.suspicious) {
        let Some(cause) = r.cause else { continue };
        let origin = match cause {
            CauseKind::PacketLoss => loss_at,
            CauseKind::Congestion => congestion_at,
            _ => None,
        };
        let to_origin = || {
            origin
                .filter(|&host| r.requester_side && r.host.as_deref() != Some(host))
                .map(str::to_string)
        };
        // Pauses travel back hop by hop from the port that sends them: a
        // port that received them points at that one port, not at the peer
        // its channels send to.
        let peer = match cause {
            CauseKind::Congestion => to_origin().or_else(|| requester_peer(ctx.job, r)),
            _ => requester_peer(ctx.job, r).or_else(to_origin),
        }
        .or_else(|| other_of_two(r));
        // A rise on the sending side points at a path, not at a port: it
        // corroborates the far end, it does not match a port's own errors.
        let weight = if peer.is_some() {
            r.weight * REQUESTER_FACTOR
        } else {
            r.weight
        };
        let h = match peer {
            // Unanswered sends: the loss is on the way to the peer, whose
            // port the other evidence (victims naming it, its receive
            // errors) places; this host's counters only corroborate.
            Some(peer) => hypothesis(by_place, ctx.job, cause, Some(peer), "?", None, &[], stuck),
            None => hypothesis(
                by_place,
                ctx.job,
                cause,
                r.host.clone(),
                &r.hca,
                r.port,
                &r.ranks,
                stuck,
            ),
        };
        if h.support.len() < MAX_SUPPORT {
            let why = format!(
                "{}: {}",
                r.text,
                r.meaning.as_deref().unwrap_or("rose during the job")
            );
            match &r.cite {
                Some(line) => h.support_table(Source::Counters, weight, line.clone(), why),
                None => h.support(Source::Counters, weight, None, why),
            }
        }
        if cause == CauseKind::PacketLoss {
            h.values
                .entry("status")
                .or_insert_with(|| "not logged; the counters show the loss".into());
        }
    }
}

/// Snapshot findings (a port down, an MTU apart, a GID) on their ports;
/// a GID finding counts little where connections came up anyway.
fn snapshot_findings(
    ctx: &Ctx<'_>,
    hang: Option<&Hang>,
    findings: &[FabricFinding],
    stuck: &BTreeSet<u32>,
    by_place: &mut BTreeMap<Place, Hypothesis>,
) {
    let connected = super::setup::connections_worked(ctx, hang);
    let shared_gid = gid_cannot_explain_failures(ctx.job, findings, hang.is_some());
    let forced_gid = gid_index_forced(ctx.job);
    for f in findings.iter().filter(|f| f.weight > 0.0) {
        let mut f = f.clone();
        if forced_gid && f.kind == FindingKind::GidIndexDefault {
            // EINVAL from ibv_modify_qp means an explicit index (NCCL's
            // default, 0, always exists): the default's finding is moot.
            f.weight *= LATE_GID_FACTOR;
        }
        if (connected || shared_gid) && f.cause == CauseKind::GidIndex {
            // A GID that does not route fails the first connection; a job
            // whose connections came up was not stopped by it, and one that
            // every host shares cannot be why only a few connections failed.
            f.weight *= LATE_GID_FACTOR;
        }
        add_finding(by_place, ctx.job, &f, stuck);
    }
}

/// The hypotheses, each with its port filled in and tied to the stuck
/// rank it holds.
fn finish(
    ctx: &Ctx<'_>,
    by_place: BTreeMap<Place, Hypothesis>,
    stuck: &BTreeSet<u32>,
) -> Vec<Hypothesis> {
    let mut out: Vec<Hypothesis> = by_place.into_values().collect();
    for h in &mut out {
        fill_sole_port(ctx.job, h);
    }
    // Only the stuck ranks a hypothesis holds need their last line (a walk
    // over every event).
    let held: BTreeSet<u32> = out
        .iter()
        .flat_map(|h| h.ranks.intersection(stuck).next().copied())
        .collect();
    let last = last_lines(ctx.job, ctx.timeline, &held);
    for h in &mut out {
        tie_to_stuck_rank(h, stuck, &last);
    }
    out
}

/// A port known only by its HCA (a netdev's `ethtool -S` counters, joined
/// to the HCA by its PCI bus, carry no port) takes the HCA's port where the
/// HCA's own counter dumps or snapshots show only one.
fn fill_sole_port(job: &Job, h: &mut Hypothesis) {
    if h.port.is_some() {
        return;
    }
    let (Some(host), Some(device)) = (h.host.as_deref(), h.device.as_deref()) else {
        return;
    };
    let host = short_host_of(host);
    let on_host = |name: Option<&str>| name.map(short_host_of).as_deref() == Some(host.as_str());
    let snapshots = job
        .ports
        .iter()
        .filter(|p| p.device == device && on_host(p.host.as_deref()))
        .filter_map(|p| p.port);
    let counters = job
        .counter_deltas
        .iter()
        .filter(|d| &*d.device == device && on_host(d.host.as_deref()))
        .filter_map(|d| d.port);
    let ports: BTreeSet<u32> = snapshots.chain(counters).collect();
    if ports.len() == 1 {
        h.port = ports.first().copied();
    }
}

/// The job set NCCL_IB_GID_INDEX, or a queue pair rejected its GID with
/// EINVAL (only an explicit index can name a missing entry).
fn gid_index_forced(job: &Job) -> bool {
    job.env.contains_key("NCCL_IB_GID_INDEX")
        || job.events.iter().any(|e| {
            e.kind == EventKind::VerbsCallFailed
                && e.text_field("call") == Some("ibv_modify_qp")
                && (e.int("errno") == Some(22)
                    || e.text_field("error")
                        .is_some_and(|t| t.to_ascii_lowercase().contains("invalid argument")))
        })
}

/// Nothing failed or hung at all, only socket connections failed, or every
/// host of the job shows the GID finding yet fewer than half the ranks saw
/// a connection fail: the others connected with the same GID.
fn gid_cannot_explain_failures(job: &Job, findings: &[FabricFinding], hung: bool) -> bool {
    // Every host the inputs show, also those none of whose ranks is placed.
    let hosts = job.hosts_seen();
    let flagged: BTreeSet<String> = findings
        .iter()
        .filter(|f| f.cause == CauseKind::GidIndex)
        .filter_map(|f| f.host.as_deref().map(short_host_of))
        .collect();
    let failures = || {
        job.events.iter().filter(|e| {
            matches!(
                e.kind,
                EventKind::VerbsCallFailed | EventKind::IbCompletionError
            )
        })
    };
    let verbs_failed = failures().next().is_some();
    let sockets_failed = job
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::BootstrapError | EventKind::SocketError));
    if sockets_failed && !verbs_failed {
        // Bootstrap and socket connections never use an RDMA GID.
        return true;
    }
    if !verbs_failed {
        // A GID that does not route fails connections with errors (NCCL's,
        // or torch's NCCL error); a hang where every rank merely timed out
        // is not one.
        let nccl_errors = job.events.iter().any(|e| {
            matches!(
                e.kind,
                EventKind::NcclErrorReport | EventKind::NcclErrorChain | EventKind::NcclWarn
            )
        });
        return !hung || !nccl_errors;
    }
    let failed: BTreeSet<u32> = failures().filter_map(|e| e.who.rank).collect();
    hosts.len() >= 2
        && flagged == hosts
        && !failed.is_empty()
        && failed.len() * 2 < job.ranks_at_least()
}

/// The one host whose own ports show `cause` where it arises: loss on
/// receive, pauses sent or buffers overflowing. When no channel line says
/// whom a requester talked to, its unanswered or paused sends most likely
/// went there: loss shows as retries where it was sent and as sequence
/// gaps where it arrived; congestion as pauses received upstream of the
/// port that sends them.
fn lone_origin(rows: &[CounterRow], cause: CauseKind) -> Option<&str> {
    let mut origins = rows
        .iter()
        .filter(|r| r.suspicious && !r.requester_side && r.cause == Some(cause))
        .filter_map(|r| r.host.as_deref());
    let host = origins.next()?;
    origins.all(|h| h == host).then_some(host)
}

/// The one host with a port whose active MTU is below the fabric's: packets
/// larger than it are dropped on the way in without a counter on its side,
/// so senders with no other known peer most likely lost theirs there.
fn lone_small_mtu(findings: &[FabricFinding]) -> Option<&str> {
    let mut hosts = findings
        .iter()
        .filter(|f| f.kind == FindingKind::MtuMismatch && f.weight > 0.0)
        .map(|f| f.host.as_deref());
    let host = hosts.next()??;
    hosts.all(|h| h == Some(host)).then_some(host)
}

/// Victims whose transfers to an address no log maps ran out of retries
/// back the lone host that shows the loss on receive, or the one port
/// whose MTU drops large packets: their sends went unanswered there.
fn unanswered_sends_to(ctx: &Ctx<'_>, receiver: &str, by_place: &mut BTreeMap<Place, Hypothesis>) {
    let reports: Vec<Report> = completion_reports(ctx)
        .into_iter()
        .filter(|r| r.peer_host.is_none() && r.host.as_deref() != Some(receiver))
        .filter(|r| matches!(r.status, Some(RETRY_EXC_ERR | RNR_RETRY_EXC_ERR)))
        .collect();
    let reporters: BTreeSet<&str> = reports.iter().filter_map(|r| r.host.as_deref()).collect();
    // The receiving port's own hypothesis (its loss counters or its MTU
    // made it).
    let Some(h) = by_place
        .iter_mut()
        .filter(|((kind, host, _, _), _)| {
            matches!(kind, CauseKind::PacketLoss | CauseKind::MtuMismatch)
                && host.as_deref() == Some(receiver)
        })
        .map(|(_, h)| h)
        .max_by_key(|h| (h.device.is_some(), h.kind == CauseKind::MtuMismatch))
    else {
        return;
    };
    if reporters.is_empty() {
        return;
    }
    let weight = if reporters.len() >= 2 { 0.5 } else { 0.35 };
    if let Some(status) = reports.iter().find_map(|r| r.status) {
        h.value("status", status.to_string());
    }
    for r in reports.iter().take(4) {
        h.support(
            Source::Nccl,
            weight,
            Some(r.idx),
            format!(
                "a victim's sends to a peer no log maps ran out of retries; only {receiver}'s port shows the loss on receive"
            ),
        );
    }
}

/// For a requester-side counter, the host its NIC's ranks talk to over the
/// network (when the channel lines say so).
fn requester_peer(job: &Job, r: &CounterRow) -> Option<String> {
    if !r.requester_side {
        return None;
    }
    let ranks: BTreeSet<u32> = r.ranks.iter().copied().collect();
    peer_host(job, r.host.as_deref(), &ranks)
}

/// When a rank the others waited for sends over this port, the hang itself
/// speaks for the port: the counters say why that rank stopped. The link is
/// weaker when the port's own evidence is weak.
fn tie_to_stuck_rank(h: &mut Hypothesis, stuck: &BTreeSet<u32>, last_lines: &BTreeMap<u32, usize>) {
    let Some(&rank) = h.ranks.iter().find(|r| stuck.contains(r)) else {
        return;
    };
    let strongest = h.support.iter().map(|s| s.weight).fold(0.0, f64::max);
    let weight = if strongest >= 0.35 { 0.5 } else { 0.25 };
    let last_line = last_lines.get(&rank).copied();
    let place = counter_place(h);
    h.support(
        Source::Pattern,
        weight,
        last_line,
        format!(
            "rank {rank}, which the others waited for, sends over {place}; this is its last line"
        ),
    );
}

fn counter_place(h: &Hypothesis) -> String {
    crate::diagnose::counter_review::place(
        h.host.as_deref(),
        h.device.as_deref().unwrap_or("?"),
        h.port,
    )
}

/// The judged counter rows and the fabric findings, for the rules and the report.
/// The counter rows and snapshot findings the report shows, which the
/// fabric rules also weigh (computed once: a 16k-rank job has 50k ports).
pub type FabricReview = (Vec<CounterRow>, Vec<FabricFinding>);

/// What the fabric review reads from the job alone, before the hang is
/// known: which ranks use which NIC, and the snapshots' findings.
pub struct FabricFacts {
    nics: NicUse,
    findings: Vec<FabricFinding>,
}

impl FabricFacts {
    pub fn read(job: &Job) -> FabricFacts {
        let nics = NicUse::new(job);
        let findings = check(job, &nics);
        FabricFacts { nics, findings }
    }
}

pub fn fabric_review(ctx: &Ctx<'_>, hang: Option<&Hang>, facts: FabricFacts) -> FabricReview {
    let rows = review(ctx.job, &ctx.kb.counters, &facts.nics, &stuck_ranks(hang));
    (rows, facts.findings)
}

fn add_finding(
    by_place: &mut BTreeMap<Place, Hypothesis>,
    job: &Job,
    f: &FabricFinding,
    stuck: &BTreeSet<u32>,
) {
    let h = hypothesis(
        by_place,
        job,
        f.cause,
        f.host.clone(),
        &f.device,
        f.port,
        &f.ranks,
        stuck,
    );
    if h.support.len() >= MAX_SUPPORT {
        return;
    }
    match &f.cite {
        Some(line) => h.support_table(Source::Snapshot, f.weight, line.clone(), f.detail.clone()),
        None => h.support(Source::Snapshot, f.weight, None, f.detail.clone()),
    }
    h.values.entry("detail").or_insert_with(|| f.detail.clone());
}

/// The hypothesis of one cause on one port, made on first use.
#[allow(clippy::too_many_arguments)]
fn hypothesis<'a>(
    by_place: &'a mut BTreeMap<Place, Hypothesis>,
    job: &Job,
    cause: CauseKind,
    host: Option<String>,
    device: &str,
    port: Option<u32>,
    users: &[u32],
    stuck: &BTreeSet<u32>,
) -> &'a mut Hypothesis {
    let key = (cause, host.clone(), device.to_string(), port);
    by_place.entry(key).or_insert_with(|| {
        let mut h = Hypothesis::new(cause);
        h.host = host.clone();
        h.device = Some(device.to_string()).filter(|d| d != "?");
        h.port = port;
        let users: BTreeSet<u32> = users.iter().copied().collect();
        let under_stuck: BTreeSet<u32> = users.intersection(stuck).copied().collect();
        h.ranks = if under_stuck.is_empty() {
            users
        } else {
            under_stuck
        };
        h.peer_host = peer_host(job, host.as_deref(), &h.ranks);
        if h.peer_host.is_none() {
            h.value("peer_host", "its peers");
        }
        h
    })
}

/// The ranks the hang points at: those behind, and those silent.
fn stuck_ranks(hang: Option<&Hang>) -> BTreeSet<u32> {
    hang.map(|h| h.laggards.keys().chain(h.silent.iter()).copied().collect())
        .unwrap_or_default()
}

/// The host these ranks talk to most over the network (NCCL's channel lines).
fn peer_host(job: &Job, host: Option<&str>, ranks: &BTreeSet<u32>) -> Option<String> {
    let host_of = |r: u32| job.short_host_of_rank(r);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &job.links {
        let other = if ranks.contains(&l.src) {
            l.dst
        } else if ranks.contains(&l.dst) {
            l.src
        } else {
            continue;
        };
        if let Some(h) = host_of(other).filter(|h| Some(*h) != host) {
            *counts.entry(h).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        .map(|(h, _)| h.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::FindingKind;
    use crate::model::{Event, Level, Origin, PortSnapshot, RawTime, Who};

    #[test]
    fn an_hca_named_by_its_netdev_takes_its_only_port() {
        let port = |device: &str, port: u32| PortSnapshot {
            host: Some("node003.cluster".into()),
            device: device.into(),
            port: Some(port),
            ..PortSnapshot::default()
        };
        let job = Job {
            ports: vec![port("mlx5_1", 1), port("mlx5_2", 1), port("mlx5_2", 2)],
            ..Job::default()
        };
        let placed = |device: &str, job: &Job| {
            let mut h = Hypothesis::new(CauseKind::Congestion);
            h.host = Some("node003".into());
            h.device = Some(device.into());
            fill_sole_port(job, &mut h);
            h.port
        };
        assert_eq!(placed("mlx5_1", &job), Some(1));
        // Two ports, or none known: the port stays unnamed.
        assert_eq!(placed("mlx5_2", &job), None);
        assert_eq!(placed("mlx5_3", &job), None);
    }

    fn gid_hazard(host: &str) -> FabricFinding {
        FabricFinding {
            kind: FindingKind::GidIndexDefault,
            cause: CauseKind::GidIndex,
            host: Some(host.into()),
            device: "mlx5_0".into(),
            port: Some(1),
            detail: String::new(),
            nic_used: None,
            ranks: Vec::new(),
            file: None,
            line: None,
            weight: 0.35,
            cite: None,
        }
    }

    /// Eight ranks placed on n1 and n2, two of which failed a verbs call;
    /// n3 shows only in a snapshot. The GID hazard must be on every host
    /// the inputs show, n3 included, before it is set aside.
    #[test]
    fn a_gid_hazard_is_shared_only_if_every_host_seen_has_it() {
        let hosts: Vec<(u32, &str)> = (0..8)
            .map(|r| (r, if r < 4 { "n1" } else { "n2" }))
            .collect();
        let mut job = Job::with_ranks_on(&hosts);
        job.ports.push(PortSnapshot {
            host: Some("n3".into()),
            device: "mlx5_0".into(),
            ..PortSnapshot::default()
        });
        for rank in [0, 4] {
            job.events.push(Event {
                kind: EventKind::VerbsCallFailed,
                pattern: "test",
                origin: Origin {
                    file: crate::model::FileId(0),
                    line: 1,
                },
                who: Who {
                    rank: Some(rank),
                    ..Who::default()
                },
                level: Level::Error,
                time: RawTime::None,
                fields: Default::default(),
                text: "".into(),
            });
        }
        let two = [gid_hazard("n1"), gid_hazard("n2")];
        assert!(!gid_cannot_explain_failures(&job, &two, false));
        let three = [gid_hazard("n1"), gid_hazard("n2"), gid_hazard("n3")];
        assert!(gid_cannot_explain_failures(&job, &three, false));
    }
}
