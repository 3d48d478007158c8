//! Flight Recorder dumps as events: per rank and process group, the last
//! enqueued / completed collective and the oldest one that did not complete.
//! The dump is binary (a pickle), so these events cite the file as a whole
//! (line 0) and carry a text written here.

use std::collections::BTreeMap;

use crate::model::{
    Event, EventKind, Fields, FlightDump, FlightEntry, FlightPgStatus, Job, Level, Origin, RawTime,
    Value, Who,
};

pub fn synthesize(job: &mut Job) {
    let mut new = Vec::new();
    for dump in &job.flight {
        let (Some(rank), Some(origin)) = (dump.rank, dump.origin) else {
            continue;
        };
        let oldest_open = oldest_incomplete_by_pg(dump);
        let statuses = if dump.pg_status.is_empty() {
            status_from_entries(dump)
        } else {
            dump.pg_status.clone()
        };
        let names = group_names(dump);
        for st in &statuses {
            let open = oldest_open.get(st.pg_id.as_str()).copied();
            let mut st = st.clone();
            if let Some(name) = names.get(st.pg_id.as_str()) {
                st.pg_id = (*name).to_string();
            }
            new.push(status_event(rank, origin, &st, open));
        }
    }
    job.events.extend(new);
}

/// Each group's name by its id in this dump. `pg_status` and the entries'
/// `pg_id` count the groups this process created, which need not agree
/// between ranks (a rank outside a group skips its id); the name (the
/// entries' `process_group[0]`) is the same on every member and is the
/// GUID the watchdog lines print, so the group is known by it.
fn group_names(dump: &FlightDump) -> BTreeMap<&str, &str> {
    dump.entries
        .iter()
        .filter_map(|e| Some((e.pg_id.as_deref()?, e.pg_name.as_deref()?)))
        .collect()
}

/// Dumps without `pg_status` (torch 2.2): the entries themselves say how far
/// each group got.
fn status_from_entries(dump: &FlightDump) -> Vec<FlightPgStatus> {
    let mut by_pg: BTreeMap<String, FlightPgStatus> = BTreeMap::new();
    for e in dump.entries.iter().filter(|e| !e.is_p2p) {
        let (Some(pg), Some(seq)) = (e.pg_id.clone(), e.collective_seq_id) else {
            continue;
        };
        let st = by_pg.entry(pg.clone()).or_insert_with(|| FlightPgStatus {
            pg_id: pg,
            ..Default::default()
        });
        st.last_enqueued = st.last_enqueued.max(Some(seq));
        if e.state.as_deref() == Some("completed") {
            st.last_completed = st.last_completed.max(Some(seq));
        }
        if matches!(e.state.as_deref(), Some("started" | "completed")) {
            st.last_started = st.last_started.max(Some(seq));
        }
    }
    by_pg.into_values().collect()
}

/// Per group, the oldest collective the dump does not record as completed.
fn oldest_incomplete_by_pg(dump: &FlightDump) -> BTreeMap<&str, &FlightEntry> {
    let mut out: BTreeMap<&str, &FlightEntry> = BTreeMap::new();
    for e in dump
        .entries
        .iter()
        .filter(|e| !e.is_p2p && e.state.as_deref() != Some("completed"))
    {
        let (Some(pg), Some(seq)) = (e.pg_id.as_deref(), e.collective_seq_id) else {
            continue;
        };
        let older = out
            .get(pg)
            .and_then(|o| o.collective_seq_id)
            .is_none_or(|o| seq < o);
        if older {
            out.insert(pg, e);
        }
    }
    out
}

fn status_event(
    rank: u32,
    origin: Origin,
    st: &crate::model::FlightPgStatus,
    open: Option<&FlightEntry>,
) -> Event {
    let mut fields = Fields::default();
    fields.insert("pg", Value::Text(st.pg_id.as_str().into()));
    let mut put = |name: &'static str, v: Option<i64>| {
        if let Some(v) = v {
            fields.insert(name, Value::Int(v));
        }
    };
    put("last_enqueued", st.last_enqueued);
    put("last_completed", st.last_completed);
    put("last_started", st.last_started);
    let mut text = format!(
        "Flight Recorder of rank {rank}: group {} last enqueued {}, last started {}, last completed {}",
        st.pg_id,
        show(st.last_enqueued),
        show(st.last_started),
        show(st.last_completed)
    );
    if let Some(e) = open {
        put("seq", e.collective_seq_id);
        put(
            "numel_in",
            e.input_sizes.first().map(|s| s.iter().product()),
        );
        if let Some(op) = &e.op {
            fields.insert("op", Value::Text(op.as_str().into()));
        }
        text.push_str(&format!(
            "; oldest not completed: {} #{} ({}, input {:?})",
            e.op.as_deref().unwrap_or("?"),
            show(e.collective_seq_id),
            e.state.as_deref().unwrap_or("?"),
            e.input_sizes
        ));
    }
    Event {
        kind: EventKind::FlightRecord,
        pattern: "flight_recorder.pg_status",
        origin,
        who: Who {
            rank: Some(rank),
            ..Who::default()
        },
        level: Level::Info,
        time: RawTime::None,
        fields,
        text: text.into(),
    }
}

fn show(v: Option<i64>) -> String {
    v.map_or_else(|| "none".to_string(), |x| x.to_string())
}
