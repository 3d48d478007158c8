//! The rank grid and table, readable at 16,384 ranks: hosts whose ranks all
//! ended the same way fold into one line per state; hosts holding a stuck,
//! crashed, silent or erroring rank (and the culprit's) keep a row of cells.
//! The table lists the interesting ranks first and stops at a cap; the JSON
//! holds every rank.

use std::collections::BTreeMap;

use crate::diagnose::{RankRow, RankState};

/// Beyond this many hosts, uniform hosts fold into summary lines.
const FOLD_ABOVE_HOSTS: usize = 64;
const MAX_TABLE_ROWS: usize = 512;

pub struct HostCells {
    pub host: String,
    pub cells: Vec<CellView>,
}

pub struct CellView {
    pub state: &'static str,
    pub title: String,
}

pub struct RowView {
    pub rank: u32,
    pub host: String,
    pub pid: String,
    pub gpu: String,
    pub nics: String,
    pub last_enqueued: String,
    pub last_completed: String,
    pub state: &'static str,
}

pub struct Grid {
    pub hosts: Vec<HostCells>,
    /// "1,920 hosts: all 8 ranks timed out".
    pub folded: Vec<String>,
}

fn interesting(state: RankState) -> bool {
    matches!(
        state,
        RankState::Stuck
            | RankState::Crashed
            | RankState::Silent
            | RankState::Error
            | RankState::NoLogs
    )
}

pub fn grid(rows: &[RankRow], culprit_host: Option<&str>) -> Grid {
    let mut by_host: BTreeMap<String, Vec<&RankRow>> = BTreeMap::new();
    for r in rows {
        by_host
            .entry(r.host.clone().unwrap_or_else(|| "unknown host".into()))
            .or_default()
            .push(r);
    }
    let fold = by_host.len() > FOLD_ABOVE_HOSTS;
    let mut hosts = Vec::new();
    let mut folded: BTreeMap<(&'static str, usize), usize> = BTreeMap::new();
    for (host, ranks) in &by_host {
        let uniform =
            ranks.iter().all(|r| r.state == ranks[0].state) && !interesting(ranks[0].state);
        if fold && uniform && Some(host.as_str()) != culprit_host {
            *folded
                .entry((ranks[0].state.name(), ranks.len()))
                .or_default() += 1;
            continue;
        }
        let cells = ranks
            .iter()
            .map(|r| {
                let last = r
                    .last_enqueued
                    .map_or(String::new(), |s| format!(", last enqueued {s}"));
                CellView {
                    state: r.state.name(),
                    title: format!("rank {} · {host} · {}{last}", r.rank, r.state.name()),
                }
            })
            .collect();
        hosts.push(HostCells {
            host: host.clone(),
            cells,
        });
    }
    let folded = folded
        .into_iter()
        .map(|((state, n), hosts)| {
            format!("{hosts} hosts: all {n} ranks {}", state.replace('_', " "))
        })
        .collect();
    Grid { hosts, folded }
}

/// The rank table: interesting ranks first, then in order, up to the cap.
pub fn rows(rows: &[RankRow]) -> (Vec<RowView>, usize) {
    let mut ordered: Vec<&RankRow> = rows.iter().filter(|r| interesting(r.state)).collect();
    ordered.extend(rows.iter().filter(|r| !interesting(r.state)));
    let hidden = ordered.len().saturating_sub(MAX_TABLE_ROWS);
    let opt = |v: Option<i64>| v.map_or(String::new(), |x| x.to_string());
    let views = ordered
        .into_iter()
        .take(MAX_TABLE_ROWS)
        .map(|r| RowView {
            rank: r.rank,
            host: r.host.clone().unwrap_or_default(),
            pid: r.pid.map_or(String::new(), |p| p.to_string()),
            gpu: r.gpu_bus_id.clone().unwrap_or_default(),
            nics: r.nics.join(" "),
            last_enqueued: opt(r.last_enqueued),
            last_completed: opt(r.last_completed),
            state: r.state.name(),
        })
        .collect();
    (views, hidden)
}
