//! When each process ends, and what its launcher does about it.
//!
//! A rank's fate gives its own end (an abort after the watchdog, an
//! exception, a signal) or none (silent, blocked). Under torchrun, the
//! agent notices the first failure of its host within its monitor interval
//! and sends SIGTERM to the workers still running; those lines are cut
//! there. What is left at the job's end (cancel, time limit) is killed then.

use super::clock::{MIN, MS, SEC, Us};
use super::plan::Plan;
use super::rng::Rng;
use super::story::{End, Fate, Story};

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    pub fn failed(self) -> bool {
        self != Exit::Code(0)
    }

    /// torchrun's `exitcode` (negative for signals).
    pub fn code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => -s,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RankRun {
    /// When and how it ended (None: still running when the logs were taken).
    pub end: Option<(Us, Exit)>,
    /// Nothing it writes after this survives.
    pub cut: Option<Us>,
    /// Its launcher (or the scheduler) sent it SIGTERM.
    pub terminated: bool,
}

/// One host's workers and agent.
#[derive(Debug, Clone)]
pub struct HostRun {
    pub ranks: Vec<RankRun>,
    /// When the agent noticed the first failure.
    pub notice: Option<Us>,
    /// When the agent itself got SIGTERM (cancel, time limit).
    pub death_signal: Option<Us>,
}

/// When the watchdog of `rank` fires on a timed-out collective.
pub fn watchdog_fires(plan: &Plan, story: &Story, rank: u32) -> Us {
    let mut r = Rng::derive(plan.seed, "watchdog", &[u64::from(rank)]);
    story.hang_at + plan.times.timeout + r.range(30, 1_900) * MS
}

/// How long the watchdog and the abort take after an error shows.
pub fn abort_delay(plan: &Plan, rank: u32) -> Us {
    let mut r = Rng::derive(plan.seed, "abort", &[u64::from(rank)]);
    r.range(150, 1_800) * MS
}

/// The end a rank's fate brings by itself.
pub fn natural_end(plan: &Plan, story: &Story, rank: u32) -> Option<(Us, Exit)> {
    let delay = abort_delay(plan, rank);
    match story.fate(rank) {
        Fate::Finish => Some((finish_time(plan, story, rank), Exit::Code(0))),
        // The watchdog's lines take up to ~0.4 s; the abort comes after them.
        Fate::Timeout { .. } => Some((
            watchdog_fires(plan, story, rank) + 500 * MS + delay,
            Exit::Signal(6),
        )),
        Fate::NcclError { warns, .. } => {
            let last = warns.iter().map(|w| w.0).max()?;
            Some((last + 2 * delay, Exit::Signal(6)))
        }
        Fate::CudaError { at, .. } => Some((*at + delay, Exit::Signal(6))),
        Fate::Exception { at, .. } | Fate::Mismatch { at, .. } => {
            Some((*at + delay / 4, Exit::Code(1)))
        }
        Fate::InitError { warns, .. } => {
            let last = warns.iter().map(|w| w.0).max()?;
            Some((last + delay, Exit::Code(1)))
        }
        Fate::Signal { at, signal } => Some((*at, Exit::Signal(*signal))),
        Fate::Cancelled | Fate::Silent { .. } | Fate::InitBlocked | Fate::RootFailed { .. } => None,
    }
}

/// Whether the job died of an NCCL error rather than hung: no rank's
/// watchdog fires on the hung collective before its launcher or the
/// scheduler kills it (the ranks an error aborted took every host's workers
/// down first), or a rank the error aborted printed its abort before the
/// first watchdog fired (the ranks it never touched timing out later is
/// the job's end, not its failure).
pub fn died_of_an_error_first(plan: &Plan, story: &Story) -> bool {
    let end = job_end(plan, story);
    let mut first_timeout: Option<Us> = None;
    let mut first_error: Option<Us> = None;
    for h in 0..plan.hosts.len() {
        let first = plan.hosts[h].first_rank;
        let run = host_run(plan, story, h, end);
        for (r, rank) in run.ranks.iter().zip(first..) {
            let written = |at: Us| r.cut.is_none_or(|cut| at < cut);
            let at = match story.fate(rank) {
                Fate::Timeout { .. } => watchdog_fires(plan, story, rank),
                Fate::NcclError { warns, .. } => match warns.iter().map(|w| w.0).max() {
                    Some(last) => last,
                    None => continue,
                },
                _ => continue,
            };
            if !written(at) {
                continue;
            }
            let slot = if matches!(story.fate(rank), Fate::Timeout { .. }) {
                &mut first_timeout
            } else {
                &mut first_error
            };
            *slot = Some(slot.map_or(at, |t| t.min(at)));
        }
    }
    match (first_error, first_timeout) {
        (_, None) => true,
        (Some(e), Some(t)) => e < t,
        (None, Some(_)) => false,
    }
}

/// A healthy rank's last line: after the last step, eval and checkpoint.
pub fn finish_time(plan: &Plan, story: &Story, rank: u32) -> Us {
    let mut r = Rng::derive(plan.seed, "finish", &[u64::from(rank)]);
    story.hang_at + 20 * SEC + r.range(0, 4_000) * MS
}

/// When the scheduler ends the job, if it does.
pub fn job_end(plan: &Plan, story: &Story) -> Option<Us> {
    match story.end {
        End::Cancelled(t) | End::TimeLimit(t) => Some(t),
        End::Exits => {
            let mut r = Rng::derive(plan.seed, "job-end", &[]);
            let last = (0..plan.world)
                .filter_map(|k| natural_end(plan, story, k))
                .map(|e| e.0)
                .max()
                .unwrap_or(story.hang_at);
            let stuck = (0..plan.world).any(|k| natural_end(plan, story, k).is_none());
            stuck.then(|| last + r.range(10 * MIN, 120 * MIN))
        }
    }
}

/// The schedule of one host.
pub fn host_run(plan: &Plan, story: &Story, host: usize, job_end: Option<Us>) -> HostRun {
    let h = &plan.hosts[host];
    let natural: Vec<Option<(Us, Exit)>> = (0..h.local_ranks)
        .map(|l| natural_end(plan, story, h.first_rank + l))
        .collect();
    let mut r = Rng::derive(plan.seed, "agent", &[host as u64]);
    let first_failure = natural
        .iter()
        .flatten()
        .filter(|e| e.1.failed())
        .map(|e| e.0)
        .min()
        .filter(|&t| job_end.is_none_or(|e| t < e));
    let notice = first_failure
        .filter(|_| plan.layout.has_agent())
        .map(|t| t + r.range(100, 5_000) * MS);
    let death_signal = job_end.filter(|_| notice.is_none());
    let kill = notice.or(job_end);
    let ranks = natural
        .iter()
        .map(|n| match (n, kill) {
            (Some(e), Some(k)) if e.0 > k => killed(k, &mut r),
            (None, Some(k)) => killed(k, &mut r),
            (Some(e), _) => RankRun {
                end: Some(*e),
                cut: Some(e.0),
                terminated: false,
            },
            (None, None) => RankRun {
                end: None,
                cut: None,
                terminated: false,
            },
        })
        .collect();
    HostRun {
        ranks,
        notice,
        death_signal,
    }
}

fn killed(at: Us, r: &mut Rng) -> RankRun {
    RankRun {
        end: Some((at + r.range(20, 400) * MS, Exit::Signal(15))),
        cut: Some(at + r.range(1, 15) * MS),
        terminated: true,
    }
}
