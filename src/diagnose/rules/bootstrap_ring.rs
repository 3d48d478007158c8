//! NCCL's bootstrap ring: at init every rank connects to the next one
//! (rank + 1, the last to rank 0) at the address the root handed it. A
//! rank's failed connect there names the host it dialled even when no line
//! says whose address that is (a firewalled host whose ranks print nothing
//! at NCCL_DEBUG=WARN, a docker0 address every host has a copy of).
//!
//! The root — a thread of rank 0's process — dials every rank once, to hand
//! it its neighbour, and stops at the first it cannot reach (bootstrap.cc,
//! 2.3–2.30); its failure is never returned to rank 0, so it is only its
//! thread's WARN. The ring's connects are one per rank, each to a port of
//! the next rank's own; a port several ranks dialled is a listener they
//! share (the root's, a store's), which the ring does not explain.
//!
//! Before the ring, every rank sends its addresses to the root (all
//! releases): where the root's host cannot be reached, every rank on every
//! other host fails that connect, and its own host's ranks fail none.
//! Where the ranks of one host alone fail it while the ranks of other hosts
//! reached the root, that host is the one cut off (its outbound traffic, or
//! a security group its peers do not admit).

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Event, EventIdx, Job};

/// Whom a failed connect of the bootstrap dialled: the ring's next rank's
/// host (or where no line places that rank, the rank alone), or the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RingNext {
    pub rank: u32,
    pub whom: Dialled,
    pub host: Option<String>,
    /// The ranks whose ring connects these are.
    pub dialled_by: BTreeSet<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialled {
    /// The next rank of the ring (`rank + 1`).
    RingNext,
    /// The root, a thread of rank 0's process.
    Root,
    /// The root, which the ranks of other hosts reached: the dialling
    /// host is the one cut off.
    RootFromOddHost,
}

/// Peer address → whom the failed connects to it dialled, where they are
/// bootstrap ring connects that agree on one next rank, or on one host
/// other than the dialling ranks' own. Empty once a communicator came up
/// (connects then go anywhere: proxies, the socket transport).
pub(super) fn ring_next_hosts<'a>(
    job: &'a Job,
    connects: &[EventIdx],
) -> BTreeMap<&'a str, RingNext> {
    let mut out = BTreeMap::new();
    if job.a_comm_came_up() {
        return out;
    }
    for (peer, events) in by_peer(job, connects) {
        if port_shared(&events) {
            continue;
        }
        let dialled_by: BTreeSet<u32> = events
            .iter()
            .filter(|ev| !maybe_root_thread(ev))
            .filter_map(|ev| ev.who.rank)
            .collect();
        let nexts: BTreeMap<u32, Option<&str>> = dialled_by
            .iter()
            .filter_map(|&rank| next_elsewhere(job, rank))
            .collect();
        // A give-up of a rank whose ring successor shares its host is no
        // ring connect (those do not fail within a host): the root's.
        if peer == NO_ADDRESS && dialled_by.iter().any(|&r| next_on_own_host(job, r)) {
            out.extend(root_dialled(job, &events, &dialled_by).map(|n| (peer, n)));
            continue;
        }
        let hosts: Vec<Option<&str>> = nexts
            .values()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let agreed = match (nexts.keys().next(), &hosts[..]) {
            (Some(&rank), [Some(host)]) => Some(RingNext {
                rank,
                whom: Dialled::RingNext,
                host: Some(host.to_string()),
                dialled_by: dialled_by.clone(),
            }),
            (Some(&rank), [None]) if nexts.len() == 1 => Some(RingNext {
                rank,
                whom: Dialled::RingNext,
                host: None,
                dialled_by: dialled_by.clone(),
            }),
            _ if peer == NO_ADDRESS => root_dialled(job, &events, &dialled_by),
            _ => None,
        };
        if let Some(next) = agreed {
            out.insert(peer, next);
        }
    }
    out
}

