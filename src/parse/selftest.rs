//! The grammars test themselves: every sample line of every pattern must be
//! matched by that pattern (not an earlier one) and yield exactly the fields
//! the sample declares. Run by the unit tests for the built-in grammars and at
//! start-up for user grammars (`--grammar`).

use crate::grammar::spec::Scope;
use crate::grammar::{Grammar, MatchScratch, Pattern};
use crate::ingest::launcher::LauncherStyle;

use super::frame::frame;

/// Checks every sample; returns one message per failing sample.
pub fn check_samples(grammar: &Grammar) -> Vec<String> {
    grammar
        .patterns()
        .iter()
        .flat_map(|p| check_pattern_samples(grammar, p))
        .collect()
}

/// Checks the samples of one pattern against the whole grammar.
pub fn check_pattern_samples(grammar: &Grammar, pattern: &Pattern) -> Vec<String> {
    let mut failures = Vec::new();
    let mut candidates = Vec::new();
    let mut scratch = MatchScratch::default();
    let style = LauncherStyle::default();
    for (line, expected) in &pattern.samples {
        let bytes = line.as_bytes();
        grammar.candidates(bytes, &mut candidates);
        let framed = frame(bytes, &style);
        let body_start = bytes.len() - framed.body.len();
        match grammar.match_line(&candidates, bytes, body_start, &mut scratch) {
            None => failures.push(format!(
                "{}: {}: no pattern matched sample {line:?}",
                pattern.file, pattern.id
            )),
            Some(m) if m.pattern.id != pattern.id => failures.push(format!(
                "{}: {}: sample {line:?} was taken by earlier pattern {}",
                pattern.file, pattern.id, m.pattern.id
            )),
            Some(m) if &m.fields != expected => failures.push(format!(
                "{}: {}: sample {line:?}\n  expected {:?}\n  got      {:?}",
                pattern.file,
                pattern.id,
                expected.iter().collect::<Vec<_>>(),
                m.fields.iter().collect::<Vec<_>>()
            )),
            Some(_) => {}
        }
        let body = match pattern.scope {
            Scope::Message => framed.body,
            Scope::Line => bytes,
        };
        if let Some(fast) = pattern.accelerated(body) {
            let locs = &mut pattern.capture_locations();
            let slow = pattern.regex_match(body, locs).map(|m| m.fields);
            if slow.as_ref() != Some(&fast) {
                failures.push(format!(
                    "{}: {}: its accelerator disagrees with its regex on {line:?}\n  regex       {slow:?}\n  accelerator {fast:?}",
                    pattern.file, pattern.id
                ));
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_grammar_sample_yields_its_declared_fields() {
        let grammar = Grammar::builtin().expect("built-in grammars compile");
        let failures = check_samples(&grammar);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn every_builtin_pattern_has_a_sample() {
        let grammar = Grammar::builtin().unwrap();
        let bare: Vec<_> = grammar
            .patterns()
            .iter()
            .filter(|p| p.samples.is_empty())
            .map(|p| p.id)
            .collect();
        assert!(bare.is_empty(), "patterns without samples: {bare:?}");
    }

    #[test]
    fn a_user_grammar_with_a_wrong_sample_is_reported() {
        let extra = vec![(
            "mine.toml".to_string(),
            r#"source = "inhouse"
[[pattern]]
id = "inhouse.thing"
event = "nccl_warn"
literals = ["XYZZY"]
regex = 'XYZZY (?P<n>\d+)'
fields = { n = "int" }
[[pattern.samples]]
line = "XYZZY 7"
fields = { n = 8 }
"#
            .to_string(),
        )];
        let grammar = Grammar::with_extra(&extra).unwrap();
        let failures = check_samples(&grammar);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("inhouse.thing"));
    }
}
