//! Judging counter deltas with the counter knowledge: which rises are
//! suspicious, what they point to, and on whose NIC.
//!
//! A rise is suspicious when it passes its counter's rule (`min_delta`, or a
//! ratio against the port's traffic). Its weight grows with its severity and
//! size and with who uses the NIC: a small rise stays below a verdict's 0.35
//! on its own, a rise on a NIC nobody in the job uses counts half.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::Serialize;

use crate::grammar::counters::{CounterInfo, CounterKnowledge, Severity, Side};
use crate::model::{CauseKind, CounterDelta, CounterSource, Job, SourceLine};

use super::nic_use::{NicUse, Use};

/// Most rows `report.json` lists.
const MAX_ROWS: usize = 1000;
/// A small rise never reaches a verdict alone.
const SMALL_CAP: f64 = 0.34;
/// Congestion counters are judged against the fabric: a port counts only
/// when its rise is this many times the median port's, with at least
/// `SPREAD_MIN_PORTS` ports to compare.
const OUTLIER_FACTOR: f64 = 3.0;
const SPREAD_MIN_PORTS: usize = 4;

/// One counter's rise as the report shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CounterRow {
    pub host: Option<String>,
    pub device: String,
    pub port: Option<u32>,
    pub name: String,
    pub source: CounterSource,
    pub before: u64,
    pub after: u64,
    pub delta: Option<u64>,
    pub width_bits: Option<u8>,
    pub saturated: bool,
    pub reset: bool,
    pub wrap_suspect: bool,
    pub suspicious: bool,
    /// The counter's severity when suspicious.
    pub severity: Option<Severity>,
    pub cause: Option<CauseKind>,
    pub meaning: Option<String>,
    /// Whether a rank of the job uses this NIC (`null`: the logs do not say).
    pub nic_used: Option<bool>,
    pub ranks: Vec<u32>,
    /// `symbol_error +4,211 on node005 mlx5_3 port 1 (before 12, after 4,223)`.
    pub text: String,
    pub file: String,
    pub line: u64,
    #[serde(skip)]
    pub weight: f64,
    #[serde(skip)]
    pub cite: Option<SourceLine>,
    /// The HCA (a netdev's counters are mapped to it where known).
    #[serde(skip)]
    pub hca: String,
    /// The counter rises on the requester of a lossy path (see counters.toml).
    #[serde(skip)]
    pub requester_side: bool,
}

/// Every counter delta worth showing, judged; suspicious first.
pub fn review(
    job: &Job,
    kb: &CounterKnowledge,
    nics: &NicUse,
    stuck: &BTreeSet<u32>,
) -> Vec<CounterRow> {
    let traffic = traffic_deltas(job, kb);
    let spread = spread_medians(job, kb);
    // Judge every delta cheaply, keep the MAX_ROWS that matter, and only
    // then build their rows: a 16k-rank job has millions of deltas.
    let mut judged: Vec<Judged<'_>> = job
        .counter_deltas
        .iter()
        .filter_map(|d| {
            let info = kb.lookup(&d.name);
            if info.is_some_and(|i| i.context) || !worth_showing(d) {
                return None;
            }
            let factor = info
                .and_then(|i| i.outlier_factor)
                .unwrap_or(OUTLIER_FACTOR);
            let fabric_wide = info.is_some_and(|i| spread_judged(i, &spread, &d.name))
                && spread
                    .get(d.name.as_str())
                    .is_some_and(|&m| (d.delta.unwrap_or(0) as f64) < factor * m.max(1) as f64);
            Some(judgement(d, info, &traffic, nics, stuck, fabric_wide))
        })
        .collect();
    judged.sort_by(|a, b| {
        (b.weight > 0.0)
            .cmp(&(a.weight > 0.0))
            .then(b.severity().cmp(&a.severity()))
            .then(b.weight.total_cmp(&a.weight))
            .then_with(|| {
                let (x, y) = (a.delta, b.delta);
                (&x.host, &x.device, x.port, &x.name).cmp(&(&y.host, &y.device, y.port, &y.name))
            })
    });
    judged.truncate(MAX_ROWS);
    judged.iter().map(|j| row(job, j, nics)).collect()
}

