//! Compiling grammar files into one matcher.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::bytes::Regex;
use std::sync::Arc;

use super::GrammarError;
use super::fields::convert_field;
use super::spec::{FieldKind, GrammarFile, PatternSpec, Scope};
use crate::model::{EventKind, Fields, Level, Value, intern};

/// Index of a pattern inside a [`Grammar`]; lower is tried first.
pub type PatternIdx = u32;

/// One compiled pattern.
#[derive(Debug)]
pub struct Pattern {
    pub id: &'static str,
    pub title: String,
    pub source: Arc<str>,
    pub kind: EventKind,
    pub level: Option<Level>,
    pub fallback: bool,
    pub scope: Scope,
    /// Fields ignored when deciding a match only repeats an earlier one
    /// (`None`: every match is kept).
    pub repeats_differ_in: Option<Vec<Box<str>>>,
    regex: Regex,
    /// Kind of each named capture, in capture order.
    captures: Vec<(&'static str, FieldKind)>,
    constants: Vec<(&'static str, Value)>,
    /// Sample lines with the fields they must yield (checked by the self-test).
    pub samples: Vec<(String, Fields)>,
    pub literals: Vec<String>,
    pub file: String,
}

/// A successful match of one pattern on one line.
#[derive(Debug)]
pub struct Match<'g> {
    pub pattern: &'g Pattern,
    pub fields: Fields,
}

/// All patterns, compiled and frozen; shared by reference across workers.
#[derive(Debug)]
pub struct Grammar {
    patterns: Vec<Pattern>,
    prefilter: AhoCorasick,
    /// For each prefilter literal, the patterns that listed it.
    literal_owners: Vec<Vec<PatternIdx>>,
}

impl Grammar {
    /// The built-in grammars plus `extra` (file name, TOML text) ones.
    pub fn with_extra(extra: &[(String, String)]) -> Result<Grammar, GrammarError> {
        let mut sources: Vec<(String, String)> = super::BUILTIN
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        sources.extend(extra.iter().cloned());
        Grammar::compile(&sources)
    }

    pub fn builtin() -> Result<Grammar, GrammarError> {
        Grammar::with_extra(&[])
    }

    /// Compiles grammar files in order; earlier files take priority.
    pub fn compile(files: &[(String, String)]) -> Result<Grammar, GrammarError> {
        let mut patterns = Vec::new();
        for (file, text) in files {
            let parsed: GrammarFile =
                toml::from_str(text).map_err(|source| GrammarError::Toml {
                    file: file.clone(),
                    source,
                })?;
            let source: Arc<str> = parsed.source.as_str().into();
            for spec in parsed.patterns {
                patterns.push(compile_pattern(file, &source, spec)?);
            }
        }
        check_unique_ids(&patterns)?;
        let (prefilter, literal_owners) = build_prefilter(&patterns)?;
        Ok(Grammar {
            patterns,
            prefilter,
            literal_owners,
        })
    }

    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    pub fn pattern(&self, idx: PatternIdx) -> &Pattern {
        &self.patterns[idx as usize]
    }

    /// Every literal occurrence in `haystack`: (byte offset, literal index).
    pub fn literal_hits<'a>(
        &'a self,
        haystack: &'a [u8],
    ) -> impl Iterator<Item = (usize, u32)> + 'a {
        self.prefilter
            .find_overlapping_iter(haystack)
            .map(|m| (m.start(), m.pattern().as_u32()))
    }

    /// The patterns that own literal `lit`.
    pub fn owners(&self, lit: u32) -> &[PatternIdx] {
        &self.literal_owners[lit as usize]
    }

    /// Candidate patterns for a whole line (used where no buffer-wide scan ran).
    pub fn candidates(&self, line: &[u8], out: &mut Vec<PatternIdx>) {
        out.clear();
        for (_, lit) in self.literal_hits(line) {
            out.extend_from_slice(self.owners(lit));
        }
        out.sort_unstable();
        out.dedup();
    }

    /// Tries `candidates` (sorted, deduplicated) on a line whose message starts
    /// at `body_start`: the first regular pattern that matches wins, then
    /// fallbacks in order.
    pub fn match_line(
        &self,
        candidates: &[PatternIdx],
        line: &[u8],
        body_start: usize,
    ) -> Option<Match<'_>> {
        let regular = candidates.iter().filter(|&&i| !self.pattern(i).fallback);
        let fallback = candidates.iter().filter(|&&i| self.pattern(i).fallback);
        regular.chain(fallback).find_map(|&i| {
            let p = self.pattern(i);
            let hay = match p.scope {
                Scope::Message => &line[body_start..],
                Scope::Line => line,
            };
            p.try_match(hay)
        })
    }
}

impl Pattern {
    /// Runs the regex on `body` and extracts typed fields.
    pub fn try_match(&self, body: &[u8]) -> Option<Match<'_>> {
        let caps = self.regex.captures(body)?;
        let mut fields = Fields::with_capacity(caps.len() + self.constants.len());
        for (name, kind) in &self.captures {
            if let Some(m) = caps.name(name) {
                let raw = String::from_utf8_lossy(m.as_bytes());
                fields.insert(name, convert_field(*kind, &raw));
            }
        }
        for (name, value) in &self.constants {
            fields.insert(name, value.clone());
        }
        Some(Match {
            pattern: self,
            fields,
        })
    }
}

