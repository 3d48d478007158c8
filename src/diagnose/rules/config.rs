//! Hosts configured differently from the rest of the job: another NCCL
//! release, another network transport or plugin, other NCCL_* settings.
//!
//! The culprit is the set of hosts that differ. Most of the time that is the
//! minority; when the job splits evenly (two hosts, one each way) the logs
//! still lean one way: a setting someone wrote (`… set by environment to`)
//! deviates from a host that left the default, a socket transport is NCCL's
//! fallback from IB, an NCCL release other than the one the job's PyTorch
//! ships was loaded from elsewhere, and otherwise rank 0's host — where the
//! job's launch environment comes from — is the reference. Hosts whose
//! release no line states are dated by the formats of their lines.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::grammar::nccl_bugs::NcclVersion;
use crate::grammar::release_marks;
use crate::model::build::nccl_version_of;
use crate::model::{CauseKind, EventIdx, EventKind, Job};

use super::bundled::{self, Shipped};

use super::Ctx;

/// A setting not printed by a host that printed others.
const UNSET: &str = "(not set)";

const NETWORK: &str = "network transport";

/// One thing hosts can differ in, and what each host had.
struct Axis {
    what: String,
    /// value → hosts that had it.
    hosts: BTreeMap<String, BTreeSet<String>>,
    /// value → the first line that shows it.
    first: BTreeMap<String, EventIdx>,
    weight: f64,
    /// A value that is the deviation when the job splits evenly.
    deviant: fn(&str) -> bool,
    /// The value rank 0 showed, also where no line names its host.
    rank0: Option<String>,
    /// Hosts placed on a value by the format of their lines, not by a line
    /// stating it: (host, value, the line that dates it).
    dated: Vec<(String, String, EventIdx)>,
    /// What the value is expected to be where nothing else decides (the
    /// NCCL the job's PyTorch ships).
    expected: Option<Shipped>,
}

impl Axis {
    fn new(what: impl Into<String>, weight: f64, deviant: fn(&str) -> bool) -> Axis {
        Axis {
            what: what.into(),
            hosts: BTreeMap::new(),
            first: BTreeMap::new(),
            weight,
            deviant,
            rank0: None,
            dated: Vec::new(),
            expected: None,
        }
    }

    fn add(&mut self, value: &str, host: &str, idx: Option<EventIdx>) {
        self.hosts
            .entry(value.to_string())
            .or_default()
            .insert(host.to_string());
        if let Some(idx) = idx {
            self.first.entry(value.to_string()).or_insert(idx);
        }
    }

    /// Records what a line shows: for its host where known, and as rank 0's.
    fn note(&mut self, value: &str, host: Option<&str>, rank0: bool, idx: EventIdx) {
        if let Some(host) = host {
            self.add(value, host, Some(idx));
        }
        if rank0 && self.rank0.is_none() {
            self.rank0 = Some(value.to_string());
        }
    }

    fn differs(&self) -> bool {
        self.hosts.len() > 1
    }

    /// The hosts that differ from the rest, and whether a majority decided it.
    fn odd_hosts(&self, reference: Option<&str>) -> Option<(BTreeSet<String>, bool)> {
        if !self.differs() {
            return None;
        }
        let largest = self.hosts.values().map(BTreeSet::len).max()?;
        let majority: Vec<&String> = self
            .hosts
            .iter()
            .filter(|(_, h)| h.len() == largest)
            .map(|(v, _)| v)
            .collect();
        let others = |keep: &dyn Fn(&str) -> bool| -> BTreeSet<String> {
            self.hosts
                .iter()
                .filter(|(v, _)| keep(v))
                .flat_map(|(_, h)| h.iter().cloned())
                .collect()
        };
        if let [one] = majority[..] {
            return Some((others(&|v| v != one.as_str()), true));
        }
        let deviants = others(&|v| (self.deviant)(v));
        if !deviants.is_empty() && deviants.len() < self.host_count() {
            return Some((deviants, false));
        }
        if let Some(expected) = &self.expected {
            let mut matching = self.hosts.keys().filter(|v| expected.includes(v));
            if let (Some(one), None) = (matching.next(), matching.next()) {
                return Some((others(&|v| v != one.as_str()), false));
            }
        }
        let odd = match (reference, &self.rank0) {
            (Some(host), _) => others(&|v| !self.hosts[v].contains(host)),
            (None, Some(value)) if self.hosts.contains_key(value) => others(&|v| v != value),
            _ => return None,
        };
        (!odd.is_empty()).then_some((odd, false))
    }

