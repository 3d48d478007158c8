//! The hung collective, and the ranks that did not get there.
//!
//! Every rank that waits in a collective times out on the same work: the
//! oldest incomplete one. So the (group, sequence number) most ranks timed out
//! on is the hung collective. The ranks the others wait for are those that did
//! not enqueue it (last enqueued below it), or that stayed silent: their logs
//! are there but no watchdog fired, while the others' did.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDateTime;

use crate::model::build::short_host_of;
use crate::model::{EventIdx, EventKind, Job};
use crate::timeline::Timeline;

#[derive(Debug, Clone, Default)]
pub struct Hang {
    pub pg: String,
    pub seq: Option<i64>,
    pub op: Option<String>,
    /// Ranks whose watchdog fired on the hung collective (or any, in its group).
    pub timed_out: BTreeSet<u32>,
    /// Ranks that had not enqueued the collective: rank → last enqueued.
    pub laggards: BTreeMap<u32, i64>,
    /// Ranks with logs but no timeout while the others timed out.
    pub silent: BTreeSet<u32>,
    /// Silent ranks their launcher stopped together with ranks that had
    /// already reported the timeout: cut off before their own watchdog
    /// fired, while some other rank stayed silent on its own.
    pub cut_off: BTreeSet<u32>,
    /// Ranks of the world with no log line at all.
    pub no_logs: BTreeSet<u32>,
    /// Sizes seen per rank at the hung sequence number (numel_in).
    pub sizes: BTreeMap<u32, (Option<String>, Option<i64>)>,
    /// Timeouts whose rank is unknown (a pasted line without prefixes).
    pub anonymous_timeouts: usize,
    pub evidence: Vec<EventIdx>,
}

/// Finds the hung collective; `None` when no watchdog fired.
pub fn find(
    job: &Job,
    timeline: &Timeline,
    dead: &BTreeSet<u32>,
    erroring: &BTreeSet<u32>,
    with_logs: &BTreeSet<u32>,
) -> Option<Hang> {
    let known = (dead, erroring, with_logs);
    let work = hung_work(job, |w| hang_in(job, timeline, known, w))?;
    Some(hang_in(job, timeline, known, work))
}

/// The hang of one (group, sequence number): who timed out, who is behind,
/// who stayed silent.
fn hang_in(
    job: &Job,
    timeline: &Timeline,
    (dead, erroring, with_logs): (&BTreeSet<u32>, &BTreeSet<u32>, &BTreeSet<u32>),
    (pg, seq): Work,
) -> Hang {
    let mut hang = Hang {
        pg: pg.clone(),
        seq,
        ..Hang::default()
    };
    let entered = read_group_states(job, &mut hang);
    let accounted = |rank: &u32| {
        hang.timed_out.contains(rank)
            || entered.contains(rank)
            || dead.contains(rank)
            || erroring.contains(rank)
            || hang.laggards.contains_key(rank)
    };
    let (silent, no_logs) = unaccounted(job, &hang, with_logs, accounted);
    hang.silent = silent;
    hang.no_logs = no_logs;
    set_apart_cut_off(job, timeline, &mut hang);
    hang
}

/// The work the hung group waits on elsewhere: the ranks it waits for
/// (behind, or silent in it) timed out in another group. A data-parallel
/// group of 56 ranks outvotes the 8-rank tensor-parallel group whose
/// collective its missing members are stuck in; the one they wait in came
/// first. Taken where at least half of the awaited ranks name it.
fn upstream_work(job: &Job, hang: &Hang) -> Option<Work> {
    let awaited: BTreeSet<u32> = hang.laggards.keys().chain(&hang.silent).copied().collect();
    let mut votes: BTreeMap<Work, usize> = BTreeMap::new();
    for ((pg, rank), st) in &job.pg_states {
        if *pg != hang.pg && st.timed_out && awaited.contains(rank) {
            *votes.entry((pg.clone(), st.failed_seq)).or_default() += 1;
        }
    }
    let (work, n) = votes
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
    (2 * n >= awaited.len()).then_some(work)
}

