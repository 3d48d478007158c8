//! sysfs counter dumps, in the shapes people collect them:
//!
//! - `grep "" /sys/class/infiniband/mlx5_0/ports/1/counters/*` (or `grep -H .`):
//!   `/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0`. The same
//!   dump often holds the port's `state`, `phys_state`, `rate` and
//!   `link_layer` files, read here into a port snapshot, and `gids/N`.
//! - mlnx-tools `show_counters`: `Port 1 hw counters:` then `name: value`.
//! - a plain list, `name value` or `name: value`, one counter a line.
//!
//! `lifespan` (a cache period) is kept; the counter knowledge marks it as
//! context. `N/A (no PMA)` values are not counters and count as unparsed.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::model::{CounterSource, GidEntry, PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    CounterAt, Line, TableCtx, UNKNOWN_DEVICE, leading_f64, normalize_phys_state, normalize_state,
    parse_u64, rate_is_placeholder,
};
use super::widths::{is_pma_name, sysfs_width};

/// (device, port) → the port files read so far.
type Ports = BTreeMap<(String, Option<u32>), PortSnapshot>;
/// (device, port, index) → GID entry.
type Gids = BTreeMap<(String, Option<u32>, u32), GidEntry>;

/// A sysfs path cut into the parts that matter.
#[derive(Debug, PartialEq)]
struct SysPath<'a> {
    device: Option<&'a str>,
    port: Option<u32>,
    /// `counters`, `hw_counters`, `gids`, `gid_attrs/types`, … or empty for port files.
    dir: Cow<'a, str>,
    name: &'a str,
}

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let path_device = ctx.device_in_path();
    let mut section_port: Option<u32> = None;
    let mut ports = Ports::new();
    let mut gids = Gids::new();
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(port) = section_header(text) {
            section_port = Some(port);
            continue;
        }
        let device = path_device.as_deref().unwrap_or(UNKNOWN_DEVICE);
        let ok = if text.starts_with('/') || text.contains("/counters/") {
            path_line(ctx, line, text, device, &mut ports, &mut gids, &mut out)
        } else {
            list_line(ctx, line, text, device, section_port, &mut out)
        };
        if !ok {
            out.unparsed += 1;
        }
    }
    out.records
        .extend(ports.into_values().map(|p| SysRecord::Port(Box::new(p))));
    out.records
        .extend(gids.into_values().map(|g| SysRecord::Gid(Box::new(g))));
    out
}

/// `Port 1 hw counters:` / `Port 1 counters:` (show_counters sections).
fn section_header(text: &str) -> Option<u32> {
    let rest = text.strip_prefix("Port ")?;
    let (num, tail) = rest.split_once(' ')?;
    tail.ends_with("counters:")
        .then(|| num.parse().ok())
        .flatten()
}

/// One `path:value` line.
fn path_line(
    ctx: &TableCtx,
    line: &Line<'_>,
    text: &str,
    fallback_device: &str,
    ports: &mut Ports,
    gids: &mut Gids,
    out: &mut TableParse,
) -> bool {
    let Some((path, value)) = text.split_once(':') else {
        return false;
    };
    let Some(p) = split_path(path) else {
        return false;
    };
    let device = p.device.unwrap_or(fallback_device);
    match p.dir.as_ref() {
        "counters" | "hw_counters" => {
            let Some(v) = parse_u64(value) else {
                return false;
            };
            let (source, width) = if p.dir == "counters" {
                (CounterSource::Sysfs, sysfs_width(p.name))
            } else {
                (CounterSource::HwCounters, None)
            };
            let at = CounterAt {
                device,
                port: p.port,
                name: p.name,
                source,
                width_bits: width,
            };
            out.records.push(ctx.counter(at, v, line));
            true
        }
        "" => port_file(ctx, line, device, p.port, p.name, value.trim(), ports),
        "gids" | "gid_attrs/types" | "gid_attrs/ndevs" => {
            gid_file(ctx, line, device, &p, value.trim(), gids)
        }
        _ => false,
    }
}

fn split_path(path: &str) -> Option<SysPath<'_>> {
    // Counter dumps are tens of thousands of lines: the path is cut once,
    // into slices of it on the stack (a sysfs path has about ten parts).
    let mut parts = [""; MAX_PATH_PARTS];
    let mut n = 0;
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        *parts.get_mut(n)? = seg;
        n += 1;
    }
    let segs = &parts[..n];
    let name = *segs.last()?;
    if let Some(i) = segs.iter().position(|s| *s == "ports") {
        let device = i.checked_sub(1).map(|d| segs[d]);
        let port = segs.get(i + 1)?.parse().ok();
        let dir = match segs.get(i + 2..n - 1) {
            Some([first, .., last]) => span_of(path, first, last),
            Some([only]) => Cow::Borrowed(*only),
            _ => Cow::Borrowed(""),
        };
        return Some(SysPath {
            device,
            port,
            dir,
            name,
        });
    }
    let dir = *segs.get(n.checked_sub(2)?)?;
    matches!(dir, "counters" | "hw_counters").then_some(SysPath {
        device: None,
        port: None,
        dir: Cow::Borrowed(dir),
        name,
    })
}

