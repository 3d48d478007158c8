//! Ranks as a person reads them: one with its host and GPU, several as
//! runs by host with consecutive ranks joined (`48–55 (gpu-013), 63
//! (gpu-014)`), so that a host-wide cause lists a whole host in one item.

use std::fmt::Write;

use super::ReportInput;

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
            Some(h) => format!("{} ({h})", ranges(list)),
            None => ranges(list),
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

/// `1, 3, 4, 6–8`: sorted ranks, runs of three or more joined.
fn ranges(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => ranks[i].to_string(),
            1 => format!("{}, {}", ranks[i], ranks[j]),
            _ => format!("{}–{}", ranks[i], ranks[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_three_or_more_consecutive_ranks_are_joined() {
        assert_eq!(ranges(&[48, 49, 50, 51, 52, 53, 54, 55]), "48–55");
        assert_eq!(ranges(&[1, 3, 4, 6, 7, 8, 12]), "1, 3, 4, 6–8, 12");
        assert_eq!(ranges(&[]), "");
    }
}
