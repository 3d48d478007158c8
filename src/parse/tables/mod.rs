//! Table files: counter dumps, fabric snapshots and Flight Recorder dumps,
//! read whole (they are small) into [`SysRecord`]s.

use crate::ingest::{InputFile, TableKind};
use crate::model::SysRecord;

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
pub fn parse_table(kind: TableKind, _data: &[u8], _file: &InputFile) -> TableParse {
    TableParse {
        error: Some(format!("{kind:?} files are not read yet")),
        ..Default::default()
    }
}
