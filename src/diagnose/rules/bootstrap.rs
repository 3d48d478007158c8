//! NCCL's bootstrap failing to connect, seen only in its error chain (no
//! WARN line says what failed, as when the log keeps INFO lines only): a
//! socket call that failed inside the bootstrap (`misc/socket.cc:567 -> 2`
//! then `bootstrap.cc:270 -> 2`) of a process whose communicator never
//! completed its init. The bootstrap is plain TCP over the interface NCCL
//! picked (NCCL_SOCKET_IFNAME): most often that interface does not reach the
//! other hosts (nccl#1000: an IPoIB interface between containers); less
//! often a firewall drops the ports.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventIdx, EventKind, Job};

use super::Ctx;

/// A process: host and pid.
type Process = (String, u32);

pub fn failed_bootstrap(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let job = ctx.job;
    // Where NCCL's WARN lines say what failed, the socket rules read them.
    let said = |k| matches!(k, EventKind::BootstrapError | EventKind::SocketError);
    if job.events_where(said).next().is_some() {
        return Vec::new();
    }
    let completed = completed_processes(job);
    let mut socket_seen: BTreeSet<Process> = BTreeSet::new();
    let mut failed: BTreeMap<String, Vec<EventIdx>> = BTreeMap::new();
    for (idx, ev) in job.events_where(|k| k == EventKind::NcclErrorChain) {
        let Some(process) = process_of(job, ev) else {
            continue;
        };
        let src = ev.text_field("src").unwrap_or("");
        let failed_call = ev.int("result").is_some_and(|r| r != 0);
        if src.ends_with("socket.cc") && failed_call {
            socket_seen.insert(process.clone());
        } else if src.ends_with("bootstrap.cc")
            && failed_call
            && socket_seen.contains(&process)
            && !completed.contains(&process)
        {
            failed.entry(process.0).or_default().push(idx);
        }
    }
    let mut out = Vec::new();
    for (host, lines) in failed {
        let iface = bootstrap_interface(job, &host);
        let mut iface_h = Hypothesis::new(CauseKind::SocketInterface);
        let mut fw_h = Hypothesis::new(CauseKind::Firewall);
        let detail = match &iface {
            Some(i) => format!(
                "its bootstrap could not connect over {i} before the communicator was set up"
            ),
            None => {
                "its bootstrap could not connect before the communicator was set up".to_string()
            }
        };
        for h in [&mut iface_h, &mut fw_h] {
            h.host = Some(host.clone());
            h.value("detail", detail.clone());
        }
        for &idx in lines.iter().take(2) {
            iface_h.support(
                Source::Nccl,
                0.4,
                Some(idx),
                "a socket call of NCCL's bootstrap failed before init completed: the interface NCCL picked may not reach the other hosts",
            );
            fw_h.support(
                Source::Nccl,
                0.3,
                Some(idx),
                "a socket call of NCCL's bootstrap failed before init completed: the ports may be blocked",
            );
        }
        out.push(iface_h);
        out.push(fw_h);
    }
    out
}

fn process_of(job: &Job, ev: &Event) -> Option<Process> {
    Some((job.host_of_event(ev)?.to_string(), ev.who.pid?))
}

/// Processes that completed a communicator's init.
fn completed_processes(job: &Job) -> BTreeSet<Process> {
    job.events_where(|k| k == EventKind::NcclCommInit)
        .filter(|(_, ev)| ev.text_field("phase") == Some("COMPLETE"))
        .filter_map(|(_, ev)| process_of(job, ev))
        .collect()
}

/// The interface the host's bootstrap (or IB out-of-band) traffic uses,
/// as `iface:ip`.
fn bootstrap_interface(job: &Job, host: &str) -> Option<String> {
    let listing = |k| matches!(k, EventKind::NcclBootstrapIface | EventKind::NcclNetIb);
    job.events_where(listing)
        .filter(|(_, ev)| job.host_of_event(ev) == Some(host))
        .find_map(|(_, ev)| {
            let iface = ev.text_field("iface").or(ev.text_field("oob_iface"))?;
            let ip = ev
                .text_field("ip")
                .or(ev.text_field("oob_ip"))
                .unwrap_or("?");
            Some(format!("{iface}:{ip}"))
        })
}
