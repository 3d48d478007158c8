//! Cross-host checks of the fabric snapshots: ports that are not Active /
//! LinkUp, no subnet manager, rates or widths below the fabric's usual, MTUs
//! or link layers that differ, bad BERs, and RoCE GID tables NCCL cannot use.
//!
//! "The fabric's usual" is the most common value among comparable ports:
//! Active ones of the same link layer and NIC family (firmware major), so a
//! 100G front-end NIC is not held against 400G GPU rails.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::Serialize;

use crate::model::build::phase_of_path;
use crate::model::{CauseKind, GidEntry, Job, Phase, PortSnapshot, SourceLine};

use super::counter_review::place;
use super::nic_use::{NicUse, Use};

/// Effective BER (after FEC) worse than this is an error.
const MAX_EFFECTIVE_BER: f64 = 1e-12;
/// Raw BER (before FEC) worse than this deserves a look on HDR/NDR links.
const MAX_RAW_BER: f64 = 1e-6;
/// NCCL picks the RoCE GID itself from this version on.
const NCCL_AUTO_GID: (u32, u32) = (2, 21);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    PortNotActive,
    // Snapshots of one port, in order, show it down and then Active again.
    LinkCameBack,
    NoSubnetManager,
    PhysNotLinkUp,
    RateBelowFabric,
    WidthBelowFabric,
    MtuMismatch,
    LinkLayerDiffers,
    HighBer,
    NoRoceV2Ipv4Gid,
    GidIndexUnusable,
    GidIndexDefault,
    // The host's tool no longer finds the RDMA device at all.
    DeviceVanished,
}

/// One thing the snapshots show that is wrong.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FabricFinding {
    pub kind: FindingKind,
    pub cause: CauseKind,
    pub host: Option<String>,
    pub device: String,
    pub port: Option<u32>,
    pub detail: String,
    /// Whether a rank of the job uses this NIC (`null`: the logs do not say).
    pub nic_used: Option<bool>,
    pub ranks: Vec<u32>,
    pub file: Option<String>,
    pub line: Option<u64>,
    #[serde(skip)]
    pub weight: f64,
    #[serde(skip)]
    pub cite: Option<SourceLine>,
}

/// (host, device, port).
type PortKey = (Option<String>, String, Option<u32>);

/// Weights of a finding by how the job uses the NIC: (used, unknown, unused).
type Weights = (f64, f64, f64);

/// Every finding, sorted by place then kind.
pub fn check(job: &Job, nics: &NicUse) -> Vec<FabricFinding> {
    let (ports, came_back) = merged_ports(job);
    let mut out = Vec::new();
    let mut add = |p: &PortSnapshot, kind, cause, w: Weights, field: &str, detail: String| {
        out.push(finding(job, nics, p, kind, cause, w, field, detail));
    };
    for p in &ports {
        port_state(p, &mut add);
        ber(p, &mut add);
    }
    for down in &came_back {
        let at = place(down.host.as_deref(), &down.device, down.port);
        add(
            down,
            FindingKind::LinkCameBack,
            CauseKind::LinkFlap,
            (0.55, 0.35, 0.1),
            "state",
            format!(
                "{at} was {} (physical state {}) in one snapshot and Active in a later one: the link went down and came back",
                down.state.as_deref().unwrap_or("?"),
                down.phys_state.as_deref().unwrap_or("?")
            ),
        );
    }
    below_fabric(&ports, &mut add);
    mtu(&ports, &mut add);
    link_layer(&ports, nics, &mut add);
    out.extend(gid_findings(job, &ports, nics));
    out.sort_by(|a, b| {
        (&a.host, &a.device, a.port, a.kind).cmp(&(&b.host, &b.device, b.port, b.kind))
    });
    out
}

/// Where a snapshot of no known phase sorts: between before and after.
const UNKNOWN_PHASE: u8 = 1;

