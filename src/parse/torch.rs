//! PyTorch's log line prefixes (c10 C++ logging, glog, `torch._logging`, Python
//! `logging`). The messages are matched by `grammars/torch.toml` and
//! `grammars/launcher.toml`.
//!
//! ```text
//! [E ProcessGroupNCCL.cpp:475] …                               torch ≤ 2.3 (no time)
//! [E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:607] …        torch ≥ 2.4 (month not zero-padded)
//! E1129 12:34:56.789012 139701 ProcessGroupNCCL.cpp:607] …     glog builds
//! W0409 07:28:49.530000 1359 torch/distributed/…/api.py:897] … torch._logging ≥ 2.3
//! WARNING:torch.distributed.elastic.multiprocessing.api:…      Python logging ≤ 2.0
//! torch.distributed.elastic.multiprocessing.api: [WARNING] …   after a `[date time,ms] ` stamp (2.1–2.2)
//! [INFO] [launch.py:315:sigkill_handler] …                     DeepSpeed, after a stamp
//! ```

use crate::ingest::launcher::digits;
use crate::model::{Level, RawTime};

use super::stamps::{month_day, time};

/// A recognised prefix: level, time (if printed) and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TorchPrefix {
    pub level: Level,
    pub time: RawTime,
    pub len: usize,
}

/// `[E ProcessGroupNCCL.cpp:475] ` or `[E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:607] `.
pub fn c10_prefix(s: &[u8]) -> Option<TorchPrefix> {
    if s.first() != Some(&b'[') {
        return None;
    }
    let level = severity_letter(*s.get(1)?)?;
    let mut i = 2;
    let mut stamp = RawTime::None;
    if s.get(i).is_some_and(u8::is_ascii_digit) {
        let (t, used) = month_day_time(&s[i..])?;
        stamp = t;
        i += used;
    }
    if s.get(i) != Some(&b' ') {
        return None;
    }
    let end = source_location_end(&s[i + 1..])?;
    Some(TorchPrefix {
        level,
        time: stamp,
        len: i + 1 + end,
    })
}

