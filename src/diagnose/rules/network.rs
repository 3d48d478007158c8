//! Network failures seen by NCCL: IB work-completion errors, IB async events,
//! and peers that vanished from a socket.
//!
//! A completion error is printed by the rank whose *send* failed, and it names
//! the peer it was talking to. When a port or link on one host goes bad, the
//! hosts talking to it report it: so the host most others name is the suspect,
//! and the reporters are victims. The suspect's device is the HCA its ranks use
//! on the connections to the reporters (NCCL's channel lines).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::nic_use::NicUse;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventIdx, EventKind, GidEntry, Job, SourceLine};

use super::Ctx;

/// ibv_wc_status 5: flushed because the QP was already in error — an echo of
/// the first error, never a cause of its own.
const WR_FLUSH_ERR: i64 = 5;
pub(super) const RETRY_EXC_ERR: i64 = 12;
pub(super) const RNR_RETRY_EXC_ERR: i64 = 13;

/// One IB completion error: who printed it, and the host of the peer it
/// names where the logs map its address.
#[derive(Debug, Clone)]
pub(super) struct Report {
    pub idx: EventIdx,
    pub rank: Option<u32>,
    pub host: Option<String>,
    pub status: Option<i64>,
    pub peer_host: Option<String>,
    /// The peer's address as printed, where no line maps it to a host.
    pub peer_addr: Option<String>,
}

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(completion_errors(ctx, hang));
    out.extend(async_events(ctx));
    out.extend(vanished_peers(ctx));
    out.extend(super::efa::hypotheses(ctx));
    out
}

pub(super) fn completion_reports(ctx: &Ctx<'_>) -> Vec<Report> {
    let job = ctx.job;
    let all: Vec<Report> = job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::IbCompletionError)
        .map(|(idx, e)| Report {
            idx,
            rank: e.who.rank,
            host: e.who.host.as_deref().map(str::to_string),
            status: e.int("status"),
            peer_host: e
                .text_field("peer")
                .and_then(|p| ctx.host_of_addr(p))
                .or_else(|| host_of_gid(job, e.text_field("remote_gid")?))
                .map(str::to_string)
                .or_else(|| sole_send_peer_host(job, e.who.rank?))
                .or_else(|| job.other_host_of_two(e.who.host.as_deref()?)),
            peer_addr: e
                .text_field("peer")
                .map(|p| p.split('<').next().unwrap_or(p).to_string()),
        })
        .collect();
    let all = name_the_odd_reporter(all);
    // Flush errors only echo the first error; use them only when alone.
    let primary: Vec<Report> = all
        .iter()
        .filter(|r| r.status != Some(WR_FLUSH_ERR))
        .cloned()
        .collect();
    if primary.is_empty() { all } else { primary }
}

/// Where no line maps the peers' addresses to hosts: when the reporters on
/// several hosts name one address and a single other reporter names someone
/// else, that reporter is the address's owner — the suspect reports the
/// neighbour it was sending to, its neighbours report the suspect.
fn name_the_odd_reporter(mut reports: Vec<Report>) -> Vec<Report> {
    let unmapped = |r: &Report| r.peer_host.is_none() && r.peer_addr.is_some();
    let mut naming: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in reports.iter().filter(|r| unmapped(r)) {
        if let (Some(addr), Some(host)) = (r.peer_addr.as_deref(), r.host.as_deref()) {
            naming.entry(addr).or_default().insert(host);
        }
    }
    let Some((addr, namers)) = naming
        .iter()
        .max_by_key(|(a, h)| (h.len(), std::cmp::Reverse(*a)))
        .filter(|(_, h)| h.len() >= 2)
    else {
        return reports;
    };
    let others: BTreeSet<&str> = naming
        .iter()
        .filter(|(a, _)| a != &addr)
        .flat_map(|(_, h)| h.iter().copied())
        .filter(|h| !namers.contains(h))
        .collect();
    let [owner] = others.into_iter().collect::<Vec<_>>()[..] else {
        return reports;
    };
    let (addr, owner) = (addr.to_string(), owner.to_string());
    for r in reports
        .iter_mut()
        .filter(|r| r.peer_addr.as_deref() == Some(&addr))
    {
        r.peer_host.get_or_insert_with(|| owner.clone());
    }
    reports
}