/// One snapshot per port: every tool's view folded together, later phases
/// (after the job) over earlier ones; and, of each port whose snapshots in
/// that order show it down (Down, Polling) and later Active again, the
/// snapshot that saw it down.
fn merged_ports(job: &Job) -> (Vec<PortSnapshot>, Vec<PortSnapshot>) {
    let rank = |p: &PortSnapshot| {
        let phase = p
            .origin
            .map_or(Phase::Unknown, |o| phase_of_path(job.file_path(o.file)));
        let order: u8 = match phase {
            Phase::Before => 0,
            Phase::Unknown => UNKNOWN_PHASE,
            Phase::After => 2,
        };
        (order, p.origin)
    };
    // Each port's snapshots side by side, earlier phases first; one copy
    // per port is made (a 16k-rank job has 50k snapshots of 16k ports).
    let mut sorted: Vec<_> = job
        .ports
        .iter()
        .map(|p| ((p.host.as_deref(), p.device.as_str(), p.port), rank(p), p))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut came_back = Vec::new();
    let merged = sorted
        .chunk_by(|a, b| a.0 == b.0)
        .map(|group| {
            let snapshots = group.iter().map(|(_, order, p)| (order.0, *p));
            if let Some(down) = down_then_active(snapshots) {
                came_back.push(down.clone());
            }
            let mut base = group[0].2.clone();
            for (_, _, p) in &group[1..] {
                overlay(&mut base, p);
            }
            base.lines.shrink_to_fit();
            base
        })
        .collect();
    (merged, came_back)
}

/// The last snapshot that saw the port down before one saw it Active again
/// (snapshots by phase, then file and line). Only where the order is known:
/// before the job, then after it, or a later line of the same file (a tool
/// run again and again); a file of no phase may have been taken at any
/// time.
fn down_then_active<'a>(
    snapshots: impl Iterator<Item = (u8, &'a PortSnapshot)>,
) -> Option<&'a PortSnapshot> {
    let mut down: Option<(u8, &PortSnapshot)> = None;
    for (phase, p) in snapshots {
        match (p.state.as_deref(), down) {
            (Some("Active"), Some((down_phase, d))) => {
                let same_file = d.origin.map(|o| o.file) == p.origin.map(|o| o.file);
                let known = |ph: u8| ph != UNKNOWN_PHASE;
                if (down_phase < phase && known(down_phase) && known(phase)) || same_file {
                    return Some(d);
                }
            }
            (Some("Down"), _) => down = Some((phase, p)),
            _ => {}
        }
    }
    None
}

fn overlay(base: &mut PortSnapshot, p: &PortSnapshot) {
    macro_rules! take {
        ($($f:ident),*) => { $( if p.$f.is_some() { base.$f = p.$f.clone(); } )* };
    }
    take!(
        state,
        phys_state,
        width,
        link_layer,
        active_mtu,
        max_mtu,
        lid,
        sm_lid,
        netdev,
        firmware,
        effective_ber,
        raw_ber,
        recommendation
    );
    if p.rate_gbps.is_some() {
        base.rate_gbps = p.rate_gbps;
        base.rate_placeholder = p.rate_placeholder;
    }
    for (k, v) in p.lines.iter() {
        base.lines.insert(k, v.clone());
    }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    job: &Job,
    nics: &NicUse,
    p: &PortSnapshot,
    kind: FindingKind,
    cause: CauseKind,
    w: Weights,
    field: &str,
    detail: String,
) -> FabricFinding {
    let usage = nics.of(p.host.as_deref(), &p.device);
    let cite = p
        .lines
        .get(field)
        .or_else(|| p.lines.values().next())
        .cloned();
    FabricFinding {
        kind,
        cause,
        host: p.host.clone(),
        device: p.device.clone(),
        port: p.port,
        detail,
        nic_used: usage.as_flag(),
        ranks: usage.ranks().into_iter().collect(),
        file: cite
            .as_ref()
            .map(|c| job.file_path(c.origin.file).to_string()),
        line: cite.as_ref().map(|c| c.origin.line),
        weight: weight_for(w, &usage),
        cite,
    }
}

