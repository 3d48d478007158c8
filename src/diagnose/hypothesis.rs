//! A cause hypothesis, the evidence for it, and how evidence becomes confidence.
//!
//! Each piece of support comes from one *source* (NCCL, PyTorch, launcher,
//! kernel, counters, layout of the logs). Within a source only the strongest
//! piece counts — a thousand victims repeating the same line are one signal;
//! across sources they combine as independent: 1 − Π(1 − wᵢ). So several
//! independent sources raise confidence, and one weak signal stays weak.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{CauseKind, EventIdx, SourceLine};

/// Where a piece of support comes from (independent sources combine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Nccl,
    Torch,
    Launcher,
    /// The shape of the logs: who timed out, who was silent, sequence numbers.
    Pattern,
    /// Counter deltas between dumps taken before and after the job.
    Counters,
    /// Fabric snapshots: ibstat, ibstatus, ibv_devinfo, show_gids, mlxlink.
    Snapshot,
    /// The hosts' kernel logs (dmesg, journalctl -k, syslog).
    Kernel,
    /// Stack dumps of the processes (py-spy, faulthandler).
    Stacks,
}

#[derive(Debug, Clone)]
pub struct Support {
    pub source: Source,
    pub weight: f64,
    pub event: Option<EventIdx>,
    /// A line of a table file (counter dump, snapshot) cited instead of an event.
    pub table: Option<SourceLine>,
    pub why: String,
}

/// Confidence is capped: logs never prove a cause beyond doubt.
const MAX_CONFIDENCE: f64 = 0.97;

#[derive(Debug, Clone)]
pub struct Hypothesis {
    pub kind: CauseKind,
    pub host: Option<String>,
    pub device: Option<String>,
    pub port: Option<u32>,
    pub gpu_bus_id: Option<String>,
    pub peer_host: Option<String>,
    pub ranks: BTreeSet<u32>,
    /// Template values beyond the location fields (`detail`, `reason`, …).
    pub values: BTreeMap<&'static str, String>,
    pub support: Vec<Support>,
}

impl Hypothesis {
    pub fn new(kind: CauseKind) -> Hypothesis {
        Hypothesis {
            kind,
            host: None,
            device: None,
            port: None,
            gpu_bus_id: None,
            peer_host: None,
            ranks: BTreeSet::new(),
            values: BTreeMap::new(),
            support: Vec::new(),
        }
    }

    pub fn support(
        &mut self,
        source: Source,
        weight: f64,
        event: Option<EventIdx>,
        why: impl Into<String>,
    ) {
        self.support.push(Support {
            source,
            weight,
            event,
            table: None,
            why: why.into(),
        });
    }

    /// Support that cites a table line (a counter reading, a snapshot field).
    pub fn support_table(
        &mut self,
        source: Source,
        weight: f64,
        line: SourceLine,
        why: impl Into<String>,
    ) {
        self.support.push(Support {
            source,
            weight,
            event: None,
            table: Some(line),
            why: why.into(),
        });
    }

    pub fn value(&mut self, name: &'static str, value: impl Into<String>) {
        self.values.insert(name, value.into());
    }

    pub fn confidence(&self) -> f64 {
        let mut best: BTreeMap<Source, f64> = BTreeMap::new();
        for s in &self.support {
            let w = s.weight.clamp(0.0, 1.0);
            let slot = best.entry(s.source).or_insert(0.0);
            *slot = slot.max(w);
        }
        let miss: f64 = best.values().map(|w| 1.0 - w).product();
        ((1.0 - miss) * 100.0).round() / 100.0
    }

    pub fn capped_confidence(&self) -> f64 {
        self.confidence().min(MAX_CONFIDENCE)
    }

    /// Support ordered strongest first, then by line position, for evidence lists.
    pub fn ranked_support(&self) -> Vec<&Support> {
        let mut v: Vec<&Support> = self.support.iter().collect();
        v.sort_by(|a, b| {
            b.weight
                .total_cmp(&a.weight)
                .then(a.event.cmp(&b.event))
                .then_with(|| cited_origin(a).cmp(&cited_origin(b)))
        });
        v
    }
}

fn cited_origin(s: &Support) -> Option<crate::model::Origin> {
    s.table.as_ref().map(|t| t.origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_source_counts_once_and_sources_combine() {
        let mut h = Hypothesis::new(CauseKind::LinkFlap);
        for _ in 0..100 {
            h.support(Source::Nccl, 0.5, None, "victim names the peer");
        }
        assert_eq!(h.confidence(), 0.5);
        h.support(Source::Launcher, 0.6, None, "the launcher saw the death");
        assert_eq!(h.confidence(), 0.8);
    }
}
