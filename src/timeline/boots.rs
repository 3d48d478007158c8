//! Kernel logs: boots, and putting seconds-since-boot on the wall clock.
//!
//! A raw `dmesg` stamp counts from its boot. A file may hold several boots
//! (journals, pstore dumps): a `Linux version` banner, or an uptime that goes
//! backwards, starts the next one; every kernel event gets the index of its
//! boot within its file. An uptime becomes wall time once the boot's moment
//! is known, from (in order of trust):
//!
//! 1. lines of the same boot in the same file that print both clocks (syslog
//!    and journal lines that keep `[ 1234.5678]` after `kernel: `);
//! 2. a clock file in the same folder (`boot_time`, `uptime`; see
//!    `parse::clock_file`), for the last boot of each file there;
//! 3. the same message printed with a wall stamp elsewhere for the same host
//!    (`dmesg -T` beside raw `dmesg`), using only messages that occur once on
//!    each side.
//!
//! Several estimates of one boot's moment are combined by their median.
//! Boots with no estimate keep their uptimes unplaced.

use std::collections::BTreeMap;

use chrono::{NaiveDateTime, TimeDelta};
use rayon::prelude::*;

use crate::model::kernel::is_kernel;
use crate::model::{Event, EventKind, FileId, Job, RawTime};
use crate::parse::clock_file::CLOCK_FILE_PATTERN;
use crate::parse::kernel::message;

/// Uptime may step back a little between CPUs; more than this is a new boot.
const BACKWARDS_SLACK_US: i64 = 1_000_000;

type BootKey = (FileId, u32);

/// Microseconds since boot the event's line printed, if any.
pub fn uptime_us(ev: &Event) -> Option<i64> {
    match ev.time {
        RawTime::Uptime { micros } => Some(micros),
        _ => ev.int("uptime_us"),
    }
}

fn is_clock_file(ev: &Event) -> bool {
    ev.pattern == CLOCK_FILE_PATTERN
}

/// Numbers the boots of every file and places uptime-only events on the wall
/// clock in `times`; returns each event's boot index (kernel events only).
pub fn place(job: &Job, times: &mut [Option<NaiveDateTime>]) -> Vec<Option<u32>> {
    let index = boot_indices(job);
    let mut boots: BTreeMap<BootKey, Vec<NaiveDateTime>> = BTreeMap::new();
    in_file_anchors(job, times, &index, &mut boots);
    clock_file_anchors(job, times, &index, &mut boots);
    paired_anchors(job, times, &index, &mut boots);
    let moments: BTreeMap<BootKey, NaiveDateTime> = boots
        .into_iter()
        .filter_map(|(k, mut v)| {
            v.sort_unstable();
            v.get(v.len() / 2).map(|m| (k, *m))
        })
        .collect();
    for (i, ev) in job.events.iter().enumerate() {
        if times[i].is_some() {
            continue;
        }
        let (RawTime::Uptime { micros }, Some(b)) = (ev.time, index[i]) else {
            continue;
        };
        if let Some(boot) = moments.get(&(ev.origin.file, b)) {
            times[i] = boot.checked_add_signed(TimeDelta::microseconds(micros));
        }
    }
    index
}

/// The events that count boots (kernel lines and lines that print an
/// uptime, clock files aside) as (file, line, event, uptime), by file in
/// line order. Nine events in ten are neither: they are passed over in
/// parallel.
fn boot_events(job: &Job) -> Vec<(FileId, u64, usize, Option<i64>)> {
    let mut found: Vec<_> = job
        .events
        .par_iter()
        .enumerate()
        .filter_map(|(i, ev)| {
            if is_clock_file(ev) {
                return None;
            }
            let up = uptime_us(ev);
            (is_kernel(ev.kind) || up.is_some()).then_some((ev.origin.file, ev.origin.line, i, up))
        })
        .collect();
    found.par_sort_unstable_by_key(|&(file, line, i, _)| (file, line, i));
    found
}