fn compile_pattern(
    file: &str,
    source: &Arc<str>,
    spec: PatternSpec,
) -> Result<Pattern, GrammarError> {
    let fail = |reason: String| GrammarError::Pattern {
        file: file.into(),
        id: spec.id.clone(),
        reason,
    };
    let kind = EventKind::from_name(&spec.event)
        .ok_or_else(|| fail(format!("unknown event kind `{}`", spec.event)))?;
    let level = match &spec.level {
        Some(word) => {
            Some(Level::from_word(word).ok_or_else(|| fail(format!("unknown level `{word}`")))?)
        }
        None => None,
    };
    if spec.literals.is_empty() || spec.literals.iter().any(String::is_empty) {
        return Err(fail(
            "needs at least one non-empty literal for the prefilter".into(),
        ));
    }
    let regex = Regex::new(&spec.regex).map_err(|source| GrammarError::Regex {
        file: file.into(),
        id: spec.id.clone(),
        source,
    })?;
    let captures = capture_kinds(&regex, &spec).map_err(fail)?;
    if let Some(bad) = spec
        .repeats_differ_in
        .iter()
        .find(|f| !captures.iter().any(|(n, _)| **n == ***f))
    {
        return Err(fail(format!(
            "repeats_differ_in names `{bad}`, not a named capture of the regex"
        )));
    }
    let constants = spec
        .set
        .iter()
        .map(|(k, v)| toml_to_value(v).map(|v| (intern(k), v)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let samples = spec
        .samples
        .iter()
        .map(|s| sample_fields(&s.fields).map(|f| (s.line.clone(), f)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    Ok(Pattern {
        id: intern(&spec.id),
        title: spec.title,
        source: source.clone(),
        kind,
        level,
        fallback: spec.fallback,
        repeats_differ_in: (!spec.repeats_differ_in.is_empty()).then(|| {
            spec.repeats_differ_in
                .iter()
                .map(|f| f.as_str().into())
                .collect()
        }),
        scope: spec.scope,
        regex,
        captures,
        constants,
        samples,
        literals: spec.literals,
        file: file.into(),
    })
}

fn capture_kinds(
    regex: &Regex,
    spec: &PatternSpec,
) -> Result<Vec<(&'static str, FieldKind)>, String> {
    let names: Vec<&str> = regex.capture_names().flatten().collect();
    if let Some(unknown) = spec.fields.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(format!(
            "field `{unknown}` is not a named capture of the regex"
        ));
    }
    Ok(names
        .iter()
        .map(|n| (intern(n), spec.fields.get(*n).copied().unwrap_or_default()))
        .collect())
}

fn toml_to_value(v: &toml::Value) -> Result<Value, String> {
    match v {
        toml::Value::Integer(i) => Ok(Value::Int(*i)),
        toml::Value::String(s) => Ok(Value::Text(s.as_str().into())),
        other => Err(format!(
            "field values must be strings or integers, not {}",
            other.type_str()
        )),
    }
}

fn sample_fields(map: &std::collections::BTreeMap<String, toml::Value>) -> Result<Fields, String> {
    let mut fields = Fields::default();
    for (k, v) in map {
        fields.insert(intern(k), toml_to_value(v)?);
    }
    Ok(fields)
}

fn check_unique_ids(patterns: &[Pattern]) -> Result<(), GrammarError> {
    let mut ids: Vec<(&str, &str)> = patterns.iter().map(|p| (p.id, p.file.as_str())).collect();
    ids.sort_unstable();
    match ids.windows(2).find(|w| w[0].0 == w[1].0) {
        Some(w) => Err(GrammarError::Pattern {
            file: w[1].1.into(),
            id: w[1].0.into(),
            reason: "duplicate pattern id".into(),
        }),
        None => Ok(()),
    }
}

/// One automaton over the distinct literals of all patterns; each literal keeps
/// the list of patterns that named it.
fn build_prefilter(
    patterns: &[Pattern],
) -> Result<(AhoCorasick, Vec<Vec<PatternIdx>>), GrammarError> {
    let mut literals: Vec<String> = Vec::new();
    let mut owners: Vec<Vec<PatternIdx>> = Vec::new();
    for (idx, spec_literals) in patterns.iter().map(|p| &p.literals).enumerate() {
        for lit in spec_literals {
            let slot = match literals.iter().position(|l| l == lit) {
                Some(slot) => slot,
                None => {
                    literals.push(lit.clone());
                    owners.push(Vec::new());
                    literals.len() - 1
                }
            };
            owners[slot].push(idx as PatternIdx);
        }
    }
    // A full DFA: a few hundred literals make it small, and it scans every
    // byte of the input, so its speed is the floor of the whole run.
    let ac = AhoCorasickBuilder::new()
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(&literals)
        .map_err(GrammarError::Prefilter)?;
    Ok((ac, owners))
}
