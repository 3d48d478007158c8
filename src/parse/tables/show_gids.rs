//! mlnx-tools `show_gids`:
//!
//! ```text
//! DEV    PORT    INDEX    GID                    IPv4          VER    DEV
//! ---    ----    -----    ---                    ------------      ---    ---
//! mlx5_0    1    3    0000:0000:0000:0000:0000:ffff:0a6c:a424    10.108.164.36      v2    eth01
//! n_gids_found=12
//! ```
//!
//! The IPv4 column is empty (two tabs) for link-local GIDs. A table with no
//! rows (`n_gids_found=0`) is itself a finding: no RoCE GID on that host.

use std::net::Ipv4Addr;

use crate::model::{GidEntry, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx};

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut found: Option<String> = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() || text.starts_with("DEV") || text.starts_with("---") {
            continue;
        }
        if let Some(n) = text.strip_prefix("n_gids_found=") {
            found = Some(n.trim().to_string());
            continue;
        }
        match row(ctx, line) {
            Some(g) => out.records.push(SysRecord::Gid(Box::new(g))),
            None => out.unparsed += 1,
        }
    }
    if out.records.is_empty() && found.as_deref() == Some("0") {
        out.error = Some(
            "show_gids found no GIDs (n_gids_found=0): RoCE has no usable GID here".to_string(),
        );
    }
    out
}

fn row(ctx: &TableCtx, line: &Line<'_>) -> Option<GidEntry> {
    let cols: Vec<&str> = line
        .text
        .split('\t')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let [device, port, index, gid, rest @ ..] = cols.as_slice() else {
        return None;
    };
    if !gid.contains(':') {
        return None;
    }
    let ipv4 = rest.iter().find(|c| c.parse::<Ipv4Addr>().is_ok());
    let version = rest.iter().find(|c| matches!(**c, "v1" | "v2"));
    let netdev = rest
        .iter()
        .rev()
        .find(|c| Some(*c) != ipv4 && Some(*c) != version);
    Some(GidEntry {
        host: ctx.host.clone(),
        device: device.to_string(),
        port: port.parse().ok(),
        index: index.parse().ok()?,
        gid: gid.to_string(),
        ipv4: ipv4.map(|s| s.to_string()).or_else(|| ipv4_of_gid(gid)),
        version: version.map(|s| s.to_string()),
        netdev: netdev.map(|s| s.to_string()),
        origin: Some(ctx.origin(line)),
        text: line.raw.trim_end().into(),
    })
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:10.0.0.1` or
/// `0000:…:ffff:0a00:0001`), if it is one.
pub fn ipv4_of_gid(gid: &str) -> Option<String> {
    let addr: std::net::Ipv6Addr = gid.trim().parse().ok()?;
    addr.to_ipv4_mapped().map(|v4| v4.to_string())
}

/// `RoCE v2` → `v2`, `IB/RoCE v1` → `v1`, `IB` → `IB`.
pub fn roce_version(text: &str) -> String {
    let t = text.trim();
    if t.ends_with("v2") {
        "v2".into()
    } else if t.ends_with("v1") {
        "v1".into()
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{gids, parse_text};

    const FOUR_PORT: &str = include_str!("../../../tests/data/tables/show_gids-cx4lx-4port.txt");

    #[test]
    fn show_gids_mlnx_tools_four_ports() {
        let t = parse_text(TableKind::ShowGids, "h/show_gids.txt", FOUR_PORT);
        assert_eq!(t.unparsed, 0);
        let g = gids(&t);
        assert_eq!(g.len(), 12);
        assert_eq!(g[0].ipv4, None);
        assert_eq!(g[0].version.as_deref(), Some("v1"));
        assert_eq!(g[0].netdev.as_deref(), Some("eth01"));
        assert_eq!(g[3].ipv4.as_deref(), Some("10.108.164.36"));
        assert_eq!(g[3].version.as_deref(), Some("v2"));
        assert_eq!((g[3].index, g[3].port), (3, Some(1)));
        assert_eq!(g[3].origin.unwrap().line, 6);
    }

    #[test]
    fn an_empty_table_is_reported() {
        let text = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\nn_gids_found=0\n";
        let t = parse_text(TableKind::ShowGids, "h/show_gids.txt", text);
        assert!(t.records.is_empty());
        assert!(t.error.unwrap().contains("no GIDs"));
    }

    #[test]
    fn mapped_addresses() {
        assert_eq!(
            ipv4_of_gid("0000:0000:0000:0000:0000:ffff:0a60:531a").as_deref(),
            Some("10.96.83.26")
        );
        assert_eq!(
            ipv4_of_gid("::ffff:200.0.209.6").as_deref(),
            Some("200.0.209.6")
        );
        assert_eq!(ipv4_of_gid("fe80::ac0:ebff:feda:1cfb"), None);
    }
}
