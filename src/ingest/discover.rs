//! Walking the job folder.
//!
//! Sorted by name so the file table, and everything built from it, is the same
//! on every run. Symbolic links are never followed: a job folder copied off a
//! cluster can hold links into shared file systems or loops back into itself.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
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
        let file = input_file(FileId(0), root.to_path_buf(), name, meta.len());
        out.files.push(file);
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
    // The top level's entries, then each folder's tree in parallel (a
    // large job has a folder per host): joined in order, the same walk.
    let top: Vec<_> = WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
        .max_depth(1)
        .into_iter()
        .collect();
    let walked: Vec<Walked> = top
        .into_par_iter()
        .map(|entry| {
            let mut walked = Walked::default();
            match entry {
                Ok(entry) if entry.file_type().is_dir() => walked.tree(root, entry.path()),
                entry => walked.take(root, entry),
            }
            walked
        })
        .collect();
    let mut found = Vec::new();
    for w in walked {
        found.extend(w.found);
        out.skipped.extend(w.skipped);
    }
    // A stat call and the path's hints per file: tens of thousands of
    // files at scale, so in parallel, numbered in walk order.
    out.files = found
        .into_par_iter()
        .enumerate()
        .map(|(i, (path, display))| {
            let size = std::fs::symlink_metadata(&path).map_or(0, |m| m.len());
            input_file(FileId(i as u32), path, display, size)
        })
        .collect();
    Ok(out)
}

/// What walking part of the tree found: regular files (path, display
/// name) in walk order, and what was skipped.
#[derive(Default)]
struct Walked {
    found: Vec<(PathBuf, String)>,
    skipped: Vec<Skipped>,
}

impl Walked {
    /// Everything under the folder `dir` (its own entry already taken).
    fn tree(&mut self, root: &Path, dir: &Path) {
        let entries = WalkDir::new(dir)
            .follow_links(false)
            .sort_by_file_name()
            .min_depth(1);
        for entry in entries {
            self.take(root, entry);
        }
    }

    /// Notes a regular file; a link, a special file or a listing error is
    /// skipped with its reason.
    fn take(&mut self, root: &Path, entry: walkdir::Result<walkdir::DirEntry>) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                self.skipped.push(Skipped {
                    file: err.path().map(|p| relative(root, p)).unwrap_or_default(),
                    reason: format!("cannot list: {}", io_reason(&err)),
                });
                return;
            }
        };
        let display = relative(root, entry.path());
        let file_type = entry.file_type();
        if file_type.is_symlink() {
            self.skipped.push(Skipped {
                file: display,
                reason: "symbolic link, not followed".into(),
            });
        } else if file_type.is_file() {
            self.found.push((entry.into_path(), display));
        } else if !file_type.is_dir() {
            self.skipped.push(Skipped {
                file: display,
                reason: "not a regular file".into(),
            });
        }
    }
}

fn input_file(id: FileId, path: PathBuf, display: String, size: u64) -> InputFile {
    let hints = hints_from_path(&display);
    InputFile {
        id,
        display,
        path,
        size,
        hints,
    }
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
