//! Counter dumps before and after: which dump is which, and how each counter
//! moved between them.
//!
//! The deltas matter, not the absolute values (a port that has run for a year
//! has symbol errors). A dump's place comes from its path first: folder or file
//! names with `before`/`after`, `pre`/`post`, `start`/`end`, `begin`/`end`,
//! `prolog`/`epilog` (Slurm's per-job scripts).
//! Failing that, two dumps of the same host, device and port taken at
//! different times (a stamp in the name or the content) are ordered: the
//! earlier is before, the later after.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::sync::LazyLock;

use compact_str::CompactString;
use regex::Regex;
use rustc_hash::FxHashMap;

use crate::model::counter_store::{CounterStore, NameId, StoredReading};
use crate::model::{CounterDelta, CounterSource, FileInfo, Job, Phase, PortSnapshot, SourceLine};

/// (host, device, port): the place a counter belongs to, by name ids.
type PortKey = (Option<NameId>, NameId, Option<u32>);
/// (host, base LID) of an IB port.
type HostLid<'a> = (Option<&'a str>, u32);
/// (host, device, port, counter name).
type CounterKey<'a> = (Option<&'a str>, &'a str, Option<u32>, &'a str);

const BEFORE_WORDS: &[&str] = &[
    "before",
    "pre",
    "prejob",
    "start",
    "begin",
    "beginning",
    "initial",
    "baseline",
    // Slurm's Prolog / Epilog scripts: where sites dump counters per job.
    "prolog",
];
const AFTER_WORDS: &[&str] = &[
    "after", "post", "postjob", "end", "finish", "final", "epilog",
];

/// What each file's path says about the dumps in it: a phase word, a stamp.
/// Read before the counters are built, so that they can be built beside the
/// rest of the job (which changes the file table).
pub struct FileClues {
    phases: Vec<Phase>,
    stamps: Vec<Option<u64>>,
}

impl FileClues {
    pub fn of(files: &[FileInfo]) -> FileClues {
        FileClues {
            phases: files.iter().map(|f| phase_of_path(&f.path)).collect(),
            stamps: files.iter().map(|f| stamp_in_name(&f.path)).collect(),
        }
    }
}

/// The counters' part of the job.
pub struct Counted {
    readings: usize,
    deltas: Vec<CounterDelta>,
    ports: BTreeMap<CompactString, u32>,
    devices: BTreeMap<(Option<CompactString>, CompactString), CounterSource>,
}

impl Counted {
    pub fn store_in(self, job: &mut Job) {
        job.counter_readings = self.readings;
        job.counter_deltas = self.deltas;
        job.counter_ports = self.ports;
        job.counter_devices = self.devices;
    }
}

/// Sets every counter's phase and pairs the readings into deltas. The
/// readings themselves are not kept: a 16k-rank job holds millions, and each
/// delta carries what it cites.
pub fn collect(files: &FileClues, ports: &[PortSnapshot], mut store: CounterStore) -> Counted {
    let readings = store.len();
    name_lids(ports, &mut store);
    assign_path_phases(files, &mut store.readings);
    assign_time_phases(files, &mut store.readings);
    let (deltas, counted_ports) = deltas(&store);
    Counted {
        readings,
        deltas,
        ports: counted_ports,
        devices: devices(&store),
    }
}

/// `perfquery` names a port by its LID (`Lid 3`); the host's `ibstat` gives
/// each port's base LID, so the reading joins its HCA and port (and pairs
/// with sysfs dumps of the same port).
fn name_lids(ports: &[PortSnapshot], store: &mut CounterStore) {
    let by_lid: BTreeMap<HostLid<'_>, (&str, Option<u32>)> = ports
        .iter()
        .filter_map(|p| {
            let lid = p.lid.filter(|&l| l != 0)?;
            Some(((p.host.as_deref(), lid), (p.device.as_str(), p.port)))
        })
        .collect();
    if by_lid.is_empty() {
        return;
    }
    let mut named: Vec<(usize, &str, Option<u32>)> = Vec::new();
    for (i, r) in store.readings.iter().enumerate() {
        let Some(lid) = store
            .name(r.device)
            .strip_prefix("Lid ")
            .and_then(|l| l.trim().parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(&(device, port)) = by_lid.get(&(store.host_of(r), lid)) {
            named.push((i, device, port));
        }
    }
    for (i, device, port) in named {
        let device = store.intern(device);
        let r = &mut store.readings[i];
        r.device = device;
        r.set_port(r.port().or(port));
    }
}

/// The phase a path names: the word nearest the file wins
/// (`run-start/counters_after.txt` is an after dump).
pub fn phase_of_path(path: &str) -> Phase {
    for part in path.rsplit('/') {
        let words = part
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase);
        let mut found = Phase::Unknown;
        for w in words {
            if BEFORE_WORDS.contains(&w.as_str()) {
                found = Phase::Before;
            } else if AFTER_WORDS.contains(&w.as_str()) {
                found = Phase::After;
            }
        }
        if found != Phase::Unknown {
            return found;
        }
    }
    Phase::Unknown
}

