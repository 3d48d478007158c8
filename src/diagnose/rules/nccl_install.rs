//! The NCCL a process loaded does not fit it: the network NCCL was told to
//! use (NCCL_NET) is not there, because its plugin is absent or failed to
//! load; the library is older than the NCCL the program was built against
//! (two installs, the older one found first); or the build was made for a
//! CUDA stack that cannot capture graphs on this driver. Or the host does
//! not give NCCL what its hardware promises: NICs of two link layers in one
//! connection, a multi-node NVLink system whose fabric handles the
//! container cannot use. Each is a set-up of the host or image that differs
//! from what the job expects: the `net_plugin`, `nccl_library`,
//! `link_layer` and `imex` variants of `config_mismatch`.

use std::collections::BTreeSet;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, Event, EventIdx, EventKind, PortSnapshot};

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
        link_layer_mix(ctx, &lines),
        mnnvl_unusable(ctx, &lines),
        net_count_mismatch(ctx, &lines),
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
    if first.text_field("net") == Some("IB")
        && let Some(h) = host
            .as_deref()
            .and_then(|h| no_port_active(ctx, h, *first_idx))
    {
        return Some(h);
    }
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    let efa = first.text_field("net").is_some_and(|n| n.contains("EFA"));
    h.value("variant", if efa { "efa_devices" } else { "net_plugin" });
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

