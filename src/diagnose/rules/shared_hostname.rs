//! Two machines that answer to one host name. NCCL before 2.5.6 told hosts
//! apart by their name alone (2.5.6 added the boot id to the host hash), so
//! ranks on two machines that share a name were taken for neighbours: their
//! rings went `via P2P/IPC` or shared memory, and the CUDA IPC handle of a
//! GPU on the other machine cannot be opened (horovod#110, horovod#148: VMs
//! cloned with one name). The logs show it where processes of "one host"
//! list the same interface with different addresses.

use std::collections::BTreeMap;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_bugs::NcclVersion;
use crate::model::{CauseKind, EventIdx, EventKind, Job};

use super::Ctx;
use super::sockets::{listed_interfaces, listing_text};

/// The first NCCL release whose host hash adds the boot id to the name.
const TOLD_APART_FROM: &str = "2.5.6";

pub fn one_name_two_machines(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    if release_tells_them_apart(ctx.job) {
        return None;
    }
    let (host, iface, addrs) = shared_name(ctx.job)?;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "shared_hostname");
    h.host = Some(host.clone());
    let listed: Vec<&str> = addrs.keys().map(String::as_str).collect();
    h.value(
        "detail",
        format!(
            "`{iface}` is {} on processes of {host}",
            listed.join(" and ")
        ),
    );
    for &idx in addrs.values().take(2) {
        h.support(
            Source::Nccl,
            0.6,
            Some(idx),
            format!("processes of {host} list `{iface}` with different addresses: two machines share that host name, and NCCL before 2.5.6 takes them for one"),
        );
    }
    // The transport between "neighbours" failing is what sharing a name does.
    if let Some(idx) = local_transport_failure(ctx.job) {
        h.support(
            Source::Pattern,
            0.4,
            Some(idx),
            "a transport between GPUs of one machine (CUDA IPC, shared memory) failed between ranks on different machines",
        );
    }
    h.ranks = ctx
        .job
        .ranks
        .values()
        .filter(|r| r.host.as_deref() == Some(host.as_str()))
        .map(|r| r.rank)
        .collect();
    Some(h)
}

/// A known release of 2.5.6 or later: the boot id tells the machines apart.
fn release_tells_them_apart(job: &Job) -> bool {
    let from = NcclVersion::parse(TOLD_APART_FROM);
    !job.nccl_versions.is_empty()
        && job
            .nccl_versions
            .iter()
            .all(|v| NcclVersion::parse(v).is_some_and(|r| Some(r) >= from))
}

/// A host whose processes list one interface with two or more addresses:
/// (host, interface, address → first line that lists it).
fn shared_name(job: &Job) -> Option<(String, String, BTreeMap<String, EventIdx>)> {
    let mut seen: BTreeMap<(String, String), BTreeMap<String, EventIdx>> = BTreeMap::new();
    let listing = |k| matches!(k, EventKind::NcclNetSocket | EventKind::NcclBootstrapIface);
    for (idx, ev) in job.events_where(listing) {
        let Some(host) = ev.who.host.as_deref() else {
            continue;
        };
        let Some(list) = listing_text(ev) else {
            continue;
        };
        for (_, iface, addr) in listed_interfaces(&list) {
            let addrs = seen
                .entry((host.to_string(), iface.to_string()))
                .or_default();
            addrs.entry(addr.to_string()).or_insert(idx);
        }
    }
    seen.into_iter()
        .find(|(_, addrs)| addrs.len() > 1)
        .map(|((host, iface), addrs)| (host, iface, addrs))
}

/// A failure of NCCL's transports between GPUs of one machine: a peer's
/// CUDA IPC handle it could not open, a shared-memory segment.
fn local_transport_failure(job: &Job) -> Option<EventIdx> {
    job.events_where(|k| matches!(k, EventKind::CudaFailure | EventKind::ShmFailure))
        .find(|(_, e)| e.kind == EventKind::ShmFailure || e.text_field("transport") == Some("p2p"))
        .map(|(idx, _)| idx)
}
