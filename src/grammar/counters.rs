//! The counter knowledge (`grammars/counters.toml`): what each NIC / IB
//! counter means, which cause its rise points to, and when a rise is
//! suspicious. Names differ by tool (`symbol_error` in sysfs is
//! `SymbolErrorCounter` in perfquery); aliases and name patterns map them to
//! one entry.

use std::collections::BTreeMap;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::GrammarError;
use crate::model::CauseKind;

const COUNTERS: &str = include_str!("../../grammars/counters.toml");
const FILE: &str = "counters.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CountersFile {
    counter: Vec<CounterSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CounterSpec {
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    patterns: Vec<String>,
    meaning: String,
    cause: Option<String>,
    severity: Option<Severity>,
    #[serde(default)]
    context: bool,
    min_delta: Option<u64>,
    err_delta: Option<u64>,
    ratio_of: Option<String>,
    max_ratio: Option<f64>,
    #[serde(default)]
    side: Side,
    #[serde(default)]
    corroborates_only: bool,
    outlier_factor: Option<f64>,
}

/// Where on a connection a counter counts. A `requester` counter (ACK
/// timeouts, NAKs received, retries exhausted) rises on the host whose sends
/// went unanswered — the loss is on the path to its peer, not necessarily at
/// its own port; a `local` counter (receive errors, symbol errors, drops)
/// rises where the bad link or port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    #[default]
    Local,
    Requester,
}

/// How much a suspicious rise matters.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Shown, never a lead.
    Info,
    Warn,
    Err,
}

/// What one counter means and when its rise is suspicious.
#[derive(Debug, Clone)]
pub struct CounterInfo {
    pub name: String,
    pub meaning: String,
    pub cause: Option<CauseKind>,
    pub severity: Severity,
    /// Traffic counters and non-counters: never suspicious.
    pub context: bool,
    pub min_delta: u64,
    pub err_delta: Option<u64>,
    /// Judge the rise against this counter's rise on the same port.
    pub ratio_of: Option<String>,
    pub max_ratio: Option<f64>,
    pub side: Side,
    /// Congestion control doing its work (DCQCN's ECN marks and CNPs): the
    /// rise backs other evidence but never reaches a verdict alone.
    pub corroborates_only: bool,
    /// For counters judged against the fabric's median port: how many
    /// times the median a port's rise must reach (None: the default).
    pub outlier_factor: Option<f64>,
}

#[derive(Debug, Default)]
pub struct CounterKnowledge {
    entries: Vec<CounterInfo>,
    exact: BTreeMap<String, usize>,
    patterns: Vec<(Regex, usize)>,
}

impl CounterKnowledge {
    pub fn builtin() -> Result<CounterKnowledge, GrammarError> {
        CounterKnowledge::parse(FILE, COUNTERS)
    }

    pub fn parse(file: &str, text: &str) -> Result<CounterKnowledge, GrammarError> {
        let raw: CountersFile = super::read_toml(file, text)?;
        let mut k = CounterKnowledge::default();
        for spec in raw.counter {
            let idx = k.entries.len();
            let bad = |reason: String| GrammarError::Pattern {
                file: file.into(),
                id: spec.name.clone(),
                reason,
            };
            for name in std::iter::once(&spec.name).chain(&spec.aliases) {
                if k.exact.insert(name.clone(), idx).is_some() {
                    return Err(bad(format!("{name} is named twice")));
                }
            }
            for p in &spec.patterns {
                let re = Regex::new(&pattern_regex(p)).map_err(|e| bad(e.to_string()))?;
                k.patterns.push((re, idx));
            }
            k.entries.push(info(&spec).map_err(bad)?);
        }
        k.check_ratios(file)?;
        Ok(k)
    }

    /// Every `ratio_of` names a counter this file knows.
    fn check_ratios(&self, file: &str) -> Result<(), GrammarError> {
        for e in &self.entries {
            if let Some(r) = &e.ratio_of
                && self.lookup(r).is_none()
            {
                return Err(GrammarError::Pattern {
                    file: file.into(),
                    id: e.name.clone(),
                    reason: format!("ratio_of names an unknown counter {r}"),
                });
            }
        }
        Ok(())
    }

    /// The entry for a counter as any tool names it.
    pub fn lookup(&self, name: &str) -> Option<&CounterInfo> {
        let idx = self.exact.get(name).copied().or_else(|| {
            self.patterns
                .iter()
                .find(|(re, _)| re.is_match(name))
                .map(|(_, i)| *i)
        })?;
        self.entries.get(idx)
    }

    pub fn entries(&self) -> &[CounterInfo] {
        &self.entries
    }
}

