//! A process asked NCCL for a rank outside the world it gave (`Invalid rank
//! requested : 2/2`, rank ≥ nranks): the launch handed its processes ranks
//! and a world size that do not fit together (a world size counted per
//! node, hosts started with different `--nnodes`), and NCCL refuses to set
//! up. A launch set up wrongly, in NCCL's own words.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn rank_outside_the_world(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "rank_layout");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::InvalidRank) {
        let (Some(rank), Some(nranks)) = (ev.int("rank"), ev.int("nranks")) else {
            continue;
        };
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.value("detail", format!("rank {rank} of a world of {nranks}"));
        }
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.75,
                Some(idx),
                format!(
                    "NCCL was asked for rank {rank} in a communicator of {nranks} ranks and refused"
                ),
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}
