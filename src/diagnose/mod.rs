//! Diagnose: from the joined job to the verdict — the stuck rank(s), the
//! collective, and the ranked causes with their evidence.

mod call_trace;
mod collective;
mod counter_review;
mod evidence;
mod fabric_check;
mod hang;
mod hypothesis;
mod last_lines;
mod nic_use;
mod ranks;
mod rules;
mod select;
mod stall_explained;
mod stops;
pub mod verdict;

use std::collections::BTreeSet;

use crate::grammar::knowledge::Knowledge;
use crate::model::{self, CauseKind, EventKind, Job};
use crate::timeline::Timeline;

pub use counter_review::CounterRow;
pub use fabric_check::{FabricFinding, FindingKind};
pub use hang::Hang;
pub use verdict::{
    Cause, Collective, ContextLine, Diagnosis, Evidence, RankRow, RankState, Status, Verdict,
};

use rules::Ctx;
pub use rules::FabricFacts;

/// Runs every rule over the job and decides the verdict.
pub fn diagnose(job: &Job, timeline: &Timeline, fabric: FabricFacts, kb: &Knowledge) -> Diagnosis {
    let ctx = Ctx { job, timeline, kb };
    let dead = accounted_deaths(&ctx);
    let erroring = ranks_with_errors(job);
    let with_logs = hang::ranks_with_logs(job);
    let hang = hang::find(job, ctx.timeline, &dead, &erroring, &with_logs);
    let (hyps, review) = rules::hypotheses(&ctx, hang.as_ref(), fabric);
    let mut hyps = select::merge(job, hyps);
    select::ranks_behind_the_port(job, &mut hyps);
    // After: a device read off the reporters' own channels pins no port
    // their peers' ranks could be set apart by.
    hyps.iter_mut().for_each(|h| fill_device(job, h));
    let hyps = select::explain(hyps, &kb.explains);
    let hyps = stall_explained::fold_into_device_faults(hyps);
    let mut hyps = stall_explained::on_unreachable_nodes(job, kb, hyps);
    hyps.iter_mut().for_each(|h| fill_port(job, h));
    let hyps = stops::without_the_stops_doing(&ctx, hyps);
    let mut choice = select::choose(&ctx, hyps, hang.as_ref());
    let status = select::status(&ctx, &choice, hang.as_ref());
    let healthy = status == Status::Healthy;
    // Nothing was stuck in a healthy run. In a degraded one, the ranks
    // behind the degraded part (its GPU, its NIC) are the ones every
    // collective waited for: the stragglers.
    let stuck_ranks: Vec<u32> = if healthy {
        Vec::new()
    } else if status == Status::Degraded {
        choice.best.ranks.iter().copied().collect()
    } else {
        select::stuck_ranks(job, &choice, hang.as_ref(), &erroring)
    };
    // A cause placed on a host whose silent ranks the hang names: those
    // ranks are the cause's too (its summary names them).
    if choice.best.ranks.is_empty() && choice.best.host.is_some() {
        let host = choice.best.host.as_deref().map(model::build::short_host_of);
        if !stuck_ranks.is_empty()
            && stuck_ranks
                .iter()
                .all(|&r| job.short_host_of_rank(r) == host.as_deref())
        {
            choice.best.ranks = stuck_ranks.iter().copied().collect();
        }
    }
    // What a healthy job's logs still showed (a port down that the job did
    // not use) stays in the report, below a verdict that blames nothing.
    if healthy && choice.best.kind != CauseKind::Unknown {
        let finding = choice.best.clone();
        choice.alternatives.insert(0, finding);
    }
    let named = collective::named(&ctx, hang.as_ref()).filter(|_| !healthy);
    let collective_cited = named.as_ref().and_then(|n| n.cited);
    let collective = named.map(|n| n.collective);
    let cause = (!healthy).then(|| evidence::to_cause(&ctx, &choice.best, hang.as_ref()));
    let alternatives = choice
        .alternatives
        .iter()
        .map(|h| evidence::to_cause(&ctx, h, hang.as_ref()))
        .collect();
    let verdict_evidence =
        evidence::verdict_evidence(&ctx, cause.as_ref(), hang.as_ref(), collective_cited);
    let ranks = ranks::rows(
        &ctx,
        &stuck_ranks,
        &dead,
        &erroring,
        &with_logs,
        hang.as_ref(),
    );
    let (counters, fabric) = review;
    Diagnosis {
        verdict: Verdict {
            status,
            stuck_ranks,
            collective,
            cause,
            alternatives,
            evidence: verdict_evidence,
        },
        ranks,
        notes: select::missing_inputs(&ctx, hang.as_ref()),
        counters,
        fabric,
    }
}

