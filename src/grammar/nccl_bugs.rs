//! Known NCCL defects (`grammars/nccl_bugs.toml`): which versions each one
//! affects, where it was fixed, and the signature that shows it in the logs.
//!
//! The loader checks every entry, so a malformed one fails the build's tests
//! rather than matching wrongly: ranges must be bounded and end at or before
//! `fixed_in`, the source must name the fixing release, and a signature must
//! hold a symptom — the version alone, or a setting alone, never matches.

mod condition;
mod version;

pub use condition::{Condition, EnvTest, State, Test, op_name};
use condition::{ConditionSpec, condition};
pub use version::{NcclVersion, VersionRange};

use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::GrammarError;

const FILE: &str = "nccl_bugs.toml";
const NCCL_BUGS: &str = include_str!("../../grammars/nccl_bugs.toml");
const DEFAULT_WEIGHT: f64 = 0.55;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BugsFile {
    #[serde(rename = "bug")]
    bugs: Vec<BugSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BugSpec {
    id: String,
    title: String,
    affected: String,
    fixed_in: String,
    source: SourceSpec,
    basis: String,
    symptom: String,
    remedy: String,
    #[serde(default)]
    weight: Option<f64>,
    signature: SignatureSpec,
    /// A line only the affected releases print: where no line prints the
    /// release, it stands for it. One condition, or a list of which any may
    /// hold (the same line at each affected release's source position).
    #[serde(default)]
    dated_by: Option<OneOrMany<ConditionSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(t) => vec![t],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    commit: String,
    release: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureSpec {
    #[serde(default)]
    all: Vec<ConditionSpec>,
    #[serde(default)]
    any: Vec<ConditionSpec>,
    #[serde(default)]
    unless: Vec<ConditionSpec>,
}

#[derive(Debug, Clone, Default)]
pub struct Signature {
    pub all: Vec<Condition>,
    pub any: Vec<Condition>,
    pub unless: Vec<Condition>,
}

#[derive(Debug, Clone)]
pub struct NcclBug {
    pub id: String,
    pub title: String,
    pub affected: VersionRange,
    pub fixed_in: NcclVersion,
    pub source_commit: String,
    pub source_release: String,
    pub basis: String,
    pub symptom: String,
    pub remedy: String,
    pub weight: f64,
    pub signature: Signature,
    /// Symptom lines only the affected releases print (`dated_by`): any
    /// one seen dates the job.
    pub dated_by: Vec<Condition>,
}

#[derive(Debug, Clone)]
pub struct NcclBugs {
    pub bugs: Vec<NcclBug>,
}

impl NcclBugs {
    /// The embedded list, parsed once. `Err` only if the shipped file is
    /// broken, which the unit tests rule out.
    pub fn builtin() -> Result<&'static NcclBugs, &'static str> {
        static BUILTIN: OnceLock<Result<NcclBugs, String>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| NcclBugs::parse(FILE, NCCL_BUGS).map_err(|e| error_chain(&e)))
            .as_ref()
            .map_err(String::as_str)
    }

    pub fn parse(file: &str, text: &str) -> Result<NcclBugs, GrammarError> {
        let raw: BugsFile = super::read_toml(file, text)?;
        let mut ids = BTreeSet::new();
        let mut bugs = Vec::with_capacity(raw.bugs.len());
        for spec in raw.bugs {
            let id = spec.id.clone();
            let bad = |reason: String| GrammarError::Pattern {
                file: file.into(),
                id: id.clone(),
                reason,
            };
            if !ids.insert(id.clone()) {
                return Err(bad("duplicate id".into()));
            }
            bugs.push(bug(spec).map_err(bad)?);
        }
        Ok(NcclBugs { bugs })
    }
}

pub(super) fn error_chain(e: &GrammarError) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    msg
}

