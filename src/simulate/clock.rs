//! Simulated time and the stamp formats the writers print.
//!
//! Times are microseconds since the Unix epoch on the *true* clock; a host
//! prints its own clock, which is the true time plus its skew. Every job is
//! in one time zone and prints local time, so no zone arithmetic is needed
//! (the formats that print an offset print `+00:00`).

/// Microseconds since the epoch.
pub type Us = i64;

pub const MS: Us = 1_000;
pub const SEC: Us = 1_000_000;
pub const MIN: Us = 60 * SEC;
pub const HOUR: Us = 60 * MIN;
pub const DAY: Us = 24 * HOUR;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

/// A broken-down time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    pub micros: u32,
    weekday: usize,
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since the epoch of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn civil(t: Us) -> Civil {
    let days = t.div_euclid(DAY);
    let rest = t.rem_euclid(DAY);
    let (year, month, day) = civil_from_days(days);
    let secs = rest / SEC;
    Civil {
        year,
        month,
        day,
        hour: (secs / 3600) as u32,
        min: (secs / 60 % 60) as u32,
        sec: (secs % 60) as u32,
        micros: (rest % SEC) as u32,
        weekday: days.rem_euclid(7) as usize,
    }
}

impl Civil {
    fn hms(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hour, self.min, self.sec)
    }

    fn mon(&self) -> &'static str {
        MONTHS[(self.month as usize).saturating_sub(1) % 12]
    }

    /// `2024-11-29 12:34:56`
    pub fn date_time(&self) -> String {
        format!(
            "{}-{:02}-{:02} {}",
            self.year,
            self.month,
            self.day,
            self.hms()
        )
    }

    /// `2024-11-29T12:34:56`
    pub fn iso(&self) -> String {
        format!(
            "{}-{:02}-{:02}T{}",
            self.year,
            self.month,
            self.day,
            self.hms()
        )
    }

    /// c10 glog-less stamp body: `1129 12:34:56.789012345` with the month not
    /// zero-padded (c10 prints month*100+day as a number).
    pub fn c10(&self, nanos_extra: u32) -> String {
        format!(
            "{}{:02} {}.{:06}{:03}",
            self.month,
            self.day,
            self.hms(),
            self.micros,
            nanos_extra % 1000
        )
    }

    /// torch._logging: `1129 12:34:56.789000` (MMDD padded, ms × 1000).
    pub fn torch_logging(&self) -> String {
        format!(
            "{:02}{:02} {}.{:03}000",
            self.month,
            self.day,
            self.hms(),
            self.micros / 1000
        )
    }

    /// Python logging's asctime: `2024-02-27 21:35:39,600`
    pub fn asctime(&self) -> String {
        format!("{},{:03}", self.date_time(), self.micros / 1000)
    }

    /// ChildFailedError `time`: `2024-02-27_21:35:35`
    pub fn underscore(&self) -> String {
        format!(
            "{}-{:02}-{:02}_{}",
            self.year,
            self.month,
            self.day,
            self.hms()
        )
    }

    /// `dmesg -T`: `Sun Jul 28 09:15:27 2024` (day space-padded).
    pub fn ctime(&self) -> String {
        format!(
            "{} {} {:>2} {} {}",
            WEEKDAYS[self.weekday],
            self.mon(),
            self.day,
            self.hms(),
            self.year
        )
    }

    /// `date` in the UTC zone: `Tue Jun 18 13:41:07 UTC 2024`
    pub fn date_cmd(&self) -> String {
        format!(
            "{} {} {:>2} {} UTC {}",
            WEEKDAYS[self.weekday],
            self.mon(),
            self.day,
            self.hms(),
            self.year
        )
    }

    /// journald short: `Nov 09 12:34:56` (journald zero-pads the day).
    pub fn journal(&self) -> String {
        format!("{} {:02} {}", self.mon(), self.day, self.hms())
    }

    /// `dmesg --time-format iso`: `2024-11-15T05:39:15,491363+00:00`
    pub fn dmesg_iso(&self) -> String {
        format!("{},{:06}+00:00", self.iso(), self.micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // 2024-02-27 21:35:35 UTC = 1709069735.
        let c = civil(1_709_069_735 * SEC + 600 * MS);
        assert_eq!(c.date_time(), "2024-02-27 21:35:35");
        assert_eq!(c.asctime(), "2024-02-27 21:35:35,600");
        assert_eq!(c.ctime(), "Tue Feb 27 21:35:35 2024");
        assert_eq!(c.c10(7), "227 21:35:35.600000007");
        assert_eq!(c.torch_logging(), "0227 21:35:35.600000");
        assert_eq!(days_from_civil(2024, 2, 27), 1_709_069_735 / 86_400);
    }
}
