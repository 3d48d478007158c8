//! Reading a stream as chunks of whole lines, with a cap on line length.
//!
//! Parsers scan a chunk at a time (many lines in one buffer) so the literal
//! prefilter runs over large slices instead of line by line. A line longer than
//! the cap is cut: its first `max_line` bytes are kept (and counted as
//! truncated), the rest is skipped without being buffered, so a 100 MB line
//! costs no more memory than a short one.

use std::io::{self, Read};
use std::ops::Range;

/// Default cap on one line: far above any real log line (NCCL cuts its own at
/// 1023 bytes), far below anything that could strain memory.
pub const DEFAULT_MAX_LINE: usize = 64 * 1024;
const READ_SIZE: usize = 256 * 1024;

/// An empty buffer with the room a [`ChunkReader`] reads into: a stream's
/// head read into it can be handed over whole with [`ChunkReader::with_start`].
pub fn stream_buffer() -> Vec<u8> {
    Vec::with_capacity(READ_SIZE + DEFAULT_MAX_LINE)
}

/// Per-file counts of what the reader saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    pub lines: u64,
    pub bytes: u64,
    pub truncated_lines: u64,
}

/// A slice of whole lines (each ends with `\n`, except possibly the last line of
/// the stream) and the 1-based number of its first line.
pub struct Chunk<'a> {
    pub data: &'a [u8],
    pub first_line: u64,
}

pub struct ChunkReader<R> {
    reader: R,
    /// The bytes read and not yet dropped; read into its spare capacity.
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out in an earlier chunk.
    consumed: usize,
    eof: bool,
    max_line: usize,
    /// An error met after some bytes of a read: reported by the next one.
    failed: Option<io::Error>,
    /// Inside an over-long line whose head was already emitted.
    skipping: bool,
    next_line: u64,
    stats: LineStats,
}

impl<R: Read> ChunkReader<R> {
    pub fn new(reader: R) -> Self {
        Self::with_max_line(reader, DEFAULT_MAX_LINE)
    }

    pub fn with_max_line(reader: R, max_line: usize) -> Self {
        Self::starting_with(reader, Vec::new(), max_line)
    }

    /// A reader of a stream whose first bytes were already read into
    /// `start` (best from [`stream_buffer`]: they are then neither copied
    /// nor moved).
    pub fn with_start(reader: R, start: Vec<u8>) -> Self {
        Self::starting_with(reader, start, DEFAULT_MAX_LINE)
    }

    fn starting_with(reader: R, mut buf: Vec<u8>, max_line: usize) -> Self {
        let max_line = max_line.max(1);
        let stats = LineStats {
            bytes: buf.len() as u64,
            ..LineStats::default()
        };
        buf.reserve((READ_SIZE + max_line).saturating_sub(buf.len()));
        ChunkReader {
            reader,
            buf,
            consumed: 0,
            eof: false,
            failed: None,
            max_line,
            skipping: false,
            next_line: 1,
            stats,
        }
    }

    pub fn stats(&self) -> LineStats {
        self.stats
    }

    /// The number the next line would get (lines read so far + 1).
    pub fn next_line(&self) -> u64 {
        self.next_line
    }

    /// The next chunk of whole lines, or `None` at the end of the stream.
    pub fn next_chunk(&mut self) -> io::Result<Option<Chunk<'_>>> {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        loop {
            if self.skipping {
                self.skip_rest_of_long_line();
            }
            if !self.skipping && !self.buf.is_empty() {
                // The buffer starts at a line start here.
                match memchr::memchr(b'\n', &self.buf) {
                    Some(first) if first > self.max_line => return Ok(Some(self.emit_truncated())),
                    Some(_) => {
                        let end = self.end_of_lines_within_cap();
                        return Ok(Some(self.emit(end, false)));
                    }
                    None if self.buf.len() > self.max_line => {
                        return Ok(Some(self.emit_truncated()));
                    }
                    None if self.eof => {
                        let end = self.buf.len();
                        return Ok(Some(self.emit(end, false)));
                    }
                    None => {}
                }
            }
            if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// End of the complete lines at the head of the buffer, stopping before
    /// the first line longer than the cap (which the next call truncates).
    fn end_of_lines_within_cap(&self) -> usize {
        let mut line_start = 0;
        for nl in memchr::memchr_iter(b'\n', &self.buf) {
            if nl - line_start > self.max_line {
                return line_start;
            }
            line_start = nl + 1;
        }
        line_start
    }

    fn emit_truncated(&mut self) -> Chunk<'_> {
        self.skipping = true;
        self.emit(self.max_line, true)
    }

    fn emit(&mut self, end: usize, truncated: bool) -> Chunk<'_> {
        let first_line = self.next_line;
        let data = &self.buf[..end];
        let newlines = memchr::memchr_iter(b'\n', data).count() as u64;
        let lines = if truncated || !data.ends_with(b"\n") {
            newlines + 1
        } else {
            newlines
        };
        self.stats.lines += lines;
        self.stats.truncated_lines += u64::from(truncated);
        self.next_line += if truncated { 0 } else { lines };
        self.consumed = end;
        Chunk {
            data: &self.buf[..end],
            first_line,
        }
    }

    /// Drops bytes up to and including the newline ending an over-long line.
    fn skip_rest_of_long_line(&mut self) {
        match memchr::memchr(b'\n', &self.buf) {
            Some(pos) => {
                self.buf.drain(..=pos);
                self.skipping = false;
                self.next_line += 1;
            }
            None => {
                self.buf.clear();
                if self.eof {
                    self.skipping = false;
                    self.next_line += 1;
                }
            }
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        // `read_to_end` reads into the spare capacity, preparing only as
        // much of it as each read asks for (the buffer was zeroed whole, 256
        // KiB, for every read of every file), and stops at the stream's end
        // or after `READ_SIZE` bytes: a short read is the end, so the empty
        // read that would confirm it is saved.
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let before = self.buf.len();
        let result = (&mut self.reader)
            .take(READ_SIZE as u64)
            .read_to_end(&mut self.buf);
        let n = self.buf.len() - before;
        self.stats.bytes += n as u64;
        match result {
            // What came before an error is handed out first.
            Err(e) if n > 0 => self.failed = Some(e),
            Err(e) => return Err(e),
            Ok(_) => self.eof = n < READ_SIZE,
        }
        Ok(())
    }
}

