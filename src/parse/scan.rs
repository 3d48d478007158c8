//! Scanning one file: stream its lines, find the few a grammar can match, and
//! turn those into events.
//!
//! The literal prefilter runs over whole chunks of many lines at once; only the
//! lines it hits are framed, decoded or matched. Every other line costs one pass
//! of the automaton and a newline count. Where lines that an accelerated
//! pattern reads come in runs (a NCCL INFO file is mostly channel lines), the
//! scanner reads them one by one instead and offers each to the accelerators
//! first, handing back to the prefilter once such lines stop coming.

use std::borrow::Cow;
use std::io::{self, Read};

use rustc_hash::FxHashMap;

use crate::grammar::{Grammar, Match, MatchScratch, Pattern, PatternIdx};
use crate::ingest::InputFile;
use crate::ingest::lines::{Chunk, ChunkReader, LineStats, stream_buffer};
use crate::ingest::open::open_decompressed;
use crate::ingest::sniff::{FileKind, FileProfile, SNIFF_BYTES, TableKind, sniff};
use crate::model::{
    Event, EventKind, FieldList, Fields, Origin, PeerLink, RawTime, RayActorLines, SysRecord,
    Value, Who,
};

use super::frame::{Frame, frame};
use super::keep_last::Held;
use super::paste::{glued_after_progress_bar, unpaste};
use super::repeat_key::{LineFields, read_fields};
use super::run_memo::{Outcome, RunMemo};
use super::tables::{MAX_TABLE_BYTES, parse_table};
use super::wrapped;

/// Lines in a row the line-by-line lane reads without an accelerator
/// answering before it hands back to the literal scan: the few other lines
/// among channel lines do not end it, a file of other lines soon does.
const HOT_PATIENCE: u8 = 4;
/// Links remembered to skip repeats before the file's final deduplication.
const RECENT_LINKS: usize = 4;
/// No line's link: its anchor is past any event index.
const NO_LINK: PeerLink = PeerLink {
    anchor: u32::MAX,
    src: u32::MAX,
    dst: u32::MAX,
};

/// Evidence text is capped so one pathological line cannot bloat the report.
const MAX_EVIDENCE_CHARS: usize = 2000;

/// What parsing one file produced.
#[derive(Debug, Default)]
pub struct FileParse {
    pub events: Vec<Event>,
    pub stats: LineStats,
    pub matched_lines: u64,
    /// Matched lines that were not valid UTF-8 (decoded lossily).
    pub lossy_lines: u64,
    /// Why the file was not read at all (binary, unreadable, empty).
    pub skipped: Option<String>,
    /// Why reading stopped early (truncated archive, I/O error); the events up
    /// to that point are kept.
    pub partial: Option<String>,
    /// Facts from table files (counters, snapshots, Flight Recorder).
    pub records: Vec<SysRecord>,
    /// Every NCCL channel line's two ends; `anchor` indexes `events`.
    pub links: Vec<PeerLink>,
    pub ray_actor_lines: RayActorLines,
}

/// Parses one input file with `grammar`.
pub fn parse_file(file: &InputFile, grammar: &Grammar) -> FileParse {
    let stream = match open_decompressed(&file.path) {
        Ok((stream, _)) => stream,
        Err(e) => {
            return FileParse {
                skipped: Some(format!("cannot open: {e}")),
                ..Default::default()
            };
        }
    };
    parse_stream(stream, file, grammar)
}

/// Parses an already opened stream (a decompressed file or archive member).
pub fn parse_stream(mut stream: impl Read, file: &InputFile, grammar: &Grammar) -> FileParse {
    let head = read_head(&mut stream);
    parse_with_head(head, stream, file, grammar)
}

/// The first bytes of a stream, for sniffing, and the error that cut them
/// short if one did (a truncated gzip still yields its first bytes).
#[derive(Debug, Default)]
pub struct Head {
    pub bytes: Vec<u8>,
    pub error: Option<String>,
}

pub fn read_head(stream: &mut impl Read) -> Head {
    // Read where the line reader will read on (no copy of the head).
    let mut bytes = stream_buffer();
    let error = stream
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut bytes)
        .err()
        .map(|e| e.to_string());
    Head { bytes, error }
}

/// Parses a stream whose first bytes were already read (and sniffed for
/// archives) by the caller.
pub fn parse_with_head(
    head: Head,
    stream: impl Read,
    file: &InputFile,
    grammar: &Grammar,
) -> FileParse {
    let Head { bytes: head, error } = head;
    if let Some(e) = &error
        && head.is_empty()
    {
        return FileParse {
            skipped: Some(format!("cannot read: {e}")),
            ..Default::default()
        };
    }
    // After an error the stream has nothing more to give: parse what came.
    let stream: Box<dyn Read + '_> = if error.is_some() {
        Box::new(io::empty())
    } else {
        Box::new(stream)
    };
    let mut parsed = parse_head_and_rest(head, stream, file, grammar);
    if let Some(e) = error {
        parsed.partial = Some(format!(
            "reading stopped after line {}: {e}",
            parsed.stats.lines
        ));
    }
    parsed
}

