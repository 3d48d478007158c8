//! Device faults: HCA health, firmware and datapath errors, GPU Xids and
//! lost GPUs, and PCIe AER errors on the job's NICs and GPUs.

use std::collections::BTreeMap;

use super::{Ctx, Found, JobGpus, KernelLine, KernelPlace, Line, MAX_SUPPORT, Place, Window};
use super::{nic_ownership, time_factor};
use crate::model::{CauseKind, Event, EventIdx, EventKind};

pub(super) fn hca_line(ctx: &Ctx<'_>, line: KernelLine<'_>, found: &mut Found) {
    let (ev, idx, place, factor) = line.parts();
    let Some((weight, detail)) = hca_weight(ctx, ev) else {
        return;
    };
    let device = place.device().unwrap_or("the HCA");
    found.add(
        CauseKind::HcaFault,
        place,
        Line {
            weight: weight * factor * nic_ownership(ctx, place),
            idx,
            why: format!("the kernel reported a fault of {device}: {detail}"),
            detail,
        },
    );
}

/// How much an mlx5 line says the HCA failed, and what it says.
fn hca_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    match ev.kind {
        EventKind::KernelNicHealth => health_weight(ev),
        EventKind::KernelNicCmdError => command_weight(ctx, ev),
        EventKind::KernelCqeError => {
            let w = match ev.pattern {
                "kernel.mlx5_cq_error" => 0.4,
                "kernel.mlx5_ib_wc_error" => 0.15,
                _ => 0.25,
            };
            Some((w, "completion-queue error".into()))
        }
        EventKind::KernelNicTxTimeout => {
            if ev.int("recovered") == Some(1) {
                return None;
            }
            let failed = ev.pattern == "kernel.mlx5e_reopen_failed";
            let what = if ev.text_field("direction") == Some("rx") {
                "RX timeout"
            } else if failed {
                "could not recover from a TX timeout"
            } else {
                "transmit timeout"
            };
            Some((if failed { 0.5 } else { 0.35 }, what.into()))
        }
        _ => None,
    }
}

fn health_weight(ev: &Event) -> Option<(f64, String)> {
    let step = ev.text_field("step").unwrap_or("");
    Some(match ev.text_field("what")? {
        "fatal_error" => (
            0.8,
            format!("fatal error {} detected", ev.int("sensor").unwrap_or(0)),
        ),
        "health_compromised" => (0.8, "firmware heartbeat stopped".into()),
        "admin_timeout" => (0.7, "the device stopped completing admin commands".into()),
        "admin_closed" => (0.8, "admin queue closed, the device is lost".into()),
        "recovery" if step.contains("failed") || step.contains("error state") => {
            (0.8, format!("health recovery: {step}"))
        }
        "recovery" => (0.7, format!("health recovery: {step}")),
        "fw_reset" if step.contains("timeout") => (0.7, format!("firmware reset: {step}")),
        "fw_reset" => (0.6, format!("firmware reset: {step}")),
        "pci_error" => (0.7, "PCI error callback (AER / EEH)".into()),
        "health_buffer" => return health_buffer_weight(ev),
        "high_temperature" => (0.35, "NIC ASIC temperature warning".into()),
        "slot_power" => (0.4, "insufficient PCIe slot power".into()),
        "pcie_downtrained" => (0.2, "PCIe link downtrained".into()),
        _ => return None,
    })
}

/// Health buffer lines: severity ≤ 3 (ERROR) or `rfr 1` mean the adapter is lost.
fn health_buffer_weight(ev: &Event) -> Option<(f64, String)> {
    if let Some(rfr) = ev.int("rfr") {
        return (rfr == 1).then(|| (0.7, "firmware requires a reset (rfr 1)".into()));
    }
    if let Some(synd) = ev.int("synd") {
        let text = ev.text_field("synd_text").unwrap_or("");
        return Some((0.6, format!("health syndrome {synd:#x}: {text}")));
    }
    let severity = ev.int("severity")?;
    let issue = ev.text_field("issue").unwrap_or("health issue");
    Some(if severity <= 3 {
        (0.7, format!("{issue} (severity {severity})"))
    } else {
        (0.2, format!("{issue} (severity {severity})"))
    })
}

fn command_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    if ev.int("benign") == Some(1) {
        return None;
    }
    let command = ev.text_field("command").unwrap_or("a firmware command");
    if ev.int("timeout") != Some(1) {
        let status = ev.text_field("status").unwrap_or("?");
        return Some((
            0.25,
            format!("firmware command {command} failed ({status})"),
        ));
    }
    let w = if ctx.kb.is_wedged_command(command) {
        0.75
    } else if ev.int("recovered") == Some(1) {
        0.25
    } else if ev.int("late") == Some(1) {
        0.4
    } else {
        0.5
    };
    Some((w, format!("firmware command {command} timed out")))
}