fn bug(spec: BugSpec) -> Result<NcclBug, String> {
    if spec.id.is_empty()
        || !spec
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err("id must be snake_case".into());
    }
    for (name, text) in [
        ("title", &spec.title),
        ("basis", &spec.basis),
        ("symptom", &spec.symptom),
        ("remedy", &spec.remedy),
    ] {
        if text.trim().is_empty() {
            return Err(format!("{name} is empty"));
        }
    }
    let affected = VersionRange::parse(&spec.affected)?;
    let fixed_in = NcclVersion::parse(&spec.fixed_in)
        .filter(|v| !v.is_prerelease())
        .ok_or_else(|| format!("fixed_in `{}` is not a release", spec.fixed_in))?;
    affected.check_fixed_in(&fixed_in)?;
    if !spec.remedy.contains(&spec.fixed_in) {
        return Err(format!("remedy does not name fixed_in {}", spec.fixed_in));
    }
    check_source(&spec.source, &fixed_in)?;
    let weight = spec.weight.unwrap_or(DEFAULT_WEIGHT);
    if !(weight > 0.0 && weight <= 1.0) {
        return Err(format!("weight {weight} is not in (0, 1]"));
    }
    let conditions = |list: Vec<ConditionSpec>| -> Result<Vec<Condition>, String> {
        list.into_iter().map(condition).collect()
    };
    let signature = Signature {
        all: conditions(spec.signature.all)?,
        any: conditions(spec.signature.any)?,
        unless: conditions(spec.signature.unless)?,
    };
    // A symptom is certain to be seen if one is required, or if every
    // alternative is one.
    let has_symptom = signature.all.iter().any(Condition::is_symptom)
        || (!signature.any.is_empty() && signature.any.iter().all(Condition::is_symptom));
    if !has_symptom {
        return Err("the signature needs a symptom (an error line, a hang, a failed init or a death), not only the version or settings".into());
    }
    let dated_by = spec
        .dated_by
        .map_or_else(Vec::new, OneOrMany::into_vec)
        .into_iter()
        .map(condition)
        .collect::<Result<Vec<_>, _>>()?;
    // A line the release prints: a state, a setting or a feature is no
    // release's own, and the signature already asks for a symptom.
    if dated_by
        .iter()
        .any(|c| !matches!(c, Condition::Event { .. }))
    {
        return Err("dated_by must name a line (an `event` condition)".into());
    }
    Ok(NcclBug {
        id: spec.id,
        title: spec.title,
        affected,
        fixed_in,
        source_commit: spec.source.commit,
        source_release: spec.source.release,
        basis: spec.basis,
        symptom: spec.symptom,
        remedy: spec.remedy,
        weight,
        signature,
        dated_by,
    })
}

