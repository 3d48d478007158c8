//! `mlxlink` (NVIDIA MFT): titled sections, each underlined with dashes,
//! holding `Key   : value` lines.
//!
//! ```text
//! Operational Info
//! ----------------
//! State                           : Active
//! Speed                           : IB-HDR
//! Width                           : 2x
//! Physical Counters and BER Info
//! ------------------------------
//! Effective Physical Errors          : 0
//! Effective Physical BER             : 15E-255
//! Link Down Counter                  : 0
//! ```
//!
//! The key column is 32 wide in older MFT and 35 in newer: split on the
//! first ` : `. Terminal captures carry ANSI colours (stripped before
//! reading). Error counts become counters; state, speed × width and the BERs
//! (`15E-255` is the "zero" sentinel) a port snapshot. A shell loop over
//! several devices leaves `=== mt4123_pciconf5 ===` banners: each starts a
//! device.

use crate::model::{CounterSource, PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    CounterAt, Line, TableCtx, UNKNOWN_DEVICE, leading_f64, normalize_phys_state, normalize_state,
    rate_is_placeholder,
};

/// Keys whose value is an error count, and the counter name they get.
const COUNTERS: &[(&str, &str)] = &[
    ("Effective Physical Errors", "effective_physical_errors"),
    ("Link Down Counter", "link_down_counter"),
    ("Link Error Recovery Counter", "link_error_recovery_counter"),
    ("Symbol Errors", "symbol_errors"),
    ("Raw Physical Errors Per Lane", "raw_physical_errors"),
];

/// Per-lane rates of the IB speed names, Gb/s.
const IB_LANE_GBPS: &[(&str, f64)] = &[
    ("SDR", 2.5),
    ("DDR", 5.0),
    ("QDR", 10.0),
    ("FDR10", 10.0),
    ("FDR", 14.0),
    ("EDR", 25.0),
    ("HDR", 50.0),
    ("NDR", 100.0),
    ("XDR", 200.0),
];

/// BERs at or below this are mlxlink's "no errors" sentinel (`15E-255`).
const BER_ZERO: f64 = 1e-200;

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let (cmd_device, port) = command_device(lines);
    let mut snap = new_snapshot(ctx, cmd_device.clone(), port, lines.first());
    let mut speed: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim();
        if text.is_empty() || is_underline(text) || is_title(text, lines.get(i + 1)) {
            continue;
        }
        if let Some(dev) = banner(text) {
            flush(&mut snap, &mut speed, &mut out);
            snap = new_snapshot(ctx, cmd_device.clone().or(Some(dev)), port, Some(line));
            continue;
        }
        if text.starts_with("-E-") || text.starts_with("-W-") || text.contains("mlxlink -") {
            continue;
        }
        let Some((key, value)) = text.split_once(" : ") else {
            out.unparsed += 1;
            continue;
        };
        read_field(
            ctx,
            line,
            &mut snap,
            &mut speed,
            key.trim(),
            value.trim(),
            &mut out,
        );
    }
    flush(&mut snap, &mut speed, &mut out);
    out
}

fn new_snapshot(
    ctx: &TableCtx,
    device: Option<String>,
    port: Option<u32>,
    at: Option<&Line<'_>>,
) -> PortSnapshot {
    PortSnapshot {
        host: ctx.host.clone(),
        device: device
            .or_else(|| ctx.device_in_path())
            .unwrap_or_else(|| UNKNOWN_DEVICE.to_string()),
        port,
        origin: at.map(|l| ctx.origin(l)),
        ..PortSnapshot::default()
    }
}

fn read_field(
    ctx: &TableCtx,
    line: &Line<'_>,
    snap: &mut PortSnapshot,
    speed: &mut Option<String>,
    key: &str,
    value: &str,
    out: &mut TableParse,
) {
    if let Some((_, name)) = COUNTERS.iter().find(|(k, _)| *k == key) {
        // Per-lane lists (`3946476397,5120336064,…`) count as their sum.
        let sum = value
            .split(',')
            .map(|v| v.trim().parse::<u64>())
            .try_fold(0u64, |acc, v| v.map(|v| acc.saturating_add(v)));
        match sum {
            Ok(v) => {
                let at = CounterAt {
                    device: &snap.device,
                    port: snap.port,
                    name,
                    source: CounterSource::Mlxlink,
                    width_bits: None,
                };
                out.records.push(ctx.counter(at, v, line));
            }
            Err(_) if value == "N/A" => {}
            Err(_) => out.unparsed += 1,
        }
        return;
    }
    let field: &'static str = match key {
        "State" => {
            snap.state = Some(normalize_state(value));
            "state"
        }
        "Physical state" => {
            snap.phys_state = Some(normalize_phys_state(value));
            "phys_state"
        }
        "Speed" => {
            *speed = Some(value.to_string());
            "rate"
        }
        "Width" => {
            snap.width = Some(value.to_ascii_uppercase());
            "width"
        }
        "Effective Physical BER" => {
            snap.effective_ber = ber(value);
            "effective_ber"
        }
        "Raw Physical BER" => {
            snap.raw_ber = ber(value);
            "raw_ber"
        }
        "Recommendation" => {
            snap.recommendation = Some(value.to_string()).filter(|v| !v.starts_with("No issue"));
            "recommendation"
        }
        "Firmware Version" => {
            snap.firmware = Some(value.to_string());
            return;
        }
        _ => return,
    };
    snap.lines.insert(field, ctx.source_line(line));
}

