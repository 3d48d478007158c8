//! NCCL's shared memory running out: its shared-memory transport creates
//! segments in /dev/shm, and a container's default 64 MB holds only a few.
//! The process that could not create one fails its NCCL call and goes
//! down (or hangs its peers): the host or container is set up short of
//! what NCCL needs (the `shm` variant of `config_mismatch`). A process that
//! touches a segment a full /dev/shm cannot back dies of SIGBUS instead, so
//! a bus error where a tool reported /dev/shm small is the same story.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventIdx, EventKind, Job};

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
    let small = small_shm(ctx.job);
    if by_host.is_empty()
        && let Some((idx, ev)) = bus_error(ctx.job)
    {
        let in_nccl = nccl_frame_after(ctx.job, idx);
        let reason = small
            .as_ref()
            .map(|size| format!("a bus error (SIGBUS) where /dev/shm holds {}", size.text()))
            .or_else(|| {
                in_nccl.map(|(_, func)| format!("a bus error (SIGBUS) inside NCCL's `{func}`"))
            });
        if let Some(reason) = reason {
            let host = ctx.job.host_of_event(ev).map(str::to_string);
            let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
            h.value("variant", "shm".to_string());
            h.host = host
                .clone()
                .or_else(|| small.as_ref().and_then(|s| s.host.clone()));
            h.ranks.extend(ev.who.rank);
            h.value("who", who(ev, h.host.as_deref()));
            h.value("reason", reason);
            h.support(
                Source::Launcher,
                0.45,
                Some(idx),
                "the process died of SIGBUS: it touched shared memory that /dev/shm could not back",
            );
            if let Some((frame, func)) = in_nccl {
                h.support(
                    Source::Stacks,
                    0.35,
                    Some(frame),
                    format!("the bus error struck inside NCCL's own code (`{func}`), where it maps its shared-memory segments"),
                );
            }
            by_host.insert(host, h);
        }
    }
    let mut out: Vec<Hypothesis> = by_host.into_values().collect();
    for h in &mut out {
        if let [rank] = h.ranks.iter().copied().collect::<Vec<_>>()[..] {
            h.value("rank", rank.to_string());
        }
        if let Some(size) = &small {
            h.support(
                Source::Snapshot,
                0.35,
                Some(size.idx),
                format!("/dev/shm holds only {}", size.text()),
            );
        }
    }
    out
}

/// Below this, /dev/shm is a container's default or near it: too small for
/// NCCL's segments between a host's GPUs.
const SMALL_SHM: u64 = 512 << 20;

/// A /dev/shm a tool reported smaller than NCCL needs.
struct ShmSize {
    bytes: u64,
    idx: EventIdx,
    host: Option<String>,
}

impl ShmSize {
    fn text(&self) -> String {
        format!("{} MB", self.bytes >> 20)
    }
}

fn small_shm(job: &Job) -> Option<ShmSize> {
    job.events_where(|k| k == EventKind::ShmSize)
        .filter_map(|(idx, ev)| {
            let bytes = ev
                .int("bytes")
                .and_then(|b| u64::try_from(b).ok())
                .or_else(|| ev.text_field("size").and_then(df_bytes))?;
            Some(ShmSize {
                bytes,
                idx,
                host: job.host_of_event(ev).map(str::to_string),
            })
        })
        .find(|s| s.bytes < SMALL_SHM)
}

/// `df`'s size: `-h` suffixes are powers of 1024; a bare number counts
/// 1K blocks.
fn df_bytes(size: &str) -> Option<u64> {
    let (number, unit) = match size.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&size[..i], c),
        _ => (size, 'K'),
    };
    let shift = match unit {
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        'P' => 50,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    Some((value * (1u64 << shift) as f64) as u64)
}

/// Lines a fatal signal's backtrace runs after its banner.
const BACKTRACE_LINES: u64 = 40;

/// A frame in NCCL's own code in the backtrace printed after a bus error
/// (UCX's `==== backtrace`): the frame's event and function.
fn nccl_frame_after(job: &Job, idx: EventIdx) -> Option<(EventIdx, &str)> {
    job.events_below(idx, BACKTRACE_LINES)
        .find(|(_, e)| e.kind == EventKind::NcclNativeFrame)
        .and_then(|(i, e)| Some((i, e.text_field("func")?)))
}

/// The first process that died of a bus error.
fn bus_error(job: &Job) -> Option<(EventIdx, &Event)> {
    job.events_where(|k| k == EventKind::ProcessSignaled)
        .find(|(_, ev)| crate::model::build::signal_of(ev) == Some("SIGBUS"))
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
