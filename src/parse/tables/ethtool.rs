//! `ethtool -S <netdev>` (mlx5 `en_stats.c`):
//!
//! ```text
//! NIC statistics:
//!      rx_discards_phy: 58591428329
//! ```
//!
//! Often piped through `grep`, which drops the header. The netdev comes from
//! the command line when the capture shows it, else from the path. Values are
//! cumulative since the driver loaded (reset on reload, not on link down).

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{CounterSource, PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{CounterAt, Line, TableCtx, UNKNOWN_DEVICE, parse_u64};

static NETDEV_IN_PATH: LazyLock<Regex> = LazyLock::new(|| {
    // Bounded by anything but a letter or digit: `_` joins words in file
    // names (`ethtool-S-enp26s0np0_node005_after.txt`).
    Regex::new(r"(?:^|[^A-Za-z0-9])(?P<d>eth\d+|en(?:p\d+s\d+|s\d+|o\d+|x[0-9a-f]{12})(?:f\d+)?(?:np\d+)?(?:v\d+)?|ib\d+|bond\d+)(?:[^A-Za-z0-9]|$)")
        .unwrap()
});

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut device = netdev_in_command(lines)
        .or_else(|| {
            NETDEV_IN_PATH
                .captures_iter(&ctx.path)
                .last()
                .map(|c| c["d"].to_string())
        })
        .or_else(|| ctx.device_in_path())
        .unwrap_or_else(|| UNKNOWN_DEVICE.to_string());
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() || text == "NIC statistics:" {
            continue;
        }
        if let Some(dev) = command_netdev(text) {
            device = dev;
            continue;
        }
        let Some((name, value)) = stat(text) else {
            match section_netdev(text) {
                Some(dev) => {
                    if let Some(tie) = titled_rdma_device(ctx, line, text, &dev) {
                        out.records.push(tie);
                    }
                    device = dev;
                }
                None => out.unparsed += 1,
            }
            continue;
        };
        let at = CounterAt {
            device: &device,
            port: None,
            name,
            source: CounterSource::Ethtool,
            width_bits: None,
        };
        out.records.push(ctx.counter(at, value, line));
    }
    out
}

/// `rx_prio3_pause: 12` → (`rx_prio3_pause`, 12).
fn stat(text: &str) -> Option<(&str, u64)> {
    let (name, value) = text.split_once(": ")?;
    let name = name.trim();
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'[' | b']'));
    ok.then_some(())?;
    Some((name, parse_u64(value)?))
}

