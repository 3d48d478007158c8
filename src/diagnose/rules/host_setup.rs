//! Workers that died starting CUDA of an error that says their host is set
//! up unlike the job needs, not that the program failed: a driver older
//! than the CUDA the program was built for, a driver and CUDA combination
//! the host cannot run (803, 804). The other hosts'
//! ranks then wait for them in NCCL's init. The host's set-up is the
//! cause (`config_mismatch`, `driver` variant), its dead workers the
//! culprits; the messages are `[host_setup]` in grammars/knowledge.toml.

use std::collections::BTreeMap;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Death};

use super::Ctx;

/// Whether a death's reason is one of the start-up errors.
pub(super) fn is_set_up_death(ctx: &Ctx<'_>, d: &Death) -> bool {
    let reason = d.reason.to_ascii_lowercase();
    ctx.kb
        .host_setup_errors
        .iter()
        .any(|marker| reason.contains(marker.as_str()))
}

pub(super) fn host_set_up_wrongly(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_host: BTreeMap<Option<String>, Hypothesis> = BTreeMap::new();
    for d in ctx.job.deaths.iter().filter(|d| !d.consequence) {
        if !is_set_up_death(ctx, d) {
            continue;
        }
        let host = d.host.clone().or_else(|| {
            d.rank
                .and_then(|r| ctx.job.short_host_of_rank(r).map(str::to_string))
        });
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
            h.host = host;
            h.value("variant", "driver");
            h.value("detail", super::process::clip(&d.reason, 160));
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
    by_host.into_values().collect()
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
}
