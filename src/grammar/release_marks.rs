//! Line formats that date a release (`grammars/releases.toml`): a host
//! whose NCCL release no line states is placed in the range its lines fit;
//! the job's PyTorch series, by its own formats, names the NCCL its wheels
//! carry.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::GrammarError;
use super::nccl_bugs::{NcclVersion, VersionRange, error_chain};
use crate::model::{Event, EventKind, RawTime};

const FILE: &str = "releases.toml";
const RELEASES: &str = include_str!("../../grammars/releases.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarksFile {
    #[serde(rename = "mark")]
    marks: Vec<MarkSpec>,
    #[serde(default, rename = "torch_mark")]
    torch_marks: Vec<TorchMarkSpec>,
    #[serde(default)]
    bundled: Vec<BundledSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TorchMarkSpec {
    id: String,
    pattern: PatternIds,
    #[serde(default)]
    present: Vec<String>,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    starts_with: Option<String>,
    #[serde(default)]
    stamped: Option<bool>,
    #[serde(default)]
    hooked: bool,
    releases: String,
    source: String,
}

/// One grammar pattern id, or a list of them for a format several lines
/// share (the process group prefix of every watchdog line).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PatternIds {
    One(String),
    Many(Vec<String>),
}

impl PatternIds {
    fn into_vec(self) -> Vec<String> {
        match self {
            PatternIds::One(id) => vec![id],
            PatternIds::Many(ids) => ids,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundledSpec {
    torch: String,
    nccl: String,
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

/// A PyTorch line format and the PyTorch releases that print it.
#[derive(Debug, Clone)]
pub struct TorchMark {
    pub id: String,
    /// The grammar patterns whose lines it reads.
    pub patterns: Vec<String>,
    /// Fields the line must have, and fields it must not.
    pub present: Vec<String>,
    pub absent: Vec<String>,
    /// (field, the text it starts with)
    pub field_start: Option<(String, String)>,
    pub stamped: Option<bool>,
    /// The line carries the `[rankN]: ` prefix of PyTorch's excepthook.
    pub hooked: bool,
    pub releases: VersionRange,
}

impl TorchMark {
    /// Whether the event is a line in this format.
    pub fn fits(&self, ev: &Event) -> bool {
        if !self.patterns.iter().any(|p| p == ev.pattern)
            || !self.present.iter().all(|f| ev.fields.get(f).is_some())
            || !self.absent.iter().all(|f| ev.fields.get(f).is_none())
        {
            return false;
        }
        let field_fits = self.field_start.as_ref().is_none_or(|(field, start)| {
            ev.fields
                .text(field)
                .is_some_and(|v| v.starts_with(start.as_str()))
        });
        field_fits
            && self.stamped.is_none_or(|want| stamped(ev) == Some(want))
            && (!self.hooked || excepthook_prefixed(&ev.text))
    }
}

/// Whether a Python line went through the excepthook that prefixes each
/// line of an uncaught exception with `[rankN]: ` (a space after the
/// colon; c10's own `[rankN]:[E…` prefix has none).
fn excepthook_prefixed(text: &str) -> bool {
    text.match_indices("[rank").any(|(at, tag)| {
        let rest = &text[at + tag.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with("]: ")
    })
}

/// Whether a c10 line carried its nanosecond timestamp: `Some(false)` for
/// no time at all, `None` for a stamp without nanoseconds (a glog build's
/// microseconds say nothing of the wheel's release).
fn stamped(ev: &Event) -> Option<bool> {
    use chrono::Timelike;
    match &ev.time {
        RawTime::None => Some(false),
        RawTime::NoYear { time, .. } => (time.nanosecond() % 1000 != 0).then_some(true),
        _ => None,
    }
}

/// The NCCL a PyTorch series' wheels carry.
#[derive(Debug, Clone)]
pub struct Bundled {
    /// `major.minor.0` of the series.
    pub torch: NcclVersion,
    pub nccl: NcclVersion,
}

/// Everything `releases.toml` holds.
#[derive(Debug, Clone)]
pub struct Releases {
    pub nccl: Vec<ReleaseMark>,
    pub torch: Vec<TorchMark>,
    pub bundled: Vec<Bundled>,
}

/// The embedded marks, parsed once. `Err` only if the shipped file is
/// broken, which the unit tests rule out.
pub fn builtin() -> Result<&'static Releases, &'static str> {
    static BUILTIN: OnceLock<Result<Releases, String>> = OnceLock::new();
    BUILTIN
        .get_or_init(|| parse(FILE, RELEASES).map_err(|e| error_chain(&e)))
        .as_ref()
        .map_err(String::as_str)
}

pub fn parse(file: &str, text: &str) -> Result<Releases, GrammarError> {
    let raw: MarksFile = super::read_toml(file, text)?;
    let mut ids = BTreeSet::new();
    let bad = |id: &str, reason: String| GrammarError::Pattern {
        file: file.into(),
        id: id.into(),
        reason,
    };
    let mut fresh = |id: &str| ids.insert(id.to_string());
    let mut nccl = Vec::with_capacity(raw.marks.len());
    for spec in raw.marks {
        if !fresh(&spec.id) {
            return Err(bad(&spec.id, "duplicate id".into()));
        }
        nccl.push(nccl_mark(spec).map_err(|(id, reason)| bad(&id, reason))?);
    }
    let mut torch = Vec::with_capacity(raw.torch_marks.len());
    for spec in raw.torch_marks {
        if !fresh(&spec.id) {
            return Err(bad(&spec.id, "duplicate id".into()));
        }
        torch.push(torch_mark(spec).map_err(|(id, reason)| bad(&id, reason))?);
    }
    let bundled = raw
        .bundled
        .into_iter()
        .map(|b| {
            let series = NcclVersion::parse(&format!("{}.0", b.torch));
            match (series, NcclVersion::parse(&b.nccl)) {
                (Some(torch), Some(nccl)) => Ok(Bundled { torch, nccl }),
                _ => Err(bad(
                    &b.torch,
                    format!("`{}` → `{}` is not a series and a release", b.torch, b.nccl),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Releases {
        nccl,
        torch,
        bundled,
    })
}

fn torch_mark(spec: TorchMarkSpec) -> Result<TorchMark, (String, String)> {
    let bad = |reason: &str| Err((spec.id.clone(), reason.to_string()));
    if spec.source.trim().is_empty() {
        return bad("a mark needs its source");
    }
    let field_start = match (spec.field, spec.starts_with) {
        (Some(f), Some(s)) => Some((f, s)),
        (None, None) => None,
        _ => return bad("`field` and `starts_with` go together"),
    };
    if field_start.is_none() && spec.stamped.is_none() && !spec.hooked && spec.present.is_empty() {
        return bad("a mark needs a present field, a field's start, `stamped` or `hooked`");
    }
    let releases = VersionRange::parse(&spec.releases).map_err(|e| (spec.id.clone(), e))?;
    Ok(TorchMark {
        id: spec.id,
        patterns: spec.pattern.into_vec(),
        present: spec.present,
        absent: spec.absent,
        field_start,
        stamped: spec.stamped,
        hooked: spec.hooked,
        releases,
    })
}

fn nccl_mark(spec: MarkSpec) -> Result<ReleaseMark, (String, String)> {
    let bad = |reason: String| (spec.id.clone(), reason);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::ingest::discover::InputFile;
    use crate::model::FileId;

    fn marks() -> &'static [ReleaseMark] {
        &builtin().unwrap_or_else(|e| panic!("{e}")).nccl
    }

    /// The one event a line makes, read as the shipped grammars read it.
    fn parse_one(line: &str) -> Event {
        let file = InputFile {
            id: FileId(0),
            display: "nccl.node1.7".into(),
            path: "nccl.node1.7".into(),
            size: line.len() as u64,
            hints: Default::default(),
        };
        let grammar = Grammar::builtin().unwrap();
        let mut parsed = crate::parse::parse_stream(line.as_bytes(), &file, &grammar);
        match parsed.events.len() {
            1 => parsed.events.remove(0),
            _ => panic!("one event wanted from {line}: {:?}", parsed.events),
        }
    }

    /// The NCCL marks a line fits.
    fn fitting(line: &str) -> Vec<&'static str> {
        let ev = parse_one(line);
        marks()
            .iter()
            .filter(|m| m.fits(&ev))
            .map(|m| m.id.as_str())
            .collect()
    }

    /// The PyTorch marks a line fits, read as the shipped grammars read it.
    fn torch_fitting(line: &str) -> Vec<&'static str> {
        let ev = parse_one(line);
        let releases = builtin().unwrap_or_else(|e| panic!("{e}"));
        releases
            .torch
            .iter()
            .filter(|m| m.fits(&ev))
            .map(|m| m.id.as_str())
            .collect()
    }

    #[test]
    fn a_traceback_through_the_excepthook_dates_pytorch_2_3_or_later() {
        let hooked = "[default0]:[rank8]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027, internal error - please report this issue to the NCCL developers, NCCL version 2.20.5";
        let fits = torch_fitting(hooked);
        assert!(
            fits.contains(&"error_report_through_excepthook"),
            "{fits:?}"
        );
        assert!(fits.contains(&"error_report_relative_source"), "{fits:?}");
        // c10's own prefix (2.2+) has no space after its colon.
        let c10 =
            "[rank3]:[E ProcessGroupNCCL.cpp:1182] NCCL error: internal error, NCCL version 2.19.3";
        let plain = "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, internal error, NCCL version 2.19.3";
        for line in [c10, plain] {
            let fits = torch_fitting(line);
            assert!(!fits.contains(&"error_report_through_excepthook"), "{line}");
        }
    }

    #[test]
    fn the_watchdogs_process_group_prefix_dates_pytorch_2_3_2_4_and_2_5() {
        let v2_3 = "[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: 9, last enqueued NCCL work: 9, last completed NCCL work: 8.";
        let v2_4 = "[rank1]:[E724 07:09:24.792091133 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 9, last enqueued NCCL work: 9, last completed NCCL work: 8.";
        let v2_5 = "[rank5]:[E126 01:18:04.728765521 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 5] Timeout at NCCL work: 14217, last enqueued NCCL work: 14221, last completed NCCL work: 14216.";
        let v2_8 = "[rank15]:[E510 00:18:19.328151517 ProcessGroupNCCL.cpp:2168] [PG ID 4 PG GUID 20(mesh_tp) Rank 1]  failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 3, last completed work: 2";
        let in_range = |line: &str, torch: &str| {
            let releases = builtin().unwrap();
            let fits = torch_fitting(line);
            assert!(!fits.is_empty(), "{line}");
            let v = NcclVersion::parse(torch).unwrap();
            fits.iter().all(|id| {
                let mark = releases.torch.iter().find(|m| m.id == *id).unwrap();
                mark.releases.contains(&v)
            })
        };
        assert!(in_range(v2_3, "2.3.1") && in_range(v2_3, "2.4.1") && !in_range(v2_3, "2.5.1"));
        assert!(in_range(v2_4, "2.4.1") && !in_range(v2_4, "2.3.1") && !in_range(v2_4, "2.5.1"));
        assert!(in_range(v2_5, "2.5.1") && in_range(v2_5, "2.8.0") && !in_range(v2_5, "2.4.1"));
        assert!(in_range(v2_8, "2.8.0") && !in_range(v2_8, "2.4.1"));
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
    fn pytorch_series_map_to_the_nccl_their_wheels_pin() {
        let releases = builtin().unwrap();
        let pinned = |series: &str| {
            let torch = NcclVersion::parse(&format!("{series}.0")).unwrap();
            releases
                .bundled
                .iter()
                .find(|b| b.torch == torch)
                .map(|b| b.nccl.to_string())
        };
        assert_eq!(pinned("2.1").as_deref(), Some("2.18.1"));
        assert_eq!(pinned("2.4").as_deref(), Some("2.20.5"));
        assert_eq!(pinned("2.8").as_deref(), Some("2.27.3"));
        // A stamped deprecation warning is 2.4 or later; `../torch/csrc`
        // is 2.5 or earlier.
        let dates = |id: &str, torch: &str| {
            let mark = releases.torch.iter().find(|m| m.id == id).unwrap();
            mark.releases.contains(&NcclVersion::parse(torch).unwrap())
        };
        assert!(dates("deprecation_warning_with_time", "2.4.0"));
        assert!(!dates("deprecation_warning_with_time", "2.3.0"));
        assert!(dates("error_report_relative_source", "2.5.0"));
        assert!(!dates("error_report_relative_source", "2.6.0"));
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
