//! The conditions of a defect's signature: how they are written in
//! `grammars/nccl_bugs.toml`, and what each one asks of the job.

use serde::Deserialize;

use crate::model::EventKind;

/// Signals a `death` condition may name.
const SIGNALS: &[&str] = &[
    "SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL", "SIGKILL",
];

/// Event kinds that are a failure in themselves (a symptom, not context).
const SYMPTOM_KINDS: &[EventKind] = &[
    EventKind::IbCompletionError,
    EventKind::IbAsyncEvent,
    EventKind::VerbsCallFailed,
    EventKind::SocketError,
    EventKind::BootstrapError,
    EventKind::ProxyError,
    EventKind::CudaFailure,
    EventKind::NvlsFailure,
    EventKind::TopologyFileError,
    EventKind::NcclErrorChain,
    EventKind::NcclWarn,
    EventKind::RasEvent,
    EventKind::WatchdogTimeout,
    EventKind::WatchdogException,
    EventKind::ProcessTakenDown,
    EventKind::NcclErrorReport,
    EventKind::CommAborted,
    EventKind::HeartbeatStuck,
    EventKind::PythonException,
    EventKind::ProcessSignaled,
    EventKind::WorkerFailed,
    EventKind::TaskExited,
];

/// One condition as written: exactly one of the subject keys (`event`, `env`,
/// `feature`, `state`, `death`, `op`) and the modifiers that subject allows.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConditionSpec {
    event: Option<String>,
    env: Option<String>,
    feature: Option<String>,
    state: Option<String>,
    death: Option<String>,
    op: Option<Vec<String>>,
    field: Option<String>,
    equals: Option<String>,
    contains: Option<String>,
    starts_with: Option<String>,
    at_least: Option<i64>,
    differs: Option<bool>,
}

