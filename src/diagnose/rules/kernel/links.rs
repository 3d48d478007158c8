//! Link flaps: link down / up and transceiver events per host and device,
//! corroborated by NCCL's victims naming the same host.

use std::collections::BTreeMap;

use super::{Ctx, Found, KernelPlace, Line, Place, WR_FLUSH_ERR, Window};
use super::{at_boot, nic_ownership, time_factor};
use crate::model::{CauseKind, Event, EventIdx, EventKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkStep {
    Down,
    Up,
    ModuleError,
}

fn link_step(ev: &Event) -> Option<LinkStep> {
    let state = ev.text_field("state").unwrap_or("").to_ascii_lowercase();
    match ev.kind {
        EventKind::KernelNicLink | EventKind::KernelIbPortState => match state.as_str() {
            "down" => Some(LinkStep::Down),
            "up" | "active" => Some(LinkStep::Up),
            _ => None,
        },
        EventKind::KernelNicModule => {
            let status = ev.text_field("status").unwrap_or("").to_ascii_lowercase();
            if ev.text_field("reason").is_some() {
                Some(LinkStep::ModuleError)
            } else if status.contains("unplugged") || status.contains("disabled") {
                Some(LinkStep::Down)
            } else if status.contains("plugged") {
                Some(LinkStep::Up)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Link down/up and module events per (host, device): a down during the job
/// is a link fault, down and up again is a flap.
pub(super) fn link_flaps(ctx: &Ctx<'_>, window: Window, found: &mut Found) {
    let mut groups: BTreeMap<Place, Vec<(EventIdx, LinkStep)>> = BTreeMap::new();
    for (&idx, place) in &ctx.job.kernel.places {
        let ev = &ctx.job.events[idx];
        if let Some(step) = link_step(ev).filter(|_| !at_boot(ev)) {
            let key = (place.host.clone(), place.device().map(str::to_string));
            groups.entry(key).or_default().push((idx, step));
        }
    }
    if groups.is_empty() {
        return;
    }
    let ib_errors: Vec<EventIdx> = ctx
        .job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind,
                EventKind::IbCompletionError | EventKind::IbAsyncEvent
            ) && e.int("status") != Some(WR_FLUSH_ERR)
        })
        .map(|(i, _)| i)
        .collect();
    for steps in groups.values() {
        link_group(ctx, window, steps, &ib_errors, found);
    }
}

fn link_group(
    ctx: &Ctx<'_>,
    window: Window,
    steps: &[(EventIdx, LinkStep)],
    ib_errors: &[EventIdx],
    found: &mut Found,
) {
    let count = |s| steps.iter().filter(|(_, x)| *x == s).count();
    let (downs, ups, errors) = (
        count(LinkStep::Down),
        count(LinkStep::Up),
        count(LinkStep::ModuleError),
    );
    if downs + errors == 0 {
        return;
    }
    let base = if downs >= 2 || (downs >= 1 && ups >= 1) {
        0.65
    } else if downs == 1 {
        0.55
    } else {
        0.5
    };
    let place = &ctx.job.kernel.places[&steps[0].0];
    let device = place.device().unwrap_or("the NIC").to_string();
    let detail = format!(
        "kernel: link of {device} went down {downs}×, came up {ups}×{}",
        if errors > 0 {
            format!(", transceiver error {errors}×")
        } else {
            String::new()
        }
    );
    let mut nearest: f64 = 0.0;
    for &(idx, step) in steps {
        let factor =
            time_factor(ctx, window, idx) * nic_ownership(ctx, &ctx.job.kernel.places[&idx]);
        let (weight, why) = match step {
            LinkStep::Down => (base, format!("the kernel saw the link of {device} go down")),
            LinkStep::ModuleError => (
                base,
                format!("the transceiver of {device} reported an error"),
            ),
            LinkStep::Up => (
                0.3,
                format!("the link of {device} came back up: it flapped"),
            ),
        };
        if step != LinkStep::Up {
            nearest = nearest.max(factor);
        }
        let place = &ctx.job.kernel.places[&idx];
        found.add(
            CauseKind::LinkFlap,
            place,
            Line {
                weight: weight * factor,
                idx,
                why,
                detail: detail.clone(),
            },
        );
    }
    add_victims(ctx, place, nearest, ib_errors, found);
}

/// NCCL's completion errors that name the flapping host as the peer (or
/// that the host's own ranks report on that HCA) make the link the cause.
fn add_victims(
    ctx: &Ctx<'_>,
    place: &KernelPlace,
    factor: f64,
    ib_errors: &[EventIdx],
    found: &mut Found,
) {
    let Some(host) = place.host.as_deref() else {
        return;
    };
    let job = ctx.job;
    let mut lines = Vec::new();
    let mut reporters: BTreeMap<String, usize> = BTreeMap::new();
    for &idx in ib_errors {
        let ev = &job.events[idx];
        let completion = ev.kind == EventKind::IbCompletionError;
        let reporter = ev.who.host.as_deref();
        let names_host = completion
            && reporter != Some(host)
            && ev.text_field("peer").and_then(|p| ctx.host_of_addr(p)) == Some(host);
        let own_port = reporter == Some(host)
            && ev.text_field("hca").is_some()
            && ev.text_field("hca") == place.ibdev.as_deref();
        if names_host {
            *reporters
                .entry(reporter.unwrap_or("?").to_string())
                .or_default() += 1;
            lines.push((
                0.5 * factor,
                idx,
                format!("a victim's transfer to {host} failed"),
            ));
        } else if own_port {
            lines.push((
                0.5 * factor,
                idx,
                format!("NCCL on {host} saw the error on this HCA"),
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let p = found.entry(CauseKind::LinkFlap, place);
    p.nccl.extend(lines);
    p.peer_host = reporters
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(h, _)| h);
}
