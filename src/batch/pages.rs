//! The batch's HTML pages: `index.html` (every job, sortable and filterable
//! with a few lines of inline script) and `fleet.html` (repeat offenders).
//! Both are self-contained like the job reports.

use std::collections::BTreeMap;

use askama::Template;

use super::fleet::Fleet;
use super::summary::JobRow;

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    root: String,
    counts: String,
    rows: Vec<RowView>,
}

struct RowView {
    id: String,
    link: Option<String>,
    status: String,
    stuck: String,
    collective: String,
    cause: String,
    confidence: String,
    culprit: String,
    time: String,
    error: bool,
}

#[derive(Template)]
#[template(path = "fleet.html")]
struct FleetPage {
    summary: String,
    offenders: Vec<OffenderView>,
}

struct OffenderView {
    kind: &'static str,
    key: String,
    count: usize,
    cost: u64,
    causes: String,
    first_seen: String,
    last_seen: String,
    jobs: Vec<(String, String)>,
}

pub fn index_html(root: &str, rows: &[JobRow]) -> String {
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        *by_status
            .entry(r.status.clone().unwrap_or_else(|| "error".into()))
            .or_default() += 1;
    }
    let counts = by_status
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    let page = IndexPage {
        root: root.into(),
        counts: format!("{} jobs: {counts}", rows.len()),
        rows: rows.iter().map(row_view).collect(),
    };
    page.render().expect("index template renders")
}

fn row_view(r: &JobRow) -> RowView {
    let place: Vec<String> = [
        r.host.clone(),
        r.device
            .as_ref()
            .map(|d| format!("{d}{}", r.port.map_or(String::new(), |p| format!(":{p}")))),
        r.gpu_bus_id.clone(),
        r.peer_host.as_ref().map(|p| format!("↔ {p}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    RowView {
        id: r.job_id.clone(),
        link: r.report.as_ref().map(|d| format!("{d}/report.html")),
        status: r.status.clone().unwrap_or_else(|| "error".into()),
        stuck: r
            .stuck_ranks
            .iter()
            .take(8)
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        collective: match (&r.op, r.seq) {
            (Some(op), Some(seq)) => format!("{op} #{seq}"),
            (Some(op), None) => op.clone(),
            _ => String::new(),
        },
        cause: r
            .cause
            .clone()
            .or_else(|| r.error.clone())
            .unwrap_or_default(),
        confidence: r.confidence.map_or(String::new(), |c| format!("{c:.2}")),
        culprit: place.join(" "),
        time: r.time.clone().unwrap_or_default(),
        error: r.error.is_some(),
    }
}

pub fn fleet_html(fleet: &Fleet, rows: &[JobRow]) -> String {
    let links: BTreeMap<&str, String> = rows
        .iter()
        .filter_map(|r| {
            r.report
                .as_ref()
                .map(|d| (r.job_id.as_str(), format!("{d}/report.html")))
        })
        .collect();
    let offenders = fleet
        .offenders
        .iter()
        .map(|o| OffenderView {
            kind: o.kind,
            key: o.key.clone(),
            count: o.jobs.len(),
            cost: o.cost,
            causes: o
                .causes
                .iter()
                .map(|(c, n)| format!("{c} ×{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            first_seen: o.first_seen.clone().unwrap_or_default(),
            last_seen: o.last_seen.clone().unwrap_or_default(),
            jobs: o
                .jobs
                .iter()
                .map(|j| {
                    (
                        j.clone(),
                        links.get(j.as_str()).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        })
        .collect();
    let summary = format!(
        "{} jobs ({} could not be analysed); {} hosts, NICs, GPUs or links implicated in two or more jobs, costliest first",
        fleet.jobs,
        fleet.failed_jobs,
        fleet.offenders.len()
    );
    FleetPage { summary, offenders }
        .render()
        .expect("fleet template renders")
}
