//! Which NICs the job's ranks use, so a counter or a port state can be
//! placed under the ranks it affects. A fault on a NIC nobody in the job
//! uses (a storage or front-end port) counts less.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::LazyLock;

use regex::Regex;

use crate::model::build::short_host_of;
use crate::model::{CounterSource, Job, RankInfo};

/// How the job uses one NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// These ranks send over it.
    Used(BTreeSet<u32>),
    /// The job's ranks on that host use other NICs, or the host is not in the job.
    Unused,
    /// The logs do not say; NCCL's default (each GPU takes the NIC nearest
    /// to it) and the host's NIC count make these ranks its likely users.
    Likely(BTreeSet<u32>),
    /// The logs do not say which NICs the host's ranks use.
    Unknown,
}

impl Use {
    /// `Some(true)` used, `Some(false)` unused, `None` unknown: for the report.
    pub fn as_flag(&self) -> Option<bool> {
        match self {
            Use::Used(_) => Some(true),
            Use::Unused => Some(false),
            Use::Likely(_) | Use::Unknown => None,
        }
    }

    pub fn ranks(&self) -> BTreeSet<u32> {
        match self {
            Use::Used(r) | Use::Likely(r) => r.clone(),
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
    /// (host, netdev) of ethtool dumps: a netdev no table ties to an HCA is
    /// of unknown use, not unused.
    ethtool: BTreeSet<(String, String)>,
    /// host → HCA → ranks, guessed where no rank of the host listed its NICs.
    likely: BTreeMap<String, BTreeMap<String, BTreeSet<u32>>>,
    /// The job named hosts for its ranks.
    mapped: bool,
    /// (short host, netdev) → HCA, from GID tables and `rdma link`.
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
                    .insert((short(g.host.as_deref()), nd.clone()), g.device.clone());
            }
        }
        for p in &job.ports {
            if let Some(nd) = &p.netdev {
                u.netdevs
                    .insert((short(p.host.as_deref()), nd.clone()), p.device.clone());
            }
        }
        // A RoCE LAG's device sits on the bond; its members' counters are
        // the device's.
        for b in &job.bond_slaves {
            let host = short(b.host.as_deref());
            let Some(bond) = &b.bond else { continue };
            if let Some(hca) = u.netdevs.get(&(host.clone(), bond.clone())).cloned() {
                u.netdevs.entry((host, b.netdev.clone())).or_insert(hca);
            }
        }
        // The kernel log names a NIC's netdev and, read or inferred from
        // probe order, its RDMA device; the tables above win where they say.
        for (host, devices) in &job.kernel.hosts {
            for names in devices.nics.values() {
                let Some(ibdev) = &names.ibdev else { continue };
                for nd in &names.netdevs {
                    u.netdevs
                        .entry((short(Some(host)), nd.clone()))
                        .or_insert_with(|| ibdev.clone());
                }
            }
        }
        u.ethtool = job
            .counter_devices
            .iter()
            .filter(|(_, src)| **src == CounterSource::Ethtool)
            .filter_map(|((h, d), _)| Some((short_host_of(h.as_deref()?), d.to_string())))
            .collect();
        let hcas = hcas_by_host(job);
        u.guess_netdevs(job, &hcas);
        u.likely = likely_users(job, &u, &hcas);
        u
    }

    /// Netdevs no table ties to an HCA (`ethtool -S` was dumped, the kernel
    /// log was not): when a host's unmapped netdevs and HCAs are equally
    /// many, both in PCI order, the k-th netdev is the k-th HCA. Predictable
    /// netdev names carry the PCI bus (`enp26s0np0` is bus 0x1a), and mlx5
    /// devices are numbered in probe order, which is PCI order.
    fn guess_netdevs(&mut self, job: &Job, hcas_by_host: &BTreeMap<String, Vec<String>>) {
        // host → (RDMA devices, netdevs) read by the counter dumps.
        let mut dumped: BTreeMap<String, (BTreeSet<String>, Vec<String>)> = BTreeMap::new();
        for ((h, d), src) in &job.counter_devices {
            let Some(host) = h.as_deref().map(short_host_of) else {
                continue;
            };
            let e = dumped.entry(host).or_default();
            if *src == CounterSource::Ethtool {
                e.1.push(d.to_string());
            } else {
                e.0.insert(d.to_string());
            }
        }
        let mut mapped: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for ((h, _), hca) in &self.netdevs {
            if let Some(h) = h.as_deref() {
                mapped
                    .entry(short_host_of(h))
                    .or_default()
                    .insert(hca.clone());
            }
        }
        for (host, (rdma, netdevs)) in dumped {
            let mut hcas: BTreeSet<String> = rdma;
            hcas.extend(hcas_by_host.get(&host).into_iter().flatten().cloned());
            hcas.extend(
                self.by_host
                    .get(&host)
                    .into_iter()
                    .flat_map(|m| m.keys().cloned()),
            );
            let taken = mapped.get(&host);
            let mut free_hcas: Vec<String> = hcas
                .into_iter()
                .filter(|h| !taken.is_some_and(|t| t.contains(h)))
                .collect();
            let netdevs: Vec<String> = netdevs
                .into_iter()
                .filter(|d| !self.netdevs.contains_key(&(Some(host.clone()), d.clone())))
                .collect();
            if netdevs.is_empty() || netdevs.len() != free_hcas.len() {
                continue;
            }
            let Some(mut ordered) = netdevs
                .iter()
                .map(|n| pci_order(n).map(|k| (k, n.clone())))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            ordered.sort();
            free_hcas.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
            for ((_, nd), hca) in ordered.into_iter().zip(free_hcas) {
                self.netdevs.insert((Some(host.clone()), nd), hca);
            }
        }
    }

    /// The HCA a netdev belongs to (ethtool counters name the netdev).
    pub fn hca_of<'a>(&'a self, host: Option<&str>, device: &'a str) -> &'a str {
        self.netdevs
            .get(&(short(host), device.to_string()))
            .map_or(device, String::as_str)
    }

    /// The one NIC `rank` most likely sends over, where its host's ranks
    /// listed none (see `likely_users`).
    pub fn likely_nic_of(&self, host: &str, rank: u32) -> Option<&str> {
        let hcas = self.likely.get(&short_host_of(host))?;
        let mut of_rank = hcas.iter().filter(|(_, ranks)| ranks.contains(&rank));
        let (hca, _) = of_rank.next()?;
        of_rank.next().is_none().then_some(hca.as_str())
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
                None if self.ethtool.contains(&(host.clone(), device.to_string())) => Use::Unknown,
                None if self.unlisted.contains(&host) => self
                    .likely
                    .get(&host)
                    .and_then(|hcas| hcas.get(device))
                    .map_or(Use::Unknown, |r| Use::Likely(r.clone())),
                None => Use::Unused,
            },
        }
    }
}

