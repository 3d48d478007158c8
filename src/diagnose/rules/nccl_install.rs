//! The NCCL a process loaded does not fit it: the network NCCL was told to
//! use (NCCL_NET) is not there, because its plugin is absent or failed to
//! load; the library is older than the NCCL the program was built against
//! (two installs, the older one found first); or the build was made for a
//! CUDA stack that cannot capture graphs on this driver. Each is a set-up
//! of the host or image that differs from what the job expects: the
//! `net_plugin` and `nccl_library` variants of `config_mismatch`.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_bugs::NcclVersion;
use crate::model::{CauseKind, Event, EventIdx, EventKind};

use super::Ctx;

/// Lines cited per hypothesis.
const CITED: usize = 3;

/// `NCCL_CONFIG_UNDEF_INT`: what a newer NCCL's config initializer leaves
/// for the library to fill, and an older library rejects.
const CONFIG_UNDEFINED: i64 = i32::MIN as i64;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let lines: Vec<(EventIdx, &Event)> = ctx
        .job
        .events_where(|k| k == EventKind::NcclInstall)
        .collect();
    [
        network_missing(ctx, &lines),
        library_mismatch(ctx, &lines),
        verbs_provider_missing(ctx, &lines),
        kernels_missing(ctx),
        driver_too_old(ctx),
        mem_pool_unsupported(ctx),
        p2p_sharing_mismatch(ctx),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The network NCCL was told to use is missing; a plugin's load error on
/// the same host says why.
fn network_missing(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let (first_idx, first) = lines
        .iter()
        .find(|(_, e)| e.text_field("what") == Some("net_missing"))?;
    let host = ctx.job.host_of_event(first).map(str::to_string);
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "net_plugin");
    h.host.clone_from(&host);
    let net = match (first.text_field("net"), first.text_field("error")) {
        (Some(net), Some(error)) => format!("{net}: no provider, `{error}`"),
        (Some(net), None) => format!("network {net} not found"),
        (None, _) => String::from("no network plugin initialised"),
    };
    h.support(
        Source::Nccl,
        0.6,
        Some(*first_idx),
        "NCCL could not find the network it was told to use, so no communicator can set up",
    );
    let load_error = lines.iter().find(|(_, e)| {
        e.text_field("what") == Some("plugin_load_error")
            && ctx.job.host_of_event(e).map(str::to_string) == host
            && e.text_field("error").is_some_and(|err| !plugin_absent(err))
    });
    match load_error {
        Some((idx, ev)) => {
            let error = ev.text_field("error").unwrap_or_default();
            h.value(
                "detail",
                format!("{net}; its plugin failed to load: {error}"),
            );
            h.support(
                Source::Nccl,
                0.2,
                Some(*idx),
                "the network plugin library is there but failed to load",
            );
        }
        None => h.value("detail", net),
    }
    for &(idx, _) in lines
        .iter()
        .filter(|(i, e)| i != first_idx && e.text_field("what") == Some("net_missing"))
        .take(CITED - 2)
    {
        h.support(
            Source::Nccl,
            0.05,
            Some(idx),
            "another process could not find it either",
        );
    }
    Some(h)
}

/// libibverbs found the RDMA device but no provider library for it: NCCL
/// cannot use the NIC. With an NCCL error beside it that is why the job
/// failed; alone it is a lead (NCCL falls back to sockets, slow but alive).
fn verbs_provider_missing(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let missing: Vec<&(EventIdx, &Event)> = lines
        .iter()
        .filter(|(_, e)| e.text_field("what") == Some("verbs_provider_missing"))
        .collect();
    let (_, first) = missing.first()?;
    let failed = ctx.job.events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::NcclErrorReport | EventKind::VerbsCallFailed | EventKind::NcclWarn
        )
    });
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "verbs_provider");
    h.host = ctx.job.host_of_event(first).map(str::to_string);
    let detail = match (first.text_field("device"), first.text_field("driver")) {
        (Some(device), _) => format!("no driver for `{device}`"),
        (None, Some(driver)) => format!(
            "its `{driver}` driver would not load: {}",
            first.text_field("error").unwrap_or("?")
        ),
        (None, None) => "no driver".to_string(),
    };
    h.value("detail", detail);
    for &&(idx, _) in missing.iter().take(CITED) {
        h.support(
            Source::Nccl,
            if h.support.is_empty() && failed {
                0.55
            } else {
                0.3
            },
            Some(idx),
            "libibverbs found no provider library for the RDMA device: NCCL cannot use it",
        );
    }
    Some(h)
}