fn completion_errors(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    let reports = completion_reports(ctx);
    let first = reports.first()?;
    let status = most_common(reports.iter().filter_map(|r| r.status)).or(first.status);
    let kind = match status {
        Some(RETRY_EXC_ERR | RNR_RETRY_EXC_ERR) => CauseKind::PacketLoss,
        _ => CauseKind::Unknown,
    };
    let mut h = Hypothesis::new(kind);
    let status_text = status.map(|s| match ctx.kb.wc_status(s) {
        Some(t) => format!("{s} ({}: {})", t.name, t.meaning),
        None => s.to_string(),
    });
    if let Some(status) = status {
        h.value("status", status.to_string());
    }
    let troubled: BTreeSet<String> = ctx
        .job
        .events
        .iter()
        .filter(|e| e.kind == EventKind::IbAsyncEvent)
        .filter_map(|e| e.who.host.as_deref().map(short_host_of))
        .collect();
    match suspect_host(&reports, &troubled) {
        Some((suspect, reporters)) => {
            let mut weight = if reporters.len() >= 2 {
                0.7
            } else if names_back(&reports, &suspect, &reporters) {
                0.45
            } else {
                0.55
            };
            let crashes = super::process::culprit_deaths(ctx);
            if super::process::died_before_reports(ctx, &crashes, &suspect, &reports) {
                // Queue pairs to a process that is gone retry until they
                // give up: the crash seen from outside, not a lossy wire.
                weight *= 0.5;
                h.value(
                    "detail",
                    format!("a process on {suspect} had died of its own accord before these transfers failed"),
                );
            }
            h.peer_host = most_common(
                reports
                    .iter()
                    .filter(|r| r.peer_host.as_deref() == Some(suspect.as_str()))
                    .filter_map(|r| r.host.clone()),
            );
            locate_on_suspect(ctx, hang, &reports, &suspect, &mut h);
            h.host = Some(suspect.clone());
            if reporters.len() == 1 {
                blame_the_lossier_reporter(ctx, &reports, &suspect, &mut h);
            }
            for r in reports
                .iter()
                .filter(|r| r.peer_host.as_deref() == Some(suspect.as_str()))
                .take(8)
            {
                let status = status_text.clone().unwrap_or_default();
                let why = if h.host.as_deref() == Some(suspect.as_str()) {
                    format!("a victim's transfer to {suspect} failed: status {status}")
                } else {
                    format!(
                        "this rank's transfer to {suspect} failed: status {status}; its own port's loss counters rose several times more than {suspect}'s"
                    )
                };
                h.support(Source::Nccl, weight, Some(r.idx), why);
            }
        }
        None => {
            // No peer address (NCCL < 2.10) or one no init line maps: the
            // reporter's own port is all we can point at, unless reporters
            // on several hosts failed alike: then the fault is somewhere
            // they share, not on either's port.
            let ev = &ctx.job.events[first.idx];
            let hosts: BTreeSet<&str> = reports.iter().filter_map(|r| r.host.as_deref()).collect();
            if hosts.len() < 2 {
                h.host = first.host.clone();
                h.device = ev.text_field("hca").map(str::to_string);
                h.port = ev.int("port").and_then(|p| u32::try_from(p).ok());
            }
            h.ranks.extend(first.rank);
            for r in reports.iter().take(8) {
                h.support(
                    Source::Nccl,
                    0.35,
                    Some(r.idx),
                    format!(
                        "IB completion error, status {}; the peer is not identified",
                        status_text.clone().unwrap_or_default()
                    ),
                );
            }
        }
    }
    if kind == CauseKind::Unknown {
        h.value(
            "detail",
            format!(
                "NCCL reported IB completion errors with status {} that do not map to one cause.",
                status_text.unwrap_or_default()
            ),
        );
        h.support
            .iter_mut()
            .for_each(|s| s.weight = s.weight.min(0.3));
    }
    Some(h)
}

