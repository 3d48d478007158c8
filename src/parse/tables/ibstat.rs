//! `ibstat` (infiniband-diags):
//!
//! ```text
//! CA 'mlx5_2'
//!     Firmware version: 22.38.1002
//!     Port 1:
//!         State: Down
//!         Physical state: Disabled
//!         Rate: 40
//!         Link layer: Ethernet
//! ```
//!
//! A nested block format (CA, then ports, then fields) read with `nom` line
//! parsers and a little state: the CA name and firmware carry into each port.
//! `Rate:` is Gb/s (`2.5`, `56 (FDR10)`); a Down or Disabled port prints a
//! placeholder rate (40 or 10), kept but marked. ibstat asked for a device the
//! kernel no longer lists prints `ibpanic: … stat of IB device 'mlx5_8'
//! failed`: a vanished device, kept as such; any other ibpanic is reported.

use nom::bytes::complete::{tag, take_until};
use nom::character::complete::{digit1, space0};
use nom::{IResult, Parser};

use crate::model::{PortSnapshot, SysRecord};

use super::TableParse;
use super::common::{
    Line, TableCtx, key_value, leading_f64, normalize_phys_state, normalize_state, parse_u64,
    rate_is_placeholder,
};

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let mut ca: Option<String> = None;
    let mut firmware: Option<String> = None;
    let mut port: Option<PortSnapshot> = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Ok((_, name)) = ca_header(text) {
            flush(&mut port, &mut out);
            ca = Some(name.to_string());
            firmware = None;
        } else if let (Ok((_, n)), Some(dev)) = (port_header(text), &ca) {
            flush(&mut port, &mut out);
            port = Some(PortSnapshot {
                host: ctx.host.clone(),
                device: dev.clone(),
                port: n.parse().ok(),
                firmware: firmware.clone(),
                origin: Some(ctx.origin(line)),
                ..PortSnapshot::default()
            });
        } else if let Some(device) = vanished_device(text) {
            flush(&mut port, &mut out);
            let mut gone = PortSnapshot {
                host: ctx.host.clone(),
                device: device.to_string(),
                vanished: true,
                origin: Some(ctx.origin(line)),
                ..PortSnapshot::default()
            };
            gone.lines.insert("state", ctx.source_line(line));
            out.records.push(SysRecord::Port(Box::new(gone)));
            ca = None;
        } else if text.starts_with("ibpanic:") {
            out.error = Some(format!("ibstat stopped: {text}"));
        } else if let Some((key, value)) = key_value(text) {
            let read = port
                .as_mut()
                .is_some_and(|p| port_field(ctx, line, p, key, value));
            if !read && key == "Firmware version" {
                firmware = Some(value.to_string());
            }
        } else {
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

/// Reads one `Key: value` of a port block; false when the key is not one.
fn port_field(
    ctx: &TableCtx,
    line: &Line<'_>,
    p: &mut PortSnapshot,
    key: &str,
    value: &str,
) -> bool {
    let field: &'static str = match key {
        "State" => {
            p.state = Some(normalize_state(value));
            "state"
        }
        "Physical state" => {
            p.phys_state = Some(normalize_phys_state(value));
            "phys_state"
        }
        "Rate" => {
            p.rate_gbps = leading_f64(value);
            "rate"
        }
        "Base lid" => {
            p.lid = parse_u64(value).map(|v| v as u32);
            "lid"
        }
        "SM lid" => {
            p.sm_lid = parse_u64(value).map(|v| v as u32);
            "sm_lid"
        }
        "Link layer" => {
            p.link_layer = Some(value.to_string());
            "link_layer"
        }
        "LMC" | "Capability mask" | "Port GUID" | "Effective speed" => return true,
        _ => return false,
    };
    p.lines.insert(field, ctx.source_line(line));
    true
}

/// `ibpanic: [41822] main: stat of IB device 'mlx5_2' failed: No such file
/// or directory` (infiniband-diags' ibstat, asked for a device the kernel no
/// longer lists) → `mlx5_2`.
fn vanished_device(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("ibpanic:")?;
    let (_, after) = rest.split_once("stat of IB device '")?;
    let (device, tail) = after.split_once('\'')?;
    tail.contains("No such file or directory").then_some(device)
}

