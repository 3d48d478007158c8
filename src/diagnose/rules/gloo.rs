//! PyTorch's Gloo process group (its CPU backend, beside NCCL in most jobs)
//! set up on an address the other hosts cannot reach.
//!
//! Gloo binds the address the hostname resolves to, or `GLOO_SOCKET_IFNAME`.
//! A hostname that resolves to nothing usable makes it fall back to loopback
//! with a warning (Ubuntu's /etc/hosts maps the hostname to 127.0.1.1): on
//! one host nothing goes wrong, across hosts the peers are told to dial
//! 127.x and the group never connects. The warning alone is therefore only
//! a lead, and only where the job spans hosts; with a failed connect it is
//! the cause. Ranks whose addresses are of different families (one host's
//! name resolving to IPv6, another's to IPv4) cannot connect either.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventIdx, EventKind};

use super::Ctx;

/// Lines cited per kind of line.
const CITED: usize = 3;

#[derive(Default)]
struct GlooLines {
    fallback: Vec<EventIdx>,
    no_address: Vec<EventIdx>,
    to_loopback: Vec<EventIdx>,
    mesh_failed: Vec<EventIdx>,
    family_mismatch: Vec<EventIdx>,
}

pub fn unusable_interface(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let lines = gloo_lines(ctx);
    let job = ctx.job;
    let failed = !lines.to_loopback.is_empty() || !lines.mesh_failed.is_empty();
    let mut h = Hypothesis::new(CauseKind::SocketInterface);
    h.value("variant", "gloo");
    for &idx in lines.no_address.iter().take(CITED) {
        let iface = job.events[idx].text_field("iface").unwrap_or("?");
        h.host = h.host.take().or_else(|| reporter(ctx, idx));
        cite(
            &mut h,
            idx,
            0.7,
            format!("`{iface}` has no address"),
            format!(
                "Gloo was told to use `{iface}` (GLOO_SOCKET_IFNAME), which holds no address on this host"
            ),
        );
    }
    // Both sides of the pair report it, mirrored: no host is singled out.
    for &idx in lines.family_mismatch.iter().take(CITED) {
        cite(
            &mut h,
            idx,
            0.65,
            "one rank's address is IPv4 and its peer's IPv6".into(),
            "Gloo's addresses of two ranks are of different families (IPv4 and IPv6): their hosts resolve names or interfaces differently".into(),
        );
    }
    let fallback_weight = match (failed, job.spans_hosts()) {
        (true, _) => 0.65,
        (false, true) => 0.25,
        (false, false) => 0.0,
    };
    let fallback = lines.fallback.iter().take(CITED);
    for &idx in fallback.filter(|_| fallback_weight > 0.0) {
        h.host = h.host.take().or_else(|| reporter(ctx, idx));
        cite(
            &mut h,
            idx,
            fallback_weight,
            "the hostname resolves to no usable address: loopback".into(),
            "Gloo found no usable address for the hostname and bound loopback, which other hosts cannot reach".into(),
        );
    }
    for &idx in lines.to_loopback.iter().take(CITED) {
        let peer = job.events[idx].text_field("peer").unwrap_or("127.0.0.1");
        h.peer_host = h.peer_host.take().or_else(|| reporter(ctx, idx));
        cite(
            &mut h,
            idx,
            0.5,
            format!("a peer advertised `{peer}`"),
            format!("a Gloo connection to `{peer}` failed: a peer advertised a loopback address"),
        );
    }
    // A mesh that failed alone is a lead across hosts: the same line follows
    // a peer that was not up yet.
    let mesh_weight = if !lines.fallback.is_empty() || !lines.to_loopback.is_empty() {
        0.4
    } else if job.spans_hosts() {
        0.3
    } else {
        0.0
    };
    for &idx in lines.mesh_failed.iter().take(CITED) {
        if mesh_weight == 0.0 {
            break;
        }
        h.values.entry("detail").or_insert_with(|| {
            "the group's ranks could not connect to each other (GLOO_SOCKET_IFNAME unset: the hostname's address)".to_string()
        });
        h.support(
            Source::Torch,
            mesh_weight,
            Some(idx),
            "the Gloo process group could not connect its ranks to each other",
        );
    }
    (!h.support.is_empty()).then_some(h)
}

/// The host that printed a line.
fn reporter(ctx: &Ctx<'_>, idx: EventIdx) -> Option<String> {
    ctx.job.events[idx].who.host.as_deref().map(str::to_string)
}

/// One line's support; the first line cited gives the detail.
fn cite(h: &mut Hypothesis, idx: EventIdx, weight: f64, detail: String, why: String) {
    h.values.entry("detail").or_insert(detail);
    h.support(Source::Torch, weight, Some(idx), why);
}

fn gloo_lines(ctx: &Ctx<'_>) -> GlooLines {
    let mut out = GlooLines::default();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::GlooInterface) {
        let list = match ev.text_field("what") {
            Some("loopback_fallback") => &mut out.fallback,
            Some("no_address") => &mut out.no_address,
            Some("connect_loopback") => &mut out.to_loopback,
            Some("full_mesh_failed") => &mut out.mesh_failed,
            Some("family_mismatch") => &mut out.family_mismatch,
            _ => continue,
        };
        list.push(idx);
    }
    out
}