/// One host alone reported failed sends to `suspect`: where its own port's
/// counters show clearly more loss than the suspect's, the loss is on the
/// reporter's end (see `lossier_end`), and the suspect is its peer.
fn blame_the_lossier_reporter(
    ctx: &Ctx<'_>,
    reports: &[Report],
    suspect: &str,
    h: &mut Hypothesis,
) {
    let Some(report) = reports
        .iter()
        .find(|r| r.peer_host.as_deref() == Some(suspect) && r.host.is_some())
    else {
        return;
    };
    let ev = &ctx.job.events[report.idx];
    let (Some(host), Some(hca)) = (report.host.as_deref(), ev.text_field("hca")) else {
        return;
    };
    let to_suspect = (host, hca);
    if !super::lossier_end::reporter_lost_more(
        ctx.job,
        &ctx.kb.counters,
        to_suspect,
        suspect,
        h.device.as_deref(),
    ) {
        return;
    }
    h.peer_host = Some(suspect.to_string());
    h.host = Some(host.to_string());
    h.device = Some(hca.to_string());
    h.port = ev.int("port").and_then(|p| u32::try_from(p).ok());
    h.ranks = report.rank.into_iter().collect();
}

/// The peer host named by the most distinct reporting hosts (other than
/// itself); ties go to a host that does not itself report, then by name.
/// The host most reporters name; in a tie, one whose own port raised an
/// async event (a culprit reports its failed sends too), then one that did
/// not report.
fn suspect_host(
    reports: &[Report],
    troubled: &BTreeSet<String>,
) -> Option<(String, BTreeSet<String>)> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in reports {
        if let (Some(peer), Some(host)) = (&r.peer_host, &r.host)
            && peer != host
        {
            named.entry(peer.clone()).or_default().insert(host.clone());
        }
    }
    let reporting: BTreeSet<&String> = reports.iter().filter_map(|r| r.host.as_ref()).collect();
    named.into_iter().max_by(|a, b| {
        a.1.len()
            .cmp(&b.1.len())
            .then_with(|| troubled.contains(&a.0).cmp(&troubled.contains(&b.0)))
            .then_with(|| reporting.contains(&b.0).cmp(&reporting.contains(&a.0)))
            .then_with(|| b.0.cmp(&a.0))
    })
}

/// The suspect also names its reporters: the fault could be on either side.
fn names_back(reports: &[Report], suspect: &str, reporters: &BTreeSet<String>) -> bool {
    reports.iter().any(|r| {
        r.host.as_deref() == Some(suspect)
            && r.peer_host.as_ref().is_some_and(|p| reporters.contains(p))
    })
}

