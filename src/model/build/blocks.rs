//! Hosts for ranks that left no line, from the launcher's block layout.
//!
//! torchrun, Slurm's default distribution and mpirun `--map-by node`'s
//! opposite all give each host a contiguous block of ranks: host k holds
//! ranks k·S … k·S + S − 1 for S ranks per host. Where every host whose
//! ranks are known fits one block, and no two hosts share one, a rank that
//! never wrote a line sits on the host owning its block; hosts whose ranks
//! are all silent take the free blocks in name order where the known hosts
//! sit at their places in that order (Slurm's node list). Any other layout
//! (round-robin, uneven hosts, hosts out of name order) leaves such ranks
//! without a host.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Job, RankInfo};

use super::short_host_of;

pub fn place_silent_ranks(job: &mut Job) {
    let Some((owners, per_host)) = block_owners(job) else {
        return;
    };
    let world = world(job);
    for rank in 0..world {
        let has_host = job.ranks.get(&rank).is_some_and(|i| i.host.is_some());
        if has_host {
            continue;
        }
        let Some(host) = owners.get(&(rank / per_host)) else {
            continue;
        };
        let info = job.ranks.entry(rank).or_insert_with(|| RankInfo {
            rank,
            ..RankInfo::default()
        });
        info.host = Some(host.clone());
        if let Some(h) = job.hosts.get_mut(host) {
            h.ranks.insert(rank);
        }
    }
}

/// The world's size: NCCL's, else the larger of the highest known rank + 1
/// and hosts × workers per host (a host's local ranks, from its workers'
/// log folders and prefixes, or its workers' own NCCL files), when every
/// host shows as many workers.
fn world(job: &Job) -> u32 {
    if let Some(w) = job.world_size {
        return w;
    }
    let highest = job.ranks.keys().max().map_or(0, |&r| r + 1);
    let mut locals: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let file_locals = job
        .files
        .iter()
        .filter_map(|f| Some((f.hints.host.as_deref()?, f.hints.local_rank?)));
    let rank_locals = job
        .ranks
        .values()
        .filter_map(|i| Some((i.host.as_deref()?, i.local_rank?)));
    for (host, local) in file_locals.chain(rank_locals) {
        locals.entry(short_host_of(host)).or_default().insert(local);
    }
    // Each worker writes its own `nccl.%h.%p` (empty under NCCL_DEBUG=WARN
    // with nothing to say): a host's worker processes.
    let mut pids: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for f in &job.files {
        if let (Some(host), Some(pid)) = (f.hints.host.as_deref(), f.hints.pid) {
            pids.entry(short_host_of(host)).or_default().insert(pid);
        }
    }
    highest
        .max(same_count_on_every_host(&locals))
        .max(same_count_on_every_host(&pids))
}

/// Hosts × workers per host, when two or more hosts show as many workers.
fn same_count_on_every_host(workers: &BTreeMap<String, BTreeSet<u32>>) -> u32 {
    let per_host: BTreeSet<usize> = workers.values().map(BTreeSet::len).collect();
    match per_host.into_iter().collect::<Vec<_>>()[..] {
        [n] if workers.len() >= 2 => (n * workers.len()) as u32,
        _ => 0,
    }
}

/// Block index → host, and ranks per block, when the known ranks fit one
/// block per host.
fn block_owners(job: &Job) -> Option<(BTreeMap<u32, String>, u32)> {
    let mut by_host: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (&rank, info) in &job.ranks {
        if let Some(h) = &info.host {
            by_host.entry(short_host_of(h)).or_default().insert(rank);
            names.entry(short_host_of(h)).or_insert_with(|| h.clone());
        }
    }
    // Hosts of the job whose ranks are all unknown still hold a block: a
    // folder or snapshot names them, or the launcher reports a death there
    // (a node that died first, or one whose logs were not collected).
    let lost_nodes = job.deaths.iter().filter_map(|d| d.host.as_deref());
    let mut idle: BTreeSet<String> = job
        .files
        .iter()
        .filter_map(|f| f.hints.host.as_deref())
        .chain(job.hosts.keys().map(String::as_str))
        .chain(lost_nodes)
        .map(short_host_of)
        .filter(|h| !by_host.contains_key(h))
        .collect();
    let world = world(job);
    let hosts = (by_host.len() + idle.len()) as u32;
    if by_host.is_empty() || hosts < 2 || world == 0 || !world.is_multiple_of(hosts) {
        return None;
    }
    let per_host = world / hosts;
    // A world read off the highest rank seen is only a floor: hosts that
    // show a few ranks each of blocks that large were sized by hosts the
    // logs never named (16 hosts of 8 seen as two of 40).
    let highest = job.ranks.keys().max().map_or(0, |&r| r + 1);
    let floor_only = job.world_size.is_none() && world == highest;
    if floor_only && by_host.values().any(|r| (r.len() as u32) * 2 < per_host) {
        return None;
    }
    let mut owners = BTreeMap::new();
    for (host, ranks) in &by_host {
        let blocks: BTreeSet<u32> = ranks.iter().map(|r| r / per_host).collect();
        let [block] = blocks.into_iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        if owners.insert(block, names[host].clone()).is_some() {
            return None;
        }
    }
    // One host without known ranks and one block without a host: its block.
    let free: Vec<u32> = (0..hosts).filter(|b| !owners.contains_key(b)).collect();
    if free.len() == 1 && idle.len() == 1 {
        owners.insert(free[0], idle.pop_first()?);
    } else if blocks_follow_names(&owners, &idle) {
        owners.extend(in_name_order(&owners, &idle));
    }
    Some((owners, per_host))
}

