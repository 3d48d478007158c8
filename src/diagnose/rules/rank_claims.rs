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
use crate::model::{CauseKind, EventIdx, EventKind, FileId, Job};

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
    let twice: Vec<u32> = by_rank
        .iter()
        .filter(|(_, lines)| claimed_twice(job, lines))
        .map(|(&rank, _)| rank)
        .collect();
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

/// Two lines of one file, or of two processes: not one line kept twice
/// (a log and its copy, both in the job folder).
fn claimed_twice(job: &Job, lines: &[EventIdx]) -> bool {
    let files: BTreeSet<FileId> = lines.iter().map(|&i| job.events[i].origin.file).collect();
    let writers: BTreeSet<(Option<&str>, Option<u32>)> = lines
        .iter()
        .map(|&i| {
            let who = &job.events[i].who;
            (who.host.as_deref(), who.pid)
        })
        .collect();
    let one_file_twice = lines.len() > files.len();
    let two_known_writers =
        writers.len() > 1 && writers.iter().all(|w| w.0.is_some() || w.1.is_some());
    one_file_twice || two_known_writers
}

/// `ranks 0–3`, `rank 5`.
fn rank_words(ranks: &[u32]) -> String {
    match ranks {
        [one] => format!("rank {one}"),
        [first, .., last] if (last - first) as usize + 1 == ranks.len() => {
            format!("ranks {first}–{last}")
        }
        _ => {
            let list: Vec<String> = ranks.iter().take(8).map(u32::to_string).collect();
            let more = if ranks.len() > 8 { ", …" } else { "" };
            format!("ranks {}{more}", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_words_join_a_run() {
        assert_eq!(rank_words(&[4, 5, 6, 7]), "ranks 4–7");
        assert_eq!(rank_words(&[2]), "rank 2");
        assert_eq!(rank_words(&[1, 3]), "ranks 1, 3");
    }
}
