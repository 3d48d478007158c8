//! Which NCCL the job's PyTorch ships: the hosts' package lists say it
//! outright (`nvidia-nccl-cu12 2.27.3`, or `torch 2.8.0` whose wheels pin
//! one); else its series, from the formats of its own lines
//! (`[[torch_mark]]` in grammars/releases.toml), names the NCCL its wheels
//! pin (`[[bundled]]`). Of two sides of a release split, the one running
//! that NCCL is the reference; the other loaded another libnccl.

use std::collections::{BTreeMap, BTreeSet};

use crate::grammar::nccl_bugs::NcclVersion;
use crate::grammar::release_marks::{self, Releases};
use crate::model::{EventIdx, EventKind, Job};

/// The NCCL releases the job's PyTorch may ship, and the lines that date it.
pub struct Shipped {
    pub nccl: BTreeSet<NcclVersion>,
    /// (the line, the PyTorch releases its format belongs to; or, from a
    /// package list, the package and version it names)
    pub cites: Vec<(EventIdx, String)>,
    /// The lines are package lists, not line formats.
    pub from_packages: bool,
}

impl Shipped {
    pub fn includes(&self, version: &str) -> bool {
        NcclVersion::parse(version).is_some_and(|v| self.nccl.contains(&v))
    }
}

/// `None` when no line dates the PyTorch release, or the lines disagree.
pub fn shipped_nccl(job: &Job) -> Option<Shipped> {
    let releases = release_marks::builtin().ok()?;
    installed(job, releases).or_else(|| from_line_formats(job, releases))
}

/// What the hosts' package lists say: the NCCL wheel PyTorch loads, or the
/// PyTorch release whose wheels pin one. One answer for the whole job, or
/// none.
fn installed(job: &Job, releases: &Releases) -> Option<Shipped> {
    let mut nccl = BTreeSet::new();
    let mut cites = Vec::new();
    for (idx, e) in job.events_where(|k| k == EventKind::PackageVersion) {
        let (Some(package), Some(version)) = (e.text_field("package"), e.text_field("version"))
        else {
            continue;
        };
        let shipped = if package.starts_with("nvidia-nccl") {
            NcclVersion::parse(version)
        } else {
            series_nccl(releases, version)
        };
        if let Some(v) = shipped {
            nccl.insert(v);
            cites.push((idx, format!("{package} {version}")));
        }
    }
    (nccl.len() == 1).then_some(Shipped {
        nccl,
        cites,
        from_packages: true,
    })
}

/// The NCCL the wheels of PyTorch `version`'s series pin.
fn series_nccl(releases: &Releases, version: &str) -> Option<NcclVersion> {
    let mut parts = version.split('.');
    let series = NcclVersion::parse(&format!("{}.{}.0", parts.next()?, parts.next()?))?;
    releases
        .bundled
        .iter()
        .find(|b| b.torch == series)
        .map(|b| b.nccl)
}

fn from_line_formats(job: &Job, releases: &Releases) -> Option<Shipped> {
    let fitted = fitted_marks(job, releases);
    if fitted.is_empty() {
        return None;
    }
    let nccl: BTreeSet<NcclVersion> = releases
        .bundled
        .iter()
        .filter(|b| {
            fitted
                .keys()
                .all(|&m| releases.torch[m].releases.contains(&b.torch))
        })
        .map(|b| b.nccl)
        .collect();
    if nccl.is_empty() {
        return None;
    }
    let cites = fitted
        .iter()
        .map(|(&m, &idx)| (idx, releases.torch[m].releases.to_string()))
        .collect();
    Some(Shipped {
        nccl,
        cites,
        from_packages: false,
    })
}

/// Each PyTorch mark some line fits, with the first such line.
fn fitted_marks(job: &Job, releases: &Releases) -> BTreeMap<usize, EventIdx> {
    let patterns: BTreeSet<&str> = releases
        .torch
        .iter()
        .flat_map(|m| m.patterns.iter().map(String::as_str))
        .collect();
    let mut fitted = BTreeMap::new();
    for (idx, ev) in job.events.iter().enumerate() {
        if !patterns.contains(ev.pattern) {
            continue;
        }
        for (m, mark) in releases.torch.iter().enumerate() {
            if mark.fits(ev) {
                fitted.entry(m).or_insert(idx);
            }
        }
    }
    fitted
}
