//! The communicators a rank joins and how NCCL wires them: rings, trees and
//! all-to-all peers, per channel. The NCCL writer prints these connections;
//! the causes use the same wiring to decide who talks to a failing port, so
//! the victims' errors and the channel lines agree.
//!
//! The model is rail-optimised: GPU k of every host uses `mlx5_k`. Channel c
//! of the default communicator enters each host at local rank `c % g` and
//! leaves it from the local rank before that, so inter-host hops of channel
//! c go from NIC `(c-1) % g` to NIC `c % g`. Trees join the entry ranks of
//! the hosts in a binary tree rooted at host 0.

use std::collections::BTreeSet;

use super::plan::{Plan, Profile};
use super::rng::Rng;

/// The communicators of a training job (default group and sub-groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommKind {
    /// The default process group: every rank.
    World,
    /// Tensor-parallel group: the ranks of one host.
    Tp,
    /// Data-parallel group: local rank k of every host.
    Dp,
    /// Expert-parallel group (all-to-all), full profile only.
    Ep,
}

/// One rank's membership of one communicator.
#[derive(Debug, Clone)]
pub struct Comm {
    pub kind: CommKind,
    pub nranks: u32,
    /// This rank's rank inside the communicator.
    pub rank: u32,
    /// Global ranks of the members, in communicator order.
    pub members: Vec<u32>,
    pub channels: u32,
    /// ncclCommSplit color (sub-groups).
    pub color: u32,
    /// Same on every member.
    pub id: u64,
}

impl Comm {
    /// A member's rank in the communicator, without a search: members are
    /// laid out regularly (all ranks, one host, one local rank per host, or
    /// a block of hosts).
    pub fn index_of(&self, global: u32) -> u32 {
        let first = self.members.first().copied().unwrap_or(0);
        let stride = match self.members.get(1) {
            Some(&second) => second.saturating_sub(first).max(1),
            None => 1,
        };
        global.saturating_sub(first) / stride
    }

    /// NCCL's `nNodes`, `localRanks` and `localRank` for `rank` (hosts of
    /// `gph` ranks): a block of whole hosts, or one rank per host.
    pub fn layout(&self, gph: u32, rank: u32) -> (u32, u32, u32) {
        let gph = gph.max(1);
        let one_per_host = self.members.len() > 1 && self.members[1] - self.members[0] >= gph;
        if one_per_host {
            (self.nranks, 1, 0)
        } else {
            (self.nranks.div_ceil(gph), self.nranks.min(gph), rank % gph)
        }
    }
}

/// What a connection line says about one hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    P2p,
    NetSend(u32),
    NetRecv(u32),
}

/// One connection line: channel, global ranks, transport.
#[derive(Debug, Clone, Copy)]
pub struct Hop {
    pub channel: u32,
    pub src: u32,
    pub dst: u32,
    pub via: Via,
}

pub struct Topo<'a> {
    plan: &'a Plan,
    g: u32,
    hosts: usize,
}

