//! iproute2 `rdma statistic` (and `rdma link`), in its three layouts:
//!
//! ```text
//! link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_sequence 12 …
//! link mlx5_0/1                                  (-p: one pair a line below)
//!     out_of_sequence 12
//! [{"ifname":"mlx5_0","port":1,"out_of_sequence":12,…}]     (-j)
//! ```
//!
//! `rdma link` lines (`link mlx5_7/1 … state ACTIVE physical_state LINK_UP
//! netdev ens1f0`) become port snapshots. iproute2 of early 2021 printed the
//! u64 through a 32-bit `%d`: values ≥ 2^31 come out negative. They are
//! decoded modulo 2^32, and every counter of such a file is marked 32-bit so
//! the deltas are taken modulo 2^32 too (docs/sys-formats.md §d).

use serde_json::Value;

use crate::model::{CounterSource, PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    CounterAt, Line, TableCtx, normalize_phys_state, normalize_state, rate_is_placeholder,
};

/// Keys of `rdma statistic qp` / `rdma link` that are not counters.
const NOT_COUNTERS: &[&str] = &[
    "cntn",
    "qp-type",
    "pid",
    "comm",
    "LQPN",
    "mode",
    "ifname",
    "ifindex",
    "port",
    "subnet_prefix",
    "lid",
    "sm_lid",
    "lmc",
    "state",
    "physical_state",
    "netdev",
    "netdev_index",
];

/// A counter value, and whether it came out negative (a truncated printout).
fn value(text: &str) -> Option<(u64, bool)> {
    let v: i64 = text.trim_end_matches(',').parse().ok()?;
    if v < 0 {
        // `%d` of the low 32 bits: add 2^32 back.
        (v >= -(1i64 << 31)).then(|| ((v + (1i64 << 32)) as u64, true))
    } else {
        Some((v as u64, false))
    }
}

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let first = lines.iter().find(|l| !l.text.trim().is_empty());
    // `rdma -j` prints `[{"ifname":…`; a shell prompt (`[root@node005 ~]#`)
    // opens with a bracket too.
    let json = |t: &str| {
        t.strip_prefix('[')
            .is_some_and(|rest| rest.trim_start().is_empty() || rest.trim_start().starts_with('{'))
    };
    let mut out = if first.is_some_and(|l| json(l.text.trim())) {
        parse_json(ctx, lines)
    } else {
        parse_text(ctx, lines)
    };
    if out.truncated32 {
        for r in &mut out.table.records {
            if let SysRecord::Counter(c) = r {
                c.width_bits = Some(32);
            }
        }
    }
    out.table
}

/// The parse plus whether any value was a truncated negative.
#[derive(Default)]
struct Parsed {
    table: TableParse,
    truncated32: bool,
}

fn parse_text(ctx: &TableCtx, lines: &[Line<'_>]) -> Parsed {
    let mut out = Parsed::default();
    let mut current: Option<(String, Option<u32>)> = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let pairs: &[&str] = if words[0] == "link" && words.len() >= 2 {
            current = dev_port(words[1]);
            if words.contains(&"state") || words.contains(&"physical_state") {
                let (dev, port) = current.clone().unwrap_or_default();
                out.table
                    .records
                    .push(SysRecord::Port(Box::new(link_snapshot(
                        ctx, line, &words, dev, port,
                    ))));
                continue;
            }
            &words[2..]
        } else if current.is_some() && line.text.starts_with(char::is_whitespace) {
            &words
        } else {
            out.table.unparsed += 1;
            continue;
        };
        let Some((device, port)) = current.clone() else {
            out.table.unparsed += 1;
            continue;
        };
        read_pairs(ctx, line, pairs, &device, port, &mut out);
    }
    out
}

fn read_pairs(
    ctx: &TableCtx,
    line: &Line<'_>,
    words: &[&str],
    device: &str,
    port: Option<u32>,
    out: &mut Parsed,
) {
    let mut i = 0;
    while i < words.len() {
        let name = words[i];
        let Some(raw) = words.get(i + 1) else {
            out.table.unparsed += 1;
            break;
        };
        i += 2;
        if NOT_COUNTERS.contains(&name) {
            continue;
        }
        let Some((v, negative)) = value(raw) else {
            out.table.unparsed += 1;
            continue;
        };
        out.truncated32 |= negative;
        let at = CounterAt {
            device,
            port,
            name,
            source: CounterSource::RdmaStatistic,
            width_bits: None,
        };
        out.table.records.push(ctx.counter(at, v, line));
    }
}

/// `mlx5_0/1` → (`mlx5_0`, 1).
fn dev_port(word: &str) -> Option<(String, Option<u32>)> {
    let (dev, port) = word.rsplit_once('/')?;
    Some((dev.to_string(), port.parse().ok()))
}

