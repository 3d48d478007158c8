//! Table files: counter dumps, fabric snapshots and Flight Recorder dumps,
//! read whole (they are small) into [`SysRecord`]s.

mod flight_recorder;

use crate::ingest::{InputFile, TableKind};
use crate::model::{Origin, SysRecord};

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
        TableKind::FlightRecorderPickle => flight_dump(flight_recorder::from_pickle(data), file),
        TableKind::FlightRecorderJson => flight_dump(flight_recorder::from_json(data), file),
        _ => TableParse {
            error: Some(format!("{kind:?} files are not read yet")),
            ..Default::default()
        },
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
                records: vec![SysRecord::Flight(dump)],
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