/// NCCL found no IB device on `host` because none of its IB ports is
/// Active (a snapshot shows each Initializing, Down or Polling: no subnet
/// manager, no link): the ports' state, not the set-up, is the cause.
fn no_port_active(ctx: &Ctx<'_>, host: &str, missing: EventIdx) -> Option<Hypothesis> {
    let short = short_host_of(host);
    let ports: Vec<&PortSnapshot> = ctx
        .job
        .ports
        .iter()
        .filter(|p| p.host.as_deref().map(short_host_of).as_deref() == Some(short.as_str()))
        .filter(|p| p.link_layer.as_deref() != Some("Ethernet") && p.state.is_some())
        .collect();
    let first = ports.first()?;
    if ports.iter().any(|p| p.state.as_deref() == Some("Active")) {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::PortDegraded);
    h.host = Some(host.to_string());
    h.value("scope", "host");
    h.ranks = ctx.job.ranks_on_host(&short);
    let state = first.state.clone().unwrap_or_default();
    h.value(
        "detail",
        format!(
            "no IB port of {host} is Active ({} is {state}): NCCL found no IB device",
            first.device
        ),
    );
    h.support(
        Source::Nccl,
        0.5,
        Some(missing),
        "NCCL found no usable IB device on this host",
    );
    if let Some(line) = first.lines.get("state") {
        h.support_table(
            Source::Snapshot,
            0.5,
            line.clone(),
            format!(
                "{} port on {host} is {state}, like every IB port there",
                first.device
            ),
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

/// The lines of one `what`, with the first one's host.
fn lines_of<'e>(
    ctx: &Ctx<'_>,
    lines: &[(EventIdx, &'e Event)],
    what: &str,
) -> Option<(Vec<EventIdx>, &'e Event, Option<String>)> {
    let of: Vec<&(EventIdx, &Event)> = lines
        .iter()
        .filter(|(_, e)| e.text_field("what") == Some(what))
        .collect();
    let &&(_, first) = of.first()?;
    let host = ctx.job.host_of_event(first).map(str::to_string);
    Some((of.iter().map(|(i, _)| *i).collect(), first, host))
}

/// NCCL 2.26+ refuses to connect NICs of different link layers: NCCL_IB_HCA
/// (or the hosts' NICs) mixes InfiniBand ports with RoCE ones.
fn link_layer_mix(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let (idxs, first, host) = lines_of(ctx, lines, "link_layer_mix")?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "link_layer");
    h.host = host;
    h.device = first
        .text_field("device")
        .or(first.text_field("local_device"))
        .map(str::to_string);
    let detail = match (
        first.text_field("device"),
        first.text_field("link_layer"),
        first.text_field("other_device"),
        first.text_field("other_link_layer"),
    ) {
        (Some(a), Some(la), Some(b), Some(lb)) => format!("{a} is {la}, {b} is {lb}"),
        _ => format!(
            "a {} peer NIC against the local {} {}",
            first.text_field("remote_link_layer").unwrap_or("?"),
            first.text_field("local_link_layer").unwrap_or("?"),
            first.text_field("local_device").unwrap_or("NIC"),
        ),
    };
    h.value("detail", detail);
    cite_lines(
        &mut h,
        &idxs,
        "NCCL refused to connect NICs of different link layers (InfiniBand and RoCE)",
    );
    Some(h)
}

/// A multi-node NVLink system (GB200 NVL72) whose fabric memory handles the
/// process cannot export or import: its container has no IMEX channel, or
/// the IMEX service is not set up. NCCL fails the communicator.
fn mnnvl_unusable(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let (idxs, first, host) = lines_of(ctx, lines, "mnnvl_unusable")?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "imex");
    h.host = host;
    let detail = match (first.int("clique_size"), first.text_field("check")) {
        (Some(size), Some("IMEX channel configuration")) => format!(
            "a clique of {size} GPUs, but no usable IMEX channel (/dev/nvidia-caps-imex-channels)"
        ),
        (Some(size), _) => format!("a clique of {size} GPUs, but its fabric handles failed"),
        (None, _) => "MNNVL was required (NCCL_MNNVL_ENABLE=1) but is not supported".to_string(),
    };
    h.value("detail", detail);
    cite_lines(
        &mut h,
        &idxs,
        "NCCL found a multi-node NVLink system whose fabric memory this process cannot use (IMEX)",
    );
    Some(h)
}

/// NCCL's own refusal at set-up decides (0.65); the same line from more
/// processes is cited beside it, adding little.
fn cite_lines(h: &mut Hypothesis, idxs: &[EventIdx], why: &str) {
    for (n, &idx) in idxs.iter().take(CITED).enumerate() {
        h.support(
            Source::Nccl,
            if n == 0 { 0.65 } else { 0.05 },
            Some(idx),
            why,
        );
    }
}

/// NCCL 2.30.3+ failed init because its ranks found different numbers of
/// NICs; rank 0's INFO lines name the ranks with fewer, whose hosts are the
/// odd ones (a NIC down or absent there, or NCCL_IB_HCA set differently).
fn net_count_mismatch(ctx: &Ctx<'_>, lines: &[(EventIdx, &Event)]) -> Option<Hypothesis> {
    let (idxs, first, _) = lines_of(ctx, lines, "net_count_mismatch")?;
    let job = ctx.job;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "net_count");
    let kind = first.text_field("kind").unwrap_or("Net");
    let (min, max) = (first.int("min"), first.int("max"));
    let short: Vec<(EventIdx, u32)> = lines
        .iter()
        .filter(|(_, e)| {
            e.text_field("what") == Some("net_count_short") && e.text_field("kind") == Some(kind)
        })
        .filter_map(|(i, e)| Some((*i, u32::try_from(e.int("short_rank")?).ok()?)))
        .collect();
    h.ranks = short.iter().map(|&(_, r)| r).collect();
    let hosts: BTreeSet<&str> = h
        .ranks
        .iter()
        .filter_map(|r| job.ranks.get(r).and_then(|i| i.host.as_deref()))
        .collect();
    h.host = hosts.iter().next().map(|s| s.to_string());
    let who = match &h.ranks.iter().map(u32::to_string).collect::<Vec<_>>()[..] {
        [] => "some ranks".to_string(),
        ranks => format!("rank(s) {}", ranks.join(", ")),
    };
    h.value(
        "detail",
        format!(
            "{who} found {} {kind} device(s) where others found {}",
            min.map_or("fewer".into(), |m| m.to_string()),
            max.map_or("more".into(), |m| m.to_string())
        ),
    );
    h.support(
        Source::Nccl,
        0.65,
        idxs.first().copied(),
        "NCCL's ranks found different numbers of NICs and init stopped: a host has fewer than its peers",
    );
    for &(idx, _) in short.iter().take(CITED) {
        h.support(
            Source::Nccl,
            0.05,
            Some(idx),
            "rank 0 names this rank as one with fewer NICs than the others",
        );
    }
    Some(h)
}

/// dlopen found no file: the usual state of a host without a plugin.
fn plugin_absent(error: &str) -> bool {
    error.contains("cannot open shared object file")
}

/// The library is older than the program's NCCL headers, built for a CUDA
/// stack this driver cannot capture graphs with, or not there at all.
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
            Some("library_unloadable") => (
                0.6,
                "the process found no NCCL library to load: its collectives cannot run",
                format!(
                    "no NCCL library could be loaded (`{}`)",
                    ev.text_field("error").unwrap_or("no libnccl")
                ),
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