fn parse_head_and_rest(
    head: Vec<u8>,
    stream: impl Read,
    file: &InputFile,
    grammar: &Grammar,
) -> FileParse {
    let profile = sniff(&head);
    match profile.kind {
        FileKind::Log => {
            if let Some(out) = super::clock_file::parse(file, &head) {
                return out;
            }
        }
        FileKind::Table(kind) => return parse_whole_table(kind, head, stream, file),
        FileKind::Empty => {
            return FileParse {
                skipped: Some("empty file".into()),
                ..Default::default()
            };
        }
        FileKind::Binary { why } => {
            return FileParse {
                skipped: Some(why.into()),
                ..Default::default()
            };
        }
    }
    let (mut out, _) = match super::unwrap::padded_width(&head) {
        Some(width) => {
            let joined = super::unwrap::Unwrap::new(io::Cursor::new(head).chain(stream), width);
            scan_lines(
                ChunkReader::with_start(joined, Vec::new()),
                file,
                grammar,
                &profile,
            )
        }
        None => scan_lines(
            ChunkReader::with_start(stream, head),
            file,
            grammar,
            &profile,
        ),
    };
    dedup_links(&mut out);
    out
}

/// Scans a stream of log lines with the file's sniffed profile: what one
/// file, or one part of a split file, gives, and how many lines it held.
pub(super) fn scan_lines(
    mut reader: ChunkReader<impl Read>,
    file: &InputFile,
    grammar: &Grammar,
    profile: &FileProfile,
) -> (FileParse, u64) {
    let mut scanner = Scanner::new(file, grammar, profile);
    loop {
        match reader.next_chunk() {
            Ok(Some(chunk)) => scanner.scan_chunk(&chunk),
            Ok(None) => break,
            Err(e) => {
                scanner.out.partial = Some(format!(
                    "reading stopped after line {}: {e}",
                    reader.stats().lines
                ));
                break;
            }
        }
    }
    scanner.held.release(&mut scanner.out);
    scanner.out.stats = reader.stats();
    (scanner.out, reader.next_line() - 1)
}

/// Each channel prints the same peers again: one link per pair is enough.
pub(super) fn dedup_links(out: &mut FileParse) {
    // Ordered by anchor, then the two ranks (the field order).
    out.links.sort_unstable();
    out.links.dedup();
}

/// Reads a table file whole (capped) and hands it to its parser.
fn parse_whole_table(
    kind: TableKind,
    mut data: Vec<u8>,
    stream: impl Read,
    file: &InputFile,
) -> FileParse {
    let mut out = FileParse::default();
    let limit = MAX_TABLE_BYTES.saturating_sub(data.len() as u64);
    if let Err(e) = stream.take(limit + 1).read_to_end(&mut data) {
        out.partial = Some(format!("reading stopped: {e}"));
    }
    if data.len() as u64 > MAX_TABLE_BYTES {
        out.skipped = Some(format!(
            "{kind:?} file larger than {} MiB",
            MAX_TABLE_BYTES >> 20
        ));
        return out;
    }
    out.stats.bytes = data.len() as u64;
    out.stats.lines = memchr::memchr_iter(b'\n', &data).count() as u64;
    let table = parse_table(kind, &data, file);
    out.matched_lines = table.records.len() as u64;
    out.records = table.records;
    if let Some(e) = table.error {
        if out.records.is_empty() {
            out.skipped = Some(e);
        } else {
            out.partial = Some(e);
        }
    }
    out
}

struct Scanner<'a> {
    file: &'a InputFile,
    grammar: &'a Grammar,
    profile: &'a FileProfile,
    base_who: Who,
    candidates: Vec<PatternIdx>,
    scratch: MatchScratch,
    /// Kept matches of patterns that declare `repeats_differ_in`, by key,
    /// with the index of the event kept for them.
    seen_repeats: FxHashMap<Box<[u8]>, u32>,
    /// The file can be opened again to read a cited line (it is not a
    /// member of an archive).
    rereadable: bool,
    /// The key of the line at hand, built in place.
    repeat_key: Vec<u8>,
    /// Lines the line-by-line lane may still read without an accelerator
    /// answering before the literal scan takes over again (0: scanning).
    hot_lines_left: u8,
    /// The last links pushed, oldest overwritten first.
    recent_links: [PeerLink; RECENT_LINKS],
    recent_at: usize,
    /// The last lines the line-by-line lane folded, to fold their repeats
    /// on sight (`None` only in tests, for a reference without it).
    memo: Option<RunMemo>,
    /// Matches of patterns that keep only their last few, until the end.
    held: Held,
    out: FileParse,
}

