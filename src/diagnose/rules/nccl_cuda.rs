//! NCCL's own CUDA calls failing in ways that say the install or the
//! platform does not fit the job: a build without code for the GPU, a
//! runtime newer than the driver, a memory pool the platform cannot give,
//! buffers the processes cannot share. Which errors, from which source
//! file and release, is data (`[[nccl_cuda_failure]]` in knowledge.toml);
//! only NCCL's own CUDA failures count (the program's are its framework's
//! build). Each is a variant of `config_mismatch`.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_cuda::NcclCudaFailure;
use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let own = own_cuda_failures(ctx);
    ctx.kb
        .nccl_cuda_failures
        .iter()
        .filter(|f| !f.ruled_out_by(&ctx.job.nccl_versions))
        .filter_map(|f| claim(ctx, f, &matching(ctx, &own, f)))
        .collect()
}

/// The failures among `own` that are `f`'s.
fn matching<'a>(
    ctx: &Ctx<'_>,
    own: &[(EventIdx, &'a str)],
    f: &NcclCudaFailure,
) -> Vec<(EventIdx, &'a str)> {
    own.iter()
        .filter(|&&(idx, error)| f.names(error) && f.from_source(&ctx.job.events[idx].text))
        .copied()
        .collect()
}

/// The `config_mismatch` a kind's failures make, placed on the first one's
/// host.
fn claim(ctx: &Ctx<'_>, f: &NcclCudaFailure, failures: &[(EventIdx, &str)]) -> Option<Hypothesis> {
    let &(first, error) = failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", f.variant.as_str());
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from {}", f.from));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(Source::Nccl, f.weight, Some(idx), f.why.as_str());
    }
    Some(h)
}

/// NCCL's own CUDA failures, with their error text.
fn own_cuda_failures<'a>(ctx: &Ctx<'a>) -> Vec<(EventIdx, &'a str)> {
    ctx.job
        .events_where(|k| k == EventKind::CudaFailure)
        .filter(|(_, ev)| ev.pattern.starts_with("nccl."))
        .filter_map(|(idx, ev)| Some((idx, super::cuda_error_text(ev)?)))
        .collect()
}
