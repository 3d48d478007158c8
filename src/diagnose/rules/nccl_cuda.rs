//! NCCL's own CUDA calls failing in ways that say the install or the
//! platform does not fit the job: a build without code for the GPU, a
//! runtime newer than the driver, a memory pool the platform cannot give,
//! buffers the processes cannot share. Only NCCL's own CUDA failures count
//! (the program's are its framework's build); each is a variant of
//! `config_mismatch`.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_bugs::NcclVersion;
use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

/// The release whose init first creates a CUDA memory pool.
const MEM_POOL_FROM: &str = "2.23.4";

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    [
        kernels_missing(ctx),
        driver_too_old(ctx),
        mem_pool_unsupported(ctx),
        p2p_sharing_mismatch(ctx),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What one of these rules claims about the failures it found.
struct Claim {
    variant: &'static str,
    /// Where the error came from, for the detail (`NCCL's init`).
    from: &'static str,
    weight: f64,
    why: &'static str,
}

/// NCCL's own kernels would not launch on this GPU (nccl#444: a K40's sm_35,
/// a build for newer GPUs; an A100 under NCCL 2.4; RCCL's `invalid kernel
/// file` for an integrated GPU): the library was built for other
/// architectures.
fn kernels_missing(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let failures = own_cuda_failures(ctx, |e| ctx.kb.no_kernel_for_gpu(e));
    let c = Claim {
        variant: "nccl_arch",
        from: "NCCL's own kernel launch",
        weight: 0.65,
        why: "NCCL's own kernel would not launch on this GPU: the build holds no code for its architecture",
    };
    claim(ctx, &failures, &c)
}

/// NCCL's own CUDA call found the driver older than the CUDA runtime it was
/// built with (cudaErrorInsufficientDriver: paddle#8195's cuda9.1 build of
/// NCCL in a CUDA 8 image; a system libnccl loaded instead of the wheel
/// the framework was built with): the library does not fit the host.
fn driver_too_old(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let failures = own_cuda_failures(ctx, |e| ctx.kb.driver_too_old_for_build(e));
    let c = Claim {
        variant: "nccl_library",
        from: "NCCL's own CUDA call",
        weight: 0.6,
        why: "NCCL's CUDA runtime needs a newer driver than the host's: the NCCL build does not fit this host",
    };
    claim(ctx, &failures, &c)
}

/// NCCL's own init refused by CUDA as `operation not supported`: from 2.23
/// on, init.cc creates a CUDA memory pool for every communicator, which
/// GPUs before Pascal, vGPU VMs without unified memory and some virtual
/// drivers do not support (a Tesla M10 under 2.23.4, a VMware vGPU under
/// 2.27.5, a CI runner's under a nightly's 2.2x). Other files' unsupported
/// operations (cuMem in alloc.h, NVLS) are other stories.
fn mem_pool_unsupported(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    if only_releases_before(ctx, MEM_POOL_FROM) {
        return None;
    }
    let failures: Vec<(EventIdx, &str)> =
        own_cuda_failures(ctx, |e| e.eq_ignore_ascii_case("operation not supported"))
            .into_iter()
            .filter(|&(idx, _)| in_nccl_init(&ctx.job.events[idx].text))
            .collect();
    let c = Claim {
        variant: "mem_pool",
        from: "NCCL's init",
        weight: 0.6,
        why: "CUDA refused the memory pool NCCL 2.23+ creates at init: this GPU, driver or VM does not support CUDA memory pools",
    };
    claim(ctx, &failures, &c)
}

/// NCCL's P2P transport could not share or open a peer's buffer (CUDA IPC
/// or cuMem handles refused as an invalid argument or pointer): the two
/// ends share GPU memory differently. NCCL_CUMEM_ENABLE set in some
/// processes only (vLLM 0.4.3+ sets it to 0 in its workers, and the
/// trainer joining their group keeps cuMem: vllm#5477, nemo-rl#564), or on
/// ROCm a container runtime the host's amdgpu driver does not serve
/// (rccl#1055, rccl#1454).
fn p2p_sharing_mismatch(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let failures: Vec<(EventIdx, &str)> = own_cuda_failures(ctx, |e| ctx.kb.p2p_sharing_refused(e))
        .into_iter()
        .filter(|&(idx, _)| ctx.job.events[idx].text.contains("p2p.cc:"))
        .collect();
    let c = Claim {
        variant: "p2p_sharing",
        from: "NCCL's P2P transport",
        weight: 0.5,
        why: "NCCL's P2P transport could not share a GPU buffer with its peer: the two processes share GPU memory differently",
    };
    claim(ctx, &failures, &c)
}

/// The `config_mismatch` a rule's failures make, placed on the first one's
/// host.
fn claim(ctx: &Ctx<'_>, failures: &[(EventIdx, &str)], c: &Claim) -> Option<Hypothesis> {
    let &(first, error) = failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", c.variant);
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from {}", c.from));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(Source::Nccl, c.weight, Some(idx), c.why);
    }
    Some(h)
}

/// Every release the logs print is older than `from`.
fn only_releases_before(ctx: &Ctx<'_>, from: &str) -> bool {
    let from = NcclVersion::parse(from);
    !ctx.job.nccl_versions.is_empty()
        && ctx
            .job
            .nccl_versions
            .iter()
            .all(|v| NcclVersion::parse(v).is_some_and(|r| Some(r) < from))
}

/// A line NCCL printed from its init.cc (`init.cc:417 NCCL WARN …`).
fn in_nccl_init(text: &str) -> bool {
    text.match_indices("init.cc:").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        before.is_none_or(|c| c == ' ' || c == '/' || c == ']')
    })
}

/// NCCL's own CUDA failures whose error text `matches`, with that text.
fn own_cuda_failures<'a>(
    ctx: &Ctx<'a>,
    matches: impl Fn(&str) -> bool,
) -> Vec<(EventIdx, &'a str)> {
    ctx.job
        .events_where(|k| k == EventKind::CudaFailure)
        .filter(|(_, ev)| ev.pattern.starts_with("nccl."))
        .filter_map(|(idx, ev)| Some((idx, super::cuda_error_text(ev)?)))
        .filter(|(_, error)| matches(error))
        .collect()
}
