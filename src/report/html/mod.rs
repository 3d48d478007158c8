//! `report.html`: one self-contained page (inline CSS, no script, no network;
//! a CSP forbids any fetch). All log text goes through askama's HTML escaping;
//! the embedded JSON copy escapes `<`, `>` and `&` so a log line cannot close
//! its `<script>` element.

use std::collections::BTreeMap;

use askama::Template;

use crate::diagnose::{Cause, Evidence, RankRow, Status};
use crate::model::Skipped;

use super::{ReportInput, rank_list};

mod network;
mod ranks;
mod timeline;

#[derive(Template)]
#[template(path = "report.html")]
struct Page<'a> {
    version: &'static str,
    job_path: String,
    status: &'static str,
    status_label: String,
    headline: String,
    cause: Option<CauseView>,
    healthy_text: String,
    stuck: String,
    collective: Option<String>,
    alternatives: Vec<CauseView>,
    evidence: Vec<EvidenceView>,
    rank_counts: String,
    grid: ranks::Grid,
    rows: Vec<ranks::RowView>,
    hidden_rows: usize,
    timeline: Option<timeline::TimelineView>,
    network: network::NetworkView,
    facts: Vec<(String, String)>,
    notes: &'a [String],
    skipped: &'a [Skipped],
    data_json: String,
}

struct CauseView {
    kind: String,
    title: String,
    confidence_text: String,
    confidence_pct: u32,
    place: Vec<(String, String)>,
    place_text: String,
    summary: String,
    remedy: String,
}

struct EvidenceView {
    /// `file:line`, or the file alone for facts from a whole file (line 0).
    loc: String,
    /// The lines around it: (line number, text, is the cited line).
    context: Vec<(u64, String, bool)>,
    time: Option<String>,
    who: Option<String>,
    why: String,
    text: String,
}

pub fn render(input: &ReportInput<'_>, data_json: &str) -> String {
    let v = &input.diagnosis.verdict;
    let culprit_host = v.cause.as_ref().and_then(|c| c.host.as_deref());
    let (rows, hidden_rows) = ranks::rows(&input.diagnosis.ranks);
    let page = Page {
        version: env!("CARGO_PKG_VERSION"),
        job_path: input.job.root.clone(),
        status: v.status.name(),
        status_label: v.status.name().replace('_', " ").to_uppercase(),
        headline: headline(input),
        cause: v.cause.as_ref().map(cause_view),
        healthy_text: format!(
            "No failure found in {} file(s): no timeouts, errors or process deaths.",
            input.job.files.len()
        ),
        stuck: rank_list::describe(input, &v.stuck_ranks, None),
        collective: v.collective.as_ref().map(|c| {
            format!(
                "{} · seq {} · process group {}",
                c.op.as_deref().unwrap_or("?"),
                c.seq.map_or("?".into(), |s| s.to_string()),
                c.pg.as_deref().unwrap_or("?")
            )
        }),
        alternatives: v.alternatives.iter().map(cause_view).collect(),
        evidence: v.evidence.iter().map(evidence_view).collect(),
        rank_counts: rank_counts(&input.diagnosis.ranks),
        grid: ranks::grid(&input.diagnosis.ranks, culprit_host),
        rows,
        hidden_rows,
        timeline: timeline::build(input),
        network: network::build(input.diagnosis),
        facts: facts(input),
        notes: &input.diagnosis.notes,
        skipped: &input.job.skipped,
        data_json: escape_json_for_script(data_json),
    };
    page.render().expect("report template renders")
}

fn headline(input: &ReportInput<'_>) -> String {
    let v = &input.diagnosis.verdict;
    if v.status == Status::Healthy {
        return "The job shows no failure".into();
    }
    let who = match v.stuck_ranks.as_slice() {
        [] => "No single culprit rank".to_string(),
        [r] => format!("Rank {}", rank_list::one(input, *r)),
        rs => format!("Ranks {}", rank_list::describe(input, rs, Some(3))),
    };
    // A call that failed at set-up has no sequence number or group: the
    // headline names what is known, not placeholders.
    let what = match &v.collective {
        Some(c) => {
            let mut s = format!(" · {}", c.op.as_deref().unwrap_or("collective"));
            if let Some(seq) = c.seq {
                s.push_str(&format!(" #{seq}"));
            }
            if let Some(pg) = &c.pg {
                s.push_str(&format!(" (pg {pg})"));
            }
            s
        }
        None => String::new(),
    };
    let why = v
        .cause
        .as_ref()
        .map(|c| format!(" · {}", c.kind))
        .unwrap_or_default();
    format!("{who}{what}{why}")
}

