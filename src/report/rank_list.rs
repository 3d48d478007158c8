//! Ranks as a person reads them: one with its host and GPU, several as
//! runs by host with consecutive ranks joined (`48–55 (gpu-013), 63
//! (gpu-014)`), so that a host-wide cause lists a whole host in one item.

use std::fmt::Write;

use super::ReportInput;
use crate::model::rank_ranges;

/// `ranks` (sorted) described; at most `max_runs` runs by host, the rest
/// counted (`and 120 more`).
pub fn describe(input: &ReportInput<'_>, ranks: &[u32], max_runs: Option<usize>) -> String {
    if let [rank] = ranks {
        return one(input, *rank);
    }
    let host_of = |r: &u32| input.job.ranks.get(r).and_then(|i| i.host.as_deref());
    let mut runs: Vec<(Option<&str>, Vec<u32>)> = Vec::new();
    for rank in ranks {
        let host = host_of(rank);
        match runs.last_mut() {
            Some((h, list)) if *h == host => list.push(*rank),
            _ => runs.push((host, vec![*rank])),
        }
    }
    let max = max_runs.unwrap_or(usize::MAX);
    let shown: Vec<String> = runs
        .iter()
        .take(max)
        .map(|(host, list)| match host {
            Some(h) => format!("{} ({h})", rank_ranges(list)),
            None => rank_ranges(list),
        })
        .collect();
    let left: usize = runs.iter().skip(max).map(|r| r.1.len()).sum();
    let mut out = shown.join(", ");
    if left > 0 {
        let _ = write!(out, " and {left} more");
    }
    out
}

/// `5 (node002, GPU 0000:1a:00.0)`, with what is known.
pub fn one(input: &ReportInput<'_>, rank: u32) -> String {
    let info = input.job.ranks.get(&rank);
    match (
        info.and_then(|i| i.host.as_deref()),
        info.and_then(|i| i.gpu_bus_id.as_deref()),
    ) {
        (Some(h), Some(g)) => format!("{rank} ({h}, GPU {g})"),
        (Some(h), None) => format!("{rank} ({h})"),
        _ => rank.to_string(),
    }
}
