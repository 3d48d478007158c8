//! Work the main process does alone while the others wait: preprocessing
//! behind `main_process_first`, the NCCL unique id it has yet to publish, a
//! checkpoint it is still saving. The rank the others wait for is rank 0, or
//! the rank whose own line says it was saving.

use std::collections::BTreeSet;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::TRACEBACK_LINES;
use crate::model::{CauseKind, EventKind};

use super::Ctx;
use super::application::{name_the_hung_collective, on_the_ranks};

/// Ranks that gave up waiting for the main process: in the store, for the
/// NCCL unique id the group's rank 0 publishes once it creates the
/// communicator or for a key a timed-out wait does not name (weaker: the
/// main process sets torch's own, another rank may set others), or at the barrier of a helper that lets the main process
/// work first (`main_process_first`: dataset preprocessing, tokenization).
/// Rank 0 was busy elsewhere; where its side of the store went away instead
/// of timing out, it more likely died. A death of rank 0 of its own is the
/// process rule's to explain.
pub(super) fn awaited_main_process(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let waits: Vec<(usize, &crate::model::Event)> = job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind,
                EventKind::UniqueIdWait | EventKind::MainProcessWait | EventKind::StoreWait
            )
                // A subgroup's rank 0 is some other global rank.
                && e.int("root").is_none_or(|root| root == 0)
                && e.who.rank != Some(0)
        })
        .filter(|&(idx, _)| !failed_on_its_own(ctx, idx) && !releasing(ctx, idx))
        .collect();
    // Rank 0 at the barrier or in a collective of its own was not elsewhere;
    // nor was the main process whose traceback leaves the helper's body.
    let releases = job
        .events_where(|k| k == EventKind::MainProcessWait)
        .any(|(idx, _)| releasing(ctx, idx));
    let zero_arrived = releases
        || job.events.iter().any(|e| {
            e.who.rank == Some(0)
                && matches!(
                    e.kind,
                    EventKind::MainProcessWait
                        | EventKind::WatchdogTimeout
                        | EventKind::WatchdogException
                        | EventKind::NcclErrorReport
                        | EventKind::CommAborted
                )
        });
    if waits.is_empty() || zero_arrived || super::culprit_deaths(ctx).by_rank.contains_key(&0) {
        return None;
    }
    let store_lost = waits.iter().any(|(_, e)| {
        e.text_field("error")
            .is_some_and(|error| ctx.kb.store_connection_lost(error))
    });
    let mut h = Hypothesis::new(if store_lost {
        CauseKind::ProcessCrash
    } else {
        CauseKind::RankStalled
    });
    for &(idx, ev) in waits.iter().take(4) {
        let (weight, why) = match (ev.kind, store_lost) {
            // The key is not named: the main process sets those of torch's
            // set-up and barriers, but another rank may be the one awaited.
            (EventKind::StoreWait, _) => (
                0.4,
                "a rank's wait for a key in the c10d store timed out: the rank that was to set it, in torch's set-up and barriers the main process (rank 0), had not arrived".to_string(),
            ),
            (EventKind::MainProcessWait, _) => (
                0.5,
                "a rank waited at main_process_first's barrier for the main process (rank 0) to finish its work alone".to_string(),
            ),
            (_, false) => (
                0.6,
                "a rank timed out waiting for rank 0 to publish the NCCL unique id: rank 0 had not reached the communicator's set-up".to_string(),
            ),
            (_, true) => (
                0.45,
                "a rank lost the store connection while waiting for rank 0's NCCL unique id: rank 0's side went away".to_string(),
            ),
        };
        h.support(Source::Torch, weight, Some(idx), why);
    }
    let zero = BTreeSet::from([0]);
    on_the_ranks(job, &mut h, &zero);
    h.ranks = zero;
    h.value("rank", "0");
    h.value(
        "who",
        format!(
            "Rank 0{}",
            h.host
                .as_ref()
                .map_or(String::new(), |host| format!(" on {host}"))
        ),
    );
    h.value(
        "reason",
        "the others' wait for it broke off: its store went away",
    );
    let all_are = |kind: EventKind| waits.iter().all(|(_, e)| e.kind == kind);
    h.value(
        "op",
        if all_are(EventKind::MainProcessWait) {
            "the barrier of main_process_first"
        } else if all_are(EventKind::StoreWait) {
            "a wait in the c10d store"
        } else {
            "the NCCL communicator set-up"
        },
    );
    Some(h)
}

