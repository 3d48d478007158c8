//! lldpd's `lldpcli show neighbors` (also `lldpctl`): which switch, and
//! which of its ports, sits at the far end of each of a host's cables.
//!
//! ```text
//! Interface:    ens12f0np0, via: LLDP, RID: 3, Time: 0 day, 02:11:40
//!   Chassis:
//!     ChassisID:    mac 1c:34:da:43:13:00
//!     SysName:      leaf-rail3-a
//!   Port:
//!     PortID:       ifname swp8s1
//! ```
//!
//! `-f keyvalue` prints `lldp.ens12f0np0.chassis.name=leaf-rail3-a` and
//! `lldp.ens12f0np0.port.ifname=swp8s1`; `-f json` nests the same under
//! `lldp.interface`, an object of interfaces (a list of one-key objects
//! where several neighbours were seen) whose `chassis` is keyed by the
//! switch's name. A neighbour that sent no system name is left out: the
//! switch is what the cabling rule compares.

use serde_json::Value;

use crate::model::{LinkNeighbor, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx};

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let first = lines.iter().map(|l| l.text.trim()).find(|t| !t.is_empty());
    let neighbors = match first {
        Some(t) if t.starts_with('{') || t.starts_with('[') => from_json(ctx, lines),
        Some(t) if t.starts_with("lldp.") => from_keyvalue(ctx, lines),
        _ => from_plain(ctx, lines),
    };
    TableParse {
        records: neighbors
            .into_iter()
            .map(|n| SysRecord::Neighbor(Box::new(n)))
            .collect(),
        ..TableParse::default()
    }
}

/// A neighbour being read: the interface's line, then the switch's.
struct Pending<'l, 'a> {
    netdev: String,
    switch: Option<(String, &'l Line<'a>)>,
    switch_port: Option<String>,
}

impl Pending<'_, '_> {
    fn finish(self, ctx: &TableCtx) -> Option<LinkNeighbor> {
        let (switch, line) = self.switch?;
        Some(LinkNeighbor {
            host: ctx.host.clone(),
            netdev: self.netdev,
            switch,
            switch_port: self.switch_port,
            origin: Some(ctx.origin(line)),
            line: Some(ctx.source_line(line)),
        })
    }
}

fn from_plain(ctx: &TableCtx, lines: &[Line<'_>]) -> Vec<LinkNeighbor> {
    let mut out = Vec::new();
    let mut pending: Option<Pending<'_, '_>> = None;
    for line in lines {
        let Some((key, value)) = line.text.trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Interface" => {
                out.extend(pending.take().and_then(|p| p.finish(ctx)));
                let netdev = value.split(',').next().unwrap_or("").trim();
                pending = (!netdev.is_empty()).then(|| Pending {
                    netdev: netdev.to_string(),
                    switch: None,
                    switch_port: None,
                });
            }
            "SysName" if !value.is_empty() => {
                if let Some(p) = pending.as_mut() {
                    p.switch = Some((value.to_string(), line));
                }
            }
            // `ifname swp8s1`, `local 52`, `mac 1c:34:…`: the subtype, then the id.
            "PortID" => {
                if let Some(p) = pending.as_mut() {
                    p.switch_port = value.split_whitespace().last().map(str::to_string);
                }
            }
            _ => {}
        }
    }
    out.extend(pending.and_then(|p| p.finish(ctx)));
    out
}