fn assign_path_phases(files: &FileClues, readings: &mut [StoredReading]) {
    let phases = &files.phases;
    for c in readings.iter_mut() {
        if c.phase == Phase::Unknown
            && let Some(p) = phases.get(c.file.0 as usize)
        {
            c.phase = *p;
        }
    }
}

/// Dumps of one port without a phase in their path, ordered by when they
/// were taken: the earliest is before, the latest after.
fn assign_time_phases(files: &FileClues, readings: &mut [StoredReading]) {
    let name_stamps = &files.stamps;
    // One file may hold dumps of several times (a `date` line over each).
    let stamp_of = |c: &StoredReading| {
        c.taken_at
            .map(NonZeroU64::get)
            .or_else(|| name_stamps.get(c.file.0 as usize).copied().flatten())
    };
    let mut taken: BTreeMap<PortKey, BTreeSet<u64>> = BTreeMap::new();
    for c in readings.iter().filter(|c| c.phase == Phase::Unknown) {
        if let Some(t) = stamp_of(c) {
            taken.entry(port_key(c)).or_default().insert(t);
        }
    }
    let phase_at = |key: &PortKey, t: u64| {
        let stamps = taken.get(key)?;
        let (first, last) = (*stamps.first()?, *stamps.last()?);
        if first == last {
            None
        } else if t == first {
            Some(Phase::Before)
        } else if t == last {
            Some(Phase::After)
        } else {
            None
        }
    };
    for c in readings.iter_mut().filter(|c| c.phase == Phase::Unknown) {
        if let Some(p) = stamp_of(c).and_then(|t| phase_at(&port_key(c), t)) {
            c.phase = p;
        }
    }
}

fn port_key(c: &StoredReading) -> PortKey {
    (c.host(), c.device, c.port())
}

static NAME_DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(20\d\d)[-_.]?([01]\d)[-_.]?([0-3]\d)(?:[T_ .-]?([0-2]\d)[:_.-]?([0-5]\d)(?:[:_.-]?([0-5]\d))?)?",
    )
    .unwrap()
});
static NAME_EPOCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^0-9])(1[0-9]{9})(?:[^0-9]|$)").unwrap());

/// A time stamp in a file's name (`…-20240618-134107.txt`, `…_1718718067`),
/// as `YYYYMMDDhhmmss`.
pub fn stamp_in_name(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some(c) = NAME_DATE.captures(name) {
        let part = |i: usize| c.get(i).map_or("00", |m| m.as_str());
        let s = format!(
            "{}{}{}{}{}{}",
            part(1),
            part(2),
            part(3),
            part(4),
            part(5),
            part(6)
        );
        return s.parse().ok();
    }
    let epoch: i64 = NAME_EPOCH.captures(name)?[1].parse().ok()?;
    let t = chrono::DateTime::from_timestamp(epoch, 0)?;
    t.format("%Y%m%d%H%M%S").to_string().parse().ok()
}