/// A `main_process_first` frame whose next frame is contextlib's
/// `__exit__`: the helper's closing barrier, which only the main process
/// calls once its work is done (the others call the opening one, under
/// `__enter__`). That traceback is the main process's, not a waiter's.
fn releasing(ctx: &Ctx<'_>, idx: usize) -> bool {
    ctx.job
        .events_below(idx, 3)
        .map(|(_, e)| e)
        .find(|e| e.kind == EventKind::ContextFrame)
        .is_some_and(|e| e.text_field("function") == Some("__exit__"))
}

/// A wait whose traceback ends in an NCCL error of the rank's own (a CUDA
/// call failed, an internal error, invalid usage): the barrier or set-up
/// failed under it, it was not waiting for anyone.
fn failed_on_its_own(ctx: &Ctx<'_>, idx: usize) -> bool {
    let ending = ctx
        .job
        .events_below(idx, TRACEBACK_LINES)
        .map(|(_, e)| e)
        .find(|e| {
            matches!(
                e.kind,
                EventKind::PythonException | EventKind::NcclErrorReport
            )
        });
    ending.is_some_and(|e| {
        e.kind == EventKind::NcclErrorReport
            && e.text_field("error")
                .is_some_and(|error| ctx.kb.nccl_error_is_own(error))
    })
}

/// How long before the hung collective began a save may have started and
/// still be running, and how far after (clocks of two processes).
const SAVE_BEFORE_S: i64 = 900;
const SAVE_AFTER_S: i64 = 120;
/// Where no stamps date them: how many lines before the first timeout of
/// the hung collective in the same file the work's line may stand (what the
/// work prints as it goes, nothing of the training after it).
const WORK_LINES_BEFORE: u64 = 8;

/// A rank that began work the main process does alone (saving a
/// checkpoint, evaluating a detection metric) as the others entered the
/// hung collective, and did not time out in it itself: it was still at it
/// (a large model's rank-0 save, a COCO evaluation of a large set, can
/// outlast the timeout). A work line no prefix ties to a rank is rank 0's:
/// trainers log from rank 0. Only work whose time places it at the
/// collective's start counts; without stamps, only work printed just before
/// the first timeout in the same file.
pub(super) fn working_while_others_wait(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let seq = hang.seq?;
    let timeouts: Vec<(usize, &crate::model::Event)> = ctx
        .job
        .events_where(|k| k == EventKind::WatchdogTimeout)
        .filter(|(_, e)| e.int("seq") == Some(seq))
        .collect();
    // When the hung collective began: a timeout's stamp less the time it ran.
    let began = timeouts
        .iter()
        .filter_map(|(idx, e)| {
            let ran = e.int("elapsed_ms").or(e.int("timeout_ms"))?;
            Some(ctx.timeline.time_of(*idx)? - chrono::Duration::milliseconds(ran))
        })
        .min();
    let at_the_start =
        |idx: usize, work: &crate::model::Event| match (began, ctx.timeline.time_of(idx)) {
            (Some(began), Some(t)) => {
                let lead = (began - t).num_seconds();
                (-SAVE_AFTER_S..=SAVE_BEFORE_S).contains(&lead)
            }
            _ => timeouts.iter().any(|(_, timeout)| {
                timeout.origin.file == work.origin.file
                    && (work.origin.line + 1..=work.origin.line + WORK_LINES_BEFORE)
                        .contains(&timeout.origin.line)
            }),
        };
    let (idx, ev) = ctx
        .job
        .events_where(|k| k == EventKind::MainProcessWork)
        .filter(|&(idx, ev)| at_the_start(idx, ev))
        .last()?;
    let worker = ev.who.rank.unwrap_or(0);
    if hang.timed_out.contains(&worker) {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    let ranks = BTreeSet::from([worker]);
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.ranks = ranks;
    name_the_hung_collective(&mut h, hang);
    let (doing, still) = match ev.text_field("work") {
        Some("evaluation") => ("evaluating (COCO metrics) alone", "still evaluating"),
        _ => ("saving a checkpoint", "still saving"),
    };
    h.value(
        "detail",
        format!("It had started {doing} as the others entered it."),
    );
    h.support(
        Source::Pattern,
        0.55,
        Some(idx),
        format!("rank {worker} began {doing} as the others entered collective #{seq}, and never timed out in it: it was {still}"),
    );
    Some(h)
}
