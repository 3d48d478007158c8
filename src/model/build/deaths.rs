//! Process deaths, from every source that reports them: Python exceptions,
//! fatal signals, the torchrun agent (`failed (exitcode: …)`, ChildFailedError),
//! mpirun and srun.
//!
//! A death is marked a *consequence* when it is what PyTorch does after a
//! collective failed (DistBackendError, the watchdog's SIGABRT, the agent's
//! SIGTERM to survivors): such a rank is a victim. Which exception types and
//! messages mean that is data (`grammars/knowledge.toml`).

use std::collections::BTreeSet;

use rayon::prelude::*;

use crate::model::{Death, DeathKind, Event, EventIdx, EventKind, Job, RankInfo, RawTime};

use super::rank_index::RankIndex;
use super::short_host;

/// What marks a death as a consequence of a collective failure.
#[derive(Debug, Clone, Default)]
pub struct ConsequenceRules {
    /// Exception type names (last dotted component) raised *because* NCCL failed.
    pub exception_types: Vec<String>,
    /// Message fragments that mean the same.
    pub message_markers: Vec<String>,
}

impl ConsequenceRules {
    pub fn is_consequence(&self, exc_type: &str, message: &str) -> bool {
        let short = exc_type.rsplit(['.', ':']).next().unwrap_or(exc_type);
        self.exception_types.iter().any(|t| t == short)
            || self
                .message_markers
                .iter()
                .any(|m| message.contains(m.as_str()))
    }
}

pub fn collect(job: &mut Job, rules: &ConsequenceRules) {
    // Each event is read alone: in parallel, in their order, beside the
    // launcher's blocks.
    let job_read: &Job = job;
    let index = RankIndex::of(job_read);
    let (mut deaths, blocks) = rayon::join(
        || {
            job_read
                .events
                .par_iter()
                .enumerate()
                .filter_map(|(idx, ev)| match ev.kind {
                    EventKind::PythonException => python_exception(ev, idx, rules),
                    EventKind::WorkerFailed => worker_failed(job_read, &index, ev, idx, rules),
                    EventKind::ProcessSignaled => {
                        process_signaled(job_read, &index, ev, idx, rules)
                    }
                    EventKind::RayTaskError => ray_task_error(job_read, &index, ev, idx, rules),
                    EventKind::TaskExited => task_exited(&index, ev, idx),
                    EventKind::ClosingSignal => closing_signal(&index, ev, idx),
                    _ => None,
                })
                .collect::<Vec<_>>()
        },
        || child_failed_blocks(job_read),
    );
    deaths.extend(blocks);
    after_the_cancel(job_read, &mut deaths);
    escalated_stops(&mut deaths);
    // A launcher's report may be all a rank left: it still names its host.
    for d in &deaths {
        if let (Some(rank), Some(host)) = (d.rank, &d.host) {
            let info = job.ranks.entry(rank).or_insert_with(|| RankInfo {
                rank,
                ..RankInfo::default()
            });
            info.host.get_or_insert_with(|| host.clone());
        }
    }
    job.deaths = deaths;
}

/// torchrun stops the workers left after a failure with SIGTERM and kills
/// those still alive after its grace period (`Unable to shutdown process N
/// via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL`): a worker
/// the agent stopped that then died of SIGKILL died of that escalation, not
/// by itself. (That it ignored SIGTERM says it was stuck host-side, which
/// the hang analysis reads from its silence.)
fn escalated_stops(deaths: &mut [Death]) {
    let stopped: BTreeSet<u32> = deaths
        .iter()
        .filter(|d| d.stopped_by_launcher)
        .filter_map(|d| d.rank)
        .collect();
    let killed = |d: &Death| d.signal.as_deref() == Some("SIGKILL") || d.exitcode == Some(-9);
    for d in deaths.iter_mut().filter(|d| !d.consequence && killed(d)) {
        if d.rank.is_some_and(|r| stopped.contains(&r)) {
            d.consequence = true;
            d.stopped_by_launcher = true;
            d.ignored_sigterm = true;
        }
    }
}

/// The scheduler's cancel (a user's scancel, the time limit) stops every
/// task: the exits srun reports after it in the same output (torchrun's
/// agent raises SignalException and exits 1, tasks end `Terminated`) are
/// what the cancel did, not a process that failed by itself.
fn after_the_cancel(job: &Job, deaths: &mut [Death]) {
    let cancels = job.cancel_lines();
    for d in deaths.iter_mut() {
        let after = d.evidence.first().is_some_and(|&idx| {
            let origin = job.events[idx].origin;
            cancels
                .get(&origin.file)
                .is_some_and(|&at| origin.line > at)
        });
        if after {
            d.consequence = true;
        }
    }
}