/// `E1129 12:34:56.789012 139701 ProcessGroupNCCL.cpp:607] ` (glog, torch._logging).
pub fn glog_prefix(s: &[u8]) -> Option<TorchPrefix> {
    let level = severity_letter(*s.first()?)?;
    if !s.get(1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let (stamp, mut i) = month_day_time(&s[1..])?;
    i += 1;
    if s.get(i) != Some(&b' ') {
        return None;
    }
    let (_, n) = digits(&s[i + 1..])?;
    i += 1 + n;
    if s.get(i) != Some(&b' ') {
        return None;
    }
    let end = source_location_end(&s[i + 1..])?;
    Some(TorchPrefix {
        level,
        time: stamp,
        len: i + 1 + end,
    })
}

/// `LEVEL:logger.name:` (Python `logging.basicConfig` default format).
pub fn python_logging_prefix(s: &[u8]) -> Option<TorchPrefix> {
    let colon = memchr::memchr(b':', &s[..s.len().min(12)])?;
    let level = python_level(&s[..colon])?;
    let rest = &s[colon + 1..];
    let name_len = rest
        .iter()
        .take(128)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    (name_len > 0 && rest.get(name_len) == Some(&b':')).then_some(TorchPrefix {
        level,
        time: RawTime::None,
        len: colon + 1 + name_len + 1,
    })
}

/// What follows a `[date time,ms] ` stamp in torchrun 2.1–2.2 and DeepSpeed:
/// `logger.name: [LEVEL] ` or `[LEVEL] [file.py:315:func] `.
pub fn logger_tail_prefix(s: &[u8]) -> Option<TorchPrefix> {
    let (level, len) = if s.first() == Some(&b'[') {
        let (level, n) = bracketed_level(s)?;
        let close = memchr::memchr(b']', &s[n..s.len().min(n + 160)])?;
        let loc = &s[n..n + close];
        if !(loc.first() == Some(&b'[') && loc.contains(&b':')) {
            return None;
        }
        (
            level,
            n + close + 1 + usize::from(s.get(n + close + 1) == Some(&b' ')),
        )
    } else {
        let name_len = s
            .iter()
            .take(128)
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
            .count();
        if name_len == 0 || !s[name_len..].starts_with(b": [") {
            return None;
        }
        let (level, n) = bracketed_level(&s[name_len + 2..])?;
        (level, name_len + 2 + n)
    };
    Some(TorchPrefix {
        level,
        time: RawTime::None,
        len,
    })
}

/// `[WARNING] ` → (level, bytes).
fn bracketed_level(s: &[u8]) -> Option<(Level, usize)> {
    let close = memchr::memchr(b']', &s[..s.len().min(12)])?;
    let level = python_level(&s[1..close])?;
    Some((
        level,
        close + 1 + usize::from(s.get(close + 1) == Some(&b' ')),
    ))
}

fn python_level(word: &[u8]) -> Option<Level> {
    match word {
        b"DEBUG" => Some(Level::Trace),
        b"INFO" => Some(Level::Info),
        b"WARNING" | b"WARN" => Some(Level::Warn),
        b"ERROR" => Some(Level::Error),
        b"CRITICAL" | b"FATAL" => Some(Level::Fatal),
        _ => None,
    }
}

fn severity_letter(b: u8) -> Option<Level> {
    match b {
        b'F' => Some(Level::Fatal),
        b'E' => Some(Level::Error),
        b'W' => Some(Level::Warn),
        b'I' => Some(Level::Info),
        b'V' => Some(Level::Trace),
        _ => None,
    }
}

/// `MDD HH:MM:SS.frac` → (year-less stamp, bytes).
fn month_day_time(s: &[u8]) -> Option<(RawTime, usize)> {
    let (month, day, n) = month_day(s)?;
    if s.get(n) != Some(&b' ') {
        return None;
    }
    let (t, tlen) = time(&s[n + 1..])?;
    Some((
        RawTime::NoYear {
            month,
            day,
            time: t,
        },
        n + 1 + tlen,
    ))
}

/// `file.cpp:607] ` → bytes through the space after `]`.
fn source_location_end(s: &[u8]) -> Option<usize> {
    let close = memchr::memchr(b']', &s[..s.len().min(200)])?;
    let loc = &s[..close];
    let colon = memchr::memrchr(b':', loc)?;
    if colon == 0 || !loc[colon + 1..].iter().all(u8::is_ascii_digit) || loc.contains(&b' ') {
        return None;
    }
    Some(close + 1 + usize::from(s.get(close + 1) == Some(&b' ')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c10_without_time_torch_2_1() {
        let line = b"[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught";
        let p = c10_prefix(line).unwrap();
        assert_eq!((p.level, p.time), (Level::Error, RawTime::None));
        assert!(line[p.len..].starts_with(b"[Rank 3]"));
    }

    #[test]
    fn c10_with_year_less_time_torch_2_5() {
        let line = b"[E126 01:17:58.183471014 ProcessGroupNCCL.cpp:616] [Rank 5] x";
        let p = c10_prefix(line).unwrap();
        assert!(matches!(
            p.time,
            RawTime::NoYear {
                month: 1,
                day: 26,
                ..
            }
        ));
        assert_eq!(&line[p.len..], b"[Rank 5] x");
    }

    #[test]
    fn glog_and_torch_logging() {
        let line = b"W0409 07:28:49.530000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Sending";
        let p = glog_prefix(line).unwrap();
        assert_eq!(p.level, Level::Warn);
        assert_eq!(&line[p.len..], b"Sending");
    }

    #[test]
    fn python_logging_torch_2_0() {
        let line = b"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9)";
        let p = python_logging_prefix(line).unwrap();
        assert_eq!(p.level, Level::Error);
        assert!(line[p.len..].starts_with(b"failed"));
    }

    #[test]
    fn logger_tails_of_torchrun_2_1_and_deepspeed() {
        let line = b"torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 165";
        let p = logger_tail_prefix(line).unwrap();
        assert!(line[p.len..].starts_with(b"Sending"));
        let ds = b"[ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3'] exits";
        let p = logger_tail_prefix(ds).unwrap();
        assert_eq!(p.level, Level::Error);
        assert!(ds[p.len..].starts_with(b"['/usr"));
    }
}