    fn host_count(&self) -> usize {
        self.hosts.values().map(BTreeSet::len).sum()
    }
}

fn never(_: &str) -> bool {
    false
}

fn is_socket(network: &str) -> bool {
    network.eq_ignore_ascii_case("socket")
}

/// A host without the plugin the others load (installed on part of the
/// fleet, or not found on its library path).
fn is_internal(plugin: &str) -> bool {
    plugin == "internal"
}

fn is_set(value: &str) -> bool {
    value != UNSET
}

/// Different NCCL releases, transports or NCCL_* settings across the job.
pub fn config_mismatch(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let axes = axes(job);
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    let mut details = Vec::new();
    for axis in axes.iter().filter(|a| a.differs()) {
        details.push(describe(axis));
        for &idx in axis.first.values() {
            let source = match job.events[idx].kind {
                EventKind::NcclErrorReport | EventKind::TorchEnvSettings => Source::Torch,
                _ => Source::Nccl,
            };
            h.support(
                source,
                axis.weight,
                Some(idx),
                format!("the hosts differ in {}", axis.what),
            );
        }
    }
    for (host, value, idx) in &axes[0].dated {
        h.support(
            Source::Nccl,
            0.0,
            Some(*idx),
            format!("no line states {host}'s NCCL release; this line's format is printed by {value}'s range of releases and not the other's"),
        );
    }
    if let Some(network) = axes.iter().find(|a| a.what == NETWORK) {
        hosts_without_verbs(job, network, &mut h, &mut details);
    }
    // GPUDirect RDMA the only difference: its own texts (what the host
    // lacks, the module to load).
    let differing: Vec<&str> = axes
        .iter()
        .filter(|a| a.differs())
        .map(|a| a.what.as_str())
        .collect();
    if differing == [GDR] {
        h.value("variant", "gdr_use");
    }
    peer_mismatches(job, &mut h, &mut details);
    if axes[0].differs() {
        truncated_bootstrap(job, &mut h);
    }
    if h.support.is_empty() {
        return None;
    }
    if place(job, &axes, &mut h) == Some(false) {
        cite_shipped(&axes[0], &mut h);
        details.push(
            "the hosts split evenly: the side named is the one that sets a variable the other leaves at its default, falls back to sockets or lacks the network plugin the other loads, runs another NCCL than its PyTorch ships, or differs from rank 0's host".into(),
        );
    }
    details.dedup();
    h.value("detail", details.join("; "));
    Some(h)
}

/// The lines that say which NCCL the job's PyTorch ships, where the release
/// split evenly.
fn cite_shipped(version: &Axis, h: &mut Hypothesis) {
    let Some(shipped) = version.expected.as_ref().filter(|_| version.differs()) else {
        return;
    };
    let releases: Vec<String> = shipped.nccl.iter().map(ToString::to_string).collect();
    for (idx, torch) in &shipped.cites {
        let why = if shipped.from_packages {
            format!(
                "the hosts' packages ({torch}): their PyTorch loads NCCL {}",
                releases.join(" or ")
            )
        } else {
            format!(
                "this line's format is PyTorch {torch}'s, whose wheels ship NCCL {}",
                releases.join(" or ")
            )
        };
        h.support(Source::Torch, 0.0, Some(*idx), why);
    }
}