/// What an event condition asks of the field (or, for `Contains` without a
/// field, of the whole line).
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Present,
    Equals(String),
    Contains(String),
    StartsWith(String),
    AtLeast(i64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum EnvTest {
    Present,
    Equals(String),
    /// Ranks printed more than one value.
    Differs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Hang,
    InitFailure,
    /// A hang, a failed init, or any error line.
    Failure,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Event {
        kind: EventKind,
        field: Option<String>,
        test: Test,
    },
    Env {
        name: String,
        test: EnvTest,
    },
    Feature(String),
    State(State),
    Death(String),
    /// The hung collective's op is one of these (upper case, no leading `_`).
    Op(Vec<String>),
}

impl Condition {
    /// A failure in itself, rather than context (a setting, a feature, an op).
    pub fn is_symptom(&self) -> bool {
        match self {
            Condition::Event { kind, .. } => SYMPTOM_KINDS.contains(kind),
            Condition::State(_) | Condition::Death(_) => true,
            Condition::Env { .. } | Condition::Feature(_) | Condition::Op(_) => false,
        }
    }

    /// Says what the condition looks for, for the evidence's `why`.
    pub fn describe(&self) -> String {
        match self {
            Condition::Event { kind, field, test } => {
                let what = match (field, test) {
                    (None, Test::Contains(t)) => format!(" containing \"{t}\""),
                    (Some(f), Test::Present) => format!(" with a `{f}`"),
                    (Some(f), Test::Equals(t)) => format!(" with {f} = \"{t}\""),
                    (Some(f), Test::Contains(t)) => format!(" whose {f} contains \"{t}\""),
                    (Some(f), Test::StartsWith(t)) => format!(" whose {f} starts with \"{t}\""),
                    (Some(f), Test::AtLeast(n)) => format!(" with {f} ≥ {n}"),
                    (None, _) => String::new(),
                };
                format!("a `{}` line{what}", kind.name())
            }
            Condition::Env { name, test } => match test {
                EnvTest::Present => format!("{name} is set"),
                EnvTest::Equals(v) => format!("{name} = {v}"),
                EnvTest::Differs => format!("{name} differs between ranks"),
            },
            Condition::Feature(f) => format!("NCCL uses {f}"),
            Condition::State(State::Hang) => "a collective hung".into(),
            Condition::State(State::InitFailure) => "communicator init failed".into(),
            Condition::State(State::Failure) => "the job failed".into(),
            Condition::Death(s) => format!("a process died of {s}"),
            Condition::Op(ops) => format!("the hung collective is {}", ops.join(" or ")),
        }
    }
}

pub(super) fn condition(spec: ConditionSpec) -> Result<Condition, String> {
    let subjects = [
        spec.event.is_some(),
        spec.env.is_some(),
        spec.feature.is_some(),
        spec.state.is_some(),
        spec.death.is_some(),
        spec.op.is_some(),
    ];
    if subjects.iter().filter(|s| **s).count() != 1 {
        return Err(
            "a condition names exactly one of event, env, feature, state, death, op".into(),
        );
    }
    let tests = [
        spec.equals.as_ref().map(|s| Test::Equals(s.clone())),
        spec.contains.as_ref().map(|s| Test::Contains(s.clone())),
        spec.starts_with
            .as_ref()
            .map(|s| Test::StartsWith(s.clone())),
        spec.at_least.map(Test::AtLeast),
    ];
    let mut tests = tests.into_iter().flatten();
    let test = tests.next();
    if tests.next().is_some() {
        return Err(
            "a condition has at most one of equals, contains, starts_with, at_least".into(),
        );
    }
    if matches!(&test, Some(Test::Equals(s) | Test::Contains(s) | Test::StartsWith(s)) if s.is_empty())
    {
        return Err("an empty text test matches everything".into());
    }
    let no_modifiers = spec.field.is_none() && test.is_none() && spec.differs.is_none();
    if let Some(name) = spec.event {
        let kind = EventKind::from_name(&name).ok_or(format!("unknown event kind `{name}`"))?;
        if spec.differs.is_some() {
            return Err("`differs` is for env conditions".into());
        }
        let test = test.unwrap_or(Test::Present);
        if spec.field.is_none() && !matches!(test, Test::Present | Test::Contains(_)) {
            return Err("without a field only `contains` (the line) applies".into());
        }
        return Ok(Condition::Event {
            kind,
            field: spec.field,
            test,
        });
    }
    if let Some(name) = spec.env {
        if !name.starts_with("NCCL_") || spec.field.is_some() {
            return Err(format!(
                "env `{name}`: an NCCL_* name, with equals or differs"
            ));
        }
        let test = match (test, spec.differs) {
            (None, None | Some(false)) => EnvTest::Present,
            (None, Some(true)) => EnvTest::Differs,
            (Some(Test::Equals(v)), None) => EnvTest::Equals(v),
            _ => return Err(format!("env `{name}`: use equals or differs")),
        };
        return Ok(Condition::Env { name, test });
    }
    if !no_modifiers {
        return Err("feature, state, death and op take no modifiers".into());
    }
    if let Some(feature) = spec.feature {
        return match feature.trim() {
            "" => Err("empty feature".into()),
            f => Ok(Condition::Feature(f.to_ascii_uppercase())),
        };
    }
    if let Some(state) = spec.state {
        return match state.as_str() {
            "hang" => Ok(Condition::State(State::Hang)),
            "init_failure" => Ok(Condition::State(State::InitFailure)),
            "failure" => Ok(Condition::State(State::Failure)),
            other => Err(format!("unknown state `{other}`")),
        };
    }
    if let Some(signal) = spec.death {
        return match SIGNALS.contains(&signal.as_str()) {
            true => Ok(Condition::Death(signal)),
            false => Err(format!("unknown signal `{signal}`")),
        };
    }
    let ops: Vec<String> = spec
        .op
        .unwrap_or_default()
        .iter()
        .map(|o| op_name(o))
        .collect();
    if ops.is_empty() || ops.iter().any(String::is_empty) {
        return Err("op needs a list of op names".into());
    }
    Ok(Condition::Op(ops))
}

/// An op name as compared: upper case, without PyTorch's leading `_`
/// (`_ALLGATHER_BASE` and `ALLGATHER_BASE` are one op).
pub fn op_name(op: &str) -> String {
    op.trim().trim_start_matches('_').to_ascii_uppercase()
}
