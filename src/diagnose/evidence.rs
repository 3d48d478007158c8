//! Turning hypotheses into the verdict's causes, with their evidence lines.

use std::collections::{BTreeMap, BTreeSet};

use crate::grammar::template::fill_template_with;
use crate::model::{CauseKind, EventIdx, EventKind, Job, Origin, SourceLine, rank_ranges};

use super::hang::Hang;
use super::hypothesis::{Hypothesis, Support};
use super::rules::Ctx;
use super::verdict::{Cause, Evidence};

const MAX_CAUSE_EVIDENCE: usize = 12;
const MAX_VERDICT_EVIDENCE: usize = 20;
const MAX_VICTIM_LINES: usize = 3;

/// One event as cited evidence.
pub fn evidence_for(ctx: &Ctx<'_>, idx: EventIdx, why: &str) -> Evidence {
    let ev = &ctx.job.events[idx];
    Evidence {
        file: ctx.job.file_path(ev.origin.file).to_string(),
        line: ev.origin.line,
        time: ctx.timeline.time_of(idx).map(|t| ctx.timeline.format(&t)),
        rank: ev.who.rank,
        host: ev.who.host.as_deref().map(str::to_string),
        text: ev.text.to_string(),
        why: why.to_string(),
        context: Vec::new(),
    }
}

/// What a support cites: an event, or a line of a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cited {
    Event(EventIdx),
    Table(Origin),
}

/// A support as evidence, once per cited line.
fn cite(
    ctx: &Ctx<'_>,
    s: &Support,
    seen: &mut std::collections::BTreeSet<Cited>,
) -> Option<Evidence> {
    if let Some(e) = s.event {
        return seen
            .insert(Cited::Event(e))
            .then(|| evidence_for(ctx, e, &s.why));
    }
    let line = s.table.as_ref()?;
    seen.insert(Cited::Table(line.origin))
        .then(|| table_evidence(ctx, line, &s.why))
}

/// A table line (a counter reading, a snapshot field) as cited evidence.
pub fn table_evidence(ctx: &Ctx<'_>, line: &SourceLine, why: &str) -> Evidence {
    let file = ctx.job.files.get(line.origin.file.0 as usize);
    Evidence {
        file: ctx.job.file_path(line.origin.file).to_string(),
        line: line.origin.line,
        time: None,
        rank: None,
        host: file.and_then(|f| f.hints.host.clone()),
        text: capped(&line.text),
        why: why.to_string(),
        context: Vec::new(),
    }
}

/// A table line can be long (one-line JSON): cite its start, marked with `…`.
fn capped(text: &str) -> String {
    const MAX: usize = 2000;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// What a summary says for a place no line of the logs names (a completion
/// error pasted without its writer's prefix): words, not a `?`.
fn unnamed(name: &str) -> String {
    match name {
        "host" | "peer_host" => "a host no line names".to_string(),
        "device" | "port" | "rank" | "gpu" => format!("a {name} no line names"),
        _ => "?".to_string(),
    }
}

pub fn to_cause(ctx: &Ctx<'_>, h: &Hypothesis, hang: Option<&Hang>) -> Cause {
    let variant = h.values.get("variant").map(String::as_str);
    let text = ctx.kb.cause_as(h.kind, variant);
    let values = template_values(ctx.job, h, hang);
    let mut seen = std::collections::BTreeSet::new();
    let evidence = h
        .ranked_support()
        .into_iter()
        .filter_map(|s| cite(ctx, s, &mut seen))
        .take(MAX_CAUSE_EVIDENCE)
        .collect();
    Cause {
        kind: h.kind,
        // An undecided cause claims nothing, however much its lines show.
        confidence: if h.kind == CauseKind::Unknown {
            0.0
        } else {
            h.capped_confidence()
        },
        host: h.host.clone(),
        device: h.device.clone(),
        port: h.port,
        gpu_bus_id: h.gpu_bus_id.clone(),
        peer_host: h.peer_host.clone(),
        title: text.title.clone(),
        summary: fill_template_with(&text.summary, &values, unnamed),
        remedy: fill_template_with(&text.remedy, &values, |name| format!("<{name}>")),
        ranks: h.ranks.iter().copied().collect(),
        evidence,
    }
}

fn template_values<'a>(
    job: &Job,
    h: &'a Hypothesis,
    hang: Option<&Hang>,
) -> BTreeMap<&'a str, String> {
    let mut v: BTreeMap<&str, String> = BTreeMap::new();
    let mut put = |k: &'a str, val: Option<String>| {
        if let Some(val) = val {
            v.insert(k, val);
        }
    };
    put("host", h.host.clone());
    put("device", h.device.clone());
    put("port", h.port.map(|p| p.to_string()));
    put("gpu", h.gpu_bus_id.clone());
    put("peer_host", h.peer_host.clone());
    let host_of = |r: &u32| job.ranks.get(r).and_then(|i| i.host.as_deref());
    let hosts: BTreeSet<Option<&str>> = h.ranks.iter().map(host_of).collect();
    if let [Some(one)] = hosts.iter().copied().collect::<Vec<_>>()[..] {
        put("ranks_host", Some(one.to_string()));
    }
    let ranks = match hosts.len() {
        1 => rank_ranges(&h.ranks.iter().copied().collect::<Vec<_>>()),
        _ => ranks_by_host(&h.ranks, host_of),
    };
    put("ranks", Some(ranks).filter(|s| !s.is_empty()));
    put("rank", h.ranks.iter().next().map(u32::to_string));
    if let [rank] = h.ranks.iter().collect::<Vec<_>>()[..] {
        put(
            "pid",
            job.ranks
                .get(rank)
                .and_then(|i| i.pid)
                .map(|p| p.to_string()),
        );
    }
    if let Some(hang) = hang {
        put("op", hang.op.clone());
        put("seq", hang.seq.map(|s| s.to_string()));
        put("pg", Some(hang.pg.clone()));
    }
    for (k, val) in &h.values {
        v.insert(k, val.clone());
    }
    v
}

