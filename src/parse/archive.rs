//! Inputs that may be archives: a file is parsed as a log or table, or walked
//! as an archive whose members are parsed one by one (nested archives too).

use std::cell::Cell;
use std::fs::File;
use std::io::{Cursor, Read};

use crate::grammar::Grammar;
use crate::ingest::InputFile;
use crate::ingest::archive::{ArchiveKind, Budgeted, Member, archive_kind, walk_tar, walk_zip};
use crate::ingest::open::{Compression, decompress};
use crate::ingest::path_hints::{hints_from_path, host_of_archive, inside_the_wrapper};
use crate::model::{FileId, Skipped};

use super::scan::{FileParse, parse_with_head, read_head};

/// Archives inside archives deeper than this are not opened.
const MAX_NESTING: usize = 4;

/// Limits on what reading may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Decompressed bytes one input (file or archive, all levels) may yield.
    pub max_decompressed: u64,
    /// A plain log at least this large is cut into parts parsed in parallel.
    pub split_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_decompressed: 64 << 30,
            split_bytes: 64 << 20,
        }
    }
}

/// Parts a file of `size` bytes is cut into: two per `split_bytes`, at
/// most four per thread, at least two.
fn split_parts(size: u64, limits: Limits) -> usize {
    let per_size = (size / limits.split_bytes.max(1)).saturating_mul(2);
    let most = rayon::current_num_threads().max(1) * 4;
    (per_size.min(most as u64) as usize).max(2)
}

/// One member of an archive and what parsing it gave.
#[derive(Debug)]
pub struct MemberParse {
    pub file: InputFile,
    pub parse: FileParse,
}

/// What one input gave: a file's parse, or an archive's members.
#[derive(Debug)]
pub enum Parsed {
    File(FileParse),
    Archive {
        members: Vec<MemberParse>,
        skipped: Vec<Skipped>,
    },
}

/// Parses one input file, walking it if it is an archive.
pub fn parse_input(file: &InputFile, grammar: &Grammar, limits: Limits) -> Parsed {
    let opened = File::open(&file.path).and_then(decompress);
    let (stream, compression) = match opened {
        Ok(s) => s,
        Err(e) => {
            return Parsed::File(FileParse {
                skipped: Some(format!("cannot open: {e}")),
                ..Default::default()
            });
        }
    };
    let budget = Cell::new(limits.max_decompressed);
    let mut stream = Budgeted::new(stream, &budget, limits.max_decompressed);
    let head = read_head(&mut stream);
    let Some(kind) = archive_kind(&head.bytes) else {
        let split = (compression == Compression::None
            && head.error.is_none()
            && file.size >= limits.split_bytes)
            .then(|| {
                let parts = split_parts(file.size, limits);
                super::split::parse_split(file, grammar, &head.bytes, parts)
            })
            .flatten();
        let mut parse = match split {
            Some(parse) => parse,
            None => parse_with_head(head, stream, file, grammar),
        };
        if compression == Compression::None {
            note_change_while_read(&mut parse, file);
        }
        return Parsed::File(parse);
    };
    let mut walker = Walker {
        grammar,
        archive: file,
        budget: &budget,
        limit: limits.max_decompressed,
        members: Vec::new(),
        skipped: Vec::new(),
    };
    let source = Cursor::new(head.bytes).chain(stream);
    if kind == ArchiveKind::Zip && compression == Compression::None {
        // A zip on disk is read through its index, not as a stream.
        match File::open(&file.path) {
            Ok(f) => walker.walk_zip_seekable(f, &file.display),
            Err(e) => walker.skip(&file.display, format!("cannot open: {e}")),
        }
    } else {
        walker.walk(kind, source, &file.display, 0);
    }
    if walker.members.is_empty() && walker.skipped.is_empty() {
        walker.skip(&file.display, "archive holds no files".into());
    }
    Parsed::Archive {
        members: walker.members,
        skipped: walker.skipped,
    }
}

/// A log still being written (a job killed mid-flush, a live NFS copy) is
/// read as far as it went; the report says the file moved under the reader.
fn note_change_while_read(parse: &mut FileParse, file: &InputFile) {
    let read = parse.stats.bytes;
    if parse.skipped.is_some() || parse.partial.is_some() || read == file.size {
        return;
    }
    let now = std::fs::metadata(&file.path).map(|m| m.len()).ok();
    // Still its listed size: the bytes read differ because they were
    // decoded (a JSON-lines log is read as the text its entries hold).
    if now == Some(file.size) {
        return;
    }
    let how = if read < file.size { "shrank" } else { "grew" };
    parse.partial = Some(format!(
        "the file {how} while it was read ({} bytes when listed, {read} read{}); the lines read are used",
        file.size,
        now.map_or(String::new(), |n| format!(", {n} now"))
    ));
}

