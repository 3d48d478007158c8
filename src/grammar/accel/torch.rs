//! Accelerators for PyTorch's watchdog reports: every rank of a failed job
//! prints them, each a long line that the regexes' lazy and optional parts
//! make slow to match.

use std::ops::Range;

use memchr::memmem;

use super::reader::Reader;
use super::{Spans, is_space, is_word};

/// `[Rank 5] Watchdog caught collective operation timeout:
/// WorkNCCL(SeqNum=14217, OpType=ALLGATHER, NumelIn=65536, NumelOut=524288,
/// Timeout(ms)=600000) ran for 600002 milliseconds before timing out.`
/// (`torch.watchdog_timeout`) in the forms torch 1.10+ prints; a work item
/// with other fields is left to the regex.
pub(super) fn watchdog_timeout(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_watchdog_timeout(body, spans).is_some()
}

fn read_watchdog_timeout(body: &[u8], spans: &mut Spans) -> Option<()> {
    const CAUGHT: &[u8] = b"Watchdog caught collective operation timeout:";
    // The leftmost match starts at the first report, or at the `[Rank N]`
    // right before it.
    let caught = memmem::find(body, CAUGHT)?;
    let rank = rank_tag_before(body, caught);
    // torch 2.4+'s group tag stands right before the `[Rank N]` tag, or
    // before the report where there is none.
    let tags_end = rank.as_ref().map_or(caught, |r| r.start - b"[Rank ".len());
    if let Some(open) = pg_tag_before(body, tags_end) {
        let mut r = Reader::new(body);
        r.at = open + b"[PG ".len();
        read_pg_tag(&mut r, spans)?;
    }
    if let Some(rank) = rank {
        spans.set("rank_in_pg", rank)?;
    }
    let mut r = Reader::new(body);
    r.at = caught + CAUGHT.len();
    r.skip_spaces();
    r.expect(b"WorkNCCL(")?;
    if r.eat(b"SeqNum=") {
        let seq = r.digits()?;
        r.expect(b",")?;
        r.skip_spaces();
        spans.set("seq", seq)?;
    }
    if r.eat(b"...,") {
        r.skip_spaces();
    }
    r.expect(b"OpType=")?;
    let op = r.span1(is_word)?;
    spans.set("op", op)?;
    for (key, name) in [(&b"NumelIn="[..], "numel_in"), (b"NumelOut=", "numel_out")] {
        if comma_then(&mut r, key) {
            let numel = r.digits()?;
            spans.set(name, numel)?;
        } else if comma_then(&mut r, b"Numel") {
            // Any other spelling is the regex's to read.
            return None;
        } else {
            break;
        }
    }
    comma_then(&mut r, b"Timeout(ms)=").then_some(())?;
    let timeout = r.digits()?;
    r.expect(b")")?;
    spans.set("timeout_ms", timeout)?;
    r.skip_spaces();
    if r.eat(b"ran for ")
        && let Some(elapsed) = r.digits()
        && r.eat(b" milliseconds before timing out")
    {
        spans.set("elapsed_ms", elapsed)?;
    }
    Some(())
}

/// `,\s*` then `word`, the reader moved past them when they are there.
fn comma_then(r: &mut Reader<'_>, word: &[u8]) -> bool {
    let before = r.at;
    if r.eat(b",") {
        r.skip_spaces();
        if r.eat(word) {
            return true;
        }
    }
    r.at = before;
    false
}

/// Where a `[PG …]` tag (and the spaces after it) that ends right at `at`
/// opens.
fn pg_tag_before(body: &[u8], at: usize) -> Option<usize> {
    let open = memmem::rfind(&body[..at], b"[PG ")?;
    let mut r = Reader::new(body);
    r.at = open + b"[PG ".len();
    read_pg_tag(&mut r, &mut Spans::new())?;
    (r.at == at).then_some(open)
}

/// The digits of a `[Rank N]` tag (and the spaces after it) that ends right
/// at `at`.
fn rank_tag_before(body: &[u8], at: usize) -> Option<Range<usize>> {
    let head = &body[..at];
    let close = head.iter().rposition(|&b| !is_space(b))?;
    (head[close] == b']').then_some(())?;
    let digits_start = head[..close]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |p| p + 1);
    (digits_start < close && head[..digits_start].ends_with(b"[Rank ")).then_some(())?;
    Some(digits_start..close)
}

/// `[PG 0 (default_pg) Rank 12] Process group watchdog thread terminated
/// with exception: …` (`torch.watchdog_exception`, torch 2.1+ and the
/// `[Rank N] NCCL watchdog …` form before); then the work item, CUDA error
/// and NCCL error in the reason, each the first that stands after the one
/// before, as the regex's lazy optional parts find them.
pub(super) fn watchdog_exception(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_watchdog_exception(body, spans).is_some()
}