/// `23 (gpu-032), 56–63 (gpu-037)`: ranks on several hosts, each run of
/// ranks on one host followed by its name, in rank order.
fn ranks_by_host<'j>(ranks: &BTreeSet<u32>, host_of: impl Fn(&u32) -> Option<&'j str>) -> String {
    let mut runs: Vec<(Option<&str>, Vec<u32>)> = Vec::new();
    for &rank in ranks {
        let host = host_of(&rank);
        match runs.last_mut() {
            Some((h, list)) if *h == host => list.push(rank),
            _ => runs.push((host, vec![rank])),
        }
    }
    let run = |(host, list): &(Option<&str>, Vec<u32>)| match host {
        Some(host) => format!("{} ({host})", rank_ranges(list)),
        None => rank_ranges(list),
    };
    runs.iter().map(run).collect::<Vec<_>>().join(", ")
}

/// The verdict's evidence: the cause's lines, then a few victims' timeouts.
pub fn verdict_evidence(
    ctx: &Ctx<'_>,
    cause: Option<&Cause>,
    hang: Option<&Hang>,
    collective_cited: Option<usize>,
) -> Vec<Evidence> {
    let mut out: Vec<Evidence> = cause.map(|c| c.evidence.clone()).unwrap_or_default();
    if let Some(idx) = collective_cited {
        let e = evidence_for(ctx, idx, "names the collective the rank was running");
        if !out.iter().any(|o| o.file == e.file && o.line == e.line) {
            out.push(e);
        }
    }
    if let Some(hang) = hang {
        let victims = hang
            .evidence
            .iter()
            .filter(|&&i| ctx.job.events[i].kind == EventKind::WatchdogTimeout)
            .take(MAX_VICTIM_LINES);
        for &idx in victims {
            let e = evidence_for(
                ctx,
                idx,
                "a rank's watchdog timed out waiting in the hung collective",
            );
            if !out.iter().any(|o| o.file == e.file && o.line == e.line) {
                out.push(e);
            }
        }
    }
    out.truncate(MAX_VERDICT_EVIDENCE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_on_several_hosts_are_listed_host_by_host() {
        let hosts = BTreeMap::from([(23, "gpu-032"), (57, "gpu-037"), (59, "gpu-037")]);
        let host_of = |r: &u32| hosts.get(r).copied();
        let ranks = BTreeSet::from([23, 57, 59, 70]);
        assert_eq!(
            ranks_by_host(&ranks, host_of),
            "23 (gpu-032), 57, 59 (gpu-037), 70"
        );
    }

    #[test]
    fn a_hosts_consecutive_ranks_are_one_range() {
        let host_of = |r: &u32| Some(if *r < 8 { "node1" } else { "node2" });
        let ranks: BTreeSet<u32> = (0..16).filter(|r| *r != 3).collect();
        assert_eq!(
            ranks_by_host(&ranks, host_of),
            "0–2, 4–7 (node1), 8–15 (node2)"
        );
    }
}