// ---------------------------------------------------------------- GPU

pub(super) fn gpu_line(ctx: &Ctx<'_>, gpus: &JobGpus, line: KernelLine<'_>, found: &mut Found) {
    let (ev, idx, place, factor) = line.parts();
    let Some((weight, detail)) = gpu_weight(ctx, ev) else {
        return;
    };
    let weight = weight * factor * ownership(gpus, place);
    let gpu = place.pci.as_deref().unwrap_or("a GPU");
    found.add(
        CauseKind::GpuFault,
        place,
        Line {
            weight,
            idx,
            why: format!("the GPU driver reported on {gpu}: {detail}"),
            detail,
        },
    );
}

/// Xid weight by its class in the knowledge base; Xid 45 `caused by previous
/// Xid N` weighs as its root; NVLink5 Xids by their `Nonfatal`/`Fatal` word.
fn gpu_weight(ctx: &Ctx<'_>, ev: &Event) -> Option<(f64, String)> {
    if ev.kind == EventKind::KernelGpuLost {
        return Some(match ev.text_field("what") {
            Some("gsp_rpc_errors") => (0.6, "GSP RPC errors: the GPU likely needs a reset".into()),
            Some("reset_required") => (
                0.8,
                "the driver reports that the GPU must be reset (NV_ERR_RESET_REQUIRED)".into(),
            ),
            Some("no_device_handle") => (0.9, "nvidia-smi can no longer reach the GPU".into()),
            _ => (0.9, "the GPU has fallen off the bus".into()),
        });
    }
    let code = ev.int("xid")?;
    let root = ev.int("root_xid").filter(|_| code == 45);
    let Some(info) = ctx.kb.xid(root.unwrap_or(code)) else {
        return Some((0.4, format!("Xid {code} (not in the Xid table)")));
    };
    let class = if info.unit_word_decides && ev.text_field("unit_severity") == Some("Nonfatal") {
        "nvlink_nonfatal"
    } else {
        info.class.as_str()
    };
    let weight = ctx.kb.xid_class(class).map_or(0.4, |c| c.weight);
    let head = match root {
        Some(r) => format!("Xid {code} after Xid {r}: {}", info.name),
        None => format!("Xid {code}: {}", info.name),
    };
    let action = info.action.trim_end_matches('.');
    Some((weight, format!("{head}; next: {action}")))
}

/// A multi-line NVRM message names the GPU on its first line: cite that
/// line too where the GPU's fault is already supported.
pub(super) fn gpu_message_heads(ctx: &Ctx<'_>, found: &mut Found) {
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if ev.pattern != "kernel.nvrm_gpu_announce" {
            continue;
        }
        let key = (CauseKind::GpuFault, place.host.clone(), place.pci.clone());
        if let Some(p) = found.pending.get_mut(&key) {
            let why = "the driver's message about this GPU starts here".to_string();
            p.supports.push((0.3, idx, why));
        }
    }
}

fn ownership(gpus: &JobGpus, place: &KernelPlace) -> f64 {
    gpus.ownership(&place.host, &place.ranks)
}

// ---------------------------------------------------------------- PCIe AER

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Gpu,
    Nic,
}

/// Whether an AER line's device is one of the job's GPUs or NICs.
fn aer_target(gpus: &JobGpus, ctx: &Ctx<'_>, ev: &Event, place: &KernelPlace) -> Option<Target> {
    let pci = place.pci.as_deref()?;
    let devices = place
        .host
        .as_ref()
        .and_then(|h| ctx.job.kernel.hosts.get(h));
    let rank_gpu = !gpus.ranks(&place.host, pci).is_empty();
    let driver = ev.text_field("driver").unwrap_or("");
    if rank_gpu || driver == "nvidia" || devices.is_some_and(|d| d.gpus.contains_key(pci)) {
        Some(Target::Gpu)
    } else if driver.starts_with("mlx") || devices.is_some_and(|d| d.nics.contains_key(pci)) {
        Some(Target::Nic)
    } else {
        None
    }
}

pub(super) fn aer_line(ctx: &Ctx<'_>, gpus: &JobGpus, line: KernelLine<'_>, found: &mut Found) {
    let (ev, idx, place, factor) = line.parts();
    let weight = match ev.text_field("severity") {
        Some("fatal") => 0.5,
        Some("non-fatal") => 0.35,
        _ => return,
    };
    let Some(target) = aer_target(gpus, ctx, ev, place) else {
        return;
    };
    let pci = place.pci.as_deref().unwrap_or("?");
    let severity = ev.text_field("severity").unwrap_or("");
    let detail = format!("uncorrected ({severity}) PCIe error on {pci}");
    let (kind, place) = aer_place(gpus, target, place);
    found.add(
        kind,
        &place,
        Line {
            weight: weight * factor,
            idx,
            why: format!("PCIe AER: {detail}"),
            detail,
        },
    );
}

