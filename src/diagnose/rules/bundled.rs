//! Which NCCL the job's PyTorch ships: its series, from the formats of its
//! own lines (`[[torch_mark]]` in grammars/releases.toml), names the NCCL
//! its wheels pin (`[[bundled]]`). Of two sides of a release split, the one
//! running that NCCL is the reference; the other loaded another libnccl.

use std::collections::{BTreeMap, BTreeSet};

use crate::grammar::nccl_bugs::NcclVersion;
use crate::grammar::release_marks::{self, Releases};
use crate::model::{EventIdx, Job};

/// The NCCL releases the job's PyTorch may ship, and the lines that date it.
pub struct Shipped {
    pub nccl: BTreeSet<NcclVersion>,
    /// (the line, the PyTorch releases its format belongs to)
    pub cites: Vec<(EventIdx, String)>,
}

impl Shipped {
    pub fn includes(&self, version: &str) -> bool {
        NcclVersion::parse(version).is_some_and(|v| self.nccl.contains(&v))
    }
}

/// `None` when no line dates the PyTorch release, or the lines disagree.
pub fn shipped_nccl(job: &Job) -> Option<Shipped> {
    let releases = release_marks::builtin().ok()?;
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
    Some(Shipped { nccl, cites })
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
