//! Where the callers of one communicator part ways, from NCCL's COLL trace.
//!
//! Every member of a communicator launches its collectives in one order,
//! so at one launch count (`opCount`) every member called the same op with
//! the same count and datatype (and root, and reduction, where the op has
//! them). Two calls at one count are a mismatch NCCL itself does not check.
//!
//! The count is only comparable where it counts every launch: it stays put
//! on a process with no proxy work, and calls grouped into one launch share
//! it. So a caller's window is read only where its counts strictly rise,
//! and a communicator with point-to-point calls in any window is left out
//! (members that took no part in a send did not count its launch).

use std::collections::{BTreeMap, BTreeSet};

use crate::grammar::knowledge::NcclCalls;
use crate::model::{CallTrace, EventIdx, Job};

/// One call as the members must agree on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub op: String,
    pub count: i64,
    pub datatype: i64,
    pub root: Option<i64>,
    pub red_op: Option<i64>,
}

impl Call {
    /// `Broadcast of 53 int64 elements from root 0`.
    pub fn describe(&self, rules: &NcclCalls) -> String {
        let root = self
            .root
            .map(|r| format!(" from root {r}"))
            .unwrap_or_default();
        let dtype = match rules.datatype(self.datatype) {
            Some(name) => name.to_string(),
            None => format!("datatype-{}", self.datatype),
        };
        format!("{} of {} {dtype} elements{root}", self.op, self.count)
    }
}

/// One side of a split: its call, its callers (indices into
/// `Job::call_traces`) and a line of each.
#[derive(Debug, Clone)]
pub struct Side {
    pub call: Call,
    pub callers: Vec<usize>,
    pub lines: Vec<EventIdx>,
}

/// The first launch count at which callers of one communicator called
/// different things.
#[derive(Debug, Clone)]
pub struct Divergence {
    pub comm: String,
    pub op_count: i64,
    /// Largest side first.
    pub sides: Vec<Side>,
}

impl Divergence {
    /// The callers outside the one largest side; none where two sides tie
    /// for largest (which side is odd the trace cannot say).
    pub fn odd_callers(&self) -> Vec<usize> {
        match &self.sides[..] {
            [first, second, ..] if first.callers.len() > second.callers.len() => self.sides[1..]
                .iter()
                .flat_map(|s| s.callers.iter().copied())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The first divergence over every communicator (lowest launch count,
/// then communicator name), or `None` where all callers agree.
pub fn first_divergence(job: &Job, rules: &NcclCalls) -> Option<Divergence> {
    let mut by_comm: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, trace) in job.call_traces.iter().enumerate() {
        by_comm.entry(trace.comm.as_str()).or_default().push(i);
    }
    by_comm
        .into_iter()
        .filter_map(|(comm, callers)| divergence_in(job, rules, comm, &callers))
        .min_by(|a, b| a.op_count.cmp(&b.op_count).then(a.comm.cmp(&b.comm)))
}

fn divergence_in(
    job: &Job,
    rules: &NcclCalls,
    comm: &str,
    callers: &[usize],
) -> Option<Divergence> {
    let mut windows = Vec::new();
    for &i in callers {
        let window = window_of(job, &job.call_traces[i]);
        if window.iter().any(|(_, c, _)| !rules.agreeing(&c.op)) {
            return None;
        }
        if rises(&window) {
            windows.push((i, window));
        }
    }
    let mut at: BTreeMap<i64, Vec<(usize, Call, EventIdx)>> = BTreeMap::new();
    for (i, window) in &windows {
        for (count, call, idx) in window {
            let entry = (*i, agreed_part(rules, call), *idx);
            at.entry(*count).or_default().push(entry);
        }
    }
    let (op_count, sides) = at
        .into_iter()
        .map(|(count, calls)| (count, sides_of(calls)))
        .find(|(_, sides)| sides.len() > 1)?;
    Some(Divergence {
        comm: comm.to_string(),
        op_count,
        sides,
    })
}

/// The calls at one launch count, grouped by what they called, largest
/// group first. A line cut before its root or reduction leaves that part
/// out of the comparison at this count.
fn sides_of(mut calls: Vec<(usize, Call, EventIdx)>) -> Vec<Side> {
    if calls.iter().any(|(_, c, _)| c.root.is_none()) {
        calls.iter_mut().for_each(|(_, c, _)| c.root = None);
    }
    if calls.iter().any(|(_, c, _)| c.red_op.is_none()) {
        calls.iter_mut().for_each(|(_, c, _)| c.red_op = None);
    }
    let mut sides: BTreeMap<Call, Side> = BTreeMap::new();
    for (caller, call, idx) in calls {
        let side = sides.entry(call.clone()).or_insert_with(|| Side {
            call,
            callers: Vec::new(),
            lines: Vec::new(),
        });
        side.callers.push(caller);
        side.lines.push(idx);
    }
    let mut sides: Vec<Side> = sides.into_values().collect();
    sides.sort_by_key(|s| std::cmp::Reverse(s.callers.len()));
    sides
}

/// A caller's calls that can be compared: (launch count, call, line). The
/// first kept call is left out where earlier ones were let go, since those
/// may have shared its count.
fn window_of(job: &Job, trace: &CallTrace) -> Vec<(i64, Call, EventIdx)> {
    let skip = usize::from(trace.earlier > 0);
    trace
        .calls
        .iter()
        .skip(skip)
        .filter_map(|&idx| {
            let ev = &job.events[idx];
            let call = Call {
                op: ev.text_field("op")?.to_string(),
                count: ev.int("count")?,
                datatype: ev.int("datatype")?,
                root: ev.int("root"),
                red_op: ev.int("red_op"),
            };
            Some((ev.int("op_count")?, call, idx))
        })
        .collect()
}

/// Whether each call has a launch count of its own, rising.
fn rises(window: &[(i64, Call, EventIdx)]) -> bool {
    window.windows(2).all(|w| w[0].0 < w[1].0)
}

/// The parts of a call that members must agree on: the root only for a
/// rooted op, the reduction only for a reducing one.
fn agreed_part(rules: &NcclCalls, call: &Call) -> Call {
    Call {
        root: call.root.filter(|_| rules.rooted(&call.op)),
        red_op: call.red_op.filter(|_| rules.reducing(&call.op)),
        ..call.clone()
    }
}

/// The global ranks of `callers`, where known.
pub fn ranks_of(job: &Job, callers: &[usize]) -> BTreeSet<u32> {
    callers
        .iter()
        .filter_map(|&i| job.call_traces[i].rank)
        .collect()
}
