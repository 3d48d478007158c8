//! The kernel bonding driver's `/proc/net/bonding/<bond>`: which netdevs a
//! bond aggregates, and whether each is up.
//!
//! ```text
//! Ethernet Channel Bonding Driver: v5.15.0-91-generic
//!
//! Bonding Mode: IEEE 802.3ad Dynamic link aggregation
//! MII Status: up
//!
//! Slave Interface: ens1f0np0
//! MII Status: down
//! Speed: Unknown
//! Link Failure Count: 3
//! ```
//!
//! The file never names its bond: the name comes from a line that names
//! the file (`==> /proc/net/bonding/bond0 <==` as `head` prints it, `== …`,
//! `# cat …`), else from the capture's own name (`bond1.txt`). A RoCE LAG's
//! RDMA device sits on the bond while counters are dumped per member, so a
//! member names the device its counters belong to.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{BondSlave, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx};

/// `/proc/net/bonding/bond0` anywhere in a line.
static PROC_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/proc/net/bonding/([A-Za-z][\w.-]*)").unwrap());

/// A bond's name in a file name (`bond0.txt`, `bonding-bond1.out`).
static NAMED_FILE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^A-Za-z])(bond\d+)(?:[^\w]|$)").unwrap());

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut bond = bond_of_path(&ctx.path);
    let mut slave: Option<BondSlave> = None;
    // A banner since the last line that named a bond: a second one starts
    // a bond the capture did not name.
    let mut banner_seen = false;
    for line in lines {
        let text = line.text.trim();
        if let Some(c) = PROC_PATH.captures(text) {
            out.records.extend(slave.take().map(record));
            bond = Some(c[1].to_string());
            banner_seen = false;
            continue;
        }
        let Some((key, value)) = text.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            // A second driver banner without a header: another bond whose
            // name the capture lost.
            "Ethernet Channel Bonding Driver" => {
                out.records.extend(slave.take().map(record));
                if banner_seen {
                    bond = None;
                }
                banner_seen = true;
            }
            "Slave Interface" if !value.is_empty() => {
                out.records.extend(slave.take().map(record));
                slave = Some(BondSlave {
                    host: ctx.host.clone(),
                    bond: bond.clone(),
                    netdev: value.to_string(),
                    up: None,
                    speed_mbps: None,
                    link_failures: None,
                    origin: Some(ctx.origin(line)),
                    line: Some(ctx.source_line(line)),
                });
            }
            "MII Status" => {
                if let Some(s) = slave.as_mut() {
                    s.up = match value {
                        "up" => Some(true),
                        "down" | "going down" | "going back" => Some(false),
                        _ => None,
                    };
                }
            }
            "Speed" => {
                if let Some(s) = slave.as_mut() {
                    s.speed_mbps = value.strip_suffix(" Mbps").and_then(|v| v.parse().ok());
                }
            }
            "Link Failure Count" => {
                if let Some(s) = slave.as_mut() {
                    s.link_failures = value.parse().ok();
                }
            }
            _ => {}
        }
    }
    out.records.extend(slave.map(record));
    out
}

fn record(s: BondSlave) -> SysRecord {
    SysRecord::BondSlave(Box::new(s))
}

fn bond_of_path(path: &str) -> Option<String> {
    if let Some(c) = PROC_PATH.captures(path) {
        return Some(c[1].to_string());
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    NAMED_FILE.captures(name).map(|c| c[1].to_string())
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::model::{BondSlave, SysRecord};
    use crate::parse::tables::testing::parse_text;

    fn slaves(path: &str, text: &str) -> Vec<BondSlave> {
        parse_text(TableKind::Bonding, path, text)
            .records
            .into_iter()
            .filter_map(|r| match r {
                SysRecord::BondSlave(b) => Some(*b),
                _ => None,
            })
            .collect()
    }

    /// As linux 5.15's bond_procfs.c prints an 802.3ad bond (trimmed).
    const LACP_BOND: &str = "Ethernet Channel Bonding Driver: v5.15.0-91-generic

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer3+4 (1)
MII Status: up
MII Polling Interval (ms): 100

802.3ad info
LACP active: on
Active Aggregator Info:
\tAggregator ID: 1
\tNumber of ports: 1

Slave Interface: ens1f0np0
MII Status: up
Speed: 200000 Mbps
Duplex: full
Link Failure Count: 0
Aggregator ID: 1

Slave Interface: ens1f1np1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 4
Aggregator ID: 2
";

    #[test]
    fn members_their_state_and_failures_linux_5_15() {
        let s = slaves("node7/sys/bond0.txt", LACP_BOND);
        let rows: Vec<_> = s
            .iter()
            .map(|b| {
                (
                    b.bond.as_deref(),
                    b.netdev.as_str(),
                    b.up,
                    b.speed_mbps,
                    b.link_failures,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    Some("bond0"),
                    "ens1f0np0",
                    Some(true),
                    Some(200_000),
                    Some(0)
                ),
                (Some("bond0"), "ens1f1np1", Some(false), None, Some(4)),
            ]
        );
        assert_eq!(s[0].host.as_deref(), Some("node7"));
        assert_eq!(s[1].origin.unwrap().line, 21);
    }

    #[test]
    fn headers_naming_the_proc_file_name_each_bond() {
        let text = format!(
            "== /proc/net/bonding/bond2\n{LACP_BOND}\n# cat /proc/net/bonding/bond3\n{LACP_BOND}"
        );
        let s = slaves("node7/bonding.txt", &text);
        let bonds: Vec<_> = s.iter().map(|b| b.bond.as_deref()).collect();
        assert_eq!(
            bonds,
            vec![Some("bond2"), Some("bond2"), Some("bond3"), Some("bond3")]
        );
    }

    #[test]
    fn a_capture_that_never_names_its_bond_keeps_the_members_unnamed() {
        let s = slaves("node7/bonding.txt", LACP_BOND);
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|b| b.bond.is_none()));
    }
}