/// Hosts are compared by the short name NCCL prints (snapshots may hold FQDNs).
fn short(host: Option<&str>) -> Option<String> {
    host.map(short_host_of)
}

/// Where no rank of a host listed its NICs: if the host has exactly one
/// RDMA device per GPU slot, local rank k most likely sends over the k-th
/// device in probe order. NCCL gives each GPU the NIC nearest to it, and on
/// rail-built servers GPU k and NIC k share a PCIe switch. Any other count
/// leaves the host unknown.
fn likely_users(
    job: &Job,
    u: &NicUse,
    hcas_by_host: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, BTreeMap<String, BTreeSet<u32>>> {
    let mut ranks_by_host: BTreeMap<String, Vec<&RankInfo>> = BTreeMap::new();
    for info in job.ranks.values() {
        if let Some(h) = info.host.as_deref() {
            ranks_by_host
                .entry(short_host_of(h))
                .or_default()
                .push(info);
        }
    }
    let even = match (job.world_size, ranks_by_host.len() as u32) {
        (Some(w), h) if h > 0 && w.is_multiple_of(h) => w / h,
        _ => 0,
    };
    // Worker processes that left a file of their own (`nccl.%h.%p`, empty
    // where NCCL_DEBUG=WARN had nothing to say) count a host's GPU slots
    // when its ranks' lines do not.
    let mut processes: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for f in &job.files {
        if let (Some(h), Some(pid)) = (f.hints.host.as_deref(), f.hints.pid) {
            processes.entry(short_host_of(h)).or_default().insert(pid);
        }
    }
    let mut out = BTreeMap::new();
    for host in &u.unlisted {
        let Some(ranks) = ranks_by_host.get(host) else {
            continue;
        };
        if ranks.iter().any(|r| !r.nics_listed.is_empty()) {
            continue;
        }
        let Some(hcas) = hcas_by_host.get(host) else {
            continue;
        };
        let seen = processes.get(host).map_or(0, |p| p.len() as u32);
        let slots = slots_per_host(ranks, even.max(seen));
        let alike;
        let hcas = if hcas.len() > slots {
            alike = alike_hcas(job, host, hcas);
            &alike
        } else {
            hcas
        };
        if hcas.len() != slots {
            continue;
        }
        let mut by_hca: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for r in ranks {
            let local = r.local_rank.unwrap_or(r.rank % hcas.len() as u32);
            if let Some(hca) = hcas.get(local as usize) {
                by_hca.entry(hca.clone()).or_default().insert(r.rank);
            }
        }
        out.insert(host.clone(), by_hca);
    }
    out
}

/// A host's HCAs of the model most of them are (link layer and rate, as a
/// snapshot shows them): the GPUs' NICs are alike, while a storage or
/// management NIC beside them is another (a 100 Gb/s Ethernet port among
/// 400 Gb/s InfiniBand ones). Empty where any HCA has no snapshot.
fn alike_hcas(job: &Job, host: &str, hcas: &[String]) -> Vec<String> {
    let model = |hca: &str| {
        job.ports
            .iter()
            .find(|p| {
                p.device == hca && p.host.as_deref().map(short_host_of).as_deref() == Some(host)
            })
            .map(|p| (p.link_layer.clone(), p.rate_gbps.map(|r| r.round() as i64)))
    };
    let Some(models) = hcas.iter().map(|h| model(h)).collect::<Option<Vec<_>>>() else {
        return Vec::new();
    };
    let mut counts: BTreeMap<&(Option<String>, Option<i64>), usize> = BTreeMap::new();
    for m in &models {
        *counts.entry(m).or_default() += 1;
    }
    let Some((&common, _)) = counts.iter().max_by_key(|(_, n)| **n) else {
        return Vec::new();
    };
    hcas.iter()
        .zip(&models)
        .filter(|(_, m)| *m == common)
        .map(|(h, _)| h.clone())
        .collect()
}

/// GPU slots on one host: its ranks, or the world spread evenly over the
/// job's hosts, or the highest local rank, whichever is most.
fn slots_per_host(ranks: &[&RankInfo], even: u32) -> usize {
    let top_local = ranks
        .iter()
        .filter_map(|r| r.local_rank)
        .max()
        .map_or(0, |l| l + 1);
    (ranks.len() as u32).max(even).max(top_local) as usize
}

/// The RDMA devices each host's snapshots, kernel log and RDMA counter
/// dumps name, in probe order (`mlx5_2` before `mlx5_10`).
fn hcas_by_host<'j>(job: &'j Job) -> BTreeMap<String, Vec<String>> {
    let mut sets: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut add = |host: Option<&str>, dev: &'j str| {
        if let Some(h) = host {
            sets.entry(short_host_of(h)).or_default().insert(dev);
        }
    };
    for p in &job.ports {
        add(p.host.as_deref(), &p.device);
    }
    for g in &job.gids {
        add(g.host.as_deref(), &g.device);
    }
    for (h, devices) in &job.kernel.hosts {
        for n in devices.nics.values() {
            if let Some(ib) = n.ibdev.as_deref() {
                add(Some(h), ib);
            }
        }
    }
    // Dumps under /sys/class/infiniband/<dev> and `rdma statistic` name
    // RDMA devices (perfquery's LIDs and ethtool's netdevs do not).
    for ((h, dev), src) in &job.counter_devices {
        let names_hca = matches!(
            src,
            CounterSource::Sysfs | CounterSource::HwCounters | CounterSource::RdmaStatistic
        );
        if names_hca {
            add(h.as_deref(), dev);
        }
    }
    sets.into_iter()
        .map(|(h, set)| {
            let mut v: Vec<String> = set.into_iter().map(str::to_string).collect();
            v.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
            (h, v)
        })
        .collect()
}