/// Reads every rank's state in the hung group: who timed out, who is
/// behind, the op and size each failed in, and the op most name. Returns
/// the ranks whose own status (a dump signal, a Flight Recorder entry)
/// shows the hung work enqueued: they entered it and wait there, reported
/// or not.
fn read_group_states(job: &Job, hang: &mut Hang) -> BTreeSet<u32> {
    let (pg, seq) = (hang.pg.clone(), hang.seq);
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    let mut entered: BTreeSet<u32> = BTreeSet::new();
    for ((p, rank), st) in job
        .pg_states
        .range((pg.clone(), 0)..=(pg.clone(), u32::MAX))
    {
        debug_assert_eq!(p, &pg);
        if st.timed_out {
            hang.timed_out.insert(*rank);
        }
        let behind = match (seq, st.last_enqueued, st.failed_seq) {
            (Some(s), Some(e), _) if e < s => Some(e),
            (Some(s), _, Some(f)) if f < s => Some(f),
            _ => None,
        };
        if let Some(e) = behind {
            hang.laggards.insert(*rank, e);
        }
        if seq.is_some() && st.last_enqueued >= seq {
            entered.insert(*rank);
        }
        if st.failed_seq == seq {
            if let Some(op) = &st.op {
                *ops.entry(op.clone()).or_default() += 1;
            }
            hang.sizes.insert(*rank, (st.op.clone(), st.numel_in));
        }
        hang.evidence.extend(st.evidence.iter().copied());
    }
    for ((p, _), st) in &job.anonymous_pg_states {
        if p == &pg && st.failed_seq == seq {
            if let Some(op) = &st.op {
                *ops.entry(op.clone()).or_default() += 1;
            }
            hang.anonymous_timeouts += usize::from(st.timed_out);
            hang.evidence.extend(st.evidence.iter().copied());
        }
    }
    hang.op = ops
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(op, _)| op);
    entered
}

/// The ranks of the hung group that neither reported, entered, died nor
/// fell behind: (silent with lines of their own, without any line).
fn unaccounted(
    job: &Job,
    hang: &Hang,
    with_logs: &BTreeSet<u32>,
    accounted: impl Fn(&u32) -> bool,
) -> (BTreeSet<u32>, BTreeSet<u32>) {
    // A rank the launcher reports stopped existed even when no line of its
    // own was recognised: if it did not time out, it is silent.
    let stopped: BTreeSet<u32> = job.deaths.iter().filter_map(|d| d.rank).collect();
    let with_logs: BTreeSet<u32> = with_logs.union(&stopped).copied().collect();
    let mut ranks: BTreeSet<u32> = job.all_ranks().into_iter().chain(stopped).collect();
    // Ranks are numbered from 0: with no world size printed, every rank up
    // to the highest seen existed, lines or not (a rank 0 busy saving a
    // checkpoint prints no timeout).
    if job.world_size.is_none()
        && let Some(&max) = ranks.last()
    {
        ranks.extend(0..max);
    }
    // A subgroup's members are not known from its lines: with one rank
    // reporting its timeout, the others seen elsewhere need not belong to it.
    // A Flight Recorder dump lists them.
    if let Some(members) = job.group_members(&hang.pg) {
        ranks = members;
    } else if hang.pg != "0" && hang.timed_out.len() < 2 {
        ranks.clear();
    }
    ranks
        .into_iter()
        .filter(|r| !accounted(r))
        .partition(|r| with_logs.contains(r))
}

