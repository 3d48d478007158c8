//! Set-up causes: communicator init fails (verbs calls, sockets, bootstrap)
//! or hosts are configured differently. Nothing trains; the ranks that hit
//! the error raise, the rest block in init until the job is killed.

use crate::model::CauseKind;

use super::super::clock::{HOUR, MIN, MS, Us};
use super::super::story::{End, Fate, HostStory, PortOverride, Story, Warn};
use super::super::versions::PAIRS;
use super::super::versions::Ver;
use super::{Ctx, Place};

/// An init failure: `stuck` are the culprits, `reports` the ranks that
/// print the error (with it), everyone else blocks.
fn init_story(
    c: &mut Ctx<'_>,
    stuck: Vec<u32>,
    reports: Vec<(u32, Vec<(Us, Warn)>)>,
    result: u8,
    text: String,
) -> Story {
    let mut story = c.story("init_failure", text);
    story.default_fate = Fate::InitBlocked;
    story.truth.stuck_ranks = stuck;
    for (rank, warns) in reports {
        story.fates.insert(rank, Fate::InitError { warns, result });
    }
    let t_end = c.plan.times.init + c.rng.range(20 * MIN, 4 * HOUR);
    story.end = if c.rng.chance(0.5) {
        End::Cancelled(t_end)
    } else {
        End::TimeLimit(t_end)
    };
    story
}

/// When a rank's connection setup fails: a few seconds into init.
fn init_error_at(c: &mut Ctx<'_>) -> Us {
    c.plan.times.init + c.rng.range(800, 9_000) * MS
}

fn bootstrap_port(c: &mut Ctx<'_>) -> u16 {
    c.rng.range(33_000, 60_999) as u16
}

pub fn gid_index(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let peer = c.topo.receivers_from(p.host, p.local).into_iter().next();
    let peer = peer.or_else(|| c.topo.senders_into(p.host, p.local).into_iter().next());
    let at = init_error_at(c);
    let warn = Warn::ModifyQp {
        nic: p.local,
        errno: 22,
        peer: peer.unwrap_or(0),
        gid_index: 3,
    };
    let text = format!(
        "NCCL_IB_GID_INDEX=3 is set for the job, but {}'s {} port 1 has no IPv4 (RoCE v2) GID at index 3; ibv_modify_qp failed with EINVAL at init.",
        c.host_name(p.host),
        c.plan.hosts[p.host].nics[p.local as usize].name
    );
    let mut story = init_story(c, vec![p.rank], vec![(p.rank, vec![(at, warn)])], 2, text);
    story.truth.cause = Some(c.port_cause(CauseKind::GidIndex, p, None));
    story.env.push(("NCCL_IB_GID_INDEX".into(), "3".into()));
    story.host_mut(p.host).ports.push(PortOverride {
        nic: p.local,
        no_ipv4_gid: true,
        ..PortOverride::default()
    });
    story
}

pub fn memlock(c: &mut Ctx<'_>) -> Story {
    let host = c.rng.index(c.plan.hosts.len());
    let ranks = c.host_ranks(host);
    let reports: Vec<(u32, Vec<(Us, Warn)>)> = ranks
        .iter()
        .map(|&r| (r, vec![(init_error_at(c), Warn::RegMr)]))
        .collect();
    let text = format!(
        "{}'s container runs with a small locked-memory limit (ulimit -l); every rank there failed ibv_reg_mr (ENOMEM) at init.",
        c.host_name(host)
    );
    let mut story = init_story(c, ranks, reports, 2, text);
    story.truth.cause = Some(c.host_cause(CauseKind::Memlock, host, None));
    story
}

/// What a bootstrap that cannot reach `host`'s ranks prints: the ranks
/// that raise, with their errors, and what rank 0's root thread printed.
struct Connects {
    raised: Vec<(u32, Vec<(Us, Warn)>)>,
    root: Vec<(Us, Warn)>,
}