impl<'a> Topo<'a> {
    pub fn new(plan: &'a Plan) -> Topo<'a> {
        Topo {
            plan,
            g: plan.gpus_per_host.max(1),
            hosts: plan.hosts.len().max(1),
        }
    }

    pub fn world_channels(&self) -> u32 {
        match self.plan.profile {
            Profile::Small => 2,
            // 8-NIC H100 hosts get 32 channels from NCCL's tuning.
            Profile::Full => 4 * self.g,
        }
    }

    pub fn entry(&self, channel: u32) -> u32 {
        channel % self.g
    }

    pub fn exit(&self, channel: u32) -> u32 {
        (channel + self.g - 1) % self.g
    }

    fn split(&self, rank: u32) -> (usize, u32) {
        ((rank / self.g) as usize, rank % self.g)
    }

    fn join(&self, host: usize, local: u32) -> u32 {
        host as u32 * self.g + local
    }

    pub fn ring_next(&self, channel: u32, rank: u32) -> u32 {
        let (h, l) = self.split(rank);
        if l == self.exit(channel) {
            self.join((h + 1) % self.hosts, self.entry(channel))
        } else {
            self.join(h, (l + 1) % self.g)
        }
    }

    pub fn ring_prev(&self, channel: u32, rank: u32) -> u32 {
        let (h, l) = self.split(rank);
        if l == self.entry(channel) {
            self.join((h + self.hosts - 1) % self.hosts, self.exit(channel))
        } else {
            self.join(h, (l + self.g - 1) % self.g)
        }
    }

    /// `host`'s parent in channel `channel`'s tree.
    pub fn tree_parent(&self, channel: u32, host: usize) -> Option<usize> {
        self.dtree(channel, host).0
    }

    /// `host`'s children in channel `channel`'s tree.
    pub fn tree_children(&self, channel: u32, host: usize) -> Vec<usize> {
        self.dtree(channel, host).1
    }

    /// Hosts joined to `host` by an edge of channel `channel`'s tree.
    fn tree_neighbours(&self, channel: u32, host: usize) -> Vec<usize> {
        let (up, mut down) = self.dtree(channel, host);
        down.splice(0..0, up);
        down
    }

    /// NCCL's double binary tree over the hosts (graph/trees.cc,
    /// `ncclGetDtree`, 2.4+): the first half of the channels use a binary
    /// tree rooted at host 0, the second half its mirror (an even number of
    /// hosts) or the same tree shifted by one host (an odd number).
    fn dtree(&self, channel: u32, host: usize) -> (Option<usize>, Vec<usize>) {
        let n = self.hosts;
        let second = self.world_channels() >= 2 && channel >= self.world_channels() / 2;
        let odd = n % 2 == 1;
        let into = |h: usize| match (second, odd) {
            (false, _) => h,
            (true, true) => (h + n - 1) % n,
            (true, false) => n - 1 - h,
        };
        let back = |h: usize| match (second, odd) {
            (false, _) => h,
            (true, true) => (h + 1) % n,
            (true, false) => n - 1 - h,
        };
        let (up, down) = btree(n, into(host));
        (up.map(back), down.into_iter().map(back).collect())
    }

    /// Local ranks whose NICs carry the default group's inter-host traffic.
    pub fn net_locals(&self) -> BTreeSet<u32> {
        (0..self.world_channels())
            .flat_map(|c| [self.entry(c), self.exit(c)])
            .collect()
    }

    /// Ranks on other hosts that send into `(host, local)`'s NIC over the
    /// default group (ring predecessors and tree neighbours).
    pub fn senders_into(&self, host: usize, local: u32) -> BTreeSet<u32> {
        let me = self.join(host, local);
        let mut out = BTreeSet::new();
        for c in 0..self.world_channels() {
            if self.entry(c) != local {
                continue;
            }
            let prev = self.ring_prev(c, me);
            if self.split(prev).0 != host {
                out.insert(prev);
            }
            for n in self.tree_neighbours(c, host) {
                out.insert(self.join(n, local));
            }
        }
        out
    }

    /// Ranks on other hosts that `(host, local)` sends to over its NIC.
    pub fn receivers_from(&self, host: usize, local: u32) -> BTreeSet<u32> {
        let me = self.join(host, local);
        let mut out = BTreeSet::new();
        for c in 0..self.world_channels() {
            if self.exit(c) == local {
                let next = self.ring_next(c, me);
                if self.split(next).0 != host {
                    out.insert(next);
                }
            }
            if self.entry(c) == local {
                for n in self.tree_neighbours(c, host) {
                    out.insert(self.join(n, local));
                }
            }
        }
        out
    }

    /// The communicators `rank` joins, default group first.
    pub fn comms(&self, rank: u32) -> Vec<Comm> {
        let (h, l) = self.split(rank);
        let full = self.plan.profile == Profile::Full;
        let mut out = vec![self.comm(CommKind::World, rank, 0, (0..self.plan.world).collect())];
        let tp: Vec<u32> = (0..self.g).map(|x| self.join(h, x)).collect();
        out.push(self.comm(CommKind::Tp, rank, h as u32, tp));
        let dp: Vec<u32> = (0..self.hosts).map(|x| self.join(x, l)).collect();
        out.push(self.comm(CommKind::Dp, rank, l, dp));
        if full {
            let per = (128 / self.g).max(1) as usize;
            let first = h / per * per;
            let ep: Vec<u32> = (first..(first + per).min(self.hosts))
                .flat_map(|x| (0..self.g).map(move |y| (x, y)))
                .map(|(x, y)| self.join(x, y))
                .collect();
            if ep.len() > self.g as usize {
                out.push(self.comm(CommKind::Ep, rank, (h / per) as u32, ep));
            }
        }
        out
    }

    fn comm(&self, kind: CommKind, rank: u32, color: u32, members: Vec<u32>) -> Comm {
        let full = self.plan.profile == Profile::Full;
        let channels = match (kind, full) {
            (CommKind::World, _) => self.world_channels(),
            (CommKind::Tp, true) => 24,
            (CommKind::Dp, true) => 8,
            (CommKind::Ep, true) => 4,
            (CommKind::Ep, false) => 2,
            (_, false) => 2,
        };
        let id =
            Rng::derive(self.plan.seed, "comm-id", &[kind as u64, u64::from(color)]).next_u64();
        let mut comm = Comm {
            kind,
            nranks: members.len() as u32,
            rank: 0,
            members,
            channels,
            color,
            id,
        };
        comm.rank = comm.index_of(rank);
        comm
    }

    /// The connection lines `rank` prints for one communicator, in NCCL's
    /// order: ring receives and sends, then tree hops.
    pub fn hops(&self, comm: &Comm, rank: u32) -> (Vec<Hop>, Vec<Hop>) {
        match comm.kind {
            CommKind::World => (self.world_ring(comm, rank), self.world_tree(comm, rank)),
            CommKind::Tp | CommKind::Dp => (self.member_ring(comm, rank), Vec::new()),
            CommKind::Ep => (self.all_to_all(comm, rank), Vec::new()),
        }
    }

    fn via(&self, src: u32, dst: u32, send_side: bool) -> Via {
        let (sh, sl) = self.split(src);
        let (dh, dl) = self.split(dst);
        match (sh == dh, send_side) {
            (true, _) => Via::P2p,
            (false, true) => Via::NetSend(sl),
            (false, false) => Via::NetRecv(dl),
        }
    }

    fn world_ring(&self, comm: &Comm, rank: u32) -> Vec<Hop> {
        let mut recv = Vec::new();
        let mut send = Vec::new();
        for c in 0..comm.channels {
            let prev = self.ring_prev(c, rank);
            if let Via::NetRecv(n) = self.via(prev, rank, false) {
                recv.push(Hop {
                    channel: c,
                    src: prev,
                    dst: rank,
                    via: Via::NetRecv(n),
                });
            }
            let next = self.ring_next(c, rank);
            send.push(Hop {
                channel: c,
                src: rank,
                dst: next,
                via: self.via(rank, next, true),
            });
        }
        recv.extend(send);
        recv
    }

    fn world_tree(&self, comm: &Comm, rank: u32) -> Vec<Hop> {
        let (h, l) = self.split(rank);
        let mut out = Vec::new();
        for c in (0..comm.channels).filter(|&c| self.entry(c) == l) {
            for n in self.tree_neighbours(c, h) {
                let peer = self.join(n, l);
                out.push(Hop {
                    channel: c,
                    src: peer,
                    dst: rank,
                    via: Via::NetRecv(l),
                });
                out.push(Hop {
                    channel: c,
                    src: rank,
                    dst: peer,
                    via: Via::NetSend(l),
                });
            }
        }
        out
    }

    fn member_ring(&self, comm: &Comm, rank: u32) -> Vec<Hop> {
        let n = comm.members.len();
        if n < 2 {
            return Vec::new();
        }
        let me = comm.rank as usize;
        let next = comm.members[(me + 1) % n];
        let prev = comm.members[(me + n - 1) % n];
        let mut recv = Vec::new();
        let mut send = Vec::new();
        for c in 0..comm.channels {
            if let Via::NetRecv(k) = self.via(prev, rank, false) {
                recv.push(Hop {
                    channel: c,
                    src: prev,
                    dst: rank,
                    via: Via::NetRecv(k),
                });
            }
            send.push(Hop {
                channel: c,
                src: rank,
                dst: next,
                via: self.via(rank, next, true),
            });
        }
        recv.extend(send);
        recv
    }

    fn all_to_all(&self, comm: &Comm, rank: u32) -> Vec<Hop> {
        let mut out = Vec::new();
        for &peer in comm.members.iter().filter(|&&p| p != rank) {
            for c in 0..comm.channels {
                out.push(Hop {
                    channel: c,
                    src: peer,
                    dst: rank,
                    via: self.via(peer, rank, false),
                });
                out.push(Hop {
                    channel: c,
                    src: rank,
                    dst: peer,
                    via: self.via(rank, peer, true),
                });
            }
        }
        out
    }

    /// `Trees [0] d0/d1/d2->r->up …` entries of `rank` in the default group.
    pub fn tree_line(&self, channels: u32, rank: u32) -> Vec<(u32, [i64; 3], i64)> {
        let (h, l) = self.split(rank);
        (0..channels)
            .map(|c| {
                let entry = self.entry(c);
                let pos = (l + self.g - entry) % self.g;
                let chain_next = (pos + 1 < self.g).then(|| self.join(h, (l + 1) % self.g));
                let mut down = [-1i64; 3];
                let mut slots = chain_next.map(i64::from).into_iter().collect::<Vec<_>>();
                let up = if pos == 0 {
                    slots.extend(
                        self.tree_children(c, h)
                            .iter()
                            .map(|&x| i64::from(self.join(x, l))),
                    );
                    self.tree_parent(c, h)
                        .map_or(-1, |p| i64::from(self.join(p, l)))
                } else {
                    i64::from(self.join(h, (l + self.g - 1) % self.g))
                };
                for (d, s) in down.iter_mut().zip(slots) {
                    *d = s;
                }
                (c, down, up)
            })
            .collect()
    }
}

/// NCCL's binary tree of `n` nodes rooted at 0 (`ncclGetBtree`): `rank`'s
/// parent and children. Each node's lowest set bit says its level; a child
/// out of range moves up to the largest one in range.
fn btree(n: usize, rank: usize) -> (Option<usize>, Vec<usize>) {
    let mut bit = 1;
    while bit < n && bit & rank == 0 {
        bit <<= 1;
    }
    if rank == 0 {
        let child = (n > 1).then_some(bit >> 1);
        return (None, child.into_iter().collect());
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let mut lowbit = bit >> 1;
    if lowbit == 0 {
        return (Some(up), Vec::new());
    }
    let down0 = rank - lowbit;
    let mut down1 = rank + lowbit;
    while down1 >= n && lowbit > 0 {
        lowbit >>= 1;
        down1 = rank + lowbit;
    }
    let down = std::iter::once(down0)
        .chain((lowbit > 0).then_some(down1))
        .collect();
    (Some(up), down)
}

#[cfg(test)]
mod tests {
    use super::{Topo, btree};
    use crate::simulate::plan::{Plan, Profile, Scenario, SimOptions};

    /// graph/trees.cc's picture of 14 nodes: 0 → 8; 8 → 4, 12; 12 → 10, 13;
    /// 13 a leaf under 12; 6 → 5, 7 under 4.
    #[test]
    fn binary_tree_as_nccl_draws_it_nccl_2_4() {
        assert_eq!(btree(14, 0), (None, vec![8]));
        assert_eq!(btree(14, 8), (Some(0), vec![4, 12]));
        assert_eq!(btree(14, 12), (Some(8), vec![10, 13]));
        assert_eq!(btree(14, 13), (Some(12), vec![]));
        assert_eq!(btree(14, 6), (Some(4), vec![5, 7]));
        assert_eq!(btree(1, 0), (None, vec![]));
        assert_eq!(btree(2, 1), (Some(0), vec![]));
    }

    /// Four hosts: tree 0 is 0 → 2 → {1, 3}; the second half of the channels
    /// use its mirror, 3 → 1 → {2, 0}.
    #[test]
    fn the_second_half_of_the_channels_use_the_mirrored_tree_nccl_2_4() {
        let plan = Plan::build(&SimOptions {
            scenario: Scenario::Healthy,
            ranks: 32,
            seed: 1,
            layout: None,
            nccl_version: None,
            torch_version: None,
            profile: Profile::Small,
        });
        let topo = Topo::new(&plan);
        let last = topo.world_channels() - 1;
        assert!(last >= 1);
        assert_eq!(topo.tree_parent(0, 0), None);
        assert_eq!(topo.tree_children(0, 2), vec![1, 3]);
        assert_eq!(topo.tree_parent(last, 3), None);
        assert_eq!(topo.tree_children(last, 1), vec![2, 0]);
        assert_eq!(topo.tree_parent(last, 0), Some(1));
    }
}