/// `CA 'mlx5_0'` → `mlx5_0`.
fn ca_header(input: &str) -> IResult<&str, &str> {
    let (input, _) = tag("CA '").parse(input)?;
    let (input, name) = take_until("'").parse(input)?;
    let (input, _) = tag("'").parse(input)?;
    Ok((input, name))
}

/// `Port 1:` → `1`.
fn port_header(input: &str) -> IResult<&str, &str> {
    let (input, _) = tag("Port ").parse(input)?;
    let (input, n) = digit1.parse(input)?;
    let (input, _) = (space0, tag(":")).parse(input)?;
    if !input.trim().is_empty() {
        return Err(nom::Err::Error(nom::error::Error::new(
            input,
            nom::error::ErrorKind::Eof,
        )));
    }
    Ok((input, n))
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{parse_text, ports};

    const SOME_DOWN: &str =
        include_str!("../../../tests/data/tables/ibstat-gpud-h100-some-down.txt");

    #[test]
    fn ibstat_rdma_core_h100_with_disabled_ports() {
        let t = parse_text(TableKind::Ibstat, "node7/ibstat.txt", SOME_DOWN);
        assert_eq!(t.unparsed, 0);
        let p = ports(&t);
        let m0 = p.iter().find(|p| p.device == "mlx5_0").unwrap();
        assert_eq!(m0.state.as_deref(), Some("Active"));
        assert_eq!(m0.rate_gbps, Some(400.0));
        assert_eq!(m0.sm_lid, Some(334));
        assert_eq!(m0.lid, Some(75));
        assert_eq!(m0.firmware.as_deref(), Some("28.39.1002"));
        assert_eq!(m0.link_layer.as_deref(), Some("InfiniBand"));
        assert!(!m0.rate_placeholder);
        assert_eq!(m0.host.as_deref(), Some("node7"));
        let m2 = p.iter().find(|p| p.device == "mlx5_2").unwrap();
        assert_eq!(m2.state.as_deref(), Some("Down"));
        assert_eq!(m2.phys_state.as_deref(), Some("Disabled"));
        assert_eq!(m2.rate_gbps, Some(40.0));
        assert!(m2.rate_placeholder);
        // The cited line: its number where the file can be re-read, its
        // text too inside an archive.
        let cited = m2.lines.get("state").unwrap();
        assert!(cited.text.is_empty());
        let line = SOME_DOWN
            .lines()
            .nth(cited.origin.line as usize - 1)
            .unwrap();
        assert!(line.contains("State: Down"), "{line}");
        let t = parse_text(TableKind::Ibstat, "logs.tar!node7/ibstat.txt", SOME_DOWN);
        let m2 = ports(&t)
            .into_iter()
            .find(|p| p.device == "mlx5_2")
            .unwrap();
        assert_eq!(&*m2.lines.get("state").unwrap().text, line.trim_end());
    }

    #[test]
    fn fdr10_rates_and_a_device_ibstat_no_longer_finds_infiniband_diags_2_x() {
        // A loop of `ibstat mlx5_N`: one device gone, the next still read.
        let text = "CA 'mlx4_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: 56 (FDR10)\nibpanic: [1234] main: stat of IB device 'mlx5_8' failed: No such file or directory\nCA 'mlx5_9'\n\tPort 1:\n\t\tState: Active\n";
        let t = parse_text(TableKind::Ibstat, "x.txt", text);
        let p = ports(&t);
        assert_eq!(p[0].rate_gbps, Some(56.0));
        assert!(!p[0].vanished);
        assert_eq!(
            (p[1].device.as_str(), p[1].vanished, p[1].state.as_deref()),
            ("mlx5_8", true, None)
        );
        assert_eq!(p[1].lines.get("state").unwrap().origin.line, 5);
        assert_eq!(
            (p[2].device.as_str(), p[2].state.as_deref()),
            ("mlx5_9", Some("Active"))
        );
        assert!(t.error.is_none(), "a missing device is read, not a stop");
        let other = parse_text(
            TableKind::Ibstat,
            "x.txt",
            "ibpanic: [1] main: can't init UMAD library\n",
        );
        assert!(other.error.unwrap().contains("ibpanic"));
    }

    #[test]
    fn junk_does_not_panic() {
        let t = parse_text(
            TableKind::Ibstat,
            "x.txt",
            "CA '\n\tPort :\nPort 1:\n\u{1b}[0m\n:::\n",
        );
        assert!(ports(&t).is_empty());
    }
}