/// A delta judged, before its row is built.
struct Judged<'a> {
    delta: &'a CounterDelta,
    info: Option<&'a CounterInfo>,
    /// `Some(large)` when suspicious by its counter's rule.
    level: Option<bool>,
    weight: f64,
    fabric_wide: bool,
}

impl Judged<'_> {
    fn severity(&self) -> Option<Severity> {
        self.info
            .filter(|_| self.level.is_some())
            .map(|i| i.severity)
    }
}

fn judgement<'a>(
    d: &'a CounterDelta,
    info: Option<&'a CounterInfo>,
    traffic: &Traffic,
    nics: &NicUse,
    stuck: &BTreeSet<u32>,
    fabric_wide: bool,
) -> Judged<'a> {
    let level = info
        .and_then(|i| judge(i, d, traffic))
        .filter(|_| !fabric_wide);
    let weight = match (info, level) {
        (Some(i), Some(big)) => weight_of(i, big, &nics.of(d.host.as_deref(), &d.device), stuck),
        _ => 0.0,
    };
    Judged {
        delta: d,
        info,
        level,
        weight,
        fabric_wide,
    }
}

/// Whether a counter's rise is judged against the fabric's median port:
/// congestion counters always; loss counters where most ports rose too.
fn spread_judged(info: &CounterInfo, spread: &BTreeMap<&str, u64>, name: &str) -> bool {
    match info.cause {
        Some(CauseKind::Congestion) => true,
        Some(CauseKind::PacketLoss) => spread.get(name).is_some_and(|&m| m >= 1),
        _ => false,
    }
}

/// Congestion or loss counter → the median rise over every port that
/// reports it. ECN marks, CNPs and pauses rising alike everywhere are the
/// congestion control of a loaded fabric doing its work; a few out-of-
/// sequence packets or duplicate requests on every port of every host are
/// a RoCE fabric's background, not one port's trouble.
fn spread_medians<'a>(job: &'a Job, kb: &CounterKnowledge) -> BTreeMap<&'a str, u64> {
    let mut rises: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for d in &job.counter_deltas {
        if kb
            .lookup(&d.name)
            .is_some_and(|i| matches!(i.cause, Some(CauseKind::Congestion | CauseKind::PacketLoss)))
        {
            rises.entry(&d.name).or_default().push(d.delta.unwrap_or(0));
        }
    }
    rises
        .into_iter()
        .filter_map(|(name, mut v)| {
            // Ports where the counter did not move hold no delta: zeros.
            let ports = (job.counter_ports.get(name).copied().unwrap_or(0) as usize).max(v.len());
            if ports < SPREAD_MIN_PORTS {
                return None;
            }
            v.resize(ports, 0);
            v.sort_unstable();
            Some((name, v[ports / 2]))
        })
        .collect()
}

fn worth_showing(d: &CounterDelta) -> bool {
    d.delta.is_some_and(|v| v > 0) || d.reset || d.saturated
}

/// (host, device, port, name) → delta, for ratio rules. Each delta is
/// filed under its printed name and its knowledge name (`PortRcvPkts` is
/// `port_rcv_packets`); only counters some rule divides by are filed (a
/// 16k-rank job has hundreds of thousands of deltas).
type Traffic<'a> = BTreeMap<(Option<&'a str>, &'a str, Option<u32>, &'a str), u64>;

fn traffic_deltas<'a>(job: &'a Job, kb: &'a CounterKnowledge) -> Traffic<'a> {
    let divisors: BTreeSet<&str> = kb
        .entries()
        .iter()
        .filter_map(|i| i.ratio_of.as_deref())
        .collect();
    let mut t = Traffic::new();
    for d in &job.counter_deltas {
        let Some(v) = d.delta else { continue };
        let key = |name: &'a str| (d.host.as_deref(), d.device.as_str(), d.port, name);
        if divisors.contains(d.name.as_str()) {
            t.insert(key(&d.name), v);
        }
        if let Some(i) = kb
            .lookup(&d.name)
            .filter(|i| divisors.contains(i.name.as_str()))
        {
            t.entry(key(&i.name)).or_insert(v);
        }
    }
    t
}

