//! Which NICs the job's ranks use, so a counter or a port state can be
//! placed under the ranks it affects. A fault on a NIC nobody in the job
//! uses (a storage or front-end port) counts less.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Job;
use crate::model::build::short_host_of;

/// How the job uses one NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// These ranks send over it.
    Used(BTreeSet<u32>),
    /// The job's ranks on that host use other NICs, or the host is not in the job.
    Unused,
    /// The logs do not say which NICs the host's ranks use.
    Unknown,
}

impl Use {
    /// `Some(true)` used, `Some(false)` unused, `None` unknown: for the report.
    pub fn as_flag(&self) -> Option<bool> {
        match self {
            Use::Used(_) => Some(true),
            Use::Unused => Some(false),
            Use::Unknown => None,
        }
    }

    pub fn ranks(&self) -> BTreeSet<u32> {
        match self {
            Use::Used(r) => r.clone(),
            _ => BTreeSet::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct NicUse {
    /// host → HCA → ranks using it.
    by_host: BTreeMap<String, BTreeMap<String, BTreeSet<u32>>>,
    /// Hosts with ranks whose NIC lists are unknown.
    unlisted: BTreeSet<String>,
    /// The job named hosts for its ranks.
    mapped: bool,
    /// (host, netdev) → HCA, from GID tables and `rdma link`.
    netdevs: BTreeMap<(Option<String>, String), String>,
}

impl NicUse {
    pub fn new(job: &Job) -> NicUse {
        let mut u = NicUse::default();
        for (&rank, info) in &job.ranks {
            let Some(host) = info.host.as_deref().map(short_host_of) else {
                continue;
            };
            u.mapped = true;
            let nics = info.nics();
            if nics.is_empty() {
                u.unlisted.insert(host.clone());
            }
            let hcas = u.by_host.entry(host).or_default();
            for (hca, _) in nics {
                hcas.entry(hca).or_default().insert(rank);
            }
        }
        for g in &job.gids {
            if let Some(nd) = &g.netdev {
                u.netdevs
                    .insert((g.host.clone(), nd.clone()), g.device.clone());
            }
        }
        for p in &job.ports {
            if let Some(nd) = &p.netdev {
                u.netdevs
                    .insert((p.host.clone(), nd.clone()), p.device.clone());
            }
        }
        // The kernel log names a NIC's netdev and, read or inferred from
        // probe order, its RDMA device; the tables above win where they say.
        for (host, devices) in &job.kernel.hosts {
            for names in devices.nics.values() {
                let Some(ibdev) = &names.ibdev else { continue };
                for nd in &names.netdevs {
                    u.netdevs
                        .entry((Some(host.clone()), nd.clone()))
                        .or_insert_with(|| ibdev.clone());
                }
            }
        }
        u
    }

    /// The HCA a netdev belongs to (ethtool counters name the netdev).
    pub fn hca_of<'a>(&'a self, host: Option<&str>, device: &'a str) -> &'a str {
        self.netdevs
            .get(&(host.map(str::to_string), device.to_string()))
            .map_or(device, String::as_str)
    }

    /// How the job uses `device` on `host`.
    pub fn of(&self, host: Option<&str>, device: &str) -> Use {
        if !self.mapped {
            return Use::Unknown;
        }
        let Some(host) = host.map(short_host_of) else {
            return Use::Unknown;
        };
        let device = self.hca_of(Some(&host), device);
        match self.by_host.get(&host) {
            None => Use::Unused,
            Some(hcas) => match hcas.get(device) {
                Some(ranks) => Use::Used(ranks.clone()),
                None if self.unlisted.contains(&host) => Use::Unknown,
                None => Use::Unused,
            },
        }
    }
}
