//! Who is who: resolving every event to a global rank.
//!
//! A line names its rank directly only sometimes (`[rank3]:`, an MPI tag). The
//! strongest link otherwise is NCCL's init line: `host:pid` + `comm … rank R
//! nranks N` for the communicator spanning the whole world. The rest follows by
//! joining keys (docs/log-formats.md §4.1): (host, pid) → rank, (host, local
//! rank) → rank, a Slurm task id that equals the rank, and finally the file: a
//! file written by a single process gives its rank to its unattributed lines.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{EventKind, Job, RankInfo, Sym};

use super::inits::{InitCursor, InitLines};

/// (host, pid): shared host names, so keys cost a reference count, not a copy.
pub(super) type HostPid = (Sym, u32);

/// Resolves every event's rank; returns the communicator init lines it
/// read (the tree links read them too).
pub(super) fn resolve(job: &mut Job) -> InitLines {
    place_agent_tasks(job);
    resolve_by_stated_rank(job);
    let inits = InitLines::of(job);
    let agents = AgentRanks::of(job);
    job.world_size = world_size(&inits).or(agents.world_size);
    let summaries = failure_summaries(job);
    let mut by_pid = pid_ranks(job, &inits);
    let mut by_local = local_ranks(job, &inits, &by_pid);
    for (key, rank) in agents.by_local {
        by_local.entry(key).or_insert(rank);
    }
    let failed_locals = failed_locals(job, &summaries);
    for s in summaries {
        if let Some(pid) = s.pid {
            by_pid.entry((s.host.clone(), pid)).or_insert(s.rank);
        }
        if let Some(local) = s.local_rank {
            by_local.entry((s.host, local)).or_insert(s.rank);
        }
    }
    for (key, rank) in super::sweeps::swept_pid_ranks(job, &by_pid, &by_local, &failed_locals) {
        by_pid.entry(key).or_insert(rank);
    }
    let task_is_rank = tasks_are_ranks(job);
    for ev in &mut job.events {
        if ev.who.rank.is_some() {
            continue;
        }
        let host = ev.who.host.as_ref();
        ev.who.rank = host
            .zip(ev.who.pid)
            .and_then(|(h, p)| by_pid.get(&(h.clone(), p)).copied())
            .or_else(|| ev.who.task.filter(|_| task_is_rank))
            .or_else(|| {
                host.zip(ev.who.local_rank)
                    .and_then(|(h, l)| by_local.get(&(h.clone(), l)).copied())
            });
    }
    resolve_by_host_offset(job, &by_local);
    resolve_by_file(job);
    resolve_by_default_group_rank(job);
    build_rank_infos(job, &inits, &by_pid, &by_local);
    if task_is_rank {
        place_tasks_srun_reported(job);
    }
    inits
}

/// What torchrun agents said at rendezvous: each lists its host's workers'
/// global ranks in local-rank order, and the world size. The only statement
/// of where a rank ran when NCCL printed nothing about it.
#[derive(Default)]
struct AgentRanks {
    by_local: BTreeMap<HostPid, u32>,
    world_size: Option<u32>,
}

impl AgentRanks {
    fn of(job: &Job) -> AgentRanks {
        let mut out = AgentRanks::default();
        for ev in job.events_where(|k| k == EventKind::ElasticAgent) {
            if let Some(n) = ev.1.int("world_size") {
                out.world_size = out.world_size.max(u32::try_from(n).ok());
            }
            let (Some(host), Some(list)) = (&ev.1.who.host, ev.1.text_field("global_ranks")) else {
                continue;
            };
            for (local, rank) in (0..).zip(list.split(',')) {
                if let Ok(rank) = rank.trim().parse::<u32>() {
                    out.by_local.entry((host.clone(), local)).or_insert(rank);
                }
            }
        }
        for (_, ev) in job.events_where(|k| k == EventKind::RankLayout) {
            let layout = host_rank_lists(ev.text_field("mapping").unwrap_or(""));
            let world: usize = layout.iter().map(|(_, ranks)| ranks.len()).sum();
            out.world_size = out.world_size.max(u32::try_from(world).ok());
            for (host, ranks) in layout {
                let host = Sym::new(super::short_host(host));
                for (local, rank) in (0..).zip(ranks) {
                    out.by_local.entry((host.clone(), local)).or_insert(rank);
                }
            }
        }
        out
    }
}