fn row(job: &Job, j: &Judged<'_>, nics: &NicUse) -> CounterRow {
    let (d, info, weight, fabric_wide) = (j.delta, j.info, j.weight, j.fabric_wide);
    let usage = nics.of(d.host.as_deref(), &d.device);
    let suspicious = weight > 0.0;
    CounterRow {
        host: d.host.as_deref().map(str::to_string),
        device: d.device.to_string(),
        port: d.port,
        name: d.name.to_string(),
        source: d.source,
        before: d.before,
        after: d.after,
        delta: d.delta,
        width_bits: d.width_bits,
        saturated: d.saturated,
        reset: d.reset,
        wrap_suspect: d.wrap_suspect,
        suspicious,
        severity: j.severity(),
        cause: info.and_then(|i| i.cause),
        meaning: info.map(|i| {
            if fabric_wide {
                format!(
                    "{}; it rose alike on the other ports (fabric-wide load)",
                    i.meaning
                )
            } else {
                i.meaning.clone()
            }
        }),
        nic_used: usage.as_flag(),
        ranks: usage.ranks().into_iter().collect(),
        text: describe(d),
        file: job.file_path(d.cite.origin.file).to_string(),
        line: d.cite.origin.line,
        weight,
        cite: Some(SourceLine {
            origin: d.cite.origin,
            text: d.cite.text.clone(),
        }),
        hca: nics.hca_of(d.host.as_deref(), &d.device).to_string(),
        requester_side: info.is_some_and(|i| i.side == Side::Requester),
    }
}

/// `Some(large)` when the rise is suspicious.
fn judge(info: &CounterInfo, d: &CounterDelta, traffic: &Traffic) -> Option<bool> {
    if info.context || info.severity == Severity::Info || d.reset {
        return None;
    }
    let rise = d.delta.filter(|&v| v > 0)?;
    let ratio = info
        .ratio_of
        .as_ref()
        .zip(info.max_ratio)
        .and_then(|(of, max)| {
            let key = (d.host.as_deref(), d.device.as_str(), d.port, of.as_str());
            traffic
                .get(&key)
                .filter(|&&t| t > 0)
                .map(|&t| (rise as f64 / t as f64, max))
        });
    let suspicious = match ratio {
        Some((r, max)) => r > max,
        None => rise >= info.min_delta,
    };
    suspicious.then(|| {
        info.err_delta.is_some_and(|e| rise >= e) || ratio.is_some_and(|(r, m)| r > 100.0 * m)
    })
}

/// The weight of one suspicious rise.
/// A suspicious rise's weight; congestion control doing its work (ECN
/// marks, CNPs) stays below a verdict of its own.
fn weight_of(info: &CounterInfo, large: bool, usage: &Use, stuck: &BTreeSet<u32>) -> f64 {
    let w = weigh(info.severity, large, usage, stuck);
    if info.corroborates_only {
        w.min(SMALL_CAP)
    } else {
        w
    }
}

fn weigh(severity: Severity, large: bool, usage: &Use, stuck: &BTreeSet<u32>) -> f64 {
    let base: f64 = match (severity, large) {
        (Severity::Err, true) => 0.55,
        (Severity::Err, false) => 0.3,
        (Severity::Warn, true) => 0.4,
        (Severity::Warn, false) => 0.2,
        (Severity::Info, _) => 0.0,
    };
    let w = match usage {
        Use::Used(ranks) if ranks.iter().any(|r| stuck.contains(r)) => base + 0.15,
        Use::Used(_) => base + 0.05,
        Use::Unused => base * 0.5,
        Use::Likely(_) | Use::Unknown => base,
    };
    if large { w.min(0.7) } else { w.min(SMALL_CAP) }
}

