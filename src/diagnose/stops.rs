//! How a job was stopped from outside, and whether that stop was its end
//! or a failure's. A user's scancel, the scheduler's time limit or a
//! preemption, and every host's launcher signalled together (a Kubernetes
//! eviction, a queue's preemption: each torchrun agent `Received
//! Signals.SIGTERM death signal`) stop a job however well it ran: where it
//! still trained until then, the stop was its end, and what the stop did
//! (ranks that lost their peers to the SIGTERM) is no fault. Where its
//! training loop had gone quiet long before, the stop ended a hang.

use std::collections::BTreeMap;

use chrono::{NaiveDateTime, TimeDelta};

use crate::model::{CauseKind, Event, EventKind, FileId, Job};

use super::hypothesis::Hypothesis;
use super::rules::Ctx;
use super::select::is_failure;

/// How close to the stop the training loop's last report must be for the
/// job to have been working when it came: this long, or three of its last
/// reporting intervals where those are longer.
const LAST_STEP_WITHIN: TimeDelta = TimeDelta::minutes(15);

/// How close together every host's launcher must be signalled for the
/// signals to be one stop from outside (a pod deletion reaches each node
/// within seconds).
const ONE_STOP_WITHIN: TimeDelta = TimeDelta::seconds(60);

/// A user's scancel (a cancel line that gives no reason of the
/// scheduler's), or every host's launcher signalled at once.
pub(super) fn cancelled_by_a_user(ctx: &Ctx<'_>) -> bool {
    users_cancel(ctx.job) || stopped_from_outside(ctx).is_some()
}

fn users_cancel(job: &Job) -> bool {
    job.events_where(|k| k == EventKind::JobCancelled)
        .any(|(_, e)| e.text_field("reason").is_none())
}

/// Every host whose torchrun agent logged anything got a death signal
/// within [`ONE_STOP_WITHIN`]: the job was stopped from outside. The first
/// signal's time, and each agent's signal line.
struct OutsideStop {
    at: NaiveDateTime,
    lines: BTreeMap<FileId, u64>,
}

fn stopped_from_outside(ctx: &Ctx<'_>) -> Option<OutsideStop> {
    let job = ctx.job;
    let mut agents: BTreeMap<&str, Option<(NaiveDateTime, &Event)>> = BTreeMap::new();
    for (i, e) in job.events_where(|k| k == EventKind::ElasticAgent) {
        let Some(host) = e.who.host.as_deref() else {
            continue;
        };
        let signalled = agents.entry(host).or_default();
        let at = ctx.timeline.time_of(i);
        if let (Some(at), Some(_)) = (at, e.text_field("signal"))
            && signalled.is_none_or(|(t, _)| at < t)
        {
            *signalled = Some((at, e));
        }
    }
    if agents.len() < 2 {
        return None;
    }
    let signals: Vec<(NaiveDateTime, &Event)> = agents.into_values().collect::<Option<_>>()?;
    let first = signals.iter().map(|s| s.0).min()?;
    let last = signals.iter().map(|s| s.0).max()?;
    (last - first <= ONE_STOP_WITHIN).then(|| OutsideStop {
        at: first,
        lines: signals
            .iter()
            .map(|(_, e)| (e.origin.file, e.origin.line))
            .collect(),
    })
}

/// The chosen cause rests only on lines a harmless stop explains (ranks
/// that lost their peers to the SIGTERM): the job had no fault.
pub(super) fn only_the_cancels_doing(ctx: &Ctx<'_>, h: &Hypothesis) -> bool {
    if !cancelled_by_a_user(ctx) && !trained_until_the_time_limit(ctx) {
        return false;
    }
    let stopped = stopped_by_the_scheduler(ctx, true);
    let mut cited = h.support.iter().filter_map(|s| s.event).peekable();
    cited.peek().is_some() && cited.all(|i| stopped(i, &ctx.job.events[i]))
}

