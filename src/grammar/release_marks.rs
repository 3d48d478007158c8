//! Line formats that date an NCCL release (`grammars/releases.toml`): a
//! host whose release no line states is placed in the range its lines fit.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::GrammarError;
use super::nccl_bugs::{NcclVersion, VersionRange};
use crate::model::{Event, EventKind};

const FILE: &str = "releases.toml";
const RELEASES: &str = include_str!("../../grammars/releases.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarksFile {
    #[serde(rename = "mark")]
    marks: Vec<MarkSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkSpec {
    id: String,
    event: String,
    #[serde(default)]
    present: Vec<String>,
    #[serde(default)]
    absent: Vec<String>,
    releases: String,
    source: String,
}

/// One format and the releases that print it.
#[derive(Debug, Clone)]
pub struct ReleaseMark {
    pub id: String,
    pub event: EventKind,
    pub present: Vec<String>,
    pub absent: Vec<String>,
    pub releases: VersionRange,
}

impl ReleaseMark {
    /// Whether the event is a line in this format.
    pub fn fits(&self, ev: &Event) -> bool {
        ev.kind == self.event
            && self.present.iter().all(|f| ev.fields.get(f).is_some())
            && self.absent.iter().all(|f| ev.fields.get(f).is_none())
    }

    pub fn allows(&self, v: &NcclVersion) -> bool {
        self.releases.contains(v)
    }
}

/// The embedded marks, parsed once. `Err` only if the shipped file is
/// broken, which the unit tests rule out.
pub fn builtin() -> Result<&'static [ReleaseMark], &'static str> {
    static BUILTIN: OnceLock<Result<Vec<ReleaseMark>, String>> = OnceLock::new();
    BUILTIN
        .get_or_init(|| parse(FILE, RELEASES).map_err(|e| e.to_string()))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(String::as_str)
}

pub fn parse(file: &str, text: &str) -> Result<Vec<ReleaseMark>, GrammarError> {
    let raw: MarksFile = toml::from_str(text).map_err(|source| GrammarError::Toml {
        file: file.into(),
        source,
    })?;
    let mut ids = BTreeSet::new();
    raw.marks
        .into_iter()
        .map(|spec| {
            let bad = |reason: String| GrammarError::Pattern {
                file: file.into(),
                id: spec.id.clone(),
                reason,
            };
            if !ids.insert(spec.id.clone()) {
                return Err(bad("duplicate id".into()));
            }
            if spec.source.trim().is_empty() {
                return Err(bad("a mark needs its source".into()));
            }
            let event = EventKind::from_name(&spec.event)
                .ok_or_else(|| bad(format!("unknown event kind `{}`", spec.event)))?;
            if spec.present.is_empty() {
                return Err(bad("a mark needs a field that must be present".into()));
            }
            let releases = VersionRange::parse(&spec.releases).map_err(bad)?;
            Ok(ReleaseMark {
                id: spec.id,
                event,
                present: spec.present,
                absent: spec.absent,
                releases,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::ingest::discover::InputFile;
    use crate::model::FileId;

    fn marks() -> &'static [ReleaseMark] {
        builtin().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The marks a line fits, read as the shipped grammars read it.
    fn fitting(line: &str) -> Vec<&'static str> {
        let file = InputFile {
            id: FileId(0),
            display: "nccl.node1.7".into(),
            path: "nccl.node1.7".into(),
            size: line.len() as u64,
            hints: Default::default(),
        };
        let grammar = Grammar::builtin().unwrap();
        let parsed = crate::parse::parse_stream(line.as_bytes(), &file, &grammar);
        let [ev] = &parsed.events[..] else {
            panic!("one event wanted from {line}: {:?}", parsed.events);
        };
        marks()
            .iter()
            .filter(|m| m.fits(ev))
            .map(|m| m.id.as_str())
            .collect()
    }

    fn allowed(line: &str, version: &str) -> bool {
        let v = NcclVersion::parse(version).unwrap();
        let ids = fitting(line);
        assert!(!ids.is_empty(), "{line}");
        ids.iter()
            .all(|id| marks().iter().find(|m| m.id == *id).unwrap().allows(&v))
    }

    #[test]
    fn bootstrap_lines_date_2_23_and_2_24() {
        let spaced = "n1:1:1 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>";
        let tight = "n1:1:1 [0] NCCL INFO Bootstrap: Using ib0:10.0.0.1<0>";
        assert!(allowed(spaced, "2.23.4") && !allowed(spaced, "2.24.3"));
        assert!(allowed(tight, "2.26.2") && !allowed(tight, "2.21.5"));
    }

    #[test]
    fn init_lines_date_their_release_2_14_to_2_29() {
        let v2_14 = "n:1:2 [3] NCCL INFO comm 0x8e01d00 rank 3 nranks 8 cudaDev 3 busId 41000 - Init COMPLETE";
        let v2_17 = "n:1:2 [3] NCCL INFO comm 0x8e01d00 rank 3 nranks 8 cudaDev 3 busId 41000 commId 0x1b7c - Init COMPLETE";
        let v2_20 = "n:1:2 [0] NCCL INFO comm 0x55af rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0xd0a0 - Init START";
        let v2_21 = "n:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55af rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0xd0a0 - Init START";
        let v2_29 = "n:1:2 [1] NCCL INFO [Rank 10] ncclCommInitRankConfig comm 0x9 rank 10 nranks 16 cudaDev 1 nvmlDev 1 busId 3b000 commId 0x1 - Init START";
        assert!(allowed(v2_14, "2.14.3") && !allowed(v2_14, "2.18.6"));
        assert!(allowed(v2_17, "2.17.1") && !allowed(v2_17, "2.14.3") && !allowed(v2_17, "2.19.3"));
        assert!(allowed(v2_20, "2.20.5") && !allowed(v2_20, "2.21.5") && !allowed(v2_20, "2.17.1"));
        assert!(allowed(v2_21, "2.21.5") && allowed(v2_21, "2.26.2") && !allowed(v2_21, "2.20.5"));
        assert!(allowed(v2_29, "2.29.3") && !allowed(v2_29, "2.19.3"));
    }

    #[test]
    fn a_mark_needs_a_source_a_known_event_and_a_present_field() {
        let one = |event: &str, present: &str, source: &str| {
            parse(
                "t.toml",
                &format!(
                    "[[mark]]\nid = \"x\"\nevent = \"{event}\"\npresent = [{present}]\nreleases = \">=2.1.0\"\nsource = \"{source}\"\n"
                ),
            )
        };
        assert!(one("nccl_comm_init", "\"api\"", "docs").is_ok());
        assert!(one("nccl_comm_init", "\"api\"", " ").is_err());
        assert!(one("no_such_kind", "\"api\"", "docs").is_err());
        assert!(one("nccl_comm_init", "", "docs").is_err());
    }
}