fn death(ev: &Event, idx: EventIdx, kind: DeathKind, reason: String) -> Death {
    Death {
        rank: ev.who.rank,
        host: ev.who.host.as_deref().map(str::to_string),
        pid: ev.who.pid,
        kind,
        exitcode: None,
        signal: None,
        reason,
        consequence: false,
        stopped_by_launcher: false,
        ignored_sigterm: false,
        time: ev.time,
        evidence: vec![idx],
    }
}

fn python_exception(ev: &Event, idx: EventIdx, rules: &ConsequenceRules) -> Option<Death> {
    ev.who.rank?;
    let exc = ev.text_field("exc_type")?;
    let message = ev.text_field("message").unwrap_or("");
    let reason = if message.is_empty() {
        exc.to_string()
    } else {
        format!("{exc}: {message}")
    };
    let mut d = death(ev, idx, DeathKind::Exception, reason);
    d.consequence = rules.is_consequence(exc, message);
    Some(d)
}

/// The torchrun agent names the worker by local rank and pid, on its own host.
fn worker_failed(
    job: &Job,
    index: &RankIndex<'_>,
    ev: &Event,
    idx: EventIdx,
    rules: &ConsequenceRules,
) -> Option<Death> {
    let exitcode = ev.int("exitcode");
    let pid = ev.int("worker_pid").map(|p| p as u32);
    let local = ev.int("worker_local_rank").map(|l| l as u32);
    let host = ev.who.host.as_deref().map(short_host);
    let by_pid = pid.and_then(|pid| index.by_pid(host, pid));
    let by_local = host
        .zip(local)
        .and_then(|key| index.by_host_local.get(&key).copied());
    let rank = by_pid
        .into_iter()
        .chain(by_local)
        .min()
        // One node and nothing else to go by: local ranks are global ranks.
        .or(local.filter(|_| job.hosts.len() <= 1 && host_count_from_agents(job) <= 1));
    let signal = exitcode
        .filter(|&c| c < 0)
        .and_then(|c| signal_name(-c))
        .or(ev.text_field("signal_name"))
        .map(str::to_string);
    let raised = (ev.text_field("what") == Some("raised"))
        .then(|| child_error(job, idx, rules))
        .flatten();
    let (kind, reason) = match (ev.text_field("what"), &signal) {
        // torch.multiprocessing.spawn's child that raised: its traceback
        // follows, and its error, where the paste kept it, says what it was.
        (Some("raised"), _) => match &raised {
            Some(error) => (DeathKind::Exception, error.reason.clone()),
            None => (
                DeathKind::ExitCode,
                "worker raised an exception (torch.multiprocessing.spawn)".to_string(),
            ),
        },
        (_, Some(sig)) if exitcode.is_none() => {
            (DeathKind::Signal, format!("worker killed by {sig}"))
        }
        _ => (exit_kind(exitcode), exit_reason("worker", exitcode)),
    };
    let mut d = death(ev, idx, kind, reason);
    d.rank = rank;
    d.pid = pid;
    d.exitcode = exitcode;
    d.signal = signal;
    d.consequence = matches!(d.signal.as_deref(), Some("SIGABRT" | "SIGTERM"))
        || raised.is_some_and(|error| error.consequence)
        || (exitcode == Some(1) && raised_nccl_failure_before(job, idx, rules));
    Some(d)
}

/// Exit code 1 is Python's for an uncaught exception, and a worker's
/// traceback reaches the agent's console before the agent's report of it:
/// where the last error the console shows before the report is NCCL's (a
/// failed call, a watchdog, an exception the knowledge base marks as one
/// raised because NCCL failed), the worker exited because NCCL failed under
/// it, not of its own accord.
fn raised_nccl_failure_before(job: &Job, idx: EventIdx, rules: &ConsequenceRules) -> bool {
    let last_error = job
        .events_above(idx, TRACEBACK_LINES)
        .map(|(_, e)| e)
        .find(|e| {
            matches!(
                e.kind,
                EventKind::PythonException | EventKind::NcclErrorReport
            )
        });
    last_error.is_some_and(|e| match e.kind {
        EventKind::PythonException => rules.is_consequence(
            e.text_field("exc_type").unwrap_or(""),
            e.text_field("message").unwrap_or(""),
        ),
        _ => true,
    })
}

/// How far a traceback runs from a line in it (a header, a frame) to its
/// exception, in lines.
pub const TRACEBACK_LINES: u64 = 200;