/// Ranks whose death explains their silence: those that died of their own
/// accord, and — once some rank did — every rank that died after it. Without a
/// culprit death, a rank the launcher stopped before its watchdog fired is
/// just silent: it may be the one the others waited for.
fn accounted_deaths(ctx: &Ctx<'_>) -> BTreeSet<u32> {
    let culprits: BTreeSet<u32> = rules::culprit_deaths(ctx).by_rank.keys().copied().collect();
    if culprits.is_empty() {
        return culprits;
    }
    ctx.job
        .deaths
        .iter()
        .filter_map(|d| d.rank)
        .chain(culprits)
        .collect()
}

/// A cause placed on an HCA without its port gets the port when the HCA has
/// only one that NCCL or the snapshots know of.
/// A cause of one port placed on a host but on no device (a failed verbs
/// call or a completion error printed without `hca`): where its ranks on
/// that host all send over one NIC, as their channel lines say (`via
/// NET/IB/5`), that NIC is the device.
fn fill_device(job: &Job, h: &mut hypothesis::Hypothesis) {
    use model::CauseKind as K;
    let of_a_port = matches!(
        h.kind,
        K::LinkFlap
            | K::PacketLoss
            | K::Congestion
            | K::MtuMismatch
            | K::PortDegraded
            | K::GidIndex
            | K::CrossRail
            | K::HcaFault
    );
    let (true, None, Some(host)) = (of_a_port, &h.device, h.host.as_deref()) else {
        return;
    };
    let mut nics = BTreeSet::new();
    for info in h.ranks.iter().filter_map(|r| job.ranks.get(r)) {
        if info
            .host
            .as_deref()
            .map(model::build::short_host_of)
            .as_deref()
            != Some(host)
        {
            continue;
        }
        if info.net_devs_used.is_empty() {
            return;
        }
        for &i in &info.net_devs_used {
            match info.nics_listed.get(i as usize) {
                Some((name, _)) => nics.insert(name.clone()),
                None => return,
            };
        }
    }
    if let (Some(nic), 1) = (nics.first(), nics.len()) {
        h.device = Some(nic.clone());
    }
}

fn fill_port(job: &Job, h: &mut hypothesis::Hypothesis) {
    let (Some(host), Some(device), None) = (h.host.as_deref(), h.device.as_deref(), h.port) else {
        return;
    };
    let from_nccl = job
        .hosts
        .get(host)
        .and_then(|i| i.nics.get(device))
        .and_then(|n| n.port);
    let snapshot_ports: BTreeSet<u32> = job
        .ports
        .iter()
        .filter(|p| p.device == device)
        .filter(|p| {
            p.host
                .as_deref()
                .map(model::build::short_host_of)
                .as_deref()
                == Some(host)
        })
        .filter_map(|p| p.port)
        .collect();
    h.port = from_nccl.or_else(|| {
        let mut ports = snapshot_ports.iter();
        match (ports.next(), ports.next()) {
            (Some(&p), None) => Some(p),
            _ => None,
        }
    });
}

/// Ranks that reported a NCCL or network error of their own.
fn ranks_with_errors(job: &Job) -> BTreeSet<u32> {
    job.events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::IbCompletionError
                    | EventKind::VerbsCallFailed
                    | EventKind::SocketError
                    | EventKind::BootstrapError
                    | EventKind::CudaFailure
                    | EventKind::NcclErrorReport
            )
        })
        .filter_map(|e| e.who.rank)
        .collect()
}
