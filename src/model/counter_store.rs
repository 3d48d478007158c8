//! The counter readings of a whole job, kept compact until they are paired.
//!
//! A 16k-rank job's dumps hold 1.6 million readings, all in memory at once
//! between parsing and the build, when the events are there too. As parsed
//! (`CounterReading`) one takes 80 bytes; stored here, with its host, device
//! and counter name as ids into one table of the job's names, 48.

use std::num::NonZeroU64;

use rustc_hash::FxHashMap;

use super::event::{FileId, Origin};
use super::sym::Sym;
use super::sys::{CounterReading, CounterSource, Phase};

/// Index of a name in [`CounterStore`]'s table.
pub type NameId = u32;

const NONE: u32 = u32::MAX;

/// One reading, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReading {
    host: NameId,
    pub device: NameId,
    pub name: NameId,
    port: u32,
    pub value: u64,
    pub file: FileId,
    line: u32,
    pub taken_at: Option<NonZeroU64>,
    text: u32,
    pub source: CounterSource,
    pub phase: Phase,
    pub width_bits: Option<u8>,
}

impl StoredReading {
    pub fn host(&self) -> Option<NameId> {
        (self.host != NONE).then_some(self.host)
    }

    pub fn port(&self) -> Option<u32> {
        (self.port != NONE).then_some(self.port)
    }

    pub fn set_port(&mut self, port: Option<u32>) {
        self.port = port.unwrap_or(NONE);
    }

    pub fn origin(&self) -> Origin {
        Origin {
            file: self.file,
            line: u64::from(self.line),
        }
    }
}

/// The readings and the names they share.
#[derive(Debug, Default)]
pub struct CounterStore {
    names: Vec<Sym>,
    ids: FxHashMap<Sym, NameId>,
    pub readings: Vec<StoredReading>,
    /// Lines kept for citation (archive members, which cannot be re-read).
    texts: Vec<Sym>,
}

impl CounterStore {
    pub fn push(&mut self, r: CounterReading) {
        let host = r.host.map_or(NONE, |h| self.intern_sym(h));
        let device = self.intern_sym(r.device);
        let name = self.intern_sym(r.name);
        let text = match r.text {
            Some(t) => {
                self.texts.push(t);
                (self.texts.len() - 1) as u32
            }
            None => NONE,
        };
        self.readings.push(StoredReading {
            host,
            device,
            name,
            port: r.port.unwrap_or(NONE),
            value: r.value,
            file: r.origin.file,
            // A table file is capped far below four billion lines.
            line: u32::try_from(r.origin.line).unwrap_or(u32::MAX),
            taken_at: r.taken_at,
            text,
            source: r.source,
            phase: r.phase,
            width_bits: r.width_bits,
        });
    }

    pub fn len(&self) -> usize {
        self.readings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }

    /// The id of `name`, added to the table when new.
    pub fn intern(&mut self, name: &str) -> NameId {
        match self.ids.get(name) {
            Some(&id) => id,
            None => self.intern_sym(Sym::new(name)),
        }
    }

    fn intern_sym(&mut self, name: Sym) -> NameId {
        if let Some(&id) = self.ids.get(name.as_str()) {
            return id;
        }
        let id = self.names.len() as NameId;
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    pub fn name(&self, id: NameId) -> &str {
        self.names.get(id as usize).map_or("", |s| s.as_str())
    }

    /// The shared copy of a name.
    pub fn sym(&self, id: NameId) -> Sym {
        self.names.get(id as usize).cloned().unwrap_or_default()
    }

    /// Puts the readings of each file of `named` on its host, where the
    /// reading's own host is missing or not one `is_job_host` accepts.
    pub fn place_on_hosts(
        &mut self,
        named: &FxHashMap<FileId, Sym>,
        is_job_host: impl Fn(&str) -> bool,
    ) {
        // New names join the table in file order, not the map's.
        let mut files: Vec<(&FileId, &Sym)> = named.iter().collect();
        files.sort_unstable_by_key(|(file, _)| **file);
        let ids: FxHashMap<FileId, NameId> = files
            .into_iter()
            .map(|(&file, host)| (file, self.intern_sym(host.clone())))
            .collect();
        let names = &self.names;
        let settled = |r: &StoredReading| {
            r.host()
                .is_some_and(|h| names.get(h as usize).is_some_and(|n| is_job_host(n)))
        };
        for r in &mut self.readings {
            if let Some(&host) = ids.get(&r.file)
                && !settled(r)
            {
                r.host = host;
            }
        }
    }

    pub fn host_of(&self, r: &StoredReading) -> Option<&str> {
        r.host().map(|h| self.name(h))
    }

    /// The line as written, where it was kept.
    pub fn text_of(&self, r: &StoredReading) -> Option<&str> {
        (r.text != NONE).then(|| self.texts.get(r.text as usize).map_or("", |s| s.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(
        host: Option<&str>,
        device: &str,
        port: Option<u32>,
        text: Option<&str>,
    ) -> CounterReading {
        CounterReading {
            host: host.map(Sym::new),
            device: Sym::new(device),
            port,
            name: Sym::new("symbol_error"),
            value: 7,
            source: CounterSource::Sysfs,
            phase: Phase::Before,
            width_bits: Some(16),
            taken_at: NonZeroU64::new(20240618134107),
            origin: Origin {
                file: FileId(3),
                line: 12,
            },
            text: text.map(Sym::new),
        }
    }

    #[test]
    fn a_stored_reading_gives_back_what_was_read() {
        let mut store = CounterStore::default();
        store.push(reading(Some("node1"), "mlx5_0", Some(1), None));
        store.push(reading(None, "mlx5_0", None, Some("symbol_error: 7")));
        let (a, b) = (&store.readings[0], &store.readings[1]);
        assert_eq!(store.host_of(a), Some("node1"));
        assert_eq!(store.host_of(b), None);
        assert_eq!(a.device, b.device, "one id per distinct name");
        assert_eq!(store.name(a.device), "mlx5_0");
        assert_eq!(store.name(a.name), "symbol_error");
        assert_eq!((a.port(), b.port()), (Some(1), None));
        assert_eq!(
            a.origin(),
            Origin {
                file: FileId(3),
                line: 12
            }
        );
        assert_eq!(store.text_of(a), None);
        assert_eq!(store.text_of(b), Some("symbol_error: 7"));
        assert_eq!(a.taken_at.map(NonZeroU64::get), Some(20240618134107));
        assert!(std::mem::size_of::<StoredReading>() <= 48);
    }
}
