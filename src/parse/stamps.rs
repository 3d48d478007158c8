//! Hand-written parsers for the timestamp layouts on the hot path.
//!
//! `chrono`'s format parsing is the slow part of log parsing, and these layouts
//! are fixed-width, so they are read digit by digit.

use chrono::{FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};

use crate::ingest::launcher::digits;
use crate::model::RawTime;
use crate::model::time::time_of_day;

/// Exactly `n` ASCII digits at the start of `s`.
pub fn fixed_digits(s: &[u8], n: usize) -> Option<u32> {
    let d = s.get(..n)?;
    d.iter()
        .all(u8::is_ascii_digit)
        .then(|| d.iter().fold(0, |a, b| a * 10 + u32::from(b - b'0')))
}

/// `YYYY-MM-DD`, or `YYYY/MM/DD` as Go's log package and some collectors
/// stamp lines (`2024/04/30 23:29:35 host:pid:tid …`).
pub fn date(s: &[u8]) -> Option<NaiveDate> {
    let sep = *s.get(4)?;
    if !matches!(sep, b'-' | b'/') || s.get(7) != Some(&sep) {
        return None;
    }
    NaiveDate::from_ymd_opt(
        fixed_digits(s, 4)? as i32,
        fixed_digits(&s[5..], 2)?,
        fixed_digits(&s[8..], 2)?,
    )
}

/// `HH:MM:SS` with an optional `.frac` or `,frac`: (time, bytes used).
pub fn time(s: &[u8]) -> Option<(NaiveTime, usize)> {
    if s.get(2) != Some(&b':') || s.get(5) != Some(&b':') {
        return None;
    }
    let (h, m, sec) = (
        fixed_digits(s, 2)?,
        fixed_digits(&s[3..], 2)?,
        fixed_digits(&s[6..], 2)?,
    );
    let mut len = 8;
    let mut nanos = 0;
    if matches!(s.get(8), Some(b'.' | b','))
        && let Some((frac, n)) = fraction_nanos(&s[9..])
    {
        nanos = frac;
        len = 9 + n;
    }
    Some((time_of_day(h, m, sec, nanos)?, len))
}

/// Up to 9 fractional digits as nanoseconds: (nanos, digits used).
fn fraction_nanos(s: &[u8]) -> Option<(u32, usize)> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let used = n.min(9);
    let mut v = fixed_digits(s, used)?;
    for _ in used..9 {
        v *= 10;
    }
    Some((v, n))
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.frac][zone]`: (stamp, bytes used).
/// Zones: `Z`, `+08:00`, `+0800`, optionally after one space.
pub fn date_time(s: &[u8]) -> Option<(RawTime, usize)> {
    let d = date(s)?;
    if !matches!(s.get(10), Some(b'T' | b' ' | b'_')) {
        return None;
    }
    let (t, tlen) = time(&s[11..])?;
    let mut len = 11 + tlen;
    let local = NaiveDateTime::new(d, t);
    match zone(&s[len..]) {
        Some((offset, zlen)) => {
            len += zlen;
            let zoned = local.and_local_timezone(offset).single()?;
            Some((RawTime::Zoned(zoned), len))
        }
        None => Some((RawTime::Local(local), len)),
    }
}

fn zone(s: &[u8]) -> Option<(FixedOffset, usize)> {
    let (skip, rest) = match s.first() {
        Some(b' ') => (1, &s[1..]),
        _ => (0, s),
    };
    match rest.first()? {
        b'Z' if skip == 0 => Some((FixedOffset::east_opt(0)?, 1)),
        sign @ (b'+' | b'-') => {
            let h = fixed_digits(&rest[1..], 2)?;
            let (m, used) = match rest.get(3) {
                Some(b':') => (fixed_digits(&rest[4..], 2)?, 6),
                _ => (fixed_digits(&rest[3..], 2)?, 5),
            };
            let secs = (h * 3600 + m * 60) as i32;
            let offset = if *sign == b'+' { secs } else { -secs };
            Some((FixedOffset::east_opt(offset)?, skip + used))
        }
        _ => None,
    }
}

/// c10 / glog month-day: `MDD` or `MMDD` digits before a space (`126` = Jan 26,
/// `1129` = Nov 29; c10 does not zero-pad the month). Returns (month, day, used).
pub fn month_day(s: &[u8]) -> Option<(u32, u32, usize)> {
    let (v, n) = digits(s)?;
    if !(3..=4).contains(&n) {
        return None;
    }
    let (month, day) = ((v / 100) as u32, (v % 100) as u32);
    ((1..=12).contains(&month) && (1..=31).contains(&day)).then_some((month, day, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_with_zulu_and_offsets() {
        let (t, n) = date_time(b"2019-06-02T16:13:44.884Z: x").unwrap();
        assert_eq!(n, 24);
        assert!(matches!(t, RawTime::Zoned(z) if z.offset().local_minus_utc() == 0));
        let (t, n) = date_time(b"2025-11-09 15:39:31.043 +08:00 [").unwrap();
        assert_eq!(n, 30);
        assert!(matches!(t, RawTime::Zoned(z) if z.offset().local_minus_utc() == 8 * 3600));
        let (t, _) = date_time(b"2025-01-17T17:10:43+0000 host").unwrap();
        assert!(matches!(t, RawTime::Zoned(_)));
    }

    #[test]
    fn local_stamps_keep_nanoseconds() {
        let (t, n) = date_time(b"2025-05-02 14:03:11.123456789] ").unwrap();
        assert_eq!(n, 29);
        assert_eq!(
            crate::model::time::format_local(&t.to_local(None).unwrap()),
            "2025-05-02 14:03:11.123456"
        );
    }

    #[test]
    fn slashed_dates_are_dates_but_not_mixed_with_dashes() {
        let (t, n) = date_time(b"2024/04/30 23:29:35 job-1:305:305 [0]").unwrap();
        assert_eq!(n, 19);
        assert!(matches!(t, RawTime::Local(_)));
        assert!(date(b"2024/04-30").is_none());
    }

    #[test]
    fn month_day_is_not_zero_padded_in_c10() {
        assert_eq!(month_day(b"126 01:17"), Some((1, 26, 3)));
        assert_eq!(month_day(b"1129 12:34"), Some((11, 29, 4)));
        assert_eq!(month_day(b"1399 x"), None);
    }
}