/// torchrun stops a host's remaining workers as soon as one of them fails,
/// so on a host whose victims were still reporting the timeout, a silent
/// worker stopped in that same sweep merely had not reported yet. Where
/// another silent rank was not stopped alongside reporters, the cut-off
/// ones are set apart: the stalled rank is among the others.
fn set_apart_cut_off(job: &Job, timeline: &Timeline, hang: &mut Hang) {
    let stops: Vec<Stop> = job
        .deaths
        .iter()
        .filter(|d| d.stopped_by_launcher)
        .filter_map(|d| {
            let rank = d.rank?;
            let host = d.host.as_deref().or(job.short_host_of_rank(rank))?;
            let at = timeline.resolve_on(Some(host), &d.time);
            Some((rank, short_host_of(host), at))
        })
        .collect();
    let mid_report: BTreeSet<&String> = stops
        .iter()
        .filter(|(rank, _, _)| hang.timed_out.contains(rank))
        .map(|(_, host, _)| host)
        .collect();
    let cut: BTreeSet<u32> = stops
        .iter()
        .filter(|(rank, host, _)| hang.silent.contains(rank) && mid_report.contains(host))
        .map(|(rank, _, _)| *rank)
        .collect();
    let cut = if cut.len() == hang.silent.len() {
        // Set apart by the hosts' shares of reporters, then, among the
        // ranks left on the hosts that tie, by how long they were silent.
        let by_share = least_expected_silence(job, hang, &stops, cut.clone());
        let left: BTreeSet<u32> = cut.difference(&by_share).copied().collect();
        let delays = report_delays(job, timeline, hang);
        let mut by_time = silent_no_longer_than_others_took(&delays, &stops, &left);
        if by_time.is_empty() || by_time.len() == left.len() {
            by_time = likelier_waiting(&delays, &stops, &left);
        }
        if by_time.len() < left.len() {
            by_share.union(&by_time).copied().collect()
        } else {
            by_share
        }
    } else {
        cut
    };
    if !cut.is_empty() && cut.len() < hang.silent.len() {
        hang.silent.retain(|r| !cut.contains(r));
        hang.cut_off = cut;
    }
}

/// When every silent rank was stopped alongside reporters, the stalled one
/// is likelier where its silence stands out: on the host whose sweep came
/// when most of its workers had already reported the timeout. An early
/// sweep leaves many waiting ranks silent; a late one leaves only the rank
/// that was not waiting. Returns the ranks to set apart: those on hosts
/// whose share of reporters is below the highest.
fn least_expected_silence(
    job: &Job,
    hang: &Hang,
    stopped: &[Stop],
    cut: BTreeSet<u32>,
) -> BTreeSet<u32> {
    let mut tally: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (rank, host, _) in stopped.iter().filter(|(r, _, _)| cut.contains(r)) {
        tally.entry(host).or_default().1 += 1;
        debug_assert!(hang.silent.contains(rank));
    }
    for &rank in &hang.timed_out {
        let host = job.short_host_of_rank(rank).map(short_host_of);
        if let Some(count) = host.and_then(|h| tally.get_mut(h.as_str())) {
            count.0 += 1;
        }
    }
    // Compared as fractions reported / (reported + silent), cross-multiplied.
    let shares: BTreeMap<&str, (usize, usize)> = tally
        .iter()
        .map(|(h, &(reported, silent))| (*h, (reported, reported + silent)))
        .collect();
    let below = |(r1, n1): (usize, usize), (r2, n2): (usize, usize)| r1 * n2 < r2 * n1;
    let Some(&best) = shares
        .values()
        .reduce(|a, b| if below(*a, *b) { b } else { a })
    else {
        return BTreeSet::new();
    };
    stopped
        .iter()
        .filter(|(rank, host, _)| cut.contains(rank) && below(shares[host.as_str()], best))
        .map(|(rank, _, _)| *rank)
        .collect()
}

/// A rank stopped by its launcher, its host, and when (the job's clock).
type Stop = (u32, String, Option<NaiveDateTime>);

/// When each host's waiting ranks reported the timeout: per host, the first
/// report's time and every report's delay after it.
struct ReportDelays {
    first: BTreeMap<String, NaiveDateTime>,
    delays: Vec<chrono::Duration>,
}

impl ReportDelays {
    /// How long `stop` came after its host's first report.
    fn silence(&self, (_, host, at): &Stop) -> Option<chrono::Duration> {
        Some((*at)? - *self.first.get(host)?)
    }
}

