//! Known NCCL defects (`grammars/nccl_bugs.toml`): a defect is proposed only
//! when a NCCL version of the job lies in its affected range *and* its
//! signature is seen. The version alone never suffices: the data refuses a
//! signature without a symptom.
//!
//! The weights are modest (about 0.5) on purpose: a matching defect explains
//! how a failure came about, but stronger direct evidence (a crashed rank, a
//! link flap) still wins, and the defect then stands as an alternative.

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_bugs::{
    Condition, EnvTest, NcclBug, NcclBugs, NcclVersion, State, Test, op_name,
};
use crate::model::{CauseKind, DeathKind, Event, EventIdx, EventKind, Job, Value};

use super::Ctx;

/// Other matching defects named in the detail besides the chosen one.
const MAX_ALSO: usize = 2;

/// Text a death's reason shows for a signal, when the signal number is lost
/// (`Segmentation fault (core dumped)` from a launcher).
const SIGNAL_TEXT: &[(&str, &str)] = &[
    ("SIGSEGV", "segmentation fault"),
    ("SIGBUS", "bus error"),
    ("SIGABRT", "aborted"),
    ("SIGFPE", "floating point exception"),
    ("SIGILL", "illegal instruction"),
    ("SIGKILL", "killed"),
];

/// A condition that held, and the line it rests on.
struct Cited {
    event: Option<EventIdx>,
    why: String,
    symptom: bool,
}

struct Found<'b> {
    bug: &'b NcclBug,
    version_event: Option<EventIdx>,
    cited: Vec<Cited>,
    dating: Dating,
}

/// How the job's release is known to lie in the defect's range.
enum Dating {
    /// A line printed it.
    Printed(NcclVersion),
    /// The release the job's PyTorch ships: (its PyTorch releases, the
    /// NCCL releases they ship).
    Shipped(String, String),
    /// No line printed it, but the defect's own line (`dated_by`) is one
    /// only the affected releases print.
    ByItsLine,
}

/// A defect matched only through the NCCL the PyTorch release ships counts
/// for this much of its weight: the job may have loaded another libnccl.
const SHIPPED_WEIGHT: f64 = 0.75;
/// And one dated by its own line, for this much: the line is the release's
/// by the source, but no line of the job confirms the release.
const SELF_DATED_WEIGHT: f64 = 0.8;

pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    // The embedded list is checked by the unit tests; should it ever fail to
    // load, this rule proposes nothing rather than stopping the analysis.
    let bugs = NcclBugs::builtin().ok()?;
    let versions = job_versions(ctx.job);
    // No line prints the release: the one the job's PyTorch ships stands in,
    // where every release its lines allow is affected alike.
    let shipped = versions
        .is_empty()
        .then(|| super::bundled::shipped_nccl(ctx.job))
        .flatten();
    let mut found: Vec<Found<'_>> = bugs
        .bugs
        .iter()
        .filter_map(|bug| {
            let (version_event, dating) = match &shipped {
                None if versions.is_empty() => {
                    let cited = bug.dated_by.iter().find_map(|c| check(ctx, hang, c))?;
                    (cited.event, Dating::ByItsLine)
                }
                None => {
                    let (v, e) = versions.iter().find(|(v, _)| bug.affected.contains(v))?;
                    (*e, Dating::Printed(*v))
                }
                Some(s) => {
                    if !s.nccl.iter().all(|v| bug.affected.contains(v)) {
                        return None;
                    }
                    let (event, torch) = s.cites.first()?;
                    let releases: Vec<String> = s.nccl.iter().map(|v| v.to_string()).collect();
                    let by = Dating::Shipped(torch.clone(), releases.join(" or "));
                    (Some(*event), by)
                }
            };
            let cited = signature_matches(ctx, hang, bug)?;
            Some(Found {
                bug,
                version_event,
                cited,
                dating,
            })
        })
        .collect();
    // Strongest first; among equals the more specific signature, then the id,
    // so the choice does not depend on the file's order.
    found.sort_by(|a, b| {
        b.bug
            .weight
            .total_cmp(&a.bug.weight)
            .then(b.cited.len().cmp(&a.cited.len()))
            .then(a.bug.id.cmp(&b.bug.id))
    });
    let best = found.first()?;
    Some(hypothesis(ctx.job, best, &found[1..]))
}

