//! The per-rank table: where each rank ran and what state it ended in.

use std::collections::BTreeSet;

use crate::model::EventKind;

use super::hang::Hang;
use super::rules::Ctx;
use super::verdict::{RankRow, RankState};

pub fn rows(
    ctx: &Ctx<'_>,
    stuck: &[u32],
    dead: &BTreeSet<u32>,
    erroring: &BTreeSet<u32>,
    with_logs: &BTreeSet<u32>,
    hang: Option<&Hang>,
) -> Vec<RankRow> {
    let job = ctx.job;
    let completed: BTreeSet<u32> = job
        .events
        .iter()
        .filter(|e| {
            (e.kind == EventKind::NcclCommTeardown && e.text_field("what") == Some("Destroy"))
                || e.kind == EventKind::JobCompleted
        })
        .filter_map(|e| e.who.rank)
        .collect();
    let killed: BTreeSet<u32> = job
        .deaths
        .iter()
        .filter(|d| d.stopped_by_launcher)
        .filter_map(|d| d.rank)
        .collect();
    let died_first: BTreeSet<u32> = super::rules::culprit_deaths(ctx)
        .by_rank
        .into_keys()
        .collect();
    let mut all: BTreeSet<u32> = job.all_ranks().into_iter().collect();
    all.extend(job.ranks.keys().copied());
    // A rank the verdict names belongs in the table even where it left no
    // line (rank 0 that the others waited for while it worked alone).
    all.extend(stuck.iter().copied());
    let pg = hang.map_or_else(|| "0".to_string(), |h| h.pg.clone());
    all.into_iter()
        .map(|rank| {
            let info = job.ranks.get(&rank);
            let st = job.pg_states.get(&(pg.clone(), rank));
            // A culprit that died of its own accord is shown crashed; it is
            // listed among the stuck ranks all the same.
            let state = if stuck.contains(&rank) && died_first.contains(&rank) {
                RankState::Crashed
            } else if stuck.contains(&rank) {
                RankState::Stuck
            } else if killed.contains(&rank) && !st.is_some_and(|s| s.timed_out) {
                RankState::Killed
            } else if dead.contains(&rank) && !st.is_some_and(|s| s.timed_out) {
                RankState::Crashed
            } else if st.is_some_and(|s| s.timed_out) {
                RankState::TimedOut
            } else if erroring.contains(&rank) {
                RankState::Error
            } else if hang.is_some_and(|h| h.silent.contains(&rank)) {
                RankState::Silent
            } else if completed.contains(&rank) {
                RankState::Completed
            } else if with_logs.contains(&rank) {
                RankState::Running
            } else {
                RankState::NoLogs
            };
            RankRow {
                rank,
                host: info.and_then(|i| i.host.clone()),
                pid: info.and_then(|i| i.pid),
                gpu_bus_id: info.and_then(|i| i.gpu_bus_id.clone()),
                nics: info
                    .map(|i| i.nics().into_iter().map(|(n, _)| n).collect())
                    .unwrap_or_default(),
                last_enqueued: st.and_then(|s| s.last_enqueued),
                last_completed: st.and_then(|s| s.last_completed),
                state,
            }
        })
        .collect()
}