/// Address-less give-ups from ranks on two or more hosts whose ring
/// successors disagree, with none from rank 0's host (its root thread's
/// included): the one connect they all make is to the root, and the
/// root's host is the one that could not be reached. A single host's
/// ranks failing alone say as much about their own host; NCCL 2.18–2.26
/// name no address, so which of the two is undecided there.
fn root_dialled(job: &Job, events: &[&Event], dialled_by: &BTreeSet<u32>) -> Option<RingNext> {
    let root_host = job.short_host_of_rank(0)?;
    let mut dialling_hosts = BTreeSet::new();
    for ev in events {
        let host = crate::model::build::short_host_in(job.host_of_event(ev)?);
        if host == root_host {
            return None;
        }
        dialling_hosts.insert(host);
    }
    if dialling_hosts.len() >= 2 {
        return Some(RingNext {
            rank: 0,
            whom: Dialled::Root,
            host: Some(root_host.to_string()),
            dialled_by: dialled_by.clone(),
        });
    }
    // One host failed it; a third host's ranks, placed and silent, got
    // through: the root was reachable.
    let odd = dialling_hosts.into_iter().next()?;
    let others_reached = job
        .ranks
        .keys()
        .filter_map(|&r| job.short_host_of_rank(r))
        .any(|h| h != root_host && h != odd);
    others_reached.then(|| RingNext {
        rank: 0,
        whom: Dialled::RootFromOddHost,
        host: Some(odd.to_string()),
        dialled_by: dialled_by.clone(),
    })
}

/// `rank`'s ring successor is placed on `rank`'s own host.
fn next_on_own_host(job: &Job, rank: u32) -> bool {
    let Some(next) = next_rank(job, rank) else {
        return false;
    };
    let mine = job.short_host_of_rank(rank);
    mine.is_some() && mine == job.short_host_of_rank(next)
}

/// The ring's next rank after `rank` with its host, unless that host is
/// known to be `rank`'s own (a connect within a host does not fail on
/// its interface).
fn next_elsewhere(job: &Job, rank: u32) -> Option<(u32, Option<&str>)> {
    let next = next_rank(job, rank)?;
    let theirs = job.short_host_of_rank(next);
    let mine = job.short_host_of_rank(rank);
    (mine.is_none() || theirs.is_none() || mine != theirs).then_some((next, theirs))
}

/// `rank + 1`, the last rank's being rank 0: without the world's size
/// (no init line, no launcher's count) only a rank some line places, or
/// one below the ranks the job's files show it had at least.
fn next_rank(job: &Job, rank: u32) -> Option<u32> {
    match job.world_size.filter(|&n| n > 1) {
        Some(world) => Some((rank + 1) % world),
        // A rank at or above `next` is placed: ranks are numbered from 0.
        None => Some(rank + 1).filter(|&next| {
            job.ranks.range(next..).next().is_some() || (next as usize) < job.ranks_at_least()
        }),
    }
}

/// The key of connects whose line names no address (NCCL 2.18–2.26 give up
/// a refused or timed-out connect without one): the ring still says whom
/// each dialled.
pub(super) const NO_ADDRESS: &str = "";

fn by_peer<'a>(job: &'a Job, connects: &[EventIdx]) -> BTreeMap<&'a str, Vec<&'a Event>> {
    let mut out: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for &idx in connects {
        let ev = &job.events[idx];
        let peer = ev.text_field("peer").unwrap_or(NO_ADDRESS);
        out.entry(peer).or_default().push(ev);
    }
    out
}

/// Two ranks dialled one port of the address.
fn port_shared(events: &[&Event]) -> bool {
    let mut dialers: BTreeMap<i64, BTreeSet<u32>> = BTreeMap::new();
    for ev in events {
        if let (Some(port), Some(rank)) = (ev.int("peer_port"), ev.who.rank) {
            dialers.entry(port).or_default().insert(rank);
        }
    }
    dialers.values().any(|ranks| ranks.len() > 1)
}