/// Under `srun --ntasks-per-node=1 torchrun …` a task label is a host's
/// agent: the host srun's exit notice (`srun: error: a100-n07: task 2: …`)
/// or the agent's failure summary (`2:   host : a100-n07.…`) names for a
/// task is the host of every line under that label.
fn place_agent_tasks(job: &mut Job) {
    if !super::rank_index::labels_hold_workers(job) {
        return;
    }
    let mut hosts: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for e in &job.events {
        let task = match e.kind {
            EventKind::TaskExited => e
                .text_field("tasks")
                .and_then(|t| t.trim().parse::<u32>().ok()),
            _ => e.who.task,
        };
        if let Some((task, host)) = task.zip(super::file_hosts::reported_host(e)) {
            let host = super::short_host(host);
            hosts.entry(task).or_default().insert(host.to_string());
        }
    }
    let single: BTreeMap<u32, Sym> = hosts
        .into_iter()
        .filter(|(_, h)| h.len() == 1)
        .filter_map(|(t, h)| Some((t, Sym::new(h.first()?))))
        .collect();
    for e in &mut job.events {
        if e.who.host.is_none()
            && let Some(host) = e.who.task.and_then(|t| single.get(&t))
        {
            e.who.host = Some(host.clone());
        }
    }
}

/// `{'gpu-d01': [0, 1, 2], 'gpu-d02': [3, 4, 5]}` (a Python dict's repr):
/// each host and its global ranks, in local-rank order.
pub(super) fn host_rank_lists(mapping: &str) -> Vec<(&str, Vec<u32>)> {
    let mut out = Vec::new();
    let mut rest = mapping;
    while let Some(open) = rest.find(['\'', '"']) {
        let quote = &rest[open..open + 1];
        let after = &rest[open + 1..];
        let Some(close) = after.find(quote) else {
            break;
        };
        let host = &after[..close];
        let tail = &after[close + 1..];
        let (Some(lb), Some(rb)) = (tail.find('['), tail.find(']')) else {
            break;
        };
        if lb > rb {
            break;
        }
        let ranks = tail[lb + 1..rb]
            .split(',')
            .filter_map(|r| r.trim().parse().ok())
            .collect();
        out.push((host, ranks));
        rest = &tail[rb + 1..];
    }
    out
}

/// A line that states its writer's global rank (a training script's
/// `| distributed init (rank 15): …`) is that rank's, and pairs it with the
/// launcher's local-rank prefix for the lines that follow. Where it also
/// states its host (`rank=82 … host=node-b11`), the writer ran there: the
/// only placement of a rank whose NCCL lines a lost node never wrote.
fn resolve_by_stated_rank(job: &mut Job) {
    for ev in job
        .events
        .iter_mut()
        .filter(|e| e.kind == EventKind::TorchInfo)
    {
        let stated = ev.int("global_rank").and_then(|r| u32::try_from(r).ok());
        if ev.who.rank.is_none() {
            ev.who.rank = stated;
        }
        let own_line = stated.is_some() && ev.who.rank == stated;
        let host = ev
            .text_field("host")
            .filter(|_| own_line && ev.who.host.is_none())
            .map(|h| Sym::new(super::short_host(h)));
        if let Some(host) = host {
            ev.who.host = Some(host);
        }
    }
}

/// The world is the largest communicator NCCL initialised.
fn world_size(inits: &InitLines) -> Option<u32> {
    inits
        .lines
        .iter()
        .filter_map(|l| l.nranks)
        .max()
        .map(|n| n as u32)
}