fn weight_for((used, unknown, unused): Weights, usage: &Use) -> f64 {
    match usage {
        Use::Used(_) => used,
        Use::Likely(_) | Use::Unknown => unknown,
        Use::Unused => unused,
    }
}

/// The callback every check reports through.
trait Report: FnMut(&PortSnapshot, FindingKind, CauseKind, Weights, &str, String) {}
impl<F: FnMut(&PortSnapshot, FindingKind, CauseKind, Weights, &str, String)> Report for F {}

fn port_state(p: &PortSnapshot, add: &mut impl Report) {
    let at = place(p.host.as_deref(), &p.device, p.port);
    let ib = p.link_layer.as_deref() != Some("Ethernet");
    if p.vanished {
        return add(
            p,
            FindingKind::DeviceVanished,
            CauseKind::HcaFault,
            (0.55, 0.35, 0.15),
            "state",
            format!(
                "{} on {} is gone: the host's ibstat no longer finds it (the driver let go of it after a fault, or its PCI function stopped answering)",
                p.device,
                p.host.as_deref().unwrap_or("?")
            ),
        );
    }
    match p.state.as_deref() {
        Some("Initializing" | "Armed") if ib => add(
            p,
            FindingKind::NoSubnetManager,
            CauseKind::PortDegraded,
            (0.6, 0.35, 0.15),
            "state",
            format!(
                "{at} is {} with the link up: no subnet manager configured it",
                p.state.as_deref().unwrap_or("?")
            ),
        ),
        Some("Active") if p.link_layer.as_deref() == Some("InfiniBand") && p.sm_lid == Some(0) => {
            add(
                p,
                FindingKind::NoSubnetManager,
                CauseKind::PortDegraded,
                (0.45, 0.25, 0.1),
                "sm_lid",
                format!("{at} reports no subnet manager (SM lid 0)"),
            )
        }
        Some(s) if s != "Active" => add(
            p,
            FindingKind::PortNotActive,
            CauseKind::PortDegraded,
            (0.6, 0.3, 0.1),
            "state",
            format!(
                "{at} is {s} (physical state {})",
                p.phys_state.as_deref().unwrap_or("?")
            ),
        ),
        _ => {
            if let Some(ph) = p.phys_state.as_deref().filter(|s| *s != "LinkUp") {
                add(
                    p,
                    FindingKind::PhysNotLinkUp,
                    CauseKind::PortDegraded,
                    (0.5, 0.25, 0.1),
                    "phys_state",
                    format!("{at} physical state is {ph}, not LinkUp"),
                );
            }
        }
    }
}

fn ber(p: &PortSnapshot, add: &mut impl Report) {
    let at = place(p.host.as_deref(), &p.device, p.port);
    let advice = p
        .recommendation
        .as_deref()
        .map(|r| format!("; mlxlink recommends: {r}"))
        .unwrap_or_default();
    if let Some(b) = p.effective_ber.filter(|b| *b > MAX_EFFECTIVE_BER) {
        add(
            p,
            FindingKind::HighBer,
            CauseKind::LinkFlap,
            (0.5, 0.35, 0.15),
            "effective_ber",
            format!("{at} effective BER {b:e} is worse than {MAX_EFFECTIVE_BER:e}{advice}"),
        );
    } else if let Some(b) = p.raw_ber.filter(|b| *b > MAX_RAW_BER) {
        add(
            p,
            FindingKind::HighBer,
            CauseKind::LinkFlap,
            (0.3, 0.2, 0.1),
            "raw_ber",
            format!("{at} raw BER {b:e} is worse than {MAX_RAW_BER:e}{advice}"),
        );
    }
}

/// Ports that take part in fabric-wide comparisons.
fn comparable(p: &PortSnapshot) -> bool {
    p.state.as_deref() == Some("Active") && !p.rate_placeholder
}

