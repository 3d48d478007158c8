//! Walking the job folder.
//!
//! Sorted by name so the file table, and everything built from it, is the same
//! on every run. Symbolic links are never followed: a job folder copied off a
//! cluster can hold links into shared file systems or loops back into itself.

use std::path::{Path, PathBuf};
use walkdir::WalkDir;

use super::path_hints::{PathHints, hints_from_path};
use super::{IngestError, Skipped};
use crate::model::FileId;

/// One input file to parse.
#[derive(Debug, Clone)]
pub struct InputFile {
    pub id: FileId,
    /// Path relative to the job root, `/`-separated (what the report cites).
    pub display: String,
    pub path: PathBuf,
    pub size: u64,
    pub hints: PathHints,
}

#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<InputFile>,
    pub skipped: Vec<Skipped>,
}

/// Lists every regular file under `root` (or `root` itself when it is a file).
pub fn discover(root: &Path) -> Result<Discovery, IngestError> {
    let meta = std::fs::metadata(root).map_err(|source| IngestError::Unreadable {
        path: root.to_path_buf(),
        source,
    })?;
    let mut out = Discovery::default();
    if meta.is_file() {
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        push_file(&mut out, root.to_path_buf(), name, meta.len());
        return Ok(out);
    }
    if !meta.is_dir() {
        return Err(IngestError::NotAFileOrFolder {
            path: root.to_path_buf(),
        });
    }
    std::fs::read_dir(root).map_err(|source| IngestError::Unreadable {
        path: root.to_path_buf(),
        source,
    })?;
    for entry in WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        match entry {
            Ok(entry) => visit(&mut out, root, entry),
            Err(err) => out.skipped.push(Skipped {
                file: err.path().map(|p| relative(root, p)).unwrap_or_default(),
                reason: format!("cannot list: {}", io_reason(&err)),
            }),
        }
    }
    Ok(out)
}

fn visit(out: &mut Discovery, root: &Path, entry: walkdir::DirEntry) {
    let display = relative(root, entry.path());
    let file_type = entry.file_type();
    if file_type.is_symlink() {
        out.skipped.push(Skipped {
            file: display,
            reason: "symbolic link, not followed".into(),
        });
    } else if file_type.is_file() {
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        push_file(out, entry.into_path(), display, size);
    } else if !file_type.is_dir() {
        out.skipped.push(Skipped {
            file: display,
            reason: "not a regular file".into(),
        });
    }
}

fn push_file(out: &mut Discovery, path: PathBuf, display: String, size: u64) {
    let id = FileId(out.files.len() as u32);
    let hints = hints_from_path(&display);
    out.files.push(InputFile {
        id,
        display,
        path,
        size,
        hints,
    });
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn io_reason(err: &walkdir::Error) -> String {
    match err.io_error() {
        Some(io) => io.to_string(),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_sorted_and_skips_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("node2")).unwrap();
        std::fs::write(dir.path().join("node2/b.log"), "x").unwrap();
        std::fs::write(dir.path().join("a.log"), "y").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        let d = discover(dir.path()).unwrap();
        let names: Vec<_> = d.files.iter().map(|f| f.display.as_str()).collect();
        assert_eq!(names, ["a.log", "node2/b.log"]);
        #[cfg(unix)]
        assert_eq!(d.skipped[0].file, "loop");
    }

    #[test]
    fn a_missing_root_is_an_error() {
        assert!(discover(Path::new("/nonexistent/ncclpm-test")).is_err());
    }
}
