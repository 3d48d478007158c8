//! Undoing a terminal's fixed-width wrap: a screen capture (tmux
//! `capture-pane`, a copy from a console) pads every line to the terminal's
//! width and breaks longer lines at it, so a watchdog line arrives as three
//! (`… NumelIn=1, N` / `umelOut=1, Timeout(ms)=600000) ran for …`).
//!
//! A file is taken for such a capture only where its head shows it: many
//! lines of one width, some of them padded with spaces to it (lines cut at
//! a width, with the rest lost, are never padded, and must not be joined).
//! Then a line that fills the width is continued by the next: where it ends
//! in a character, or in one space (a wrap at a word) before a line that
//! does not start as a log line does (`[`, a digit). Joined lines keep their
//! first line's number; an empty line stands in for each line joined, so
//! every later line keeps its number too.

use std::io::{self, Read};

/// Lines of the capture's width needed in the head, and how many of them
/// must be padded to it.
const MIN_FULL_LINES: usize = 5;
const MIN_PADDED_LINES: usize = 2;
/// Terminals narrower than this do not hold log lines.
const MIN_WIDTH: usize = 60;
/// The lines of the head a capture is recognised by.
const LINES_READ: usize = 32;

/// The width a padded screen capture was wrapped at, read from the file's
/// first bytes; `None` for any other file.
pub fn padded_width(head: &[u8]) -> Option<usize> {
    // Every file is asked: its first lines decide, so a log costs a few
    // line ends, not a pass over its head.
    let complete = &head[..memchr::memrchr(b'\n', head)?];
    let lines: Vec<&[u8]> = complete
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty())
        .take(LINES_READ)
        .collect();
    let mut counts: Vec<(usize, usize)> = Vec::with_capacity(lines.len());
    for l in &lines {
        match counts.iter_mut().find(|(w, _)| *w == l.len()) {
            Some((_, n)) => *n += 1,
            None => counts.push((l.len(), 1)),
        }
    }
    let &(width, full) = counts.iter().max_by_key(|&&(w, n)| (n, w))?;
    let padded = lines
        .iter()
        .filter(|l| l.len() == width && l.ends_with(b"  "))
        .count();
    let most = full * 10 >= lines.len() * 6;
    (width >= MIN_WIDTH && full >= MIN_FULL_LINES && padded >= MIN_PADDED_LINES && most)
        .then_some(width)
}

/// A stream with the capture's wrapped lines joined.
pub struct Unwrap<R> {
    inner: R,
    width: usize,
    /// Bytes of the current line so far (counted past the width too).
    col: usize,
    /// The current line's last two bytes.
    last: [u8; 2],
    /// A full line that ended in one space: whether it goes on waits for
    /// the next line's first byte.
    undecided: bool,
    /// Newlines of joined lines, written after the joined line's own.
    owed: usize,
    buf: Vec<u8>,
    out: Vec<u8>,
    out_at: usize,
}

impl<R: Read> Unwrap<R> {
    pub fn new(inner: R, width: usize) -> Self {
        Unwrap {
            inner,
            width,
            col: 0,
            last: [0; 2],
            undecided: false,
            owed: 0,
            buf: vec![0; 64 * 1024],
            out: Vec::with_capacity(64 * 1024),
            out_at: 0,
        }
    }

    fn end_line(&mut self) {
        self.out.push(b'\n');
        self.out.extend(std::iter::repeat_n(b'\n', self.owed));
        self.owed = 0;
        self.col = 0;
        self.last = [0; 2];
    }

    fn push(&mut self, b: u8) {
        if self.undecided {
            self.undecided = false;
            if b == b'[' || b == b'\n' || b.is_ascii_digit() {
                self.end_line();
            } else {
                self.join();
            }
        }
        // A CRLF line's width is that of its text.
        if b == b'\r' {
            self.out.push(b);
            return;
        }
        if b != b'\n' {
            self.out.push(b);
            self.col += 1;
            self.last = [self.last[1], b];
            return;
        }
        if self.col != self.width {
            return self.end_line();
        }
        match self.last {
            // Padding: the line ended before the width.
            [b' ', b' '] => self.end_line(),
            [_, b' '] => self.undecided = true,
            _ => self.join(),
        }
    }

    /// The line goes on in the next: its newline is owed, not written.
    fn join(&mut self) {
        self.owed += 1;
        self.col = 0;
    }