fn link_snapshot(
    ctx: &TableCtx,
    line: &Line<'_>,
    words: &[&str],
    device: String,
    port: Option<u32>,
) -> PortSnapshot {
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string())
    };
    let mut snap = PortSnapshot {
        host: ctx.host.clone(),
        device,
        port,
        state: after("state").map(|s| normalize_state(&s)),
        phys_state: after("physical_state").map(|s| normalize_phys_state(&s)),
        lid: after("lid").and_then(|s| s.parse().ok()),
        sm_lid: after("sm_lid").and_then(|s| s.parse().ok()),
        netdev: after("netdev"),
        origin: Some(ctx.origin(line)),
        ..PortSnapshot::default()
    };
    snap.rate_placeholder = rate_is_placeholder(snap.state.as_deref(), snap.phys_state.as_deref());
    snap.lines.insert("state", ctx.source_line(line));
    snap
}

/// `rdma -j statistic show`: an array of objects, one per port.
fn parse_json(ctx: &TableCtx, lines: &[Line<'_>]) -> Parsed {
    let mut out = Parsed::default();
    let text: String = lines
        .iter()
        .map(|l| l.text.as_ref())
        .collect::<Vec<_>>()
        .join("\n");
    let objects = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(a)) => a,
        _ => {
            out.table.error = Some("rdma statistic JSON could not be read".into());
            return out;
        }
    };
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.text.contains("\"ifname\""))
        .map(|(i, _)| i)
        .collect();
    for (k, obj) in objects.iter().enumerate() {
        let Some(map) = obj.as_object() else {
            out.table.unparsed += 1;
            continue;
        };
        let device = map.get("ifname").and_then(Value::as_str).unwrap_or("?");
        let port = map.get("port").and_then(Value::as_u64).map(|p| p as u32);
        let start = starts.get(k).copied().unwrap_or(0);
        for (name, v) in map {
            if NOT_COUNTERS.contains(&name.as_str()) {
                continue;
            }
            let Some((v, negative)) = v.as_i64().and_then(|n| value(&n.to_string())) else {
                out.table.unparsed += 1;
                continue;
            };
            out.truncated32 |= negative;
            let key = format!("\"{name}\"");
            let line = lines[start..]
                .iter()
                .find(|l| l.text.contains(&key))
                .unwrap_or(&lines[start]);
            let at = CounterAt {
                device,
                port,
                name,
                source: CounterSource::RdmaStatistic,
                width_bits: None,
            };
            out.table.records.push(ctx.counter(at, v, line));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{counters, parse_text as parse, ports};

    #[test]
    fn rdma_statistic_one_line_per_port_iproute2() {
        let text = "link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_buffer 135 out_of_sequence 0 local_ack_timeout_err 7\nlink mlx5_1/1 out_of_sequence 4\n";
        let t = parse(TableKind::RdmaStatistic, "n1/rdma.txt", text);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        assert_eq!(c.len(), 6);
        assert_eq!((c[2].name.as_str(), c[2].value), ("out_of_buffer", 135));
        assert_eq!(c[5].device, "mlx5_1");
        assert_eq!(c[5].origin.line, 2);
        assert!(c.iter().all(|c| c.width_bits.is_none()));
    }

    #[test]
    fn rdma_statistic_pretty_layout() {
        let text = "link mlx5_2/1\n    out_of_sequence 3\n    np_cnp_sent 9\n";
        let t = parse(TableKind::RdmaStatistic, "n1/rdma.txt", text);
        let c = counters(&t);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[1].device.as_str(), c[1].port, c[1].origin.line),
            ("mlx5_2", Some(1), 3)
        );
    }

    #[test]
    fn negative_values_of_old_iproute2_are_decoded_modulo_2_32() {
        let text = "link mlx5_0/1 rx_write_requests -1294967296 out_of_sequence 5\n";
        let t = parse(TableKind::RdmaStatistic, "n1/rdma.txt", text);
        let c = counters(&t);
        assert_eq!(c[0].value, 3_000_000_000);
        assert!(c.iter().all(|c| c.width_bits == Some(32)));
    }

    #[test]
    fn rdma_statistic_json() {
        let text =
            "[{\"ifname\":\"mlx5_0\",\"port\":1,\"rx_write_requests\":5,\"out_of_sequence\":-2}]\n";
        let t = parse(TableKind::RdmaStatistic, "n1/rdma.json", text);
        let c = counters(&t);
        assert_eq!(c.len(), 2);
        let oos = c.iter().find(|c| c.name == "out_of_sequence").unwrap();
        assert_eq!(oos.value, (1u64 << 32) - 2);
        assert_eq!(oos.width_bits, Some(32));
        let bad = parse(
            TableKind::RdmaStatistic,
            "n1/rdma.json",
            "[{\"ifname\": 3, oops",
        );
        assert!(bad.error.is_some());
    }

    #[test]
    fn rdma_link_lines_are_port_snapshots() {
        let text = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 8 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP netdev ens1f0\nlink mlx5_8/1 state DOWN physical_state DISABLED netdev ens2f0\n";
        let t = parse(TableKind::RdmaStatistic, "n1/rdma-link.txt", text);
        let p = ports(&t);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].state.as_deref(), Some("Active"));
        assert_eq!(p[0].phys_state.as_deref(), Some("LinkUp"));
        assert_eq!(p[0].netdev.as_deref(), Some("ens1f0"));
        assert_eq!(p[0].sm_lid, Some(1));
        assert_eq!(p[1].state.as_deref(), Some("Down"));
    }
}