/// Which ranks and HCA on the suspect host sat on the failing connections:
/// the channel lines say who each reporter talks to over the network.
fn locate_on_suspect(
    ctx: &Ctx<'_>,
    hang: Option<&Hang>,
    reports: &[Report],
    suspect: &str,
    h: &mut Hypothesis,
) {
    let job = ctx.job;
    let on_suspect = |r: u32| job.ranks.get(&r).and_then(|i| i.host.as_deref()) == Some(suspect);
    if let Some(gid) = remote_gid_entry(ctx, reports, suspect) {
        h.device = Some(gid.device.clone());
        h.port = gid.port;
        h.ranks.extend(job.ranks.iter().filter_map(|(&r, i)| {
            let on_nic = i.nics().first().is_some_and(|n| n.0 == gid.device);
            (on_suspect(r) && on_nic).then_some(r)
        }));
        if let Some(origin) = gid.origin {
            h.support_table(
                Source::Snapshot,
                0.3,
                SourceLine {
                    origin,
                    text: gid.text.clone(),
                },
                format!(
                    "the failing connections' remote GID {} belongs to {} {} port {}",
                    gid.ipv4.as_deref().unwrap_or(&gid.gid),
                    suspect,
                    gid.device,
                    gid.port.map_or("?".into(), |p| p.to_string())
                ),
            );
        }
        return;
    }
    let reporter_ranks: BTreeSet<u32> = reports
        .iter()
        .filter(|r| r.peer_host.as_deref() == Some(suspect))
        .filter_map(|r| r.rank)
        .collect();
    let mut ends: BTreeSet<u32> = BTreeSet::new();
    for link in &job.links {
        if reporter_ranks.contains(&link.src) && on_suspect(link.dst) {
            ends.insert(link.dst);
        } else if reporter_ranks.contains(&link.dst) && on_suspect(link.src) {
            ends.insert(link.src);
        }
    }
    // Rail-optimised fabrics connect NIC i to NIC i: of the suspect's ranks
    // linked to a reporter, those on a reporter's rail sat on its connection
    // (unless the reporters' links show connections across rails).
    let rails_of = |r: &u32| job.ranks.get(r).map(|i| &i.net_devs_used);
    let rails: BTreeSet<u32> = reporter_ranks
        .iter()
        .filter_map(rails_of)
        .flatten()
        .copied()
        .collect();
    let on_rail: BTreeSet<u32> = ends
        .iter()
        .copied()
        .filter(|r| rails_of(r).is_some_and(|d| !d.is_disjoint(&rails)))
        .collect();
    let crosses_rails = job.links.iter().any(|l| {
        let ends_of_reporter = (reporter_ranks.contains(&l.src) && ends.contains(&l.dst))
            || (reporter_ranks.contains(&l.dst) && ends.contains(&l.src));
        ends_of_reporter
            && matches!((rails_of(&l.src), rails_of(&l.dst)), (Some(a), Some(b)) if !a.is_empty() && a.is_disjoint(b))
    });
    if !on_rail.is_empty() && !crosses_rails {
        ends = on_rail;
    }
    // Several reporters that all send to one of the suspect's ranks: that
    // rank's port is the one they share.
    if let Some(shared) = shared_end(job, &reporter_ranks, &ends) {
        ends = BTreeSet::from([shared]);
    }
    if ends.is_empty()
        && let Some(hang) = hang
    {
        let behind = hang.laggards.keys().chain(hang.silent.iter()).copied();
        ends.extend(behind.filter(|&r| on_suspect(r)));
    }
    let devices: Vec<(String, Option<u32>)> = ends
        .iter()
        .filter_map(|r| job.ranks.get(r))
        .flat_map(|i| i.nics().into_iter().take(1))
        .collect();
    // Ends on several NICs alike leave the port open: another source (the
    // port's own counters) may place it.
    if let Some(dev) = most_common_alone(devices.iter().cloned()) {
        h.device = Some(dev.0);
        h.port = dev.1;
    }
    if devices.is_empty() {
        own_reports_port(job, reports, suspect, h);
    }
    h.ranks.extend(ends);
}

/// Without channel lines, the suspect's own failed transfers (to whoever it
/// was sending) name the HCA its end of the broken connections sat on.
fn own_reports_port(job: &Job, reports: &[Report], suspect: &str, h: &mut Hypothesis) {
    let own = reports
        .iter()
        .filter(|r| r.host.as_deref() == Some(suspect))
        .filter_map(|r| {
            let ev = &job.events[r.idx];
            let port = ev.int("port").and_then(|p| u32::try_from(p).ok());
            Some((ev.text_field("hca")?.to_string(), port))
        });
    if let Some((device, port)) = most_common_alone(own) {
        h.device = Some(device);
        h.port = port;
    }
}

/// The one other host a rank sends to over the network (NCCL's channel
/// lines), when its sends all go to one: where NCCL < 2.10 printed no peer
/// address, or its address is in no log, the failed send went there.
fn sole_send_peer_host(job: &Job, rank: u32) -> Option<String> {
    let own = job.short_host_of_rank(rank);
    let mut hosts = job
        .links
        .iter()
        .filter(|l| l.src == rank)
        .filter_map(|l| job.short_host_of_rank(l.dst))
        .filter(|h| Some(*h) != own);
    let first = hosts.next()?;
    hosts.all(|h| h == first).then(|| first.to_string())
}