fn report_delays(job: &Job, timeline: &Timeline, hang: &Hang) -> ReportDelays {
    let mut reports: BTreeMap<String, Vec<NaiveDateTime>> = BTreeMap::new();
    for (&(ref pg, rank), st) in &job.pg_states {
        if pg != &hang.pg || !st.timed_out {
            continue;
        }
        let first = st
            .evidence
            .iter()
            .filter(|&&i| job.events[i].kind == EventKind::WatchdogTimeout)
            .filter_map(|&i| timeline.at_or_after(i))
            .min();
        let host = job.short_host_of_rank(rank).map(short_host_of);
        if let (Some(t), Some(host)) = (first, host) {
            reports.entry(host).or_default().push(t);
        }
    }
    let mut out = ReportDelays {
        first: BTreeMap::new(),
        delays: Vec::new(),
    };
    for (host, times) in reports {
        let Some(&first) = times.iter().min() else {
            continue;
        };
        out.delays.extend(times.iter().map(|t| *t - first));
        out.first.insert(host, first);
    }
    out
}

/// Where the hosts' shares of reporters tie, how long each stopped rank had
/// been silent: from its host's first reported timeout to the stop. The
/// watchdogs of the ranks waiting in one collective fire over a spread (they
/// entered it at different times); a stopped rank silent no longer than some
/// reporter took after its own host's first timeout may simply not have
/// fired yet. Returns those; the rank silent longer than every reporter took
/// is the one that was not waiting.
fn silent_no_longer_than_others_took(
    delays: &ReportDelays,
    stops: &[Stop],
    cut: &BTreeSet<u32>,
) -> BTreeSet<u32> {
    let Some(&took) = delays.delays.iter().max() else {
        return BTreeSet::new();
    };
    stops
        .iter()
        .filter(|stop| cut.contains(&stop.0))
        .filter(|stop| delays.silence(stop).is_some_and(|s| s <= took))
        .map(|stop| stop.0)
        .collect()
}

/// How sure the analysis must be that one silent rank is the stalled one
/// before the others are set apart as cut off.
const STALLED_ODDS: f64 = 0.75;

/// Where every candidate's silence falls alike (all within the reporters'
/// spread, or all beyond it), the odds of each being the one that was not
/// waiting, with one such rank: a waiting rank stays silent for `s` with
/// the chance that a reporter took `s` or longer (counted over the reports,
/// one added to each side), so a candidate's odds go as the inverse of its
/// own chance. Where the likeliest reaches [`STALLED_ODDS`], the others are
/// returned; otherwise none.
fn likelier_waiting(delays: &ReportDelays, stops: &[Stop], cut: &BTreeSet<u32>) -> BTreeSet<u32> {
    let n = delays.delays.len() as f64;
    let mut inverse: Vec<(u32, f64)> = Vec::new();
    for stop in stops.iter().filter(|s| cut.contains(&s.0)) {
        let Some(silence) = delays.silence(stop) else {
            return BTreeSet::new();
        };
        let longer = delays.delays.iter().filter(|d| **d >= silence).count() as f64;
        inverse.push((stop.0, (n + 1.0) / (longer + 1.0)));
    }
    let total: f64 = inverse.iter().map(|(_, w)| w).sum();
    let Some(&(likeliest, weight)) = inverse
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    else {
        return BTreeSet::new();
    };
    if inverse.len() < 2 || weight / total < STALLED_ODDS {
        return BTreeSet::new();
    }
    cut.iter().copied().filter(|&r| r != likeliest).collect()
}

/// The (group, seq) most timed-out ranks report, counting for it also the
/// timeouts of the groups that wait on it (see [`upstream_work`]); ties go
/// to the lower group id and sequence number. A group without sequence
/// numbers still counts.
fn hung_work(job: &Job, hang_of: impl Fn(Work) -> Hang) -> Option<Work> {
    let votes = timeout_votes(job);
    let heartbeat = job
        .events
        .iter()
        .any(|e| e.kind == EventKind::HeartbeatStuck);
    if votes.is_empty() && !heartbeat {
        return None;
    }
    let scores = votes_flow_upstream(job, votes, hang_of);
    let best = scores
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(k, _)| k);
    Some(best.unwrap_or_else(|| ("0".into(), None)))
}

/// A (process group, sequence number).
type Work = (String, Option<i64>);

/// Groups are looked at in this many at most, the most voted first: the
/// ones that matter are among them, and each costs a pass over the ranks.
const UPSTREAM_CANDIDATES: usize = 64;

