//! Boot-clock files: what places a raw dmesg's seconds-since-boot on the wall
//! clock when no line of the log prints both clocks.
//!
//! These files hold a bare value with nothing to sniff, so they are known by
//! their name (`boot_time`, `boot_time.txt`, `btime`, `uptime`, `uptime.txt`):
//!
//! - `boot_time`: the moment the host booted, as epoch seconds (`1737133843`,
//!   `1737133843.25`), as the `/proc/stat` line `btime 1737133843`, or as an
//!   ISO 8601 time (`2025-01-17T17:10:43+00:00`; `2025-01-17 17:10:43` as
//!   `uptime -s` prints it).
//! - `uptime`: the `/proc/uptime` line (`12345.67 54321.00`) and, on another
//!   line, when it was read (epoch seconds or ISO 8601), e.g. the output of
//!   `date -Is; cat /proc/uptime`.
//!
//! Epoch seconds are UTC; an ISO time without an offset is the host's local
//! time. Each file yields one `kernel_boot` event whose time is the wall time
//! and whose `uptime_us` field is the uptime at that moment (0 for a boot
//! time); the timeline applies it to the last boot of the kernel logs in the
//! same folder.

use chrono::{DateTime, FixedOffset};

use super::scan::FileParse;
use super::stamps;
use crate::ingest::InputFile;
use crate::model::{Event, EventKind, Fields, Level, Origin, RawTime, Value, Who};

/// The pattern id clock-file events carry.
pub const CLOCK_FILE_PATTERN: &str = "kernel.clock_file";

/// Which kind of clock file a name is.
fn kind_of(display: &str) -> Option<&'static str> {
    let name = display.rsplit('/').next().unwrap_or(display);
    match name.strip_suffix(".txt").unwrap_or(name) {
        "boot_time" | "btime" => Some("boot_time"),
        "uptime" => Some("uptime"),
        _ => None,
    }
}

/// Reads `data` (the file's head) when `file` is a clock file by name;
/// `None` for every other file.
pub fn parse(file: &InputFile, data: &[u8]) -> Option<FileParse> {
    let kind = kind_of(&file.display)?;
    let text = String::from_utf8_lossy(data);
    let mut out = FileParse::default();
    out.stats.bytes = data.len() as u64;
    out.stats.lines = text.lines().count() as u64;
    let found = match kind {
        "boot_time" => boot_time(&text),
        _ => uptime(&text),
    };
    match found {
        Some((time, uptime_us, line)) => {
            out.matched_lines = 1;
            out.events
                .push(event(file, kind, time, uptime_us, line, &text));
        }
        None => out.skipped = Some(format!("{kind} file: no time found (see README)")),
    }
    Some(out)
}

fn event(
    file: &InputFile,
    kind: &str,
    time: RawTime,
    uptime_us: i64,
    line: usize,
    text: &str,
) -> Event {
    let mut fields = Fields::default();
    fields.insert("clock_file", Value::Text(kind.into()));
    fields.insert("uptime_us", Value::Int(uptime_us));
    let line_text = text.lines().nth(line).unwrap_or("").trim_end();
    Event {
        kind: EventKind::KernelBoot,
        pattern: CLOCK_FILE_PATTERN,
        origin: Origin {
            file: file.id,
            line: line as u64 + 1,
        },
        who: Who {
            host: file.hints.host.as_deref().map(Into::into),
            ..Who::default()
        },
        level: Level::Info,
        time,
        fields,
        text: line_text.chars().take(200).collect::<String>().into(),
    }
}

/// The boot moment: (time, uptime 0, line index).
fn boot_time(text: &str) -> Option<(RawTime, i64, usize)> {
    text.lines().enumerate().find_map(|(i, l)| {
        let l = l.trim();
        let value = l.strip_prefix("btime ").unwrap_or(l);
        wall_time(value).map(|t| (t, 0, i))
    })
}