/// Checks one entry and turns it into its runtime form.
fn info(spec: &CounterSpec) -> Result<CounterInfo, String> {
    if spec.name.trim().is_empty() || spec.meaning.trim().is_empty() {
        return Err("name and meaning must not be empty".into());
    }
    let cause = match &spec.cause {
        Some(c) => Some(CauseKind::from_name(c).ok_or(format!("{c} is not a cause kind"))?),
        None => None,
    };
    let severity = match (spec.context, spec.severity) {
        (true, None) => Severity::Info,
        (true, Some(_)) => return Err("a context counter has no severity".into()),
        (false, Some(s)) => s,
        (false, None) => return Err("severity is missing".into()),
    };
    if severity != Severity::Info && cause.is_none() {
        return Err("a warn or err counter needs a cause".into());
    }
    if spec.context && cause.is_some() {
        return Err("a context counter points to no cause".into());
    }
    if spec.min_delta == Some(0) {
        return Err("min_delta must be at least 1".into());
    }
    if spec.ratio_of.is_some() != spec.max_ratio.is_some() {
        return Err("ratio_of and max_ratio go together".into());
    }
    if spec.max_ratio.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err("max_ratio must be a positive number".into());
    }
    let min_delta = spec.min_delta.unwrap_or(1);
    if spec.err_delta.is_some_and(|e| e < min_delta) {
        return Err("err_delta is below min_delta".into());
    }
    if spec
        .outlier_factor
        .is_some_and(|f| !(f >= 1.0 && f.is_finite()))
    {
        return Err("outlier_factor must be a number of at least 1".into());
    }
    Ok(CounterInfo {
        name: spec.name.clone(),
        meaning: spec.meaning.clone(),
        cause,
        severity,
        context: spec.context,
        min_delta,
        err_delta: spec.err_delta,
        ratio_of: spec.ratio_of.clone(),
        max_ratio: spec.max_ratio,
        side: spec.side,
        corroborates_only: spec.corroborates_only,
        outlier_factor: spec.outlier_factor,
    })
}

/// `rx_prio{N}_pause` → `^rx_prio[0-9]+_pause$`; `*` matches a name part.
fn pattern_regex(pattern: &str) -> String {
    let escaped = regex::escape(pattern)
        .replace(r"\{N\}", "[0-9]+")
        .replace(r"\*", "[A-Za-z0-9_]*");
    format!("^{escaped}$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_counters_load_and_every_entry_is_well_formed() {
        let k = CounterKnowledge::builtin().unwrap();
        assert!(k.entries().len() > 60);
        for e in k.entries() {
            assert!(!e.meaning.is_empty(), "{}", e.name);
            assert!(e.min_delta >= 1, "{}", e.name);
            if e.context {
                assert!(e.cause.is_none(), "{}", e.name);
            }
            if e.severity > Severity::Info {
                assert!(e.cause.is_some(), "{}", e.name);
            }
        }
    }

    #[test]
    fn aliases_and_patterns_find_one_entry() {
        let k = CounterKnowledge::builtin().unwrap();
        let se = k.lookup("SymbolErrorCounter").unwrap();
        assert_eq!(se.name, "symbol_error");
        assert_eq!(se.cause, Some(CauseKind::LinkFlap));
        assert_eq!(k.lookup("LinkDownedCounter").unwrap().name, "link_downed");
        assert_eq!(k.lookup("link_down_counter").unwrap().name, "link_downed");
        assert_eq!(k.lookup("rx_prio3_pause").unwrap().name, "rx_prio_pause");
        assert_eq!(k.lookup("rx_prio3_pause").unwrap().side, Side::Requester);
        assert_eq!(k.lookup("tx_prio3_pause").unwrap().side, Side::Local);
        assert_eq!(
            k.lookup("tx_prio3_pause_duration").unwrap().name,
            "tx_prio_pause_duration"
        );
        assert_eq!(k.lookup("ch12_eq_rearm").unwrap().name, "eq_rearm");
        assert!(k.lookup("ch12_poll").unwrap().context);
        assert!(k.lookup("rx3_packets").unwrap().context);
        assert!(k.lookup("lifespan").unwrap().context);
        assert!(k.lookup("PortXmitData").unwrap().context);
        assert_eq!(
            k.lookup("local_ack_timeout_err").unwrap().cause,
            Some(CauseKind::PacketLoss)
        );
        assert!(k.lookup("no_such_counter").is_none());
    }

    #[test]
    fn malformed_entries_are_refused() {
        let bad = [
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\nseverity = \"warn\"\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncause = \"nope\"\nseverity = \"warn\"\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncontext = true\nseverity = \"err\"\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncause = \"link_flap\"\nseverity = \"err\"\nmin_delta = 0\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncause = \"link_flap\"\nseverity = \"err\"\nratio_of = \"y\"\nmax_ratio = 0.1\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncontext = true\n[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncontext = true\n",
            "[[counter]]\nname = \"x\"\nmeaning = \"m\"\ncontext = true\nwhat = 1\n",
        ];
        for text in bad {
            assert!(CounterKnowledge::parse("t.toml", text).is_err(), "{text}");
        }
    }
}