/// One failed worker as torchrun's ChildFailedError summary names it.
struct FailedWorker {
    host: Sym,
    pid: Option<u32>,
    rank: u32,
    local_rank: Option<u32>,
}

/// The summary ties a worker's host, pid, rank and local rank together: the
/// only place that does for a rank that died before NCCL said who it was.
fn failure_summaries(job: &Job) -> Vec<FailedWorker> {
    super::deaths::child_failed_blocks(job)
        .into_iter()
        .filter_map(|d| {
            let local_rank = d
                .evidence
                .iter()
                .find_map(|&i| job.events[i].int("failed_local_rank"))
                .and_then(|l| u32::try_from(l).ok());
            Some(FailedWorker {
                host: Sym::new(&d.host?),
                pid: d.pid,
                rank: d.rank?,
                local_rank,
            })
        })
        .collect()
}

/// Each host's failed workers by local rank, as its agent reported them
/// (`failed (exitcode: -6) local_rank: 6 (pid: …)`, the ChildFailedError
/// summary).
fn failed_locals(job: &Job, summaries: &[FailedWorker]) -> BTreeMap<Sym, BTreeSet<u32>> {
    let mut out: BTreeMap<Sym, BTreeSet<u32>> = BTreeMap::new();
    for s in summaries {
        if let Some(local) = s.local_rank {
            out.entry(s.host.clone()).or_default().insert(local);
        }
    }
    for (_, ev) in job.events_where(|k| k == EventKind::WorkerFailed) {
        let local = ev
            .int("worker_local_rank")
            .and_then(|l| u32::try_from(l).ok());
        if let (Some(host), Some(local)) = (&ev.who.host, local) {
            out.entry(host.clone()).or_default().insert(local);
        }
    }
    out
}

/// (host, pid) → global rank, from init lines of world-sized communicators and
/// from lines that carry both a rank tag and NCCL's host:pid.
fn pid_ranks(job: &Job, inits: &InitLines) -> BTreeMap<HostPid, u32> {
    let mut map = BTreeMap::new();
    let mut known = KnownKey::default();
    for ev in &job.events {
        let (Some(host), Some(pid)) = (ev.who.host.as_ref(), ev.who.pid) else {
            continue;
        };
        if known.is(host, pid) {
            continue;
        }
        let rank = if ev.kind == EventKind::NcclCommInit {
            let world = ev.int("nranks").map(|n| n as u32) == job.world_size;
            ev.int("rank").filter(|_| world).map(|r| r as u32)
        } else {
            ev.who.rank
        };
        if let Some(rank) = rank {
            map.entry((host.clone(), pid)).or_insert(rank);
            known.set(host, pid);
        }
    }
    for (key, rank) in tree_ranks(job, inits) {
        map.entry(key).or_insert(rank);
    }
    for (key, rank) in channel_ranks(job, inits, &map) {
        map.entry(key).or_insert(rank);
    }
    map
}

