//! Workers that died starting CUDA of an error that says their host is set
//! up unlike the job needs, not that the program failed: a driver older
//! than the CUDA the program was built for, a driver and CUDA combination
//! the host cannot run (803, 804), an NVSwitch fabric whose Fabric
//! Manager the host could not start (802, where the host shows it). The
//! other hosts' ranks then wait for them in NCCL's init. The host's set-up
//! is the cause (`config_mismatch`, `driver` variant), its dead workers
//! the culprits; the messages are `[host_setup]` in grammars/knowledge.toml.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, Death, EventKind};

use super::Ctx;

/// Whether a death's reason is one of the start-up errors; an NVSwitch
/// fabric not ready (802) only on a host whose Fabric Manager failed, or
/// whose every dead worker (two or more) died of it: a GPU's own fault
/// takes its rank alone.
pub(super) fn is_set_up_death(ctx: &Ctx<'_>, d: &Death) -> bool {
    let reason = d.reason.to_ascii_lowercase();
    let says = |markers: &[String]| markers.iter().any(|m| reason.contains(m.as_str()));
    if says(&ctx.kb.host_setup_errors) {
        return true;
    }
    if !says(&ctx.kb.fabric_not_ready_errors) {
        return false;
    }
    let Some(host) = death_host(ctx, d) else {
        return false;
    };
    fabric_manager_failed_on(ctx).contains(&host) || all_died_not_ready(ctx, &host)
}

fn death_host(ctx: &Ctx<'_>, d: &Death) -> Option<String> {
    d.host.as_deref().map(short_host_of).or_else(|| {
        d.rank
            .and_then(|r| ctx.job.short_host_of_rank(r).map(str::to_string))
    })
}

/// The hosts whose Fabric Manager failed to start.
fn fabric_manager_failed_on(ctx: &Ctx<'_>) -> BTreeSet<String> {
    ctx.job
        .events_where(|k| k == EventKind::FabricManager)
        .filter_map(|(_, e)| e.who.host.as_deref().map(short_host_of))
        .collect()
}

/// Two or more of the host's workers died, each of the fabric not ready.
fn all_died_not_ready(ctx: &Ctx<'_>, host: &str) -> bool {
    let mut deaths = ctx
        .job
        .deaths
        .iter()
        .filter(|d| !d.consequence && death_host(ctx, d).as_deref() == Some(host))
        .peekable();
    let mut n = 0;
    let all = deaths.peek().is_some()
        && deaths.all(|d| {
            n += 1;
            let reason = d.reason.to_ascii_lowercase();
            ctx.kb
                .fabric_not_ready_errors
                .iter()
                .any(|m| reason.contains(m.as_str()))
        });
    all && n >= 2
}

pub(super) fn host_set_up_wrongly(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_host: BTreeMap<Option<String>, Hypothesis> = BTreeMap::new();
    for d in ctx.job.deaths.iter().filter(|d| !d.consequence) {
        if !is_set_up_death(ctx, d) {
            continue;
        }
        let host = death_host(ctx, d);
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
            h.host = host;
            h.value("variant", "driver");
            // The CUDA runtime's own error, where PyTorch's question
            // before it would fill the summary.
            let own = d
                .reason
                .find("Error 80")
                .map_or(&d.reason[..], |i| &d.reason[i..]);
            h.value("detail", super::process::clip(own, 160));
            h
        });
        h.ranks.extend(d.rank);
        if h.support.len() < 4 {
            for &ev in d.evidence.iter().take(1) {
                h.support(
                    Source::Torch,
                    0.8,
                    Some(ev),
                    "the worker died starting CUDA of an error that says its host's driver or GPU set-up does not fit the job",
                );
            }
        }
    }
    let failed_fm = fabric_manager_failed_on(ctx);
    for (host, h) in &mut by_host {
        if host.as_ref().is_some_and(|h| failed_fm.contains(h)) {
            cite_fabric_manager(ctx, host.as_deref().unwrap_or(""), h);
        }
    }
    by_host.into_values().collect()
}

/// The Fabric Manager's own failure lines on the host, as support.
fn cite_fabric_manager(ctx: &Ctx<'_>, host: &str, h: &mut Hypothesis) {
    let lines = ctx
        .job
        .events_where(|k| k == EventKind::FabricManager)
        .filter(|(_, e)| e.who.host.as_deref().map(short_host_of).as_deref() == Some(host));
    for (idx, e) in lines.take(2) {
        let why = match (e.text_field("fm_version"), e.text_field("driver_version")) {
            (Some(fm), Some(driver)) => format!(
                "the host's Fabric Manager ({fm}) does not match its driver ({driver}) and did not start: CUDA there is not ready (Error 802)"
            ),
            _ => "the host's Fabric Manager did not start: CUDA there is not ready (Error 802)"
                .into(),
        };
        h.support(Source::Kernel, 0.6, Some(idx), why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeathKind, Job, RawTime};

    fn death(rank: u32, reason: &str) -> Death {
        Death {
            rank: Some(rank),
            host: Some("n07".into()),
            pid: None,
            kind: DeathKind::Exception,
            exitcode: Some(1),
            signal: None,
            reason: reason.into(),
            consequence: false,
            stopped_by_launcher: false,
            ignored_sigterm: false,
            time: RawTime::None,
            evidence: vec![0],
        }
    }

    #[test]
    fn a_driver_too_old_for_the_programs_cuda_is_the_hosts_set_up_torch_2_4() {
        let mut job = Job::with_ranks_on(&[(0, "n05"), (1, "n07"), (2, "n07")]);
        job.deaths = vec![
            death(
                1,
                "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
            ),
            death(
                2,
                "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW",
            ),
        ];
        let found = Ctx::over(&job, host_set_up_wrongly);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, CauseKind::ConfigMismatch);
        assert_eq!(found[0].host.as_deref(), Some("n07"));
        assert_eq!(found[0].ranks.iter().copied().collect::<Vec<_>>(), [1, 2]);
        job.deaths = vec![death(1, "torch.OutOfMemoryError: CUDA out of memory.")];
        assert!(Ctx::over(&job, host_set_up_wrongly).is_empty());
    }

    const NOT_READY: &str = "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized";

    /// Error 802 on every dead worker of a host is its fabric's set-up;
    /// on one worker beside another death it stays the GPU rule's.
    #[test]
    fn a_fabric_not_ready_on_every_dead_worker_of_a_host_is_its_set_up_cuda_12() {
        let mut job = Job::with_ranks_on(&[(0, "n05"), (1, "n07"), (2, "n07")]);
        job.deaths = vec![death(1, NOT_READY), death(2, NOT_READY)];
        let found = Ctx::over(&job, host_set_up_wrongly);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].host.as_deref(), Some("n07"));
        job.deaths = vec![
            death(1, NOT_READY),
            death(2, "torch.OutOfMemoryError: CUDA out of memory."),
        ];
        assert!(Ctx::over(&job, host_set_up_wrongly).is_empty());
        job.deaths = vec![death(1, NOT_READY)];
        assert!(Ctx::over(&job, host_set_up_wrongly).is_empty());
    }
}
