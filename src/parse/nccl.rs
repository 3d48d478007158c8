//! NCCL debug output: the line prefix.
//!
//! ```text
//! node17:48211:48593 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.3.0.17<0>
//! [2025-05-02 14:03:11] node17:48211:48593 [3] transport/net_ib.cc:2353 NCCL WARN NET/IB: Got completion …
//! node17:48211:48593 [3] 1234.567890 ncclProxyProgress:123 NCCL TRACE …
//! node17:48211:48593 [3] transport/net_ib.cc:139 (ncclIbTest) NCCL WARN …     (2.30.7)
//! ```
//! NCCL 2.0–2.2 (binary releases, before the sources were published) print
//! no `NCCL` word: `node1:18225:18239 [0] INFO NET : Using interface …`,
//! `node1:22671:22795 [1] transport/p2p.cu:431 WARN failed to open …`.
//!
//! `HOST` is `gethostname()` cut at the first dot, `PID:TID` the process and
//! kernel thread ids, `[DEV]` the logging thread's CUDA device (process-local,
//! never a rank). The optional timestamp (2.26+) is read by the framer like any
//! other leading stamp. The messages themselves are matched by
//! `grammars/nccl.toml`.

use std::sync::LazyLock;

use memchr::memmem;

use crate::ingest::launcher::digits;
use crate::model::Level;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclPrefix<'a> {
    pub host: &'a [u8],
    pub pid: u32,
    pub tid: u32,
    pub level: Level,
    /// Bytes up to the message (after `NCCL LEVEL `).
    pub len: usize,
}

/// The level words NCCL prints after `NCCL `.
const LEVELS: &[(&[u8], Level)] = &[
    (b"INFO", Level::Info),
    (b"WARN", Level::Warn),
    (b"TRACE", Level::Trace),
    (b"CALL", Level::Trace),
    (b"ABORT", Level::Error),
];

/// Parses `HOST:PID:TID [DEV] … NCCL LEVEL ` at the start of `s`.
pub fn parse_prefix(s: &[u8]) -> Option<NcclPrefix<'_>> {
    let host_len = s
        .iter()
        .take(256)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        .count();
    // An empty host field: a log collector that moved the host in front
    // (`worker-9 >> :168:1228 [2] NCCL INFO …`); the rest must still fit.
    if s.get(host_len) != Some(&b':') {
        return None;
    }
    let mut i = host_len + 1;
    let (pid, n) = digits(&s[i..])?;
    i += n;
    if s.get(i) != Some(&b':') {
        return None;
    }
    let (tid, n) = digits(&s[i + 1..])?;
    i += 1 + n;
    let (level, len) = level_after(&s[i..]).or_else(|| untagged_level(&s[i..]))?;
    Some(NcclPrefix {
        host: &s[..host_len],
        pid: pid as u32,
        tid: tid as u32,
        level,
        len: i + len,
    })
}

/// Built once: building a searcher per line cost more than the search.
static NCCL_WORD: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("NCCL "));

/// Finds ` NCCL LEVEL ` within the short stretch after `PID:TID` (device,
/// source location, TRACE milliseconds): (level, bytes to the message).
fn level_after(s: &[u8]) -> Option<(Level, usize)> {
    let window = &s[..s.len().min(160)];
    let mut from = 0;
    while let Some(at) = NCCL_WORD.find(&window[from..]) {
        let word_at = from + at + 5;
        for (word, level) in LEVELS {
            if window[word_at..].starts_with(word) {
                let end = word_at + word.len();
                let body = end + usize::from(s.get(end) == Some(&b' '));
                return Some((*level, body));
            }
        }
        from = word_at;
    }
    None
}

/// NCCL's level where a paste kept no `HOST:PID:TID [DEV]` before it: a
/// line starting `NCCL INFO …`, or `init.cc:417 NCCL WARN …` (the source
/// location alone, 2.30.7's `(func)` after it). (level, bytes to the message).
pub fn bare_level(s: &[u8]) -> Option<(Level, usize)> {
    let mut at = 0;
    if !s.starts_with(b"NCCL ") {
        let word = s.iter().take(160).take_while(|b| **b != b' ').count();
        if !is_location(&s[..word]) {
            return None;
        }
        at = word + 1;
        if let Some(rest) = s.get(at..).and_then(|r| r.strip_prefix(b"(")) {
            let func = rest.iter().take(96).take_while(|b| **b != b')').count();
            at += func + 3;
        }
    }
    let rest = s.get(at..)?.strip_prefix(b"NCCL ")?;
    let (word, level) = LEVELS.iter().find(|(w, _)| rest.starts_with(w))?;
    let end = at + 5 + word.len();
    match s.get(end) {
        None => Some((*level, end)),
        Some(b' ') => Some((*level, end + 1)),
        Some(_) => None,
    }
}

/// `file.cc:123`: a source file and a line number.
fn is_location(word: &[u8]) -> bool {
    let Some(colon) = word.iter().rposition(|b| *b == b':') else {
        return false;
    };
    let (file, line) = (&word[..colon], &word[colon + 1..]);
    !line.is_empty()
        && line.iter().all(u8::is_ascii_digit)
        && [&b".cc"[..], b".cu", b".h", b".cpp", b".c"]
            .iter()
            .any(|ext| file.ends_with(ext))
}