/// The NCCL versions of the job, oldest first, each with the line that
/// printed it: NCCL's banner (its suffix kept: `2.30.6a1` is a pre-release),
/// or PyTorch's `NCCL error …, NCCL version X` when no banner was logged.
fn job_versions(job: &Job) -> Vec<(NcclVersion, Option<EventIdx>)> {
    let mut out: Vec<(NcclVersion, Option<EventIdx>)> = Vec::new();
    let banner = |k| matches!(k, EventKind::NcclVersion | EventKind::NcclErrorReport);
    for (idx, ev) in job.events_where(banner) {
        let suffix = match ev.kind {
            EventKind::NcclVersion => ev.text_field("suffix").unwrap_or(""),
            EventKind::NcclErrorReport => "",
            _ => continue,
        };
        let text = format!("{}{suffix}", ev.text_field("version").unwrap_or(""));
        if let Some(v) = NcclVersion::parse(&text)
            && !out.iter().any(|(o, _)| *o == v)
        {
            out.push((v, Some(idx)));
        }
    }
    for v in job
        .nccl_versions
        .iter()
        .filter_map(|v| NcclVersion::parse(v))
    {
        if !out.iter().any(|(o, _)| *o == v) {
            out.push((v, None));
        }
    }
    out.sort_by_key(|(v, _)| *v);
    out
}

fn signature_matches(ctx: &Ctx<'_>, hang: Option<&Hang>, bug: &NcclBug) -> Option<Vec<Cited>> {
    let sig = &bug.signature;
    if sig.unless.iter().any(|c| check(ctx, hang, c).is_some()) {
        return None;
    }
    let mut cited = Vec::new();
    for c in &sig.all {
        cited.push(check(ctx, hang, c)?);
    }
    if !sig.any.is_empty() {
        cited.push(sig.any.iter().find_map(|c| check(ctx, hang, c))?);
    }
    Some(cited)
}

/// Whether one condition holds, with the line that shows it.
fn check(ctx: &Ctx<'_>, hang: Option<&Hang>, c: &Condition) -> Option<Cited> {
    let job = ctx.job;
    let event: Option<EventIdx> = match c {
        Condition::Event { kind, field, test } => job
            .events
            .iter()
            .position(|e| e.kind == *kind && event_passes(e, field.as_deref(), test))
            .map(Some),
        Condition::Env { name, test } => env_holds(job, name, test),
        Condition::Feature(feature) => job.events.iter().position(|e| uses(e, feature)).map(Some),
        Condition::State(State::Hang) => hang.map(hang_line),
        Condition::State(State::InitFailure) => init_failure(job).map(Some),
        Condition::State(State::Failure) => hang
            .map(hang_line)
            .or_else(|| init_failure(job).or_else(|| first_error(job)).map(Some)),
        Condition::Death(signal) => death_line(job, signal),
        Condition::Op(ops) => {
            let hang = hang?;
            let op = op_name(hang.op.as_deref()?);
            ops.contains(&op).then(|| hang_line(hang))
        }
    }?;
    Some(Cited {
        event,
        why: c.describe(),
        symptom: c.is_symptom(),
    })
}

fn hang_line(hang: &Hang) -> Option<EventIdx> {
    hang.evidence.first().copied()
}

fn event_passes(ev: &Event, field: Option<&str>, test: &Test) -> bool {
    let Some(field) = field else {
        return match test {
            Test::Contains(t) => contains_ignore_case(&ev.text, t),
            _ => true,
        };
    };
    let Some(value) = ev.fields.get(field) else {
        return false;
    };
    match (test, value) {
        (Test::Present, _) => true,
        (Test::AtLeast(n), v) => v.as_int().is_some_and(|x| x >= *n),
        (Test::Equals(t), Value::Int(x)) => t.trim().parse::<i64>().is_ok_and(|t| t == x),
        (Test::Equals(t), Value::Text(s)) => s.trim().eq_ignore_ascii_case(t),
        (Test::Contains(t), v) => contains_ignore_case(&v.to_string(), t),
        (Test::StartsWith(t), v) => starts_with_ignore_case(&v.to_string(), t),
    }
}

fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