/// Connects that fail towards the ranks of `host` (one `errno` for the
/// host: a firewall rejects or drops every port alike). Where the host
/// holds the bootstrap root, every other host's ranks fail to reach it.
/// Elsewhere, the root (a thread of rank 0's process) hands each rank its
/// ring neighbour's address and gives up at the first rank it cannot
/// reach, printing the failure but never returning it to rank 0 — up to
/// 2.22 after every rank checked in and in rank order, so it fails at the
/// host's first rank; from 2.23 as ranks check in, at any of them. The
/// rank before the host's first got that rank's ring address and fails
/// to connect to it; from 2.23 the root may give up before sending it.
fn connects_into(c: &mut Ctx<'_>, host: usize, ip: &str, errno: i32) -> Connects {
    let at = init_error_at(c);
    if host == 0 {
        let addr = format!("{ip}<{}>", bootstrap_port(c));
        let others: Vec<u32> = (0..c.plan.world)
            .filter(|&r| c.host_of(r) != host)
            .collect();
        let raised = others
            .into_iter()
            .map(|r| {
                let w = Warn::Connect {
                    addr: addr.clone(),
                    errno,
                };
                (r, vec![(at + c.rng.range(0, 900) * MS, w)])
            })
            .collect();
        return Connects {
            raised,
            root: Vec::new(),
        };
    }
    let in_rank_order = c.plan.versions.nccl.lt(2, 23, 0);
    let root = vec![(
        at,
        Warn::RootConnect {
            addr: format!("{ip}<{}>", bootstrap_port(c)),
            errno,
        },
    )];
    let first = c.host_ranks(host)[0];
    let before = (first + c.plan.world - 1) % c.plan.world;
    let mut raised = Vec::new();
    if in_rank_order || c.rng.chance(0.85) {
        let w = Warn::Connect {
            addr: format!("{ip}<{}>", bootstrap_port(c)),
            errno,
        };
        raised.push((before, vec![(at + c.rng.range(200, 2_500) * MS, w)]));
    }
    Connects { raised, root }
}

/// An init failure from connects that could not reach `host`.
/// Rank 0 raises only for its own connect; its root thread's lines come
/// first either way.
fn unreachable_story(c: &mut Ctx<'_>, host: usize, connects: Connects, text: String) -> Story {
    let Connects { mut raised, root } = connects;
    let mut blocked_root = None;
    if !root.is_empty() {
        match raised.iter_mut().find(|(r, _)| *r == 0) {
            Some((_, warns)) => {
                warns.splice(0..0, root);
            }
            None => blocked_root = Some(root),
        }
    }
    let mut story = init_story(c, c.host_ranks(host), raised, 2, text);
    if let Some(warns) = blocked_root {
        story.fates.insert(0, Fate::RootFailed { warns });
    }
    story
}

pub fn socket_interface(c: &mut Ctx<'_>) -> Story {
    let host = c.rng.index(c.plan.hosts.len());
    let (iface, ip) = *c.rng.pick(&[
        ("docker0", "172.17.0.1"),
        ("docker0", "172.17.0.1"),
        ("virbr0", "192.168.122.1"),
    ]);
    let errno = *c.rng.pick(&[111, 111, 113]);
    let connects = connects_into(c, host, ip, errno);
    let text = format!(
        "{} has NCCL_SOCKET_IFNAME={iface}, so its ranks advertise {ip}, which no other host can reach; bootstrap connections to it failed.",
        c.host_name(host)
    );
    let mut story = unreachable_story(c, host, connects, text);
    story.truth.cause = Some(c.host_cause(CauseKind::SocketInterface, host, None));
    // Half the time the host's container also lacks the RDMA devices, so
    // NCCL runs on sockets there and prints `NET/Socket : Using [0]docker0…`.
    let sockets_only = c.rng.chance(0.5);
    let hs = story.host_mut(host);
    hs.socket = Some((iface.into(), ip.into()));
    hs.env.push(("NCCL_SOCKET_IFNAME".into(), iface.into()));
    hs.sockets_only = sockets_only;
    story
}

pub fn firewall(c: &mut Ctx<'_>) -> Story {
    let host = c.rng.index(c.plan.hosts.len());
    let ip = c.plan.hosts[host].ip.clone();
    let errno = *c.rng.pick(&[111, 111, 110]);
    let connects = connects_into(c, host, &ip, errno);
    let peer = Some(connects.raised.first().map_or(0, |r| c.host_of(r.0)));
    let text = format!(
        "A firewall on {} blocks NCCL's bootstrap ports; connections from other hosts to {ip} were refused or timed out at init.",
        c.host_name(host)
    );
    let mut story = unreachable_story(c, host, connects, text);
    story.truth.cause = Some(c.host_cause(CauseKind::Firewall, host, peer));
    story
}