/// The source is a release commit (`2.21.5-1`) of the fixing version.
fn check_source(source: &SourceSpec, fixed_in: &NcclVersion) -> Result<(), String> {
    let hex = source.commit.len() == 40 && source.commit.chars().all(|c| c.is_ascii_hexdigit());
    if !hex {
        return Err(format!(
            "source commit `{}` is not a full hash",
            source.commit
        ));
    }
    let release = source
        .release
        .split_once('-')
        .filter(|(_, rev)| !rev.is_empty() && rev.chars().all(|c| c.is_ascii_digit()))
        .and_then(|(v, _)| NcclVersion::parse(v));
    match release {
        Some(v) if v == *fixed_in => Ok(()),
        _ => Err(format!(
            "source release `{}` is not the release tag of fixed_in {fixed_in}",
            source.release
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> &'static NcclBugs {
        NcclBugs::builtin().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_shipped_list_loads_and_is_sized_as_intended() {
        let bugs = builtin();
        assert!(
            (15..=40).contains(&bugs.bugs.len()),
            "{} entries",
            bugs.bugs.len()
        );
    }

    #[test]
    fn every_entry_is_well_formed() {
        for b in &builtin().bugs {
            // Checked by the loader; asserted here so a loosened loader shows.
            assert!(b.affected.check_fixed_in(&b.fixed_in).is_ok(), "{}", b.id);
            assert!(!b.affected.contains(&b.fixed_in), "{}", b.id);
            assert!(
                !b.signature.all.is_empty() || !b.signature.any.is_empty(),
                "{}",
                b.id
            );
            assert!(
                b.signature.all.iter().any(Condition::is_symptom)
                    || b.signature.any.iter().all(Condition::is_symptom),
                "{}: no symptom",
                b.id
            );
            assert!(b.remedy.contains(&b.fixed_in.to_string()), "{}", b.id);
            assert_eq!(
                b.source_release,
                format!("{}-1", b.fixed_in),
                "{}: source is the fixing release",
                b.id
            );
            assert!(
                b.weight > 0.0 && b.weight < 0.7,
                "{}: leave room for direct evidence",
                b.id
            );
            assert!(b.symptom.ends_with('.'), "{}: one sentence", b.id);
        }
    }

    #[test]
    fn entries_are_in_release_order_of_their_fix() {
        // The file reads as a history; keep it that way.
        let fixes: Vec<_> = builtin().bugs.iter().map(|b| b.fixed_in).collect();
        let mut sorted = fixes.clone();
        sorted.sort();
        assert_eq!(fixes, sorted);
    }

    fn one(signature: &str) -> Result<NcclBugs, GrammarError> {
        let text = format!(
            r#"[[bug]]
id = "x"
title = "t"
affected = ">=2.18.1, <2.18.3"
fixed_in = "2.18.3"
source = {{ commit = "ea38312273e5b9a19a224c9ff4c10b7fcf441eaf", release = "2.18.3-1" }}
basis = "b"
symptom = "s."
remedy = "Upgrade to 2.18.3."
[bug.signature]
{signature}
"#
        );
        NcclBugs::parse("test.toml", &text)
    }

    #[test]
    fn a_signature_without_a_symptom_is_rejected() {
        assert!(one("").is_err());
        assert!(one(r#"all = [{ env = "NCCL_CROSS_NIC" }]"#).is_err());
        assert!(one(r#"all = [{ feature = "NVLS" }, { op = ["ALLREDUCE"] }]"#).is_err());
        // An `any` with one non-symptom alternative may match on it alone.
        assert!(one(r#"any = [{ state = "hang" }, { feature = "NVLS" }]"#).is_err());
        assert!(one(r#"all = [{ feature = "NVLS" }, { state = "hang" }]"#).is_ok());
    }

    #[test]
    fn malformed_conditions_are_rejected() {
        for sig in [
            r#"all = [{ event = "no_such_kind" }]"#,
            r#"all = [{ event = "nccl_warn", equals = "x" }]"#,
            r#"all = [{ event = "nccl_warn", contains = "" }]"#,
            r#"all = [{ event = "nccl_warn", contains = "a", starts_with = "b" }]"#,
            r#"all = [{ event = "nccl_warn", env = "NCCL_X" }]"#,
            r#"all = [{ state = "stuck" }]"#,
            r#"all = [{ death = "SIGNOPE" }]"#,
            r#"all = [{ state = "hang", contains = "x" }]"#,
            r#"all = [{ state = "hang" }, { env = "PATH" }]"#,
            r#"all = [{ state = "hang" }, { op = [] }]"#,
            r#"all = [{ state = "hang", colour = "red" }]"#,
        ] {
            assert!(one(sig).is_err(), "{sig}");
        }
    }

    #[test]
    fn ill_formed_entries_are_rejected() {
        let ok = one(r#"all = [{ state = "hang" }]"#).unwrap();
        assert_eq!(ok.bugs[0].weight, DEFAULT_WEIGHT);
        let base = |from: &str, to: &str| {
            let text = r#"[[bug]]
id = "x"
title = "t"
affected = ">=2.18.1, <2.18.3"
fixed_in = "2.18.3"
source = { commit = "ea38312273e5b9a19a224c9ff4c10b7fcf441eaf", release = "2.18.3-1" }
basis = "b"
symptom = "s."
remedy = "Upgrade to 2.18.3."
[bug.signature]
all = [{ state = "hang" }]
"#;
            assert!(text.contains(from), "{from}");
            NcclBugs::parse("test.toml", &text.replace(from, to))
        };
        assert!(base("fixed_in = \"2.18.3\"", "fixed_in = \"2.18.2\"").is_err());
        assert!(base("fixed_in = \"2.18.3\"", "fixed_in = \"2.18.3a1\"").is_err());
        assert!(base(">=2.18.1, <2.18.3", ">=2.18.1").is_err());
        assert!(base("release = \"2.18.3-1\"", "release = \"2.18.5-1\"").is_err());
        assert!(base("commit = \"ea38", "commit = \"zz38").is_err());
        assert!(base("Upgrade to 2.18.3.", "Upgrade.").is_err());
        assert!(base("id = \"x\"", "id = \"Bad Id\"").is_err());
        assert!(base("basis = \"b\"", "basis = \"\"").is_err());
        assert!(base("symptom = \"s.\"", "symptom = \"s.\"\nweight = 1.5").is_err());
        assert!(base("title = \"t\"", "title = \"t\"\nsurprise = 1").is_err());
        // A line dates a release; a state or a setting is no release's own.
        let dated = |by: &str| {
            base(
                "remedy = \"Upgrade to 2.18.3.\"",
                &format!("remedy = \"Upgrade to 2.18.3.\"\ndated_by = {by}"),
            )
        };
        assert!(dated(r#"{ event = "foreign_connection" }"#).is_ok());
        assert!(dated(r#"{ state = "hang" }"#).is_err());
        assert!(dated(r#"{ env = "NCCL_CROSS_NIC" }"#).is_err());
    }

    #[test]
    fn duplicate_ids_are_rejected() {
        let entry = r#"[[bug]]
id = "x"
title = "t"
affected = "2.18.1"
fixed_in = "2.18.3"
source = { commit = "ea38312273e5b9a19a224c9ff4c10b7fcf441eaf", release = "2.18.3-1" }
basis = "b"
symptom = "s."
remedy = "Upgrade to 2.18.3."
[bug.signature]
all = [{ state = "hang" }]
"#;
        assert!(NcclBugs::parse("t.toml", entry).is_ok());
        assert!(NcclBugs::parse("t.toml", &format!("{entry}{entry}")).is_err());
    }

    #[test]
    fn op_names_ignore_case_and_the_leading_underscore() {
        assert_eq!(op_name("_allgather_base"), "ALLGATHER_BASE");
        assert_eq!(op_name(" ALLTOALL "), "ALLTOALL");
    }
}