/// NIC family: link layer and firmware major (20 = CX-6, 22 = CX-6 Dx, 28 = CX-7).
fn family(p: &PortSnapshot) -> (String, String) {
    let fw = p
        .firmware
        .as_deref()
        .and_then(|f| f.split('.').next())
        .unwrap_or("");
    (p.link_layer.clone().unwrap_or_default(), fw.to_string())
}

/// The most common value; ties go to the larger one.
fn mode<T: Ord + Clone>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(v, _)| v)
}

fn lanes(p: &PortSnapshot) -> Option<u32> {
    p.width
        .as_deref()?
        .trim_end_matches(['X', 'x'])
        .parse()
        .ok()
}

fn below_fabric(ports: &[PortSnapshot], add: &mut impl Report) {
    let mut groups: BTreeMap<(String, String), Vec<&PortSnapshot>> = BTreeMap::new();
    for p in ports.iter().filter(|p| comparable(p)) {
        groups.entry(family(p)).or_default().push(p);
    }
    for group in groups.values().filter(|g| g.len() >= 2) {
        let rate = |p: &PortSnapshot| p.rate_gbps.map(|r| (r * 10.0).round() as u64);
        if let Some(usual) = mode(group.iter().filter_map(|p| rate(p))) {
            for p in group.iter().filter(|p| rate(p).is_some_and(|r| r < usual)) {
                let at = place(p.host.as_deref(), &p.device, p.port);
                add(
                    p,
                    FindingKind::RateBelowFabric,
                    CauseKind::PortDegraded,
                    (0.45, 0.25, 0.1),
                    "rate",
                    format!(
                        "{at} runs at {} Gb/s; the fabric's other ports run {} Gb/s",
                        p.rate_gbps.unwrap_or(0.0),
                        usual as f64 / 10.0
                    ),
                );
            }
        }
        if let Some(usual) = mode(group.iter().filter_map(|p| lanes(p))) {
            for p in group.iter().filter(|p| lanes(p).is_some_and(|l| l < usual)) {
                let at = place(p.host.as_deref(), &p.device, p.port);
                add(
                    p,
                    FindingKind::WidthBelowFabric,
                    CauseKind::PortDegraded,
                    (0.45, 0.25, 0.1),
                    "width",
                    format!(
                        "{at} links {} lanes wide; the fabric's other ports use {usual}",
                        lanes(p).unwrap_or(0)
                    ),
                );
            }
        }
    }
}

fn mtu(ports: &[PortSnapshot], add: &mut impl Report) {
    let mut groups: BTreeMap<String, Vec<&PortSnapshot>> = BTreeMap::new();
    for p in ports
        .iter()
        .filter(|p| comparable(p) && p.active_mtu.is_some())
    {
        groups
            .entry(p.link_layer.clone().unwrap_or_default())
            .or_default()
            .push(p);
    }
    for group in groups.values() {
        let Some(usual) = mode(group.iter().filter_map(|p| p.active_mtu)) else {
            continue;
        };
        for p in group.iter().filter(|p| p.active_mtu != Some(usual)) {
            let at = place(p.host.as_deref(), &p.device, p.port);
            add(
                p,
                FindingKind::MtuMismatch,
                CauseKind::MtuMismatch,
                (0.5, 0.3, 0.15),
                "mtu",
                format!(
                    "active MTU {} on {at}; the fabric's other ports use {usual}",
                    p.active_mtu.unwrap_or(0)
                ),
            );
        }
    }
}