struct Walker<'a> {
    grammar: &'a Grammar,
    archive: &'a InputFile,
    budget: &'a Cell<u64>,
    limit: u64,
    members: Vec<MemberParse>,
    skipped: Vec<Skipped>,
}

impl Walker<'_> {
    fn skip(&mut self, file: &str, reason: String) {
        self.skipped.push(Skipped {
            file: file.to_string(),
            reason,
        });
    }

    fn walk(&mut self, kind: ArchiveKind, reader: impl Read, display: &str, depth: usize) {
        let result = match kind {
            ArchiveKind::Tar => {
                walk_tar(reader, &mut |m| self.visit(m, display, depth)).map_err(|e| e.to_string())
            }
            ArchiveKind::Zip => self.walk_zip_buffered(reader, display, depth),
        };
        if let Err(e) = result {
            self.skip(
                display,
                format!("archive read stopped: {e} (members before it were read)"),
            );
        }
    }

    /// Zip needs random access: a zip inside another archive is read into
    /// memory first, within the budget.
    fn walk_zip_buffered(
        &mut self,
        reader: impl Read,
        display: &str,
        depth: usize,
    ) -> Result<(), String> {
        let mut data = Vec::new();
        Budgeted::new(reader, self.budget, self.limit)
            .read_to_end(&mut data)
            .map_err(|e| e.to_string())?;
        walk_zip(Cursor::new(data), &mut |m| self.visit(m, display, depth))
    }

    fn walk_zip_seekable(&mut self, file: File, display: &str) {
        if let Err(e) = walk_zip(file, &mut |m| self.visit(m, display, 0)) {
            self.skip(
                display,
                format!("archive read stopped: {e} (members before it were read)"),
            );
        }
    }

    fn visit(&mut self, member: Member<'_>, parent: &str, depth: usize) {
        match member {
            Member::Skipped { path, reason } => self.skip(&member_display(parent, &path), reason),
            Member::File { path, reader } => self.parse_member(&path, reader, parent, depth),
        }
    }

    fn parse_member(&mut self, path: &str, reader: &mut dyn Read, parent: &str, depth: usize) {
        let display = member_display(parent, path);
        let stream = match decompress(reader) {
            Ok((s, _)) => s,
            Err(e) => return self.skip(&display, format!("cannot decompress: {e}")),
        };
        let mut stream = Budgeted::new(stream, self.budget, self.limit);
        let head = read_head(&mut stream);
        if let Some(kind) = archive_kind(&head.bytes) {
            if depth + 1 >= MAX_NESTING {
                return self.skip(
                    &display,
                    format!("archive nested more than {MAX_NESTING} deep, not opened"),
                );
            }
            return self.walk(
                kind,
                Cursor::new(head.bytes).chain(stream),
                &display,
                depth + 1,
            );
        }
        let file = self.member_file(path, display);
        let parse = parse_with_head(head, stream, &file, self.grammar);
        self.members.push(MemberParse { file, parse });
    }

    /// The member's own path says more about its writer than the archive's.
    fn member_file(&self, path: &str, display: String) -> InputFile {
        let inner = inside_the_wrapper(path, &self.archive.display);
        let mut hints = hints_from_path(inner);
        let outer = &self.archive.hints;
        // An archive of a folder named like it holds a job, not one host's
        // files: its name is no host's.
        let wrapped = inner.len() < path.len();
        hints.host = hints.host.or_else(|| outer.host.clone()).or_else(|| {
            (!wrapped)
                .then(|| host_of_archive(&self.archive.display))
                .flatten()
        });
        hints.rank = hints.rank.or(outer.rank);
        InputFile {
            id: FileId(0),
            display,
            path: self.archive.path.clone(),
            size: 0,
            hints,
        }
    }
}

/// How a member of an archive is named in the report: `logs.tar.gz!node1/x.log`.
fn member_display(parent: &str, path: &str) -> String {
    format!("{parent}!{path}")
}

/// Whether a cited file is a member of an archive, which cannot be opened
/// again to re-read a line (a plain or compressed file on disk can).
pub fn is_member(display: &str) -> bool {
    display.contains('!')
}