impl<'a> Scanner<'a> {
    fn new(file: &'a InputFile, grammar: &'a Grammar, profile: &'a FileProfile) -> Self {
        let hints = &file.hints;
        let base_who = Who {
            host: hints.host.as_deref().map(Into::into),
            pid: hints.pid,
            tid: None,
            rank: hints.rank,
            local_rank: hints.local_rank,
            task: None,
        };
        Scanner {
            file,
            grammar,
            profile,
            base_who,
            candidates: Vec::new(),
            scratch: MatchScratch::default(),
            seen_repeats: FxHashMap::default(),
            rereadable: !super::archive::is_member(&file.display),
            repeat_key: Vec::with_capacity(128),
            hot_lines_left: 0,
            recent_links: [NO_LINK; RECENT_LINKS],
            recent_at: 0,
            memo: Some(RunMemo::default()),
            held: Held::default(),
            out: FileParse::default(),
        }
    }

    /// Scans a chunk in whichever of two lanes suits the lines at hand: the
    /// literal scan over many lines at once, which skips the lines no
    /// grammar can match, or line by line while an accelerated pattern keeps
    /// reading them (channel lines are nine in ten of a large job, and each
    /// holds a literal, so scanning them for literals only to find that
    /// again is wasted work).
    fn scan_chunk(&mut self, chunk: &Chunk<'_>) {
        let data = chunk.data;
        let (mut pos, mut line_no) = (0, chunk.first_line);
        while pos < data.len() {
            (pos, line_no) = if self.hot_lines_left > 0 {
                self.scan_hot(data, pos, line_no)
            } else {
                self.scan_literals(data, pos, line_no)
            };
        }
    }

    /// Groups the literal hits from `from` on by line and matches each hit
    /// line once, until a line is read by an accelerator: returns where the
    /// line after it starts, and its number.
    fn scan_literals(&mut self, data: &[u8], from: usize, mut line_no: u64) -> (usize, u64) {
        let mut counted_to = from;
        let mut current: Option<(usize, usize)> = None;
        // The end of the lines a wrapped message was joined from: their
        // hits were read with it.
        let mut joined_to = from;
        for (at, lit) in self.grammar.literal_hits(&data[from..]) {
            let at = from + at;
            if at < joined_to {
                continue;
            }
            if let Some((start, end)) = current {
                if at < end {
                    self.candidates.extend_from_slice(self.grammar.owners(lit));
                    continue;
                }
                let (hot, last) = self.finish_line(data, start, end, line_no);
                if hot {
                    self.hot_lines_left = HOT_PATIENCE;
                    return (last + 1, line_no + 1);
                }
                joined_to = last;
                if at < joined_to {
                    current = None;
                    continue;
                }
            }
            let start = memchr::memrchr(b'\n', &data[..at]).map_or(0, |p| p + 1);
            let end = memchr::memchr(b'\n', &data[at..]).map_or(data.len(), |p| at + p);
            line_no += memchr::memchr_iter(b'\n', &data[counted_to..start]).count() as u64;
            counted_to = start;
            current = Some((start, end));
            self.candidates.clear();
            self.candidates.extend_from_slice(self.grammar.owners(lit));
        }
        if let Some((start, end)) = current {
            let (hot, last) = self.finish_line(data, start, end, line_no);
            if hot {
                self.hot_lines_left = HOT_PATIENCE;
                return (last + 1, line_no + 1);
            }
        }
        (data.len(), line_no)
    }

    /// Reads lines one by one from `from`, each first offered to the
    /// readers of runs, until `HOT_PATIENCE` lines in a row were not theirs.
    fn scan_hot(&mut self, data: &[u8], mut from: usize, mut line_no: u64) -> (usize, u64) {
        // One list for every line of the run: it is a few hundred bytes,
        // and setting it up per line showed in profiles.
        let mut fields = FieldList::new();
        while from < data.len() && self.hot_lines_left > 0 {
            let end = memchr::memchr(b'\n', &data[from..]).map_or(data.len(), |p| from + p);
            let (hot, last) = self.hot_line(data, from, end, line_no, &mut fields);
            if hot {
                self.hot_lines_left = HOT_PATIENCE;
            } else {
                self.hot_lines_left -= 1;
            }
            line_no += 1 + memchr::memchr_iter(b'\n', &data[end..last]).count() as u64;
            from = last + 1;
        }
        (from, line_no)
    }