/// The NCCL release, the transport, then each NCCL_* setting, per host.
fn axes(job: &Job) -> Vec<Axis> {
    let mut version = Axis::new("NCCL release", 0.7, never);
    let mut network = Axis::new(NETWORK, 0.6, is_socket);
    let mut plugin = Axis::new("network plugin", 0.45, is_internal);
    let mut env: BTreeMap<String, Axis> = BTreeMap::new();
    let mut env_hosts = BTreeSet::new();
    let mut gdr = GdrUse::default();
    for (idx, ev) in job.events.iter().enumerate() {
        let host = job.host_of_event(ev);
        // Rank 0's values are the reference of an even split, even where
        // its host is not known.
        let rank0 = ev.who.rank == Some(0);
        if host.is_none() && !rank0 {
            continue;
        }
        if let Some(v) = nccl_version_of(ev) {
            version.note(v, host, rank0, idx);
        }
        match ev.kind {
            EventKind::NcclChannel => gdr.note(ev, host, idx),
            EventKind::NcclNetSelected => {
                if let Some(n) = ev.text_field("network") {
                    network.note(n, host, rank0, idx);
                }
            }
            // Which plugin, or only whether one loaded: a process running
            // the HPC-X plugin prints both its path and its name.
            EventKind::NcclNetPlugin => {
                let value = match ev.text_field("plugin") {
                    Some("internal") => "internal",
                    _ => "external",
                };
                plugin.note(value, host, rank0, idx);
            }
            EventKind::NcclEnvSetting => {
                let (Some(name), Some(value)) = (ev.text_field("name"), ev.text_field("value"))
                else {
                    continue;
                };
                if name.ends_with("_FILE") {
                    continue;
                }
                let axis = match host {
                    Some(host) => {
                        env_hosts.insert(host.to_string());
                        env.entry(name.to_string())
                            .or_insert_with(|| Axis::new(name, 0.45, is_set))
                    }
                    None => match env.get_mut(name) {
                        Some(axis) => axis,
                        None => continue,
                    },
                };
                axis.note(value, host, rank0, idx);
            }
            _ => {}
        }
    }
    if version.differs() {
        date_unstated_releases(job, &mut version);
        version.expected = bundled::shipped_nccl(job);
    }
    for axis in env.values_mut() {
        let with: BTreeSet<String> = axis.hosts.values().flatten().cloned().collect();
        for host in env_hosts.difference(&with) {
            axis.add(UNSET, host, None);
        }
    }
    let mut out = vec![version, network, plugin];
    out.extend(gdr.axis());
    out.extend(env.into_values());
    out
}

const GDR: &str = "GPUDirect RDMA";

/// Whether each host's NET channels over IB used GPUDirect RDMA
/// (`via NET/IB/0/GDRDMA`). Identical machines agree: a host whose every
/// such channel goes without it, where another's every one uses it, lacks
/// the peer-memory module (nvidia-peermem) or DMA-BUF support, and stages
/// every transfer through host memory (nccl#897). A host with some of each
/// (a NIC too far from some GPUs for NCCL_NET_GDR_LEVEL) is left out.
#[derive(Default)]
struct GdrUse {
    /// host → (first line with GDRDMA, first line without).
    hosts: BTreeMap<String, (Option<EventIdx>, Option<EventIdx>)>,
}

impl GdrUse {
    fn note(&mut self, ev: &crate::model::Event, host: Option<&str>, idx: EventIdx) {
        let Some(host) = host else { return };
        if ev.text_field("transport") != Some("NET/IB") {
            return;
        }
        let e = self.hosts.entry(host.to_string()).or_default();
        if ev.text_field("gdr").is_some() {
            e.0.get_or_insert(idx);
        } else {
            e.1.get_or_insert(idx);
        }
    }

    fn axis(self) -> Option<Axis> {
        let mut axis = Axis::new(GDR, 0.35, |v| v == "off");
        for (host, lines) in self.hosts {
            match lines {
                (Some(idx), None) => axis.add("on", &host, Some(idx)),
                (None, Some(idx)) => axis.add("off", &host, Some(idx)),
                _ => {}
            }
        }
        axis.differs().then_some(axis)
    }
}