/// `symbol_error +4,211 on node005 mlx5_3 port 1 (before 12, after 4,223)`.
pub fn describe(d: &CounterDelta) -> String {
    let place = place(d.host.as_deref(), &d.device, d.port);
    let change = match d.delta {
        _ if d.reset => "was reset (driver reload or counters cleared)".to_string(),
        None if d.saturated => "saturated before the job: its rise is unknown".to_string(),
        Some(v) if d.saturated => format!("+{} at least (saturated)", thousands(v)),
        Some(v) if d.wrap_suspect => format!("+{} (assuming one 32-bit wrap)", thousands(v)),
        Some(v) => format!("+{}", thousands(v)),
        None => "?".to_string(),
    };
    format!(
        "{} {change} on {place} (before {}, after {})",
        d.name,
        thousands(d.before),
        thousands(d.after)
    )
}

/// `node005 mlx5_3 port 1`; unknown parts are left out.
pub fn place(host: Option<&str>, device: &str, port: Option<u32>) -> String {
    let device = if device == "?" {
        "an unnamed HCA"
    } else {
        device
    };
    let mut s = match host {
        Some(h) => format!("{h} {device}"),
        None => device.to_string(),
    };
    if let Some(p) = port {
        s.push_str(&format!(" port {p}"));
    }
    s
}