/// NCCL 2.0–2.2's level without the `NCCL` word: ` [DEV] INFO ` or
/// ` [DEV] file:line WARN ` right after `PID:TID`, nothing else between.
fn untagged_level(s: &[u8]) -> Option<(Level, usize)> {
    let dev = s.strip_prefix(b" [")?;
    let (_, n) = digits(dev)?;
    let rest = dev[n..].strip_prefix(b"] ")?;
    let at = s.len() - rest.len();
    if let Some(body) = rest.strip_prefix(b"INFO ") {
        return Some((Level::Info, s.len() - body.len()));
    }
    // The source location: one word holding `:` and a line number.
    let word = rest.iter().take(96).take_while(|b| **b != b' ').count();
    let location = &rest[..word];
    let has_line = location
        .rsplit(|b| *b == b':')
        .next()
        .is_some_and(|l| !l.is_empty() && l.iter().all(u8::is_ascii_digit));
    if !has_line || !location.contains(&b':') {
        return None;
    }
    let after = rest.get(word + 1..)?;
    let (level, word_len) = [(&b"WARN "[..], Level::Warn), (&b"INFO "[..], Level::Info)]
        .into_iter()
        .find(|(w, _)| after.starts_with(w))
        .map(|(w, l)| (l, w.len()))?;
    Some((level, at + word + 1 + word_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untagged_lines_nccl_2_2() {
        let info = b"node1:18225:18239 [0] INFO NET : Using interface eth1:100.102.32.176<0>";
        let p = parse_prefix(info).unwrap();
        assert_eq!(
            (p.host, p.pid, p.level),
            (&b"node1"[..], 18225, Level::Info)
        );
        assert_eq!(
            &info[p.len..],
            b"NET : Using interface eth1:100.102.32.176<0>"
        );
        let warn = b"node1:22671:22795 [1] transport/p2p.cu:431 WARN failed to open CUDA IPC handle : 30 unknown error";
        let p = parse_prefix(warn).unwrap();
        assert_eq!((p.tid, p.level), (22795, Level::Warn));
        assert_eq!(
            &warn[p.len..],
            b"failed to open CUDA IPC handle : 30 unknown error"
        );
        // Not NCCL's: a level word after other text, or no device.
        assert!(parse_prefix(b"node1:1:2 [0] some text INFO x").is_none());
        assert!(parse_prefix(b"node1:1:2 INFO x").is_none());
    }

    #[test]
    fn info_line_2_21() {
        let line = b"node17:48211:48593 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB";
        let p = parse_prefix(line).unwrap();
        assert_eq!(
            (p.host, p.pid, p.tid, p.level),
            (&b"node17"[..], 48211, 48593, Level::Info)
        );
        assert_eq!(&line[p.len..], b"NET/IB : Using [0]mlx5_0:1/IB");
    }

    #[test]
    fn warn_line_with_source_location_2_18() {
        let line = b"gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed";
        let p = parse_prefix(line).unwrap();
        assert_eq!(p.level, Level::Warn);
        assert!(line[p.len..].starts_with(b"socketProgress"));
    }

    #[test]
    fn warn_line_with_function_2_30_7() {
        let line = b"h:1:2 [0] transport/net_ib.cc:139 (ncclIbTest) NCCL WARN boom";
        assert_eq!(&line[parse_prefix(line).unwrap().len..], b"boom");
    }

    #[test]
    fn trace_line_has_milliseconds_before_the_function() {
        let line = b"h:1:2 [0] 1234.567890 ncclProxyProgress:123 NCCL TRACE x";
        assert_eq!(parse_prefix(line).unwrap().level, Level::Trace);
    }

    #[test]
    fn a_paste_without_the_writer_prefix_keeps_its_level() {
        let bare = b"NCCL INFO NCCL version 2.23.4+cuda12.6";
        let (level, len) = bare_level(bare).unwrap();
        assert_eq!(
            (level, &bare[len..]),
            (Level::Info, &b"NCCL version 2.23.4+cuda12.6"[..])
        );
        let located = b"init.cc:417 NCCL WARN Cuda failure 'operation not supported'";
        let (level, len) = bare_level(located).unwrap();
        assert_eq!(level, Level::Warn);
        assert!(located[len..].starts_with(b"Cuda failure"));
        let func = b"transport/net_ib.cc:139 (ncclIbTest) NCCL WARN boom";
        assert_eq!(&func[bare_level(func).unwrap().1..], b"boom");
        // Prose that names NCCL is not a line of NCCL's.
        assert!(bare_level(b"NCCL INFOrmation").is_none());
        assert!(bare_level(b"export NCCL_DEBUG=INFO").is_none());
        assert!(bare_level(b"see: NCCL WARN lines").is_none());
    }

    #[test]
    fn not_nccl() {
        assert!(parse_prefix(b"WARNING:torch.distributed:hello").is_none());
        assert!(parse_prefix(b"12:34:56 hello").is_none());
    }
}
