//! Open MPI's error prefix (`BTL_ERROR` and its kin, 1.x–4.x), which names
//! the host and the MPI rank of the process that wrote the line:
//!
//! ```text
//! [u10-154-66-206][[38971,1],2][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] connect() to 172.17.0.1 failed: Connection refused (111)
//! ```
//!
//! `[host]`, the process name `[[jobid,jobfam],vpid]` (the vpid is the
//! rank in MPI_COMM_WORLD) and `[file.c:line:function]`. Open MPI's other
//! `[host:pid] ` prefix is left in the line: the launcher grammar reads
//! its host and pid itself.

/// An Open MPI error prefix as read.
pub struct OmpiPrefix<'a> {
    pub host: &'a [u8],
    pub rank: u32,
    /// Bytes up to the message.
    pub len: usize,
}

pub fn prefix(s: &[u8]) -> Option<OmpiPrefix<'_>> {
    let host_len = s
        .get(1..)?
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        .count();
    if host_len == 0 || s.get(1 + host_len) != Some(&b']') {
        return None;
    }
    let host = &s[1..1 + host_len];
    let mut pos = 2 + host_len;
    let (rank, n) = process_name(&s[pos..])?;
    pos += n;
    pos += source(&s[pos..])?;
    if s.get(pos) == Some(&b' ') {
        pos += 1;
    }
    Some(OmpiPrefix {
        host,
        rank,
        len: pos,
    })
}

/// `[[38971,1],2]`: (vpid, length).
fn process_name(s: &[u8]) -> Option<(u32, usize)> {
    let rest = s.strip_prefix(b"[[")?;
    let (_, a) = crate::ingest::launcher::digits(rest)?;
    let rest = rest[a..].strip_prefix(b",")?;
    let (_, b) = crate::ingest::launcher::digits(rest)?;
    let rest = rest[b..].strip_prefix(b"],")?;
    let (vpid, c) = crate::ingest::launcher::digits(rest)?;
    rest[c..].starts_with(b"]").then(|| {
        let len = 2 + a + 1 + b + 2 + c + 1;
        (u32::try_from(vpid).unwrap_or(u32::MAX), len)
    })
}

/// `[btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect]`: its length.
fn source(s: &[u8]) -> Option<usize> {
    let rest = s.strip_prefix(b"[")?;
    let close = memchr::memchr(b']', &rest[..rest.len().min(200)])?;
    let inner = &rest[..close];
    let mut parts = inner.split(|b| *b == b':');
    let file = parts.next()?;
    let line = parts.next()?;
    let ok = (file.ends_with(b".c") || file.ends_with(b".h"))
        && !line.is_empty()
        && line.iter().all(u8::is_ascii_digit);
    ok.then_some(close + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btl_errors_name_host_and_mpi_rank_ompi_3() {
        let line = b"[u10-154-66-206][[38971,1],2][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] connect() to 172.17.0.1 failed: Connection refused (111)";
        let p = prefix(line).unwrap();
        assert_eq!(p.host, b"u10-154-66-206");
        assert_eq!(p.rank, 2);
        assert!(line[p.len..].starts_with(b"connect() to"));
    }

    #[test]
    fn other_bracketed_prefixes_are_not_open_mpis() {
        for line in [
            &b"[node1:1234] Signal: Segmentation fault (11)"[..],
            b"[rank3]:[E ProcessGroupNCCL.cpp:1] x",
            b"[1,3]<stdout>:x",
            b"[host][[1,2],3] no source",
        ] {
            assert!(prefix(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
    }
}
