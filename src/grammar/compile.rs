//! Compiling grammar files into one matcher.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use memchr::memmem;
use rayon::prelude::*;
use regex::bytes::Regex;
use std::sync::{Arc, OnceLock};

use super::GrammarError;
use super::accel::{self, Accelerator, ListFields, Spans};
use super::fields::convert_field;
use super::spec::{FieldKind, GrammarFile, KeepLastSpec, PatternSpec, Scope};
use crate::model::{EventKind, FieldList, Fields, FieldsBuilder, Level, Value, intern};

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
    /// Wrapped pastes may continue its message on the next lines.
    pub wraps: bool,
    pub scope: Scope,
    /// Fields ignored when deciding a match only repeats an earlier one
    /// (`None`: every match is kept).
    pub repeats_differ_in: Option<Vec<&'static str>>,
    /// Only the last matches are kept per process and these fields' values.
    pub keep_last: Option<KeepLast>,
    /// The regex's text; the regex itself is built on first use for the
    /// built-in grammars (a job meets a fifth of their patterns, and
    /// building all cost a tenth of a second at every start), at once for a
    /// user's (so a mistake shows before any input is read).
    regex_src: Box<str>,
    regex: OnceLock<Regex>,
    /// The same regex held to the start of the text (`^(?:…)`), tried
    /// first: most matches start there, and a match held to the start is
    /// found in one pass instead of three (forward, backward, captures).
    /// Where it matches, it is the unanchored regex's match (the leftmost
    /// match starts at 0, and among matches starting at one place the
    /// preferred one is the same either way). Built on first use: a job
    /// uses few patterns, and building all at start-up cost 50 ms a run.
    at_start: OnceLock<Option<Regex>>,
    /// A hand-written reader that answers for the regex on the lines it
    /// knows (grammar/accel.rs).
    accelerator: Option<Accelerator>,
    /// For a reader that lists fields: the slots of its names that
    /// `repeats_differ_in` names, one bit each (found once here, not by
    /// comparing names on every line).
    listed_ignored: u32,
    /// For a reader that lists fields: the slots of `src` and `dst`, where
    /// it lists both (a channel line's two ranks, read on every line).
    listed_ends: Option<(u8, u8)>,
    /// What fills each field, sorted by name: a named capture or a constant
    /// (`set`, which wins over a capture of the same name).
    slots: Vec<(&'static str, Slot)>,
    /// Sample lines with the fields they must yield (checked by the self-test).
    pub samples: Vec<(String, Fields)>,
    pub literals: Vec<String>,
    pub file: String,
}

/// How many of a pattern's last matches a file keeps, and per which fields
/// (besides the writing process).
#[derive(Debug)]
pub struct KeepLast {
    pub count: usize,
    pub per: Vec<&'static str>,
}