/// Deeper paths are not sysfs counter files.
const MAX_PATH_PARTS: usize = 32;

/// The path from segment `first` through segment `last` (both slices of
/// `path`), joined by single slashes as written; rebuilt only where the path
/// doubles a slash between them.
fn span_of<'a>(path: &'a str, first: &'a str, last: &'a str) -> Cow<'a, str> {
    let start = first.as_ptr() as usize - path.as_ptr() as usize;
    let end = last.as_ptr() as usize - path.as_ptr() as usize + last.len();
    let span = &path[start..end];
    if span.contains("//") {
        let parts: Vec<&str> = span.split('/').filter(|s| !s.is_empty()).collect();
        Cow::Owned(parts.join("/"))
    } else {
        Cow::Borrowed(span)
    }
}

/// `state:4: ACTIVE`, `rate:400 Gb/sec (4X NDR)`, `link_layer:InfiniBand`, …
fn port_file(
    ctx: &TableCtx,
    line: &Line<'_>,
    device: &str,
    port: Option<u32>,
    name: &str,
    value: &str,
    ports: &mut Ports,
) -> bool {
    let snap = ports
        .entry((device.to_string(), port))
        .or_insert_with(|| PortSnapshot {
            host: ctx.host.clone(),
            device: device.to_string(),
            port,
            origin: Some(ctx.origin(line)),
            ..PortSnapshot::default()
        });
    let key: &'static str = match name {
        "state" => {
            snap.state = Some(normalize_state(value));
            "state"
        }
        "phys_state" => {
            snap.phys_state = Some(normalize_phys_state(value));
            "phys_state"
        }
        "rate" => {
            snap.rate_gbps = leading_f64(value);
            snap.width = value
                .split_once('(')
                .and_then(|(_, w)| w.split_whitespace().next())
                .map(str::to_string);
            "rate"
        }
        "link_layer" => {
            snap.link_layer = Some(value.to_string());
            "link_layer"
        }
        "lid" => {
            snap.lid = parse_u64(value).map(|v| v as u32);
            "lid"
        }
        "sm_lid" => {
            snap.sm_lid = parse_u64(value).map(|v| v as u32);
            "sm_lid"
        }
        _ => return false,
    };
    snap.rate_placeholder = rate_is_placeholder(snap.state.as_deref(), snap.phys_state.as_deref());
    snap.lines.insert(key, ctx.source_line(line));
    true
}

/// `gids/3:0000:…:ffff:0a60:531a`, `gid_attrs/types/3:RoCE v2`, `gid_attrs/ndevs/3:bond0`.
fn gid_file(
    ctx: &TableCtx,
    line: &Line<'_>,
    device: &str,
    p: &SysPath<'_>,
    value: &str,
    gids: &mut Gids,
) -> bool {
    let Ok(index) = p.name.parse::<u32>() else {
        return false;
    };
    let entry = gids
        .entry((device.to_string(), p.port, index))
        .or_insert_with(|| GidEntry {
            host: ctx.host.clone(),
            device: device.to_string(),
            port: p.port,
            index,
            gid: String::new(),
            ipv4: None,
            version: None,
            netdev: None,
            origin: Some(ctx.origin(line)),
            text: line.raw.trim_end().into(),
        });
    match p.dir.as_ref() {
        "gids" => {
            entry.gid = value.to_string();
            entry.ipv4 = super::show_gids::ipv4_of_gid(value);
            entry.origin = Some(ctx.origin(line));
            entry.text = line.raw.trim_end().into();
        }
        "gid_attrs/types" => {
            entry.version = Some(super::show_gids::roce_version(value));
        }
        _ => entry.netdev = Some(value.to_string()).filter(|v| !v.is_empty()),
    }
    true
}

