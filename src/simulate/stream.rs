//! A process's output stream as timed lines, and the k-way merge that
//! interleaves several streams into one file (a tee'd console, a Slurm
//! output) the way concurrent writers interleave.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use super::clock::Us;

/// Lines in one byte buffer, each with the (true) time it was written.
/// Lines after `cut` (the process was killed) are dropped as they come.
#[derive(Debug, Default)]
pub struct Stream {
    buf: Vec<u8>,
    ends: Vec<(Us, u32)>,
    cut: Option<Us>,
}

impl Stream {
    pub fn new(cut: Option<Us>) -> Stream {
        Stream {
            buf: Vec::with_capacity(16 << 10),
            ends: Vec::new(),
            cut,
        }
    }

    /// Appends one line written by `write` (without its newline).
    pub fn line(&mut self, t: Us, write: impl FnOnce(&mut Vec<u8>)) {
        if self.cut.is_some_and(|c| t > c) {
            return;
        }
        write(&mut self.buf);
        self.buf.push(b'\n');
        self.ends.push((t, self.buf.len() as u32));
    }

    pub fn text(&mut self, t: Us, text: &str) {
        self.line(t, |b| b.extend_from_slice(text.as_bytes()));
    }

    /// Several lines (a multi-line message) at one time.
    pub fn lines(&mut self, t: Us, text: &str) {
        for l in text.lines() {
            self.text(t, l);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Line `i` with its newline, and its time.
    pub fn get(&self, i: usize) -> (Us, &[u8]) {
        let start = if i == 0 {
            0
        } else {
            self.ends[i - 1].1 as usize
        };
        let (t, end) = self.ends[i];
        (t, &self.buf[start..end as usize])
    }

    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.buf)
    }
}

/// Writes the streams' lines in time order, each behind its stream's
/// prefix. Ties keep stream order; a stream's own order is always kept.
pub fn merge(streams: &[(&Stream, &[u8])], w: &mut impl Write) -> io::Result<()> {
    let mut heap = BinaryHeap::new();
    for (i, (s, _)) in streams.iter().enumerate() {
        if !s.is_empty() {
            heap.push(Reverse((s.get(0).0, i, 0usize)));
        }
    }
    while let Some(Reverse((_, i, j))) = heap.pop() {
        let (s, prefix) = streams[i];
        w.write_all(prefix)?;
        w.write_all(s.get(j).1)?;
        if j + 1 < s.len() {
            heap.push(Reverse((s.get(j + 1).0, i, j + 1)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_interleaves_by_time_and_keeps_prefixes() {
        let mut a = Stream::new(None);
        a.text(1, "a1");
        a.text(5, "a2");
        let mut b = Stream::new(Some(4));
        b.text(2, "b1");
        b.text(6, "b2 is after the cut");
        let mut out = Vec::new();
        merge(&[(&a, b"0: "), (&b, b"1: ")], &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "0: a1\n1: b1\n0: a2\n");
    }
}
