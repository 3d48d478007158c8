//! A process asked NCCL for a rank outside the world it gave (`Invalid rank
//! requested : 2/2`, rank ≥ nranks): the launch handed its processes ranks
//! and a world size that do not fit together (a world size counted per
//! node, hosts started with different `--nnodes`), and NCCL refuses to set
//! up. Or the bootstrap root got different rank counts from the processes
//! of one communicator (`mismatch in rank count from procs 6 : 3`, 2.3–2.22):
//! they were launched with different world sizes. A launch set up wrongly,
//! in NCCL's own words.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn rank_outside_the_world(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "rank_layout");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::InvalidRank) {
        let Some((detail, why)) = what_was_refused(ev) else {
            continue;
        };
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.value("detail", detail);
        }
        if h.support.len() < CITED {
            h.support(Source::Nccl, 0.75, Some(idx), why);
        }
    }
    (!h.support.is_empty()).then_some(h)
}

/// The finding's detail and why the line matters.
fn what_was_refused(ev: &Event) -> Option<(String, String)> {
    let nranks = ev.int("nranks")?;
    if let Some(other) = ev.int("other_nranks") {
        return Some((
            format!("processes of one communicator gave {nranks} and {other} ranks"),
            format!(
                "NCCL's bootstrap root got a rank count of {other} from a process of a communicator of {nranks}: the processes were launched with different world sizes"
            ),
        ));
    }
    let rank = ev.int("rank")?;
    Some((
        format!("a process asked for rank {rank} of a world of {nranks}"),
        format!("NCCL was asked for rank {rank} in a communicator of {nranks} ranks and refused"),
    ))
}