/// Hosts whose release no line states join the side their line formats
/// fit (`grammars/releases.toml`), when they fit exactly one: a 64-rank job
/// in which one host's every rank printed its release and one victim on
/// another host printed the other is not an even split.
fn date_unstated_releases(job: &Job, version: &mut Axis) {
    let Ok(releases) = release_marks::builtin() else {
        return;
    };
    let marks = &releases.nccl;
    let stated: Vec<(String, NcclVersion)> = version
        .hosts
        .keys()
        .filter_map(|v| Some((v.clone(), NcclVersion::parse(v)?)))
        .collect();
    let known: BTreeSet<&str> = version
        .hosts
        .values()
        .flatten()
        .map(String::as_str)
        .collect();
    let kinds: BTreeSet<EventKind> = marks.iter().map(|m| m.event).collect();
    // host → (mark, the first line in its format)
    let mut seen: BTreeMap<&str, BTreeMap<usize, EventIdx>> = BTreeMap::new();
    for (idx, ev) in job.events_where(|k| kinds.contains(&k)) {
        let Some(host) = job.host_of_event(ev).filter(|h| !known.contains(h)) else {
            continue;
        };
        for (m, mark) in marks.iter().enumerate() {
            if mark.fits(ev) {
                seen.entry(host).or_default().entry(m).or_insert(idx);
            }
        }
    }
    let mut dated = Vec::new();
    for (host, fitted) in seen {
        let mut fits = stated
            .iter()
            .filter(|(_, v)| fitted.keys().all(|&m| marks[m].allows(v)));
        let (Some((value, _)), None) = (fits.next(), fits.next()) else {
            continue;
        };
        let idx = *fitted.values().min().expect("a host is seen with a mark");
        dated.push((host.to_string(), value.clone(), idx));
    }
    for (host, value, _) in &dated {
        version.add(value, host, None);
    }
    version.dated = dated;
}

fn describe(axis: &Axis) -> String {
    let values: Vec<String> = axis
        .hosts
        .iter()
        .map(|(v, hosts)| format!("{v} on {}", host_list(hosts)))
        .collect();
    format!("{}: {}", axis.what, values.join(", "))
}

fn host_list(hosts: &BTreeSet<String>) -> String {
    let mut names: Vec<&str> = hosts.iter().take(3).map(String::as_str).collect();
    if hosts.len() > 3 {
        names.push("…");
    }
    format!("{} host(s) ({})", hosts.len(), names.join(", "))
}

/// Culprit hosts and ranks from the strongest axis that singles some out:
/// an axis decided by a majority before one decided by a tie-break.
/// Returns whether a majority decided, `None` when no axis singles out any.
fn place(job: &Job, axes: &[Axis], h: &mut Hypothesis) -> Option<bool> {
    let reference = job.ranks.get(&0).and_then(|r| r.host.as_deref());
    let found: Vec<(BTreeSet<String>, bool)> =
        axes.iter().filter_map(|a| a.odd_hosts(reference)).collect();
    let (odd, by_majority) = found
        .iter()
        .find(|(_, by_majority)| *by_majority)
        .or(found.first())?;
    let first_rank = |host: &String| {
        job.hosts
            .get(host)
            .and_then(|i| i.ranks.first().copied())
            .unwrap_or(u32::MAX)
    };
    h.host = odd.iter().min_by_key(|host| first_rank(host)).cloned();
    h.ranks = odd
        .iter()
        .filter_map(|host| job.hosts.get(host))
        .flat_map(|info| info.ranks.iter().copied())
        .collect();
    Some(*by_majority)
}

/// Where some hosts run IB and others sockets, a socket host whose NCCL
/// could not load libibverbs says why it is on sockets: its image has no
/// RDMA user space.
fn hosts_without_verbs(job: &Job, network: &Axis, h: &mut Hypothesis, details: &mut Vec<String>) {
    if !network.differs() {
        return;
    }
    let on_sockets: BTreeSet<&str> = network
        .hosts
        .iter()
        .filter(|(value, _)| is_socket(value))
        .flat_map(|(_, hosts)| hosts.iter().map(String::as_str))
        .collect();
    let mut cited = BTreeSet::new();
    for (idx, ev) in job.events.iter().enumerate() {
        let missing = ev.kind == EventKind::NcclInstall
            && ev.text_field("what") == Some("verbs_library_missing");
        let Some(host) = job.host_of_event(ev).filter(|_| missing) else {
            continue;
        };
        if !on_sockets.contains(host) || !cited.insert(host) {
            continue;
        }
        details.push(format!(
            "NCCL on {host} could not load libibverbs, so it fell back to sockets (its image has no rdma-core)"
        ));
        h.support(
            Source::Nccl,
            0.1,
            Some(idx),
            "NCCL found no libibverbs on this host: it cannot use IB here and runs on sockets",
        );
    }
}