    /// Matches the line `data[start..end]` the literal scan hit (its
    /// candidates gathered): whether an accelerator of lines that come in
    /// runs read it, and where the last line read ends (`end`, or past the
    /// lines a wrapped message was joined from).
    fn finish_line(
        &mut self,
        data: &[u8],
        start: usize,
        end: usize,
        line_no: u64,
    ) -> (bool, usize) {
        let raw = &data[start..end];
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        self.candidates.sort_unstable();
        self.candidates.dedup();
        // A progress bar with another message glued after it is two lines
        // that share a number (the candidates, gathered over both, serve each).
        if let Some(at) = glued_after_progress_bar(line) {
            let bar = self.finish_piece(&line[..at], line_no);
            let rest = self.finish_piece(&line[at..], line_no);
            return (bar && rest, end);
        }
        if self.grammar.may_wrap(&self.candidates) && !wrapped::ends_sentence(line) {
            let pieces = wrapped::continuation_lines(data, end, &self.profile.launcher);
            if !pieces.is_empty() {
                return self.finish_wrapped(line, &pieces, data, end, line_no);
            }
        }
        (self.finish_piece(line, line_no), end)
    }

    /// A message that a paste or a narrow terminal may have wrapped onto
    /// `pieces`: read joined with the fewest of them that give the most
    /// fields, and recorded so where that is more than the line alone gives
    /// (else the line alone is). Returns whether an accelerator of runs read
    /// it, and where the last line read ends.
    fn finish_wrapped(
        &mut self,
        line: &[u8],
        pieces: &[wrapped::Piece],
        data: &[u8],
        end: usize,
        line_no: u64,
    ) -> (bool, usize) {
        let alone = self.match_text(line, None);
        let mut best: Option<(Match<'a>, Vec<u8>, usize)> = None;
        let mut candidates = Vec::new();
        for (taken, last) in pieces.iter().enumerate() {
            for joined in wrapped::joinings(line, &pieces[..=taken], data) {
                self.grammar.candidates(&joined, &mut candidates);
                let Some(m) = self.match_text(&joined, Some(&candidates)) else {
                    continue;
                };
                let to_beat = best.as_ref().map(|b| &b.0).or(alone.as_ref());
                if to_beat.is_none_or(|b| m.fields.iter().count() > b.fields.iter().count()) {
                    best = Some((m, joined, last.end));
                }
            }
        }
        match (best, alone) {
            (Some((m, joined, last)), _) => {
                self.record_match(m, &joined, line, line_no);
                (false, last)
            }
            (None, Some(m)) => (self.record_match(m, line, line, line_no), end),
            (None, None) => (false, end),
        }
    }

    /// Matches a line and records what it matched (framed once: this is
    /// every hit line's path).
    fn finish_piece(&mut self, line: &[u8], line_no: u64) -> bool {
        let clean = unpaste(line);
        let framed = frame(&clean, &self.profile.launcher);
        let body_start = clean.len() - framed.body.len();
        let Some(m) =
            self.grammar
                .match_line(&self.candidates, &clean, body_start, &mut self.scratch)
        else {
            return false;
        };
        let hot = m.accelerated && m.pattern.reads_runs();
        self.record(
            m.pattern,
            LineFields::Packed(m.fields),
            framed,
            line,
            line_no,
        );
        hot
    }

    /// Matches `text` against `candidates` (the line's own by default).
    fn match_text(&mut self, text: &[u8], candidates: Option<&[PatternIdx]>) -> Option<Match<'a>> {
        let clean = unpaste(text);
        let body_start = clean.len() - frame(&clean, &self.profile.launcher).body.len();
        let candidates = candidates.unwrap_or(&self.candidates);
        self.grammar
            .match_line(candidates, &clean, body_start, &mut self.scratch)
    }

    /// Records a match of `text` as the line `cited` (a wrapped message is
    /// read joined, and cited as the line it starts on): whether an
    /// accelerator of runs read it.
    fn record_match(&mut self, m: Match<'a>, text: &[u8], cited: &[u8], line_no: u64) -> bool {
        let clean = unpaste(text);
        let framed = frame(&clean, &self.profile.launcher);
        let hot = m.accelerated && m.pattern.reads_runs();
        self.record(
            m.pattern,
            LineFields::Packed(m.fields),
            framed,
            cited,
            line_no,
        );
        hot
    }