/// 4211 → `4,211`.
pub fn thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(name: &str, before: u64, after: u64) -> CounterDelta {
        CounterDelta {
            width_bits: Some(16),
            ..CounterDelta::rose("node005", "mlx5_3", name, before, after)
        }
    }

    #[test]
    fn the_delta_text() {
        assert_eq!(
            describe(&delta("symbol_error", 12, 4223)),
            "symbol_error +4,211 on node005 mlx5_3 port 1 (before 12, after 4,223)"
        );
        assert!(describe(&delta("link_downed", 9, 1)).contains("was reset"));
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn rules_decide_suspicion_and_size() {
        let kb = CounterKnowledge::builtin().unwrap();
        let t = Traffic::new();
        let se = kb.lookup("symbol_error").unwrap();
        assert_eq!(judge(se, &delta("symbol_error", 12, 4223), &t), Some(true));
        assert_eq!(judge(se, &delta("symbol_error", 12, 15), &t), Some(false));
        assert_eq!(judge(se, &delta("symbol_error", 12, 12), &t), None);
        assert_eq!(judge(se, &delta("symbol_error", 12, 3), &t), None);
        let cnp = kb.lookup("np_cnp_sent").unwrap();
        assert_eq!(judge(cnp, &delta("np_cnp_sent", 0, 500), &t), None);
        let mut t = Traffic::new();
        t.insert(
            (Some("node005"), "mlx5_3", Some(1), "rx_write_requests"),
            1000,
        );
        assert_eq!(judge(cnp, &delta("np_cnp_sent", 0, 500), &t), Some(false));
    }

    #[test]
    fn pause_storms_are_congestion_but_a_few_pauses_are_not() {
        let kb = CounterKnowledge::builtin().unwrap();
        let t = Traffic::new();
        let storm = kb.lookup("tx_pause_storm_error_events").unwrap();
        assert_eq!(storm.cause, Some(CauseKind::Congestion));
        assert!(judge(storm, &delta("tx_pause_storm_error_events", 0, 1), &t).is_some());
        let pause = kb.lookup("rx_prio3_pause").unwrap();
        assert_eq!(judge(pause, &delta("rx_prio3_pause", 0, 50), &t), None);
        assert_eq!(
            judge(pause, &delta("rx_prio3_pause", 0, 5_000_000), &t),
            Some(true)
        );
    }

    #[test]
    fn a_lone_small_rise_stays_below_a_verdict() {
        let stuck = BTreeSet::from([3]);
        let used = Use::Used(BTreeSet::from([3]));
        assert!(weigh(Severity::Err, false, &used, &stuck) < 0.35);
        assert!(weigh(Severity::Warn, true, &used, &stuck) >= 0.35);
        assert!(weigh(Severity::Err, true, &Use::Unused, &stuck) < 0.35);
    }

    #[test]
    fn dcqcn_marks_never_weigh_a_verdict_alone_but_pauses_do() {
        let kb = CounterKnowledge::builtin().unwrap();
        let stuck = BTreeSet::from([3]);
        let used = Use::Used(BTreeSet::from([3]));
        for name in [
            "np_ecn_marked_roce_packets",
            "np_cnp_sent",
            "rp_cnp_handled",
        ] {
            let info = kb.lookup(name).unwrap();
            assert!(weight_of(info, true, &used, &stuck) < 0.35, "{name}");
        }
        let pause = kb.lookup("tx_prio3_pause").unwrap();
        assert!(weight_of(pause, true, &used, &stuck) >= 0.35);
    }

    #[test]
    fn congestion_is_judged_against_the_median_port() {
        let kb = CounterKnowledge::builtin().unwrap();
        let mut job = Job::default();
        for (dev, rise) in [
            ("mlx5_0", 80),
            ("mlx5_1", 90),
            ("mlx5_2", 100),
            ("mlx5_3", 900),
        ] {
            let mut d = delta("np_ecn_marked_roce_packets", 0, rise * 1_000_000);
            d.device = dev.into();
            job.counter_deltas.push(d);
        }
        job.counter_deltas.push(delta("symbol_error", 0, 5));
        let medians = spread_medians(&job, &kb);
        assert_eq!(
            medians.get("np_ecn_marked_roce_packets"),
            Some(&100_000_000)
        );
        assert!(
            !medians.contains_key("symbol_error"),
            "only congestion counters"
        );
    }

    /// The devices whose rises the review finds suspicious.
    fn suspicious_devices(job: &Job, kb: &CounterKnowledge) -> Vec<String> {
        review(job, kb, &NicUse::new(job), &BTreeSet::new())
            .into_iter()
            .filter(|r| r.suspicious)
            .map(|r| r.device)
            .collect()
    }

    /// Busy ports all wait for credits, some several times more than
    /// others (perfquery's PortXmitWait): only one far above the median
    /// (ten times, `outlier_factor` in counters.toml) stands out.
    #[test]
    fn xmit_wait_stands_out_only_far_above_the_median_port() {
        let kb = CounterKnowledge::builtin().unwrap();
        let mut job = Job::default();
        let rises = [1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 150];
        for (i, rise) in rises.iter().enumerate() {
            let mut d = delta("PortXmitWait", 0, rise * 100_000_000);
            d.device = format!("mlx5_{i}").as_str().into();
            job.counter_deltas.push(d);
        }
        assert_eq!(suspicious_devices(&job, &kb), ["mlx5_10"]);
    }

    #[test]
    fn a_little_loss_on_every_port_is_background_but_one_port_far_above_is_not() {
        // RoCE hw_counters of a healthy run: out_of_sequence +1/+2 on every
        // port of every host; a lossy port rises far above them.
        let kb = CounterKnowledge::builtin().unwrap();
        let mut job = Job::default();
        for i in 0..12u64 {
            let mut d = delta("out_of_sequence", 10, 11 + i % 2);
            d.device = format!("mlx5_{i}").as_str().into();
            job.counter_deltas.push(d);
        }
        let mut lossy = delta("out_of_sequence", 10, 4010);
        lossy.device = "mlx5_12".into();
        job.counter_deltas.push(lossy);
        assert_eq!(suspicious_devices(&job, &kb), ["mlx5_12"]);
        // Alone, the same small rise is still judged on its own.
        let mut one = Job::default();
        one.counter_deltas.push(delta("out_of_sequence", 10, 12));
        let rows = review(&one, &kb, &NicUse::new(&one), &BTreeSet::new());
        assert_eq!(rows.iter().filter(|r| r.suspicious).count(), 1);
    }
}