/// The host whose GID table holds `gid` (NCCL 2.19+ prints the remote GID;
/// the peer's bootstrap address may be in no log when its NCCL INFO is off).
fn host_of_gid<'j>(job: &'j Job, gid: &str) -> Option<&'j str> {
    let gid: Ipv6Addr = gid.parse().ok()?;
    let mut hosts = job
        .gids
        .iter()
        .filter(|g| g.gid.parse::<Ipv6Addr>().is_ok_and(|a| a == gid))
        .filter_map(|g| g.host.as_deref());
    let first = hosts.next()?;
    hosts.all(|h| h == first).then_some(first)
}

/// The one end every reporter (at least two) sends to, when there is
/// exactly one and the reporters reach more than it. A completion error is
/// printed by the rank whose send failed, so only its sends count.
fn shared_end(job: &Job, reporters: &BTreeSet<u32>, ends: &BTreeSet<u32>) -> Option<u32> {
    if reporters.len() < 2 || ends.len() < 2 {
        return None;
    }
    let linked = |rep: u32| -> BTreeSet<u32> {
        job.links
            .iter()
            .filter(|l| l.src == rep && ends.contains(&l.dst))
            .map(|l| l.dst)
            .collect()
    };
    let mut common = ends.clone();
    for &rep in reporters {
        common = common.intersection(&linked(rep)).copied().collect();
    }
    let mut it = common.into_iter();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

/// The suspect's GID table entry that the reporters' `remoteGid` names: the
/// exact HCA and port at the far end of the failing connections (NCCL 2.19+
/// prints the GIDs; `show_gids` or sysfs gives the table).
fn remote_gid_entry<'j>(ctx: &Ctx<'j>, reports: &[Report], suspect: &str) -> Option<&'j GidEntry> {
    let remote: BTreeSet<Ipv6Addr> = reports
        .iter()
        .filter(|r| r.peer_host.as_deref() == Some(suspect))
        .filter_map(|r| ctx.job.events[r.idx].text_field("remote_gid"))
        .filter_map(|g| g.parse().ok())
        .collect();
    let mut found = ctx.job.gids.iter().filter(|g| {
        g.host.as_deref().map(short_host_of).as_deref() == Some(suspect)
            && g.gid.parse::<Ipv6Addr>().is_ok_and(|a| remote.contains(&a))
    });
    let first = found.next()?;
    // Two HCAs with one GID would be a misconfiguration: no answer then.
    found
        .all(|g| g.device == first.device && g.port == first.port)
        .then_some(first)
}

/// Where an async event happened: host, HCA, port, and whether it is a device fault.
type Place = (Option<String>, Option<String>, Option<u32>, bool);

fn async_events(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_place: BTreeMap<Place, Hypothesis> = BTreeMap::new();
    let mut usage: Option<NicUse> = None;
    let mut verbs_failed: Option<BTreeSet<Option<&str>>> = None;
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::IbAsyncEvent) {
        let what = ev.text_field("event").unwrap_or("").to_ascii_lowercase();
        let fatal = ev.int("fatal") == Some(1)
            || what.contains("catastrophic")
            || what.contains("device fatal");
        let port_event = what.contains("port error") || what.contains("link");
        let (kind, weight) = if what.contains("catastrophic") || what.contains("device fatal") {
            (CauseKind::HcaFault, 0.75)
        } else if port_event {
            (CauseKind::LinkFlap, 0.55)
        } else if fatal {
            (CauseKind::HcaFault, 0.4)
        } else if what.contains("gid table change")
            && verbs_failed
                .get_or_insert_with(|| hosts_with_failed_verbs(ctx))
                .contains(&ev.who.host.as_deref())
        {
            // An address added to or taken off the RoCE netdev rewrites the
            // GID table under a running job: the index NCCL chose may now
            // name another address, and its queue pairs stop completing.
            (CauseKind::GidIndex, 0.45)
        } else {
            continue;
        };
        let host = ev.who.host.as_deref().map(str::to_string);
        let device = ev.text_field("hca").map(str::to_string);
        // Every process on a host prints an async event of every device it
        // opened (ncclIbInit starts one event thread per device, used or
        // not): the device's users are the ranks, not those that printed it.
        let usage = usage.get_or_insert_with(|| NicUse::new(ctx.job));
        let users = device
            .as_deref()
            .map(|d| usage.of(ev.who.host.as_deref(), d).ranks())
            .unwrap_or_default();
        let port = ev.int("port").map(|p| p as u32);
        let h = by_place
            .entry((
                host.clone(),
                device.clone(),
                port,
                kind == CauseKind::HcaFault,
            ))
            .or_insert_with(|| {
                let mut h = Hypothesis::new(kind);
                h.host = host;
                h.device = device;
                h.port = port;
                h.value("detail", format!("IB async event: {what}"));
                h
            });
        h.ranks.extend(users);
        if h.support.len() < 8 {
            h.support(
                Source::Nccl,
                weight,
                Some(idx),
                format!("the HCA reported an async event: {what}"),
            );
        }
    }
    by_place.into_values().collect()
}

