//! NCCL's RAS client report (`ncclras`, 2.24+), run while the job hangs.
//! A MISMATCH block groups a communicator's ranks by how many operations of
//! a kind each launched; the most common count is where the job stands, and
//! ranks that launched fewer are the ones the others wait for. Ranks that
//! launched more are not stragglers (they queued the next operation while
//! the rest wait: nccl#1911), so they name no one. An INCOMPLETE block
//! lists ranks whose process did not answer RAS at all: dead or unreachable,
//! a lead that their process went first.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host;
use crate::model::{CauseKind, Event, EventIdx, EventKind};

use super::Ctx;

/// How far below the previous report line the next one may lie.
const BLOCK_GAP: u64 = 8;
/// A rank that did not answer RAS: a lead only (RAS itself may be what
/// failed, nccl#1762), which a death or a silence of the same rank joins.
const MISSING: f64 = 0.3;
/// A process RAS declared dead: its peers lost every connection to it, so
/// it (or its node) went away; what killed it the logs may still tell.
const DEAD: f64 = 0.45;
/// Ranks above this are a corrupted report (nccl#1762), not ranks.
const MAX_RANK: u32 = 1 << 20;

/// One section of a flagged communicator's block.
#[derive(Default)]
struct Section {
    /// Its line (`Communicator ranks have different … operation counts`).
    idx: EventIdx,
    /// The op whose counts differ (2.26+), as NCCL names it.
    op: Option<String>,
    /// Launch-count groups, most common first: (launched, ranks).
    groups: Vec<Group>,
    /// Ranks listed as missing (an INCOMPLETE block).
    missing: Option<Vec<(u32, EventIdx)>>,
    /// The DEAD section: job processes the RAS network lost.
    dead: bool,
    /// Processes the section lists (dead or missing): pid, node, line.
    processes: Vec<(i64, String, EventIdx)>,
}

#[derive(Default)]
struct Group {
    idx: EventIdx,
    /// How many ranks RAS counted in it (a lone rank: 1).
    count: i64,
    launched: i64,
    ranks: Vec<(u32, EventIdx)>,
}

pub(super) fn ras_report(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let sections = sections(ctx);
    let mut out = Vec::new();
    out.extend(behind(ctx, &sections));
    out.extend(not_answering(ctx, &sections));
    out
}

/// The report shows ranks that launched different numbers of operations:
/// the job was stuck in a collective when it was taken.
pub fn ras_shows_a_hang(ctx: &Ctx<'_>) -> bool {
    sections(ctx).iter().any(|s| s.groups.len() > 1)
}

/// The report names processes that died or ranks that did not answer: the
/// job failed, whether or not it hung.
pub fn ras_shows_lost_processes(ctx: &Ctx<'_>) -> bool {
    sections(ctx).iter().any(|s| {
        (s.dead && !s.processes.is_empty()) || s.missing.as_ref().is_some_and(|m| !m.is_empty())
    })
}

/// The op whose launch counts differ (2.26+ names it), and its section line.
pub fn ras_collective(ctx: &Ctx<'_>) -> Option<(String, EventIdx)> {
    let s = sections(ctx)
        .into_iter()
        .find(|s| s.groups.len() > 1 && s.op.is_some())?;
    let op = s.op?;
    let name = ctx.kb.nccl_calls.op_type(&op).unwrap_or(&op).to_string();
    Some((name, s.idx))
}

/// Ranks that launched fewer operations than most.
fn behind(ctx: &Ctx<'_>, sections: &[Section]) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    for s in sections.iter().filter(|s| s.groups.len() > 1) {
        let most = s.groups.iter().max_by_key(|g| g.count)?;
        for g in s.groups.iter().filter(|g| g.launched < most.launched) {
            let op = s.op.as_deref().unwrap_or("collective");
            for &(rank, idx) in &g.ranks {
                if h.ranks.insert(rank) && h.support.len() < 4 {
                    h.support(
                        Source::Nccl,
                        0.65,
                        Some(idx),
                        format!(
                            "NCCL's RAS: rank {rank} launched {op} operations up to {}, while {} ranks launched up to {}",
                            g.launched, most.count, most.launched
                        ),
                    );
                }
            }
        }
        if !h.ranks.is_empty() {
            if let Some(op) = s.op.as_deref() {
                let name = ctx.kb.nccl_calls.op_type(op).unwrap_or(op);
                h.value("op", name.to_string());
            }
            h.value(
                "detail",
                format!(
                    "NCCL's RAS report shows the others launched up to operation {}",
                    most.launched
                ),
            );
            h.support(
                Source::Nccl,
                0.65,
                Some(most.idx),
                "NCCL's RAS report: most ranks launched more operations of this kind",
            );
            break;
        }
    }
    place(ctx, &mut h);
    (!h.ranks.is_empty()).then_some(h)
}

/// Ranks whose process did not answer RAS.
fn not_answering(ctx: &Ctx<'_>, sections: &[Section]) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ProcessCrash);
    for s in sections {
        for &(rank, idx) in s.missing.iter().flatten() {
            if h.ranks.insert(rank) && h.support.len() < 3 {
                h.support(
                    Source::Nccl,
                    MISSING,
                    Some(idx),
                    format!(
                        "NCCL's RAS got no answer from rank {rank}'s process: dead or unreachable"
                    ),
                );
            }
        }
    }
    let dead = add_dead_processes(ctx, sections, &mut h);
    if h.ranks.is_empty() && !dead {
        return None;
    }
    let reason = if dead {
        "NCCL's RAS declared it dead: unreachable via the RAS network"
    } else {
        "it did not answer NCCL's RAS: dead or unreachable"
    };
    h.value("reason", reason);
    let list: Vec<String> = h.ranks.iter().map(u32::to_string).collect();
    let who = match list.len() {
        0 => "A job process".to_string(),
        1 => format!("The process of rank {}", list[0]),
        _ => format!("The processes of ranks {}", list.join(", ")),
    };
    h.value("who", who);
    place(ctx, &mut h);
    Some(h)
}

