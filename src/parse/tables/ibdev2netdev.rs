//! mlnx-tools `ibdev2netdev`: which netdev carries each RDMA port.
//!
//! ```text
//! mlx5_0 port 1 ==> ib0 (Up)
//! 0000:3b:00.1 mlx5_1 (MT4123 - MCX653106A-HDAT) ConnectX-6 VPI ... fw 20.31.1014 port 1 (ACTIVE) ==> ens1f1np1 (Down)
//! mlx4_0 port 2 <===> eth3
//! ```
//!
//! The plain form's `(Up)` / `(Down)` is the *netdev's* carrier, not the
//! RDMA port's state: an IPoIB interface left down reads `(Down)` over an
//! Active IB port that NCCL uses happily, so it is not taken as the port's
//! state. `-v` adds the PCI function, the firmware and the port's own state
//! (`(ACTIVE)`, padded to six characters); the `<===>` form is the script's
//! old style (no state at all).

use std::sync::LazyLock;

use regex::Regex;

use crate::grammar::normalize_bus_id;
use crate::model::{PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx, normalize_state};

static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) )?(?P<dev>[A-Za-z][\w.-]*)\b.*? port (?P<port>\d+)(?: \((?P<state>[A-Za-z_]+) *\))? (?:==>|<===>) (?P<netdev>[\w.@:-]+)(?: \((?P<carrier>[A-Za-z]+)\))?\s*$",
    )
    .unwrap()
});

/// ` fw 20.31.1014 ` in the verbose form.
static FIRMWARE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r" fw (?P<fw>\d+\.\d+\.\d+) ").unwrap());

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        match row(ctx, line, text) {
            Some(p) => out.records.push(SysRecord::Port(Box::new(p))),
            None => out.unparsed += 1,
        }
    }
    out
}

fn row(ctx: &TableCtx, line: &Line<'_>, text: &str) -> Option<PortSnapshot> {
    let c = ROW.captures(text)?;
    let mut p = PortSnapshot {
        host: ctx.host.clone(),
        device: c["dev"].to_string(),
        port: c["port"].parse().ok(),
        netdev: Some(c["netdev"].to_string()),
        pci: c.name("pci").and_then(|m| normalize_bus_id(m.as_str())),
        origin: Some(ctx.origin(line)),
        ..PortSnapshot::default()
    };
    p.lines.insert("netdev", ctx.source_line(line));
    if let Some(state) = c.name("state").filter(|s| s.as_str() != "NA") {
        p.state = Some(normalize_state(state.as_str()));
        p.lines.insert("state", ctx.source_line(line));
    }
    if let Some(fw) = FIRMWARE.captures(text) {
        p.firmware = Some(fw["fw"].to_string());
        p.lines.insert("firmware", ctx.source_line(line));
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{parse_text, ports};

    #[test]
    fn plain_rows_tie_rdma_ports_to_netdevs_but_not_their_state_mlnx_tools() {
        let text = "mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port 1 ==> ens1f1np1 (Down)\nmlx5_bond_0 port 1 ==> bond0 (Up)\n";
        let t = parse_text(TableKind::Ibdev2netdev, "node002/ibdev2netdev.txt", text);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        let rows: Vec<_> = p
            .iter()
            .map(|p| (p.device.as_str(), p.port, p.netdev.as_deref(), &p.state))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("mlx5_0", Some(1), Some("ib0"), &None),
                ("mlx5_1", Some(1), Some("ens1f1np1"), &None),
                ("mlx5_bond_0", Some(1), Some("bond0"), &None),
            ]
        );
        assert_eq!(p[1].host.as_deref(), Some("node002"));
        assert_eq!(p[1].origin.unwrap().line, 2);
    }

    #[test]
    fn verbose_rows_add_the_pci_function_firmware_and_port_state_mlnx_tools() {
        let text = "0000:3b:00.1 mlx5_1 (MT4123 - MCX653106A-HDAT) ConnectX-6 VPI adapter card, HDR IB (200Gb/s) and 200GbE, dual-port QSFP56 fw 20.31.1014 port 1 (DOWN  ) ==> ib1 (Down)\n\
0000:af:00.0 mlx5_2 (MT4129 - NA) fw 28.39.1002 port 1 (ACTIVE) ==> ibp175s0 (Up)\n";
        let t = parse_text(TableKind::Ibdev2netdev, "node002/ibdev2netdev-v.txt", text);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p[0].pci.as_deref(), Some("0000:3b:00.1"));
        assert_eq!(p[0].state.as_deref(), Some("Down"));
        assert_eq!(p[0].firmware.as_deref(), Some("20.31.1014"));
        assert_eq!(p[1].state.as_deref(), Some("Active"));
        assert_eq!(p[1].netdev.as_deref(), Some("ibp175s0"));
    }

    #[test]
    fn the_old_style_arrow_is_read_and_junk_is_counted() {
        let text = "mlx4_0 port 2 <===> eth3\nnot a row\n";
        let t = parse_text(TableKind::Ibdev2netdev, "h/ibdev2netdev", text);
        assert_eq!(t.unparsed, 1);
        let p = ports(&t);
        assert_eq!((p[0].device.as_str(), p[0].port), ("mlx4_0", Some(2)));
        assert_eq!(p[0].netdev.as_deref(), Some("eth3"));
    }
}