/// NCCL's own kernels would not launch on this GPU (nccl#444: a K40's sm_35,
/// a build for newer GPUs; an A100 under NCCL 2.4): the library was built
/// for other architectures. Only NCCL's own CUDA failures count: the
/// program's kernels failing so is the framework's build, not NCCL's.
fn kernels_missing(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let failures = own_cuda_failures(ctx, |e| ctx.kb.no_kernel_for_gpu(e));
    let (first, error) = *failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "nccl_arch");
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from NCCL's own kernel launch"));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(
            Source::Nccl,
            0.65,
            Some(idx),
            "NCCL's own kernel would not launch on this GPU: the build holds no code for its architecture",
        );
    }
    Some(h)
}

/// NCCL's own CUDA call found the driver older than the CUDA runtime it was
/// built with (cudaErrorInsufficientDriver: paddle#8195's cuda9.1 build of
/// NCCL in a CUDA 8 image; a system libnccl loaded instead of the wheel
/// the framework was built with): the library does not fit the host.
fn driver_too_old(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let failures = own_cuda_failures(ctx, |e| ctx.kb.driver_too_old_for_build(e));
    let (first, error) = *failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "nccl_library");
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from NCCL's own CUDA call"));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(
            Source::Nccl,
            0.6,
            Some(idx),
            "NCCL's CUDA runtime needs a newer driver than the host's: the NCCL build does not fit this host",
        );
    }
    Some(h)
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
    let &(first, error) = failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "mem_pool");
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from NCCL's init"));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(
            Source::Nccl,
            0.6,
            Some(idx),
            "CUDA refused the memory pool NCCL 2.23+ creates at init: this GPU, driver or VM does not support CUDA memory pools",
        );
    }
    Some(h)
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
    let &(first, error) = failures.first()?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "p2p_sharing");
    h.host = ctx
        .job
        .host_of_event(&ctx.job.events[first])
        .map(str::to_string);
    h.value("detail", format!("`{error}` from NCCL's P2P transport"));
    for &(idx, _) in failures.iter().take(CITED) {
        h.support(
            Source::Nccl,
            0.5,
            Some(idx),
            "NCCL's P2P transport could not share a GPU buffer with its peer: the two processes share GPU memory differently",
        );
    }
    Some(h)
}

/// The release whose init first creates a CUDA memory pool.
const MEM_POOL_FROM: &str = "2.23.4";

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

/// dlopen found no file: the usual state of a host without a plugin.
fn plugin_absent(error: &str) -> bool {
    error.contains("cannot open shared object file")
}

/// The library is older than the program's NCCL headers, or built for a
/// CUDA stack this driver cannot capture graphs with.
fn library_mismatch(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "nccl_library");
    for &(idx, ev) in lines {
        let (weight, why, detail) = match ev.text_field("what") {
            Some("config_invalid") if ev.int("value") == Some(CONFIG_UNDEFINED) => (
                0.65,
                "NCCL rejected a config value its newer releases fill in: the program was built against a newer NCCL than the library it loaded",
                format!(
                    "NCCL rejected the {} attribute left undefined by a newer NCCL's initializer",
                    ev.text_field("attribute").unwrap_or("config")
                ),
            ),
            Some("cuda_build") => (
                0.55,
                "this NCCL build cannot be captured in a CUDA graph on this driver: it was built for another CUDA release",
                "the NCCL build cannot be captured in a CUDA graph: built for a CUDA runtime or driver other than this host's".to_string(),
            ),
            Some("efa_cuda_register") => (
                0.55,
                "libfabric refused to register CUDA memory for the EFA plugin: NCCL 2.19+ with the libfabric of an EFA installer before 1.29 fail so",
                "libfabric refused to register CUDA memory (`RC: -22`)".to_string(),
            ),
            _ => continue,
        };
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.value("detail", detail);
            if ev.text_field("what") == Some("efa_cuda_register") {
                h.value("variant", "efa_libfabric");
            }
        }
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                if h.support.is_empty() { weight } else { 0.05 },
                Some(idx),
                why,
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}
