//! Stack dumps from their lines: a process header or a first thread header
//! opens a dump, each thread header a thread, and the frames below a thread
//! (innermost first) are its frames. A dump ends where its file does, or
//! where no dump line follows within a few lines; a thread seen again opens
//! the process's next dump (faulthandler's `dump_traceback_later` repeats).

use crate::model::{Event, EventIdx, EventKind, Job, StackDump, StackFormat, StackThread};

use super::rank_index::RankIndex;
use super::short_host;

/// Lines a dump's next line may lie below its last (py-spy's version line
/// and a blank, `--locals`' arguments and locals of one frame).
const GAP: u64 = 64;

pub fn collect(job: &mut Job) {
    let mut dumps: Vec<StackDump> = Vec::new();
    let mut last: Option<(EventIdx, u64)> = None;
    let kinds = |k| {
        matches!(
            k,
            EventKind::StackProcess | EventKind::StackThread | EventKind::StackFrame
        )
    };
    for (idx, ev) in job.events_where(kinds) {
        let near = last.is_some_and(|(prev, line)| {
            let prev = &job.events[prev];
            prev.origin.file == ev.origin.file && ev.origin.line <= line + GAP
        });
        let open = dumps.last_mut().filter(|_| near);
        match ev.kind {
            EventKind::StackProcess => dumps.push(new_dump(idx, ev)),
            EventKind::StackThread => {
                let thread = StackThread {
                    header: idx,
                    name: ev.text_field("name").map(str::to_string),
                    frames: Vec::new(),
                };
                match open.filter(|d| takes_thread(job, d, ev)) {
                    Some(dump) => dump.threads.push(thread),
                    None => {
                        let mut dump = new_dump(idx, ev);
                        dump.threads.push(thread);
                        dumps.push(dump);
                    }
                }
            }
            _ => {
                let Some(thread) = open.and_then(|d| d.threads.last_mut()) else {
                    continue;
                };
                thread.frames.push(idx);
            }
        }
        last = Some((idx, ev.origin.line));
    }
    let index = RankIndex::of(job);
    for dump in &mut dumps {
        let header = &job.events[dump.header];
        let host = dump.host.as_deref().map(short_host);
        let by_process = dump.pid.and_then(|pid| index.by_pid(host, pid));
        dump.rank = by_process.or(header.who.rank);
    }
    dumps.retain(|d| !d.threads.is_empty());
    for dump in &dumps {
        own_lines(job, dump);
    }
    job.stacks = dumps;
}

/// A dump's lines are its process's: they cite its rank and pid.
fn own_lines(job: &mut Job, dump: &StackDump) {
    let threads = dump.threads.iter();
    let lines = threads.flat_map(|t| std::iter::once(t.header).chain(t.frames.iter().copied()));
    for idx in std::iter::once(dump.header).chain(lines) {
        let who = &mut job.events[idx].who;
        who.rank = who.rank.or(dump.rank);
        who.pid = who.pid.or(dump.pid);
    }
}

/// The tool a dump line came from (its pattern sets `format`).
fn format_of(ev: &Event) -> StackFormat {
    match ev.text_field("format") {
        Some("faulthandler") => StackFormat::Faulthandler,
        _ => StackFormat::PySpy,
    }
}

fn new_dump(idx: EventIdx, ev: &Event) -> StackDump {
    let format = format_of(ev);
    let pid = ev
        .int("pid")
        .and_then(|p| u32::try_from(p).ok())
        .or(ev.who.pid);
    StackDump {
        header: idx,
        file: ev.origin.file,
        pid,
        host: ev.who.host.as_deref().map(str::to_string),
        rank: None,
        format,
        threads: Vec::new(),
    }
}

/// A thread header belongs to the open dump unless it is of another tool
/// or that thread was already dumped (the next dump of the process).
fn takes_thread(job: &Job, dump: &StackDump, ev: &Event) -> bool {
    let format = format_of(ev);
    let tid = ev.text_field("tid");
    let seen = dump
        .threads
        .iter()
        .any(|t| job.events[t.header].text_field("tid") == tid);
    format == dump.format && !seen
}