/// Among the NICs the job uses, one whose link layer differs from the rest.
fn link_layer(ports: &[PortSnapshot], nics: &NicUse, add: &mut impl Report) {
    let used: Vec<&PortSnapshot> = ports
        .iter()
        .filter(|p| p.link_layer.is_some())
        .filter(|p| matches!(nics.of(p.host.as_deref(), &p.device), Use::Used(_)))
        .collect();
    let Some(usual) = mode(used.iter().filter_map(|p| p.link_layer.clone())) else {
        return;
    };
    for p in used
        .iter()
        .filter(|p| p.link_layer.as_ref() != Some(&usual))
    {
        let at = place(p.host.as_deref(), &p.device, p.port);
        add(
            p,
            FindingKind::LinkLayerDiffers,
            CauseKind::PortDegraded,
            (0.4, 0.2, 0.1),
            "link_layer",
            format!(
                "{at} runs {}; the job's other NICs run {usual}",
                p.link_layer.as_deref().unwrap_or("?")
            ),
        );
    }
}

/// A GID finding before it is placed: the entry it cites, its kind, weights, text.
type GidIssue<'a> = (&'a GidEntry, FindingKind, Weights, String);

/// RoCE GID tables: a port without a routable (IPv4, RoCE v2) GID, or a GID
/// index NCCL is told (or defaults) to use that is link-local or RoCE v1.
fn gid_findings(job: &Job, ports: &[PortSnapshot], nics: &NicUse) -> Vec<FabricFinding> {
    let mut tables: BTreeMap<PortKey, Vec<&GidEntry>> = BTreeMap::new();
    for g in &job.gids {
        tables
            .entry((g.host.clone(), g.device.clone(), g.port))
            .or_default()
            .push(g);
    }
    let ethernet: BTreeSet<(Option<String>, String)> = ports
        .iter()
        .filter(|p| p.link_layer.as_deref() == Some("Ethernet"))
        .map(|p| (p.host.clone(), p.device.clone()))
        .collect();
    let forced: Vec<u32> = job
        .env
        .get("NCCL_IB_GID_INDEX")
        .map(|v| v.keys().filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_default();
    let default_index_0 = nccl_defaults_to_index_0(job);
    let mut out = Vec::new();
    for ((host, device, port), entries) in &tables {
        let roce = entries
            .iter()
            .any(|g| matches!(g.version.as_deref(), Some("v1" | "v2")))
            || ethernet.contains(&(host.clone(), device.clone()));
        if !roce {
            continue;
        }
        let at = place(host.as_deref(), device, *port);
        let mut issues = no_routable_gid(entries, &at);
        issues.extend(forced_index(entries, &forced, &at));
        if forced.is_empty() {
            issues.extend(default_index(entries, default_index_0, &at));
        }
        let snap = PortSnapshot {
            host: host.clone(),
            device: device.clone(),
            port: *port,
            ..PortSnapshot::default()
        };
        for (g, kind, w, detail) in issues {
            let mut f = finding(job, nics, &snap, kind, CauseKind::GidIndex, w, "", detail);
            f.cite = g.origin.map(|origin| SourceLine {
                origin,
                text: g.text.clone(),
            });
            f.file = g.origin.map(|o| job.file_path(o.file).to_string());
            f.line = g.origin.map(|o| o.line);
            out.push(f);
        }
    }
    out
}

fn no_routable_gid<'a>(entries: &[&'a GidEntry], at: &str) -> Vec<GidIssue<'a>> {
    if entries.iter().any(|g| usable(g)) {
        return Vec::new();
    }
    vec![(
        entries[0],
        FindingKind::NoRoceV2Ipv4Gid,
        (0.45, 0.25, 0.1),
        format!("{at} has no RoCE v2 GID with an IPv4 address: RoCE v2 cannot route from it"),
    )]
}

/// `NCCL_IB_GID_INDEX` pointing at a missing, link-local or v1 entry.
fn forced_index<'a>(entries: &[&'a GidEntry], forced: &[u32], at: &str) -> Vec<GidIssue<'a>> {
    let mut out = Vec::new();
    for &idx in forced {
        let w = (0.6, 0.45, 0.15);
        match entries.iter().find(|g| g.index == idx) {
            Some(g) if !usable(g) => out.push((
                *g,
                FindingKind::GidIndexUnusable,
                w,
                format!(
                    "NCCL_IB_GID_INDEX={idx} points at {} on {at}, a {} entry that does not route",
                    g.gid,
                    kind_of(g)
                ),
            )),
            None => out.push((
                entries[0],
                FindingKind::GidIndexUnusable,
                w,
                format!("NCCL_IB_GID_INDEX={idx} but {at} has no GID at index {idx}"),
            )),
            _ => {}
        }
    }
    out
}

