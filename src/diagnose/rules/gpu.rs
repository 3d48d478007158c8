//! GPU faults: CUDA errors whose text means the hardware failed (uncorrectable
//! ECC, a GPU that fell off the bus), placed on the reporting rank's GPU.

use std::collections::BTreeMap;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind};

use super::Ctx;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_rank: BTreeMap<Option<u32>, Hypothesis> = BTreeMap::new();
    for (idx, ev) in ctx.job.events.iter().enumerate() {
        let Some(error) = cuda_error_text(ev) else {
            continue;
        };
        let Some(known) = ctx.kb.gpu_error(error) else {
            continue;
        };
        let weight = known.weight;
        let rank = ev.who.rank;
        let h = by_rank.entry(rank).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::GpuFault);
            if let Some(variant) = &known.variant {
                h.value("variant", variant.clone());
            }
            let info = rank.and_then(|r| ctx.job.ranks.get(&r));
            h.host = info
                .and_then(|i| i.host.clone())
                .or_else(|| ev.who.host.as_deref().map(str::to_string));
            h.gpu_bus_id = info.and_then(|i| i.gpu_bus_id.clone());
            h.ranks.extend(rank);
            let said_by = if ev.pattern.starts_with("nvml.") {
                "NVML"
            } else {
                "CUDA error"
            };
            h.value("detail", format!("{said_by}: {error}"));
            h
        });
        if h.support.len() < 6 {
            h.support(
                Source::Torch,
                weight,
                Some(idx),
                format!(
                    "{}: {error}",
                    known
                        .meaning
                        .as_deref()
                        .unwrap_or("the GPU reported a hardware error")
                ),
            );
        }
    }
    let mut out: Vec<Hypothesis> = by_rank.into_values().collect();
    for h in &mut out {
        if h.ranks.iter().any(|&r| only_program_faults_on(ctx, r)) {
            h.value(
                "detail",
                format!(
                    "{}; the driver blamed the program",
                    h.values.get("detail").map_or("", String::as_str)
                ),
            );
            h.support.iter_mut().for_each(|s| s.weight *= 0.3);
        }
    }
    out.extend(nvls_refused(ctx));
    out.extend(nvlink_p2p_disabled(ctx));
    out
}

/// Every Xid the kernel logged for `rank`'s GPU is the program's own (an
/// out-of-bounds access, an MMU fault, the channel reset after one: app and
/// follow classes): a CUDA error there (`unspecified launch failure`) is
/// how the program's fault reached it, not a failing GPU.
fn only_program_faults_on(ctx: &Ctx<'_>, rank: u32) -> bool {
    let Some(bus) = ctx
        .job
        .ranks
        .get(&rank)
        .and_then(|i| i.gpu_bus_id.as_deref())
    else {
        return false;
    };
    let mut any = false;
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if ev.kind != EventKind::KernelGpuXid
            || !place.ranks.contains(&rank) && place.pci.as_deref() != Some(bus)
        {
            continue;
        }
        match ev.int("xid").and_then(|code| ctx.kb.xid(code)) {
            Some(info) if matches!(info.class.as_str(), "app" | "follow") => any = true,
            _ => return false,
        }
    }
    any
}