/// Slurm hands out blocks in its node list's order (hosts sorted by name,
/// numbers numerically), and so do torchrun's `--node_rank=$SLURM_NODEID`
/// and mpirun's sorted host files. Where every host whose ranks are known
/// holds the block of its place in that order, the hosts without known
/// ranks are taken to hold theirs too; a rendezvous that numbered hosts by
/// arrival rarely puts each known host at its place by chance.
fn blocks_follow_names(owners: &BTreeMap<u32, String>, idle: &BTreeSet<String>) -> bool {
    let placed_by_name = |(place, host): (usize, &String)| {
        owners
            .get(&(place as u32))
            .is_none_or(|h| short_host_of(h) == *host)
    };
    !idle.is_empty()
        && all_hosts_by_name(owners, idle)
            .iter()
            .enumerate()
            .all(placed_by_name)
}

/// The idle hosts with the blocks of their places among all hosts by name.
fn in_name_order(owners: &BTreeMap<u32, String>, idle: &BTreeSet<String>) -> Vec<(u32, String)> {
    all_hosts_by_name(owners, idle)
        .into_iter()
        .enumerate()
        .filter(|(_, host)| idle.contains(host))
        .map(|(place, host)| (place as u32, host))
        .collect()
}

/// Every host of the job (short names), in the launcher's order by name.
fn all_hosts_by_name(owners: &BTreeMap<u32, String>, idle: &BTreeSet<String>) -> Vec<String> {
    let mut hosts: Vec<String> = owners
        .values()
        .map(|h| short_host_of(h))
        .chain(idle.iter().cloned())
        .collect();
    hosts.sort_by(|a, b| natord::compare(a, b));
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(known: &[(u32, &str)], world: u32) -> Job {
        Job {
            world_size: Some(world),
            ..Job::with_ranks_on(known)
        }
    }

    #[test]
    fn a_rank_without_lines_joins_the_host_owning_its_block() {
        let mut j = job(&[(0, "a"), (3, "a"), (5, "b"), (7, "b")], 8);
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&1].host.as_deref(), Some("a"));
        assert_eq!(j.ranks[&4].host.as_deref(), Some("b"));
    }

    /// mpirun over 16 hosts of 8 where only node-b10's ranks 72–79 wrote and
    /// node-b11 left a folder: the highest rank sizes no world, so node-b11
    /// takes no block of 40.
    #[test]
    fn a_world_known_only_by_its_highest_rank_sizes_no_blocks_of_hosts_unseen() {
        let ranks: Vec<(u32, &str)> = (72..80).map(|r| (r, "node-b10")).collect();
        let mut j = Job::with_ranks_on(&ranks);
        j.files.push(crate::model::FileInfo {
            hints: crate::model::PathHints {
                host: Some("node-b11".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        place_silent_ranks(&mut j);
        assert!(j.ranks.get(&0).is_none_or(|i| i.host.is_none()));
        assert!(j.ranks.get(&40).is_none_or(|i| i.host.is_none()));
    }

    /// NCCL_DEBUG=WARN: no world size, only rank 0 placed; each host's four
    /// workers left a `nccl.%h.%p` file, so the world is 8 and b owns 4–7.
    #[test]
    fn worker_files_size_the_world_when_nccl_printed_none() {
        let mut j = Job::with_ranks_on(&[(0, "a")]);
        for (host, pid) in [
            ("a", 10),
            ("a", 11),
            ("a", 12),
            ("a", 13),
            ("b", 20),
            ("b", 21),
            ("b", 22),
            ("b", 23),
        ] {
            j.files.push(crate::model::FileInfo {
                hints: crate::model::PathHints {
                    host: Some(host.into()),
                    pid: Some(pid),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&3].host.as_deref(), Some("a"));
        assert_eq!(j.ranks[&4].host.as_deref(), Some("b"));
        assert_eq!(j.ranks[&7].host.as_deref(), Some("b"));
    }

    #[test]
    fn a_host_known_only_by_its_folder_takes_the_free_block() {
        let mut j = job(&[(4, "b"), (5, "b")], 8);
        j.files.push(crate::model::FileInfo {
            path: "a/ibstat.txt".into(),
            hints: crate::model::PathHints {
                host: Some("a".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&0].host.as_deref(), Some("a"));
        assert_eq!(j.ranks[&7].host.as_deref(), Some("b"));
    }

    #[test]
    fn blocks_are_sized_by_every_host_not_only_the_known_ones() {
        let mut j = with_idle_hosts(job(&[(0, "a"), (1, "a"), (6, "d")], 8), &["b", "c"]);
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&7].host.as_deref(), Some("d"));
        // a and d hold the blocks of their places by name: so do b and c.
        assert_eq!(j.ranks[&2].host.as_deref(), Some("b"));
        assert_eq!(j.ranks[&5].host.as_deref(), Some("c"));
    }

    /// srun's `Node failure on d` names a host that left no line or
    /// folder: it takes the one block no known host holds (as a host named
    /// by any death does; one named by none is no host of the job).
    #[test]
    fn a_node_the_launcher_lost_takes_the_free_block_slurm() {
        let known: Vec<(u32, &str)> = (0..4)
            .map(|r| (r, "a"))
            .chain((5..8).map(|r| (r, "b")))
            .chain((12..16).map(|r| (r, "c")))
            .collect();
        let mut j = job(&known, 16);
        j.deaths.push(crate::model::Death {
            rank: None,
            host: Some("d".into()),
            pid: None,
            kind: crate::model::DeathKind::NodeLost,
            exitcode: None,
            signal: None,
            reason: "srun: Node failure".into(),
            consequence: false,
            stopped_by_launcher: false,
            ignored_sigterm: false,
            time: Default::default(),
            evidence: vec![],
        });
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&8].host.as_deref(), Some("d"));
        assert_eq!(j.ranks[&11].host.as_deref(), Some("d"));
        j.deaths[0].host = None;
        j.ranks.retain(|_, i| i.host.as_deref() != Some("d"));
        place_silent_ranks(&mut j);
        assert!(j.ranks.get(&8).is_none_or(|i| i.host.is_none()));
    }

    fn with_idle_hosts(mut j: Job, hosts: &[&str]) -> Job {
        for host in hosts {
            j.files.push(crate::model::FileInfo {
                path: format!("{host}/journal.txt"),
                hints: crate::model::PathHints {
                    host: Some((*host).into()),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        j
    }

    /// NCCL_DEBUG=WARN under Slurm: only node10's ranks left a line; the
    /// others hold the blocks of their places in the node list (numbers
    /// compare as numbers: node9 before node10).
    #[test]
    fn silent_hosts_hold_the_blocks_of_their_places_by_name() {
        let known: Vec<(u32, &str)> = (16..24).map(|r| (r, "node10")).collect();
        let mut j = with_idle_hosts(job(&known, 32), &["node8", "node9", "node11"]);
        place_silent_ranks(&mut j);
        assert_eq!(j.ranks[&0].host.as_deref(), Some("node8"));
        assert_eq!(j.ranks[&8].host.as_deref(), Some("node9"));
        assert_eq!(j.ranks[&31].host.as_deref(), Some("node11"));
    }

    /// A rendezvous numbered the hosts by arrival: the known host is not at
    /// its place by name, so the silent ones stay unplaced.
    #[test]
    fn hosts_out_of_name_order_leave_silent_ranks_unplaced() {
        let known: Vec<(u32, &str)> = (0..8).map(|r| (r, "node10")).collect();
        let mut j = with_idle_hosts(job(&known, 32), &["node8", "node9", "node11"]);
        place_silent_ranks(&mut j);
        assert!(!j.ranks.contains_key(&8));
        assert!(!j.ranks.contains_key(&31));
    }

    #[test]
    fn round_robin_ranks_are_left_alone() {
        let mut j = job(&[(0, "a"), (1, "b"), (2, "a"), (3, "b")], 8);
        place_silent_ranks(&mut j);
        assert!(!j.ranks.contains_key(&4));
    }

    #[test]
    fn two_hosts_in_one_block_are_left_alone() {
        let mut j = job(&[(0, "a"), (1, "b")], 8);
        place_silent_ranks(&mut j);
        assert!(!j.ranks.contains_key(&2));
    }
}