/// Rank 0's line from any thread but its main one (or from one whose
/// thread is not known) may be the root's, which dials every rank.
fn maybe_root_thread(ev: &Event) -> bool {
    ev.who.rank == Some(0) && (ev.who.tid.is_none() || ev.who.tid != ev.who.pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, Fields, RankInfo, Value, Who};

    fn connect(rank: u32, pid: u32, tid: u32, peer: &str, port: i64) -> Event {
        let mut f = Fields::default();
        f.insert("peer", Value::Text(peer.into()));
        f.insert("peer_port", Value::Int(port));
        let mut ev = Event::with_fields(EventKind::SocketError, f);
        ev.who = Who {
            rank: Some(rank),
            pid: Some(pid),
            tid: Some(tid),
            ..Who::default()
        };
        ev
    }

    /// NCCL 2.18–2.26's give-up of a refused connect: no address.
    fn addressless(rank: u32, pid: u32, tid: u32) -> Event {
        let mut ev = connect(rank, pid, tid, "", 0);
        ev.fields = Fields::default();
        ev
    }

    /// 3 hosts × 2 ranks: a(0,1) b(2,3) c(4,5).
    fn three_hosts(events: Vec<Event>) -> (Job, Vec<EventIdx>) {
        let ranks = [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")];
        let mut job = Job::with_ranks_on(&ranks);
        let idx = (0..events.len()).collect();
        job.events = events;
        (job, idx)
    }

    #[test]
    fn predecessor_and_root_connects_name_the_next_ranks_host_nccl_2_20() {
        // The root (rank 0's thread 120) gives up at rank 4; rank 3 dials
        // rank 4's ring address and fails too.
        let (job, idx) = three_hosts(vec![
            connect(0, 100, 120, "10.0.0.9", 40001),
            connect(3, 300, 300, "10.0.0.9", 40002),
        ]);
        let hosts = ring_next_hosts(&job, &idx);
        let want = RingNext {
            rank: 4,
            whom: Dialled::RingNext,
            host: Some("c".into()),
            dialled_by: [3].into(),
        };
        assert_eq!(hosts.get("10.0.0.9"), Some(&want));
    }

    #[test]
    fn the_last_ranks_next_is_rank_0_where_the_world_is_known() {
        let (mut job, idx) = three_hosts(vec![connect(5, 500, 500, "10.0.0.1", 40001)]);
        assert!(ring_next_hosts(&job, &idx).is_empty(), "rank 6 is no rank");
        job.world_size = Some(6);
        let want = RingNext {
            rank: 0,
            whom: Dialled::RingNext,
            host: Some("a".into()),
            dialled_by: [5].into(),
        };
        assert_eq!(ring_next_hosts(&job, &idx).get("10.0.0.1"), Some(&want));
    }

    #[test]
    fn one_port_dialled_by_several_ranks_is_a_shared_listener() {
        // Ranks 2 and 3 both fail to reach the root's port: not the ring.
        let (job, idx) = three_hosts(vec![
            connect(2, 300, 300, "10.0.0.1", 40001),
            connect(3, 301, 301, "10.0.0.1", 40001),
        ]);
        assert!(ring_next_hosts(&job, &idx).is_empty());
    }

    #[test]
    fn the_roots_thread_alone_names_no_host() {
        let (job, idx) = three_hosts(vec![connect(0, 100, 120, "172.17.0.1", 40001)]);
        assert!(ring_next_hosts(&job, &idx).is_empty());
        // Rank 0's main thread dials its own next (rank 1, on its host).
        let (job, idx) = three_hosts(vec![connect(0, 100, 100, "172.17.0.1", 40001)]);
        assert!(ring_next_hosts(&job, &idx).is_empty());
    }

    #[test]
    fn a_next_rank_no_line_places_is_named_alone() {
        // No line placed rank 2: rank 1's connect names the rank alone,
        // where the world's size or a placed rank above says it exists.
        let (mut job, idx) = three_hosts(vec![connect(1, 200, 200, "172.17.0.1", 40001)]);
        job.ranks.retain(|&r, _| r < 2);
        assert!(ring_next_hosts(&job, &idx).is_empty(), "no world size");
        job.ranks.insert(
            5,
            RankInfo {
                rank: 5,
                host: Some("c".into()),
                ..RankInfo::default()
            },
        );
        let above = ring_next_hosts(&job, &idx);
        assert_eq!(
            above.get("172.17.0.1").map(|n| (n.rank, n.host.clone())),
            Some((2, None))
        );
        job.ranks.remove(&5);
        job.world_size = Some(6);
        let want = RingNext {
            rank: 2,
            whom: Dialled::RingNext,
            host: None,
            dialled_by: [1].into(),
        };
        assert_eq!(ring_next_hosts(&job, &idx).get("172.17.0.1"), Some(&want));
    }

    #[test]
    fn disagreeing_successors_name_no_host() {
        let (job, idx) = three_hosts(vec![
            connect(1, 200, 200, "172.17.0.1", 40001),
            connect(3, 300, 300, "172.17.0.1", 40002),
        ]);
        assert!(ring_next_hosts(&job, &idx).is_empty());
    }

    #[test]
    fn addressless_give_ups_from_every_other_host_dialled_the_root_nccl_2_18() {
        // `socketPollConnect: exceeded retries (20000)` from ranks 2–5:
        // their successors (3, 4, 5, 0) disagree; only the root explains all.
        let (mut job, idx) =
            three_hosts((2..6).map(|r| addressless(r, 100 + r, 100 + r)).collect());
        job.world_size = Some(6);
        let want = RingNext {
            rank: 0,
            whom: Dialled::Root,
            host: Some("a".into()),
            dialled_by: [2, 3, 4, 5].into(),
        };
        assert_eq!(ring_next_hosts(&job, &idx).get(NO_ADDRESS), Some(&want));
    }

    #[test]
    fn one_hosts_give_ups_while_a_third_host_got_through_cut_off_that_host_nccl_2_20() {
        // Ranks 2 and 3 (host b) give up; their ring successors 3 and 4
        // include one on their own host, so these are root connects; host
        // c's ranks reached the root.
        let (mut job, idx) =
            three_hosts((2..4).map(|r| addressless(r, 100 + r, 100 + r)).collect());
        job.world_size = Some(6);
        let want = RingNext {
            rank: 0,
            whom: Dialled::RootFromOddHost,
            host: Some("b".into()),
            dialled_by: [2, 3].into(),
        };
        assert_eq!(ring_next_hosts(&job, &idx).get(NO_ADDRESS), Some(&want));
        // Two hosts only: either end may be the one cut off.
        let mut job = Job::with_ranks_on(&[(0, "a"), (1, "a"), (2, "b"), (3, "b")]);
        job.events = (2..4).map(|r| addressless(r, 100 + r, 100 + r)).collect();
        job.world_size = Some(4);
        assert!(ring_next_hosts(&job, &[0, 1]).is_empty());
    }

    #[test]
    fn a_give_up_on_rank_0s_host_rules_out_the_root() {
        // The root's own thread failed too: it reached out, so its host
        // was not the one cut off.
        let mut events: Vec<Event> = (2..6).map(|r| addressless(r, 100 + r, 100 + r)).collect();
        events.push(addressless(0, 100, 120));
        let (mut job, idx) = three_hosts(events);
        job.world_size = Some(6);
        assert!(ring_next_hosts(&job, &idx).is_empty());
    }

    #[test]
    fn address_bearing_connects_to_many_ports_are_not_the_roots() {
        // Same ranks, each naming an address: the address decides, not the root.
        let (mut job, idx) = three_hosts(
            (2..6)
                .map(|r| connect(r, 100 + r, 100 + r, "10.0.0.9", 40_000 + i64::from(r)))
                .collect(),
        );
        job.world_size = Some(6);
        assert!(ring_next_hosts(&job, &idx).is_empty());
    }
}