/// (host, pid) → rank from NCCL's channel lines, for processes no other
/// line placed: a process prints its own rank first on its send side (and
/// on 2.5–2.11's untagged P2P / SHM lines, which send setup prints) and
/// second on a `[receive]` line (transport/net.cc, p2p.cc, shm.cc of every
/// release). The rank whose init never completed (nccl#1235: a proxy's CUDA
/// allocation failing) may leave nothing else. As for trees, a process
/// whose lines name several ranks of world-sized communicators gives none.
fn channel_ranks(
    job: &Job,
    inits: &InitLines,
    known: &BTreeMap<HostPid, u32>,
) -> BTreeMap<HostPid, u32> {
    let mut seen: BTreeMap<HostPid, BTreeSet<u32>> = BTreeMap::new();
    // A process's lines come together: decide once per run of them.
    let mut last: Option<(&Sym, u32, bool)> = None;
    for (idx, ev) in job.events.iter().enumerate() {
        if ev.kind != EventKind::NcclChannel {
            continue;
        }
        let (Some(host), Some(pid)) = (ev.who.host.as_ref(), ev.who.pid) else {
            continue;
        };
        let placed = match last {
            Some((h, p, placed)) if h == host && p == pid => placed,
            _ => known.contains_key(&(host.clone(), pid)),
        };
        last = Some((host, pid, placed));
        if placed {
            continue;
        }
        let nranks = inits.comm_nranks(job, idx);
        if nranks.is_some() && nranks != job.world_size.map(i64::from) {
            continue;
        }
        let own = match ev.text_field("dir") {
            Some("receive") => ev.int("dst"),
            _ => ev.int("src"),
        };
        if let Some(rank) = own.and_then(|r| u32::try_from(r).ok()) {
            seen.entry((host.clone(), pid)).or_default().insert(rank);
        }
    }
    seen.into_iter()
        .filter(|(_, ranks)| ranks.len() == 1)
        .filter_map(|(key, mut ranks)| Some((key, ranks.pop_first()?)))
        .collect()
}

/// (host, pid) → rank from NCCL's `Trees` lines, which every rank prints
/// for every communicator before connecting it: the only line naming a
/// rank whose init failed on NCCL < 2.18.3 (no init line yet). A process
/// whose lines name different ranks (several communicators, none known to
/// be the world's) gives none.
fn tree_ranks(job: &Job, inits: &InitLines) -> BTreeMap<HostPid, u32> {
    let mut seen: BTreeMap<HostPid, BTreeSet<u32>> = BTreeMap::new();
    for (idx, ev) in job.events.iter().enumerate() {
        if ev.kind != EventKind::NcclTrees {
            continue;
        }
        let (Some(host), Some(pid)) = (ev.who.host.as_ref(), ev.who.pid) else {
            continue;
        };
        let nranks = inits.comm_nranks(job, idx);
        if nranks.is_some() && nranks != job.world_size.map(i64::from) {
            continue;
        }
        if let Some(rank) = super::trees::tree_rank(ev.text_field("trees").unwrap_or("")) {
            seen.entry((host.clone(), pid)).or_default().insert(rank);
        }
    }
    // A process driving several GPUs (nccl-tests' `-g`, ncclCommInitAll)
    // is several ranks: its lines name each.
    seen.into_iter()
        .filter(|(_, ranks)| ranks.len() == 1)
        .filter_map(|(key, mut ranks)| Some((key, ranks.pop_first()?)))
        .collect()
}

/// (host, local rank) → global rank: from NCCL's layout line (2.21+) and from
/// lines that carry both a local-rank and a rank tag (`[default3]:[rank11]:`).
fn local_ranks(
    job: &Job,
    inits: &InitLines,
    by_pid: &BTreeMap<HostPid, u32>,
) -> BTreeMap<HostPid, u32> {
    let mut map = BTreeMap::new();
    let mut known = KnownKey::default();
    let mut init = InitCursor::new(&inits.lines);
    for (idx, ev) in job.events.iter().enumerate() {
        let Some(host) = ev.who.host.as_ref() else {
            continue;
        };
        let layout = init.at(idx).filter(|l| l.layout);
        let pair = if let Some(layout) = layout {
            let world = layout.nranks.map(|n| n as u32) == job.world_size;
            let rank = ev
                .who
                .pid
                .and_then(|p| by_pid.get(&(host.clone(), p)).copied());
            ev.int("local_rank")
                .zip(rank)
                .filter(|_| world)
                .map(|(l, r)| (l as u32, r))
        } else {
            ev.who.local_rank.zip(ev.who.rank)
        };
        if let Some((local, rank)) = pair {
            if known.is(host, local) {
                continue;
            }
            map.entry((host.clone(), local)).or_insert(rank);
            known.set(host, local);
        }
    }
    map
}