/// NCCL's own complaints that a peer runs another release or transport.
fn peer_mismatches(job: &Job, h: &mut Hypothesis, details: &mut Vec<String>) {
    for (idx, ev) in job
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::BootstrapError)
        .take(64)
    {
        match ev.text_field("error") {
            Some("version mismatch") => {
                details.push("NCCL versions differ between peers".into());
                h.support(
                    Source::Nccl,
                    0.8,
                    Some(idx),
                    "NCCL itself saw a version mismatch with a peer",
                );
            }
            // The peer's address arrived as bytes this release does not
            // lay out the same way: bootstrap messages of another release
            // (NVIDIA/nccl#1267). A weaker sign than a stated version.
            // With NCCL_SOCKET_IFNAME naming an interface the host lacks,
            // NCCL connects with an address it never filled in: that is
            // the interface rule's (setup.rs).
            Some("address family") if !job.env.contains_key("NCCL_SOCKET_IFNAME") => {
                details.push("a peer's bootstrap address did not decode".into());
                h.support(
                    Source::Nccl,
                    0.4,
                    Some(idx),
                    "a peer's address arrived in a layout this NCCL does not read: peers on different NCCL releases",
                );
            }
            Some("socket type mismatch") => {
                details.push("one side of a connection uses IB, the other sockets".into());
                h.support(
                    Source::Nccl,
                    0.6,
                    Some(idx),
                    "the two ends of a connection expected different transports",
                );
            }
            _ => {}
        }
    }
}

/// Bootstrap messages change size between releases: with mixed releases a
/// `Message truncated` is the mismatch showing, not a defect of one release.
fn truncated_bootstrap(job: &Job, h: &mut Hypothesis) {
    let truncated = job.events.iter().position(|e| {
        e.kind == EventKind::BootstrapError
            && e.text_field("error")
                .is_some_and(|t| t.starts_with("Message truncated"))
    });
    if let Some(idx) = truncated {
        h.support(
            Source::Nccl,
            0.7,
            Some(idx),
            "a bootstrap message had another size than expected: peers on different NCCL releases",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(deviant: fn(&str) -> bool, values: &[(&str, &str)]) -> Axis {
        let mut a = Axis::new("x", 0.5, deviant);
        for (value, host) in values {
            a.add(value, host, None);
        }
        a
    }

    fn hosts(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_minority_differs() {
        let a = axis(
            never,
            &[("2.21.5", "n1"), ("2.21.5", "n2"), ("2.18.3", "n3")],
        );
        assert_eq!(a.odd_hosts(Some("n3")), Some((hosts(&["n3"]), true)));
    }

    #[test]
    fn an_even_split_leans_to_the_explicit_setting_then_away_from_rank_0() {
        let set = axis(is_set, &[("1", "n1"), (UNSET, "n2")]);
        assert_eq!(set.odd_hosts(Some("n1")), Some((hosts(&["n1"]), false)));
        let net = axis(is_socket, &[("IB", "n1"), ("Socket", "n2")]);
        assert_eq!(net.odd_hosts(None), Some((hosts(&["n2"]), false)));
        let mut release = axis(never, &[("2.21.5", "n1"), ("2.18.3", "n2")]);
        assert_eq!(release.odd_hosts(Some("n1")), Some((hosts(&["n2"]), false)));
        assert_eq!(release.odd_hosts(None), None);
        // Rank 0 printed its release on a line that names no host.
        release.rank0 = Some("2.18.3".into());
        assert_eq!(release.odd_hosts(None), Some((hosts(&["n1"]), false)));
        release.rank0 = Some("2.20.5".into());
        assert_eq!(release.odd_hosts(None), None);
    }

    #[test]
    fn one_value_everywhere_is_no_mismatch() {
        let a = axis(never, &[("2.21.5", "n1"), ("2.21.5", "n2")]);
        assert!(!a.differs());
        assert_eq!(a.odd_hosts(Some("n1")), None);
    }
}