/// Where a netdev sits in PCI order, from its predictable name
/// (`enp26s0f1np1`, `enP1p3s0np0`: domain, bus, slot, function, port) or
/// its IPoIB number (`ib3`). `None` for names that do not say (`eth0`).
fn pci_order(netdev: &str) -> Option<[u64; 5]> {
    static NAME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^en(?:P(\d+))?p(\d+)s(\d+)(?:f(\d+))?(?:np(\d+))?$").expect("valid")
    });
    if let Some(n) = netdev.strip_prefix("ib") {
        return n.parse().ok().map(|n| [0, 0, 0, 0, n]);
    }
    let c = NAME.captures(netdev)?;
    let num = |i: usize| c.get(i).map_or(Some(0), |m| m.as_str().parse().ok());
    Some([num(1)?, num(2)?, num(3)?, num(4)?, num(5)?])
}

/// `mlx5_10` → ("mlx5_", 10): device names sort by their trailing number.
fn natural_key(name: &str) -> (&str, u64, &str) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = name.split_at(name.len() - digits);
    (stem, num.parse().unwrap_or(0), name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PortSnapshot;

    /// Two hosts of four ranks each, NCCL INFO off, `ibstat` on both.
    fn quiet_job() -> Job {
        let hosts: Vec<(u32, &str)> = (0..8)
            .map(|r| (r, if r < 4 { "n1" } else { "n2" }))
            .collect();
        let mut job = Job {
            world_size: Some(8),
            ..Job::with_ranks_on(&hosts)
        };
        for (rank, info) in job.ranks.iter_mut() {
            info.local_rank = Some(rank % 4);
        }
        for host in ["n1", "n2"] {
            for dev in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] {
                job.ports.push(PortSnapshot {
                    host: Some(host.into()),
                    device: dev.into(),
                    port: Some(1),
                    ..PortSnapshot::default()
                });
            }
        }
        job
    }

    #[test]
    fn one_nic_per_gpu_makes_local_rank_k_the_likely_user_of_the_kth() {
        let job = quiet_job();
        let u = NicUse::new(&job);
        assert_eq!(u.of(Some("n2"), "mlx5_1"), Use::Likely(BTreeSet::from([5])));
        assert_eq!(u.of(Some("n2"), "mlx5_1").as_flag(), None);
    }

    /// NCCL_DEBUG=WARN: only rank 4 of n2 is known, but n2's four workers
    /// each left an (empty) `nccl.n2.<pid>` file: four GPU slots, four HCAs.
    #[test]
    fn worker_files_count_a_hosts_gpu_slots_when_its_ranks_do_not() {
        let mut job = Job {
            world_size: None,
            ..Job::with_ranks_on(&[(4, "n2")])
        };
        for dev in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] {
            job.ports.push(PortSnapshot {
                host: Some("n2".into()),
                device: dev.into(),
                port: Some(1),
                ..PortSnapshot::default()
            });
        }
        assert_eq!(NicUse::new(&job).likely_nic_of("n2", 4), None);
        for pid in 100..104 {
            job.files.push(crate::model::FileInfo {
                hints: crate::model::PathHints {
                    host: Some("n2".into()),
                    pid: Some(pid),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        assert_eq!(job.ranks_at_least(), 4);
        assert_eq!(NicUse::new(&job).likely_nic_of("n2", 4), Some("mlx5_0"));
    }

    #[test]
    fn a_nic_count_that_does_not_match_the_gpus_stays_unknown() {
        let mut job = quiet_job();
        job.ports.push(PortSnapshot {
            host: Some("n1".into()),
            device: "mlx5_4".into(),
            port: Some(1),
            ..PortSnapshot::default()
        });
        let u = NicUse::new(&job);
        assert_eq!(u.of(Some("n1"), "mlx5_0"), Use::Unknown);
        assert_eq!(u.of(Some("n2"), "mlx5_0"), Use::Likely(BTreeSet::from([4])));
    }

    #[test]
    fn predictable_netdev_names_follow_pci_order_onto_the_hcas() {
        let mut job = quiet_job();
        // Bus 0x5f, 0x1a, 0x3c, 0x2c: PCI order is enp26, enp44, enp60, enp95.
        for nd in ["enp95s0np0", "enp26s0np0", "enp60s0np0", "enp44s0np0"] {
            job.counter_devices
                .insert((Some("n1".into()), nd.into()), CounterSource::Ethtool);
        }
        let u = NicUse::new(&job);
        assert_eq!(u.hca_of(Some("n1"), "enp26s0np0"), "mlx5_0");
        assert_eq!(u.hca_of(Some("n1"), "enp60s0np0"), "mlx5_2");
        assert_eq!(u.hca_of(Some("n1"), "enp95s0np0"), "mlx5_3");
        assert_eq!(
            u.of(Some("n1"), "enp44s0np0"),
            Use::Likely(BTreeSet::from([1]))
        );
    }

    #[test]
    fn a_netdev_no_table_ties_to_an_hca_is_of_unknown_use() {
        let mut job = quiet_job();
        job.ranks.get_mut(&0).unwrap().nics_listed = vec![("mlx5_0".into(), Some(1))];
        job.counter_devices
            .insert((Some("n1".into()), "eth7".into()), CounterSource::Ethtool);
        let u = NicUse::new(&job);
        assert_eq!(u.of(Some("n1"), "eth7"), Use::Unknown);
    }

    #[test]
    fn a_bond_member_belongs_to_the_lag_device_on_its_bond() {
        let mut job = quiet_job();
        job.ports.push(PortSnapshot {
            host: Some("n1".into()),
            device: "mlx5_bond_1".into(),
            port: Some(1),
            netdev: Some("bond1".into()),
            ..PortSnapshot::default()
        });
        let member = |bond: Option<&str>, netdev: &str| crate::model::BondSlave {
            host: Some("n1".into()),
            bond: bond.map(str::to_string),
            netdev: netdev.into(),
            up: Some(true),
            speed_mbps: None,
            link_failures: None,
            origin: None,
            line: None,
        };
        job.bond_slaves = vec![
            member(Some("bond1"), "ens4f0np0"),
            member(Some("bond1"), "ens4f1np1"),
            member(None, "ens5f0np0"),
        ];
        let u = NicUse::new(&job);
        assert_eq!(u.hca_of(Some("n1"), "ens4f0np0"), "mlx5_bond_1");
        assert_eq!(u.hca_of(Some("n1"), "ens4f1np1"), "mlx5_bond_1");
        assert_eq!(u.hca_of(Some("n1"), "ens5f0np0"), "ens5f0np0");
        assert_eq!(u.hca_of(Some("n2"), "ens4f0np0"), "ens4f0np0");
    }

    #[test]
    fn a_storage_nic_of_another_model_is_left_out_of_the_guess_ibstat() {
        let mut job = quiet_job();
        for p in &mut job.ports {
            p.link_layer = Some("InfiniBand".into());
            p.rate_gbps = Some(400.0);
        }
        job.ports.push(PortSnapshot {
            host: Some("n2".into()),
            device: "mlx5_4".into(),
            port: Some(1),
            link_layer: Some("Ethernet".into()),
            rate_gbps: Some(100.0),
            ..PortSnapshot::default()
        });
        let u = NicUse::new(&job);
        assert_eq!(u.of(Some("n2"), "mlx5_1"), Use::Likely(BTreeSet::from([5])));
        assert_eq!(u.of(Some("n2"), "mlx5_4"), Use::Unknown);
        // Alike, five HCAs for four slots say nothing.
        job.ports.last_mut().unwrap().link_layer = Some("InfiniBand".into());
        job.ports.last_mut().unwrap().rate_gbps = Some(400.0);
        let u = NicUse::new(&job);
        assert_eq!(u.of(Some("n2"), "mlx5_1"), Use::Unknown);
    }

    #[test]
    fn pci_order_reads_predictable_and_ipoib_names() {
        assert_eq!(pci_order("enp26s0np0"), Some([0, 26, 0, 0, 0]));
        assert_eq!(pci_order("enP1p3s0f1np1"), Some([1, 3, 0, 1, 1]));
        assert_eq!(pci_order("ib3"), Some([0, 0, 0, 0, 3]));
        assert_eq!(pci_order("eth0"), None);
        assert!(natural_key("mlx5_2") < natural_key("mlx5_10"));
    }
}
