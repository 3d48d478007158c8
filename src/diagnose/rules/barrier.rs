//! `monitored_barrier` (Gloo) names the ranks that never reached it.
//!
//! Rank 0 gathers every rank and, past the timeout, names those that did
//! not come (`Ranks 1, 2 failed to pass monitoredBarrier`): a statement, as
//! strong as the desync report's. The other ranks, when rank 0 goes silent,
//! say only that and point at rank 0's log. Where that log names no one,
//! rank 0 itself is the likely laggard (it never reached the barrier, or
//! left it): a lead, since its log may simply be missing.

use std::collections::BTreeSet;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 4;

pub fn monitored_barrier(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut named = Hypothesis::new(CauseKind::RankStalled);
    let mut lost = Hypothesis::new(CauseKind::RankStalled);
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::BarrierReport) {
        match ev.text_field("role") {
            Some("missing") => {
                let ranks = rank_list(ev.text_field("ranks").unwrap_or(""));
                if named.support.len() < CITED {
                    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
                    named.support(
                        Source::Torch,
                        0.8,
                        Some(idx),
                        format!(
                            "rank 0's monitored barrier says rank(s) {} never reached it",
                            list.join(", ")
                        ),
                    );
                }
                named.ranks.extend(ranks);
            }
            Some("coordinator") => {
                let Some(rank) = ev.int("coordinator").and_then(|r| u32::try_from(r).ok()) else {
                    continue;
                };
                if lost.support.len() < CITED {
                    lost.support(
                        Source::Torch,
                        0.5,
                        Some(idx),
                        format!("a rank reached the monitored barrier but lost rank {rank}, the barrier's coordinator, whose own log would name the faulty rank"),
                    );
                }
                lost.ranks.insert(rank);
            }
            _ => {}
        }
    }
    let mut h = if named.ranks.is_empty() { lost } else { named };
    if h.ranks.is_empty() {
        return None;
    }
    let ranks = h.ranks.clone();
    super::application::on_the_ranks(ctx.job, &mut h, &ranks);
    h.value("op", "BARRIER");
    Some(h)
}

fn rank_list(text: &str) -> BTreeSet<u32> {
    text.split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect()
}
