//! Members of one communicator that called different collectives at one
//! launch, as NCCL's COLL trace shows them (`Broadcast: opCount 0 … count
//! 25503912 datatype 6` on one rank, `count 53 datatype 4` on the others).

use crate::diagnose::call_trace::{Divergence, Side, first_divergence, ranks_of};
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::knowledge::NcclCalls;
use crate::model::{CauseKind, Job};

use super::Ctx;

/// Lines cited per side: the odd callers are few, the others many.
const LINES_PER_SIDE: usize = 3;

/// Callers that called something else than most members at one launch ran
/// the odd collective; an even split is a mismatch with no side named.
pub fn calls_disagree(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let rules = &ctx.kb.nccl_calls;
    let d = first_divergence(ctx.job, rules)?;
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let odd = d.odd_callers();
    let majority = &d.sides[0];
    if odd.is_empty() {
        h.value("detail", even_split_detail(ctx.job, rules, &d));
        for side in &d.sides {
            cite(
                &mut h,
                side,
                0.55,
                |who| {
                    format!(
                        "{who} called {} at NCCL launch {} of this communicator; as many members called something else, so neither side is the odd one",
                        side.call.describe(rules),
                        d.op_count
                    )
                },
                ctx.job,
            );
        }
        return Some(h);
    }
    h.ranks = ranks_of(ctx.job, &odd);
    h.value("detail", odd_detail(ctx.job, rules, &d, &odd));
    for side in &d.sides[1..] {
        cite(
            &mut h,
            side,
            0.8,
            |who| {
                format!(
                    "{who} called {} at NCCL launch {} where {} other member(s) called {}",
                    side.call.describe(rules),
                    d.op_count,
                    majority.callers.len(),
                    majority.call.describe(rules)
                )
            },
            ctx.job,
        );
    }
    cite(
        &mut h,
        majority,
        0.3,
        |who| {
            format!(
                "{who} called {}, as most members did at this launch",
                majority.call.describe(rules)
            )
        },
        ctx.job,
    );
    place_on_the_odd_caller(ctx.job, &mut h, &odd);
    Some(h)
}

fn cite(h: &mut Hypothesis, side: &Side, weight: f64, why: impl Fn(&str) -> String, job: &Job) {
    for (&caller, &line) in side.callers.iter().zip(&side.lines).take(LINES_PER_SIDE) {
        h.support(
            Source::Nccl,
            weight,
            Some(line),
            why(&caller_name(job, caller)),
        );
    }
}

fn odd_detail(job: &Job, rules: &NcclCalls, d: &Divergence, odd: &[usize]) -> String {
    let who: Vec<String> = odd.iter().take(4).map(|&c| caller_name(job, c)).collect();
    let more = odd.len().saturating_sub(4);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let odd_call = &d.sides[1].call;
    format!(
        "{}{more} called {} where the others called {}, at NCCL launch {} (opCount) of communicator {}",
        who.join(", "),
        odd_call.describe(rules),
        d.sides[0].call.describe(rules),
        d.op_count,
        d.comm
    )
}

fn even_split_detail(job: &Job, rules: &NcclCalls, d: &Divergence) -> String {
    let sides: Vec<String> = d
        .sides
        .iter()
        .map(|s| {
            let who = caller_name(job, s.callers[0]);
            format!("{who} called {}", s.call.describe(rules))
        })
        .collect();
    format!(
        "{}, at NCCL launch {} (opCount) of communicator {}",
        sides.join("; "),
        d.op_count,
        d.comm
    )
}

/// A caller as the report names it: its rank, else its host and pid.
fn caller_name(job: &Job, caller: usize) -> String {
    let t = &job.call_traces[caller];
    match (t.rank, &t.host, t.pid) {
        (Some(rank), _, _) => format!("rank {rank}"),
        (None, Some(host), Some(pid)) => format!("process {pid} on {host}"),
        (None, Some(host), None) => format!("a process on {host}"),
        (None, None, Some(pid)) => format!("process {pid}"),
        (None, None, None) => "a caller".to_string(),
    }
}

/// One odd caller: the cause sits on its host (and GPU, where its rank is
/// known).
fn place_on_the_odd_caller(job: &Job, h: &mut Hypothesis, odd: &[usize]) {
    let [caller] = odd else { return };
    let t = &job.call_traces[*caller];
    let info = t.rank.and_then(|r| job.ranks.get(&r));
    h.host = info.and_then(|i| i.host.clone()).or_else(|| t.host.clone());
    h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
}
