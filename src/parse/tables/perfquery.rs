//! `perfquery` (infiniband-diags / libibmad `_mad_dump_field`):
//!
//! ```text
//! # Port extended counters: Lid 10 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
//! PortSelect:......................1
//! SymbolErrorCounter:..............0
//! ```
//!
//! Blocks follow each other (one per port, or `-E` detail blocks); the header
//! decides the counters' widths: legacy `# Port counters:` data counters are
//! 32-bit and error counters keep their PMA widths, `-x` counters are 64-bit.
//! The lid may be a `DR path slid 0; dlid 0; 0,1`. A `watch` header may come
//! first. Written with `nom`: the header has optional parts (CapMask2, a lid
//! or a directed-route path) and the dotted fields are a tiny grammar of
//! their own, which reads more clearly as combinators than as one regex.

use nom::bytes::complete::{tag, take_until, take_while, take_while1};
use nom::character::complete::{digit1, hex_digit1, space0};
use nom::combinator::{opt, rest};
use nom::sequence::preceded;
use nom::{IResult, Parser};

use crate::model::CounterSource;

use super::TableParse;
use super::common::{CounterAt, Line, TableCtx, one_rdma_device_in, parse_u64};
use super::widths::perfquery_width;

/// What a block header says.
#[derive(Debug, Clone, PartialEq)]
struct Header {
    /// `Port`, `Port extended`, `PortRcvErrorDetails`, …
    kind: String,
    /// `Lid 10` or `DR path slid 0; dlid 0; 0,1`.
    who: String,
    port: u32,
    cap_mask2: Option<u64>,
}

/// Fields that select, not count.
const NOT_COUNTERS: &[&str] = &["PortSelect", "CounterSelect", "CounterSelect2"];

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    let mut out = TableParse::default();
    let named_device = device_in_command(lines).or_else(|| ctx.device_in_path());
    let mut block: Option<(Header, String)> = None;
    let mut title: Option<String> = None;
    for line in lines {
        let text = line.text.trim_end();
        if text.trim().is_empty() || text.starts_with("Every ") {
            continue;
        }
        if let Ok((_, h)) = header(text) {
            let device = title
                .take()
                .or_else(|| named_device.clone())
                .unwrap_or_else(|| h.who.clone());
            block = Some((h, device));
            continue;
        }
        let (Some((h, device)), Ok((_, (name, value)))) = (&block, field(text)) else {
            // A script's title over each HCA's dump (`== mlx5_1`, `### perfquery
            // -x -C mlx5_1 1`): the next block is that device's, whatever LID
            // it prints.
            match one_rdma_device_in(text) {
                Some(device) => title = Some(device),
                None => out.unparsed += 1,
            }
            continue;
        };
        if NOT_COUNTERS.contains(&name) {
            continue;
        }
        let Some(v) = parse_u64(value) else {
            out.unparsed += 1;
            continue;
        };
        let at = CounterAt {
            device,
            port: Some(h.port),
            name,
            source: CounterSource::Perfquery,
            width_bits: width(h, name),
        };
        out.records.push(ctx.counter(at, v, line));
    }
    out
}

/// Legacy PortCounters keep their PMA widths; the extended attribute is 64-bit
/// throughout (its error block appears only when CapMask2 advertises it).
fn width(h: &Header, name: &str) -> Option<u8> {
    if h.kind == "Port extended" {
        Some(64)
    } else {
        perfquery_width(name)
    }
}

