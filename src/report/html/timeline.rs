//! The timeline as inline SVG (works with JavaScript off): one lane per host,
//! the culprit's first; markers for kernel link / GPU / PCIe events, NCCL
//! errors, watchdog timeouts and deaths; the hung collective as a bar from
//! its enqueue to its timeout. Times are on the job's clock (skew-corrected);
//! each lane shows its host's offset. With many hosts only the eventful ones
//! get a lane; the rest are counted.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;

use crate::model::{EventKind, Level};

use super::super::ReportInput;

const WIDTH: f64 = 1080.0;
const LABEL: f64 = 170.0;
const LANE: f64 = 22.0;
const MAX_LANES: usize = 40;
const TICKS: usize = 6;

pub struct TimelineView {
    pub width: f64,
    pub height: f64,
    pub label_x: f64,
    pub lanes: Vec<LaneView>,
    pub ticks: Vec<(f64, String)>,
    pub quiet: String,
    pub legend: Vec<(&'static str, &'static str)>,
}

pub struct LaneView {
    pub y: f64,
    pub mid: f64,
    pub host: String,
    pub offset: String,
    pub culprit: bool,
    pub bar: Option<(f64, f64)>,
    pub marks: Vec<MarkView>,
}

pub struct MarkView {
    pub x: f64,
    pub class: &'static str,
    pub title: String,
}

/// What kind of marker an event gets, if any.
fn mark_class(kind: EventKind, level: Level) -> Option<&'static str> {
    Some(match kind {
        EventKind::KernelNicLink | EventKind::KernelIbPortState | EventKind::KernelNicModule => {
            "link"
        }
        EventKind::KernelGpuXid | EventKind::KernelGpuLost => "gpu",
        EventKind::KernelPcieAer | EventKind::KernelIommuFault => "aer",
        EventKind::KernelNicHealth
        | EventKind::KernelNicCmdError
        | EventKind::KernelNicTxTimeout => "hca",
        EventKind::WatchdogTimeout | EventKind::HeartbeatStuck => "timeout",
        EventKind::PythonException
        | EventKind::ProcessSignaled
        | EventKind::WorkerFailed
        | EventKind::KernelOomKill
        | EventKind::KernelSegfault => "death",
        EventKind::IbCompletionError
        | EventKind::IbAsyncEvent
        | EventKind::SocketError
        | EventKind::VerbsCallFailed
        | EventKind::BootstrapError
        | EventKind::ProxyError => "nccl",
        EventKind::NcclWarn if level >= Level::Warn => "nccl",
        _ => return None,
    })
}

pub const LEGEND: &[(&str, &str)] = &[
    ("timeout", "watchdog timeout"),
    ("death", "process death"),
    ("nccl", "NCCL / network error"),
    ("link", "kernel: link or transceiver"),
    ("hca", "kernel: NIC fault"),
    ("gpu", "kernel: GPU (Xid)"),
    ("aer", "kernel: PCIe AER"),
];

/// Per host, its markers.
type Lanes = BTreeMap<String, Vec<Mark>>;
/// Per host, the hung collective's earliest enqueue and latest timeout.
type Spans = BTreeMap<String, (NaiveDateTime, NaiveDateTime)>;

struct Mark {
    time: NaiveDateTime,
    class: &'static str,
    title: String,
}

