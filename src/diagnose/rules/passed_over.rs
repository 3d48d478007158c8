//! A rank whose watchdog timed out in a collective that other ranks of its
//! group had already finished: they timed out further on. A rank that never
//! reached a collective has nothing of it to time out on, and one that
//! entered it was in it with the others, whose collective could finish
//! without its own only if the two were not the same: NCCL moves data
//! between ranks in order and untagged, so the peers' next, smaller
//! collectives feed a larger one, and the peers go on while it waits for
//! more (a batch that skips a module on some ranks: 544997376 elements on
//! one, 2560 on the rest). The ranks behind ran another collective there;
//! size, op or order differ.
//!
//! Point-to-point work is numbered apart from collectives (torch 2.3+), so
//! only collectives count; a gap of more than a few collectives means the
//! numbers belong to different groups that a log without group tags merged,
//! unless every rank's own lines name the group by its GUID (torch 2.5+):
//! then the peers finished that many collectives on the one they waited in.

use std::collections::BTreeSet;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, PgRankState};

use super::Ctx;
use super::application::on_the_ranks;

/// The most collectives peers can finish on the data of one larger
/// collective before they too wait; further apart, the numbers are not one
/// group's.
const MAX_GAP: i64 = 16;
/// Lines cited per side.
const CITED: usize = 3;

pub fn passed_over(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let timed_out: Vec<(u32, i64, &PgRankState)> = ctx
        .job
        .pg_states
        .range((hang.pg.clone(), 0)..=(hang.pg.clone(), u32::MAX))
        .filter(|(_, st)| st.timed_out && st.op.as_deref().is_some_and(is_collective))
        .filter_map(|((_, rank), st)| Some((*rank, st.failed_seq?, st)))
        .collect();
    let furthest = timed_out.iter().map(|(_, seq, _)| *seq).max()?;
    let one_group = timed_out.iter().all(|(_, _, st)| names_its_group(ctx, st));
    let behind: Vec<&(u32, i64, &PgRankState)> = timed_out
        .iter()
        .filter(|(_, seq, _)| *seq < furthest && (one_group || furthest - seq <= MAX_GAP))
        .collect();
    let ahead: Vec<&(u32, i64, &PgRankState)> = timed_out
        .iter()
        .filter(|(_, seq, _)| *seq == furthest)
        .collect();
    if behind.is_empty() || behind.len() + ahead.len() < timed_out.len() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let ranks: BTreeSet<u32> = behind.iter().map(|(r, _, _)| *r).collect();
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.ranks = ranks;
    let (first_rank, first_seq, first) = behind[0];
    h.value("seq", first_seq.to_string());
    h.value(
        "detail",
        format!(
            "rank {first_rank} still waits in {} #{first_seq}{}, which rank {} finished before timing out in {} #{furthest}{}",
            first.op.as_deref().unwrap_or("a collective"),
            elements(first),
            ahead[0].0,
            ahead[0].2.op.as_deref().unwrap_or("a collective"),
            elements(ahead[0].2),
        ),
    );
    for (rank, seq, st) in behind.iter().take(CITED) {
        h.support(
            Source::Torch,
            0.7,
            st.evidence.first().copied(),
            format!("rank {rank} timed out in collective #{seq}, which other ranks of its group had finished: it was in another collective than they were"),
        );
    }
    for (rank, _, st) in ahead.iter().take(CITED) {
        h.support(
            Source::Pattern,
            0.3,
            st.evidence.first().copied(),
            format!(
                "rank {rank} had finished #{} and timed out further on, in #{furthest}",
                behind[0].1
            ),
        );
    }
    Some(h)
}

/// A rank's state rests on a line that names its group by GUID.
fn names_its_group(ctx: &Ctx<'_>, st: &PgRankState) -> bool {
    st.evidence
        .iter()
        .any(|&i| ctx.job.events[i].text_field("pg_guid").is_some())
}

/// Point-to-point work is numbered apart from collectives.
fn is_collective(op: &str) -> bool {
    !matches!(
        op.trim_start_matches('_'),
        "SEND" | "RECV" | "RECVANYSOURCE"
    )
}

fn elements(st: &PgRankState) -> String {
    match st.numel_in {
        Some(1) => " of 1 element".to_string(),
        Some(n) => format!(" of {n} elements"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_to_point_work_is_no_collective() {
        assert!(!is_collective("SEND"));
        assert!(!is_collective("_RECV"));
        assert!(is_collective("_ALLGATHER_BASE"));
        assert!(is_collective("ALLREDUCE"));
    }
}
