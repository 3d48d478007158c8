//! `ibstatus` (a shell script over sysfs):
//!
//! ```text
//! Infiniband device 'mlx5_11' port 1 status:
//!     base lid:     0xffff
//!     state:         1: DOWN
//!     phys state:     3: Disabled
//!     rate:         10 Gb/sec (4X SDR)
//!     link_layer:     InfiniBand
//! ```
//!
//! Lids are hex; `0xffff` means never assigned. Tabs may have become spaces.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    Line, TableCtx, key_value, leading_f64, normalize_phys_state, normalize_state, parse_u64,
    rate_is_placeholder,
};

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:").unwrap()
});

/// The lid of a port the subnet manager never configured.
const UNASSIGNED_LID: u64 = 0xffff;

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut port: Option<PortSnapshot> = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(c) = HEADER.captures(text) {
            flush(&mut port, &mut out);
            port = Some(PortSnapshot {
                host: ctx.host.clone(),
                device: c["dev"].to_string(),
                port: c["port"].parse().ok(),
                origin: Some(ctx.origin(line)),
                ..PortSnapshot::default()
            });
            continue;
        }
        let read = match (port.as_mut(), key_value(text)) {
            (Some(p), Some((k, v))) => field(ctx, line, p, k, v),
            _ => false,
        };
        if !read {
            out.unparsed += 1;
        }
    }
    flush(&mut port, &mut out);
    out
}

fn flush(port: &mut Option<PortSnapshot>, out: &mut TableParse) {
    if let Some(mut p) = port.take() {
        p.rate_placeholder = rate_is_placeholder(p.state.as_deref(), p.phys_state.as_deref());
        out.records.push(SysRecord::Port(Box::new(p)));
    }
}

fn field(ctx: &TableCtx, line: &Line<'_>, p: &mut PortSnapshot, key: &str, value: &str) -> bool {
    let name: &'static str = match key {
        "state" => {
            p.state = Some(normalize_state(value));
            "state"
        }
        "phys state" => {
            p.phys_state = Some(normalize_phys_state(value));
            "phys_state"
        }
        "rate" => {
            p.rate_gbps = leading_f64(value);
            // `400 Gb/sec (4X NDR)`: the lane count is the width.
            p.width = value
                .split_once('(')
                .and_then(|(_, w)| w.split_whitespace().next())
                .map(str::to_string);
            "rate"
        }
        "base lid" => {
            p.lid = parse_u64(value)
                .filter(|&l| l != UNASSIGNED_LID)
                .map(|l| l as u32);
            "lid"
        }
        "sm lid" => {
            p.sm_lid = parse_u64(value).map(|l| l as u32);
            "sm_lid"
        }
        "link_layer" => {
            p.link_layer = Some(value.to_string());
            "link_layer"
        }
        "default gid" => return true,
        _ => return false,
    };
    p.lines.insert(name, ctx.source_line(line));
    true
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{parse_text, ports};

    const ALL_DOWN: &str =
        include_str!("../../../tests/data/tables/ibstatus-nccl1935-all-down.txt");
    const FDR: &str = include_str!("../../../tests/data/tables/ibstatus-mlx4-fdr-spaces.txt");

    #[test]
    fn ibstatus_all_ports_down_nccl_1935() {
        let t = parse_text(TableKind::Ibstatus, "n/ibstatus.txt", ALL_DOWN);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p.len(), 5);
        assert_eq!(p[0].device, "mlx5_11");
        assert_eq!(p[0].state.as_deref(), Some("Down"));
        assert_eq!(p[0].phys_state.as_deref(), Some("Disabled"));
        assert_eq!(p[0].lid, None);
        assert_eq!(p[0].rate_gbps, Some(10.0));
        assert!(p[0].rate_placeholder);
        assert_eq!(p[1].link_layer.as_deref(), Some("Ethernet"));
    }

    #[test]
    fn ibstatus_connectx3_fdr_with_spaces() {
        let t = parse_text(TableKind::Ibstatus, "n/ibstatus.txt", FDR);
        let p = ports(&t);
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].device.as_str(), p[1].port), ("mlx4_0", Some(2)));
        assert_eq!(p[1].state.as_deref(), Some("Active"));
        assert_eq!(p[1].rate_gbps, Some(56.0));
        assert_eq!(p[1].width.as_deref(), Some("4X"));
        assert_eq!(p[1].lid, Some(6));
        assert_eq!(p[1].sm_lid, Some(2));
        assert!(!p[1].rate_placeholder);
    }
}
