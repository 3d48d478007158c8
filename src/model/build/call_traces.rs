//! Each caller's last calls per communicator, from NCCL's COLL trace.
//!
//! A call line names its communicator by the caller's own pointer, which
//! means nothing to the other members. The caller's init line for that
//! pointer gives the name all members share: the commId (2.16+). Without
//! one, a caller with a single communicator of the call's size shares it
//! with the other callers of that size (a job's one world communicator);
//! callers with two of one size and no commId are left out, since which of
//! them is whose cannot be told.

use std::collections::BTreeMap;

use crate::model::{CallTrace, EventKind, Job, Sym};

/// A process: host, pid, and the file where no pid is printed.
type Process = (Option<Sym>, Option<u32>, u32);
/// A process's communicator: the process and the caller's pointer.
type CallerComm = (Option<Sym>, Option<u32>, u32, String);

#[derive(Default)]
struct CommFacts {
    comm_id: Option<String>,
    nranks: Option<i64>,
    comm_rank: Option<u32>,
}

pub fn collect(job: &mut Job) {
    let mut traces: BTreeMap<CallerComm, CallTrace> = BTreeMap::new();
    let mut facts: BTreeMap<CallerComm, CommFacts> = BTreeMap::new();
    for (idx, ev) in job.events_where(|k| matches!(k, EventKind::NcclCollCall)) {
        let Some(comm) = ev.text_field("comm") else {
            continue;
        };
        let key = caller_comm(ev, comm);
        let trace = traces.entry(key.clone()).or_insert_with(|| CallTrace {
            host: ev.who.host.as_deref().map(str::to_string),
            pid: ev.who.pid,
            ..CallTrace::default()
        });
        trace.rank = trace.rank.or(ev.who.rank);
        trace.earlier += ev.int(crate::parse::EARLIER).unwrap_or(0) as u64;
        trace.calls.push(idx);
        let f = facts.entry(key).or_default();
        f.nranks = f.nranks.or(ev.int("nranks"));
    }
    if traces.is_empty() {
        return;
    }
    for (_, ev) in job.events_where(|k| k == EventKind::NcclCommInit) {
        let Some(comm) = ev.text_field("comm") else {
            continue;
        };
        // Communicators without calls count too: a second one of the
        // same size makes the size ambiguous.
        let f = facts.entry(caller_comm(ev, comm)).or_default();
        f.comm_id = f
            .comm_id
            .take()
            .or(ev.text_field("comm_id").map(str::to_string));
        f.nranks = f.nranks.or(ev.int("nranks"));
        f.comm_rank = f.comm_rank.or(ev.int("rank").map(|r| r as u32));
    }
    let sizes = comms_per_size(&facts);
    for (key, mut trace) in traces {
        let f = &facts[&key];
        let process = (key.0.clone(), key.1, key.2);
        let shared = match (&f.comm_id, f.nranks) {
            (Some(id), _) => Some(format!("commId {id}")),
            (None, Some(n)) if sizes.get(&(process, n)) == Some(&1) => Some(format!("nranks {n}")),
            _ => None,
        };
        let Some(comm) = shared else { continue };
        trace.comm = comm;
        trace.comm_rank = f.comm_rank;
        job.call_traces.push(trace);
    }
}

fn caller_comm(ev: &crate::model::Event, comm: &str) -> CallerComm {
    // Lines without a pid (a pasted excerpt) are one caller per file.
    let file = if ev.who.pid.is_some() {
        0
    } else {
        ev.origin.file.0
    };
    (ev.who.host.clone(), ev.who.pid, file, comm.to_string())
}

/// How many communicators of each size each process holds.
fn comms_per_size(facts: &BTreeMap<CallerComm, CommFacts>) -> BTreeMap<(Process, i64), usize> {
    let mut sizes = BTreeMap::new();
    for (key, f) in facts {
        if let Some(n) = f.nranks {
            *sizes.entry(((key.0.clone(), key.1, key.2), n)).or_default() += 1;
        }
    }
    sizes
}