/// The hosts that reported failed work completions or verbs calls of their own.
fn hosts_with_failed_verbs<'a>(ctx: &Ctx<'a>) -> BTreeSet<Option<&'a str>> {
    ctx.job
        .events_where(|k| matches!(k, EventKind::IbCompletionError | EventKind::VerbsCallFailed))
        .map(|(_, e)| e.who.host.as_deref())
        .collect()
}

/// `Connection closed by remote peer X` (NCCL), `Connection closed by peer
/// [X]:P` (Gloo), `Broken pipe`, `reset by peer`: the peer's process is gone. Without a death in the logs, the host is all we know.
fn vanished_peers(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_host: BTreeMap<String, Hypothesis> = BTreeMap::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::SocketError) {
        if ev.text_field("op") == Some("connect") {
            continue;
        }
        let error = ev.text_field("error").unwrap_or("").to_ascii_lowercase();
        let vanished = error.contains("closed by remote peer")
            || error.contains("closed by peer")
            || error.contains("broken pipe")
            || error.contains("reset by peer");
        let Some(peer) = ev.text_field("peer").filter(|_| vanished) else {
            continue;
        };
        // An address every host has (a bridge's) names no host that could
        // have died: the interface rule reads it.
        if ctx.kb.local_only.network_of(peer).is_some() {
            continue;
        }
        let host = ctx
            .host_of_addr(peer)
            .map(str::to_string)
            .unwrap_or_else(|| crate::model::build::short_host_of(peer));
        // A process never loses a connection to itself: a line naming its
        // own host says nothing of which peer went.
        let reporter = ev
            .who
            .host
            .as_deref()
            .map(crate::model::build::short_host_of);
        if reporter.as_deref() == Some(host.as_str()) {
            continue;
        }
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::ProcessCrash);
            h.host = Some(host.clone());
            h.value("reason", format!("its connections were closed: `{error}`"));
            h.value("who", format!("A process on {host}"));
            // Known only by its host: whatever went, went there.
            h.value("scope", "host".to_string());
            h
        });
        if h.support.len() < 6 {
            h.support(
                Source::Nccl,
                0.4,
                Some(idx),
                format!("a peer's connection to {host} was closed from the other side"),
            );
        }
    }
    by_host.into_values().collect()
}

/// The item seen most often, when no other is seen as often.
fn most_common_alone<T: Ord + Clone>(items: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for i in items {
        *counts.entry(i).or_default() += 1;
    }
    let top = counts.values().copied().max()?;
    let mut at_top = counts.into_iter().filter(|&(_, n)| n == top);
    let (first, _) = at_top.next()?;
    at_top.next().is_none().then_some(first)
}

