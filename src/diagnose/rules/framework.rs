//! A training framework's own word that its workers fell out of step.
//!
//! fairseq's `all_gather_list` fails to unpickle what the others sent when a
//! worker entered it out of step: the ranks ran different collectives (an
//! uneven epoch, layers dropped differently, an OOM batch skipped on one
//! worker). Which worker is odd the error does not say; a worker that
//! skipped a batch after running out of memory is named where the line
//! carries its rank. TensorFlow's collective ops check the shapes the
//! members of one instance bring, and abort every member's collective with
//! `End of sequence` where one worker's input ran out first.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn workers_out_of_step(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let mut skipped = Vec::new();
    for (idx, ev) in job.events_where(|k| k == EventKind::AppDesync) {
        match ev.text_field("what") {
            Some("all_gather_list") if h.support.len() < CITED => {
                h.support(
                    Source::Pattern,
                    0.6,
                    Some(idx),
                    "fairseq's all_gather_list got data the other workers sent out of step: the workers fell out of sync",
                );
            }
            Some("tf_shape_mismatch") if h.support.len() < CITED => {
                h.support(
                    Source::Pattern,
                    0.6,
                    Some(idx),
                    "TensorFlow found members of one collective instance with different shapes: the workers ran different steps or models",
                );
            }
            Some("input_exhausted") if h.support.len() < CITED => {
                h.support(
                    Source::Pattern,
                    0.45,
                    Some(idx),
                    "a worker's input ran out while the others ran the step's collective: the workers' datasets differ in length",
                );
            }
            Some("oom_skipped") => skipped.push(idx),
            _ => {}
        }
    }
    let out_of_sync = !h.support.is_empty();
    let hung = job
        .events_where(|k| k == EventKind::WatchdogTimeout)
        .next()
        .is_some();
    if !out_of_sync && !hung {
        return None;
    }
    for &idx in skipped.iter().take(CITED) {
        let ev = &job.events[idx];
        h.ranks.extend(ev.who.rank);
        // The worker went on past the batch the others ran: its program
        // diverged, it did not stall.
        h.support(
            Source::Torch,
            0.65,
            Some(idx),
            "a worker ran out of memory and skipped its batch: it runs one step's collectives fewer than the others",
        );
    }
    if h.support.is_empty() {
        return None;
    }
    let detail = if !skipped.is_empty() {
        "fairseq: a worker skipped a batch after running out of memory"
    } else {
        first_statement(job)
    };
    h.value("detail", detail);
    let ranks = h.ranks.clone();
    super::application::on_the_ranks(job, &mut h, &ranks);
    Some(h)
}

/// The detail of the first framework statement the hypothesis cites.
fn first_statement(job: &crate::model::Job) -> &'static str {
    let first = job
        .events_where(|k| k == EventKind::AppDesync)
        .find_map(|(_, e)| e.text_field("what").filter(|w| *w != "oom_skipped"));
    match first {
        Some("tf_shape_mismatch") => {
            "TensorFlow: members of one collective instance brought different shapes"
        }
        Some("input_exhausted") => {
            "TensorFlow: a worker's input ran out while the others ran the collective"
        }
        _ => "fairseq: the workers fell out of sync in all_gather_list",
    }
}