fn starts_with_ignore_case(hay: &str, prefix: &str) -> bool {
    hay.len() >= prefix.len()
        && hay.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// NCCL prints some settings with a trailing period (`… set by environment
/// to 1.`); compare the value itself.
fn env_value(v: &str) -> &str {
    v.trim().trim_end_matches('.').trim()
}

/// The setting holds; `Some(line)` cites where NCCL printed it.
fn env_holds(job: &Job, name: &str, test: &EnvTest) -> Option<Option<EventIdx>> {
    let values = job.env.get(name)?;
    let holds = match test {
        EnvTest::Present => true,
        EnvTest::Equals(want) => values
            .keys()
            .any(|v| env_value(v).eq_ignore_ascii_case(want)),
        EnvTest::Differs => {
            let distinct: std::collections::BTreeSet<&str> =
                values.keys().map(|v| env_value(v)).collect();
            distinct.len() > 1
        }
    };
    holds.then(|| {
        job.events
            .iter()
            .position(|e| e.kind == EventKind::NcclEnvSetting && e.text_field("name") == Some(name))
    })
}

/// A channel or feature line shows NCCL using `feature` (`SHM`, `NET/IB`, a
/// `feature` set by a grammar pattern such as `NVLS` or `COLLNET`).
fn uses(ev: &Event, feature: &str) -> bool {
    if ev.kind != EventKind::NcclChannel {
        return false;
    }
    let named = ev
        .text_field("feature")
        .is_some_and(|f| f.eq_ignore_ascii_case(feature));
    let transport = ev.text_field("transport").is_some_and(|t| {
        t.eq_ignore_ascii_case(feature)
            || (starts_with_ignore_case(t, feature)
                && t.as_bytes().get(feature.len()) == Some(&b'/'))
    });
    named || transport
}

/// A process died of `signal`: by number, or by the text a launcher printed.
fn death_line(job: &Job, signal: &str) -> Option<Option<EventIdx>> {
    let text = SIGNAL_TEXT
        .iter()
        .find(|(s, _)| *s == signal)
        .map(|(_, t)| *t);
    // An exception's text may name a signal another process died of (a
    // DataLoader worker killed by a bus error): only signal deaths count.
    job.deaths
        .iter()
        .filter(|d| d.kind != DeathKind::Exception)
        .find(|d| {
            d.signal.as_deref() == Some(signal)
                || text.is_some_and(|t| contains_ignore_case(&d.reason, t))
        })
        .map(|d| d.evidence.first().copied())
}

/// NCCL-side error lines, in the order a failed init prints them.
fn is_nccl_error(ev: &Event) -> bool {
    match ev.kind {
        EventKind::NcclWarn => !ev.fields.contains("benign"),
        EventKind::NcclErrorChain => ev.int("result").is_some_and(|r| r != 0),
        EventKind::CudaFailure
        | EventKind::BootstrapError
        | EventKind::SocketError
        | EventKind::VerbsCallFailed
        | EventKind::ProxyError
        | EventKind::IbCompletionError
        | EventKind::IbAsyncEvent
        | EventKind::TopologyFileError => true,
        _ => false,
    }
}

/// Init failed: NCCL reported an error and no communicator ever completed
/// its init (nor ran a collective the watchdog could report on).
fn init_failure(job: &Job) -> Option<EventIdx> {
    let completed = job.a_comm_came_up() || !job.pg_states.is_empty();
    if completed {
        return None;
    }
    job.events.iter().position(is_nccl_error)
}

/// The first error of any kind: a NCCL error, a failed collective or a death.
fn first_error(job: &Job) -> Option<EventIdx> {
    job.events.iter().position(|e| {
        is_nccl_error(e)
            || matches!(
                e.kind,
                EventKind::WatchdogTimeout
                    | EventKind::WatchdogException
                    | EventKind::NcclErrorReport
                    | EventKind::CommAborted
            )
    })
}

/// Whether the lines of the defect's symptoms (every line of their
/// patterns, cited or not) come from processes on two or more hosts.
fn struck_on_several_hosts(job: &Job, best: &Found<'_>) -> bool {
    let patterns: std::collections::BTreeSet<&str> = best
        .cited
        .iter()
        .filter(|c| c.symptom)
        .filter_map(|c| job.events.get(c.event?))
        .filter(|e| is_nccl_error(e))
        .map(|e| e.pattern)
        .collect();
    let hosts: std::collections::BTreeSet<&str> = job
        .events
        .iter()
        .filter(|e| patterns.contains(e.pattern))
        .filter_map(|e| job.host_of_event(e))
        .collect();
    hosts.len() >= 2
}

/// The defect's symptom lines all printed on one host of a job of several,
/// the others having set up alike: the defect struck there (NVLS refused on
/// one host whose NVSwitch fabric is broken), and that host is where to
/// look; its ranks that printed them are the struck ones.
fn struck_on_one_host(job: &Job, best: &Found<'_>, h: &mut Hypothesis) {
    let patterns: std::collections::BTreeSet<&str> = best
        .cited
        .iter()
        .filter(|c| c.symptom)
        .filter_map(|c| job.events.get(c.event?))
        .map(|e| e.pattern)
        .collect();
    let struck: Vec<&crate::model::Event> = job
        .events
        .iter()
        .filter(|e| patterns.contains(e.pattern))
        .collect();
    let hosts: std::collections::BTreeSet<String> = struck
        .iter()
        .filter_map(|e| job.host_of_event(e))
        .map(crate::model::build::short_host_of)
        .collect();
    if hosts.len() != 1 || job.hosts_seen().len() < 2 {
        return;
    }
    let host = hosts.into_iter().next();
    if h.ranks.is_empty() {
        h.ranks = struck.iter().filter_map(|e| e.who.rank).collect();
    }
    h.host = host;
}

fn hypothesis(job: &Job, best: &Found<'_>, others: &[Found<'_>]) -> Hypothesis {
    let bug = best.bug;
    let mut h = Hypothesis::new(CauseKind::NcclBug);
    // The ranks whose own NCCL failed in the defect's way are the ones it
    // struck; a hang's timeouts (every rank's) name none.
    h.ranks = best
        .cited
        .iter()
        .filter(|c| c.symptom)
        .filter_map(|c| job.events.get(c.event?))
        .filter(|e| is_nccl_error(e))
        .filter_map(|e| e.who.rank)
        .collect();
    // The same failure printed by processes on several hosts struck the job
    // alike: no rank of it is the one the others waited for.
    if struck_on_several_hosts(job, best) {
        h.ranks.clear();
    } else {
        struck_on_one_host(job, best, &mut h);
    }
    let (scale, version) = match &best.dating {
        Dating::Printed(v) => (1.0, v.to_string()),
        Dating::Shipped(torch, nccl) => (
            SHIPPED_WEIGHT,
            format!("{nccl} (what PyTorch {torch} ships; no line names the release)"),
        ),
        Dating::ByItsLine => (
            SELF_DATED_WEIGHT,
            format!(
                "{} (no line names the release; only those releases print this warning)",
                bug.affected
            ),
        ),
    };
    let weight = bug.weight * scale;
    let mut detail = format!(
        "{version} ({} [`{}`]; fixed in {}",
        bug.title, bug.id, bug.fixed_in
    );
    for o in others.iter().take(MAX_ALSO) {
        detail.push_str(&format!(
            "; also consistent with `{}`, fixed in {}",
            o.bug.id, o.bug.fixed_in
        ));
    }
    detail.push(')');
    h.value("detail", detail);
    h.value("remedy", bug.remedy.clone());
    // The symptom lines come first in the evidence; the settings and the
    // version line follow. Within one source only the strongest counts, so
    // the confidence is the entry's weight.
    for c in &best.cited {
        let w = if c.symptom { weight } else { weight * 0.9 };
        h.support(
            Source::Nccl,
            w,
            c.event,
            format!("`{}` signature: {}", bug.id, c.why),
        );
    }
    h.support(
        Source::Nccl,
        weight * 0.8,
        best.version_event,
        format!(
            "NCCL {} is in the range `{}` affects ({}); fixed in {} (release notes of {}, commit {})",
            version,
            bug.id,
            bug.affected,
            bug.fixed_in,
            bug.source_release,
            bug.source_commit.get(..12).unwrap_or(&bug.source_commit)
        ),
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_tests_ignore_ascii_case() {
        assert!(contains_ignore_case("NET/IB : UDS: Binding", "uds: "));
        assert!(!contains_ignore_case("UDS", "UDS: "));
        assert!(starts_with_ignore_case("virbr0", "VIRBR"));
        assert!(!starts_with_ignore_case("vir", "virbr"));
        assert_eq!(env_value(" 1. "), "1");
    }

    #[test]
    fn a_feature_is_a_whole_transport_name_or_a_declared_feature() {
        let ev = |fields: &[(&'static str, &str)]| {
            let mut f = crate::model::Fields::default();
            for (k, v) in fields {
                f.insert(k, Value::Text((*v).into()));
            }
            Event::with_fields(EventKind::NcclChannel, f)
        };
        assert!(uses(&ev(&[("transport", "SHM")]), "SHM"));
        assert!(uses(&ev(&[("transport", "NET/IB")]), "NET"));
        assert!(uses(&ev(&[("transport", "NET/IB")]), "NET/IB"));
        assert!(!uses(&ev(&[("transport", "NET/IBext")]), "NET/IB"));
        assert!(!uses(&ev(&[("transport", "SHMX")]), "SHM"));
        assert!(uses(&ev(&[("feature", "NVLS")]), "NVLS"));
        assert!(!uses(&ev(&[("feature", "COLLNET")]), "NVLS"));
    }
}