/// Where the stop was no failure (a user's scancel, a time limit or a
/// preemption that came while still training, every launcher signalled at
/// once): whether an event came after the stop, so the stop caused it.
/// srun's reports of the tasks it stopped sit below the cancel in the same
/// output; the errors of ranks that lost their peers to the SIGTERM are
/// stamped after it, or, unstamped, sit in a console just above its own
/// launcher's signal with no stamped line between.
pub(super) fn stopped_by_the_scheduler<'c>(
    ctx: &'c Ctx<'_>,
    harmless: bool,
) -> impl Fn(usize, &Event) -> bool + 'c {
    let job = ctx.job;
    let outside = harmless.then(|| stopped_from_outside(ctx)).flatten();
    let (lines, at, first_failure) = if harmless {
        let at = job
            .events_where(|k| k == EventKind::JobCancelled)
            .filter_map(|(i, e)| ctx.timeline.time_of(i).or_else(|| cancelled_at(e)))
            .chain(outside.as_ref().map(|o| o.at))
            .min();
        (job.cancel_lines(), at, first_stamped_failure_by_rank(ctx))
    } else {
        Default::default()
    };
    let just_above = outside
        .map(|o| unstamped_runs_above(ctx, &o.lines))
        .unwrap_or_default();
    let job_first_failure = first_failure.values().min().copied();
    // An unstamped line (NCCL's WARN) is at or after its stamped neighbour;
    // one in a file without stamps (an NCCL_DEBUG_FILE) came when its rank
    // first failed where a stamp says when, else no earlier than the job's
    // first stamped failure.
    move |i, e| {
        let when = ctx
            .timeline
            .at_or_after(i)
            .or_else(|| e.who.rank.and_then(|r| first_failure.get(&r).copied()))
            .or(job_first_failure);
        lines
            .get(&e.origin.file)
            .is_some_and(|&line| e.origin.line > line)
            || just_above
                .get(&e.origin.file)
                .is_some_and(|&(from, to)| (from..to).contains(&e.origin.line))
            || at.is_some_and(|at| when.is_some_and(|t| t >= at))
    }
}

/// Per console holding a launcher's signal line: the lines above it back
/// to the last stamped one (exclusive) — unstamped lines that came no
/// earlier than that stamp and no later than the signal.
fn unstamped_runs_above(
    ctx: &Ctx<'_>,
    signals: &BTreeMap<FileId, u64>,
) -> BTreeMap<FileId, (u64, u64)> {
    let mut last_stamp: BTreeMap<FileId, u64> = BTreeMap::new();
    for (i, e) in ctx.job.events.iter().enumerate() {
        let Some(&signal) = signals.get(&e.origin.file) else {
            continue;
        };
        if e.origin.line < signal && ctx.timeline.time_of(i).is_some() {
            let stamp = last_stamp.entry(e.origin.file).or_default();
            *stamp = (*stamp).max(e.origin.line);
        }
    }
    signals
        .iter()
        .map(|(&file, &signal)| {
            let from = last_stamp.get(&file).map_or(0, |&l| l + 1);
            (file, (from, signal))
        })
        .collect()
}

/// Per rank, the time of its first stamped failure line.
fn first_stamped_failure_by_rank(ctx: &Ctx<'_>) -> BTreeMap<u32, NaiveDateTime> {
    let mut out: BTreeMap<u32, NaiveDateTime> = BTreeMap::new();
    for (i, e) in ctx.job.events.iter().enumerate() {
        if let (Some(rank), Some(t)) = (e.who.rank, ctx.timeline.time_of(i))
            && is_failure(e, false)
        {
            let first = out.entry(rank).or_insert(t);
            *first = (*first).min(t);
        }
    }
    out
}

/// The time slurmstepd printed in its cancel line (`CANCELLED AT …`).
fn cancelled_at(e: &Event) -> Option<NaiveDateTime> {
    let at = e.text_field("at")?;
    NaiveDateTime::parse_from_str(at, "%Y-%m-%dT%H:%M:%S").ok()
}

/// The scheduler cancelled the job for a reason of its own (`DUE TO …`).
pub(super) fn cancelled_for_a_reason(e: &Event) -> bool {
    e.kind == EventKind::JobCancelled && e.text_field("reason").is_some()
}

/// The scheduler stopped the job at its time limit, or took its nodes
/// for another job (`[scheduler]` in grammars/knowledge.toml; a node
/// failure is not one).
pub(super) fn time_limit(ctx: &Ctx<'_>, e: &Event) -> bool {
    e.kind == EventKind::JobCancelled
        && e.text_field("reason")
            .is_some_and(|r| ctx.kb.ends_a_working_job(r))
}

