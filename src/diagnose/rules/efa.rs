//! The AWS EFA plugin (aws-ofi-nccl) failing to reach its peers.
//!
//! On EFA the fabric's own transport (SRD) retransmits what is lost, so a
//! request that completes with an error, or a peer address the plugin
//! cannot add, says the peers are unreachable rather than that packets
//! dropped. The plugin's maintainers trace that most often to the
//! instances' security group not admitting EFA traffic to and from itself
//! (aws-ofi-nccl#156, #663): a lead, not a certainty, and one that names no
//! host, since the group spans them all. Some completion statuses say more:
//! the peer's queue pair no longer exists (`[efa] peer_gone` in
//! knowledge.toml), so the peer's process is gone, as when the OOM killer
//! took it (awsome-distributed-training#312).

use std::collections::BTreeMap;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind, Job};

use super::Ctx;

/// Lines cited: the first few say it all.
const CITED: usize = 3;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut out = crashed_peers(ctx);
    out.extend(out_of_pinned_memory(ctx));
    // Once a peer is gone, the others' requests fail too: echoes, mostly.
    let weight = if out.is_empty() { 0.45 } else { 0.25 };
    out.extend(unreachable_peers(ctx, weight));
    out
}

fn peer_gone(ctx: &Ctx<'_>, ev: &Event) -> bool {
    ev.text_field("what") == Some("completion") && ctx.kb.efa_peer_gone(&ev.text)
}

fn unreachable_peers(ctx: &Ctx<'_>, weight: f64) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::Firewall);
    h.value("variant", "efa".to_string());
    let mut hosts = std::collections::BTreeSet::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::OfiError) {
        let why = match ev.text_field("what") {
            _ if peer_gone(ctx, ev) => continue,
            Some("completion") => {
                "an EFA request completed with an error: the peer could not be reached"
            }
            Some("address") if ev.text_field("side") == Some("remote") => {
                "the EFA plugin could not add a peer's address: the peer could not be reached"
            }
            _ => continue,
        };
        hosts.extend(ev.who.host.as_deref().map(str::to_string));
        if h.support.len() < CITED {
            h.support(Source::Nccl, weight, Some(idx), why);
        }
        h.values
            .entry("detail")
            .or_insert_with(|| format!("`{}`", short(&ev.text)));
    }
    if h.support.is_empty() {
        return None;
    }
    // One host failing alone is where the lead points; on several, the
    // group they share.
    if hosts.len() == 1 {
        h.host = hosts.pop_first();
    }
    Some(h)
}

/// Requests whose peer's queue pair was gone: a process on the peer's
/// instance died. The plugin names the instance by its EC2 id; the host
/// whose own lines print that id as theirs is its name in the job.
fn crashed_peers(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let named = instance_hosts(ctx.job);
    let mut by_host: BTreeMap<String, Hypothesis> = BTreeMap::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::OfiError) {
        if !peer_gone(ctx, ev) {
            continue;
        }
        let Some(id) = ev.text_field("peer_host_id") else {
            continue;
        };
        let host = named.get(id).cloned().unwrap_or_else(|| id.to_string());
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::ProcessCrash);
            h.host = Some(host.clone());
            h.value(
                "reason",
                "its peers' EFA requests found its queue pairs gone",
            );
            h.value("who", format!("A process on {host}"));
            h
        });
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.45,
                Some(idx),
                format!("an EFA request to {host} found no queue pair there: the peer's process had crashed or exited"),
            );
        }
    }
    by_host.into_values().collect()
}

/// libfabric's EFA provider aborting on ENOMEM: it could not register or
/// post the buffers it pins (`Failure to post internal receive buffers`),
/// which is the locked-memory limit (`ulimit -l`) in AWS's experience
/// (aws-samples/awsome-distributed-training#647: 64 kB in the container).
fn out_of_pinned_memory(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_host: BTreeMap<Option<String>, Hypothesis> = BTreeMap::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::OfiError) {
        let enomem = ev.int("rc").is_some_and(|rc| rc.abs() == ENOMEM)
            || ev
                .text_field("error")
                .is_some_and(|e| e.eq_ignore_ascii_case("cannot allocate memory"));
        if ev.text_field("what") != Some("provider_abort") || !enomem {
            continue;
        }
        let host = ctx.job.host_of_event(ev).map(str::to_string);
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::Memlock);
            h.host = host;
            h
        });
        h.ranks.extend(ev.who.rank);
        h.values.entry("detail").or_insert_with(|| {
            format!(
                "libfabric's EFA provider: `{}`",
                ev.text.trim().chars().take(120).collect::<String>()
            )
        });
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.5,
                Some(idx),
                "libfabric's EFA provider ran out of memory it could pin and aborted the process: the locked-memory limit",
            );
        }
    }
    let mut out: Vec<Hypothesis> = by_host.into_values().collect();
    for h in &mut out {
        super::setup::host_wide_memlock(ctx, h);
    }
    out
}

const ENOMEM: i64 = 12;

/// EC2 instance id → the host whose own EFA lines print it as theirs.
fn instance_hosts(job: &Job) -> BTreeMap<String, String> {
    job.events_where(|k| k == EventKind::OfiError)
        .filter_map(|(_, e)| {
            let host = job.host_of_event(e)?;
            Some((e.text_field("host_id")?.to_string(), host.to_string()))
        })
        .collect()
}

/// The line from its `NET/OFI` on, cut at a readable length.
fn short(text: &str) -> String {
    let from = text.find("NET/OFI").unwrap_or(0);
    text[from..].chars().take(160).collect()
}