fn flush(snap: &mut PortSnapshot, speed: &mut Option<String>, out: &mut TableParse) {
    let next = PortSnapshot {
        host: snap.host.clone(),
        device: snap.device.clone(),
        port: snap.port,
        ..PortSnapshot::default()
    };
    let mut s = std::mem::replace(snap, next);
    let speed = speed.take();
    if s.state.is_none() && s.effective_ber.is_none() && s.raw_ber.is_none() {
        return;
    }
    s.rate_gbps = speed.as_deref().and_then(|v| rate(v, s.width.as_deref()));
    s.rate_placeholder = rate_is_placeholder(s.state.as_deref(), s.phys_state.as_deref());
    out.records.push(SysRecord::Port(Box::new(s)));
}

/// `100G` → 100; `IB-HDR` with `2X` → 100.
fn rate(speed: &str, width: Option<&str>) -> Option<f64> {
    if let Some(name) = speed.strip_prefix("IB-") {
        let lane = IB_LANE_GBPS.iter().find(|(n, _)| *n == name)?.1;
        let lanes = width
            .and_then(|w| w.trim_end_matches(['X', 'x']).parse::<f64>().ok())
            .unwrap_or(4.0);
        return Some(lane * lanes);
    }
    speed
        .strip_suffix('G')
        .and_then(|n| n.parse().ok())
        .or_else(|| leading_f64(speed).filter(|_| speed.contains('G')))
}

/// A BER value; the sentinel reads as zero.
fn ber(value: &str) -> Option<f64> {
    let v: f64 = value.trim().parse().ok()?;
    Some(if v <= BER_ZERO { 0.0 } else { v })
}

/// `mlxlink -d mlx5_1 -p 1 -c` in a prompt names the device and port.
fn command_device(lines: &[Line<'_>]) -> (Option<String>, Option<u32>) {
    let Some(cmd) = lines.iter().take(8).find(|l| l.text.contains("mlxlink -")) else {
        return (None, None);
    };
    let words: Vec<&str> = cmd.text.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
    };
    (
        after("-d").map(|d| d.rsplit('/').next().unwrap_or(d).to_string()),
        after("-p").and_then(|p| p.parse().ok()),
    )
}

/// `========== mt4123_pciconf5 ==========` → `mt4123_pciconf5`; a script
/// that names both (`=== mlx5_5 (/dev/mst/mt4129_pciconf5) ===`) gives the
/// RDMA device first, the name NCCL and `ibstat` use.
fn banner(text: &str) -> Option<String> {
    let inner = text.strip_prefix("===")?.trim_start_matches('=').trim();
    let first = inner.trim_end_matches('=').split_whitespace().next()?;
    let name = first.rsplit('/').next().unwrap_or(first);
    (!name.is_empty()).then(|| name.to_string())
}

fn is_underline(text: &str) -> bool {
    text.len() >= 3 && text.bytes().all(|b| b == b'-')
}

/// A section title is a line underlined by dashes.
fn is_title(text: &str, next: Option<&Line<'_>>) -> bool {
    !text.contains(" : ") && next.is_some_and(|n| is_underline(n.text.trim()))
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{counters, parse_text, ports};

    const BF3: &str = include_str!("../../../tests/data/tables/mlxlink-bf3-m-c.txt");
    const ANSI: &str = include_str!("../../../tests/data/tables/mlxlink-c-ansi.txt");
    const BANNERS: &str = include_str!("../../../tests/data/tables/mlxlink-hdr2x-banners.txt");

    #[test]
    fn mlxlink_mft_4_30_bluefield3_m_c() {
        let t = parse_text(TableKind::Mlxlink, "bf/mlxlink.txt", BF3);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].state.as_deref(), Some("Active"));
        assert_eq!(p[0].rate_gbps, Some(100.0));
        assert_eq!(p[0].width.as_deref(), Some("4X"));
        assert_eq!(p[0].effective_ber, Some(0.0));
        assert_eq!(p[0].recommendation, None);
        let c = counters(&t);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "effective_physical_errors",
                "raw_physical_errors",
                "link_down_counter",
                "link_error_recovery_counter"
            ]
        );
    }

    #[test]
    fn mlxlink_c_terminal_capture_with_ansi_colours() {
        let t = parse_text(TableKind::Mlxlink, "clnet36/mlx5_1/mlxlink.txt", ANSI);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        assert_eq!(p[0].raw_ber, Some(2e-9));
        assert_eq!(p[0].device, "mlx5_1");
        let c = counters(&t);
        let raw = c.iter().find(|c| c.name == "raw_physical_errors").unwrap();
        assert_eq!(raw.value, 3946476397 + 5120336064 + 7692183445 + 3026261414);
        let cited = p[0].lines.get("raw_ber").unwrap().origin.line as usize;
        assert!(
            ANSI.lines()
                .nth(cited - 1)
                .unwrap()
                .contains("Raw Physical BER")
        );
    }

    #[test]
    fn a_banner_naming_the_rdma_device_and_its_mst_path_gives_the_rdma_device_mft_4_28() {
        assert_eq!(
            super::banner("========== mlx5_5 (/dev/mst/mt4129_pciconf5) ==========").as_deref(),
            Some("mlx5_5")
        );
        assert_eq!(
            super::banner("=== /dev/mst/mt4129_pciconf5 ===").as_deref(),
            Some("mt4129_pciconf5")
        );
    }

    #[test]
    fn mlxlink_mft_4_24_banners_split_devices() {
        let t = parse_text(TableKind::Mlxlink, "a100/mlxlink.txt", BANNERS);
        let p = ports(&t);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].device, "mt4123_pciconf5");
        assert_eq!(p[2].device, "mt4123_pciconf7");
        assert_eq!(p[1].rate_gbps, Some(100.0));
        assert_eq!(p[1].width.as_deref(), Some("2X"));
    }
}
