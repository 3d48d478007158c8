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
    let mut said = None;
    for (idx, ev) in job.events_where(|k| k == EventKind::AppDesync) {
        let what = ev.text_field("what");
        if what == Some("oom_skipped") {
            skipped.push(idx);
            continue;
        }
        let Some((weight, why, detail)) = what.and_then(statement) else {
            continue;
        };
        said.get_or_insert(detail);
        if h.support.len() < CITED {
            h.support(Source::Pattern, weight, Some(idx), why);
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
        said.unwrap_or_default()
    };
    h.value("detail", detail);
    let ranks = h.ranks.clone();
    super::application::on_the_ranks(job, &mut h, &ranks);
    Some(h)
}

/// What a framework's statement weighs, why it matters, and the finding's
/// detail where it is the first.
fn statement(what: &str) -> Option<(f64, &'static str, &'static str)> {
    Some(match what {
        "all_gather_list" => (
            0.6,
            "fairseq's all_gather_list got data the other workers sent out of step: the workers fell out of sync",
            "fairseq: the workers fell out of sync in all_gather_list",
        ),
        "tf_shape_mismatch" => (
            0.6,
            "TensorFlow found members of one collective instance with different shapes: the workers ran different steps or models",
            "TensorFlow: members of one collective instance brought different shapes",
        ),
        "input_exhausted" => (
            0.45,
            "a worker's input ran out while the others ran the step's collective: the workers' datasets differ in length",
            "TensorFlow: a worker's input ran out while the others ran the collective",
        ),
        _ => return None,
    })
}
