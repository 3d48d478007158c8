//! A rank the others waited for, whose own GPU or NIC the logs show faulty,
//! or whose own process the logs show crashed: that is why it stalled. The
//! stall (the shape of the logs) and the fault (a device's or the kernel's
//! own report) are independent sources about one rank, so the stall's
//! support corroborates the fault instead of competing with it as a stall
//! "with no fault in the logs".

use std::collections::BTreeMap;

use crate::grammar::knowledge::Knowledge;
use crate::grammar::template::fill_template;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventIdx, EventKind, Job};

use super::hypothesis::{Hypothesis, Source};

/// A device fault must be a claim of its own (a verdict by itself) to
/// explain a stall: a program's fault on a healthy GPU (app-class Xid) is
/// not.
const MIN_OWN_CONFIDENCE: f64 = 0.35;

pub fn fold_into_device_faults(mut hyps: Vec<Hypothesis>) -> Vec<Hypothesis> {
    let mut i = 0;
    while i < hyps.len() {
        let owner = (hyps[i].kind == CauseKind::RankStalled)
            .then(|| explaining_fault(&hyps, &hyps[i]))
            .flatten();
        let Some(owner) = owner else {
            i += 1;
            continue;
        };
        let stall = hyps.remove(i);
        let owner = &mut hyps[if owner > i { owner - 1 } else { owner }];
        for mut s in stall.support {
            s.why = format!(
                "the rank this device serves is the one the others waited for: {}",
                s.why
            );
            owner.support.push(s);
        }
    }
    hyps
}

/// The strongest GPU, NIC or process fault whose ranks are all among the
/// stall's.
fn explaining_fault(hyps: &[Hypothesis], stall: &Hypothesis) -> Option<usize> {
    hyps.iter()
        .enumerate()
        .filter(|(_, h)| {
            matches!(
                h.kind,
                CauseKind::GpuFault | CauseKind::HcaFault | CauseKind::ProcessCrash
            )
        })
        .filter(|(_, h)| !h.ranks.is_empty() && h.ranks.is_subset(&stall.ranks))
        .filter(|(_, h)| h.confidence() >= MIN_OWN_CONFIDENCE)
        .max_by(|(ia, a), (ib, b)| a.confidence().total_cmp(&b.confidence()).then(ib.cmp(ia)))
        .map(|(i, _)| i)
}

/// Ranks the others waited for, on a node that stopped answering (Slurm's
/// `Not responding`, ssh's `No route to host`): the node went, and its
/// ranks with it. That is no stall "with no fault in the logs" of the
/// ranks' own making; why the node went, no line says, so the cause stays
/// undecided and names what would decide it.
pub fn on_unreachable_nodes(job: &Job, kb: &Knowledge, hyps: Vec<Hypothesis>) -> Vec<Hypothesis> {
    let gone = unreachable_nodes(job);
    if gone.is_empty() {
        return hyps;
    }
    let mut out: Vec<Hypothesis> = hyps
        .into_iter()
        .map(|mut h| {
            let host = h.host.as_deref().map(short_host_of);
            let Some((what, idx)) = host.as_ref().and_then(|host| gone.get(host)) else {
                return h;
            };
            if h.kind != CauseKind::RankStalled {
                return h;
            }
            let host = host.unwrap_or_default();
            h.kind = CauseKind::Unknown;
            h.device = None;
            h.gpu_bus_id = None;
            h.values.remove("variant");
            h.value("detail", gone_detail(kb, &host, what));
            h.support(
                Source::Launcher,
                0.5,
                Some(*idx),
                format!("{host} stopped answering ({what})"),
            );
            h
        })
        .collect();
    // Where no stall was placed on the node, an undecided verdict still
    // says which of the job's nodes went.
    for (host, (what, idx)) in &gone {
        let said = out.iter().any(|h| {
            h.kind == CauseKind::Unknown
                && h.host.as_deref().map(short_host_of).as_ref() == Some(host)
        });
        if said || job.ranks_on_host(host).is_empty() {
            continue;
        }
        let mut h = Hypothesis::new(CauseKind::Unknown);
        h.host = Some(host.clone());
        h.value("detail", gone_detail(kb, host, what));
        h.support(
            Source::Launcher,
            0.5,
            Some(*idx),
            format!("{host} stopped answering ({what})"),
        );
        out.push(h);
    }
    out
}

fn gone_detail(kb: &Knowledge, host: &str, what: &str) -> String {
    let values = BTreeMap::from([("host", host.to_string()), ("what", what.to_string())]);
    fill_template(&kb.unreachable_detail, &values)
}

/// Nodes some line says stopped answering, with the first such line.
fn unreachable_nodes(job: &Job) -> BTreeMap<String, (String, EventIdx)> {
    let mut out = BTreeMap::new();
    for (i, e) in job.events_where(|k| k == EventKind::NodeUnreachable) {
        let node = e.text_field("node").or(e.text_field("node2"));
        let what = e.text_field("what").or(e.text_field("what2")).unwrap_or("");
        if let Some(node) = node {
            out.entry(short_host_of(node))
                .or_insert_with(|| (what.to_string(), i));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::hypothesis::Source;

    fn hyp(kind: CauseKind, ranks: &[u32], weight: f64, source: Source) -> Hypothesis {
        let mut h = Hypothesis::new(kind);
        h.ranks = ranks.iter().copied().collect();
        h.support(source, weight, None, "x");
        h
    }

    #[test]
    fn a_fault_on_the_stalled_ranks_device_takes_the_stall_as_support() {
        let hyps = vec![
            hyp(CauseKind::RankStalled, &[5], 0.6, Source::Pattern),
            hyp(CauseKind::GpuFault, &[5], 0.5, Source::Kernel),
        ];
        let out = fold_into_device_faults(hyps);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, CauseKind::GpuFault);
        assert_eq!(out[0].confidence(), 0.8);
    }

    #[test]
    fn a_weak_fault_or_another_ranks_fault_leaves_the_stall_alone() {
        let hyps = vec![
            hyp(CauseKind::RankStalled, &[5], 0.6, Source::Pattern),
            hyp(CauseKind::GpuFault, &[5], 0.2, Source::Kernel),
            hyp(CauseKind::GpuFault, &[4], 0.8, Source::Kernel),
        ];
        let out = fold_into_device_faults(hyps);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].kind, CauseKind::RankStalled);
    }
}
