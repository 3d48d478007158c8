//! UCX's log prefix (HPC-X, Open MPI's UCX layer, UCC), which names the host
//! and the process:
//!
//! ```text
//! [1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory
//! [mgmt:24113:0:24113] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)
//! ```
//!
//! The logger writes the epoch time, `[host:pid:thread]`, the source
//! `file.c:line` and `UCX  LEVEL`; the error handler the bracket with the
//! thread's id and the source, no time and no level. The source file is
//! required: UCX's `[host:pid :0:tid] Caught signal …` has none and stays a
//! message for the launcher grammar.

use chrono::DateTime;

use crate::model::{Level, RawTime};

/// A UCX prefix as read.
pub struct UcxPrefix<'a> {
    pub host: &'a [u8],
    pub pid: u32,
    pub time: RawTime,
    pub level: Option<Level>,
    /// Bytes up to the message.
    pub len: usize,
}

pub fn prefix(s: &[u8]) -> Option<UcxPrefix<'_>> {
    let (time, mut pos) = match epoch(s) {
        Some((t, n)) => (t, n + spaces(&s[n..])),
        None => (RawTime::None, 0),
    };
    let (host, pid, n) = process(&s[pos..])?;
    pos += n;
    let sp = spaces(&s[pos..]);
    if sp == 0 {
        return None;
    }
    pos += sp;
    pos += source(&s[pos..])?;
    pos += spaces(&s[pos..]);
    let mut level = None;
    if let Some(rest) = s[pos..].strip_prefix(b"UCX") {
        let sp = spaces(rest);
        let word_len = rest[sp..]
            .iter()
            .take_while(|b| b.is_ascii_uppercase())
            .count();
        let word = std::str::from_utf8(&rest[sp..sp + word_len]).ok()?;
        level = Some(Level::from_word(word).unwrap_or(match word {
            "DIAG" => Level::Warn,
            _ => Level::Info,
        }));
        pos += 3 + sp + word_len;
        pos += spaces(&s[pos..]);
    }
    Some(UcxPrefix {
        host,
        pid,
        time,
        level,
        len: pos,
    })
}

/// `[1652739463.054681]`: seconds since the epoch (UTC).
fn epoch(s: &[u8]) -> Option<(RawTime, usize)> {
    let body = s.strip_prefix(b"[")?;
    let secs_len = body.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(9..=11).contains(&secs_len) || body.get(secs_len) != Some(&b'.') {
        return None;
    }
    let frac = &body[secs_len + 1..];
    let frac_len = frac.iter().take_while(|b| b.is_ascii_digit()).count();
    if frac_len == 0 || frac_len > 9 || frac.get(frac_len) != Some(&b']') {
        return None;
    }
    let secs: i64 = std::str::from_utf8(&body[..secs_len]).ok()?.parse().ok()?;
    let mut nanos: u32 = std::str::from_utf8(&frac[..frac_len]).ok()?.parse().ok()?;
    nanos *= 10u32.pow(9 - frac_len as u32);
    let t = DateTime::from_timestamp(secs, nanos)?;
    Some((
        RawTime::Zoned(t.fixed_offset()),
        1 + secs_len + 1 + frac_len + 1,
    ))
}

/// `[cn0022:4071024:0]` or `[mgmt:24113:0:24113]`: host, pid, thread(, tid).
fn process(s: &[u8]) -> Option<(&[u8], u32, usize)> {
    let body = s.strip_prefix(b"[")?;
    let end = body.iter().take(128).position(|&b| b == b']')?;
    let mut parts = body[..end].split(|&b| b == b':');
    let host = parts.next().filter(|h| is_host(h))?;
    let pid = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    // The thread, and the error handler's thread id: numbers, one or two.
    let mut numbers = 0;
    for part in parts {
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        numbers += 1;
    }
    if !(1..=2).contains(&numbers) {
        return None;
    }
    Some((host, pid, 1 + end + 1))
}

fn is_host(h: &[u8]) -> bool {
    !h.is_empty()
        && h.len() <= 64
        && h.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

/// `ib_iface.c:1035`: the source file and line.
fn source(s: &[u8]) -> Option<usize> {
    let name = s
        .iter()
        .take(64)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    let file = &s[..name];
    if !(file.ends_with(b".c") || file.ends_with(b".cc") || file.ends_with(b".cpp")) {
        return None;
    }
    if s.get(name) != Some(&b':') {
        return None;
    }
    let digits = s[name + 1..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    (digits > 0).then_some(name + 1 + digits)
}

fn spaces(s: &[u8]) -> usize {
    s.iter().take_while(|&&b| b == b' ' || b == b'\t').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loggers_prefix_gives_host_pid_time_and_level_ucx_1_12() {
        let line = b"[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory";
        let p = prefix(line).unwrap();
        assert_eq!(p.host, b"cn0022");
        assert_eq!(p.pid, 4071024);
        assert_eq!(p.level, Some(Level::Error));
        assert_eq!(
            p.time.to_local(None).unwrap().to_string(),
            "2022-05-16 22:17:43.054681"
        );
        assert!(line[p.len..].starts_with(b"ibv_create_cq("));
    }

    #[test]
    fn the_error_handlers_prefix_has_no_time_or_level() {
        let line = b"[mgmt:24113:0:24113] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)";
        let p = prefix(line).unwrap();
        assert_eq!((p.host, p.pid), (&b"mgmt"[..], 24113));
        assert_eq!(p.level, None);
        assert!(line[p.len..].starts_with(b"Transport retry"));
    }

    #[test]
    fn other_brackets_are_not_ucx() {
        for line in [
            &b"[worker-0:5665 :0:5665] Caught signal 11 (Segmentation fault: address not mapped)"[..],
            b"[mgmt:24117] [18] /opt/openmpi/lib/libmpi.so.40(mca_coll_base_comm_select+0x13a)[0x7faa30d3a3aa]",
            b"[1,3]<stdout>: hello",
            b"[  408.368677] mlx5_core 0000:c1:00.0: AMD-Vi: Event logged",
            b"[rank3]: x.c:1 y",
        ] {
            assert!(prefix(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
    }
}
