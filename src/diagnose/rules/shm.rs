//! NCCL's shared memory running out: its shared-memory transport creates
//! segments in /dev/shm, and a container's default 64 MB holds only a few.
//! The process that could not create one fails its NCCL call and goes
//! down (or hangs its peers), so the cause is a crash of that process, told
//! in terms of /dev/shm (the `shm` variant of `process_crash`).

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind};

use super::Ctx;

/// Lines cited per host.
const CITED: usize = 3;

/// One hypothesis per host whose processes could not get their segments.
pub fn shm_exhausted(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut by_host: std::collections::BTreeMap<Option<String>, Hypothesis> = Default::default();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::ShmFailure) {
        let host = ctx.job.host_of_event(ev).map(str::to_string);
        let h = by_host.entry(host.clone()).or_insert_with(|| {
            let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
            h.value("variant", "shm".to_string());
            h.host = host.clone();
            h
        });
        if let Some(rank) = ev.who.rank {
            h.ranks.insert(rank);
        }
        h.values
            .entry("who")
            .or_insert_with(|| who(ev, host.as_deref()));
        h.values
            .entry("reason")
            .or_insert_with(|| format!("`{}`", message(ev)));
        if h.support.len() < CITED {
            let (weight, why) = weight_of(ev);
            h.support(Source::Nccl, weight, Some(idx), why);
        }
    }
    let mut out: Vec<Hypothesis> = by_host.into_values().collect();
    for h in &mut out {
        if let [rank] = h.ranks.iter().copied().collect::<Vec<_>>()[..] {
            h.value("rank", rank.to_string());
        }
    }
    out
}

/// A full /dev/shm is the error NCCL names, or what an allocation that
/// failed without a named error most often means; a segment another
/// process could not attach to says less.
fn weight_of(ev: &Event) -> (f64, &'static str) {
    let full = ev
        .text_field("error")
        .is_some_and(|e| e.to_ascii_lowercase().contains("no space left"));
    match ev.text_field("what") {
        _ if full => (
            0.7,
            "NCCL could not size its shared-memory segment: /dev/shm is full",
        ),
        Some("allocate") => (
            0.6,
            "NCCL could not size its shared-memory segment in /dev/shm",
        ),
        _ if ev.text_field("action") == Some("attaching to") => (
            0.4,
            "a process could not attach to a peer's shared-memory segment",
        ),
        _ => (
            0.55,
            "NCCL could not create its shared-memory segment in /dev/shm",
        ),
    }
}

fn who(ev: &Event, host: Option<&str>) -> String {
    let on = host.map_or(String::new(), |h| format!(" on {h}"));
    match (ev.who.rank, ev.who.pid) {
        (Some(rank), _) => format!("Rank {rank}{on}"),
        (None, Some(pid)) => format!("A process{on} (pid {pid})"),
        (None, None) => format!("A process{on}"),
    }
}

/// The message from the NCCL words on, as cited in the summary.
fn message(ev: &Event) -> String {
    let text = ev.text.as_ref();
    let from = ["Call to", "Error"]
        .iter()
        .filter_map(|w| text.find(w))
        .min()
        .unwrap_or(0);
    text[from..].trim_end().chars().take(200).collect()
}
