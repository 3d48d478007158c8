//! Which end of failed connections is the bad one.
//!
//! A connection that cannot be set up fails on both of its ends, so the
//! ranks that report it are the bad NIC's rank and its peers alike. When
//! one reporting rank is the network peer of every other reporter (NCCL's
//! channel lines), its NIC is the one all the failures share: it is the
//! culprit and the others are victims. Two ranks that only name each other
//! stay a tie.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::nic_use::NicUse;
use crate::model::build::short_host_of;
use crate::model::{Event, EventIdx, Job};

/// Moves `h` onto the one reporting rank every other reporter talks to, and
/// names its NIC; leaves `h` as it is when no single rank is shared.
pub fn locate(job: &Job, h: &mut Hypothesis) {
    let shared = shared_rank(job, &h.ranks).or_else(|| lone_on_its_host(job, &h.ranks));
    let Some(rank) = shared else {
        return;
    };
    let Some(info) = job.ranks.get(&rank) else {
        return;
    };
    let others: BTreeSet<u32> = h.ranks.iter().copied().filter(|&r| r != rank).collect();
    h.host = info.host.clone().or(h.host.take());
    h.peer_host = most_common_host(job, &others).or(h.peer_host.take());
    h.ranks = BTreeSet::from([rank]);
    h.device = None;
    h.port = None;
    name_the_nic(job, h);
}

/// NCCL 2.26+ prints both ends' GIDs when a queue pair cannot be moved to
/// RTR. A bad NIC is an end of every failed connection, whichever side
/// printed it: the one address all the failures name is its. Moves `h` onto
/// the ranks that printed that address as their own and names their port;
/// returns whether the addresses decided (one failure, or two ends naming
/// each other, name two addresses: no decision).
pub fn locate_by_address(job: &Job, h: &mut Hypothesis, failures: &[EventIdx]) -> bool {
    let gid = |e: &Event, f: &str| e.text_field(f)?.parse::<Ipv6Addr>().ok();
    let ends: Vec<(EventIdx, Ipv6Addr, Ipv6Addr)> = failures
        .iter()
        .filter_map(|&i| {
            let e = &job.events[i];
            Some((i, gid(e, "local_gid")?, gid(e, "remote_gid")?))
        })
        .collect();
    if ends.len() < 2 || ends.len() != failures.len() {
        return false;
    }
    let mut common = BTreeSet::from([ends[0].1, ends[0].2]);
    for (_, local, remote) in &ends[1..] {
        common.retain(|a| a == local || a == remote);
    }
    let (Some(&bad), 1) = (common.first(), common.len()) else {
        return false;
    };
    let own: Vec<EventIdx> = ends.iter().filter(|e| e.1 == bad).map(|e| e.0).collect();
    let rank_host = |i: EventIdx| {
        let e = &job.events[i];
        let by_rank = e.who.rank.and_then(|r| job.ranks.get(&r)?.host.clone());
        e.who
            .host
            .as_deref()
            .map(short_host_of)
            .or(by_rank.map(|h| short_host_of(&h)))
    };
    let hosts: BTreeSet<Option<String>> = own.iter().map(|&i| rank_host(i)).collect();
    let Some(&first) = own.first() else {
        return false;
    };
    let (1, Some(Some(host))) = (hosts.len(), hosts.first()) else {
        return false;
    };
    let ev = &job.events[first];
    let victims: BTreeSet<u32> = ends
        .iter()
        .filter(|e| e.1 != bad)
        .filter_map(|e| job.events[e.0].who.rank)
        .collect();
    h.host = Some(host.clone());
    h.device = ev.text_field("hca").map(str::to_string);
    h.port = ev.int("port").and_then(|p| u32::try_from(p).ok());
    h.ranks = own.iter().filter_map(|&i| job.events[i].who.rank).collect();
    h.peer_host = most_common_host(job, &victims).or(h.peer_host.take());
    h.support(
        Source::Nccl,
        0.2,
        Some(first),
        format!("every failed queue-pair connection has {bad} at one end: this NIC's"),
    );
    true
}

