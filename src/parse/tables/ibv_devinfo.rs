//! `ibv_devinfo` (rdma-core libibverbs), plain or `-v`:
//!
//! ```text
//! hca_id:    mlx5_bond_0
//!     fw_ver:                16.28.2006
//!         port:    1
//!             state:            PORT_ACTIVE (4)
//!             active_mtu:        1024 (3)
//!             link_layer:        Ethernet
//!             GID[  3]:        ::ffff:200.0.209.6, RoCE v2
//! ```
//!
//! Ports become snapshots (state, MTUs, lids, link layer, width × speed as the
//! rate) and `GID[n]` lines GID entries. Pasted fragments without `hca_id:`
//! take the device from the path.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{GidEntry, PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    Line, TableCtx, UNKNOWN_DEVICE, key_value, leading_f64, normalize_phys_state, normalize_state,
    parse_u64, rate_is_placeholder,
};
use super::show_gids::{ipv4_of_gid, roce_version};

static GID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^GID\[\s*(?P<idx>\d+)\]:\s*(?P<gid>[0-9A-Fa-f:.]+)(?:,\s*(?P<ver>.+))?$").unwrap()
});

/// What the parse is inside of.
struct State {
    device: String,
    firmware: Option<String>,
    port: Option<PortSnapshot>,
}

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut st = State {
        device: ctx
            .device_in_path()
            .unwrap_or_else(|| UNKNOWN_DEVICE.to_string()),
        firmware: None,
        port: None,
    };
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(c) = GID.captures(text) {
            out.records
                .push(SysRecord::Gid(Box::new(gid(ctx, line, &st, &c))));
            continue;
        }
        let Some((key, value)) = key_value(text) else {
            out.unparsed += 1;
            continue;
        };
        match key {
            "hca_id" => {
                flush(&mut st.port, &mut out);
                st.device = value.to_string();
                st.firmware = None;
            }
            "fw_ver" => st.firmware = Some(value.to_string()),
            "port" => {
                flush(&mut st.port, &mut out);
                st.port = Some(PortSnapshot {
                    host: ctx.host.clone(),
                    device: st.device.clone(),
                    port: value.parse().ok(),
                    firmware: st.firmware.clone(),
                    origin: Some(ctx.origin(line)),
                    ..PortSnapshot::default()
                });
            }
            _ => {
                let port = st.port.get_or_insert_with(|| PortSnapshot {
                    host: ctx.host.clone(),
                    device: st.device.clone(),
                    origin: Some(ctx.origin(line)),
                    ..PortSnapshot::default()
                });
                port_field(ctx, line, port, key, value);
            }
        }
    }
    flush(&mut st.port, &mut out);
    out
}

fn flush(port: &mut Option<PortSnapshot>, out: &mut TableParse) {
    if let Some(mut p) = port.take() {
        if p.state.is_none()
            && p.phys_state.is_none()
            && p.link_layer.is_none()
            && p.active_mtu.is_none()
        {
            return;
        }
        p.rate_placeholder = rate_is_placeholder(p.state.as_deref(), p.phys_state.as_deref());
        out.records.push(SysRecord::Port(Box::new(p)));
    }
}

fn port_field(ctx: &TableCtx, line: &Line<'_>, p: &mut PortSnapshot, key: &str, value: &str) {
    let field: &'static str = match key {
        "state" => {
            p.state = Some(normalize_state(value));
            "state"
        }
        "phys_state" => {
            p.phys_state = Some(normalize_phys_state(value));
            "phys_state"
        }
        "max_mtu" => {
            p.max_mtu = leading_f64(value).map(|v| v as u32);
            "max_mtu"
        }
        "active_mtu" => {
            p.active_mtu = leading_f64(value).map(|v| v as u32);
            "mtu"
        }
        "sm_lid" => {
            p.sm_lid = parse_u64(value).map(|v| v as u32);
            "sm_lid"
        }
        "port_lid" => {
            p.lid = parse_u64(value).map(|v| v as u32);
            "lid"
        }
        "link_layer" => {
            p.link_layer = Some(value.to_string());
            "link_layer"
        }
        "active_width" => {
            p.width = value.split_whitespace().next().map(str::to_string);
            set_rate(p);
            "width"
        }
        "active_speed" => {
            // `25.0 Gbps (32)`: per lane; the rate is speed × lanes.
            p.rate_gbps = leading_f64(value);
            p.lines.insert("speed", ctx.source_line(line));
            set_rate(p);
            return;
        }
        _ => return,
    };
    p.lines.insert(field, ctx.source_line(line));
}

/// Once both the lane speed and the width are known, the rate is their product.
fn set_rate(p: &mut PortSnapshot) {
    let lanes = p
        .width
        .as_deref()
        .and_then(|w| w.trim_end_matches(['X', 'x']).parse::<f64>().ok());
    if let (Some(lanes), Some(speed), false) = (lanes, p.rate_gbps, p.lines.contains_key("rate")) {
        p.rate_gbps = Some(speed * lanes);
        if let Some(l) = p.lines.get("speed").cloned() {
            p.lines.insert("rate", l);
        }
    }
}

fn gid(ctx: &TableCtx, line: &Line<'_>, st: &State, c: &regex::Captures<'_>) -> GidEntry {
    let gid = c["gid"].to_string();
    GidEntry {
        host: ctx.host.clone(),
        device: st.device.clone(),
        port: st.port.as_ref().and_then(|p| p.port),
        index: c["idx"].parse().unwrap_or(0),
        ipv4: ipv4_of_gid(&gid),
        gid,
        version: c.name("ver").map(|v| roce_version(v.as_str())),
        netdev: None,
        origin: Some(ctx.origin(line)),
        text: line.raw.trim_end().into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{gids, parse_text, ports};

    const BOND: &str = include_str!("../../../tests/data/tables/ibv_devinfo-nccl426-bond.txt");
    const FRAGMENT: &str =
        include_str!("../../../tests/data/tables/ibv_devinfo-nccl769-gid-fragment.txt");

    #[test]
    fn ibv_devinfo_v_roce_bond_nccl_426() {
        let t = parse_text(TableKind::IbvDevinfo, "n/ibv_devinfo.txt", BOND);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].device, "mlx5_bond_0");
        assert_eq!(p[0].port, Some(1));
        assert_eq!(p[0].state.as_deref(), Some("Active"));
        assert_eq!((p[0].active_mtu, p[0].max_mtu), (Some(1024), Some(4096)));
        assert_eq!(p[0].link_layer.as_deref(), Some("Ethernet"));
        assert_eq!(p[0].firmware.as_deref(), Some("16.28.2006"));
    }

    #[test]
    fn ibv_devinfo_v_gid_fragment_nccl_769() {
        let t = parse_text(TableKind::IbvDevinfo, "n/mlx5_bond_0.txt", FRAGMENT);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p[0].phys_state.as_deref(), Some("LinkUp"));
        let g = gids(&t);
        assert_eq!(g.len(), 4);
        assert_eq!(g[1].version.as_deref(), Some("v2"));
        assert_eq!(g[1].ipv4, None);
        assert_eq!(g[2].ipv4.as_deref(), Some("200.0.209.6"));
        assert_eq!(g[3].ipv4.as_deref(), Some("200.0.209.6"));
        assert_eq!(g[3].device, "mlx5_bond_0");
        assert_eq!(g[3].origin.unwrap().line, 5);
    }

    #[test]
    fn width_times_speed_is_the_rate() {
        let text = "hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n";
        let t = parse_text(TableKind::IbvDevinfo, "n/x.txt", text);
        assert_eq!(ports(&t)[0].rate_gbps, Some(100.0));
    }
}
