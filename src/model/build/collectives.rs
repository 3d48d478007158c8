//! Each rank's view of each process group: the collective its watchdog failed
//! on and its last enqueued / completed sequence numbers.
//!
//! Watchdog timeout lines name the rank and the work (SeqNum, OpType) but not
//! the group before torch 2.3; the status lines of 2.3+ name the group and the
//! last enqueued / completed numbers. They are paired by (rank, seq), else by
//! seq where only one group's status lines name it. Without
//! a status line the default group is assumed, and since NCCL work completes in
//! order, a timeout at S means the last completed work is S − 1.

use std::collections::BTreeMap;

use crate::model::{Event, EventKind, FileId, Job, PgRankState};

/// Who a report belongs to: a rank, or (unattributed) the file it is in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Rank(u32),
    File(FileId),
}

pub fn collect(job: &mut Job) {
    let pg_of = pg_by_rank_and_seq(job);
    let pg_of_seq = pg_by_seq(&pg_of);
    let mut states: BTreeMap<(String, Owner), PgRankState> = BTreeMap::new();
    let read = |k| {
        matches!(
            k,
            EventKind::WatchdogTimeout
                | EventKind::WatchdogException
                | EventKind::PgStatus
                | EventKind::DumpSignal
                | EventKind::FlightRecord
        )
    };
    for (idx, ev) in job.events_where(read) {
        let rank = match ev.who.rank {
            Some(r) => Owner::Rank(r),
            None => Owner::File(ev.origin.file),
        };
        let lookup = |s: i64| {
            let own = match rank {
                Owner::Rank(r) => pg_of.get(&(r, s)).cloned(),
                Owner::File(_) => None,
            };
            own.or_else(|| pg_of_seq.get(&s).cloned().flatten())
        };
        match ev.kind {
            EventKind::WatchdogTimeout => {
                let seq = ev.int("seq");
                // torch 2.4+ tags the report with its group; before, the
                // status lines of its sequence number say which it was.
                let pg = pg_field(ev)
                    .or_else(|| seq.and_then(lookup))
                    .unwrap_or_else(|| "0".into());
                let st = states.entry((pg, rank)).or_default();
                st.timed_out = true;
                record_work(st, ev);
                st.evidence.push(idx);
            }
            EventKind::WatchdogException if ev.int("seq").is_some() => {
                let seq = ev.int("seq");
                let pg = pg_field(ev)
                    .or_else(|| seq.and_then(lookup))
                    .unwrap_or_else(|| "0".into());
                let st = states.entry((pg, rank)).or_default();
                st.timed_out |= ev
                    .text_field("reason")
                    .is_some_and(|r| r.contains("timeout"));
                record_work(st, ev);
                st.evidence.push(idx);
            }
            EventKind::PgStatus | EventKind::DumpSignal | EventKind::FlightRecord => {
                let pg = pg_field(ev).unwrap_or_else(|| "0".into());
                let st = states.entry((pg, rank)).or_default();
                if ev.kind == EventKind::PgStatus {
                    st.failed_seq = st.failed_seq.or(ev.int("seq"));
                    // torch 2.3's `Timeout at NCCL work: N` is a timeout
                    // report of its own (2.4+ words say "error or timeout").
                    st.timed_out |= ev.text_field("timeout").is_some();
                }
                if ev.kind == EventKind::FlightRecord {
                    record_flight(st, ev);
                }
                st.last_enqueued = max_opt(st.last_enqueued, ev.int("last_enqueued"));
                st.last_completed = max_opt(st.last_completed, ev.int("last_completed"));
                st.evidence.push(idx);
            }
            _ => {}
        }
    }
    for st in states.values_mut() {
        if let Some(seq) = st.failed_seq {
            st.last_completed = st.last_completed.or(Some(seq - 1));
            st.last_enqueued = max_opt(st.last_enqueued, Some(seq));
        }
    }
    for ((pg, owner), st) in states {
        match owner {
            Owner::Rank(r) => {
                job.pg_states.insert((pg, r), st);
            }
            Owner::File(f) => {
                job.anonymous_pg_states.insert((pg, f), st);
            }
        }
    }
}

fn record_work(st: &mut PgRankState, ev: &Event) {
    st.failed_seq = st.failed_seq.or(ev.int("seq"));
    if st.op.is_none() {
        st.op = ev.text_field("op").map(str::to_string);
    }
    st.numel_in = st.numel_in.or(ev.int("numel_in"));
    st.numel_out = st.numel_out.or(ev.int("numel_out"));
    st.timeout_ms = st.timeout_ms.or(ev.int("timeout_ms"));
}

/// The Flight Recorder's oldest incomplete collective is the one this rank
/// waits in; its op and size let ranks be compared.
fn record_flight(st: &mut PgRankState, ev: &Event) {
    if let Some(seq) = ev.int("seq") {
        st.failed_seq = st.failed_seq.or(Some(seq));
        if st.op.is_none() {
            st.op = ev.text_field("op").map(str::to_string);
        }
        st.numel_in = st.numel_in.or(ev.int("numel_in"));
    }
}

/// The process group an event names (`[PG 0 …]`, `[PG ID 4 PG GUID 17 …]`).
/// torch 2.4+'s `PG ID` counts the groups each process created, so it
/// need not agree between ranks; the GUID is the group's name, the same
/// on every member: it keys the group where printed.
fn pg_field(ev: &Event) -> Option<String> {
    ev.text_field("pg_guid")
        .or(ev.text_field("pg"))
        .map(str::to_string)
}

/// (rank, seq) → process group id, from the status lines that name both.
fn pg_by_rank_and_seq(job: &Job) -> BTreeMap<(u32, i64), String> {
    job.events_where(|k| k == EventKind::PgStatus)
        .filter_map(|(_, e)| Some(((e.who.rank?, e.int("seq")?), pg_field(e)?)))
        .collect()
}

/// seq → the one process group whose status lines name it (`None` where
/// two groups reached that number): a rank whose own timeout line names no
/// group (torch 2.2–2.3 print `[Rank 5] Watchdog caught …`) timed out in the
/// group the other ranks' status lines put that work in.
fn pg_by_seq(pg_of: &BTreeMap<(u32, i64), String>) -> BTreeMap<i64, Option<String>> {
    let mut out: BTreeMap<i64, Option<String>> = BTreeMap::new();
    for (&(_, seq), pg) in pg_of {
        out.entry(seq)
            .and_modify(|known| {
                if known.as_ref() != Some(pg) {
                    *known = None;
                }
            })
            .or_insert_with(|| Some(pg.clone()));
    }
    out
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