/// The last key a map of first values was given: consecutive events mostly
/// come from one process, and once a key holds a value, later ones for it
/// change nothing (a lookup per event cost a tenth of a second at 16k).
#[derive(Default)]
struct KnownKey {
    last: Option<(Sym, u32)>,
}

impl KnownKey {
    fn is(&self, host: &Sym, n: u32) -> bool {
        self.last
            .as_ref()
            .is_some_and(|(h, m)| *m == n && h == host)
    }

    fn set(&mut self, host: &Sym, n: u32) {
        if !self.is(host, n) {
            self.last = Some((host.clone(), n));
        }
    }
}

/// torchrun numbers ranks `node_rank × nproc_per_node + local_rank`: where
/// every known (local rank, rank) pair of a host has the same offset, a
/// worker of that host known only by its local rank (a log folder, a
/// `[default7]:` prefix) has rank offset + local rank.
fn resolve_by_host_offset(job: &mut Job, by_local: &BTreeMap<HostPid, u32>) {
    let single = host_offsets(by_local, &one_agent_hosts(job));
    for ev in &mut job.events {
        if ev.who.rank.is_some() {
            continue;
        }
        let (Some(host), Some(local)) = (ev.who.host.as_deref(), ev.who.local_rank) else {
            continue;
        };
        if let Some(&base) = single.get(host) {
            ev.who.rank = u32::try_from(base + i64::from(local)).ok();
        }
    }
    // A worker's own log folder (torchrun `attempt_0/3/`) names its rank
    // too, even when none of its lines was recognised: the worker existed
    // and wrote something.
    for f in &mut job.files {
        let h = &mut f.hints;
        if h.rank.is_some() || h.process_dir.is_none() {
            continue;
        }
        if let (Some(host), Some(local)) = (h.host.as_deref(), h.local_rank)
            && let Some(&base) = single.get(host)
        {
            h.rank = u32::try_from(base + i64::from(local)).ok();
        }
    }
}

/// Each host's rank − local rank, where every known pair of the host agrees
/// on it. One pair alone could be a coincidence of a round-robin layout,
/// unless the host ran one torchrun agent (`one_agent_hosts`), whose
/// workers are numbered from one base.
pub(super) fn host_offsets(
    by_local: &BTreeMap<HostPid, u32>,
    one_agent: &BTreeSet<String>,
) -> BTreeMap<String, i64> {
    // (pairs seen, offsets)
    let mut offsets: BTreeMap<&str, (usize, BTreeSet<i64>)> = BTreeMap::new();
    for ((host, local), &rank) in by_local {
        let e = offsets.entry(host).or_default();
        e.0 += 1;
        e.1.insert(i64::from(rank) - i64::from(*local));
    }
    offsets
        .into_iter()
        .filter(|(h, (n, o))| (*n >= 2 || one_agent.contains(*h)) && o.len() == 1)
        .map(|(h, (_, o))| (h, o))
        .filter_map(|(h, o)| Some((h.to_string(), *o.first()?)))
        .collect()
}

/// Hosts whose workers' torchrun log folders (`…/attempt_0/3/`) all sit in
/// one agent's attempt folder: that agent numbered every worker of the host
/// `base + local rank`, so one known rank gives the base.
pub(super) fn one_agent_hosts(job: &Job) -> BTreeSet<String> {
    let mut agents: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for f in &job.files {
        let h = &f.hints;
        if let (Some(host), Some(dir)) = (h.host.as_deref(), h.process_dir.as_deref()) {
            let agent = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
            agents.entry(host).or_default().insert(agent);
        }
    }
    agents
        .into_iter()
        .filter(|(_, folders)| folders.len() == 1)
        .map(|(host, _)| host.to_string())
        .collect()
}