/// NCCL before 2.21 uses index 0 when not told otherwise; that entry is
/// usually the link-local RoCE v1 one.
fn default_index<'a>(
    entries: &[&'a GidEntry],
    defaults_to_0: Option<bool>,
    at: &str,
) -> Option<GidIssue<'a>> {
    let old = defaults_to_0?;
    let good = entries.iter().find(|g| usable(g))?;
    let first = entries
        .iter()
        .find(|g| g.index == 0)
        .filter(|g| !usable(g))?;
    let (w, when) = if old {
        ((0.45, 0.35, 0.1), "This NCCL (< 2.21)")
    } else {
        ((0.25, 0.2, 0.1), "NCCL older than 2.21")
    };
    Some((
        *first,
        FindingKind::GidIndexDefault,
        w,
        format!(
            "{when} uses GID index 0 unless NCCL_IB_GID_INDEX is set; on {at} that is {} ({}), while index {} is the routable RoCE v2 entry",
            first.gid,
            kind_of(first),
            good.index
        ),
    ))
}

/// An IPv4-mapped RoCE v2 GID: one that routes between hosts.
fn usable(g: &GidEntry) -> bool {
    g.version.as_deref() == Some("v2") && g.ipv4.is_some()
}

fn kind_of(g: &GidEntry) -> String {
    let scope = if g.gid.to_ascii_lowercase().starts_with("fe80") {
        "link-local"
    } else if g.ipv4.is_some() {
        "IPv4"
    } else {
        "non-IPv4"
    };
    format!("{scope} RoCE {}", g.version.as_deref().unwrap_or("?"))
}