/// What a spawned child died of, as its traceback ends.
struct ChildError {
    reason: String,
    /// NCCL or its watchdog failing under it, or an exception the
    /// knowledge base marks as one raised because NCCL failed.
    consequence: bool,
}

/// The error that ends the traceback a spawn report's header opens: the
/// first exception or NCCL error read after it in the same file.
fn child_error(job: &Job, idx: EventIdx, rules: &ConsequenceRules) -> Option<ChildError> {
    let e = job
        .events_below(idx, TRACEBACK_LINES)
        .map(|(_, e)| e)
        .take_while(|e| e.kind != EventKind::WorkerFailed)
        .find(|e| {
            matches!(
                e.kind,
                EventKind::PythonException
                    | EventKind::NcclErrorReport
                    | EventKind::WatchdogTimeout
                    | EventKind::WatchdogException
                    | EventKind::CommAborted
            )
        })?;
    Some(match e.kind {
        EventKind::PythonException => {
            let exc = e.text_field("exc_type").unwrap_or("Exception");
            let message = e.text_field("message").unwrap_or("");
            ChildError {
                reason: format!("{exc}: {message}"),
                consequence: rules.is_consequence(exc, message),
            }
        }
        _ => ChildError {
            reason: e.text.trim().chars().take(200).collect(),
            consequence: true,
        },
    })
}

/// How many distinct hosts the torchrun agents' lines come from.
fn host_count_from_agents(job: &Job) -> usize {
    let hosts: std::collections::BTreeSet<_> = job
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::WorkerFailed | EventKind::ClosingSignal))
        .map(|e| e.who.host.as_deref())
        .collect();
    hosts.len()
}

/// The signal a `process_signaled` line names: by name, by number, or in a
/// shell's or faulthandler's words (`Segmentation fault`, `Bus error`).
pub fn signal_of(ev: &Event) -> Option<&str> {
    ev.text_field("signal_name")
        .or_else(|| ev.int("signal").and_then(signal_name))
        .or_else(|| {
            let what = ev.text_field("what")?;
            if what.contains("Segmentation") {
                Some("SIGSEGV")
            } else if what.starts_with("Bus error") {
                Some("SIGBUS")
            } else {
                None
            }
        })
}

fn process_signaled(
    job: &Job,
    index: &RankIndex<'_>,
    ev: &Event,
    idx: EventIdx,
    rules: &ConsequenceRules,
) -> Option<Death> {
    let signal = signal_of(ev).map(str::to_string);
    let exception = ev.text_field("exception").unwrap_or("");
    let mut d = death(ev, idx, DeathKind::Signal, ev.text.to_string());
    d.rank = ev.int("failed_rank").map(|r| r as u32).or(ev.who.rank);
    d.pid = ev.int("worker_pid").map(|p| p as u32).or(ev.who.pid);
    if let Some(node) = ev.text_field("node") {
        d.host = Some(node_host(job, node));
    }
    d.consequence = !exception.is_empty() && rules.is_consequence(exception, "");
    d.signal = signal;
    // A handler that names the process (UCX's `[host:pid …]`) but no rank:
    // the rank whose NCCL lines came from that pid.
    if d.rank.is_none()
        && let Some(pid) = d.pid
    {
        d.rank = index.by_pid(d.host.as_deref(), pid);
    }
    // A signal banner whose process no line ties to a rank still says a
    // process on that host died: kept, placed by its host.
    (d.rank.is_some() || d.host.is_some()).then_some(d)
}

/// A node named by address (Ray's `ip=`, the raylet's `Worker IP
/// address:`): the host that owns the address, where one does.
fn node_host(job: &Job, node: &str) -> String {
    job.host_of_addr(node)
        .unwrap_or_else(|| short_host(node))
        .to_string()
}

/// The exception a Ray worker raised, re-raised by its caller: a death of
/// the rank whose process that was. The trainer actor re-raises it too,
/// under its own pid, which is no rank's: only a worker's line counts.
fn ray_task_error(
    job: &Job,
    index: &RankIndex<'_>,
    ev: &Event,
    idx: EventIdx,
    rules: &ConsequenceRules,
) -> Option<Death> {
    let pid = u32::try_from(ev.int("worker_pid")?).ok()?;
    let host = ev.text_field("node").map(|n| node_host(job, n));
    let rank = index.by_pid(host.as_deref(), pid)?;
    let exc = ev.text_field("exc_type")?;
    let reason = format!("{exc} raised in Ray worker pid {pid}");
    let mut d = worker_death(ev, idx, DeathKind::Exception, reason, rank, pid);
    d.host = host;
    d.consequence = rules.is_consequence(exc, "");
    Some(d)
}