/// The leftmost match: the message may follow other text (`what():  [PG 0
/// Rank 3] …`), so each place before the first report where the tags or
/// the report can begin is tried in turn. Reading from a place fails only
/// where no match starts there (an optional tag is taken wherever its
/// opening stands, and without it nothing else could match there).
fn read_watchdog_exception(body: &[u8], spans: &mut Spans) -> Option<()> {
    const TERMINATED: &[u8] = b" watchdog thread terminated with exception: ";
    let first = memmem::find(body, TERMINATED)?;
    // A try may read to the end of the line, so only the first few places
    // are tried: a line with more (real ones have about five) is left to
    // the regex, whose time stays linear however the line looks.
    memchr::memchr3_iter(b'[', b'N', b'P', &body[..first])
        .take(MAX_STARTS)
        .find_map(|start| {
            spans.clear();
            read_watchdog_exception_at(body, start, spans)
        })
}

/// Places where a watchdog exception report may begin that are tried.
const MAX_STARTS: usize = 16;

fn read_watchdog_exception_at(body: &[u8], start: usize, spans: &mut Spans) -> Option<()> {
    let mut r = Reader::new(body);
    r.at = start;
    if r.eat(b"[PG ") {
        read_pg_tag(&mut r, spans)?;
    }
    if r.eat(b"[Rank ") {
        let rank = r.digits()?;
        r.expect(b"]")?;
        r.skip_spaces();
        spans.set("rank_in_pg", rank)?;
    }
    if !(r.eat(b"NCCL") || r.eat(b"Process group")) {
        return None;
    }
    r.expect(b" watchdog thread terminated with exception: ")?;
    let reason = r.at..body.len();
    spans.set("reason", reason.clone())?;
    let mut at = reason.start;
    let mut tag = Reader::new(body);
    tag.at = at;
    if tag.eat(b"[Rank ") && tag.digits().is_some() && tag.eat(b"] ") {
        at = tag.at;
    }
    if let Some((seq, op)) = first_work_item(body, at) {
        at = op.end;
        spans.set("seq", seq)?;
        spans.set("op", op)?;
    }
    if let Some(cuda) = first_after(body, at, b"CUDA error: ", b'.') {
        at = cuda.end;
        spans.set("cuda_error", cuda)?;
    }
    if let Some(nccl) = first_after(body, at, b"NCCL error: ", b',') {
        spans.set("nccl_error", nccl)?;
    }
    Some(())
}

/// The rest of a `[PG ID 0 PG GUID 0(default_pg) Rank 0]` tag after `[PG `
/// and the spaces after it.
fn read_pg_tag(r: &mut Reader<'_>, spans: &mut Spans) -> Option<()> {
    r.eat(b"ID ");
    let pg = r.digits()?;
    spans.set("pg", pg)?;
    if r.eat(b" PG GUID ") {
        let guid = r.span1(|b| !is_space(b) && b != b'(' && b != b']')?;
        spans.set("pg_guid", guid)?;
    }
    let before = r.at;
    if r.rest().first().is_some_and(|&b| is_space(b)) {
        r.at += 1;
    }
    if r.eat(b"(") {
        let desc = r.span(|b| b != b')');
        r.expect(b")")?;
        spans.set("pg_desc", desc)?;
    } else {
        r.at = before;
    }
    r.expect(b" Rank ")?;
    let rank = r.digits()?;
    r.expect(b"]")?;
    r.skip_spaces();
    spans.set("pg_rank", rank)
}

/// The first `WorkNCCL(SeqNum=N, OpType=OP` from `from` on: where N and OP
/// lie.
fn first_work_item(body: &[u8], from: usize) -> Option<(Range<usize>, Range<usize>)> {
    const WORK: &[u8] = b"WorkNCCL(SeqNum=";
    memmem::find_iter(&body[from..], WORK).find_map(|hit| {
        let mut r = Reader::new(body);
        r.at = from + hit + WORK.len();
        let seq = r.digits()?;
        r.expect(b", OpType=")?;
        let op = r.span1(is_word)?;
        Some((seq, op))
    })
}

/// The first `label` from `from` on that at least one byte other than
/// `stop` follows: where the run of such bytes lies.
fn first_after(body: &[u8], from: usize, label: &[u8], stop: u8) -> Option<Range<usize>> {
    memmem::find_iter(&body[from..], label).find_map(|hit| {
        let start = from + hit + label.len();
        let len = body[start..].iter().take_while(|&&b| b != stop).count();
        (len > 0).then(|| start..start + len)
    })
}

/// `taking the entire process down`, `Some NCCL operations have failed or
/// timed out` or `Terminating the process after attempting to dump debug
/// info, due to REASON` (`torch.process_taken_down`): whichever comes first.
pub(super) fn process_taken_down(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_process_taken_down(body, spans).is_some()
}