/// A job stopped at its time limit is a failure only where it had stopped
/// working before: a hang the limit ended. Where its training loop still
/// reported steps (or a progress bar moved) shortly before the limit, it
/// simply ran out of time (jobs chained across allocations do so every
/// time).
pub(super) fn trained_until_the_time_limit(ctx: &Ctx<'_>) -> bool {
    let limit = ctx
        .job
        .events_where(|k| k == EventKind::JobCancelled)
        .filter(|(_, e)| time_limit(ctx, e))
        .filter_map(|(_, e)| cancelled_at(e))
        .min();
    limit.is_some_and(|limit| trained_until(ctx, limit) == Some(true))
}

/// A user's stop (scancel, every launcher signalled at once) came long
/// after the training loop's last report: the user stopped a hung job.
pub(super) fn stalled_before_the_stop(ctx: &Ctx<'_>) -> bool {
    users_stop(ctx).is_some_and(|at| trained_until(ctx, at) == Some(false))
}

/// When a user (or every launcher at once) stopped the job.
fn users_stop(ctx: &Ctx<'_>) -> Option<NaiveDateTime> {
    let cancels = ctx
        .job
        .events_where(|k| k == EventKind::JobCancelled)
        .filter(|(_, e)| e.text_field("reason").is_none())
        .filter_map(|(i, e)| ctx.timeline.time_of(i).or_else(|| cancelled_at(e)));
    cancels.chain(stopped_from_outside(ctx).map(|o| o.at)).min()
}

/// In a job stopped out of a hang, the causes that rest only on what the
/// stop did (peers lost to its SIGTERM) explain nothing: they go, and an
/// undecided cause says when the training loop went quiet.
pub(super) fn without_the_stops_doing(ctx: &Ctx<'_>, hyps: Vec<Hypothesis>) -> Vec<Hypothesis> {
    if !stalled_before_the_stop(ctx) {
        return hyps;
    }
    let mut kept: Vec<Hypothesis> = hyps
        .into_iter()
        .filter(|h| h.kind == CauseKind::Unknown || !only_the_cancels_doing(ctx, h))
        .collect();
    if let (Some(stop), Some(last)) = (users_stop(ctx), last_report(ctx)) {
        let mut quiet = Hypothesis::new(CauseKind::Unknown);
        quiet.value(
            "detail",
            format!(
                "The training loop last reported at {}, {} minutes before the job was stopped at {}: the stop ended a hang.",
                ctx.timeline.format(&last),
                (stop - last).num_minutes(),
                ctx.timeline.format(&stop)
            ),
        );
        kept.push(quiet);
    }
    kept
}

/// The training loop's last report (a step, a progress bar).
fn last_report(ctx: &Ctx<'_>) -> Option<NaiveDateTime> {
    ctx.job
        .events_where(|k| matches!(k, EventKind::TrainingStep | EventKind::ProgressBar))
        .filter_map(|(i, _)| ctx.timeline.time_of(i))
        .max()
}

/// Whether the training loop's reports (steps, a progress bar) ran until
/// `stop`: its last one within [`LAST_STEP_WITHIN`] or three of its
/// intervals. `None` where it reported nothing before, or once long
/// before.
fn trained_until(ctx: &Ctx<'_>, stop: NaiveDateTime) -> Option<bool> {
    let mut steps: Vec<NaiveDateTime> = ctx
        .job
        .events_where(|k| matches!(k, EventKind::TrainingStep | EventKind::ProgressBar))
        .filter_map(|(i, _)| ctx.timeline.time_of(i))
        .filter(|&t| t <= stop + TimeDelta::minutes(1))
        .collect();
    steps.sort();
    let &last = steps.last()?;
    let interval = match steps[..] {
        [.., before, last] => last - before,
        _ => TimeDelta::zero(),
    };
    let worked = stop - last <= LAST_STEP_WITHIN.max(interval * 3);
    // One report gives no pace to judge a silence by.
    (worked || steps.len() >= 2).then_some(worked)
}
