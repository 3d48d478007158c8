//! Table files: counter dumps, fabric snapshots and Flight Recorder dumps,
//! read whole (they are small) into [`SysRecord`]s.
//!
//! One module per tool. Every parser takes the file's numbered lines, cites
//! the line each value came from, and counts what it could not read instead
//! of failing: junk never panics.

mod bonding;
mod common;
mod ethtool;
mod ibdev2netdev;
mod ibstat;
mod ibstatus;
mod ibv_devinfo;
mod lldp;
mod mlxlink;
mod nvidia_smi;
mod perfquery;
mod rdma_stat;
mod sections;
mod show_gids;
mod sysfs;
mod widths;

mod flight_recorder;

use crate::ingest::{InputFile, TableKind};
use crate::model::{Origin, SysRecord};

use common::TableCtx;

/// Tables larger than this are not read (no real dump comes close).
pub const MAX_TABLE_BYTES: u64 = 256 << 20;

/// What reading one table file produced.
#[derive(Debug, Default)]
pub struct TableParse {
    pub records: Vec<SysRecord>,
    /// Lines (or entries) that were not understood.
    pub unparsed: u64,
    /// Why the table could not be read, if it could not.
    pub error: Option<String>,
}

/// Parses a whole table file of a known kind.
pub fn parse_table(kind: TableKind, data: &[u8], file: &InputFile) -> TableParse {
    match kind {
        TableKind::FlightRecorderPickle => {
            return flight_dump(flight_recorder::from_pickle(data), file);
        }
        TableKind::FlightRecorderJson => {
            return flight_dump(flight_recorder::from_json(data), file);
        }
        _ => {}
    }
    let lines = common::lines(data);
    let mut out = sections::parse(kind, file, &lines, parse_kind).unwrap_or_else(|| {
        let ctx = TableCtx::new(file, &lines);
        parse_kind(kind, &ctx, &lines)
    });
    if out.records.is_empty() && out.error.is_none() {
        out.error = Some(format!(
            "looks like {kind:?} output but holds nothing it could read ({} lines not understood)",
            out.unparsed
        ));
    }
    out
}

/// Reads text lines of a kind (Flight Recorder dumps are not text: none).
fn parse_kind(kind: TableKind, ctx: &TableCtx, lines: &[common::Line<'_>]) -> TableParse {
    let parse = match kind {
        TableKind::SysfsCounters => sysfs::parse,
        TableKind::Perfquery => perfquery::parse,
        TableKind::EthtoolStats => ethtool::parse,
        TableKind::RdmaStatistic => rdma_stat::parse,
        TableKind::Ibstat => ibstat::parse,
        TableKind::Ibstatus => ibstatus::parse,
        TableKind::IbvDevinfo => ibv_devinfo::parse,
        TableKind::ShowGids => show_gids::parse,
        TableKind::Mlxlink => mlxlink::parse,
        TableKind::Ibdev2netdev => ibdev2netdev::parse,
        TableKind::NvidiaSmi => nvidia_smi::parse,
        TableKind::Lldp => lldp::parse,
        TableKind::Bonding => bonding::parse,
        TableKind::FlightRecorderPickle | TableKind::FlightRecorderJson => {
            return TableParse::default();
        }
    };
    parse(ctx, lines)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for the parsers' tests.

    use super::*;
    use crate::ingest::path_hints::hints_from_path;
    use crate::model::{CounterReading, FileId, GidEntry, GpuSnapshot, PortSnapshot};

    pub fn parse_text(kind: TableKind, path: &str, text: &str) -> TableParse {
        let file = InputFile {
            id: FileId(0),
            display: path.to_string(),
            path: path.into(),
            size: text.len() as u64,
            hints: hints_from_path(path),
        };
        parse_table(kind, text.as_bytes(), &file)
    }

    /// The records of one kind a parse produced.
    fn records<'t, T: ?Sized>(
        t: &'t TableParse,
        pick: impl Fn(&'t SysRecord) -> Option<&'t T>,
    ) -> Vec<&'t T> {
        t.records.iter().filter_map(pick).collect()
    }

    pub fn counters(t: &TableParse) -> Vec<&CounterReading> {
        records(t, |r| match r {
            SysRecord::Counter(c) => Some(c),
            _ => None,
        })
    }

    pub fn ports(t: &TableParse) -> Vec<&PortSnapshot> {
        records(t, |r| match r {
            SysRecord::Port(p) => Some(&**p),
            _ => None,
        })
    }

    pub fn gpus(t: &TableParse) -> Vec<&GpuSnapshot> {
        records(t, |r| match r {
            SysRecord::Gpu(g) => Some(&**g),
            _ => None,
        })
    }

    pub fn gids(t: &TableParse) -> Vec<&GidEntry> {
        records(t, |r| match r {
            SysRecord::Gid(g) => Some(&**g),
            _ => None,
        })
    }
}