    /// Offers a line to the readers of runs of lines before any literal
    /// scan; a line they do not read takes the full path. `true` when one
    /// read it.
    fn hot_line<'d>(
        &mut self,
        data: &'d [u8],
        start: usize,
        end: usize,
        line_no: u64,
        fields: &mut FieldList<'d>,
    ) -> (bool, usize) {
        let raw = &data[start..end];
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if let Some(outcome) = self.memo.as_mut().and_then(|m| m.recall(line)) {
            #[cfg(debug_assertions)]
            self.check_recall(line, outcome);
            self.fold_repeat(outcome);
            return (true, end);
        }
        // An accelerator's answer stands for the literal scan's only where
        // the text it read is the line's own (not rebuilt by unpasting).
        if let Cow::Borrowed(clean) = unpaste(line) {
            let framed = frame(clean, &self.profile.launcher);
            let body_start = clean.len() - framed.body.len();
            if let Some(pattern) = self.grammar.accelerated_match(clean, body_start, fields) {
                let listed = LineFields::Listed(fields);
                let outcome = self.record(pattern, listed, framed, line, line_no);
                if let (Some(memo), Some(outcome)) = (&mut self.memo, outcome) {
                    let scope_start = pattern.scope_start(body_start);
                    memo.remember(line, scope_start, pattern, fields, outcome);
                }
                return (true, end);
            }
        }
        self.grammar.candidates(raw, &mut self.candidates);
        if self.candidates.is_empty() {
            return (false, end);
        }
        self.finish_line(data, start, end, line_no)
    }

    /// Turns a match into an event, or into a link and a repeat of the
    /// event kept for its first line. Where the pattern folds repeats, what
    /// the line came to (for the memo).
    fn record(
        &mut self,
        pattern: &Pattern,
        fields: LineFields<'_, '_>,
        framed: Frame<'_>,
        line: &[u8],
        line_no: u64,
    ) -> Option<Outcome> {
        let mut who = framed.who;
        who.fill_from(&self.base_who);
        self.out.matched_lines += 1;
        match framed.ray_node_named {
            Some(false) => self.out.ray_actor_lines.on_driver_node += 1,
            Some(true) => self.out.ray_actor_lines.elsewhere += 1,
            None => {}
        }
        let next = self.out.events.len() as u32;
        let read = read_fields(&mut self.repeat_key, pattern, &who, &fields);
        let anchor = if read.repeats {
            self.anchor_of_repeat(next)
        } else {
            next
        };
        if let Some((src, dst)) = read.link {
            self.push_link(PeerLink { anchor, src, dst });
        }
        let outcome = read.repeats.then_some(Outcome {
            anchor,
            link: read.link,
        });
        if anchor != next {
            return outcome;
        }
        let mut fields = fields.into_fields();
        // A `Trees` line lists up to 64 channels (600+ characters) and is
        // printed by every rank for every communicator; only its rank's
        // neighbours are facts, and the line itself is never cited.
        if pattern.kind == EventKind::NcclTrees {
            compact_trees(&mut fields);
        }
        let level = framed.level.or(pattern.level).unwrap_or_default();
        // Every rank prints its topology (communicators, channels, NICs,
        // settings) and its exit summary; no rule reads those lines' words,
        // only their fields, and the few that are cited are read again from
        // the file for the report.
        let text = if pattern.kind.read_by_fields_alone() && self.rereadable {
            Box::default()
        } else {
            evidence_text(line, &mut self.out.lossy_lines)
        };
        // Syslog lines that keep the kernel's own stamp carry both clocks.
        if let Some(up) = framed
            .uptime_us
            .filter(|_| !matches!(framed.time, RawTime::Uptime { .. }))
        {
            fields.insert("uptime_us", Value::Int(up));
        }
        let event = Event {
            kind: pattern.kind,
            pattern: pattern.id,
            origin: Origin {
                file: self.file.id,
                line: line_no,
            },
            who,
            level,
            time: framed.time,
            fields,
            text,
        };
        if pattern.keep_last.is_some() {
            self.held.hold(pattern, event);
        } else {
            self.out.events.push(event);
        }
        outcome
    }
}