/// `/proc/uptime` plus when it was read: (read time, uptime, line index of the time).
fn uptime(text: &str) -> Option<(RawTime, i64, usize)> {
    let mut up = None;
    let mut when = None;
    for (i, l) in text.lines().enumerate() {
        let words: Vec<&str> = l.split_whitespace().collect();
        match words.as_slice() {
            [u, idle] if seconds(idle).is_some() => up = up.or(seconds(u)),
            _ => {
                if when.is_none() {
                    when = wall_time(l.trim()).map(|t| (t, i));
                }
            }
        }
    }
    let (t, i) = when?;
    Some((t, up?, i))
}

/// Epoch seconds (UTC) or an ISO 8601 time.
fn wall_time(s: &str) -> Option<RawTime> {
    if let Some(micros) = seconds(s.trim_start_matches('@')) {
        // Epochs before 1990 or after 2200 are not boot times (likely uptimes).
        if !(631_152_000_000_000..7_258_118_400_000_000).contains(&micros) {
            return None;
        }
        let utc = DateTime::from_timestamp_micros(micros)?;
        return Some(RawTime::Zoned(
            utc.with_timezone(&FixedOffset::east_opt(0)?),
        ));
    }
    let (t, n) = stamps::date_time(s.as_bytes())?;
    (s[n..].trim().is_empty()).then_some(t)
}

/// `123.45` or `123` as microseconds.
fn seconds(s: &str) -> Option<i64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty()
        || whole.len() > 12
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut micros: i64 = whole.parse::<i64>().ok()? * 1_000_000;
    let digits: String = frac.chars().chain("000000".chars()).take(6).collect();
    micros += digits.parse::<i64>().ok()?;
    Some(micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FileId;

    fn file(display: &str) -> InputFile {
        InputFile {
            id: FileId(3),
            display: display.into(),
            path: display.into(),
            size: 0,
            hints: crate::ingest::path_hints::hints_from_path(display),
        }
    }

    #[test]
    fn only_clock_file_names_are_read() {
        assert!(parse(&file("node1/dmesg.txt"), b"1737133843\n").is_none());
        assert!(parse(&file("node1/boot_time"), b"1737133843\n").is_some());
    }

    #[test]
    fn boot_time_as_epoch_btime_or_iso() {
        for content in [
            &b"1737133843\n"[..],
            b"btime 1737133843\n",
            b"2025-01-17T17:10:43+00:00\n",
        ] {
            let p = parse(&file("node005/boot_time"), content).unwrap();
            let ev = &p.events[0];
            let RawTime::Zoned(t) = ev.time else {
                panic!("{:?}", ev.time)
            };
            assert_eq!(t.timestamp(), 1_737_133_843);
            assert_eq!(ev.int("uptime_us"), Some(0));
            assert_eq!(ev.who.host.as_deref(), Some("node005"));
        }
        let p = parse(&file("n/boot_time.txt"), b"2025-01-17 17:10:43\n").unwrap();
        assert!(matches!(p.events[0].time, RawTime::Local(_)));
    }

    #[test]
    fn uptime_with_its_collection_time() {
        let p = parse(
            &file("node005/uptime"),
            b"2025-01-17T18:10:43+00:00\n3600.50 7000.00\n",
        )
        .unwrap();
        let ev = &p.events[0];
        assert_eq!(ev.int("uptime_us"), Some(3_600_500_000));
        assert_eq!(ev.origin.line, 1);
        let p = parse(&file("node005/uptime"), b"3600.50 7000.00\n").unwrap();
        assert!(p.events.is_empty() && p.skipped.is_some());
    }

    #[test]
    fn garbage_is_skipped_not_fatal() {
        let p = parse(&file("boot_time"), b"\xff\xfe nonsense\n").unwrap();
        assert!(p.skipped.is_some());
        assert!(seconds("12.3.4").is_none());
        assert!(wall_time("12345").is_none());
    }
}