fn keep_last_of(
    spec: &KeepLastSpec,
    captures: &[(&'static str, usize, FieldKind)],
    pattern: &PatternSpec,
) -> Result<KeepLast, String> {
    if spec.count == 0 {
        return Err("keep_last keeps at least one match (count ≥ 1)".into());
    }
    if !pattern.repeats_differ_in.is_empty() || pattern.accelerator.is_some() {
        return Err("keep_last goes with neither repeats_differ_in nor an accelerator".into());
    }
    if let Some(bad) = spec
        .per
        .iter()
        .find(|f| !captures.iter().any(|(n, _, _)| **n == ***f))
    {
        return Err(format!(
            "keep_last per names `{bad}`, not a named capture of the regex"
        ));
    }
    Ok(KeepLast {
        count: spec.count,
        per: spec.per.iter().map(|f| intern(f)).collect(),
    })
}

#[derive(Debug)]
enum Slot {
    Capture { group: usize, kind: FieldKind },
    Constant(Value),
}

/// Capture buffers reused from line to line (one per pattern, made on first
/// use): a match then allocates nothing but its fields.
#[derive(Debug, Default)]
pub struct MatchScratch {
    locations: Vec<Option<regex::bytes::CaptureLocations>>,
}

/// A successful match of one pattern on one line.
#[derive(Debug)]
pub struct Match<'g> {
    pub pattern: &'g Pattern,
    pub fields: Fields,
    /// The pattern's accelerator read the line (its regex did not run).
    pub accelerated: bool,
}

/// All patterns, compiled and frozen; shared by reference across workers.
#[derive(Debug)]
pub struct Grammar {
    patterns: Vec<Pattern>,
    prefilter: AhoCorasick,
    /// For each prefilter literal, the patterns that listed it.
    literal_owners: Vec<Vec<PatternIdx>>,
    /// The patterns whose accelerator lists fields (their lines come in
    /// runs), in order, and their readers: they are tried before every
    /// other candidate of a line, so the line-by-line lane can offer a line
    /// to them without a literal scan.
    run_readers: Vec<(PatternIdx, ListFields)>,
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
        let mut specs = Vec::new();
        for (file, text) in files {
            let builtin = super::BUILTIN.iter().any(|(n, t)| n == file && t == text);
            let parsed: GrammarFile = super::read_toml(file, text)?;
            let source: Arc<str> = parsed.source.as_str().into();
            specs.extend(
                parsed
                    .patterns
                    .into_iter()
                    .map(|spec| (file.as_str(), source.clone(), spec, builtin)),
            );
        }
        // The first error in file order is the one reported.
        let compiled: Vec<Result<Pattern, GrammarError>> = specs
            .into_par_iter()
            .map(|(file, source, spec, lazy)| compile_pattern(file, &source, spec, lazy))
            .collect();
        let patterns: Vec<Pattern> = compiled.into_iter().collect::<Result<_, _>>()?;
        check_unique_ids(&patterns)?;
        let (prefilter, literal_owners) = build_prefilter(&patterns)?;
        let run_readers = (0..patterns.len() as PatternIdx)
            .filter_map(|i| match patterns[i as usize].accelerator? {
                Accelerator::Fields(reader) => Some((i, reader)),
                Accelerator::Spans(_) => None,
            })
            .collect();
        Ok(Grammar {
            patterns,
            prefilter,
            literal_owners,
            run_readers,
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

    /// Whether any of `candidates` holds a message that wrapped pastes
    /// continue on the next lines.
    pub fn may_wrap(&self, candidates: &[PatternIdx]) -> bool {
        candidates.iter().any(|&i| self.pattern(i).wraps)
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
    /// at `body_start`: patterns whose accelerator reads runs of lines
    /// first, then the first other regular pattern that matches, then
    /// fallbacks in order.
    pub fn match_line(
        &self,
        candidates: &[PatternIdx],
        line: &[u8],
        body_start: usize,
        scratch: &mut MatchScratch,
    ) -> Option<Match<'_>> {
        if scratch.locations.len() < self.patterns.len() {
            scratch.locations.resize_with(self.patterns.len(), || None);
        }
        let tier = |i: &&PatternIdx| self.pattern(**i).tier();
        let mut in_order = [0, 1, 2]
            .into_iter()
            .flat_map(|t| candidates.iter().filter(move |i| tier(i) == t));
        in_order.find_map(|&i| {
            let p = self.pattern(i);
            let locs =
                scratch.locations[i as usize].get_or_insert_with(|| p.regex().capture_locations());
            p.try_match(p.scope_of(line, body_start), locs)
        })
    }

    /// What [`Grammar::match_line`] answers for `line` when an accelerator
    /// of lines that come in runs reads it, without the literal scan: those
    /// patterns are tried before all others, and such an accelerator
    /// answers only on lines holding its pattern's literal (so the pattern
    /// is a candidate). `None` when none answers, or when one declines on a line
    /// holding its literal, since its regex might still match: the caller
    /// then takes the full path.
    ///
    /// The fields are listed into `fields`, unpacked: most such lines only
    /// repeat an earlier one and are never kept.
    pub fn accelerated_match<'l>(
        &self,
        line: &'l [u8],
        body_start: usize,
        fields: &mut FieldList<'l>,
    ) -> Option<&Pattern> {
        for &(i, reader) in &self.run_readers {
            let p = self.pattern(i);
            if reader.list(p.scope_of(line, body_start), fields) {
                return Some(p);
            }
            if p.literals
                .iter()
                .any(|l| memmem::find(line, l.as_bytes()).is_some())
            {
                return None;
            }
        }
        None
    }
}

impl Pattern {
    /// Matches `body` (the accelerator first, where there is one) and
    /// extracts typed fields.
    pub fn try_match(
        &self,
        body: &[u8],
        locs: &mut regex::bytes::CaptureLocations,
    ) -> Option<Match<'_>> {
        if let Some(fields) = self.accelerated(body) {
            return Some(Match {
                pattern: self,
                fields,
                accelerated: true,
            });
        }
        self.regex_match(body, locs)
    }

    /// Whether a hand-written reader answers for the regex where it can.
    pub fn has_accelerator(&self) -> bool {
        self.accelerator.is_some()
    }

    /// Whether the field its reader lists in `slot` is one a repeat of the
    /// line may differ in.
    pub fn ignores_listed(&self, slot: u8) -> bool {
        self.listed_ignored & (1u32 << slot) != 0
    }

    /// The slots its reader lists `src` and `dst` in, if it lists both.
    pub fn listed_ends(&self) -> Option<(u8, u8)> {
        self.listed_ends
    }

    /// The slot its reader lists the field `name` in, if it lists fields
    /// and that one.
    pub fn listed_slot(&self, name: &[u8]) -> Option<u8> {
        let Some(Accelerator::Fields(reader)) = self.accelerator else {
            return None;
        };
        slot_of(reader.names, name)
    }

    /// Whether the pattern's lines come in runs that its accelerator reads
    /// one by one (it lists their fields unpacked).
    pub fn reads_runs(&self) -> bool {
        matches!(self.accelerator, Some(Accelerator::Fields(_)))
    }

    /// Where the pattern stands among a line's candidates: 0 read in runs
    /// by its accelerator, 1 regular, 2 fallback. Other accelerators only
    /// run in their pattern's place.
    fn tier(&self) -> u8 {
        match (self.fallback, self.reads_runs()) {
            (true, _) => 2,
            (false, true) => 0,
            (false, false) => 1,
        }
    }

    /// The part of a line this pattern reads: the message or the whole line.
    fn scope_of<'l>(&self, line: &'l [u8], body_start: usize) -> &'l [u8] {
        &line[self.scope_start(body_start)..]
    }

    /// Where the part of a line this pattern reads starts.
    pub fn scope_start(&self, body_start: usize) -> usize {
        match self.scope {
            Scope::Message => body_start,
            Scope::Line => 0,
        }
    }

    /// What the accelerator of this pattern reads from `body`, if it has
    /// one and it answers (for checking it against the regex).
    pub fn accelerated(&self, body: &[u8]) -> Option<Fields> {
        match self.accelerator? {
            Accelerator::Fields(reader) => {
                let mut list = FieldList::new();
                reader.list(body, &mut list).then(|| list.to_fields())
            }
            Accelerator::Spans(find) => {
                let mut spans = Spans::new();
                find(body, &mut spans).then(|| self.fields_at(body, |name, _| spans.get(name)))
            }
        }
    }

    /// The pattern's regex, built on first use where it was not at once.
    fn regex(&self) -> &Regex {
        self.regex.get_or_init(|| {
            Regex::new(&self.regex_src)
                .expect("a built-in regex that parsed when its grammar was compiled builds")
        })
    }

    /// Fresh capture buffers for [`Pattern::regex_match`].
    pub fn capture_locations(&self) -> regex::bytes::CaptureLocations {
        self.regex().capture_locations()
    }

    /// Runs the regex alone on `body` and extracts typed fields.
    pub fn regex_match(
        &self,
        body: &[u8],
        locs: &mut regex::bytes::CaptureLocations,
    ) -> Option<Match<'_>> {
        let at_start = self
            .at_start
            .get_or_init(|| Regex::new(&format!("^(?:{})", self.regex_src)).ok());
        if at_start
            .as_ref()
            .is_none_or(|r| r.captures_read(locs, body).is_none())
        {
            self.regex().captures_read(locs, body)?;
        }
        Some(Match {
            pattern: self,
            fields: self.fields_at(body, |_, group| locs.get(group)),
            accelerated: false,
        })
    }

    /// The fields of a match in `body`, each capture taken where `span`
    /// says its group matched (by name and group index) and converted to
    /// its kind: one way for the regex and for an accelerator's spans.
    fn fields_at(
        &self,
        body: &[u8],
        span: impl Fn(&'static str, usize) -> Option<(usize, usize)>,
    ) -> Fields {
        let mut fields = FieldsBuilder::with_capacity(16 * self.slots.len());
        for (name, slot) in &self.slots {
            match slot {
                Slot::Capture { group, kind } => {
                    if let Some((start, end)) = span(name, *group) {
                        let raw = String::from_utf8_lossy(&body[start..end]);
                        fields.push(name, convert_field(*kind, &raw).as_ref());
                    }
                }
                Slot::Constant(value) => fields.push(name, value.as_ref()),
            }
        }
        fields.finish()
    }
}

