//! Timestamps as the sources print them, before the timeline puts them on one clock.
//!
//! Each source has its own clock: NCCL 2.26+ and c10 print local wall time (c10
//! without a year), journald may print an offset, raw dmesg counts seconds since
//! boot and the flight recorder counts epoch nanoseconds. Parsers keep what was
//! printed; only the timeline stage decides how to combine them.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum RawTime {
    #[default]
    None,
    /// Local wall-clock time with a full date, zone unknown.
    Local(NaiveDateTime),
    /// Wall-clock time with an explicit UTC offset.
    Zoned(DateTime<FixedOffset>),
    /// Local wall-clock time without a year (c10 `E1129 12:34:56.789`).
    NoYear {
        month: u32,
        day: u32,
        time: NaiveTime,
    },
    /// Microseconds since boot (raw `dmesg`).
    Uptime { micros: i64 },
}

impl RawTime {
    pub fn is_some(&self) -> bool {
        !matches!(self, RawTime::None)
    }

    /// Wall time as naive local time, with `year` supplied for year-less stamps.
    /// Zoned stamps are shifted to their own local time (the host's clock face),
    /// so they compare with the other local stamps of the same host.
    pub fn to_local(&self, year: Option<i32>) -> Option<NaiveDateTime> {
        match *self {
            RawTime::Local(t) => Some(t),
            RawTime::Zoned(t) => Some(t.naive_local()),
            RawTime::NoYear { month, day, time } => {
                NaiveDate::from_ymd_opt(year?, month, day).map(|d| d.and_time(time))
            }
            RawTime::None | RawTime::Uptime { .. } => None,
        }
    }

    /// The year this stamp states, if it states one.
    pub fn year(&self) -> Option<i32> {
        match self {
            RawTime::Local(t) => Some(t.year()),
            RawTime::Zoned(t) => Some(t.year()),
            _ => None,
        }
    }
}

/// Builds a time of day from parts, tolerating a leap second `60`.
pub fn time_of_day(h: u32, m: u32, s: u32, nanos: u32) -> Option<NaiveTime> {
    NaiveTime::from_hms_nano_opt(h, m, s.min(59), nanos)
}

/// Renders a local time the way the report shows it (microsecond precision).
pub fn format_local(t: &NaiveDateTime) -> String {
    if t.nanosecond() == 0 {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn year_less_stamp_takes_the_supplied_year() {
        let t = RawTime::NoYear {
            month: 1,
            day: 26,
            time: time_of_day(1, 17, 58, 0).unwrap(),
        };
        assert_eq!(t.to_local(None), None);
        assert_eq!(
            format_local(&t.to_local(Some(2025)).unwrap()),
            "2025-01-26 01:17:58"
        );
    }
}