pub fn build(input: &ReportInput<'_>) -> Option<TimelineView> {
    let (lanes, spans) = collect(input);
    let times: Vec<NaiveDateTime> = lanes
        .values()
        .flatten()
        .map(|m| m.time)
        .chain(spans.values().flat_map(|(a, b)| [*a, *b]))
        .collect();
    let (t0, t1) = (*times.iter().min()?, *times.iter().max()?);
    let span_ms = ((t1 - t0).num_milliseconds()).max(1000) as f64;
    let plot = WIDTH - LABEL - 20.0;
    let x = |t: NaiveDateTime| LABEL + 10.0 + plot * ((t - t0).num_milliseconds() as f64 / span_ms);
    let order = lane_order(input, &lanes);
    let shown: Vec<&String> = order.iter().take(MAX_LANES).collect();
    let quiet_hosts = input.job.hosts.len().saturating_sub(lanes.len());
    let hidden = order.len().saturating_sub(shown.len());
    let culprit = input
        .diagnosis
        .verdict
        .cause
        .as_ref()
        .and_then(|c| c.host.clone());
    let lane_views = shown
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let y = 30.0 + i as f64 * LANE;
            LaneView {
                y,
                mid: y + LANE / 2.0,
                host: (*host).clone(),
                offset: offset_label(input, host),
                culprit: culprit.as_deref() == Some(host.as_str()),
                bar: spans
                    .get(*host)
                    .map(|(a, b)| (x(*a), (x(*b) - x(*a)).max(2.0))),
                marks: lanes[*host]
                    .iter()
                    .map(|m| MarkView {
                        x: x(m.time),
                        class: m.class,
                        title: m.title.clone(),
                    })
                    .collect(),
            }
        })
        .collect::<Vec<_>>();
    let ticks = (0..=TICKS)
        .map(|k| {
            let t = t0 + chrono::Duration::milliseconds((span_ms * k as f64 / TICKS as f64) as i64);
            (x(t), t.format("%H:%M:%S").to_string())
        })
        .collect();
    let mut quiet = Vec::new();
    if hidden > 0 {
        quiet.push(format!("{hidden} more hosts with events not drawn"));
    }
    if quiet_hosts > 0 {
        quiet.push(format!("{quiet_hosts} hosts with no stamped event"));
    }
    Some(TimelineView {
        width: WIDTH,
        height: 40.0 + lane_views.len() as f64 * LANE,
        label_x: 6.0,
        lanes: lane_views,
        ticks,
        quiet: quiet.join(" · "),
        legend: LEGEND.to_vec(),
    })
}

/// Per host: its markers, and the hung collective's span (enqueue → timeout).
fn collect(input: &ReportInput<'_>) -> (Lanes, Spans) {
    let job = input.job;
    let mut lanes: BTreeMap<String, Vec<Mark>> = BTreeMap::new();
    let mut spans: BTreeMap<String, (NaiveDateTime, NaiveDateTime)> = BTreeMap::new();
    let hung = input
        .diagnosis
        .verdict
        .collective
        .as_ref()
        .and_then(|c| c.seq);
    for (i, ev) in job.events.iter().enumerate() {
        let Some(class) = mark_class(ev.kind, ev.level) else {
            continue;
        };
        let Some(t) = input.timeline.time_of(i) else {
            continue;
        };
        let host = ev
            .who
            .host
            .as_deref()
            .map(str::to_string)
            .or_else(|| {
                ev.who
                    .rank
                    .and_then(|r| job.ranks.get(&r))
                    .and_then(|r| r.host.clone())
            })
            .unwrap_or_else(|| "(unknown host)".into());
        if ev.kind == EventKind::WatchdogTimeout && ev.int("seq") == hung {
            let start =
                t - chrono::Duration::milliseconds(ev.int("elapsed_ms").unwrap_or(0).max(0));
            let span = spans.entry(host.clone()).or_insert((start, t));
            span.0 = span.0.min(start);
            span.1 = span.1.max(t);
        }
        let rank = ev
            .who
            .rank
            .map_or(String::new(), |r| format!(" · rank {r}"));
        let title = format!(
            "{}{rank} · {}:{}\n{}",
            input.timeline.format(&t),
            job.file_path(ev.origin.file),
            ev.origin.line,
            ev.text
        );
        lanes.entry(host).or_default().push(Mark {
            time: t,
            class,
            title,
        });
    }
    (lanes, spans)
}

/// The culprit's lane first, then hosts by how many markers they have.
fn lane_order(input: &ReportInput<'_>, lanes: &BTreeMap<String, Vec<Mark>>) -> Vec<String> {
    let culprit = input
        .diagnosis
        .verdict
        .cause
        .as_ref()
        .and_then(|c| c.host.as_deref());
    let peer = input
        .diagnosis
        .verdict
        .cause
        .as_ref()
        .and_then(|c| c.peer_host.as_deref());
    let mut hosts: Vec<&String> = lanes.keys().collect();
    hosts.sort_by_key(|h| {
        let rank = if Some(h.as_str()) == culprit {
            0
        } else if Some(h.as_str()) == peer {
            1
        } else {
            2
        };
        (rank, std::cmp::Reverse(lanes[*h].len()), (*h).clone())
    });
    hosts.into_iter().cloned().collect()
}

fn offset_label(input: &ReportInput<'_>, host: &str) -> String {
    match input.timeline.offsets.get(host) {
        Some(o) if o.offset_ms != 0 => format!("{:+.1} s", o.offset_ms as f64 / 1000.0),
        _ => String::new(),
    }
}
