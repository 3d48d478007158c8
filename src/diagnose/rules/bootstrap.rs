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
    if let Some(h) = dialled_host(job, &failed) {
        return h;
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

/// The failures are ring connects that all dialled the next rank on one
/// other host (the dialling rank is the last of its host, so the connect
/// left it; the root's thread, which dials every rank, says nothing of
/// whom): that host's interface or ports are what could not be reached,
/// and the reporters are its victims.
fn dialled_host(job: &Job, failed: &BTreeMap<String, Vec<EventIdx>>) -> Option<Vec<Hypothesis>> {
    let all: Vec<EventIdx> = failed.values().flatten().copied().collect();
    let ring = super::bootstrap_ring::ring_next_hosts(job, &all);
    let next = ring
        .get(super::bootstrap_ring::NO_ADDRESS)
        .filter(|n| n.whom == super::bootstrap_ring::Dialled::RingNext)?;
    let host = next.host.clone()?;
    if failed.contains_key(&host) {
        return None;
    }
    let reporter = failed.keys().next().cloned();
    let ranks = job.ranks_on_host(&host);
    let iface = bootstrap_interface(job, &host);
    let mut iface_h = Hypothesis::new(CauseKind::SocketInterface);
    let mut fw_h = Hypothesis::new(CauseKind::Firewall);
    let detail = match &iface {
        Some(i) => format!(
            "the ring's next rank {} advertised {i}; its bootstrap could not be reached",
            next.rank
        ),
        None => format!(
            "the ring's next rank {}'s bootstrap could not be reached",
            next.rank
        ),
    };
    let why = format!(
        "before any communicator came up, rank(s) {:?} dialled the next rank of NCCL's bootstrap ring, rank {} on {host}, and failed",
        next.dialled_by, next.rank
    );
    for (h, w) in [(&mut iface_h, 0.4), (&mut fw_h, 0.3)] {
        h.host = Some(host.clone());
        h.peer_host.clone_from(&reporter);
        h.ranks.clone_from(&ranks);
        h.value("detail", detail.clone());
        for &idx in all.iter().take(2) {
            h.support(Source::Nccl, w, Some(idx), why.clone());
        }
    }
    if let Some(i) = iface.as_deref().and_then(|i| i.split(':').next()) {
        iface_h.device = Some(i.to_string());
    }
    Some(vec![iface_h, fw_h])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, Sym, Value, Who};

    /// A line of process `pid` (thread `tid`) of `rank` on `host`.
    fn line(
        kind: EventKind,
        host: &str,
        rank: u32,
        pid: u32,
        tid: u32,
        f: &[(&'static str, Value)],
    ) -> Event {
        let mut fields = Fields::default();
        for (k, v) in f {
            fields.insert(k, v.clone());
        }
        let mut ev = Event::with_fields(kind, fields);
        ev.who = Who {
            host: Some(Sym::new(host)),
            rank: Some(rank),
            pid: Some(pid),
            tid: Some(tid),
            ..Who::default()
        };
        ev
    }

    fn chain(host: &str, rank: u32, pid: u32, tid: u32, src: &str) -> Event {
        let text = |s: &str| Value::Text(s.into());
        line(
            EventKind::NcclErrorChain,
            host,
            rank,
            pid,
            tid,
            &[("src", text(src)), ("result", Value::Int(2))],
        )
    }

    #[test]
    fn ring_connects_that_left_their_host_blame_the_next_ranks_host_nccl_2_18() {
        // Hosts a (ranks 0–3) and b (4–7). Rank 3's bootstrap ring connect
        // to rank 4 failed (NCCL 2.18 prints no WARN for EHOSTUNREACH, only
        // its chain); so did the root thread of rank 0's process.
        let ranks: Vec<(u32, &str)> = (0..8).map(|r| (r, if r < 4 { "a" } else { "b" })).collect();
        let mut job = Job::with_ranks_on(&ranks);
        job.world_size = Some(8);
        let text = |s: &str| Value::Text(s.into());
        job.events = vec![
            line(
                EventKind::NcclBootstrapIface,
                "b",
                4,
                204,
                204,
                &[("iface", text("eno1")), ("ip", text("192.168.50.22"))],
            ),
            chain("a", 3, 103, 103, "misc/socket.cc"),
            chain("a", 3, 103, 103, "bootstrap.cc"),
            chain("a", 0, 100, 130, "misc/socket.cc"),
            chain("a", 0, 100, 130, "bootstrap.cc"),
        ];
        job.index_kinds();
        let found = Ctx::over(&job, failed_bootstrap);
        let iface = found
            .iter()
            .find(|h| h.kind == CauseKind::SocketInterface)
            .unwrap();
        assert_eq!(iface.host.as_deref(), Some("b"));
        assert_eq!(iface.peer_host.as_deref(), Some("a"));
        assert_eq!(iface.device.as_deref(), Some("eno1"));
        assert_eq!(
            iface.ranks.iter().copied().collect::<Vec<_>>(),
            [4, 5, 6, 7]
        );
    }
}