/// `Some(true)`: every NCCL seen is older than 2.21 (GID index 0 by default);
/// `Some(false)`: the version is not known; `None`: NCCL chooses the GID.
fn nccl_defaults_to_index_0(job: &Job) -> Option<bool> {
    let versions: Vec<(u32, u32)> = job
        .nccl_versions
        .iter()
        .filter_map(|v| crate::model::build::nccl_major_minor(v))
        .collect();
    if versions.is_empty() {
        Some(false)
    } else if versions.iter().all(|&v| v < NCCL_AUTO_GID) {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FileId, Origin};

    fn port(host: &str, dev: &str, state: &str, rate: f64, mtu: u32) -> PortSnapshot {
        let line = SourceLine {
            origin: Origin {
                file: FileId(0),
                line: 1,
            },
            text: "State: x".into(),
        };
        PortSnapshot {
            host: Some(host.into()),
            device: dev.into(),
            port: Some(1),
            state: Some(state.into()),
            phys_state: Some(
                if state == "Down" {
                    "Disabled"
                } else {
                    "LinkUp"
                }
                .into(),
            ),
            rate_gbps: Some(rate),
            rate_placeholder: state == "Down",
            link_layer: Some("InfiniBand".into()),
            active_mtu: Some(mtu),
            firmware: Some("28.39.1002".into()),
            lines: crate::model::sys::LineMap::from([("state", line)]),
            ..PortSnapshot::default()
        }
    }

    fn kinds(job: &Job) -> Vec<(FindingKind, String)> {
        check(job, &NicUse::new(job))
            .into_iter()
            .map(|f| (f.kind, f.host.unwrap_or_default()))
            .collect()
    }

    #[test]
    fn ports_below_the_fabric_and_odd_mtus() {
        let job = Job {
            ports: vec![
                port("a1", "mlx5_0", "Active", 400.0, 4096),
                port("a2", "mlx5_0", "Active", 400.0, 4096),
                port("a3", "mlx5_0", "Active", 200.0, 2048),
                port("a4", "mlx5_0", "Down", 40.0, 4096),
                port("a5", "mlx5_0", "Initializing", 400.0, 4096),
                PortSnapshot {
                    sm_lid: Some(0),
                    ..port("a6", "mlx5_0", "Active", 400.0, 4096)
                },
            ],
            ..Job::default()
        };
        let k = kinds(&job);
        assert!(
            k.contains(&(FindingKind::RateBelowFabric, "a3".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(FindingKind::MtuMismatch, "a3".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(FindingKind::PortNotActive, "a4".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(FindingKind::NoSubnetManager, "a5".into())),
            "{k:?}"
        );
        // The placeholder rate of a Down port is not compared.
        assert!(
            !k.contains(&(FindingKind::RateBelowFabric, "a4".into())),
            "{k:?}"
        );
    }

    #[test]
    fn bad_ber_is_a_link_finding() {
        let mut p = port("b1", "mlx5_1", "Active", 400.0, 4096);
        p.effective_ber = Some(1e-10);
        let job = Job {
            ports: vec![p],
            ..Job::default()
        };
        let f = check(&job, &NicUse::new(&job));
        assert_eq!(f[0].kind, FindingKind::HighBer);
        assert_eq!(f[0].cause, CauseKind::LinkFlap);
    }

    fn gid(index: u32, gid: &str, ipv4: Option<&str>, version: &str) -> GidEntry {
        GidEntry {
            host: Some("r1".into()),
            device: "mlx5_bond_0".into(),
            port: Some(1),
            index,
            gid: gid.into(),
            ipv4: ipv4.map(str::to_string),
            version: Some(version.into()),
            netdev: Some("bond0".into()),
            origin: Some(Origin {
                file: FileId(0),
                line: u64::from(index) + 3,
            }),
            text: format!("mlx5_bond_0\t1\t{index}\t{gid}").into(),
        }
    }

    #[test]
    fn nccl_ib_gid_index_on_a_link_local_entry() {
        let mut job = Job {
            gids: vec![
                gid(0, "fe80:0000:0000:0000:0e42:a1ff:fead:479a", None, "v1"),
                gid(1, "fe80:0000:0000:0000:0e42:a1ff:fead:479a", None, "v2"),
                gid(
                    3,
                    "0000:0000:0000:0000:0000:ffff:0a60:531a",
                    Some("10.96.83.26"),
                    "v2",
                ),
            ],
            ..Job::default()
        };
        job.env.insert(
            "NCCL_IB_GID_INDEX".into(),
            BTreeMap::from([("1".into(), BTreeSet::from(["rank 0".to_string()]))]),
        );
        let f = check(&job, &NicUse::new(&job));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, FindingKind::GidIndexUnusable);
        assert_eq!(f[0].line, Some(4));
        assert!(
            f[0].detail.contains("link-local RoCE v2"),
            "{}",
            f[0].detail
        );
        job.env.clear();
        job.nccl_versions.insert("2.18.3".into());
        let f = check(&job, &NicUse::new(&job));
        assert_eq!(f[0].kind, FindingKind::GidIndexDefault);
        assert!(f[0].weight >= 0.35);
        job.nccl_versions.insert("2.21.5".into());
        assert!(check(&job, &NicUse::new(&job)).is_empty());
    }

    #[test]
    fn roce_ports_without_a_routable_gid() {
        let job = Job {
            gids: vec![gid(
                0,
                "fe80:0000:0000:0000:0e42:a1ff:fe40:29a1",
                None,
                "v1",
            )],
            ..Job::default()
        };
        let f = check(&job, &NicUse::new(&job));
        assert_eq!(f[0].kind, FindingKind::NoRoceV2Ipv4Gid);
        assert_eq!(f[0].cause, CauseKind::GidIndex);
    }
}