/// Where every rank of `h` on its host sends over one NIC, that NIC is the
/// place (a cause about connections sits on a port, not on a host).
pub fn name_the_nic(job: &Job, h: &mut Hypothesis) {
    if h.device.is_some() || h.ranks.is_empty() {
        return;
    }
    let mut nics = BTreeSet::new();
    for r in &h.ranks {
        let Some(info) = job.ranks.get(r) else { return };
        if info.host.as_deref().map(short_host_of) != h.host.as_deref().map(short_host_of) {
            return;
        }
        let used = info.nics();
        if used.len() != 1 || info.net_devs_used.is_empty() {
            return;
        }
        nics.extend(used);
    }
    if nics.len() == 1
        && let Some((device, port)) = nics.pop_first()
    {
        h.device = Some(device);
        h.port = port;
    }
}

/// Where the logs list no NIC for the ranks of `h` (NCCL_DEBUG=WARN): the
/// NIC they most likely use (one RDMA device per GPU, local rank k on the
/// k-th), cited by its port's snapshot line and said to be a guess.
pub fn name_the_likely_nic(job: &Job, h: &mut Hypothesis) {
    let Some(host) = h.host.clone().filter(|_| h.device.is_none()) else {
        return;
    };
    let usage = NicUse::new(job);
    let mut nics = h.ranks.iter().map(|&r| usage.likely_nic_of(&host, r));
    let Some(Some(device)) = nics.next() else {
        return;
    };
    if nics.any(|d| d != Some(device)) {
        return;
    }
    let short = short_host_of(&host);
    let ports: Vec<_> = job
        .ports
        .iter()
        .filter(|p| {
            p.device == device && p.host.as_deref().map(short_host_of) == Some(short.clone())
        })
        .collect();
    h.device = Some(device.to_string());
    h.port = match ports.as_slice() {
        [one] => one.port,
        _ => None,
    };
    let why = format!(
        "no log lists the NICs of rank {}: {device} is the one it most likely uses (one RDMA device per GPU on {host}; GPU k is nearest to the k-th)",
        h.ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let line = ports
        .first()
        .and_then(|p| p.lines.get("state").or_else(|| p.lines.values().next()));
    match line {
        Some(line) => h.support_table(Source::Snapshot, 0.0, line.clone(), why),
        None => h.support(Source::Snapshot, 0.0, None, why),
    }
}

/// The reporter that is a network peer of all other reporters (at least
/// two), when exactly one is.
fn shared_rank(job: &Job, reporters: &BTreeSet<u32>) -> Option<u32> {
    if reporters.len() < 3 {
        return None;
    }
    let mut peers: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for l in &job.links {
        if reporters.contains(&l.src) && reporters.contains(&l.dst) {
            peers.entry(l.src).or_default().insert(l.dst);
            peers.entry(l.dst).or_default().insert(l.src);
        }
    }
    let mut shared = reporters
        .iter()
        .copied()
        .filter(|r| peers.get(r).is_some_and(|p| p.len() + 1 == reporters.len()));
    let first = shared.next()?;
    shared.next().is_none().then_some(first)
}

/// A connection within a host does not cross its NICs, so reporters that
/// share a host are not each other's failing end. When exactly one reporter
/// is alone on its host and the others (at least two) are elsewhere, it is
/// the one end all their failures can share. Where channel lines exist
/// (none names one peer of every reporter), they must link it to another
/// reporter.
fn lone_on_its_host(job: &Job, reporters: &BTreeSet<u32>) -> Option<u32> {
    if reporters.len() < 3 {
        return None;
    }
    let mut linked: BTreeMap<u32, bool> = BTreeMap::new();
    for l in &job.links {
        for (me, other) in [(l.src, l.dst), (l.dst, l.src)] {
            if reporters.contains(&me) {
                *linked.entry(me).or_default() |= reporters.contains(&other);
            }
        }
    }
    let mut by_host: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for &r in reporters {
        by_host
            .entry(job.short_host_of_rank(r)?)
            .or_default()
            .push(r);
    }
    let mut lone = by_host.values().filter(|ranks| ranks.len() == 1);
    let first = lone.next()?[0];
    let consistent = linked.is_empty() || linked.get(&first) == Some(&true);
    (lone.next().is_none() && consistent).then_some(first)
}

fn most_common_host(job: &Job, ranks: &BTreeSet<u32>) -> Option<String> {
    super::network::most_common(
        ranks
            .iter()
            .filter_map(|r| job.ranks.get(r).and_then(|i| i.host.clone())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CauseKind, NetLink};

    fn job() -> Job {
        let hosts: Vec<(u32, &str)> = (0..16)
            .map(|r| (r, if r < 8 { "a" } else { "b" }))
            .collect();
        let mut job = Job::with_ranks_on(&hosts);
        for (rank, info) in job.ranks.iter_mut() {
            info.nics_listed = vec![(format!("mlx5_{}", rank % 8), Some(1))];
            info.net_devs_used = BTreeSet::from([0]);
        }
        // Ring 7 → 8, tree 0 ↔ 8, ring 15 → 0.
        job.links = vec![
            NetLink { src: 7, dst: 8 },
            NetLink { src: 0, dst: 8 },
            NetLink { src: 15, dst: 0 },
        ];
        job
    }

    #[test]
    fn the_rank_every_reporter_talks_to_is_the_bad_end() {
        let job = job();
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.host = Some("a".into());
        h.ranks = BTreeSet::from([0, 7, 8]);
        locate(&job, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([8]));
        assert_eq!(h.host.as_deref(), Some("b"));
        assert_eq!(h.peer_host.as_deref(), Some("a"));
        assert_eq!(h.device.as_deref(), Some("mlx5_0"));
        assert_eq!(h.port, Some(1));
    }

    #[test]
    fn without_channel_lines_the_reporter_alone_on_its_host_is_the_bad_end() {
        let mut job = job();
        job.links.clear();
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.host = Some("b".into());
        h.ranks = BTreeSet::from([0, 8, 15]);
        locate(&job, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([0]));
        assert_eq!(h.host.as_deref(), Some("a"));
        assert_eq!(h.peer_host.as_deref(), Some("b"));
        // Two hosts with one reporter each stay a tie.
        let mut tie = Hypothesis::new(CauseKind::CrossRail);
        tie.ranks = BTreeSet::from([0, 8]);
        locate(&job, &mut tie);
        assert_eq!(tie.ranks, BTreeSet::from([0, 8]));
        // So do reporters spread one per host over three hosts.
        let three: Vec<(u32, &str)> = vec![(0, "a"), (1, "b"), (2, "c")];
        let spread = Job::with_ranks_on(&three);
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.ranks = BTreeSet::from([0, 1, 2]);
        locate(&spread, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn with_channel_lines_the_lone_reporter_must_be_linked_to_another() {
        // Reporters 7 (alone on a), 8 and 9 (on b): no rank is a peer of
        // both others, but 7 → 8 crosses hosts and 7 is alone on its own.
        let base = job();
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.host = Some("b".into());
        h.ranks = BTreeSet::from([7, 8, 9]);
        locate(&base, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([7]));
        assert_eq!(h.host.as_deref(), Some("a"));
        assert_eq!(h.device.as_deref(), Some("mlx5_7"));
        // Alone on a but linked to no other reporter (3 has no channel
        // line; 8 links to 7 and 0): the lines do not back it.
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.ranks = BTreeSet::from([3, 8, 9]);
        let mut linked = job();
        linked.links.push(NetLink { src: 8, dst: 9 });
        locate(&linked, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([3, 8, 9]));
    }

    #[test]
    fn two_ranks_naming_each_other_stay_a_tie() {
        let job = job();
        let mut h = Hypothesis::new(CauseKind::CrossRail);
        h.host = Some("a".into());
        h.ranks = BTreeSet::from([0, 8]);
        locate(&job, &mut h);
        assert_eq!(h.ranks, BTreeSet::from([0, 8]));
        assert_eq!(h.host.as_deref(), Some("a"));
    }
}