pub(super) fn most_common<T: Ord + Clone>(items: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for i in items {
        *counts.entry(i).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NetLink, PortSnapshot, RankInfo};

    fn report(host: &str, peer: Option<&str>) -> Report {
        Report {
            idx: 0,
            rank: None,
            host: Some(host.into()),
            status: Some(RETRY_EXC_ERR),
            peer_host: peer.map(str::to_string),
            peer_addr: None,
        }
    }

    fn unmapped(host: &str, addr: &str) -> Report {
        Report {
            peer_addr: Some(addr.into()),
            ..report(host, None)
        }
    }

    #[test]
    fn the_one_reporter_naming_another_address_owns_the_address_its_neighbours_name() {
        // nccl 2.25 at WARN: no init line maps 10.2.0.x to hosts. c2-06 and
        // c2-08 name .7; c2-07 alone names .8: c2-07 is .7, the suspect.
        let reports = vec![
            unmapped("c2-07", "10.2.0.8"),
            unmapped("c2-06", "10.2.0.7"),
            unmapped("c2-08", "10.2.0.7"),
        ];
        let named = name_the_odd_reporter(reports);
        let peers: Vec<Option<&str>> = named.iter().map(|r| r.peer_host.as_deref()).collect();
        assert_eq!(peers, [None, Some("c2-07"), Some("c2-07")]);
        assert_eq!(suspect_host(&named, &BTreeSet::new()).unwrap().0, "c2-07");
    }

    #[test]
    fn without_one_odd_reporter_unmapped_addresses_stay_unnamed() {
        // One namer only, or two odd reporters: nothing to eliminate by.
        let lone = vec![unmapped("a", "10.0.0.2"), unmapped("b", "10.0.0.3")];
        assert!(
            name_the_odd_reporter(lone)
                .iter()
                .all(|r| r.peer_host.is_none())
        );
        let two_odd = vec![
            unmapped("a", "10.0.0.9"),
            unmapped("b", "10.0.0.9"),
            unmapped("c", "10.0.0.1"),
            unmapped("d", "10.0.0.2"),
        ];
        assert!(
            name_the_odd_reporter(two_odd)
                .iter()
                .all(|r| r.peer_host.is_none())
        );
    }

    fn two_hosts() -> Job {
        Job::with_ranks_on(&[(0, "a"), (1, "a"), (2, "b"), (3, "b")])
    }

    #[test]
    fn two_hosts_naming_each_other_are_decided_by_a_port_event() {
        let reports = [report("a", Some("b")), report("b", Some("a"))];
        let troubled = BTreeSet::from(["b".to_string()]);
        assert_eq!(suspect_host(&reports, &troubled).unwrap().0, "b");
        // Without one, a plain tie goes to the first name.
        assert_eq!(suspect_host(&reports, &BTreeSet::new()).unwrap().0, "a");
        let troubled = BTreeSet::from(["a".to_string()]);
        assert_eq!(suspect_host(&reports, &troubled).unwrap().0, "a");
    }

    #[test]
    fn the_other_host_of_two_counts_hosts_known_only_by_their_system_files() {
        // Only host a's ranks logged; b left its port snapshot and kernel log.
        let mut job = Job::with_ranks_on(&[(0, "a"), (1, "a")]);
        assert_eq!(job.other_host_of_two("a"), None);
        job.ports.push(PortSnapshot {
            host: Some("b.cluster".into()),
            device: "mlx5_0".into(),
            ..PortSnapshot::default()
        });
        assert_eq!(job.other_host_of_two("a").as_deref(), Some("b"));
        job.kernel.hosts.insert("c".into(), Default::default());
        assert_eq!(job.other_host_of_two("a"), None, "three hosts");
    }

    #[test]
    fn an_unmapped_peer_is_the_other_host_of_two_or_the_one_a_rank_sends_to() {
        let mut job = two_hosts();
        assert_eq!(job.other_host_of_two("a").as_deref(), Some("b"));
        assert_eq!(sole_send_peer_host(&job, 1), None);
        job.links = vec![NetLink { src: 1, dst: 2 }, NetLink { src: 1, dst: 0 }];
        assert_eq!(sole_send_peer_host(&job, 1).as_deref(), Some("b"));
        job.ranks.insert(
            4,
            RankInfo {
                rank: 4,
                host: Some("c".into()),
                ..RankInfo::default()
            },
        );
        assert_eq!(job.other_host_of_two("a"), None);
        job.links.push(NetLink { src: 1, dst: 4 });
        assert_eq!(sole_send_peer_host(&job, 1), None);
    }
}
