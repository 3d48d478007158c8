//! Archives read in place: tar (plain, gzip- or zstd-compressed) and zip,
//! nested as jobs really are (a job tarball of per-node gzipped logs).
//!
//! Nothing is extracted to disk, so archive paths cannot write anywhere; they
//! are still cleaned (`/`, `.` and `..` dropped) before they name anything in
//! the report. Links inside archives are not followed. Entries are read in
//! order (tar has no index), each handed to the visitor as a stream.

use std::cell::Cell;
use std::io::{self, Read, Seek};

/// Archive formats recognised by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    Tar,
    Zip,
}

/// The archive a (decompressed) head belongs to, if any.
pub fn archive_kind(head: &[u8]) -> Option<ArchiveKind> {
    if head.get(257..262) == Some(b"ustar") {
        Some(ArchiveKind::Tar)
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Some(ArchiveKind::Zip)
    } else {
        None
    }
}

/// One archive entry, as the visitor sees it.
pub enum Member<'a> {
    File {
        path: String,
        reader: &'a mut dyn Read,
    },
    Skipped {
        path: String,
        reason: String,
    },
}

/// Walks a tar stream; an error is a corrupt or truncated archive (the
/// members visited before it stand).
pub fn walk_tar(reader: impl Read, visit: &mut dyn FnMut(Member<'_>)) -> io::Result<()> {
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = clean_path(&entry.path_bytes());
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => visit(Member::File {
                path,
                reader: &mut entry,
            }),
            tar::EntryType::Directory | tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {
            }
            tar::EntryType::Symlink | tar::EntryType::Link => visit(Member::Skipped {
                path,
                reason: "link inside an archive, not followed".into(),
            }),
            other => visit(Member::Skipped {
                path,
                reason: format!("not a regular file ({other:?})"),
            }),
        }
    }
    Ok(())
}

/// Walks a zip archive (zip needs random access: a file, or a member read
/// into memory).
pub fn walk_zip(reader: impl Read + Seek, visit: &mut dyn FnMut(Member<'_>)) -> Result<(), String> {
    let mut archive = zip::ZipArchive::new(reader).map_err(|e| format!("corrupt zip: {e}"))?;
    for i in 0..archive.len() {
        let mut file = archive
            .by_index(i)
            .map_err(|e| format!("corrupt zip entry {i}: {e}"))?;
        let path = clean_path(file.name_raw());
        if file.is_dir() {
            continue;
        }
        if file.is_symlink() {
            visit(Member::Skipped {
                path,
                reason: "link inside an archive, not followed".into(),
            });
            continue;
        }
        visit(Member::File {
            path,
            reader: &mut file,
        });
    }
    Ok(())
}

/// An archive path made safe to show: separators unified, empty, `.` and
/// `..` components dropped (so `/etc/x` and `../../x` cannot pose as paths
/// outside the job).
pub fn clean_path(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let parts: Vec<&str> = text
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != "." && *p != "..")
        .collect();
    if parts.is_empty() {
        "(unnamed)".to_string()
    } else {
        parts.join("/")
    }
}

/// A reader that draws from a byte budget shared by all members of one
/// archive, failing once it is spent: the cap on decompressed size.
pub struct Budgeted<'b, R> {
    inner: R,
    left: &'b Cell<u64>,
    limit: u64,
}

impl<'b, R> Budgeted<'b, R> {
    pub fn new(inner: R, left: &'b Cell<u64>, limit: u64) -> Self {
        Budgeted { inner, left, limit }
    }
}

impl<R: Read> Read for Budgeted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left.get();
        if left == 0 {
            return Err(io::Error::other(format!(
                "decompressed size cap of {} MiB reached: possible decompression bomb (see --max-decompressed)",
                self.limit >> 20
            )));
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left.set(left - n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, path, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn tar_members_are_visited_in_order_with_clean_paths() {
        let data = tar_with(&[("node1/a.log", b"x\n"), ("node2/b.log", b"y\n")]);
        assert_eq!(archive_kind(&data), Some(ArchiveKind::Tar));
        let mut seen = Vec::new();
        walk_tar(&data[..], &mut |m| {
            if let Member::File { path, reader } = m {
                let mut s = String::new();
                reader.read_to_string(&mut s).unwrap();
                seen.push((path, s));
            }
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                ("node1/a.log".into(), "x\n".into()),
                ("node2/b.log".into(), "y\n".into())
            ]
        );
    }

    #[test]
    fn hostile_paths_are_cleaned() {
        assert_eq!(clean_path(b"/etc/passwd"), "etc/passwd");
        assert_eq!(clean_path(b"../../x/./y"), "x/y");
        assert_eq!(clean_path(b".."), "(unnamed)");
    }

    #[test]
    fn a_truncated_tar_is_an_error_after_the_good_members() {
        let data = tar_with(&[("a.log", b"hello\n"), ("b.log", &[b'z'; 2000])]);
        let cut = &data[..1100];
        let mut files = 0;
        let result = walk_tar(cut, &mut |m| {
            if let Member::File { reader, .. } = m {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
                files += 1;
            }
        });
        assert!(files >= 1);
        assert!(result.is_err() || files == 2);
    }

    #[test]
    fn the_budget_is_shared_across_members() {
        let left = Cell::new(5);
        let mut a = Budgeted::new(&b"abc"[..], &left, 5);
        let mut s = Vec::new();
        a.read_to_end(&mut s).unwrap();
        let mut b = Budgeted::new(&b"defgh"[..], &left, 5);
        assert!(b.read_to_end(&mut s).is_err());
        assert_eq!(s, b"abcde");
    }
}