/// Pairs each counter's before and after readings. With several readings of
/// one phase, the first before and the last after count.
fn deltas(store: &CounterStore) -> (Vec<CounterDelta>, BTreeMap<CompactString, u32>) {
    let counters = &store.readings;
    // Sorting indices by key costs 4 bytes a reading; a map of keys cost
    // ~100 (a 16k-rank job holds millions of readings). Readings group by
    // name ids (equal names, equal ids: cheap to compare); the deltas are
    // then put in name order.
    let key = |i: u32| {
        let c = &counters[i as usize];
        (c.host(), c.device, c.port(), c.name)
    };
    let mut order: Vec<u32> = (0..counters.len() as u32)
        .filter(|&i| matches!(counters[i as usize].phase, Phase::Before | Phase::After))
        .collect();
    order.sort_unstable_by_key(|&i| (key(i), i));
    let mut out = Vec::new();
    let mut ports: BTreeMap<CompactString, u32> = BTreeMap::new();
    for group in order.chunk_by(|&a, &b| key(a) == key(b)) {
        let phase = |i: &&u32| counters[**i as usize].phase;
        let before = group.iter().find(|i| phase(i) == Phase::Before);
        let after = group.iter().rev().find(|i| phase(i) == Phase::After);
        if let (Some(&b), Some(&a)) = (before, after) {
            let d = delta(store, b as usize, a as usize);
            *ports.entry(d.name.as_str().into()).or_default() += 1;
            let moved = d.delta != Some(0) || d.reset || d.saturated || d.wrap_suspect;
            if moved {
                out.push(d);
            }
        }
    }
    out.sort_by(|a, b| name_order(a).cmp(&name_order(b)));
    (out, ports)
}

fn name_order(d: &CounterDelta) -> CounterKey<'_> {
    (
        d.host.as_deref(),
        d.device.as_str(),
        d.port,
        d.name.as_str(),
    )
}

/// The devices read in both phases, with the tool that read them (the
/// first reading's). Grouped by name ids (equal names, equal ids), named
/// only at the end: comparing names for each of millions of readings cost a
/// fifth of a second at 16k ranks.
fn devices(
    store: &CounterStore,
) -> BTreeMap<(Option<CompactString>, CompactString), CounterSource> {
    let mut phases: FxHashMap<(Option<NameId>, NameId), (bool, bool, CounterSource)> =
        FxHashMap::default();
    for c in &store.readings {
        let e = phases
            .entry((c.host(), c.device))
            .or_insert((false, false, c.source));
        e.0 |= c.phase == Phase::Before;
        e.1 |= c.phase == Phase::After;
    }
    phases
        .into_iter()
        .filter(|(_, (b, a, _))| *b && *a)
        .map(|((h, d), (_, _, src))| {
            let host = h.map(|h| store.name(h).into());
            ((host, store.name(d).into()), src)
        })
        .collect()
}

fn delta(store: &CounterStore, bi: usize, ai: usize) -> CounterDelta {
    let (b, a) = (&store.readings[bi], &store.readings[ai]);
    let width = a.width_bits.or(b.width_bits);
    let name = store.name(a.name);
    let mut d = CounterDelta {
        host: a.host().map(|h| store.sym(h)),
        device: store.sym(a.device),
        port: a.port(),
        name: store.sym(a.name),
        source: a.source,
        width_bits: width,
        before: b.value,
        after: a.value,
        delta: a.value.checked_sub(b.value),
        saturated: false,
        reset: false,
        wrap_suspect: false,
        cite: SourceLine {
            origin: a.origin(),
            text: store.text_of(a).unwrap_or_default().into(),
        },
    };
    let max = width.filter(|w| *w < 64).map(|w| (1u64 << w) - 1);
    let modular = a.source == CounterSource::RdmaStatistic && width == Some(32);
    if modular {
        // Old iproute2 printed only the low 32 bits: the counter itself did
        // not stop, the printout wrapped.
        d.wrap_suspect = a.value < b.value;
        d.delta = Some(a.value.wrapping_sub(b.value) & 0xffff_ffff);
    } else if let Some(max) = max.filter(|&m| b.value == m || a.value == m) {
        // IB PMA counters stop at their maximum: from a saturated start
        // nothing can be said; into one, the rise is a lower bound.
        d.saturated = true;
        d.delta = (b.value != max).then(|| a.value.saturating_sub(b.value));
    } else if a.value < b.value {
        if width == Some(32) && is_traffic(name) {
            d.wrap_suspect = true;
            d.delta = Some(a.value + (1u64 << 32) - b.value);
        } else {
            d.reset = true;
        }
    }
    d
}