/// Each work's votes, plus those of the works that wait on it, followed
/// upstream as far as it goes.
fn votes_flow_upstream(
    job: &Job,
    votes: BTreeMap<Work, usize>,
    hang_of: impl Fn(Work) -> Hang,
) -> BTreeMap<Work, usize> {
    if votes.len() < 2 {
        return votes;
    }
    let mut ranked: Vec<(&Work, &usize)> = votes.iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let upstream: BTreeMap<&Work, Work> = ranked
        .iter()
        .take(UPSTREAM_CANDIDATES)
        .filter_map(|(w, _)| Some((*w, upstream_work(job, &hang_of((*w).clone()))?)))
        .collect();
    let mut scores = votes.clone();
    for (work, n) in &votes {
        for up in upstream_chain(&upstream, work) {
            *scores.entry(up.clone()).or_default() += n;
        }
    }
    scores
}

/// The works upstream of `work`, nearest first. Groups that each wait on
/// the other (ranks stuck in either, an order the program broke) tell
/// nothing about which came first: a chain that closes on itself is none.
fn upstream_chain<'w>(upstream: &'w BTreeMap<&Work, Work>, work: &'w Work) -> Vec<&'w Work> {
    let mut chain = vec![work];
    while let Some(up) = upstream.get(chain[chain.len() - 1]) {
        if chain.contains(&up) {
            return Vec::new();
        }
        chain.push(up);
    }
    chain.split_off(1)
}

/// Per (group, seq), how many ranks timed out (or failed) in it.
fn timeout_votes(job: &Job) -> BTreeMap<Work, usize> {
    let mut votes: BTreeMap<Work, usize> = BTreeMap::new();
    let anonymous = job.anonymous_pg_states.iter().map(|((pg, _), st)| (pg, st));
    for (pg, st) in job
        .pg_states
        .iter()
        .map(|((pg, _), st)| (pg, st))
        .chain(anonymous)
    {
        if st.timed_out || st.failed_seq.is_some() {
            *votes.entry((pg.clone(), st.failed_seq)).or_default() += 1;
        }
    }
    votes
}

/// Ranks that left at least one log line: a recognised one, or any line in
/// a file that is theirs alone (a torchrun worker's log folder). A rank
/// whose host's launcher log carries its siblings' lines counts too: its
/// output went to that same log, so it was captured and said nothing.
pub fn ranks_with_logs(job: &Job) -> BTreeSet<u32> {
    let own_files = job
        .files
        .iter()
        .filter(|f| f.lines > 0 && f.hints.process_dir.is_some())
        .filter_map(|f| f.hints.rank);
    let captured = hosts_with_merged_worker_logs(job);
    let on_captured_host = job.ranks.values().filter_map(|info| {
        let host = info.host.as_deref()?;
        captured.contains(host).then_some(info.rank)
    });
    job.events
        .iter()
        .filter_map(|e| e.who.rank)
        .chain(own_files)
        .chain(on_captured_host)
        .collect()
}

/// Hosts with a launcher log that merged at least two of their workers'
/// outputs by local rank (torchrun `--tee`, `[default3]:` prefixes).
fn hosts_with_merged_worker_logs(job: &Job) -> BTreeSet<&str> {
    let mut locals: BTreeMap<(&str, u32), BTreeSet<u32>> = BTreeMap::new();
    // Consecutive lines mostly come from one worker: repeats of the last
    // key are skipped (a lookup per line cost tens of milliseconds at 16k).
    let mut last: Option<(&str, u32, u32)> = None;
    for e in &job.events {
        let (Some(host), Some(local)) = (e.who.host.as_deref(), e.who.local_rank) else {
            continue;
        };
        let key = (host, e.origin.file.0, local);
        if last == Some(key) {
            continue;
        }
        last = Some(key);
        let file = job.files.get(key.1 as usize);
        if file.is_some_and(|f| f.multiplexed) {
            locals.entry((host, key.1)).or_default().insert(local);
        }
    }
    locals
        .into_iter()
        .filter(|(_, l)| l.len() >= 2)
        .map(|((host, _), _)| host)
        .collect()
}