/// A death of the worker a launcher or caller names by pid, its rank known.
fn worker_death(
    ev: &Event,
    idx: EventIdx,
    kind: DeathKind,
    reason: String,
    rank: u32,
    pid: u32,
) -> Death {
    let mut d = death(ev, idx, kind, reason);
    d.rank = Some(rank);
    d.pid = Some(pid);
    d
}

/// The torchrun agent stopping the surviving workers after one failed: these
/// ranks are victims by definition.
fn closing_signal(index: &RankIndex<'_>, ev: &Event, idx: EventIdx) -> Option<Death> {
    let pid = ev
        .int("worker_pid")
        .or(ev.int("worker_pid2"))
        .map(|p| p as u32)?;
    let host = ev.who.host.as_deref().map(short_host);
    let rank = index.by_pid(host, pid)?;
    let signal = ev.text_field("signal").unwrap_or("SIGTERM").to_string();
    let reason = format!("stopped by the launcher with {signal}");
    let mut d = worker_death(ev, idx, DeathKind::Signal, reason, rank, pid);
    d.signal = Some(signal);
    d.consequence = true;
    d.stopped_by_launcher = true;
    Some(d)
}

/// `srun: error: node07: tasks 8-15: Aborted (core dumped)`: task ids are
/// ranks only with one task per rank, which the identity stage decided.
fn task_exited(index: &RankIndex<'_>, ev: &Event, idx: EventIdx) -> Option<Death> {
    let what = ev.text_field("what")?;
    let signal = if what.contains("Aborted") {
        Some("SIGABRT")
    } else if what.contains("Killed") || what.contains("Out Of Memory") {
        Some("SIGKILL")
    } else if what.contains("Segmentation") {
        Some("SIGSEGV")
    } else if what.contains("Terminated") {
        Some("SIGTERM")
    } else {
        None
    };
    // A node failure names the node, not its tasks.
    let tasks = ev
        .text_field("tasks")
        .map(expand_ranges)
        .unwrap_or_default();
    // A task id is a rank only where the lines show srun labelling ranks;
    // otherwise (torchrun under srun: one task per node) the task's host
    // is still where a process died.
    let rank = match &tasks[..] {
        [task] if index.task_ranks => Some(*task),
        _ => None,
    };
    let host = ev
        .text_field("hosts")
        .filter(|h| !h.contains(['[', ',']))
        .map(|h| short_host(h).to_string());
    if rank.is_none() && host.is_none() {
        return None;
    }
    // The grammar marks a report of a node the scheduler lost.
    let kind = if ev.text_field("cause") == Some("node_lost") {
        DeathKind::NodeLost
    } else if signal.is_some() {
        DeathKind::Signal
    } else {
        DeathKind::ExitCode
    };
    let said = if ev.pattern.starts_with("ompi.") {
        "mpirun lost its daemon there".to_string()
    } else {
        format!("srun: {what}")
    };
    let mut d = death(ev, idx, kind, said);
    d.rank = rank;
    d.host = host;
    d.signal = signal.map(str::to_string);
    // SIGABRT is the watchdog taking the process down after a failed
    // collective; SIGTERM is someone else stopping it (the scheduler's
    // cancel or time limit, srun after a sibling failed): neither is the
    // rank failing on its own.
    d.consequence = matches!(signal, Some("SIGABRT" | "SIGTERM"));
    Some(d)
}

/// ChildFailedError blocks: a `Root Cause` / `Failures:` header followed by
/// indented `field : value` lines, each line its own event. `Failures:` lists
/// one `[i]:` entry per worker; a field seen twice starts the next entry.
pub(super) fn child_failed_blocks(job: &Job) -> Vec<Death> {
    let mut out = Vec::new();
    let mut current: Option<Entry> = None;
    for (idx, ev) in job.events.iter().enumerate() {
        match ev.kind {
            EventKind::ChildFailedRoot => {
                out.extend(current.take().and_then(Entry::finish));
                current = Some(Entry::new(ev, idx));
            }
            EventKind::ChildFailedField => {
                let Some(entry) = current.as_mut() else {
                    continue;
                };
                let root = entry.death.evidence[0];
                let same_file = job.events[root].origin.file == ev.origin.file;
                if !same_file || ev.origin.line > entry.last_line + 12 {
                    continue;
                }
                let field = ev.text_field("field").unwrap_or("");
                if !entry.fields.insert(field.to_string()) {
                    let next = Entry::new(&job.events[root], root);
                    out.extend(std::mem::replace(entry, next).finish());
                    entry.fields.insert(field.to_string());
                }
                entry.last_line = ev.origin.line;
                entry.death.evidence.push(idx);
                apply_child_field(&mut entry.death, ev);
            }
            _ => {}
        }
    }
    out.extend(current.and_then(Entry::finish));
    out
}