/// NVML says two GPUs NCCL found connected by NVLink may not access each
/// other's memory (NCCL 2.12.7+ fails there): an NVLink fault, or on an
/// NVSwitch system a Fabric Manager that is not running.
fn nvlink_p2p_disabled(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::GpuFault);
    h.value("variant", "nvlink_p2p");
    for (idx, ev) in ctx
        .job
        .events_where(|k| k == EventKind::NvlsFailure)
        .filter(|(_, e)| e.text_field("action") == Some("p2p_disabled"))
    {
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            let (a, b) = (ev.int("gpu_a").unwrap_or(-1), ev.int("gpu_b").unwrap_or(-1));
            h.value("detail", format!("GPUs {a} and {b}"));
            place_on_nvml_devices(ctx, &mut h, [a, b]);
        }
        if h.support.len() < 3 {
            let weight = if h.support.is_empty() { 0.6 } else { 0.05 };
            h.support(
                Source::Nccl,
                weight,
                Some(idx),
                "NVML reports peer-to-peer access disabled between GPUs NCCL found connected by NVLink: NCCL calls it a hardware issue",
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}

const NVLS_WHY: &str = "NCCL could not set up NVLS multicast memory: the Fabric Manager or the NVSwitches failed or are misconfigured";

/// NCCL could not bind NVLS multicast memory: in its own words, a system or
/// configuration error in the Fabric Manager or the NVSwitches, which serve
/// every GPU of the host. Placed on the reporting host.
fn nvls_refused(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::GpuFault);
    h.value("variant", "nvswitch".to_string());
    for (idx, ev) in ctx
        .job
        .events_where(|k| k == EventKind::NvlsFailure)
        .filter(|(_, e)| e.text_field("action") != Some("p2p_disabled"))
    {
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            let error = ev.text_field("error").unwrap_or("no CUDA error named");
            let done = match ev.text_field("action") {
                Some("bind") | None => "bound",
                Some("allocate") => "allocated",
                Some("map") => "mapped",
                Some(_) => "set up",
            };
            let detail = if ev.text_field("action") == Some("fabric") {
                error.to_string()
            } else {
                format!("NVLS multicast memory could not be {done}: {error}")
            };
            h.value("detail", detail);
        }
        // NCCL's own words (2.27+) name the fabric; a bare CUDA error of its
        // NVLS calls (before 2.27) is the same story by the maintainers'
        // account; the driver's own word that its fabric state went stale
        // is the kernel's, a source of its own.
        let (source, weight, why) = match ev.text_field("action") {
            Some("fabric") => (
                Source::Kernel,
                0.5,
                "the GPU driver's NVLink fabric state is out of sync with the Fabric Manager: multicast (NVLS) mappings fail until the GPUs are reset",
            ),
            Some("set up") => (Source::Nccl, 0.45, NVLS_WHY),
            _ => (Source::Nccl, 0.55, NVLS_WHY),
        };
        if h.support.len() < 3 {
            h.support(source, weight, Some(idx), why);
        }
    }
    (!h.support.is_empty()).then_some(h)
}

/// The ranks of the host whose processes' init lines name one of the NVML
/// devices (`nvmlDev N`, NCCL 2.4+), and the bus id of the first device.
/// A process is known by its host and pid: a subgroup's init line numbers
/// its ranks its own way.
fn place_on_nvml_devices(ctx: &Ctx<'_>, h: &mut Hypothesis, devices: [i64; 2]) {
    let job = ctx.job;
    let Some(host) = h.host.clone() else {
        return;
    };
    let mut by_device: BTreeMap<i64, u32> = BTreeMap::new();
    for (_, ev) in job.events_where(|k| k == EventKind::NcclCommInit) {
        let Some(dev) = ev.int("nvml_dev").filter(|d| devices.contains(d)) else {
            continue;
        };
        if job.host_of_event(ev) != Some(host.as_str()) {
            continue;
        }
        let rank = job.ranks.values().find(|r| {
            r.host.as_deref() == Some(host.as_str()) && r.pid.is_some() && r.pid == ev.who.pid
        });
        if let Some(rank) = rank {
            by_device.entry(dev).or_insert(rank.rank);
        }
    }
    h.ranks = by_device.values().copied().collect();
    h.gpu_bus_id = by_device
        .get(&devices[0])
        .and_then(|r| job.ranks.get(r))
        .and_then(|info| info.gpu_bus_id.clone());
}

/// The CUDA error an event reports, if any.
pub fn cuda_error_text(ev: &Event) -> Option<&str> {
    match ev.kind {
        EventKind::WatchdogException => ev.text_field("cuda_error"),
        EventKind::CudaFailure => ev.text_field("error").or(ev.text_field("error2")),
        EventKind::PythonException => ev.text_field("message").and_then(python_cuda_error),
        _ => None,
    }
}

/// The CUDA error in a Python exception's message, in the wordings torch
/// has used: `CUDA error: …` (1.5+), THC's `cuda runtime error (39) : … at
/// file:line` (≤1.4), and the device count's `… Error 802: …` (1.8+).
fn python_cuda_error(message: &str) -> Option<&str> {
    if let Some((_, error)) = message.split_once("CUDA error: ") {
        return Some(error);
    }
    if let Some((_, rest)) = message.split_once("cuda runtime error (") {
        let (_, error) = rest.split_once(") : ")?;
        return Some(error.split_once(" at ").map_or(error, |(e, _)| e));
    }
    let (_, rest) = message.split_once("cudaGetDeviceCount()")?;
    let (_, coded) = rest.split_once(" Error ")?;
    coded.split_once(": ").map(|(_, e)| e)
}
