//! The grammar file format: message patterns as data (`grammars/*.toml`).
//!
//! ```toml
//! source = "nccl"
//!
//! [[pattern]]
//! id = "nccl.ib_completion.v2_20"
//! title = "IB work completion with an error status"
//! event = "ib_completion_error"
//! versions = "NCCL 2.20-2.21"
//! literals = ["Got completion from peer"]
//! regex = '''Got completion from peer (?P<peer>[^<\s]+)<(?P<peer_port>\d+)> with status=(?P<status>\d+)'''
//! fields = { status = "int" }          # captures not listed are text
//! set = { req = "send" }               # constant fields added on a match
//! [[pattern.samples]]
//! line = "node1:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4000> with status=12 ..."
//! fields = { peer = "10.0.0.2", peer_port = 4000, status = 12 }
//! ```
//!
//! `repeats_differ_in = ["channel"]` drops a match that repeats an earlier
//! one of the same pattern and process in every field but those.
//!
//! `keep_last = { count = 8, per = ["comm"] }` keeps only the last matches
//! of the pattern per process and value of the `per` fields (a trace line
//! printed per call, read for where each caller stopped).
//!
//! `accelerator = "nccl_channel"` names a hand-written reader that gives the
//! regex's fields faster on the lines it knows (grammar/accel/).
//!
//! `wraps = true` marks a long message that wrapped pastes continue on the
//! next lines (see `PatternSpec::wraps`).
//!
//! Order inside a file is priority: the first pattern whose regex matches a line
//! wins; `fallback = true` patterns are tried only when no other pattern matched.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrammarFile {
    /// Which family of writers the patterns describe (nccl, torch, launcher, kernel).
    pub source: String,
    #[serde(default, rename = "pattern")]
    pub patterns: Vec<PatternSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternSpec {
    pub id: String,
    #[serde(default)]
    pub title: String,
    /// The `EventKind` name this pattern yields.
    pub event: String,
    /// Level to assume when the line's own prefix does not say one.
    #[serde(default)]
    pub level: Option<String>,
    /// Versions of the writer this wording was seen in (documentation only).
    #[serde(default)]
    pub versions: String,
    /// Substrings one of which must occur in the line (the fast prefilter).
    pub literals: Vec<String>,
    /// Regex run on the line's message (after launcher / NCCL / c10 prefixes).
    pub regex: String,
    /// Kind of each capture: int, hex, text, bus_id, upper, nccl_version.
    #[serde(default)]
    pub fields: BTreeMap<String, FieldKind>,
    /// Constant fields added to every match.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub fallback: bool,
    /// Fields in which repeats of this line differ without saying anything
    /// new (NCCL prints one `Channel NN` line per channel and peer): a match
    /// from the same process equal to an earlier one in every other field is
    /// counted but not kept, which keeps a 16k-rank job's events in memory.
    #[serde(default)]
    pub repeats_differ_in: Vec<String>,
    /// Only the last matches are kept, per process and `per` field values:
    /// lines printed once per call (NCCL's `opCount` trace) say where each
    /// caller stopped in their last few; a long run prints millions.
    #[serde(default)]
    pub keep_last: Option<KeepLastSpec>,
    /// What the regex runs on: the `message` after all prefixes (default), or
    /// the whole `line` (for patterns about the prefix itself, like NCCL's
    /// `NCCL WARN` level word).
    #[serde(default)]
    pub scope: Scope,
    /// A hand-written reader (grammar/accel/) that answers for the regex on
    /// the lines it knows, for the patterns that match most lines or cost
    /// most to match. The self-test holds it to the regex on every sample.
    pub accelerator: Option<String>,
    /// A message long enough that pastes and narrow terminals wrap it
    /// (`… timeout:` / `WorkNCCL(SeqNum=…` / `… before timing out.`): where a
    /// line that may hold it does not end a sentence and the next lines
    /// start no log line, the scanner also reads it joined with them, and
    /// keeps that reading where it yields more fields.
    #[serde(default)]
    pub wraps: bool,
    #[serde(default)]
    pub samples: Vec<SampleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeepLastSpec {
    pub count: usize,
    #[serde(default)]
    pub per: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Message,
    Line,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    #[default]
    Text,
    /// Decimal integer (a leading `-` allowed).
    Int,
    /// Hexadecimal integer with or without `0x`.
    Hex,
    /// NCCL `busId` hex (`41000`) or a PCI address, normalised to `0000:41:00.0`.
    BusId,
    /// Text upper-cased (op names printed in different cases).
    Upper,
    /// An NCCL release `2.X.Y`; PyTorch 1.9–1.11 print 2.10+ codes split
    /// wrongly (`21.0.3` for 2.10.3), which this puts right.
    NcclVersion,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {
    pub line: String,
    #[serde(default)]
    pub fields: BTreeMap<String, toml::Value>,
}