    /// At the end of the input, a line still undecided ended there.
    fn finish(&mut self) {
        if self.undecided {
            self.undecided = false;
            self.end_line();
        } else if self.owed > 0 {
            self.out.extend(std::iter::repeat_n(b'\n', self.owed));
            self.owed = 0;
        }
    }
}

impl<R: Read> Read for Unwrap<R> {
    fn read(&mut self, into: &mut [u8]) -> io::Result<usize> {
        while self.out_at == self.out.len() {
            self.out.clear();
            self.out_at = 0;
            let n = self.inner.read(&mut self.buf)?;
            if n == 0 {
                self.finish();
                if self.out.is_empty() {
                    return Ok(0);
                }
                break;
            }
            for i in 0..n {
                let b = self.buf[i];
                self.push(b);
            }
        }
        let n = into.len().min(self.out.len() - self.out_at);
        into[..n].copy_from_slice(&self.out[self.out_at..self.out_at + n]);
        self.out_at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A logical line as a `width`-column terminal shows it: cut into
    /// rows, the last padded.
    fn rows(line: &str, width: usize) -> String {
        let chars: Vec<char> = line.chars().collect();
        chars
            .chunks(width)
            .map(|c| format!("{:<width$}\n", c.iter().collect::<String>()))
            .collect()
    }

    fn unwrap_all(text: &str, width: usize) -> String {
        let mut out = String::new();
        Unwrap::new(text.as_bytes(), width)
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    const WATCHDOG: &str = "[rank4]:[E430 05:09:48.828088908 ProcessGroupNCCL.cpp:632] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9387, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.";
    /// Cut by a 70-column terminal right after `is `.
    const AT_A_SPACE: &str = "[rank6]:[E429 13:55:49.384620373 ProcessGroupNCCL.cpp:1533] PG 100 is preparing to dump debug info. Include stack trace: 1";

    /// torchtune#2651's shape (a 166-column capture; 70 here).
    fn capture() -> String {
        let mut s = String::new();
        s.push_str(&rows(
            "INFO:torchtune.utils._logging:Saving checkpoint.",
            70,
        ));
        s.push_str(&rows(WATCHDOG, 70));
        // Ends in one space, right at the width, before a log line.
        s.push_str(&rows(
            "[rank1]:[E430 05:09:48.89 ProcessGroupNCCL.cpp:2268] failure detected ",
            70,
        ));
        s.push_str(&rows(AT_A_SPACE, 70));
        s.push_str(&rows("done", 70));
        s
    }

    #[test]
    fn a_padded_capture_is_recognised_by_its_width_and_padding_torch_2_6() {
        assert_eq!(padded_width(capture().as_bytes()), Some(70));
        // Lines cut at one width (the rest lost) carry no padding.
        let cut: String = (0..8).map(|_| format!("{}\n", "x".repeat(70))).collect();
        assert_eq!(padded_width(cut.as_bytes()), None);
        // Ordinary logs have no one width.
        let log: String = (0..8)
            .map(|i| format!("{}\n", "x".repeat(70 + i)))
            .collect();
        assert_eq!(padded_width(log.as_bytes()), None);
    }

    #[test]
    fn wrapped_lines_are_joined_and_every_line_keeps_its_number_torch_2_6() {
        let text = capture();
        let out = unwrap_all(&text, 70);
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), text.split('\n').count(), "{out}");
        assert_eq!(lines[1].trim_end(), WATCHDOG);
        assert_eq!(&lines[2..5], ["", "", ""]);
        // A full line ending in one space before a log line is whole.
        assert!(lines[5].ends_with("failure detected "), "{out}");
        // A wrap that fell on a space, before words: joined.
        assert_eq!(lines[6].trim_end(), AT_A_SPACE);
        assert_eq!(lines[7], "");
        assert_eq!(lines[8].trim_end(), "done");
    }

    proptest::proptest! {
        /// Joining only moves newlines later: every other byte stays in
        /// its order, and no newline is lost or added.
        #[test]
        fn only_newlines_move(text in "[a \\[0-9\\n\\r]{0,400}", width in 1usize..12) {
            let out = unwrap_all(&text, width);
            let strip = |s: &str| s.replace('\n', "");
            proptest::prop_assert_eq!(strip(&out), strip(&text));
            proptest::prop_assert_eq!(out.matches('\n').count(), text.matches('\n').count());
        }
    }

    #[test]
    fn a_wrapped_last_line_keeps_its_count() {
        let text = format!("{}\nend", "y".repeat(40));
        let out = unwrap_all(&text, 40);
        assert_eq!(out, format!("{}end\n", "y".repeat(40)));
    }
}