/// Compiles one pattern; `lazy`: its regex is built on first use (the
/// built-in grammars, whose regexes the tests build).
fn compile_pattern(
    file: &str,
    source: &Arc<str>,
    spec: PatternSpec,
    lazy: bool,
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
    let accelerator = match &spec.accelerator {
        Some(name) => Some(
            accel::by_name(name).ok_or_else(|| fail(format!("unknown accelerator `{name}`")))?,
        ),
        None => None,
    };
    if spec.fallback && matches!(accelerator, Some(Accelerator::Fields(_))) {
        return Err(fail(
            "a fallback pattern cannot have an accelerator that reads runs of lines (those patterns are tried first)"
                .into(),
        ));
    }
    let regex_error = |source| GrammarError::Regex {
        file: file.into(),
        id: spec.id.clone(),
        source,
    };
    // Parsing gives the groups; building waits for the first line where
    // the pattern is a candidate. A regex that does not parse is built at
    // once, for the error the regex crate gives.
    let parsed = lazy.then(|| parse_groups(&spec.regex)).flatten();
    let (regex, groups) = match parsed {
        Some(groups) => (OnceLock::new(), groups),
        None => {
            let regex = Regex::new(&spec.regex).map_err(regex_error)?;
            let groups = regex
                .capture_names()
                .enumerate()
                .filter_map(|(i, n)| n.map(|n| (i, n.to_string())))
                .collect();
            (OnceLock::from(regex), groups)
        }
    };
    let captures = capture_kinds(&groups, &spec).map_err(fail)?;
    if let Some(bad) = spec
        .repeats_differ_in
        .iter()
        .find(|f| !captures.iter().any(|(n, _, _)| **n == ***f))
    {
        return Err(fail(format!(
            "repeats_differ_in names `{bad}`, not a named capture of the regex"
        )));
    }
    let keep_last = spec
        .keep_last
        .as_ref()
        .map(|k| keep_last_of(k, &captures, &spec))
        .transpose()
        .map_err(fail)?;
    let listed_ignored = match accelerator {
        Some(Accelerator::Fields(reader)) => {
            listed_ignored(reader, &captures, &spec.repeats_differ_in).map_err(fail)?
        }
        _ => 0,
    };
    let listed_ends = match accelerator {
        Some(Accelerator::Fields(reader)) => {
            let slot = |name: &str| slot_of(reader.names, name.as_bytes());
            slot("src").zip(slot("dst"))
        }
        _ => None,
    };
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
        wraps: spec.wraps,
        repeats_differ_in: (!spec.repeats_differ_in.is_empty())
            .then(|| spec.repeats_differ_in.iter().map(|f| intern(f)).collect()),
        keep_last,
        scope: spec.scope,
        accelerator,
        listed_ignored,
        listed_ends,
        regex_src: spec.regex.as_str().into(),
        regex,
        at_start: OnceLock::new(),
        slots: slots(captures, constants),
        samples,
        literals: spec.literals,
        file: file.into(),
    })
}