impl Scanner<'_> {
    /// In debug builds (every test run), each line the memo folds is read
    /// the whole way as well, and must come to the same.
    #[cfg(debug_assertions)]
    fn check_recall(&self, line: &[u8], outcome: Outcome) {
        assert!(matches!(unpaste(line), Cow::Borrowed(_)));
        let framed = frame(line, &self.profile.launcher);
        let body_start = line.len() - framed.body.len();
        let mut fields = FieldList::new();
        let shown = String::from_utf8_lossy(line);
        let pattern = self
            .grammar
            .accelerated_match(line, body_start, &mut fields)
            .unwrap_or_else(|| panic!("the memo folds a line no accelerator reads: {shown} (message at byte {body_start})"));
        let mut who = framed.who;
        who.fill_from(&self.base_who);
        let mut key = Vec::new();
        let read = read_fields(&mut key, pattern, &who, &LineFields::Listed(&fields));
        let anchor = self.seen_repeats.get(key.as_slice()).copied();
        assert!(read.repeats, "{shown}");
        assert_eq!(anchor, Some(outcome.anchor), "{shown}");
        assert_eq!(read.link, outcome.link, "{shown}");
    }

    /// A line the memo knows: a repeat of the event kept for its run.
    fn fold_repeat(&mut self, outcome: Outcome) {
        self.out.matched_lines += 1;
        if let Some((src, dst)) = outcome.link {
            self.push_link(PeerLink {
                anchor: outcome.anchor,
                src,
                dst,
            });
        }
    }

    /// Channels print the same few pairs line after line (one line per
    /// channel): a pair among the last few pushed is not pushed again. The
    /// file's links are deduplicated at its end all the same; this keeps
    /// that sort three to four times shorter.
    fn push_link(&mut self, link: PeerLink) {
        if self.recent_links.contains(&link) {
            return;
        }
        self.recent_links[self.recent_at % RECENT_LINKS] = link;
        self.recent_at += 1;
        self.out.links.push(link);
    }

    /// The event a repeated line belongs to: the one kept for the first line
    /// with the key at hand, or `next` when this line is the first.
    fn anchor_of_repeat(&mut self, next: u32) -> u32 {
        if let Some(&anchor) = self.seen_repeats.get(self.repeat_key.as_slice()) {
            return anchor;
        }
        let key = self.repeat_key.as_slice().into();
        self.seen_repeats.insert(key, next);
        next
    }
}

/// `[0] 14/-1/-1->12->11 [1] 14/4/-1->12->-1` → `[0] 4/11/14->12->-1`: the
/// same rank and neighbours in the form `model::build::trees` reads.
fn compact_trees(fields: &mut Fields) {
    let Some(list) = fields.text("trees") else {
        return;
    };
    let Some(me) = crate::model::build::tree_rank(list) else {
        return;
    };
    let peers: Vec<String> = crate::model::build::tree_edges(list)
        .into_iter()
        .map(|(_, p)| p.to_string())
        .collect();
    let peers = if peers.is_empty() {
        "-1".to_string()
    } else {
        peers.join("/")
    };
    let compact = format!("[0] {peers}->{me}->-1");
    fields.insert("trees", Value::Text(compact.into()));
}