/// Slurm task ids are ranks when there is one task per rank: as many distinct
/// tasks as the world has ranks (or, without NCCL init lines, no other rank info).
/// Under `srun --ntasks-per-node=1 torchrun …` a task is a host's agent, and
/// the lines it labels name their own ranks: `2: [rank17]:…`.
fn tasks_are_ranks(job: &Job) -> bool {
    let tasks: BTreeSet<u32> = job.events.iter().filter_map(|e| e.who.task).collect();
    if tasks.is_empty() {
        return false;
    }
    if super::rank_index::labels_name_other_ranks(job)
        || super::rank_index::labels_hold_workers(job)
    {
        return false;
    }
    match job.world_size {
        Some(n) => tasks.len() as u32 == n || tasks.iter().max().is_some_and(|&m| m + 1 == n),
        None => true,
    }
}

/// The ranks a group of files names, the (host, pid) processes it holds,
/// and the launcher prefixes (`[default3]:`, `3:`) its lines carry.
type FileGroup<'a> = (BTreeSet<u32>, BTreeSet<(&'a str, u32)>, BTreeSet<u32>);

/// A file (or torchrun per-worker folder) whose resolved lines all name one
/// rank, and whose NCCL lines all come from one process, gives that rank to
/// its remaining lines.
fn resolve_by_file(job: &mut Job) {
    // Files group by their worker folder (or stand alone): one small number
    // per file, so the events are grouped without a key string each.
    let mut group_ids: BTreeMap<&str, usize> = BTreeMap::new();
    let group_of_file: Vec<usize> = job
        .files
        .iter()
        .map(|f| {
            let key = f.hints.process_dir.as_deref().unwrap_or(&f.path);
            let next = group_ids.len();
            *group_ids.entry(key).or_insert(next)
        })
        .collect();
    let mut groups: Vec<FileGroup<'_>> = vec![Default::default(); group_ids.len()];
    for ev in &job.events {
        let Some(&g) = group_of_file.get(ev.origin.file.0 as usize) else {
            continue;
        };
        let (ranks, procs, prefixes) = &mut groups[g];
        if let Some(r) = ev.who.rank {
            ranks.insert(r);
        }
        if let (Some(h), Some(p)) = (ev.who.host.as_deref(), ev.who.pid) {
            procs.insert((h, p));
        }
        if let Some(p) = ev.who.local_rank.or(ev.who.task) {
            prefixes.insert(p);
        }
    }
    // A file whose lines carry several workers' prefixes is a launcher's
    // merged console, however few of its lines were placed.
    let single: Vec<Option<u32>> = groups
        .into_iter()
        .map(|(ranks, procs, prefixes)| {
            (ranks.len() == 1 && procs.len() <= 1 && prefixes.len() <= 1)
                .then(|| ranks.first().copied())
                .flatten()
        })
        .collect();
    let rank_of_file: Vec<Option<u32>> = group_of_file.iter().map(|&g| single[g]).collect();
    for (file, rank) in job.files.iter_mut().zip(&rank_of_file) {
        file.multiplexed = rank.is_none();
    }
    for ev in &mut job.events {
        // A trainer's own progress lines (a checkpoint save) in a console
        // whose only prefixed lines are one rank's errors are most often
        // rank 0's, which logs alone: only a worker's own folder gives them.
        let app_line = ev.kind == EventKind::MainProcessWork
            && job
                .files
                .get(ev.origin.file.0 as usize)
                .is_none_or(|f| f.hints.process_dir.is_none());
        if ev.who.rank.is_none() && !app_line {
            ev.who.rank = rank_of_file
                .get(ev.origin.file.0 as usize)
                .copied()
                .flatten();
        }
    }
}

/// Last resort: a rank inside the default group's message prefix (`[PG 0 …
/// Rank 3]`, or the work-level `[Rank 3]`, which PyTorch prints for the
/// first group created: the default one) is the global rank.
fn resolve_by_default_group_rank(job: &mut Job) {
    for ev in &mut job.events {
        if ev.who.rank.is_some() {
            continue;
        }
        let pg_rank = ev
            .int("pg_rank")
            .filter(|_| ev.text_field("pg") == Some("0"));
        ev.who.rank = pg_rank
            .or_else(|| ev.int("rank_in_pg"))
            .and_then(|r| u32::try_from(r).ok());
    }
}