fn netdev_in_command(lines: &[Line<'_>]) -> Option<String> {
    lines.iter().take(4).find_map(|l| command_netdev(&l.text))
}

/// A collection script's title over each netdev's dump in one file
/// (`== ens0np0 (mlx5_0) ==`, `### ens1f0np0`): a line that is no counter
/// and names one netdev.
fn section_netdev(text: &str) -> Option<String> {
    let mut found = NETDEV_IN_PATH
        .captures_iter(text)
        .map(|c| c["d"].to_string());
    let first = found.next()?;
    found.all(|d| d == first).then_some(first)
}

/// A title that also names the netdev's RDMA device (`### enp188s0np0
/// (mlx5_6)`, `== ens0np0 (mlx5_0) ==`) ties the two, as `ibdev2netdev`
/// does: the kernel names the port by netdev, NCCL by RDMA device.
fn titled_rdma_device(
    ctx: &TableCtx,
    line: &Line<'_>,
    text: &str,
    netdev: &str,
) -> Option<SysRecord> {
    let device = super::common::one_rdma_device_in(text)?;
    let mut p = PortSnapshot {
        host: ctx.host.clone(),
        device,
        netdev: Some(netdev.to_string()),
        origin: Some(ctx.origin(line)),
        ..PortSnapshot::default()
    };
    p.lines.insert("netdev", ctx.source_line(line));
    Some(SysRecord::Port(Box::new(p)))
}

/// `$ ethtool -S ens1f0 | grep prio` names the netdev.
fn command_netdev(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    words.find(|w| w.ends_with("ethtool"))?;
    let flag = words.next()?;
    if !matches!(flag, "-S" | "--statistics") {
        return None;
    }
    words.next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{counters, parse_text, ports};

    const K515: &str = include_str!("../../../tests/data/tables/ethtool-mlx5-k515.txt");
    const GREP: &str = include_str!("../../../tests/data/tables/ethtool-grep-cx4lx-pause.txt");

    #[test]
    fn ethtool_s_mlx5_kernel_5_15() {
        let t = parse_text(TableKind::EthtoolStats, "h1/ethtool-S-enp8s0f0.txt", K515);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        let d = c.iter().find(|c| c.name == "rx_discards_phy").unwrap();
        assert_eq!(d.value, 58591428329);
        assert_eq!(d.device, "enp8s0f0");
        assert_eq!(d.source, CounterSource::Ethtool);
        assert_eq!(d.origin.line, 38);
    }

    #[test]
    fn ethtool_grep_without_header_cx4lx() {
        let t = parse_text(TableKind::EthtoolStats, "h1/x.txt", GREP);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        assert_eq!(c.len(), 31);
        let p = c
            .iter()
            .find(|c| c.name == "tx_global_pause_duration")
            .unwrap();
        assert_eq!(p.value, 555665182);
        assert_eq!(p.device, "?");
    }

    #[test]
    fn a_netdev_joined_to_other_words_by_underscores_is_read_from_the_name() {
        let text = "NIC statistics:\n     rx_prio3_pause: 17\n";
        let t = parse_text(
            TableKind::EthtoolStats,
            "ethtool-S-enp26s0np0_node005_after.txt",
            text,
        );
        assert_eq!(counters(&t)[0].device, "enp26s0np0");
    }

    /// One file of every netdev's dump, each under its script's title.
    #[test]
    fn titles_between_dumps_name_each_netdev() {
        let text = "# Mon Jan  6 04:08:05 UTC 2025\n== ens0np0 (mlx5_0) ==\nNIC statistics:\n     link_down_events_phy: 2\n== ens1np0 (mlx5_1) ==\nNIC statistics:\n     link_down_events_phy: 1\n";
        let t = parse_text(TableKind::EthtoolStats, "rc-a04/ethtool-S.after.txt", text);
        let c = counters(&t);
        let devices: Vec<(&str, u64)> = c.iter().map(|c| (c.device.as_str(), c.value)).collect();
        assert_eq!(devices, vec![("ens0np0", 2), ("ens1np0", 1)]);
        assert_eq!(t.unparsed, 1, "the date line");
    }

    #[test]
    fn command_line_names_the_netdev_and_junk_is_counted() {
        let text =
            "[root@node3 ~]# ethtool -S ens1f0np0 | grep pause\n     rx_prio3_pause: 17\n???\n";
        let t = parse_text(TableKind::EthtoolStats, "x.txt", text);
        let c = counters(&t);
        assert_eq!(c[0].device, "ens1f0np0");
        assert_eq!(c[0].host.as_deref(), Some("node3"));
        assert_eq!(t.unparsed, 1);
    }

    #[test]
    fn a_title_naming_the_rdma_device_ties_it_to_the_netdev_mlx5() {
        let text = "### enp188s0np0 (mlx5_6)\nNIC statistics:\n     rx_crc_errors_phy: 4\n### enp189s0np0\n     rx_crc_errors_phy: 0\n";
        let t = parse_text(
            TableKind::EthtoolStats,
            "h100-b03/ethtool-S.after.txt",
            text,
        );
        let tied: Vec<(&str, Option<&str>)> = ports(&t)
            .iter()
            .map(|p| (p.device.as_str(), p.netdev.as_deref()))
            .collect();
        assert_eq!(tied, [("mlx5_6", Some("enp188s0np0"))]);
        let c = counters(&t);
        assert_eq!(c[0].device, "enp188s0np0");
        assert_eq!(c[1].device, "enp189s0np0");
    }
}
