//! PyTorch's own Flight Recorder analysis (`fr_trace`), run over every
//! rank's dump and saved beside the logs: the first collective it found
//! wrong, with the ranks it blames. `Not all ranks joining collective` lists
//! the ranks that never entered it; `… has errors` names culprit ranks and
//! an error type per rank (another op, size or dtype: a mismatch; another
//! state: the rank is behind).

use std::collections::BTreeSet;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventIdx, EventKind};

use super::Ctx;
use super::application::on_the_ranks;

/// How far below its header a block's fields may lie.
const BLOCK_LINES: u64 = 40;

/// One block of the report: a collective the analyser found wrong.
struct Block<'e> {
    idx: EventIdx,
    missing_block: bool,
    seq: Option<i64>,
    fields: Vec<(&'e str, &'e str)>,
}

pub(super) fn fr_analysis(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let block = first_block(ctx)?;
    let field = |name: &str| block.field(name);
    let (kind, ranks, weight, detail) = if block.missing_block {
        let missing = rank_set(field("missing ranks")?);
        (
            CauseKind::RankStalled,
            missing,
            0.7,
            "PyTorch's Flight Recorder analysis found them missing from it".to_string(),
        )
    } else {
        let culprits = culprits(field("error msg")?);
        let mismatched: BTreeSet<u32> = culprits
            .iter()
            .filter(|(_, t)| ctx.kb.fr_type_is_mismatch(t))
            .map(|(r, _)| *r)
            .collect();
        let types: BTreeSet<&str> = culprits.iter().map(|(_, t)| *t).collect();
        let detail = format!(
            "PyTorch's Flight Recorder analysis: {}",
            types.into_iter().collect::<Vec<_>>().join(", ")
        );
        if mismatched.is_empty() {
            let behind = culprits.iter().map(|(r, _)| *r).collect();
            (CauseKind::RankStalled, behind, 0.4, detail)
        } else {
            (CauseKind::CollectiveMismatch, mismatched, 0.8, detail)
        }
    };
    if ranks.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(kind);
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.ranks = ranks;
    if let Some(op) = field("collective").and_then(|c| op_of(ctx, c)) {
        h.value("op", op);
    }
    if let Some(seq) = block.seq {
        h.value("seq", seq.to_string());
    }
    if let Some(pg) = field("group info").and_then(|g| g.split(':').next()) {
        h.value("pg", pg.to_string());
    }
    h.value("detail", detail);
    h.support(
        Source::Torch,
        weight,
        Some(block.idx),
        if block.missing_block {
            "PyTorch's Flight Recorder analysis: these ranks never joined the collective the others entered"
        } else {
            "PyTorch's Flight Recorder analysis: these ranks' entries for the collective differ from the others'"
        },
    );
    Some(h)
}

/// The collective of the report's first block, and the line that opens it.
pub fn analysed_collective(ctx: &Ctx<'_>) -> Option<(crate::diagnose::Collective, EventIdx)> {
    let block = first_block(ctx)?;
    let field = |name: &str| block.field(name);
    let collective = crate::diagnose::Collective {
        op: field("collective").and_then(|c| op_of(ctx, c)),
        seq: block.seq,
        pg: field("group info")
            .and_then(|g| g.split(':').next())
            .map(str::to_string),
    };
    Some((collective, block.idx))
}

/// The report's first block (the analyser walks collectives in order: the
/// first wrong one is where the job went wrong) with its fields.
fn first_block<'e>(ctx: &'e Ctx<'_>) -> Option<Block<'e>> {
    let mut lines = ctx.job.events_where(|k| k == EventKind::FrAnalysis);
    let (idx, head) = lines.find(|(_, e)| is_header(e))?;
    let mut block = Block {
        idx,
        missing_block: head.text_field("what") == Some("missing"),
        seq: head.int("seq").or(head.int("entry_seq")),
        fields: Vec::new(),
    };
    for (_, e) in lines {
        if is_header(e)
            || e.origin.file != head.origin.file
            || e.origin.line > head.origin.line + BLOCK_LINES
        {
            break;
        }
        if let (Some(w), Some(v)) = (e.text_field("what"), e.text_field("value")) {
            block.fields.push((w, v));
        }
    }
    Some(block)
}

impl<'e> Block<'e> {
    /// The value of the block's `name:` line.
    fn field(&self, name: &str) -> Option<&'e str> {
        self.fields
            .iter()
            .find(|(w, _)| *w == name)
            .map(|(_, v)| *v)
    }
}

fn is_header(e: &Event) -> bool {
    matches!(e.text_field("what"), Some("errors" | "missing"))
}

/// `{3, 5}` → ranks 3 and 5.
fn rank_set(text: &str) -> BTreeSet<u32> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// `Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, …, Culprit rank 110; …`
fn culprits(text: &str) -> Vec<(u32, &str)> {
    text.split("Culprit rank ")
        .skip(1)
        .filter_map(|part| {
            let (rank, rest) = part.split_once(';')?;
            let kind = rest.trim_start().strip_prefix("Error type: ")?;
            let end = kind
                .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                .unwrap_or(kind.len());
            Some((rank.trim().parse().ok()?, &kind[..end]))
        })
        .collect()
}

/// `nccl:all_reduce` → `ALLREDUCE`.
fn op_of(ctx: &Ctx<'_>, collective: &str) -> Option<String> {
    let name = collective.split_once(':').map_or(collective, |(_, n)| n);
    let name = name.split_whitespace().next()?;
    Some(ctx.kb.torch_api_op(name).map_or_else(
        || name.trim_start_matches('_').to_ascii_uppercase(),
        str::to_string,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn culprits_and_their_error_types_are_read_from_the_error_message() {
        let text = "Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' does not match found input sizes: '[[262144]]', Culprit rank 110; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected";
        assert_eq!(
            culprits(text),
            vec![
                (22, "SIZE_OR_SYNTAX_MISMATCH"),
                (110, "SIZE_OR_SYNTAX_MISMATCH")
            ]
        );
        assert_eq!(
            culprits("Culprit rank 3; Error type: COLLECTIVE_STATE_MISMATCH"),
            vec![(3, "COLLECTIVE_STATE_MISMATCH")]
        );
        assert!(culprits("nothing").is_empty());
    }

    #[test]
    fn rank_sets_read_as_python_prints_them() {
        assert_eq!(rank_set("{3, 5}"), BTreeSet::from([3, 5]));
        assert_eq!(rank_set("{7}"), BTreeSet::from([7]));
        assert!(rank_set("set()").is_empty());
    }
}