/// `perfquery -x -C mlx5_0 -P 1` in a prompt or `watch` line names the HCA.
fn device_in_command(lines: &[Line<'_>]) -> Option<String> {
    lines
        .iter()
        .take(8)
        .filter(|l| l.text.contains("perfquery"))
        .find_map(|l| {
            let mut words = l.text.split_whitespace();
            words.find(|w| *w == "-C" || *w == "--Ca")?;
            words.next().map(str::to_string)
        })
}

fn header(input: &str) -> IResult<&str, Header> {
    let (input, _) = tag("# ").parse(input)?;
    let (input, kind) = take_until(" counters: ").parse(input)?;
    let (input, _) = tag(" counters: ").parse(input)?;
    let (input, who) = take_until(" port ").parse(input)?;
    let (input, _) = tag(" port ").parse(input)?;
    let (input, port) = digit1.parse(input)?;
    let (input, _) = space0.parse(input)?;
    let (input, _) = opt((tag("(CapMask: 0x"), hex_digit1)).parse(input)?;
    let (input, mask2) = opt(preceded(tag(" CapMask2: 0x"), hex_digit1)).parse(input)?;
    let port = port.parse().map_err(|_| fail(input))?;
    Ok((
        input,
        Header {
            kind: kind.to_string(),
            who: who.to_string(),
            port,
            cap_mask2: mask2.and_then(|m| u64::from_str_radix(m, 16).ok()),
        },
    ))
}

/// `SymbolErrorCounter:..............0` → (`SymbolErrorCounter`, `0`).
fn field(input: &str) -> IResult<&str, (&str, &str)> {
    let (input, name) =
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_').parse(input)?;
    let (input, _) = tag(":").parse(input)?;
    let (input, _) = take_while(|c| c == '.').parse(input)?;
    let (input, value) = rest.parse(input)?;
    if value.trim().is_empty() {
        return Err(fail(input));
    }
    Ok((input, (name, value.trim())))
}

fn fail(input: &str) -> nom::Err<nom::error::Error<&str>> {
    nom::Err::Error(nom::error::Error::new(input, nom::error::ErrorKind::Verify))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::TableKind;
    use crate::parse::tables::testing::{counters, parse_text};

    const X_RHEL75: &str = include_str!("../../../tests/data/tables/perfquery-x-rhel75.txt");
    const LEGACY_WATCH: &str =
        include_str!("../../../tests/data/tables/perfquery-legacy-watch-mlx4.txt");

    #[test]
    fn headers_with_lids_dr_paths_and_capmask2() {
        let (_, h) =
            header("# Port extended counters: Lid 10 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)")
                .unwrap();
        assert_eq!(h.kind, "Port extended");
        assert_eq!(h.who, "Lid 10");
        assert_eq!(h.port, 1);
        assert_eq!(h.cap_mask2, Some(2));
        let (_, h) =
            header("# Port counters: DR path slid 0; dlid 0; 0,1 port 2 (CapMask: 0x1400)")
                .unwrap();
        assert_eq!(h.who, "DR path slid 0; dlid 0; 0,1");
        assert_eq!(h.port, 2);
        assert_eq!(h.cap_mask2, None);
        assert!(header("# something else").is_err());
    }

    #[test]
    fn perfquery_x_infiniband_diags_rhel75() {
        let t = parse_text(TableKind::Perfquery, "n1/perfquery.txt", X_RHEL75);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        assert_eq!(c.len(), 22);
        assert!(c.iter().all(|c| c.width_bits == Some(64)));
        assert_eq!(c[0].name, "PortXmitData");
        assert_eq!(c[0].device, "Lid 10");
        assert_eq!(c.last().unwrap().name, "QP1Dropped");
    }

    #[test]
    fn perfquery_legacy_under_watch_mlx4() {
        let t = parse_text(TableKind::Perfquery, "n1/perfquery.txt", LEGACY_WATCH);
        assert_eq!(t.unparsed, 0);
        let c = counters(&t);
        let se = c.iter().find(|c| c.name == "SymbolErrorCounter").unwrap();
        assert_eq!(se.width_bits, Some(16));
        let ld = c.iter().find(|c| c.name == "LinkDownedCounter").unwrap();
        assert_eq!(ld.width_bits, Some(8));
        let data = c.iter().find(|c| c.name == "PortXmitData").unwrap();
        assert_eq!((data.value, data.width_bits), (6465317, Some(32)));
        let lli = c
            .iter()
            .find(|c| c.name == "LocalLinkIntegrityErrors")
            .unwrap();
        assert_eq!(lli.width_bits, Some(4));
        assert_eq!(c[0].taken_at.map(|t| t.get()), Some(20141105113244));
        assert_eq!(c[0].port, Some(1));
    }

    #[test]
    fn several_port_blocks_and_a_named_ca() {
        let text = "$ perfquery -C mlx5_3 -a\n# Port counters: Lid 5 port 1 (CapMask: 0x1400)\nSymbolErrorCounter:..............7\n# Port counters: Lid 5 port 2 (CapMask: 0x1400)\nSymbolErrorCounter:..............65535\ngarbage\n";
        let t = parse_text(TableKind::Perfquery, "n1/pq.txt", text);
        let c = counters(&t);
        assert_eq!(c.len(), 2);
        assert_eq!((c[1].port, c[1].value), (Some(2), 65535));
        assert_eq!(c[1].device, "mlx5_3");
        // The command line names the CA; only the junk is not understood.
        assert_eq!(t.unparsed, 1);
    }

    /// A Slurm epilog's dump of every HCA, each under its script's title:
    /// the blocks are the titled HCAs', not LIDs.
    #[test]
    fn titles_between_blocks_name_each_hca() {
        let text = "# epilog job 789114 2024-09-03 12:21:46\n== mlx5_0\n# Port extended counters: Lid 1200 port 1 (CapMask: 0x5A00 CapMask2: 0x0000002)\nPortXmitWait:....................2569138017\n== mlx5_1\n# Port extended counters: Lid 1201 port 1 (CapMask: 0x5A00 CapMask2: 0x0000002)\nPortXmitWait:....................512000000000\n";
        let t = parse_text(TableKind::Perfquery, "epilog/n101/perfquery-x.txt", text);
        let c = counters(&t);
        let devices: Vec<&str> = c.iter().map(|c| c.device.as_str()).collect();
        assert_eq!(devices, ["mlx5_0", "mlx5_1"]);
    }
}