/// Where `name` stands among a reader's sorted field names.
fn slot_of(names: &[&str], name: &[u8]) -> Option<u8> {
    let slot = names.binary_search_by(|n| n.as_bytes().cmp(name));
    slot.ok().and_then(|s| u8::try_from(s).ok())
}

/// The slots of a reader's field names that a repeat may differ in, one
/// bit each. Its names must be sorted (the order it lists fields in),
/// distinct, at most 32, and named captures of the regex it stands for.
fn listed_ignored(
    reader: ListFields,
    captures: &[(&'static str, usize, FieldKind)],
    ignored: &[String],
) -> Result<u32, String> {
    let names = reader.names;
    if names.len() > 32 || !names.windows(2).all(|w| w[0] < w[1]) {
        return Err("the accelerator's field names must be sorted, distinct and at most 32".into());
    }
    if let Some(bad) = names
        .iter()
        .find(|n| !captures.iter().any(|(c, _, _)| c == *n))
    {
        return Err(format!(
            "the accelerator lists `{bad}`, not a named capture of the regex"
        ));
    }
    Ok(names
        .iter()
        .enumerate()
        .filter(|(_, n)| ignored.iter().any(|i| i == *n))
        .fold(0u32, |mask, (slot, _)| mask | 1 << slot))
}

/// The named groups of a regex (group index, name), found by parsing it as
/// the regex crate does for a byte regex, without building it; `None` when
/// it does not parse.
fn parse_groups(regex: &str) -> Option<Vec<(usize, String)>> {
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(regex)
        .ok()?;
    let mut groups = Vec::new();
    named_groups(&hir, &mut groups);
    groups.sort();
    Some(groups)
}

fn named_groups(hir: &regex_syntax::hir::Hir, out: &mut Vec<(usize, String)>) {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Capture(c) => {
            if let Some(name) = &c.name {
                out.push((c.index as usize, name.to_string()));
            }
            named_groups(&c.sub, out);
        }
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            subs.iter().for_each(|h| named_groups(h, out));
        }
        HirKind::Repetition(r) => named_groups(&r.sub, out),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {}
    }
}