fn cause_view(c: &Cause) -> CauseView {
    let mut place = Vec::new();
    if let Some(h) = &c.host {
        place.push(("host".to_string(), h.clone()));
    }
    if let Some(d) = &c.device {
        let port = c.port.map_or(String::new(), |p| format!(" port {p}"));
        place.push(("NIC".to_string(), format!("{d}{port}")));
    }
    if let Some(g) = &c.gpu_bus_id {
        place.push(("GPU".to_string(), g.clone()));
    }
    if let Some(p) = &c.peer_host {
        place.push(("peer".to_string(), p.clone()));
    }
    let place_text = place
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    CauseView {
        kind: c.kind.name().to_string(),
        title: c.title.clone(),
        confidence_text: format!("{:.2}", c.confidence),
        confidence_pct: (c.confidence * 100.0).round().clamp(0.0, 100.0) as u32,
        place,
        place_text,
        summary: c.summary.clone(),
        remedy: c.remedy.clone(),
    }
}

fn evidence_view(e: &Evidence) -> EvidenceView {
    let who = match (e.rank, &e.host) {
        (Some(r), Some(h)) => Some(format!("rank {r} on {h}")),
        (Some(r), None) => Some(format!("rank {r}")),
        (None, Some(h)) => Some(h.clone()),
        (None, None) => None,
    };
    EvidenceView {
        loc: super::location(&e.file, e.line),
        context: e
            .context
            .iter()
            .map(|c| (c.line, c.text.clone(), c.line == e.line))
            .collect(),
        time: e.time.clone(),
        who,
        why: e.why.clone(),
        text: e.text.clone(),
    }
}

fn rank_counts(rows: &[RankRow]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *counts.entry(r.state.name()).or_default() += 1;
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|(s, n)| format!("{n} {}", s.replace('_', " ")))
        .collect();
    format!("{} ranks: {}", rows.len(), parts.join(", "))
}

fn facts(input: &ReportInput<'_>) -> Vec<(String, String)> {
    let job = input.job;
    let mut f = vec![
        (
            "files".to_string(),
            format!(
                "{} ({} lines, {} bytes)",
                job.files.len(),
                job.files.iter().map(|f| f.lines).sum::<u64>(),
                job.files.iter().map(|f| f.bytes).sum::<u64>()
            ),
        ),
        (
            "ranks".to_string(),
            job.world_size
                .map_or_else(|| format!("{} seen", job.ranks.len()), |n| n.to_string()),
        ),
        (
            "hosts".to_string(),
            job.hosts.keys().cloned().collect::<Vec<_>>().join(" "),
        ),
    ];
    if !job.nccl_versions.is_empty() {
        f.push((
            "NCCL".to_string(),
            job.nccl_versions
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let offsets: Vec<String> = input
        .timeline
        .offsets
        .values()
        .map(|o| {
            format!(
                "{} {:+.3} s ({} collectives)",
                o.host,
                o.offset_ms as f64 / 1000.0,
                o.anchors
            )
        })
        .collect();
    if !offsets.is_empty() {
        f.push(("clock offsets".to_string(), offsets.join(", ")));
    }
    for (name, values) in &job.env {
        let vals: Vec<String> = values.keys().cloned().collect();
        f.push((name.clone(), vals.join(" | ")));
    }
    f
}

/// JSON inside `<script>`: `<`, `>` and `&` only occur inside JSON strings,
/// where their `\u` escapes mean the same.
fn escape_json_for_script(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_close_tags_in_log_text_are_neutralised() {
        let s = escape_json_for_script(r#"{"text":"</script><img src=x onerror=alert(1)>"}"#);
        assert!(!s.contains("</script>"));
        assert!(!s.contains('<'));
    }
}