/// Data and packet counters: the ones a 32-bit register overflows in seconds.
fn is_traffic(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with("data") || n.ends_with("packets") || n.ends_with("pkts")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CounterReading, FileId, Origin};

    fn store(readings: Vec<CounterReading>) -> CounterStore {
        let mut store = CounterStore::default();
        readings.into_iter().for_each(|r| store.push(r));
        store
    }

    fn reading(name: &str, value: u64, phase: Phase, width: Option<u8>) -> CounterReading {
        CounterReading {
            host: Some("node002".into()),
            device: "mlx5_1".into(),
            port: Some(1),
            name: name.into(),
            value,
            source: CounterSource::Sysfs,
            phase,
            width_bits: width,
            taken_at: None,
            origin: Origin {
                file: FileId(0),
                line: 1,
            },
            text: None,
        }
    }

    fn one(b: u64, a: u64, width: Option<u8>, name: &str) -> CounterDelta {
        let c = vec![
            reading(name, b, Phase::Before, width),
            reading(name, a, Phase::After, width),
        ];
        deltas(&store(c)).0.remove(0)
    }

    #[test]
    fn a_still_counter_counts_its_port_but_keeps_no_delta() {
        let c = vec![
            reading("symbol_error", 7, Phase::Before, Some(16)),
            reading("symbol_error", 7, Phase::After, Some(16)),
        ];
        let (deltas, ports) = deltas(&store(c));
        assert!(deltas.is_empty());
        assert_eq!(ports.get("symbol_error"), Some(&1));
    }

    #[test]
    fn phases_come_from_the_nearest_word_of_the_path() {
        assert_eq!(phase_of_path("node2/before/ib.txt"), Phase::Before);
        assert_eq!(phase_of_path("node2/pre-job/ib.txt"), Phase::Before);
        assert_eq!(phase_of_path("run-start/counters_after.txt"), Phase::After);
        assert_eq!(phase_of_path("node2/post/ib.txt"), Phase::After);
        assert_eq!(
            phase_of_path("sys/n-c04/perfquery.prolog.txt"),
            Phase::Before
        );
        assert_eq!(
            phase_of_path("sys/n-c04/perfquery.epilog.txt"),
            Phase::After
        );
        assert_eq!(phase_of_path("node2/prefix/ib.txt"), Phase::Unknown);
        assert_eq!(phase_of_path("node2/ibstat.txt"), Phase::Unknown);
    }

    #[test]
    fn a_plain_rise_is_the_delta() {
        let d = one(12, 4223, Some(16), "symbol_error");
        assert_eq!(d.delta, Some(4211));
        assert!(!d.saturated && !d.reset && !d.wrap_suspect);
    }

    #[test]
    fn sixteen_bit_saturation_makes_the_delta_a_lower_bound() {
        let d = one(100, 65535, Some(16), "symbol_error");
        assert!(d.saturated);
        assert_eq!(d.delta, Some(65435));
        let d = one(65535, 65535, Some(16), "symbol_error");
        assert!(d.saturated);
        assert_eq!(d.delta, None);
    }

    #[test]
    fn thirty_two_bit_saturation_and_wrap() {
        let d = one(10, u32::MAX as u64, Some(32), "port_xmit_wait");
        assert!(d.saturated);
        let d = one(4_000_000_000, 5, Some(32), "PortXmitData");
        assert!(d.wrap_suspect && !d.reset);
        assert_eq!(d.delta, Some(5 + (1 << 32) - 4_000_000_000));
    }

    #[test]
    fn a_drop_is_a_reset_not_a_negative_delta() {
        let d = one(500, 3, Some(8), "link_downed");
        assert!(d.reset);
        assert_eq!(d.delta, None);
        let d = one(500, 3, None, "out_of_sequence");
        assert!(d.reset);
    }

    #[test]
    fn stamps_in_names() {
        assert_eq!(
            stamp_in_name("n/counters-20240618-134107.txt"),
            Some(20240618134107)
        );
        assert_eq!(
            stamp_in_name("n/ethtool_1718718067.txt"),
            Some(20240618134107)
        );
        assert_eq!(stamp_in_name("n/mlx5_0.txt"), None);
    }
}