fn from_keyvalue(ctx: &TableCtx, lines: &[Line<'_>]) -> Vec<LinkNeighbor> {
    let mut order: Vec<Pending<'_, '_>> = Vec::new();
    for line in lines {
        let Some((key, value)) = line.text.trim().split_once('=') else {
            continue;
        };
        let Some((netdev, field)) = key.strip_prefix("lldp.").and_then(|k| k.split_once('.'))
        else {
            continue;
        };
        let at = match order.iter().position(|p| p.netdev == netdev) {
            Some(at) => at,
            None => {
                order.push(Pending {
                    netdev: netdev.to_string(),
                    switch: None,
                    switch_port: None,
                });
                order.len() - 1
            }
        };
        let p = &mut order[at];
        match field {
            "chassis.name" if !value.is_empty() => p.switch = Some((value.to_string(), line)),
            "port.ifname" | "port.local" => p.switch_port = Some(value.to_string()),
            _ => {}
        }
    }
    order.into_iter().filter_map(|p| p.finish(ctx)).collect()
}

fn from_json(ctx: &TableCtx, lines: &[Line<'_>]) -> Vec<LinkNeighbor> {
    let text: String = lines
        .iter()
        .map(|l| l.text.as_ref())
        .collect::<Vec<_>>()
        .join("\n");
    let Ok(doc) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let interfaces: Vec<(&String, &Value)> = match &doc["lldp"]["interface"] {
        Value::Object(map) => map.iter().collect(),
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|m| m.iter())
            .collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for (netdev, iface) in interfaces {
        let Some(switch) = iface["chassis"]
            .as_object()
            .and_then(|c| c.keys().find(|k| *k != "id"))
        else {
            continue;
        };
        // The switch's name is a key: cite the first line that names it
        // after the interface's own.
        let quoted = |s: &str| format!("\"{s}\"");
        let at_iface = lines
            .iter()
            .position(|l| l.text.contains(&quoted(netdev)))
            .unwrap_or(0);
        let Some(line) = lines[at_iface..]
            .iter()
            .find(|l| l.text.contains(&quoted(switch)))
        else {
            continue;
        };
        let switch_port = iface["port"]["id"]["value"].as_str().map(str::to_string);
        out.extend(
            Pending {
                netdev: netdev.clone(),
                switch: Some((switch.clone(), line)),
                switch_port,
            }
            .finish(ctx),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::model::SysRecord;
    use crate::parse::tables::testing::parse_text;

    /// (netdev, switch, switch port) of each neighbour read.
    fn neighbors(text: &str) -> Vec<(String, String, Option<String>)> {
        parse_text(TableKind::Lldp, "node3/lldp-neighbors.txt", text)
            .records
            .into_iter()
            .filter_map(|r| match r {
                SysRecord::Neighbor(n) => Some((n.netdev, n.switch, n.switch_port)),
                _ => None,
            })
            .collect()
    }

    fn one(netdev: &str, switch: &str, port: &str) -> (String, String, Option<String>) {
        (netdev.into(), switch.into(), Some(port.into()))
    }

    /// lldpd 1.0's plain output, two interfaces, the second without a name.
    #[test]
    fn plain_output_names_each_interfaces_switch_and_port() {
        let text = "\
-------------------------------------------------------------------------------
LLDP neighbors:
-------------------------------------------------------------------------------
Interface:    ens12f0np0, via: LLDP, RID: 3, Time: 0 day, 02:11:40
  Chassis:
    ChassisID:    mac 1c:34:da:43:13:00
    SysName:      leaf-rail3-a
    Capability:   Bridge, on
  Port:
    PortID:       ifname swp8s1
    PortDescr:    swp8s1
    TTL:          120
-------------------------------------------------------------------------------
Interface:    ens13f0np0, via: LLDP, RID: 4, Time: 0 day, 02:11:40
  Chassis:
    ChassisID:    mac 1c:34:da:42:12:00
  Port:
    PortID:       local 52
-------------------------------------------------------------------------------
";
        assert_eq!(
            neighbors(text),
            vec![one("ens12f0np0", "leaf-rail3-a", "swp8s1")]
        );
    }

    #[test]
    fn keyvalue_output_groups_keys_by_interface() {
        let text = "\
lldp.ens10f0np0.via=LLDP
lldp.ens10f0np0.chassis.mac=1c:34:da:40:10:00
lldp.ens10f0np0.chassis.name=leaf-rail0-a
lldp.ens10f0np0.port.ifname=swp8s0
lldp.ens11f0np0.via=LLDP
lldp.ens11f0np0.chassis.name=leaf-rail1-a
lldp.ens11f0np0.port.ifname=swp8s0
";
        assert_eq!(
            neighbors(text),
            vec![
                one("ens10f0np0", "leaf-rail0-a", "swp8s0"),
                one("ens11f0np0", "leaf-rail1-a", "swp8s0"),
            ]
        );
    }

    /// `-f json` with several interfaces: a list of one-key objects.
    #[test]
    fn json_output_keys_the_chassis_by_the_switch_name() {
        let text = r#"{
  "lldp": {
    "interface": [
      {"ens10f0np0": {"via": "LLDP", "rid": "1",
        "chassis": {"leaf-rail0-a": {"id": {"type": "mac", "value": "1c:34:da:40:10:00"}}},
        "port": {"id": {"type": "ifname", "value": "swp8s0"}, "ttl": "120"}}},
      {"ens11f0np0": {"via": "LLDP", "rid": "2",
        "chassis": {"id": {"type": "mac", "value": "1c:34:da:41:11:00"}},
        "port": {"id": {"type": "ifname", "value": "swp8s0"}}}}
    ]
  }
}"#;
        assert_eq!(
            neighbors(text),
            vec![one("ens10f0np0", "leaf-rail0-a", "swp8s0")]
        );
    }
}
