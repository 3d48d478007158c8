//! Ingest: find the job's files, open them (decompressing by content), sniff
//! what each one holds and split it into lines.

pub mod archive;
pub mod discover;
pub mod json_lines;
pub mod launcher;
pub mod lines;
pub mod open;
pub mod path_hints;
pub mod sniff;
pub mod sniff_tables;

pub use discover::{Discovery, InputFile, discover};
pub use lines::{ChunkReader, LineStats};
pub use path_hints::PathHints;
pub use sniff::{FileKind, FileProfile, TableKind};

pub use crate::model::Skipped;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("cannot read {path}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is neither a file nor a folder")]
    NotAFileOrFolder { path: PathBuf },
}