/// Each named capture: its name, group index and field kind.
fn capture_kinds(
    groups: &[(usize, String)],
    spec: &PatternSpec,
) -> Result<Vec<(&'static str, usize, FieldKind)>, String> {
    let names: Vec<(usize, &str)> = groups.iter().map(|(i, n)| (*i, n.as_str())).collect();
    if let Some(unknown) = spec
        .fields
        .keys()
        .find(|k| !names.iter().any(|(_, n)| n == k))
    {
        return Err(format!(
            "field `{unknown}` is not a named capture of the regex"
        ));
    }
    Ok(names
        .iter()
        .map(|&(i, n)| {
            (
                intern(n),
                i,
                spec.fields.get(n).copied().unwrap_or_default(),
            )
        })
        .collect())
}

/// Captures and constants as one list sorted by name; a constant replaces a
/// capture of the same name.
fn slots(
    captures: Vec<(&'static str, usize, FieldKind)>,
    constants: Vec<(&'static str, Value)>,
) -> Vec<(&'static str, Slot)> {
    let mut slots: Vec<(&'static str, Slot)> = captures
        .into_iter()
        .map(|(name, group, kind)| (name, Slot::Capture { group, kind }))
        .collect();
    for (name, value) in constants {
        slots.retain(|(n, _)| *n != name);
        slots.push((name, Slot::Constant(value)));
    }
    slots.sort_by(|a, b| a.0.cmp(b.0));
    slots
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

#[cfg(test)]
mod tests {
    use super::*;

    fn grammar_of(pattern: &str) -> Result<Grammar, GrammarError> {
        let toml = format!("source = \"test\"\n[[pattern]]\n{pattern}");
        Grammar::compile(&[("test.toml".into(), toml)])
    }

    /// Built-in regexes are built on first use: every one must build (the
    /// `expect` in `Pattern::regex` relies on it), and the groups read by
    /// parsing must be the built regex's.
    #[test]
    fn every_built_in_regex_builds_with_the_groups_its_parse_gave() {
        let grammar = Grammar::builtin().unwrap();
        assert!(grammar.patterns().len() > 100);
        for p in grammar.patterns() {
            assert!(p.regex.get().is_none(), "{} was built at once", p.id);
            let built: Vec<(usize, String)> = p
                .regex()
                .capture_names()
                .enumerate()
                .filter_map(|(i, n)| n.map(|n| (i, n.to_string())))
                .collect();
            assert_eq!(parse_groups(&p.regex_src), Some(built), "{}", p.id);
        }
    }

    #[test]
    fn a_user_grammar_is_built_at_once_and_its_regex_errors_show() {
        let ok = grammar_of(
            "id = \"u.x\"\ntitle = \"t\"\nevent = \"nccl_warn\"\nliterals = [\"x\"]\nregex = 'x(?P<n>\\d+)'\n",
        )
        .unwrap();
        assert!(ok.patterns()[0].regex.get().is_some());
        let err = grammar_of(
            "id = \"u.y\"\ntitle = \"t\"\nevent = \"nccl_warn\"\nliterals = [\"y\"]\nregex = 'y(?P<n>\\d+'\n",
        )
        .unwrap_err();
        assert!(matches!(err, GrammarError::Regex { .. }), "{err}");
    }

    /// The match held to the start is tried first; wherever it answers it
    /// must be the plain regex's match, captures included.
    #[test]
    fn a_match_held_to_the_start_is_the_unanchored_match() {
        let cases = [
            (r"(?P<a>a|ab)(?P<b>c|bcd)?", "abcd"),
            (r"(?P<a>a|ab)(?P<b>c|bcd)?", "xabcd"),
            (r"b(?P<a>\d)", "b3 b4"),
            (r"b(?P<a>\d)", "ab1 b2"),
            (r"(?:x )?(?P<a>\w+?)(?P<b>\d*)$", "x ab12"),
            (r"(?P<a>.*?)=(?P<b>.*)", "k=v=w"),
            (r"(?P<a>\d+)?(?P<b>z)", "12z"),
            (r"(?P<a>\d+)?(?P<b>z)", "y12z"),
        ];
        for (regex, text) in cases {
            let spec = format!(
                "id = \"t.x\"\ntitle = \"t\"\nevent = \"nccl_channel\"\nliterals = [\"a\"]\nregex = '''{regex}'''\nfields = {{}}\n"
            );
            let grammar = grammar_of(&spec).unwrap();
            let pattern = &grammar.patterns()[0];
            let mut locs = pattern.capture_locations();
            let got = pattern
                .regex_match(text.as_bytes(), &mut locs)
                .map(|m| m.fields);
            let plain = regex::Regex::new(regex).unwrap();
            let want = plain.captures(text).map(|c| {
                Fields::from_sorted(
                    ["a", "b"]
                        .into_iter()
                        .filter_map(|n| Some((n, Value::Text(c.name(n)?.as_str().into())))),
                )
            });
            assert_eq!(got, want, "{regex} on {text:?}");
        }
    }

    #[test]
    fn a_fallback_pattern_with_a_reader_of_runs_is_refused() {
        let spec = r#"id = "t.channel"
title = "t"
event = "nccl_channel"
literals = ["Channel "]
regex = 'Channel (?P<channel>\d+)/(?P<conn>\d+)(?P<detail>x)?(?P<dir>x)? (?P<dst>\d)(?P<dst_dev>\d)(?P<gdr>x)?(?P<net_dev>\d)?(?P<proxy>\d)?(?P<src>\d)(?P<src_dev>\d) (?P<transport>P2P)'
fallback = true
accelerator = "nccl_channel"
"#;
        let err = grammar_of(spec).unwrap_err().to_string();
        assert!(
            err.contains("fallback pattern cannot have an accelerator"),
            "{err}"
        );
        let ok = spec.replace("fallback = true\n", "");
        assert!(grammar_of(&ok).is_ok());
        // A reader must list only what the regex captures.
        let short = ok.replace("(?P<transport>P2P)", "P2P");
        let err = grammar_of(&short).unwrap_err().to_string();
        assert!(
            err.contains("lists `transport`, not a named capture"),
            "{err}"
        );
        // Other accelerators answer in their pattern's place, fallback or not.
        let spans = spec.replace("\"nccl_channel\"\n", "\"nccl_trees\"\n");
        assert!(grammar_of(&spans).is_ok());
    }
}
