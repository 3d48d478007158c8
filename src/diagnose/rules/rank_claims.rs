//! Workers' own words about which rank they are (Lightning's `Initializing
//! distributed: GLOBAL_RANK: 1, MEMBER: 2/8`, a script's `| distributed
//! init (rank 3): …`) that cannot all be true: one rank claimed by two
//! workers while another rank of the world is claimed by none. The launch
//! gave two hosts the same node rank (srun starting one task per node under
//! a trainer that expects one per GPU, `--node_rank` missing on one host):
//! the process group waits for members that never come, and two of its
//! members check in as one. The launch's rank layout (`config_mismatch`).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind, FileId, Job, rank_ranges};

use super::Ctx;

/// Lines cited.
const CITED: usize = 4;

pub fn colliding_rank_claims(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let claims = claims(job);
    let world = claims
        .iter()
        .filter_map(|c| c.world)
        .max()
        .or(job.world_size)?;
    let by_rank = claims_by_rank(&claims);
    let twice: Vec<u32> = colliding(job, &claims).into_iter().collect();
    let unclaimed: Vec<u32> = (0..world).filter(|r| !by_rank.contains_key(r)).collect();
    if twice.is_empty() || unclaimed.is_empty() {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "rank_layout");
    h.value(
        "detail",
        format!(
            "{} of a world of {world} claimed by two workers each, {} by none",
            rank_words(&twice),
            rank_words(&unclaimed)
        ),
    );
    let why = "a worker says which rank it is; another worker said the same, while ranks of the world went unclaimed: two hosts were launched as one";
    for &rank in twice.iter().take(2) {
        for &idx in by_rank[&rank].iter().take(CITED / 2) {
            h.support(Source::Torch, 0.6, Some(idx), why);
        }
    }
    Some(h)
}

struct Claim {
    rank: u32,
    world: Option<u32>,
    idx: EventIdx,
}

fn claims(job: &Job) -> Vec<Claim> {
    job.events_where(|k| k == EventKind::TorchInfo)
        .filter(|(_, ev)| ev.text_field("what") == Some("distributed init"))
        .filter_map(|(idx, ev)| {
            Some(Claim {
                rank: u32::try_from(ev.int("global_rank")?).ok()?,
                world: ev.int("world_size").and_then(|n| u32::try_from(n).ok()),
                idx,
            })
        })
        .collect()
}

fn claims_by_rank(claims: &[Claim]) -> BTreeMap<u32, Vec<EventIdx>> {
    let mut out: BTreeMap<u32, Vec<EventIdx>> = BTreeMap::new();
    for c in claims {
        out.entry(c.rank).or_default().push(c.idx);
    }
    out
}

/// Ranks two workers claimed at once: twice in a file whose claims
/// interleave (a second claim of one rank before another rank's first,
/// as two processes' output mixes), or from two hosts. A file that holds
/// its claims twice in two whole rounds is a restart (a requeued job
/// appending to its log), and one log kept in two copies names no writer
/// twice.
fn colliding(job: &Job, claims: &[Claim]) -> BTreeSet<u32> {
    let mut by_file: BTreeMap<FileId, Vec<u32>> = BTreeMap::new();
    let mut hosts: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    for c in claims {
        let ev = &job.events[c.idx];
        by_file.entry(ev.origin.file).or_default().push(c.rank);
        if let Some(host) = job.host_of_event(ev) {
            hosts.entry(c.rank).or_default().insert(host);
        }
    }
    let mut out: BTreeSet<u32> = hosts
        .into_iter()
        .filter(|(_, h)| h.len() > 1)
        .map(|(rank, _)| rank)
        .collect();
    for ranks in by_file.values() {
        out.extend(interleaved_repeats(ranks));
    }
    out
}

/// The ranks repeated in `ranks` (one file's claims in line order), where
/// a rank not yet seen follows the first repeat.
fn interleaved_repeats(ranks: &[u32]) -> BTreeSet<u32> {
    let mut seen = BTreeSet::new();
    let Some(first_repeat) = ranks.iter().position(|r| !seen.insert(*r)) else {
        return BTreeSet::new();
    };
    let mut before: BTreeSet<u32> = ranks[..first_repeat].iter().copied().collect();
    if !ranks[first_repeat..].iter().any(|r| !before.contains(r)) {
        return BTreeSet::new();
    }
    let mut repeated = BTreeSet::new();
    before.clear();
    for &r in ranks {
        if !before.insert(r) {
            repeated.insert(r);
        }
    }
    repeated
}

/// `ranks 0–3`, `rank 5`.
fn rank_words(ranks: &[u32]) -> String {
    match ranks {
        [one] => format!("rank {one}"),
        _ => format!("ranks {}", rank_ranges(ranks)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_count_only_where_claims_interleave() {
        assert_eq!(
            interleaved_repeats(&[1, 1, 2, 2, 3, 3, 0, 0]),
            [0, 1, 2, 3].into()
        );
        // Two whole rounds: a restart appending to the log.
        assert!(interleaved_repeats(&[0, 1, 2, 3, 0, 1, 2, 3]).is_empty());
        assert!(interleaved_repeats(&[0, 1, 2, 3]).is_empty());
        assert_eq!(interleaved_repeats(&[0, 1, 0, 2]), [0].into());
    }

    #[test]
    fn rank_words_join_a_run() {
        assert_eq!(rank_words(&[4, 5, 6, 7]), "ranks 4–7");
        assert_eq!(rank_words(&[2]), "rank 2");
        assert_eq!(rank_words(&[1, 3]), "ranks 1, 3");
        assert_eq!(rank_words(&[0, 1, 2, 9]), "ranks 0–2, 9");
    }
}