fn boot_indices(job: &Job) -> Vec<Option<u32>> {
    let mut index = vec![None; job.events.len()];
    let mut file = None;
    let (mut boot, mut last, mut seen) = (0u32, None::<i64>, false);
    for (f, _, i, up) in boot_events(job) {
        if file != Some(f) {
            file = Some(f);
            (boot, last, seen) = (0, None, false);
        }
        if job.events[i].kind == EventKind::KernelBoot {
            boot += u32::from(seen);
            last = None;
        }
        if let Some(u) = up {
            if last.is_some_and(|p| u + BACKWARDS_SLACK_US < p) {
                boot += 1;
            }
            last = Some(u);
        }
        index[i] = Some(boot);
        seen = true;
    }
    index
}

/// The boot moment a line with both clocks implies.
fn moment(wall: NaiveDateTime, uptime: i64) -> Option<NaiveDateTime> {
    wall.checked_sub_signed(TimeDelta::microseconds(uptime))
}

fn in_file_anchors(
    job: &Job,
    times: &[Option<NaiveDateTime>],
    index: &[Option<u32>],
    boots: &mut BTreeMap<BootKey, Vec<NaiveDateTime>>,
) {
    for (i, ev) in job.events.iter().enumerate() {
        let (Some(wall), Some(b)) = (times[i], index[i]) else {
            continue;
        };
        if let Some(m) = ev.int("uptime_us").and_then(|u| moment(wall, u)) {
            boots.entry((ev.origin.file, b)).or_default().push(m);
        }
    }
}

/// Per file with uptime-only events: its folder and its last boot.
fn uptime_files(job: &Job, index: &[Option<u32>]) -> BTreeMap<FileId, u32> {
    let mut out: BTreeMap<FileId, u32> = BTreeMap::new();
    for (i, ev) in job.events.iter().enumerate() {
        if let (RawTime::Uptime { .. }, Some(b)) = (ev.time, index[i]) {
            let slot = out.entry(ev.origin.file).or_insert(b);
            *slot = (*slot).max(b);
        }
    }
    out
}

fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn clock_file_anchors(
    job: &Job,
    times: &[Option<NaiveDateTime>],
    index: &[Option<u32>],
    boots: &mut BTreeMap<BootKey, Vec<NaiveDateTime>>,
) {
    let files = uptime_files(job, index);
    for (i, ev) in job.events.iter().enumerate() {
        if !is_clock_file(ev) {
            continue;
        }
        let Some(m) = times[i]
            .zip(ev.int("uptime_us"))
            .and_then(|(w, u)| moment(w, u))
        else {
            continue;
        };
        let dir = folder(job.file_path(ev.origin.file));
        for (&file, &last) in &files {
            let key = (file, last);
            if folder(job.file_path(file)) == dir && !boots.contains_key(&key) {
                boots.insert(key, vec![m]);
            }
        }
    }
}

