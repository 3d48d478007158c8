//! Render: the JSON document, the HTML page and the terminal summary. Reads
//! only the job model and the diagnosis.

pub mod html;
pub mod json;
mod rank_list;
pub mod terminal;
pub mod trace;

use std::path::{Path, PathBuf};

use crate::diagnose::Diagnosis;
use crate::model::Job;
use crate::timeline::Timeline;

/// What every renderer reads.
pub struct ReportInput<'a> {
    pub job: &'a Job,
    pub timeline: &'a Timeline,
    pub diagnosis: &'a Diagnosis,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot create output folder {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Paths of the files written.
#[derive(Debug)]
pub struct Written {
    pub json: PathBuf,
    pub html: Option<PathBuf>,
}

/// Writes `report.json` and (unless `json_only`) `report.html` into `dir`.
pub fn write_reports(
    dir: &Path,
    input: &ReportInput<'_>,
    json_only: bool,
) -> Result<Written, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let doc = json::document(input);
    let json_text = json::to_string(&doc);
    let json_path = dir.join("report.json");
    write_file(&json_path, &json_text)?;
    // Memory peaks here at scale (the job, the document and the page): the
    // written text is not needed again.
    drop(json_text);
    let html = if json_only {
        None
    } else {
        let path = dir.join("report.html");
        // The copy inside the HTML is compact: at 16k ranks the pretty one
        // alone would pass the report's 5 MB budget.
        write_file(&path, &html::render(input, &json::to_compact_string(&doc)))?;
        Some(path)
    };
    Ok(Written {
        json: json_path,
        html,
    })
}

/// How evidence is cited: `file:line`, or the file alone for facts read from
/// a whole file (a binary dump), which carry line 0.
pub fn location(file: &str, line: u64) -> String {
    if line == 0 {
        file.to_string()
    } else {
        format!("{file}:{line}")
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}
