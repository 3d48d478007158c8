//! NCCL's `Trees` lines: each rank's tree parent and children per channel.
//! Between hosts a tree edge is a network connection like a channel line's,
//! and NCCL prints the trees before it connects anything, so they name a
//! rank's network peers even where the connections then failed.

use std::collections::BTreeSet;

use super::inits::InitLines;
use crate::model::{EventIdx, EventKind, Job, NetLink};

/// Adds the world communicator's tree edges between hosts to `job.links`.
pub(super) fn collect(job: &mut Job, inits: &InitLines) {
    // Rank resolution set the world's size from the same init lines.
    let world = job.world_size;
    let mut links = Vec::new();
    for (idx, ev) in job.events_where(|k| k == EventKind::NcclTrees) {
        if !of_world(job, inits, idx, world) {
            continue;
        }
        for (me, peer) in tree_edges(ev.text_field("trees").unwrap_or("")) {
            if on_different_hosts(job, me, peer) {
                links.push(NetLink { src: me, dst: peer });
            }
        }
    }
    if links.is_empty() {
        return;
    }
    job.links.extend(links);
    job.links.sort_unstable();
    job.links.dedup();
}

/// The line belongs to the world communicator: its communicator counts the
/// world's ranks or, where no init line says, its rank is the process's own.
fn of_world(job: &Job, inits: &InitLines, idx: EventIdx, world: Option<u32>) -> bool {
    let ev = &job.events[idx];
    match inits.comm_nranks(job, idx) {
        Some(n) => world.is_some_and(|w| n == i64::from(w)),
        None => {
            let me = tree_rank(ev.text_field("trees").unwrap_or(""));
            me.is_some() && me == ev.who.rank
        }
    }
}

/// The rank a `Trees` line is printed for (the same in every channel).
pub fn tree_rank(text: &str) -> Option<u32> {
    let item = text.split_whitespace().find(|t| !t.starts_with('['))?;
    item.split("->").nth(1)?.parse().ok()
}

/// `[0] 14/-1/-1->12->11 [1] 26->25->-1/-1/-1` → (12, 14), (12, 11), (25, 26):
/// the middle number is the rank itself in either order NCCL printed.
pub fn tree_edges(text: &str) -> Vec<(u32, u32)> {
    let mut out = BTreeSet::new();
    for item in text.split_whitespace().filter(|t| !t.starts_with('[')) {
        let parts: Vec<&str> = item.split("->").collect();
        let [a, me, b] = parts[..] else { continue };
        let Ok(me) = me.parse::<u32>() else { continue };
        for peer in a.split('/').chain(b.split('/')) {
            if let Ok(p) = peer.parse::<u32>()
                && p != me
            {
                out.insert((me, p));
            }
        }
    }
    out.into_iter().collect()
}

fn on_different_hosts(job: &Job, a: u32, b: u32) -> bool {
    matches!(
        (job.short_host_of_rank(a), job.short_host_of_rank(b)),
        (Some(x), Some(y)) if x != y
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders_of_nccl_trees_give_the_neighbours() {
        // 2.7+ prints children/…->me->parent, 2.4–2.6 parent->me->children.
        assert_eq!(
            tree_edges("[0] 14/-1/-1->12->11 [1] 14/4/-1->12->-1"),
            vec![(12, 4), (12, 11), (12, 14)]
        );
        assert_eq!(tree_edges("[0] 26->25->-1/-1/-1"), vec![(25, 26)]);
        assert!(tree_edges("[0] -1/-1/-1->0->-1").is_empty());
        assert!(tree_edges("[0] garbage->x").is_empty());
    }
}
