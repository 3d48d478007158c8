//! The lines that say by themselves what failed: NCCL found no usable
//! interface, could not bind the one it chose, an MPI connection reached
//! the wrong process, traffic went to an address every host has a copy of.
//! Connects that failed are only collected here (`connects.rs` places them).

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{Event, EventIdx, EventKind};

use super::super::Ctx;
use super::{Leads, keep_host_or_reporters};

/// Reads the bootstrap and socket errors into `leads`; returns the failed
/// connects.
pub(super) fn read(ctx: &Ctx<'_>, leads: &mut Leads) -> Vec<EventIdx> {
    let job = ctx.job;
    let mut connect_errors: Vec<EventIdx> = Vec::new();
    let read = |k| matches!(k, EventKind::BootstrapError | EventKind::SocketError);
    for (idx, ev) in job.events_where(read) {
        match ev.kind {
            EventKind::BootstrapError
                if ev
                    .text_field("error")
                    .is_some_and(|e| e.contains("interface")) =>
            {
                on_reporters_host(
                    &mut leads.iface,
                    ev,
                    idx,
                    0.75,
                    "NCCL found no usable socket interface",
                );
                if let Some(error) = ev.text_field("error") {
                    let error = format!("`{error}`");
                    leads.iface.values.entry("detail").or_insert(error);
                }
            }
            EventKind::BootstrapError
                if ev.text_field("error") == Some("address family")
                    && job.env.contains_key("NCCL_SOCKET_IFNAME") =>
            {
                let iface = job
                    .env
                    .get("NCCL_SOCKET_IFNAME")
                    .and_then(|values| values.keys().next())
                    .map_or("", String::as_str);
                on_reporters_host(
                    &mut leads.iface,
                    ev,
                    idx,
                    0.6,
                    format!(
                        "NCCL_SOCKET_IFNAME is `{iface}`; with no such interface on the host NCCL connects with an address it never filled in (an unknown address family)"
                    ),
                );
                leads
                    .iface
                    .value("detail", format!("NCCL_SOCKET_IFNAME=`{iface}`"));
            }
            EventKind::SocketError if ev.text_field("op") == Some("connect") => {
                connect_errors.push(idx)
            }
            // bind() refusing the address NCCL chose (EADDRNOTAVAIL): the
            // address is not this host's to use: an IPv6 link-local one
            // without its scope, another host's (NCCL_COMM_ID), a stale one.
            EventKind::SocketError
                if ev.text_field("op") == Some("bind")
                    && ev
                        .text_field("error")
                        .is_some_and(|e| e.contains("Cannot assign requested address")) =>
            {
                on_reporters_host(
                    &mut leads.iface,
                    ev,
                    idx,
                    0.6,
                    "NCCL could not bind the address of the interface it chose (`Cannot assign requested address`): that address is not usable on this host",
                );
            }
            // Open MPI dialled one process and another answered: two hosts
            // share the address it dialled (a docker0 or virbr0 every host
            // has), on an interface its TCP transport should not use.
            EventKind::SocketError if ev.text_field("what") == Some("wrong_peer") => {
                keep_host_or_reporters(&mut leads.iface, ev);
                if leads.iface.support.len() < 6 {
                    leads.iface.support(
                        Source::Launcher,
                        0.6,
                        Some(idx),
                        "an MPI TCP connection reached another process than the one dialled: two hosts share the address it used",
                    );
                }
                leads
                    .iface
                    .values
                    .entry("detail")
                    .or_insert_with(|| "an address two hosts share".to_string());
            }
            // Traffic with a peer at an address every host has its own copy
            // of: the peer advertised an interface only it can reach.
            EventKind::SocketError => {
                let Some((peer, net)) = ev
                    .text_field("peer")
                    .and_then(|p| Some((p, ctx.kb.local_only.network_of(p)?)))
                else {
                    continue;
                };
                leads.local_peer.get_or_insert_with(|| peer.to_string());
                leads.iface.peer_host = leads
                    .iface
                    .peer_host
                    .take()
                    .or_else(|| ev.who.host.as_deref().map(str::to_string));
                if leads.iface.support.len() < 6 {
                    leads.iface.support(
                        Source::Nccl,
                        0.5,
                        Some(idx),
                        format!("a socket to {peer} failed; that address is {net}, which every host has its own copy of"),
                    );
                }
                leads
                    .iface
                    .values
                    .entry("detail")
                    .or_insert_with(|| format!("`{peer}`, {net}"));
            }
            _ => {}
        }
    }
    connect_errors
}

/// Support from a line that blames the host it was printed on.
fn on_reporters_host(
    h: &mut Hypothesis,
    ev: &Event,
    idx: EventIdx,
    weight: f64,
    why: impl Into<String>,
) {
    keep_host_or_reporters(h, ev);
    h.support(Source::Nccl, weight, Some(idx), why);
}