/// One worker's entry of a ChildFailedError block, as it is read.
struct Entry {
    death: Death,
    last_line: u64,
    fields: BTreeSet<String>,
}

impl Entry {
    fn new(root: &Event, idx: EventIdx) -> Entry {
        let mut death = death(root, idx, DeathKind::ExitCode, String::new());
        death.rank = None;
        death.host = None;
        death.pid = None;
        Entry {
            death,
            last_line: root.origin.line,
            fields: BTreeSet::new(),
        }
    }

    fn finish(self) -> Option<Death> {
        self.death.rank.is_some().then_some(self.death)
    }
}

fn apply_child_field(d: &mut Death, ev: &Event) {
    match ev.text_field("field") {
        Some("rank") => d.rank = ev.int("failed_rank").map(|r| r as u32),
        Some("host") => d.host = ev.text_field("value").map(|h| short_host(h).to_string()),
        Some("exitcode") => {
            d.exitcode = ev.int("exitcode");
            d.pid = ev.int("worker_pid").map(|p| p as u32);
            d.kind = exit_kind(d.exitcode);
            d.signal = d
                .exitcode
                .filter(|&c| c < 0)
                .and_then(|c| signal_name(-c))
                .map(str::to_string);
            d.consequence = matches!(d.signal.as_deref(), Some("SIGABRT" | "SIGTERM"));
            d.reason = exit_reason("worker", d.exitcode);
        }
        Some("time") => {
            let stamp = ev.text_field("value").unwrap_or("");
            if let Ok(t) = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d_%H:%M:%S") {
                d.time = RawTime::Local(t);
            }
        }
        Some("traceback") => {
            if let Some(name) = ev.text_field("signal_name") {
                d.signal = Some(name.to_string());
            }
        }
        _ => {}
    }
}

fn exit_kind(code: Option<i64>) -> DeathKind {
    if code.is_some_and(|c| c < 0) {
        DeathKind::Signal
    } else {
        DeathKind::ExitCode
    }
}

fn exit_reason(who: &str, code: Option<i64>) -> String {
    match code {
        // SIGKILL from nowhere in the logs is most often the kernel's OOM killer.
        Some(-9) => format!("{who} killed by signal 9 (SIGKILL, often the kernel's OOM killer)"),
        Some(c) if c < 0 => format!(
            "{who} killed by signal {} ({})",
            -c,
            signal_name(-c).unwrap_or("unknown signal")
        ),
        Some(c) => format!("{who} exited with code {c}"),
        None => format!("{who} failed"),
    }
}

/// Linux signal numbers that training processes die of.
pub fn signal_name(n: i64) -> Option<&'static str> {
    Some(match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// `8-15`, `3,5,7-9`, `[0-3]` → the listed numbers (capped, for safety).
pub(super) fn expand_ranges(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim_matches(['[', ']']).split(',') {
        let mut ends = part.splitn(2, '-').map(|x| x.trim().parse::<u32>().ok());
        match (ends.next().flatten(), ends.next()) {
            (Some(a), None) => out.push(a),
            (Some(a), Some(Some(b))) if b >= a && b - a < 65_536 => out.extend(a..=b),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_task_ranges_expand() {
        assert_eq!(expand_ranges("8-11"), vec![8, 9, 10, 11]);
        assert_eq!(expand_ranges("3,5,7-8"), vec![3, 5, 7, 8]);
        assert_eq!(expand_ranges("x"), Vec::<u32>::new());
    }

    #[test]
    fn consequence_rules_match_the_last_dotted_name() {
        let rules = ConsequenceRules {
            exception_types: vec!["DistBackendError".into()],
            message_markers: vec!["Watchdog caught".into()],
        };
        assert!(rules.is_consequence("torch.distributed.DistBackendError", ""));
        assert!(rules.is_consequence("c10::DistBackendError", ""));
        assert!(rules.is_consequence(
            "RuntimeError",
            "[Rank 3] Watchdog caught collective operation timeout"
        ));
        assert!(!rules.is_consequence("torch.cuda.OutOfMemoryError", "CUDA out of memory"));
    }
}