fn build_rank_infos(
    job: &mut Job,
    inits: &InitLines,
    by_pid: &BTreeMap<HostPid, u32>,
    by_local: &BTreeMap<HostPid, u32>,
) {
    let mut ranks: BTreeMap<u32, RankInfo> = BTreeMap::new();
    for r in job.world_size.map(|n| 0..n).into_iter().flatten() {
        info_of(&mut ranks, r);
    }
    for ((host, pid), &rank) in by_pid {
        let info = info_of(&mut ranks, rank);
        info.host.get_or_insert_with(|| host.to_string());
        info.pid.get_or_insert(*pid);
    }
    for ((host, local), &rank) in by_local {
        let info = info_of(&mut ranks, rank);
        info.host.get_or_insert_with(|| host.to_string());
        info.local_rank.get_or_insert(*local);
    }
    for f in job.files.iter().filter(|f| f.lines > 0) {
        if let (Some(rank), Some(host)) = (f.hints.rank, &f.hints.host) {
            let info = info_of(&mut ranks, rank);
            info.host.get_or_insert_with(|| host.clone());
            info.local_rank = info.local_rank.or(f.hints.local_rank);
        }
    }
    // Events come in runs of one process: once a rank's host and local rank
    // are known, only its init lines can add to it (a map lookup per event
    // was a tenth of the rank resolution at 16k ranks).
    let mut complete: Option<u32> = None;
    let mut inits = InitCursor::new(&inits.lines);
    for (idx, ev) in job.events.iter().enumerate() {
        let Some(rank) = ev.who.rank else { continue };
        let init = inits.at(idx);
        if complete == Some(rank) && init.is_none() {
            continue;
        }
        let info = info_of(&mut ranks, rank);
        if info.host.is_none() {
            info.host = ev.who.host.as_deref().map(str::to_string);
        }
        if info.local_rank.is_none() {
            info.local_rank = ev.who.local_rank;
        }
        let world_init = init.filter(|l| l.nranks.map(|n| n as u32) == job.world_size);
        if let Some(init) = world_init {
            if info.gpu_bus_id.is_none() {
                info.gpu_bus_id = ev.text_field("bus_id").map(str::to_string);
            }
            if info.cuda_dev.is_none() {
                info.cuda_dev = ev.int("cuda_dev").map(|d| d as u32);
            }
            if init.layout {
                info.local_rank = ev.int("local_rank").map(|l| l as u32).or(info.local_rank);
            }
        }
        complete = (info.host.is_some() && info.local_rank.is_some()).then_some(rank);
    }
    job.ranks = ranks;
}

/// `srun: error: node012: tasks 0-3: Aborted` names the node each task ran
/// on: where tasks are ranks, the host of ranks no other line placed
/// (NCCL_DEBUG=WARN jobs print little else that does).
fn place_tasks_srun_reported(job: &mut Job) {
    let mut placed: Vec<(u32, String)> = Vec::new();
    for (_, ev) in job.events_where(|k| k == EventKind::TaskExited) {
        let (Some(host), Some(tasks)) = (ev.text_field("hosts"), ev.text_field("tasks")) else {
            continue;
        };
        if host.contains(['[', ',']) {
            continue;
        }
        for task in super::deaths::expand_ranges(tasks) {
            placed.push((task, host.to_string()));
        }
    }
    for (rank, host) in placed {
        if job.world_size.is_some_and(|n| rank >= n) {
            continue;
        }
        info_of(&mut job.ranks, rank).host.get_or_insert(host);
    }
}

/// A rank's entry, made on first use.
fn info_of(ranks: &mut BTreeMap<u32, RankInfo>, rank: u32) -> &mut RankInfo {
    ranks.entry(rank).or_insert_with(|| RankInfo {
        rank,
        ..Default::default()
    })
}
