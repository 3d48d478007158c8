//! Messages a paste or an editor wrapped at a word: PyTorch's watchdog
//! message is two hundred characters long, and issue trackers, e-mail and
//! narrow terminals break it (`… timeout:` / `WorkNCCL(SeqNum=2070, …` /
//! `ran for … before timing out.`). Unlike a padded screen capture
//! (parse/unwrap.rs) nothing in the file says where lines were broken, so
//! the scanner offers the lines after a message that may wrap (a grammar
//! pattern with `wraps = true`) and keeps a joined reading only where it
//! reads more (scan.rs).

use crate::ingest::launcher::LauncherStyle;

use super::frame::frame;
use super::paste::unpaste;

/// Lines one message is read across at most, after its first.
const MAX_CONTINUATION_LINES: usize = 3;

/// One line after the message's first: `data[start..end]`, its line end
/// excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
}

/// The lines after the one ending at `end` that may continue its message:
/// up to a few, none of which starts a log line of its own (a launcher's
/// tag, a stamp, a writer's prefix) or is empty, ending with the first that
/// ends a sentence.
pub fn continuation_lines(data: &[u8], end: usize, style: &LauncherStyle) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut at = end;
    while pieces.len() < MAX_CONTINUATION_LINES && at < data.len() {
        let start = at + 1;
        let next_end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |p| start + p);
        let raw = &data[start..next_end];
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.trim_ascii().is_empty() || starts_log_line(line, style) {
            break;
        }
        pieces.push(Piece {
            start,
            end: start + line.len(),
        });
        if ends_sentence(line) {
            break;
        }
        at = next_end;
    }
    pieces
}

/// Whether a line starts as a log line does: some prefix is peeled off it.
fn starts_log_line(line: &[u8], style: &LauncherStyle) -> bool {
    let clean = unpaste(line);
    frame(&clean, style).body.len() != clean.len()
}

/// The text ends a sentence (PyTorch's messages end with a full stop).
pub fn ends_sentence(text: &[u8]) -> bool {
    text.trim_ascii_end().ends_with(b".")
}

/// `line` joined with `pieces` the two ways a wrap may have broken it: at a
/// space (joined with one) and inside a word (joined with none).
pub fn joinings(line: &[u8], pieces: &[Piece], data: &[u8]) -> [Vec<u8>; 2] {
    [&b" "[..], &b""[..]].map(|sep| {
        let mut joined = line.trim_ascii_end().to_vec();
        for p in pieces {
            joined.extend_from_slice(sep);
            joined.extend_from_slice(data[p.start..p.end].trim_ascii());
        }
        joined
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &[u8], first_end: usize) -> Vec<&[u8]> {
        continuation_lines(text, first_end, &LauncherStyle::default())
            .iter()
            .map(|p| &text[p.start..p.end])
            .collect()
    }

    #[test]
    fn a_wrapped_message_continues_on_unprefixed_lines_up_to_its_full_stop() {
        let text = b"[Rank 1] Watchdog caught collective operation timeout:\nWorkNCCL(SeqNum=12590, NumelOut=2809856,\n         Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\nwandb: Waiting for W&B process to finish...";
        let first = memchr::memchr(b'\n', text).unwrap();
        let got = pieces(text, first);
        assert_eq!(got.len(), 2);
        assert!(got[1].ends_with(b"timing out."));
        let joined = joinings(
            &text[..first],
            &continuation_lines(text, first, &LauncherStyle::default()),
            text,
        );
        assert_eq!(
            joined[0],
            b"[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12590, NumelOut=2809856, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
        );
        assert!(
            joined[1]
                .starts_with(b"[Rank 1] Watchdog caught collective operation timeout:WorkNCCL(")
        );
    }

    #[test]
    fn a_line_with_its_own_prefix_or_an_empty_line_ends_the_message() {
        let text = b"[rank0]:[E327 17:04:16.986381360 ProcessGroupNCCL.cpp:1582] [PG 0 Rank\n   [rank0]:[E327 17:04:16.182548526 ProcessGroupNCCL.cpp:1346] next";
        let first = memchr::memchr(b'\n', text).unwrap();
        assert!(pieces(text, first).is_empty());
        let text = b"head:\n\nWorkNCCL(SeqNum=1, OpType=ALLREDUCE)";
        assert!(pieces(text, 5).is_empty());
        let text = b"head:\nnode1:5:5 [0] NCCL INFO comm 0x1 rank 0";
        assert!(pieces(text, 5).is_empty());
    }
}