fn evidence_text(line: &[u8], lossy_lines: &mut u64) -> Box<str> {
    let text = match std::str::from_utf8(line) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => {
            *lossy_lines += 1;
            String::from_utf8_lossy(line)
        }
    };
    let text = text.trim_end();
    match text.char_indices().nth(MAX_EVIDENCE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]).into(),
        None => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FileId;

    /// A NCCL debug file of `text`'s size.
    fn nccl_file(text: &str) -> InputFile {
        InputFile {
            id: FileId(0),
            display: "nccl.node1.7".into(),
            path: "nccl.node1.7".into(),
            size: text.len() as u64,
            hints: Default::default(),
        }
    }

    fn parse(text: &str) -> FileParse {
        parse_stream(
            text.as_bytes(),
            &nccl_file(text),
            &Grammar::builtin().unwrap(),
        )
    }

    /// A wrapped message is read joined and numbered by its first line; a
    /// line after a finished sentence, or one that adds nothing to the
    /// message before it, keeps its own reading and number.
    #[test]
    fn wrapped_messages_are_joined_only_where_that_reads_more_torch_2_4() {
        let text = "[rank1]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600049
milliseconds before timing out.
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1
";
        let out = parse(text);
        let read: Vec<(u64, &str, Option<i64>)> = out
            .events
            .iter()
            .map(|e| (e.origin.line, e.kind.name(), e.int("seq")))
            .collect();
        assert!(read.contains(&(1, "watchdog_exception", None)), "{read:?}");
        assert!(read.contains(&(3, "watchdog_timeout", Some(7))), "{read:?}");
        assert!(read.iter().any(|r| r.0 == 6), "{read:?}");
        assert!(
            read.iter().all(|r| r.0 != 2 && r.0 != 4 && r.0 != 5),
            "{read:?}"
        );
        let timeout = out.events.iter().find(|e| e.origin.line == 3).unwrap();
        assert!(
            timeout.text.ends_with("timeout:"),
            "cited as its first line"
        );
    }

    #[test]
    fn only_each_callers_last_calls_per_communicator_are_kept_in_line_order_nccl_2_19() {
        let call = |pid: u32, n: u32, comm: &str| {
            format!(
                "node1:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm {comm} [nranks=2] stream 0x2\n"
            )
        };
        let mut log = String::new();
        for n in 0..20 {
            log.push_str(&call(7, n, "0xa"));
            log.push_str(&call(8, n, "0xb"));
            if n == 15 {
                log.push_str("node1:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n");
            }
        }
        log.push_str(&call(7, 0, "0xc"));
        let p = parse(&log);
        let lines = |pid: u32| -> Vec<u64> {
            p.events
                .iter()
                .filter(|e| e.kind == EventKind::NcclCollCall && e.who.pid == Some(pid))
                .map(|e| e.origin.line)
                .collect()
        };
        // Pid 7's last eight on 0xa (lines 25, 27 … 40 with the channel
        // line among them), then its one call on 0xc.
        assert_eq!(lines(7), vec![25, 27, 29, 31, 34, 36, 38, 40, 42]);
        assert_eq!(lines(8).len(), 8);
        let sorted = p
            .events
            .windows(2)
            .all(|w| w[0].origin.line < w[1].origin.line);
        assert!(sorted, "events stay in line order");
        let first = p.events.iter().find(|e| e.origin.line == 25).unwrap();
        assert_eq!(first.int(crate::parse::EARLIER), Some(12));
        // The channel line's link still points at it.
        let channel = p
            .events
            .iter()
            .position(|e| e.kind == EventKind::NcclChannel);
        assert_eq!(
            p.links
                .iter()
                .map(|l| l.anchor as usize)
                .collect::<Vec<_>>(),
            vec![channel.unwrap()]
        );
        assert_eq!(p.matched_lines, 42);
    }

    #[test]
    fn channel_lines_fold_into_one_event_per_transport_and_one_link_per_pair_nccl_2_19() {
        let log = "\
node1:7:9 [0] NCCL INFO Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared
node1:7:9 [0] NCCL INFO Channel 01/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared
node1:7:9 [0] NCCL INFO Channel 00/1 : 0[0] -> 16[0] [send] via NET/IB/0/GDRDMA/Shared
node1:7:9 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM
node1:8:9 [1] NCCL INFO Channel 00/1 : 1[1] -> 9[1] [send] via NET/IB/0/GDRDMA/Shared
";
        let p = parse(log);
        let channel: Vec<&Event> = p
            .events
            .iter()
            .filter(|e| e.kind == EventKind::NcclChannel)
            .collect();
        // NET/IB of pid 7, P2P of pid 7, NET/IB of pid 8: the repeats on other
        // channels and peers add nothing but their ends.
        assert_eq!(channel.len(), 3, "{channel:#?}");
        assert_eq!(p.matched_lines, 5);
        let ends: Vec<(u32, u32, u32)> = p.links.iter().map(|l| (l.anchor, l.src, l.dst)).collect();
        assert_eq!(ends, vec![(0, 0, 8), (0, 0, 16), (1, 1, 0), (2, 1, 9)]);
        assert_eq!(channel[0].origin.line, 1, "the first line is the one kept");
    }

    /// Scans `text` as one file, with the memo of repeated lines or
    /// without; also how many lines the memo folded.
    fn scan_text(text: &str, memo: bool) -> (FileParse, u64) {
        let file = nccl_file(text);
        let grammar = Grammar::builtin().unwrap();
        let profile = sniff(text.as_bytes());
        let mut scanner = Scanner::new(&file, &grammar, &profile);
        if !memo {
            scanner.memo = None;
        }
        let mut reader = ChunkReader::with_start(io::empty(), text.as_bytes().to_vec());
        while let Some(chunk) = reader.next_chunk().unwrap() {
            scanner.scan_chunk(&chunk);
        }
        let hits = scanner.memo.as_ref().map_or(0, |m| m.hits);
        let mut out = scanner.out;
        dedup_links(&mut out);
        (out, hits)
    }

    /// Channel lines as NCCL prints them while connecting rings, trees and
    /// peers: runs that differ in the channel, a peer's send and receive
    /// alternating, numbers that grow a digit, other NICs and writers.
    fn channel_runs() -> String {
        let mut lines = Vec::new();
        for pid in [7, 8] {
            lines.push(format!("node1:{pid}:9 [0] NCCL INFO comm 0x1 rank 0 nranks 128 cudaDev 0 busId 1a000 commId 0x2 - Init START"));
            for ch in 0..12 {
                lines.push(format!(
                    "node1:{pid}:9 [0] NCCL INFO Channel {ch:02}/0 : 0[0] -> 1[1] via P2P/CUMEM"
                ));
                if ch % 4 == 3 {
                    lines.push(format!("node1:{pid}:9 [0] NCCL INFO Channel {ch:02}/0 : 0[0] -> 9[1] [send] via NET/IB/{}/GDRDMA", pid - 7));
                }
            }
            // NCCL ≤ 2.6 wrote neither padding nor a connection index.
            for ch in 8..11 {
                lines.push(format!(
                    "node1:{pid}:9 [0] NCCL INFO Ring {ch} : 0[0] -> 1[1] via P2P/IPC"
                ));
            }
            for peer in (6..12).chain(97..103) {
                for ch in 0..3 {
                    let end = if peer == 99 { "\r" } else { "" };
                    lines.push(format!("node1:{pid}:9 [0] NCCL INFO Channel {ch:02}/1 : {peer}[{}] -> 0[0] [receive] via NET/IB/0/GDRDMA/Shared{end}", peer % 8));
                    lines.push(format!("node1:{pid}:9 [0] NCCL INFO Channel {ch:02}/1 : 0[0] -> {peer}[{}] [send] via NET/IB/0/GDRDMA/Shared", peer % 8));
                }
            }
            lines.push(format!("node1:{pid}:9 [0] NCCL INFO Channel 00/1 : 0[0] -> 12[4] [send] via [NET/IB](http://x/)/0/GDRDMA/Shared"));
            lines.push(format!("node1:{pid}:9 [0] NCCL INFO Connected all rings"));
        }
        lines.join("\n")
    }

    #[test]
    fn folding_repeats_from_memory_changes_nothing_nccl_2_19() {
        let text = channel_runs();
        let (with, hits) = scan_text(&text, true);
        let (without, no_hits) = scan_text(&text, false);
        let events = |p: &FileParse| -> Vec<(u64, &'static str, Fields)> {
            p.events
                .iter()
                .map(|e| (e.origin.line, e.pattern, e.fields.clone()))
                .collect()
        };
        assert_eq!(events(&with), events(&without));
        assert_eq!(with.links, without.links);
        assert_eq!(with.matched_lines, without.matched_lines);
        assert_eq!(no_hits, 0);
        let channel_lines = text.matches(" NCCL INFO Channel ").count() as u64;
        assert!(
            hits * 4 > channel_lines * 3,
            "{hits} of {channel_lines} channel lines folded from memory"
        );
        let peers: Vec<u32> = with.links.iter().map(|l| l.src.max(l.dst)).collect();
        assert!(peers.contains(&102) && peers.contains(&9), "{peers:?}");
    }

    /// What the full path (literal scan, then every candidate) matches on
    /// each line read alone: the reference for the line-by-line lane.
    fn reference(text: &str) -> Vec<(u64, &'static str, Fields)> {
        let grammar = Grammar::builtin().unwrap();
        let mut scratch = MatchScratch::default();
        let mut out = Vec::new();
        for (n, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let mut candidates = Vec::new();
            grammar.candidates(line.as_bytes(), &mut candidates);
            let clean = unpaste(line.as_bytes());
            let framed = frame(&clean, &Default::default());
            let body_start = clean.len() - framed.body.len();
            if let Some(m) = grammar.match_line(&candidates, &clean, body_start, &mut scratch) {
                out.push((n as u64 + 1, m.pattern.id, m.fields));
            }
        }
        out
    }

    #[test]
    fn the_line_by_line_lane_reads_every_line_as_the_literal_scan_would() {
        let channel = |pid: u32| {
            format!("node1:{pid}:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0")
        };
        let mut lines: Vec<String> = Vec::new();
        let noise = |lines: &mut Vec<String>, n: usize| {
            lines.extend((0..n).map(|i| format!("epoch {i} loss 0.{i}")));
        };
        noise(&mut lines, 10);
        lines.extend((100..106).map(channel));
        lines.push("node1:7:9 [0] NCCL INFO comm 0x55d rank 0 nranks 2 cudaDev 0 busId 1a000 commId 0x1 - Init COMPLETE".into());
        lines.push(String::new());
        lines.extend((110..112).map(channel));
        // Pasted from a web page: the literal scan's path undoes the link.
        lines.push("node1:120:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via [NET/IB](http://x/)/0".into());
        lines.push(format!("{}\r", channel(121)));
        // Undoing the link makes the literal the line lacks: no candidate.
        lines.push(
            "node1:123:9 [0] NCCL INFO Chan[nel ](http://x/)00/0 : 0[0] -> 1[0] via P2P".into(),
        );
        // A prefix framing does not know: the accelerator declines, the
        // regex (unanchored) still reads it.
        lines.push(format!("garbage~ {}", channel(122)));
        lines.push("[rank0]:[E1129 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.".into());
        noise(&mut lines, 6);
        lines.extend((130..132).map(channel));
        lines.push("node1:7:9 [0] NCCL WARN NET/IB : Got completion from peer 10.1.3.201<33057> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.3.200 remoteGid ::ffff:10.1.3.201".into());
        noise(&mut lines, 3);
        let text = lines.join("\n");

        let want = reference(&text);
        let p = parse(&text);
        let got: Vec<(u64, &str, Fields)> = p
            .events
            .iter()
            .map(|e| (e.origin.line, e.pattern, e.fields.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(p.matched_lines, want.len() as u64);
        assert!(
            want.iter()
                .filter(|(_, id, _)| *id == "nccl.channel")
                .count()
                >= 12,
            "the channel lines above all match: {want:?}"
        );
    }
}