/// The IOMMU refused a DMA of one of the job's GPUs or NICs: peer-to-peer
/// and GPUDirect transfers through a translating IOMMU (or ACS sending them
/// up to the root complex) fault, and NCCL hangs in them. Told as the
/// host's IOMMU set-up (`iommu` variant), on the device that faulted.
pub(super) fn iommu_line(ctx: &Ctx<'_>, gpus: &JobGpus, line: KernelLine<'_>, found: &mut Found) {
    let (ev, idx, place, factor) = line.parts();
    let Some(target) = aer_target(gpus, ctx, ev, place) else {
        return;
    };
    let pci = place.pci.as_deref().unwrap_or("?");
    let detail = format!("the IOMMU refused a DMA of {pci}");
    let (kind, place) = aer_place(gpus, target, place);
    let line = Line {
        weight: 0.5 * factor,
        idx,
        why: format!("{detail}: peer-to-peer or GPUDirect traffic is blocked by the IOMMU"),
        detail,
    };
    found.add_variant(kind, &place, line, "iommu");
}

/// The hypothesis an AER line supports, with the GPU's ranks filled in.
fn aer_place(gpus: &JobGpus, target: Target, place: &KernelPlace) -> (CauseKind, KernelPlace) {
    let mut place = place.clone();
    if target == Target::Gpu {
        place.gpu = true;
        place.ranks = place
            .pci
            .as_deref()
            .map(|pci| gpus.ranks(&place.host, pci))
            .unwrap_or_default();
        (CauseKind::GpuFault, place)
    } else {
        (CauseKind::HcaFault, place)
    }
}

/// Corrected errors count only in bursts on one of the job's devices (a
/// degrading link often precedes Xid 79 or mlx5 `Fatal error 1`).
pub(super) fn corrected_aer_bursts(
    ctx: &Ctx<'_>,
    gpus: &JobGpus,
    window: Window,
    found: &mut Found,
) {
    const BURST: usize = 10;
    let mut bursts: BTreeMap<Place, Vec<EventIdx>> = BTreeMap::new();
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if ev.kind == EventKind::KernelPcieAer && ev.text_field("severity") == Some("corrected") {
            bursts
                .entry((place.host.clone(), place.pci.clone()))
                .or_default()
                .push(idx);
        }
    }
    for idxs in bursts.values().filter(|v| v.len() >= BURST) {
        let place = &ctx.job.kernel.places[&idxs[0]];
        let ev = &ctx.job.events[idxs[0]];
        let Some(target) = aer_target(gpus, ctx, ev, place) else {
            continue;
        };
        let (kind, place) = aer_place(gpus, target, place);
        let detail = format!(
            "{} corrected PCIe errors on {}",
            idxs.len(),
            place.pci.as_deref().unwrap_or("?")
        );
        for &idx in idxs.iter().take(MAX_SUPPORT) {
            found.add(
                kind,
                &place,
                Line {
                    weight: 0.2 * time_factor(ctx, window, idx),
                    idx,
                    why: format!("PCIe AER burst: {detail}"),
                    detail: detail.clone(),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::xid;
    use super::*;
    use crate::model::{Job, RawTime, Value};

    fn weight_of(ev: Event) -> f64 {
        let job = Job {
            events: vec![ev],
            ..Job::default()
        };
        Ctx::over(&job, |ctx| gpu_weight(ctx, &job.events[0]).unwrap().0)
    }

    #[test]
    fn xid_45_weighs_as_its_root_and_nvlink5_by_its_unit_word() {
        let alone = weight_of(xid(45, &[], RawTime::None));
        let after_149 = weight_of(xid(45, &[("root_xid", Value::Int(149))], RawTime::None));
        assert!(alone < 0.2 && after_149 > 0.6, "{alone} {after_149}");
        let nonfatal = weight_of(xid(
            144,
            &[("unit_severity", Value::Text("Nonfatal".into()))],
            RawTime::None,
        ));
        let fatal = weight_of(xid(
            149,
            &[("unit_severity", Value::Text("Fatal".into()))],
            RawTime::None,
        ));
        assert!(nonfatal < 0.35 && fatal > 0.6);
        assert!(weight_of(xid(13, &[], RawTime::None)) < 0.35);
        assert!(weight_of(xid(79, &[], RawTime::None)) > 0.85);
    }
}