fn paired_anchors(
    job: &Job,
    times: &[Option<NaiveDateTime>],
    index: &[Option<u32>],
    boots: &mut BTreeMap<BootKey, Vec<NaiveDateTime>>,
) {
    let unplaced = job.events.iter().zip(index).any(|(ev, b)| {
        matches!(ev.time, RawTime::Uptime { .. })
            && b.is_some_and(|b| !boots.contains_key(&(ev.origin.file, b)))
    });
    if !unplaced {
        return;
    }
    let key = |ev: &'_ Event| -> (Option<String>, String, Vec<u8>) {
        (
            ev.who.host.as_deref().map(str::to_string),
            ev.pattern.to_string(),
            message(ev.text.as_bytes()).to_vec(),
        )
    };
    // Wall-stamped kernel messages without an uptime, seen once.
    let mut walls: BTreeMap<_, (usize, NaiveDateTime)> = BTreeMap::new();
    // Uptime-only messages of unplaced boots, seen once per boot.
    let mut ups: BTreeMap<(BootKey, _), (usize, i64)> = BTreeMap::new();
    for (i, ev) in job.events.iter().enumerate() {
        if !is_kernel(ev.kind) || is_clock_file(ev) {
            continue;
        }
        match (ev.time, times[i], index[i]) {
            (RawTime::Uptime { micros }, _, Some(b))
                if !boots.contains_key(&(ev.origin.file, b)) =>
            {
                let e = ups
                    .entry(((ev.origin.file, b), key(ev)))
                    .or_insert((0, micros));
                e.0 += 1;
            }
            (_, Some(wall), _) if uptime_us(ev).is_none() => {
                let e = walls.entry(key(ev)).or_insert((0, wall));
                e.0 += 1;
            }
            _ => {}
        }
    }
    for ((boot, k), (n, micros)) in ups {
        if n != 1 {
            continue;
        }
        if let Some(m) = walls
            .get(&k)
            .filter(|(count, _)| *count == 1)
            .and_then(|(_, wall)| moment(*wall, micros))
        {
            boots.entry(boot).or_default().push(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::time::format_local;
    use crate::model::{Fields, FileInfo, Level, Origin, Value, Who};
    use crate::timeline::Timeline;
    use chrono::NaiveDate;

    fn ev(file: u32, line: u64, kind: EventKind, time: RawTime, text: &str) -> Event {
        Event {
            kind,
            pattern: "kernel.test",
            origin: Origin {
                file: FileId(file),
                line,
            },
            who: Who::default(),
            level: Level::Info,
            time,
            fields: Fields::default(),
            text: text.into(),
        }
    }

    fn up(secs: f64) -> RawTime {
        RawTime::Uptime {
            micros: (secs * 1e6) as i64,
        }
    }

    fn job(paths: &[&str], events: Vec<Event>) -> Job {
        Job {
            files: paths
                .iter()
                .enumerate()
                .map(|(i, p)| FileInfo {
                    id: FileId(i as u32),
                    path: p.to_string(),
                    ..FileInfo::default()
                })
                .collect(),
            events,
            ..Job::default()
        }
    }

    fn wall(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap()
    }

    fn shown(tl: &Timeline, i: usize) -> Option<String> {
        tl.time_of(i).map(|t| format_local(&t))
    }

    #[test]
    fn boots_are_counted_per_file_whatever_order_the_events_come_in() {
        let link = EventKind::KernelNicLink;
        let boot = EventKind::KernelBoot;
        let j = job(
            &["n1/dmesg.txt", "n2/dmesg.txt"],
            vec![
                ev(1, 7, link, up(40.0), "b2"),
                ev(0, 1, boot, up(0.0), "Linux version 6.8.0 ("),
                ev(1, 2, link, up(50.0), "b1"),
                ev(0, 9, boot, up(0.0), "Linux version 6.8.0 ("),
                ev(0, 5, link, up(500.0), "a1"),
                ev(0, 12, link, up(3.0), "a2"),
                ev(1, 9, EventKind::NcclChannel, RawTime::None, "not kernel"),
            ],
        );
        let tl = Timeline::build(&j);
        let boots: Vec<_> = (0..7).map(|i| tl.boot_of(i)).collect();
        // n2: uptime 50 then 40 (in line order) is a step back of 10 s.
        assert_eq!(
            boots,
            [Some(1), Some(0), Some(0), Some(1), Some(0), Some(1), None]
        );
    }

    #[test]
    fn an_unstamped_event_takes_the_last_stamp_of_its_own_file() {
        let at = |h| RawTime::Local(wall(2026, 3, 1, h, 0, 0));
        let link = EventKind::KernelNicLink;
        let j = job(
            &["a.log", "b.log"],
            vec![
                ev(0, 1, link, at(1), "a1"),
                ev(1, 1, link, RawTime::None, "b before any stamp"),
                ev(0, 2, link, RawTime::None, "a after 1h"),
                ev(1, 2, link, at(5), "b5"),
                ev(0, 3, link, RawTime::None, "a still 1h"),
                ev(1, 3, link, RawTime::None, "b after 5h"),
            ],
        );
        let tl = Timeline::build(&j);
        let hours: Vec<_> = (0..6)
            .map(|i| tl.at_or_after(i).map(|t| t.format("%H").to_string()))
            .collect();
        let h = |s: &str| Some(s.to_string());
        assert_eq!(hours, [h("01"), None, h("01"), h("05"), h("01"), h("05")]);
    }

    #[test]
    fn banner_and_backwards_uptime_start_new_boots() {
        let link = EventKind::KernelNicLink;
        let j = job(
            &["n1/dmesg.txt"],
            vec![
                ev(
                    0,
                    1,
                    EventKind::KernelBoot,
                    up(0.0),
                    "Linux version 6.8.0 (",
                ),
                ev(0, 5, link, up(500.0), "a"),
                ev(
                    0,
                    9,
                    EventKind::KernelBoot,
                    up(0.0),
                    "Linux version 6.8.0 (",
                ),
                ev(0, 12, link, up(30.0), "b"),
                ev(0, 20, link, up(10.0), "c"),
                ev(0, 21, link, up(10.5), "d"),
            ],
        );
        let tl = Timeline::build(&j);
        let boots: Vec<_> = (0..6).map(|i| tl.boot_of(i)).collect();
        assert_eq!(
            boots,
            [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2)]
        );
    }

    #[test]
    fn syslog_lines_with_both_clocks_place_raw_lines_of_the_same_boot() {
        let mut anchored = ev(
            0,
            1,
            EventKind::KernelPcieAer,
            RawTime::Local(wall(2024, 9, 19, 16, 18, 2)),
            "x",
        );
        anchored
            .fields
            .insert("uptime_us", Value::Int(68_182_000_000));
        let j = job(
            &["n1/syslog"],
            vec![
                anchored,
                ev(0, 2, EventKind::KernelNicLink, up(68_200.0), "y"),
                ev(0, 3, EventKind::KernelBoot, up(0.0), "Linux version"),
                ev(0, 4, EventKind::KernelNicLink, up(20.0), "z"),
            ],
        );
        let tl = Timeline::build(&j);
        assert_eq!(shown(&tl, 1).as_deref(), Some("2024-09-19 16:18:20"));
        // The next boot's moment is unknown: its uptime stays unplaced.
        assert_eq!(tl.time_of(3), None);
    }

    #[test]
    fn a_boot_time_file_beside_the_dmesg_places_its_last_boot() {
        let mut clock = ev(
            1,
            1,
            EventKind::KernelBoot,
            RawTime::Local(wall(2025, 1, 17, 17, 0, 0)),
            "2025-01-17 17:00:00",
        );
        clock.pattern = CLOCK_FILE_PATTERN;
        clock.fields.insert("uptime_us", Value::Int(0));
        let j = job(
            &["node5/dmesg.txt", "node5/boot_time", "node6/dmesg.txt"],
            vec![
                ev(0, 1, EventKind::KernelNicLink, up(90.5), "a"),
                clock,
                ev(2, 1, EventKind::KernelNicLink, up(90.5), "b"),
            ],
        );
        let tl = Timeline::build(&j);
        assert_eq!(shown(&tl, 0).as_deref(), Some("2025-01-17 17:01:30.500000"));
        assert_eq!(tl.time_of(2), None, "another folder's log is not placed");
    }

    #[test]
    fn dmesg_t_beside_raw_dmesg_pairs_unique_messages() {
        let t = |s| RawTime::Local(wall(2024, 8, 5, 3, 54, s));
        let xid = EventKind::KernelGpuXid;
        let j = job(
            &["n1/dmesg-T.txt", "n1/dmesg.txt"],
            vec![
                ev(
                    0,
                    1,
                    xid,
                    t(13),
                    "[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31, x",
                ),
                ev(
                    0,
                    2,
                    xid,
                    t(20),
                    "[Mon Aug  5 03:54:20 2024] NVRM: Xid (PCI:0000:00:07): 43, y",
                ),
                ev(
                    1,
                    1,
                    xid,
                    up(1000.25),
                    "[ 1000.250000] NVRM: Xid (PCI:0000:00:07): 31, x",
                ),
                ev(
                    1,
                    2,
                    xid,
                    up(1007.25),
                    "[ 1007.250000] NVRM: Xid (PCI:0000:00:07): 43, y",
                ),
                ev(
                    1,
                    3,
                    xid,
                    up(2000.0),
                    "[ 2000.000000] NVRM: Xid (PCI:0000:00:07): 79, z",
                ),
            ],
        );
        let tl = Timeline::build(&j);
        // Boot at 03:37:32.75 (median of two pairs); -T rounds to seconds.
        assert_eq!(shown(&tl, 4).as_deref(), Some("2024-08-05 04:10:52.750000"));
    }
}