pub fn cross_rail(c: &mut Ctx<'_>) -> Story {
    let p: Place = c.net_place();
    let senders: Vec<u32> = c.topo.senders_into(p.host, p.local).into_iter().collect();
    let receivers: Vec<u32> = c.topo.receivers_from(p.host, p.local).into_iter().collect();
    let at = init_error_at(c);
    let mut reports = Vec::new();
    if let Some(&peer) = receivers.first().or(senders.first()) {
        let w = Warn::ModifyQp {
            nic: p.local,
            errno: 110,
            peer,
            gid_index: 3,
        };
        reports.push((p.rank, vec![(at, w)]));
    }
    for &s in &senders {
        let w = Warn::ModifyQp {
            nic: c.plan.rank(s).local,
            errno: 110,
            peer: p.rank,
            gid_index: 3,
        };
        reports.push((s, vec![(at + c.rng.range(0, 2_000) * MS, w)]));
    }
    let peer = senders.first().map(|&s| c.host_of(s));
    let text = format!(
        "{}'s {} is cabled to another rail's switch; queue pairs between it and its peers could not be connected (ibv_modify_qp ETIMEDOUT).",
        c.host_name(p.host),
        c.plan.hosts[p.host].nics[p.local as usize].name
    );
    let mut story = init_story(c, vec![p.rank], reports, 2, text);
    story.truth.cause = Some(c.port_cause(CauseKind::CrossRail, p, peer));
    story.host_mut(p.host).miscabled_nic = Some(p.local);
    story
}

pub fn config_mismatch(c: &mut Ctx<'_>) -> Story {
    let host = c.rng.index(c.plan.hosts.len());
    if c.rng.chance(0.5) {
        versions_differ(c, host)
    } else {
        sockets_on_one_host(c, host)
    }
}

fn other_version(c: &mut Ctx<'_>) -> Ver {
    let mine = c.plan.versions.nccl;
    let others: Vec<Ver> = PAIRS
        .iter()
        .filter_map(|p| Ver::parse(p.1))
        .filter(|v| v.1 != mine.1)
        .collect();
    *c.rng.pick(&others)
}

fn versions_differ(c: &mut Ctx<'_>, host: usize) -> Story {
    let v = other_version(c);
    let g = c.plan.gpus_per_host;
    let first = c.plan.hosts[host].first_rank;
    let next = (first + g) % c.plan.world;
    let (got, want) = (
        c.rng.range(2_000, 9_000) as u32,
        c.rng.range(2_000, 9_000) as u32,
    );
    let mut reports = Vec::new();
    for r in [first, next] {
        reports.push((r, vec![(init_error_at(c), Warn::Truncated { got, want })]));
        if r == next && c.host_of(next) == host {
            break;
        }
    }
    let text = format!(
        "{} runs NCCL {v} while the other hosts run {}; their bootstrap messages differ in size and init failed.",
        c.host_name(host),
        c.plan.versions.nccl
    );
    let mut story = init_story(c, c.host_ranks(host), reports, 3, text);
    story.truth.cause = Some(c.host_cause(CauseKind::ConfigMismatch, host, None));
    story.host_mut(host).nccl_version = Some(v);
    story
}

fn sockets_on_one_host(c: &mut Ctx<'_>, host: usize) -> Story {
    let text = format!(
        "{} sets NCCL_IB_DISABLE=1 and uses sockets while the other hosts use IB; the first collective never completed.",
        c.host_name(host)
    );
    let mut story = c.story("hang", text);
    story.hung.seq = 1;
    story.hung.op = "BROADCAST";
    story.hung.numel_in = c.rng.range(100_000_000, 900_000_000) as u64;
    story.hung.numel_out = story.hung.numel_in;
    story.hung.step = 0;
    story.hang_at = c.plan.times.train;
    story.default_fate = c.timeout();
    if let Fate::Timeout {
        op,
        numel_in,
        numel_out,
        enqueued,
    } = &mut story.default_fate
    {
        *op = "BROADCAST";
        *numel_in = story.hung.numel_in;
        *numel_out = story.hung.numel_in;
        *enqueued = 1;
    }
    story.truth.stuck_ranks = c.host_ranks(host);
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.host_cause(CauseKind::ConfigMismatch, host, None));
    *story.host_mut(host) = HostStory {
        sockets_only: true,
        env: vec![("NCCL_IB_DISABLE".into(), "1".into())],
        ..HostStory::default()
    };
    story
}
