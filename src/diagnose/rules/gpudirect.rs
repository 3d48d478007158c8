//! GPUDirect RDMA broken on a host's PCIe path: the NIC could not read or
//! write the GPU memory a transfer names, and its work completion came back
//! with status 4 (`IBV_WC_LOC_PROT_ERR`, local protection error). The NIC of
//! the rank that reports it failed on its own side, so unlike a transport
//! retry (status 12) the reporter is the culprit, not its peer. NCCL 2.30.7
//! prints the same reading as its hint: ACS redirecting peer-to-peer PCIe
//! traffic (or a translating IOMMU, or no peer-memory module) breaks
//! GPUDirect RDMA (`gdr` variant of `gpu_fault`).

use std::collections::BTreeSet;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::CauseKind;

use super::Ctx;
use super::network::completion_reports;

/// ibv_wc_status 4.
const LOC_PROT_ERR: i64 = 4;
/// Lines cited.
const CITED: usize = 6;

pub fn broken_gpudirect(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let reports: Vec<_> = completion_reports(ctx)
        .into_iter()
        .filter(|r| r.status == Some(LOC_PROT_ERR))
        .collect();
    let first = reports.first()?;
    let hosts: BTreeSet<&str> = reports.iter().filter_map(|r| r.host.as_deref()).collect();
    let mut h = Hypothesis::new(CauseKind::GpuFault);
    h.value("variant", "gdr");
    h.ranks = reports.iter().filter_map(|r| r.rank).collect();
    h.host = first.host.clone();
    h.device = ctx.job.events[first.idx]
        .text_field("hca")
        .map(str::to_string);
    if let [rank] = h.ranks.iter().copied().collect::<Vec<_>>()[..] {
        h.gpu_bus_id = ctx.job.ranks.get(&rank).and_then(|i| i.gpu_bus_id.clone());
    }
    let others: Vec<&str> = hosts
        .iter()
        .copied()
        .filter(|host| Some(*host) != first.host.as_deref())
        .collect();
    if !others.is_empty() {
        h.value("others", others.join(", "));
    }
    let by = match h.ranks.iter().map(u32::to_string).collect::<Vec<_>>()[..] {
        [] => String::new(),
        [ref rank] => format!(" by rank {rank}"),
        ref ranks => format!(" by ranks {}", ranks.join(", ")),
    };
    let on = if hosts.len() > 1 {
        format!(" on {} hosts", hosts.len())
    } else {
        String::new()
    };
    h.value(
        "detail",
        format!("IB completion status 4, local protection error,{by}{on}")
            .trim_end_matches(',')
            .to_string(),
    );
    // Hosts that each report it on their own are independent witnesses of a
    // set-up they share (one BIOS, one image).
    let weight = match hosts.len() {
        0 | 1 => 0.55,
        2 => 0.65,
        _ => 0.7,
    };
    for (i, r) in reports.iter().take(CITED).enumerate() {
        h.support(
            Source::Nccl,
            if i == 0 { weight } else { 0.2 },
            Some(r.idx),
            "the NIC could not access the GPU memory of its own transfer (status 4, local protection error): GPUDirect RDMA fails on this host's PCIe path",
        );
    }
    Some(h)
}