/// The processes of the report's DEAD section, by the rank the report or
/// the job's own lines give their pid on that node. One whose rank no line
/// gives still places the failure on its node.
fn add_dead_processes(ctx: &Ctx<'_>, sections: &[Section], h: &mut Hypothesis) -> bool {
    let mut any = false;
    for s in sections.iter().filter(|s| s.dead) {
        for (pid, node, idx) in &s.processes {
            any = true;
            let rank = rank_of_process(ctx, *pid, node);
            let who = rank.map_or(format!("process {pid} on {node}"), |r| {
                format!("rank {r}'s process")
            });
            h.support(
                Source::Nccl,
                DEAD,
                Some(*idx),
                format!("NCCL's RAS declared {who} dead: its peers lost every connection to it"),
            );
            match rank {
                Some(r) => {
                    h.ranks.insert(r);
                }
                None if h.host.is_none() => {
                    h.host = Some(ctx.host_of_addr(node).unwrap_or(node).to_string());
                }
                None => {}
            }
        }
    }
    any
}

/// The rank of a process a report names by pid and node: from the report's
/// own rank lines, else from the job's ranks.
fn rank_of_process(ctx: &Ctx<'_>, pid: i64, node: &str) -> Option<u32> {
    let from_report = ctx
        .job
        .events_where(|k| k == EventKind::RasReport)
        .find(|(_, e)| {
            e.text_field("what") == Some("rank")
                && e.int("pid") == Some(pid)
                && e.text_field("node") == Some(node)
        })
        .and_then(|(_, e)| u32::try_from(e.int("rank")?).ok());
    from_report.or_else(|| {
        let host = ctx.host_of_addr(node).unwrap_or(node);
        ctx.job
            .ranks
            .values()
            .find(|r| {
                r.pid.map(i64::from) == Some(pid)
                    && r.host.as_deref().map(short_host) == Some(short_host(host))
            })
            .map(|r| r.rank)
    })
}

/// One rank named: its host, from the job's ranks or the report's node.
fn place(ctx: &Ctx<'_>, h: &mut Hypothesis) {
    let [rank] = h.ranks.iter().copied().collect::<Vec<_>>()[..] else {
        return;
    };
    let info = ctx.job.ranks.get(&rank);
    h.host = info.and_then(|i| i.host.clone());
    h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
    if h.host.is_none() {
        let node = h
            .support
            .iter()
            .filter_map(|s| s.event)
            .find_map(|i| ctx.job.events[i].text_field("node"));
        h.host = node.map(|n| ctx.host_of_addr(n).unwrap_or(n).to_string());
    }
}

/// The report's sections, in order.
fn sections(ctx: &Ctx<'_>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut last: Option<&Event> = None;
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::RasReport) {
        let near = last.is_some_and(|l| {
            l.origin.file == ev.origin.file && ev.origin.line <= l.origin.line + BLOCK_GAP
        });
        last = Some(ev);
        match ev.text_field("what") {
            Some("section") => out.push(Section {
                idx,
                op: ev.text_field("op").map(str::to_string),
                missing: ev.int("missing").map(|_| Vec::new()),
                ..Section::default()
            }),
            Some("dead") => out.push(Section {
                idx,
                dead: true,
                ..Section::default()
            }),
            Some("process") if near => {
                let (Some(s), Some(pid), Some(node)) =
                    (out.last_mut(), ev.int("pid"), ev.text_field("node"))
                else {
                    continue;
                };
                s.processes.push((pid, node.to_string(), idx));
            }
            Some("count") if near => {
                if let Some(s) = out.last_mut().filter(|s| s.missing.is_none()) {
                    s.groups.push(Group {
                        idx,
                        count: ev.int("count").unwrap_or(0),
                        launched: ev.int("launched").unwrap_or(0),
                        ranks: Vec::new(),
                    });
                }
            }
            Some("rank") if near => {
                let Some(s) = out.last_mut() else { continue };
                let Some(rank) = ev.int("rank").and_then(|r| u32::try_from(r).ok()) else {
                    continue;
                };
                if rank > MAX_RANK {
                    continue;
                }
                add_rank(s, ev, idx, rank);
            }
            _ => {}
        }
    }
    out
}

fn add_rank(s: &mut Section, ev: &Event, idx: EventIdx, rank: u32) {
    if let Some(missing) = &mut s.missing {
        missing.push((rank, idx));
        return;
    }
    // A lone rank carries its own count; a listed one belongs to the group
    // line above it.
    let own = ev
        .int("launched")
        .or_else(|| ev.text_field("none").map(|_| 0));
    match (own, s.groups.last_mut()) {
        (Some(launched), _) => s.groups.push(Group {
            idx,
            count: 1,
            launched,
            ranks: vec![(rank, idx)],
        }),
        (None, Some(g)) => g.ranks.push((rank, idx)),
        (None, None) => {}
    }
}
