//! A rank behind in the hung group whose own traceback shows it blocked in
//! a torch.distributed collective, another one than the others wait in: it
//! did not stall in compute or data loading, it waited in a collective that
//! they never called (a rank-0-only gather of reports, a barrier on one code
//! path, a broadcast on another). The ranks ran different collectives.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;
use super::application::on_the_ranks;

/// Lines cited.
const CITED: usize = 3;

pub fn waiting_elsewhere(ctx: &Ctx<'_>, hang: &Hang) -> Option<Hypothesis> {
    let hung = ctx.kb.op_on_the_wire(hang.op.as_deref()?)?;
    let behind: Vec<u32> = hang.laggards.keys().chain(&hang.silent).copied().collect();
    // Each rank behind: the innermost collective of its last traceback
    // (frames run outermost first, so the last one read wins).
    let mut elsewhere: BTreeMap<u32, (EventIdx, String)> = BTreeMap::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::C10dCall) {
        let Some(rank) = ev.who.rank.filter(|r| behind.contains(r)) else {
            continue;
        };
        let Some(op) = ev
            .text_field("function")
            .and_then(|f| ctx.kb.torch_api_op(f))
        else {
            continue;
        };
        elsewhere.insert(rank, (idx, op.to_string()));
    }
    elsewhere.retain(|_, (_, op)| {
        ctx.kb.op_on_the_wire(op).is_some_and(|f| f != hung) && !ctx.kb.point_to_point_op(op)
    });
    if elsewhere.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let hung_op = hang.op.as_deref().unwrap_or("a collective");
    let seq = hang.seq.map_or(String::new(), |s| format!(" #{s}"));
    if let Some(s) = hang.seq {
        h.value("seq", s.to_string());
    }
    let (first, (_, first_op)) = elsewhere.iter().next()?;
    h.value(
        "detail",
        format!("rank {first} waited in {first_op} while the others waited in {hung_op}{seq}"),
    );
    for (rank, (idx, op)) in elsewhere.iter().take(CITED) {
        h.support(
            Source::Torch,
            0.7,
            Some(*idx),
            format!("rank {rank}'s traceback shows it blocked in {op}, another collective than the {hung_op}{seq} the others waited in"),
        );
    }
    for &idx in hang.evidence.iter().take(1) {
        h.support(
            Source::Pattern,
            0.3,
            Some(idx),
            format!("the other ranks timed out in {hung_op}{seq}"),
        );
    }
    let ranks: BTreeSet<u32> = elsewhere.keys().copied().collect();
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.ranks = ranks;
    Some(h)
}
