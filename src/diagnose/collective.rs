//! Which collective the job was in. The hang (watchdog lines, Flight Recorder)
//! names it best; without one, PyTorch's mismatch report, a traceback
//! through torch.distributed, the ranks' stack dumps, NCCL's RAS report or
//! its call trace still say which op a rank was running.

use crate::model::{EventKind, Job};

use super::Collective;
use super::hang::Hang;
use super::rules::Ctx;

/// The collective and, when it was not read from the hang, the event that
/// names it (so the verdict can cite it).
pub struct Named {
    pub collective: Collective,
    pub cited: Option<usize>,
}

pub fn named(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Named> {
    let from_hang = hang.map(|h| Collective {
        op: h.op.clone(),
        seq: h.seq,
        pg: Some(h.pg.clone()),
    });
    if from_hang.as_ref().is_some_and(|c| c.op.is_some()) {
        return from_hang.map(|collective| Named {
            collective,
            cited: None,
        });
    }
    let guess = fingerprint(ctx.job)
        .or_else(|| flight_recorder_analysis(ctx))
        .or_else(|| traceback_call(ctx))
        .or_else(|| dumped_collective(ctx))
        .or_else(|| ras_collective(ctx))
        .or_else(|| diverging_call(ctx));
    match (from_hang, guess) {
        (Some(mut c), Some(g)) if g.collective.seq.is_none() || g.collective.seq == c.seq => {
            c.op = g.collective.op;
            Some(Named {
                collective: c,
                cited: g.cited,
            })
        }
        (Some(c), _) => Some(Named {
            collective: c,
            cited: None,
        }),
        (None, g) => g,
    }
}

impl Named {
    /// An op named without a sequence number or group, and the line that names it.
    fn op(op: impl Into<String>, cited: Option<usize>) -> Named {
        Named {
            collective: Collective {
                op: Some(op.into()),
                seq: None,
                pg: None,
            },
            cited,
        }
    }
}

/// `Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=21,
/// OpType=BROADCAST, …)`: the reporting rank's side of the mismatch.
fn fingerprint(job: &Job) -> Option<Named> {
    job.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::CollectiveMismatch)
        .find_map(|(idx, e)| {
            let text = e.text_field("collective_a")?;
            let op = value_after(text, "OpType=")?;
            let seq = number_after(text, "SequenceNumber=");
            Some(Named {
                collective: Collective {
                    op: Some(op.to_string()),
                    seq,
                    pg: None,
                },
                cited: Some(idx),
            })
        })
}

/// PyTorch's Flight Recorder analysis: the first collective it found wrong.
fn flight_recorder_analysis(ctx: &Ctx<'_>) -> Option<Named> {
    let (collective, idx) = super::rules::analysed_collective(ctx)?;
    collective.op.is_some().then_some(Named {
        collective,
        cited: Some(idx),
    })
}

/// Stack dumps: the collective most dumped ranks' main threads waited in.
fn dumped_collective(ctx: &Ctx<'_>) -> Option<Named> {
    let (op, idx) = super::rules::dumped_collective(ctx)?;
    Some(Named::op(op, Some(idx)))
}

/// NCCL's RAS report: the op whose launch counts differ between ranks (its
/// count is NCCL's, not the group's sequence number).
fn ras_collective(ctx: &Ctx<'_>) -> Option<Named> {
    let (op, idx) = super::rules::ras_collective(ctx)?;
    Some(Named::op(op, Some(idx)))
}

/// NCCL's COLL trace: the op the members of a communicator parted ways
/// on (its launch count is NCCL's, not the group's sequence number).
fn diverging_call(ctx: &Ctx<'_>) -> Option<Named> {
    let rules = &ctx.kb.nccl_calls;
    let d = super::call_trace::first_divergence(ctx.job, rules)?;
    let side = &d.sides[0];
    let op = rules.op_type(&side.call.op).unwrap_or(&side.call.op);
    Some(Named::op(op, side.lines.first().copied()))
}

/// The word after `key` (`OpType=BARRIER)` → `BARRIER`).
fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The digits after `key`: torch 2.6 prints `SequenceNumber=1OpType=…`.
fn number_after(text: &str, key: &str) -> Option<i64> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The innermost torch.distributed collective frame of the first traceback
/// that ran through one: the op that raised.
fn traceback_call(ctx: &Ctx<'_>) -> Option<Named> {
    let mut frames: Vec<(usize, &str)> = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::C10dCall)
        .filter_map(|(idx, e)| Some((idx, ctx.kb.torch_api_op(e.text_field("function")?)?)))
        .collect();
    frames.sort_by_key(|&(idx, _)| ctx.job.events[idx].origin);
    let first = frames.first()?;
    let file = ctx.job.events[first.0].origin.file;
    // A traceback lists frames outermost first: within the first file that
    // has any, the last frame before that file's next exception line.
    let end = ctx
        .job
        .events
        .iter()
        .filter(|e| e.kind == EventKind::PythonException && e.origin.file == file)
        .map(|e| e.origin.line)
        .filter(|&l| l > ctx.job.events[first.0].origin.line)
        .min()
        .unwrap_or(u64::MAX);
    let (idx, op) = frames
        .iter()
        .take_while(|&&(i, _)| {
            let o = ctx.job.events[i].origin;
            o.file == file && o.line < end
        })
        .last()?;
    Some(Named::op(*op, Some(*idx)))
}

#[cfg(test)]
mod tests {
    use super::{number_after, value_after};

    #[test]
    fn fingerprint_values_are_read_with_or_without_separators_torch_2_6() {
        // torch 2.6 prints no comma between the fields of a barrier fingerprint.
        let t = "CollectiveFingerPrint(SequenceNumber=1OpType=BARRIER)";
        assert_eq!(value_after(t, "OpType="), Some("BARRIER"));
        assert_eq!(number_after(t, "SequenceNumber="), Some(1));
        let t = "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[1]";
        assert_eq!(number_after(t, "SequenceNumber="), Some(21));
        assert_eq!(value_after(t, "OpType="), Some("BROADCAST"));
        assert_eq!(value_after(t, "Missing="), None);
    }
}
