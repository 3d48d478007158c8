//! Opening a file with decompression chosen by its first bytes, not its name.

use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Compression detected from a file's magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Compression {
    pub fn sniff(head: &[u8]) -> Compression {
        match head {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            [0xfd, b'7', b'z', b'X', b'Z', 0x00, ..] => Compression::Xz,
            [b'B', b'Z', b'h', ..] => Compression::Bzip2,
            _ => Compression::None,
        }
    }
}

/// Opens `path` as a stream of its (decompressed) bytes.
///
/// Gzip uses `MultiGzDecoder` because rotated and concatenated logs hold several
/// members, where a plain decoder would stop silently after the first.
pub fn open_decompressed(path: &Path) -> io::Result<(Box<dyn Read>, Compression)> {
    decompress(File::open(path)?)
}

/// Wraps any stream in the decompressor its first bytes call for.
pub fn decompress<'a, R: Read + 'a>(mut inner: R) -> io::Result<(Box<dyn Read + 'a>, Compression)> {
    let mut head = [0u8; 6];
    let n = read_up_to(&mut inner, &mut head)?;
    let compression = Compression::sniff(&head[..n]);
    let reader = io::Cursor::new(head[..n].to_vec()).chain(inner);
    let stream: Box<dyn Read + 'a> = match compression {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(MultiGzDecoder::new(BufReader::new(reader))),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(reader)?),
        Compression::Xz | Compression::Bzip2 => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{compression:?} compression is not supported; decompress it first"),
            ));
        }
    };
    Ok((unwrap_json_log(stream)?, compression))
}

/// A log kept as JSON lines (Docker's json-file, a log shipper's export) is
/// read as the text its entries hold (`json_lines`).
fn unwrap_json_log<'a>(mut stream: Box<dyn Read + 'a>) -> io::Result<Box<dyn Read + 'a>> {
    let mut head = vec![0u8; JSON_SNIFF];
    let n = read_up_to(&mut stream, &mut head)?;
    head.truncate(n);
    let json = super::json_lines::is_json_log(&head);
    let whole = io::Cursor::new(head).chain(stream);
    Ok(if json {
        Box::new(super::json_lines::JsonLogReader::new(whole))
    } else {
        Box::new(whole)
    })
}

/// Bytes read to see whether a file's first line is a JSON log entry.
const JSON_SNIFF: usize = 16 << 10;

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_with_two_members_reads_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log.gz");
        let mut bytes = Vec::new();
        for part in ["first\n", "second\n"] {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(part.as_bytes()).unwrap();
            bytes.extend(enc.finish().unwrap());
        }
        std::fs::write(&path, bytes).unwrap();
        let (mut r, c) = open_decompressed(&path).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(c, Compression::Gzip);
        assert_eq!(s, "first\nsecond\n");
    }

    #[test]
    fn zstd_is_detected_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-extension");
        std::fs::write(&path, zstd::encode_all(&b"hello\n"[..], 1).unwrap()).unwrap();
        let (mut r, c) = open_decompressed(&path).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!((c, s.as_str()), (Compression::Zstd, "hello\n"));
    }
}