#[cfg(test)]
mod junk_tests {
    use super::testing::parse_text;
    use super::*;

    const KINDS: &[TableKind] = &TableKind::TEXT;

    const SAMPLES: &[&str] = &[
        include_str!("../../../tests/data/tables/sysfs-gpud-h100-ndr.txt"),
        include_str!("../../../tests/data/tables/perfquery-legacy-watch-mlx4.txt"),
        include_str!("../../../tests/data/tables/ethtool-grep-cx4lx-pause.txt"),
        include_str!("../../../tests/data/tables/ibstat-gpud-h100-some-down.txt"),
        include_str!("../../../tests/data/tables/ibstatus-nccl1935-all-down.txt"),
        include_str!("../../../tests/data/tables/ibv_devinfo-nccl426-bond.txt"),
        include_str!("../../../tests/data/tables/show_gids-cx4lx-4port.txt"),
        include_str!("../../../tests/data/tables/mlxlink-c-ansi.txt"),
        include_str!("../../../tests/data/tables/nvidia-smi-v100-470-err.txt"),
        include_str!("../../../tests/data/tables/nvidia-smi-q-a100-535-remap.txt"),
        "[{\"ifname\":\"mlx5_0\",\"port\":1,\"x\":-5}]",
        "link mlx5_0/1 a -99999999999999 b\n  c\nlink /\nlink x/y z 1",
        "0000:3b:00.1 mlx5_1 (MT4123 - NA) fw 20.31.1014 port 1 (ACTIVE) ==> ib1 (Up)\nmlx5_0 port 1 ==> ib0 (Down)\n",
    ];

    /// Every parser survives every truncation of every sample, and binary junk.
    #[test]
    fn every_parser_takes_junk_without_panicking() {
        for kind in KINDS {
            for text in SAMPLES {
                let mut cut = 0;
                while cut <= text.len() {
                    if text.is_char_boundary(cut) {
                        let _ = parse_text(*kind, "node1/x.txt", &text[..cut]);
                    }
                    cut += 41;
                }
                let _ = parse_text(*kind, "node1/x.txt", text);
            }
            let junk: Vec<u8> = (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect();
            let file = InputFile {
                id: crate::model::FileId(0),
                display: "j".into(),
                path: "j".into(),
                size: 0,
                hints: Default::default(),
            };
            let t = parse_table(*kind, &junk, &file);
            assert!(t.records.is_empty() || t.unparsed > 0);
        }
    }
}

/// A Flight Recorder dump is named after its rank: `…_rank_<r>` (the default
/// file prefixes all end that way), else the path hints.
fn flight_dump(result: Result<crate::model::FlightDump, String>, file: &InputFile) -> TableParse {
    match result {
        Ok(mut dump) => {
            dump.rank = rank_suffix(&file.display).or(file.hints.rank);
            dump.origin = Some(Origin {
                file: file.id,
                line: 0,
            });
            TableParse {
                records: vec![SysRecord::Flight(Box::new(dump))],
                ..Default::default()
            }
        }
        Err(e) => TableParse {
            error: Some(format!("Flight Recorder dump: {e}")),
            ..Default::default()
        },
    }
}

/// The digits after the last `rank_` / `rank` in a file name.
fn rank_suffix(path: &str) -> Option<u32> {
    let name = path.rsplit('/').next()?;
    let at = name.rfind("rank")?;
    let digits: String = name[at + 4..]
        .trim_start_matches(['_', '-'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