/// Where each line of `bytes` lies, its `\n` left out (a last line without
/// one included), found with `memchr`'s vectorised search: byte-by-byte
/// splitting cost more than the rest of sniffing a file. Spans, so that
/// text and bytes alike are cut by them.
pub fn line_spans(bytes: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |p| start + p);
        let span = start..end;
        start = end + 1;
        Some(span)
    })
}

/// Iterates the lines of a chunk: (line number, line without `\n` / `\r\n`).
pub fn lines_of<'a>(chunk: &Chunk<'a>) -> impl Iterator<Item = (u64, &'a [u8])> {
    let data = chunk.data;
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    let first = chunk.first_line;
    data.split(|&b| b == b'\n')
        .enumerate()
        .map(move |(i, l)| (first + i as u64, l.strip_suffix(b"\r").unwrap_or(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_spans_cut_where_the_standard_library_would() {
        for text in ["", "a", "a\n", "a\r\nb\n\n c", "\n\n", "x\ry\n"] {
            let ours: Vec<&str> = line_spans(text.as_bytes())
                .map(|span| &text[span])
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect();
            let std: Vec<&str> = text.lines().collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }

    fn collect(input: &[u8], max_line: usize) -> (Vec<(u64, Vec<u8>)>, LineStats) {
        let mut r = ChunkReader::with_max_line(input, max_line);
        let mut out = Vec::new();
        while let Some(chunk) = r.next_chunk().unwrap() {
            out.extend(lines_of(&chunk).map(|(n, l)| (n, l.to_vec())));
        }
        (out, r.stats())
    }

    #[test]
    fn numbers_lines_and_keeps_a_last_line_without_newline() {
        let (lines, stats) = collect(b"a\nbb\r\nccc", 100);
        assert_eq!(
            lines,
            vec![
                (1, b"a".to_vec()),
                (2, b"bb".to_vec()),
                (3, b"ccc".to_vec())
            ]
        );
        assert_eq!(stats.lines, 3);
    }

    #[test]
    fn an_overlong_line_is_cut_and_the_count_goes_on() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend(b"\nafter\n");
        let (lines, stats) = collect(&input, 16);
        assert_eq!(lines[0], (1, b"short".to_vec()));
        assert_eq!(lines[1], (2, vec![b'x'; 16]));
        assert_eq!(lines[2], (3, b"after".to_vec()));
        assert_eq!(stats.truncated_lines, 1);
    }

    #[test]
    fn a_reader_handed_the_head_reads_as_one_reading_the_whole_stream() {
        let mut input = Vec::new();
        for i in 0..20_000 {
            input.extend(format!("line {i} {}\n", "z".repeat(i % 97)).bytes());
        }
        input.extend(vec![b'q'; DEFAULT_MAX_LINE + 5]);
        input.extend(b"\nlast");
        let whole = collect(&input, DEFAULT_MAX_LINE);
        for cut in [0, 1, 9, 4096, 65_536, 300_000] {
            let mut start = stream_buffer();
            start.extend_from_slice(&input[..cut]);
            let mut r = ChunkReader::with_start(&input[cut..], start);
            let mut lines = Vec::new();
            while let Some(chunk) = r.next_chunk().unwrap() {
                lines.extend(lines_of(&chunk).map(|(n, l)| (n, l.to_vec())));
            }
            assert_eq!((lines, r.stats()), whole, "head cut at {cut}");
        }
    }

    /// Gives its pieces one read at a time, then fails.
    struct FailsAfter(Vec<&'static [u8]>);

    impl Read for FailsAfter {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("disk gone"));
            }
            let piece = self.0.remove(0);
            buf[..piece.len()].copy_from_slice(piece);
            Ok(piece.len())
        }
    }

    #[test]
    fn lines_read_before_an_error_are_handed_out_before_it() {
        let mut r = ChunkReader::new(FailsAfter(vec![b"one\n", b"two\nthr"]));
        let chunk = r.next_chunk().unwrap().unwrap();
        let lines: Vec<_> = lines_of(&chunk).map(|(n, l)| (n, l.to_vec())).collect();
        assert_eq!(lines, [(1, b"one".to_vec()), (2, b"two".to_vec())]);
        assert!(r.next_chunk().is_err());
    }

    #[test]
    fn a_huge_line_does_not_grow_the_buffer() {
        let input = vec![b'y'; 3 * READ_SIZE + 7];
        let mut r = ChunkReader::with_max_line(&input[..], 1024);
        while r.next_chunk().unwrap().is_some() {
            assert!(r.buf.capacity() <= 2 * (READ_SIZE + 1024));
        }
        assert_eq!(r.stats().truncated_lines, 1);
    }
}