fn read_process_taken_down(body: &[u8], spans: &mut Spans) -> Option<()> {
    const TERMINATING: &[u8] =
        b"Terminating the process after attempting to dump debug info, due to ";
    let plain = [
        &b"taking the entire process down"[..],
        b"Some NCCL operations have failed or timed out",
    ]
    .into_iter()
    .filter_map(|what| memmem::find(body, what).map(|at| (at, at + what.len(), None)));
    let terminating = first_after(body, 0, TERMINATING, b'.')
        .map(|reason| (reason.start - TERMINATING.len(), reason.end, Some(reason)));
    let (start, end, reason) = plain.chain(terminating).min_by_key(|&(at, _, _)| at)?;
    spans.set("what", start..end)?;
    if let Some(reason) = reason {
        spans.set("reason", reason)?;
    }
    Some(())
}

/// `Exception raised from checkTimeout at ../torch/csrc/…/ProcessGroupNCCL.cpp:565`
/// (`torch.exception_origin`): the source path runs to the last `:` that
/// digits follow within the word.
pub(super) fn exception_origin(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_exception_origin(body, spans).is_some()
}

fn read_exception_origin(body: &[u8], spans: &mut Spans) -> Option<()> {
    const RAISED: &[u8] = b"Exception raised from ";
    let (function, src, line) = memmem::find_iter(body, RAISED).find_map(|hit| {
        let mut r = Reader::new(body);
        r.at = hit + RAISED.len();
        let function = r.span1(is_word)?;
        r.expect(b" at ")?;
        let word = r.span1(|b| !is_space(b))?;
        let colon = (word.start + 1..word.end.saturating_sub(1))
            .rev()
            .find(|&k| body[k] == b':' && body[k + 1].is_ascii_digit())?;
        let digits = body[colon + 1..word.end]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        Some((function, word.start..colon, colon + 1..colon + 1 + digits))
    })?;
    spans.set("function", function)?;
    spans.set("src", src)?;
    spans.set("src_line", line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each group the reader found, with the text it covers.
    fn read(reader: fn(&[u8], &mut Spans) -> bool, body: &str) -> Option<Vec<(&str, &str)>> {
        let mut spans = Spans::new();
        reader(body.as_bytes(), &mut spans).then(|| {
            [
                "what",
                "reason",
                "function",
                "src",
                "src_line",
                "rank_in_pg",
                "seq",
                "op",
            ]
            .into_iter()
            .filter_map(|name| spans.get(name).map(|(s, e)| (name, &body[s..e])))
            .collect()
        })
    }

    #[test]
    fn the_source_path_runs_to_the_last_colon_before_digits() {
        let got = read(
            exception_origin,
            "Exception raised from run at C:/src/x.cpp:12:3 (most recent call first):",
        );
        let want = vec![
            ("function", "run"),
            ("src", "C:/src/x.cpp:12"),
            ("src_line", "3"),
        ];
        assert_eq!(got, Some(want));
    }

    #[test]
    fn the_first_of_the_take_down_messages_is_the_one_read() {
        let got = read(
            process_taken_down,
            "Some NCCL operations have failed or timed out. Terminating the process after attempting to dump debug info, due to x.",
        );
        assert_eq!(
            got,
            Some(vec![(
                "what",
                "Some NCCL operations have failed or timed out"
            )])
        );
        // An empty reason does not end the message: the regex looks further.
        assert_eq!(
            read(
                process_taken_down,
                "Terminating the process after attempting to dump debug info, due to ."
            ),
            None
        );
    }

    #[test]
    fn a_timeout_report_with_fields_it_does_not_know_is_left_to_the_regex() {
        let known = "[Rank 5]  Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.";
        let got = read(watchdog_timeout, known).unwrap();
        assert!(got.contains(&("rank_in_pg", "5")) && got.contains(&("op", "ALLREDUCE")));
        let unknown = known.replace("NumelOut=8,", "NumelOut=8, Extra=1,");
        assert_eq!(read(watchdog_timeout, &unknown), None);
    }

    #[test]
    fn a_report_after_other_text_is_read_where_the_regex_finds_it() {
        let body = "what():  [PG 0 Rank 2481] Process group watchdog thread terminated with exception: [Rank 2481] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1496, OpType=ALLREDUCE, NumelIn=5, NumelOut=5, Timeout(ms)=600000) ran for 600194 milliseconds before timing out.";
        let mut spans = Spans::new();
        assert!(watchdog_exception(body.as_bytes(), &mut spans));
        let text = |name| spans.get(name).map(|(s, e)| &body[s..e]);
        assert_eq!(text("pg_rank"), Some("2481"));
        assert_eq!(text("seq"), Some("1496"));
        assert_eq!(text("rank_in_pg"), None);
    }

    #[test]
    fn a_line_with_many_places_a_report_could_begin_is_left_to_the_regex() {
        let tags = "[PG 0 (x".repeat(MAX_STARTS);
        let line =
            format!("{tags} [PG 0 Rank 3] NCCL watchdog thread terminated with exception: boom");
        let mut spans = Spans::new();
        assert!(!watchdog_exception(line.as_bytes(), &mut spans));
        let few = line.replacen("[PG 0 (x", "", MAX_STARTS);
        assert!(watchdog_exception(few.as_bytes(), &mut spans));
    }
}