/// `name: value` / `name value` (show_counters, hand-made lists).
fn list_line(
    ctx: &TableCtx,
    line: &Line<'_>,
    text: &str,
    device: &str,
    port: Option<u32>,
    out: &mut TableParse,
) -> bool {
    let (name, value) = match text.split_once(':') {
        Some((n, v)) => (n.trim(), v.trim()),
        None => match text.split_once(char::is_whitespace) {
            Some((n, v)) => (n, v.trim()),
            None => return false,
        },
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return false;
    }
    let Some(v) = parse_u64(value) else {
        return false;
    };
    let (source, width) = if is_pma_name(name) {
        (CounterSource::Sysfs, sysfs_width(name))
    } else {
        (CounterSource::HwCounters, None)
    };
    let at = CounterAt {
        device,
        port,
        name,
        source,
        width_bits: width,
    };
    out.records.push(ctx.counter(at, v, line));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{counters, parse_text, ports};

    const GPUD_H100: &str = include_str!("../../../tests/data/tables/sysfs-gpud-h100-ndr.txt");

    #[test]
    fn sysfs_grep_dump_of_a_gpud_h100_connectx7() {
        let t = parse_text(TableKind::SysfsCounters, "node1/sysfs.txt", GPUD_H100);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        let xw = c.iter().find(|c| c.name == "port_xmit_wait").unwrap();
        assert_eq!(xw.value, 2489603687);
        assert_eq!(xw.width_bits, Some(32));
        assert_eq!(xw.device, "mlx5_0");
        assert_eq!(xw.port, Some(1));
        assert_eq!(xw.host.as_deref(), Some("node1"));
        let se = c.iter().find(|c| c.name == "symbol_error").unwrap();
        assert_eq!(se.width_bits, Some(16));
        assert_eq!(se.source, CounterSource::Sysfs);
        assert_eq!(se.origin.line, 19);
        let data = c.iter().find(|c| c.name == "port_rcv_data").unwrap();
        assert_eq!(data.width_bits, None);
        let hw = c.iter().find(|c| c.name == "roce_adp_retrans").unwrap();
        assert_eq!(hw.source, CounterSource::HwCounters);
        assert_eq!(hw.value, 3);
        let p = ports(&t);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].state.as_deref(), Some("Active"));
        assert_eq!(p[0].phys_state.as_deref(), Some("LinkUp"));
        assert_eq!(p[0].rate_gbps, Some(400.0));
        assert_eq!(p[0].width.as_deref(), Some("4X"));
        assert_eq!(p[0].link_layer.as_deref(), Some("InfiniBand"));
    }

    #[test]
    fn mlnx_tools_show_counters_sections() {
        let text =
            "Port 1 hw counters:\nduplicate_request: 0\nlifespan: 10\nout_of_sequence: 1811101\n";
        let t = parse_text(
            TableKind::SysfsCounters,
            "h/show_counters_mlx5_bond_0.txt",
            text,
        );
        let c = counters(&t);
        assert_eq!(c.len(), 3);
        assert_eq!(c[2].name, "out_of_sequence");
        assert_eq!(c[2].value, 1811101);
        assert_eq!(c[2].port, Some(1));
        assert_eq!(c[2].device, "mlx5_bond_0");
        assert_eq!(c[2].source, CounterSource::HwCounters);
    }

    #[test]
    fn plain_name_value_lists_and_junk() {
        let text = "symbol_error 12\nlink_downed: 3\nnot a counter line\nport_rcv_errors N/A (no PMA)\n\u{0}\u{1}";
        let t = parse_text(TableKind::SysfsCounters, "node9/mlx5_2/counters.txt", text);
        let c = counters(&t);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].width_bits, Some(8));
        assert_eq!(t.unparsed, 3);
    }

    #[test]
    fn paths_are_cut_alike_with_doubled_or_missing_slashes() {
        let p = split_path("/sys/class/infiniband//mlx5_0/ports/1/gid_attrs//types/3").unwrap();
        assert_eq!(
            (p.device, p.port, p.dir.as_ref(), p.name),
            (Some("mlx5_0"), Some(1), "gid_attrs/types", "3")
        );
        let p = split_path("mlx5_1/ports/2/hw_counters/out_of_buffer").unwrap();
        assert_eq!(
            (p.device, p.port, p.dir.as_ref(), p.name),
            (Some("mlx5_1"), Some(2), "hw_counters", "out_of_buffer")
        );
        let p = split_path("/sys/class/infiniband/mlx5_0/ports/1/state").unwrap();
        assert_eq!((p.dir.as_ref(), p.name), ("", "state"));
        let p = split_path("counters/symbol_error").unwrap();
        assert_eq!((p.device, p.dir.as_ref()), (None, "counters"));
        assert!(split_path("ports").is_none());
        assert!(split_path("/tmp/x/y").is_none());
        let deep = format!("{}mlx5_0/ports/1/counters/symbol_error", "a/".repeat(40));
        assert!(split_path(&deep).is_none(), "not a sysfs path");
    }

    #[test]
    fn gid_files_become_gid_entries() {
        let text = "/sys/class/infiniband/mlx5_0/ports/1/gids/3:0000:0000:0000:0000:0000:ffff:0a60:531a\n/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3:RoCE v2\n/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3:bond0\n";
        let t = parse_text(TableKind::SysfsCounters, "h1/gids.txt", text);
        let g: Vec<_> = t
            .records
            .iter()
            .filter_map(|r| match r {
                SysRecord::Gid(g) => Some(&**g),
                _ => None,
            })
            .collect();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].ipv4.as_deref(), Some("10.96.83.26"));
        assert_eq!(g[0].version.as_deref(), Some("v2"));
        assert_eq!(g[0].netdev.as_deref(), Some("bond0"));
    }
}
