//! A host stopped under the job: its torchrun agent alone received a death
//! signal (`Received Signals.SIGTERM death signal, shutting down workers`)
//! — a spot VM reclaimed, a node drained or powered down — while the other
//! hosts' agents did not, and before any failure elsewhere. Its workers
//! died first, stopped from outside; the other ranks' errors toward it
//! (connections closed, IB retries run out) came after. Where every
//! host's agent was signalled, the job as a whole was stopped, which
//! `stops` reads.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDateTime;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::select::is_failure;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventIdx, EventKind, rank_ranges};

use super::Ctx;

pub(super) fn host_stopped_under_the_job(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let agents = agent_signals(ctx);
    let signalled: BTreeMap<&String, (NaiveDateTime, EventIdx)> = agents
        .iter()
        .filter_map(|(h, s)| Some((h, (*s)?)))
        .collect();
    // Hosts whose agents logged nothing still ran ranks: the other hosts.
    let hosts: BTreeSet<String> = ctx
        .job
        .ranks
        .keys()
        .filter_map(|&r| ctx.job.short_host_of_rank(r).map(str::to_string))
        .chain(agents.keys().cloned())
        .collect();
    if signalled.is_empty() || signalled.len() == hosts.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (host, (at, idx)) in signalled {
        if failed_elsewhere_before(ctx, host, at) {
            continue;
        }
        let ranks: Vec<u32> = ctx.job.ranks_on_host(host).into_iter().collect();
        if ranks.is_empty() {
            continue;
        }
        let mut h = Hypothesis::new(CauseKind::ProcessCrash);
        h.host = Some(host.clone());
        h.ranks.extend(&ranks);
        h.value(
            "who",
            format!("The workers of ranks {} on {host}", rank_ranges(&ranks)),
        );
        h.value("reason", ctx.kb.stopped_reason.clone());
        h.support(
            Source::Launcher,
            0.85,
            Some(idx),
            "this host's launcher alone was signalled, before any failure elsewhere: the host was stopped under the job",
        );
        out.push(h);
    }
    out
}

/// Every host whose torchrun agent logged, with its first stamped death
/// signal where it got one.
fn agent_signals(ctx: &Ctx<'_>) -> BTreeMap<String, Option<(NaiveDateTime, EventIdx)>> {
    let mut out: BTreeMap<String, Option<(NaiveDateTime, EventIdx)>> = BTreeMap::new();
    for (i, e) in ctx.job.events_where(|k| k == EventKind::ElasticAgent) {
        let Some(host) = e.who.host.as_deref().map(short_host_of) else {
            continue;
        };
        let first = out.entry(host).or_default();
        let at = ctx
            .timeline
            .time_of(i)
            .filter(|_| e.text_field("signal").is_some());
        if let Some(at) = at
            && first.is_none_or(|(t, _)| at < t)
        {
            *first = Some((at, i));
        }
    }
    out
}

/// A stamped failure on another host at or before `at`.
fn failed_elsewhere_before(ctx: &Ctx<'_>, host: &str, at: NaiveDateTime) -> bool {
    ctx.job.events.iter().enumerate().any(|(i, e)| {
        is_failure(e, false)
            && e.who.host.as_deref().map(short_host_of).as_deref() != Some(host)
            && ctx.timeline.time_of(i).is_some_and(|t| t <= at)
    })
}
