//! Kernel log framing: the prefixes `dmesg`, `journalctl -k`, syslog and
//! `/dev/kmsg` put in front of a kernel message (docs/sys-formats.md §a).
//!
//! ```text
//! [  408.372201] msg                                  dmesg (seconds since boot)
//! [   36.544994][  T291] msg                          CONFIG_PRINTK_CALLER
//! <6>[    2.608284] msg                               dmesg -r (printk level)
//! [Mon Aug  5 03:54:13 2024] msg                      dmesg -T (day space-padded)
//! kern  :warn  : [  408.372201] msg                   dmesg -x
//! Sep 19 16:18:02 bubz kernel: [68183.615790] msg     syslog keeping the raw stamp
//! 2025-01-17T17:10:43+0000 host kernel: msg           journalctl -o short-iso(-precise)
//! Mon Jul 28 10:19:15 2025 kern.crit kernel: msg      OpenWrt / busybox logread
//! 6,3964,206764307,-;msg                              /dev/kmsg
//! kernel: msg                                         pasted without stamp and host
//! ```
//! `dmesg --time-format iso` (`2024-11-15T05:39:15,491363+00:00 `) is an
//! ordinary leading stamp and is read by the framer's generic stamp reader.
//!
//! Each call reads one piece; the framer calls again on what follows, so the
//! pieces combine in whatever order a pipeline stacked them.

use chrono::{NaiveDate, NaiveDateTime};

use super::stamps;
use crate::ingest::launcher::digits;
use crate::model::{Level, RawTime};

/// One kernel prefix piece, read from the start of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPrefix<'a> {
    /// Wall time, or uptime (`RawTime::Uptime`), or `None` for pieces without one.
    pub time: RawTime,
    /// The syslog / journal host field.
    pub host: Option<&'a [u8]>,
    pub level: Option<Level>,
    /// Bytes of the piece, including the space after it.
    pub len: usize,
}

impl KernelPrefix<'_> {
    fn new(time: RawTime, len: usize) -> Self {
        KernelPrefix {
            time,
            host: None,
            level: None,
            len,
        }
    }
}

/// Reads one kernel prefix piece at the start of `s`.
pub fn prefix(s: &[u8]) -> Option<KernelPrefix<'_>> {
    match s.first()? {
        b'[' => bracket_uptime(s).or_else(|| bracket_ctime(s)),
        b'<' => printk_level(s),
        b'0'..=b'9' => kmsg(s)
            .or_else(|| iso_syslog(s))
            .or_else(|| localized_syslog(s)),
        b'k' => bare_kernel_tag(s).or_else(|| decoded_level(s)),
        b'A'..=b'Z' => rfc3164(s)
            .or_else(|| logread(s))
            .or_else(|| localized_syslog(s)),
        b'a'..=b'z' => decoded_level(s).or_else(|| localized_syslog(s)),
        0x80.. => localized_syslog(s),
        _ => None,
    }
}

/// A line that starts with a kernel subsystem's own tag (`NVRM: `): its
/// message begins here, so no launcher prefix may be read from it (a file of
/// bare `NVRM:` lines otherwise sniffs like pdsh output from a host `NVRM`).
pub fn starts_message(s: &[u8]) -> bool {
    s.starts_with(b"NVRM: ")
}

/// The message of a kernel line: what is left after every kernel prefix
/// piece and the generic leading stamps (used to pair the same message
/// printed with different stamps).
pub fn message(line: &[u8]) -> &[u8] {
    let mut pos = 0;
    for _ in 0..6 {
        let s = &line[pos..];
        match prefix(s) {
            Some(p) if p.len > 0 => pos += p.len,
            _ => match stamps::date_time(s) {
                Some((_, n)) if s.get(n) == Some(&b' ') => pos += n + 1,
                _ => break,
            },
        }
    }
    line[pos..].trim_ascii()
}

/// The short host name syslog printed (a FQDN cut at its first dot).
pub fn short_host(host: &[u8]) -> Box<str> {
    let text = String::from_utf8_lossy(host);
    if text.parse::<std::net::IpAddr>().is_ok() {
        return text.into();
    }
    text.split('.').next().unwrap_or(&text).into()
}

/// `[  408.372201] `, optionally followed by a caller id `[  T291]` / `[    C3]`.
fn bracket_uptime(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (micros, n) = uptime_in_brackets(s)?;
    let mut len = n;
    if let Some(caller) = caller_id(&s[len..]) {
        len += caller;
    }
    len += usize::from(s.get(len) == Some(&b' '));
    Some(KernelPrefix::new(RawTime::Uptime { micros }, len))
}

/// `[ SECONDS.FRACTION]`: (microseconds, bytes incl. the brackets).
fn uptime_in_brackets(s: &[u8]) -> Option<(i64, usize)> {
    if s.first() != Some(&b'[') {
        return None;
    }
    let pad = s[1..].iter().take(12).take_while(|b| **b == b' ').count();
    let at = 1 + pad;
    let (secs, sn) = digits(&s[at..])?;
    if sn > 10 || s.get(at + sn) != Some(&b'.') {
        return None;
    }
    let frac_at = at + sn + 1;
    let (frac, fnum) = digits(&s[frac_at..])?;
    if fnum > 9 || s.get(frac_at + fnum) != Some(&b']') {
        return None;
    }
    let micros = scale_to_micros(frac, fnum);
    let total = i64::try_from(secs).ok()?.checked_mul(1_000_000)? + micros;
    Some((total, frac_at + fnum + 1))
}

/// A fraction of `n` digits as microseconds (`5678` → 567800).
fn scale_to_micros(frac: u64, n: usize) -> i64 {
    let mut v = frac as i64;
    if n < 6 {
        for _ in n..6 {
            v *= 10;
        }
    } else {
        for _ in 6..n {
            v /= 10;
        }
    }
    v
}

/// `[  T291]` or `[    C3]` (CONFIG_PRINTK_CALLER): bytes incl. the brackets.
fn caller_id(s: &[u8]) -> Option<usize> {
    if s.first() != Some(&b'[') {
        return None;
    }
    let pad = s[1..].iter().take(8).take_while(|b| **b == b' ').count();
    let at = 1 + pad;
    if !matches!(s.get(at), Some(b'T' | b'C')) {
        return None;
    }
    let (_, n) = digits(&s[at + 1..])?;
    (s.get(at + 1 + n) == Some(&b']')).then_some(at + 2 + n)
}

/// `<6>` before a raw stamp (`dmesg -r`): the printk level, facility*8+level.
fn printk_level(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (prio, n) = digits(&s[1..])?;
    if n > 3 || s.get(1 + n) != Some(&b'>') || s.get(2 + n) != Some(&b'[') {
        return None;
    }
    let mut p = KernelPrefix::new(RawTime::None, 2 + n);
    p.level = Some(level_of_priority(prio));
    Some(p)
}

/// The syslog severity in the low three bits of a priority.
fn level_of_priority(prio: u64) -> Level {
    match prio & 7 {
        0..=2 => Level::Fatal,
        3 => Level::Error,
        4 => Level::Warn,
        7 => Level::Trace,
        _ => Level::Info,
    }
}

/// `/dev/kmsg`: `PRIO,SEQ,MICROS,FLAGS[,…];message`.
fn kmsg(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (prio, n1) = digits(s)?;
    let mut i = n1;
    if s.get(i) != Some(&b',') {
        return None;
    }
    let (_, n2) = digits(&s[i + 1..])?;
    i += 1 + n2;
    if s.get(i) != Some(&b',') {
        return None;
    }
    let (micros, n3) = digits(&s[i + 1..])?;
    i += 1 + n3;
    if s.get(i) != Some(&b',') || !matches!(s.get(i + 1), Some(b'-' | b'c' | b'+')) {
        return None;
    }
    let semi = memchr::memchr(b';', &s[i..s.len().min(i + 64)])?;
    let mut p = KernelPrefix::new(
        RawTime::Uptime {
            micros: i64::try_from(micros).ok()?,
        },
        i + semi + 1,
    );
    p.level = Some(level_of_priority(prio));
    Some(p)
}

/// `kernel: ` left at the start of a pasted syslog line.
fn bare_kernel_tag(s: &[u8]) -> Option<KernelPrefix<'_>> {
    s.starts_with(b"kernel: ")
        .then(|| KernelPrefix::new(RawTime::None, 8))
}

/// A syslog facility name (`kern`, `daemon`, `local0` …). A `match` on the
/// bytes: this runs on the first word of every line that starts with a
/// letter, and a list search called `memcmp` per name.
/// The length of the longest facility name (`authpriv`).
const LONGEST_FACILITY: usize = 8;

fn is_facility(word: &[u8]) -> bool {
    matches!(
        word,
        b"kern"
            | b"user"
            | b"mail"
            | b"daemon"
            | b"auth"
            | b"syslog"
            | b"lpr"
            | b"news"
            | b"uucp"
            | b"cron"
            | b"authpriv"
            | b"ftp"
            | b"local0"
            | b"local1"
            | b"local2"
            | b"local3"
            | b"local4"
            | b"local5"
            | b"local6"
            | b"local7"
    )
}
const LEVEL_WORDS: &[(&[u8], Level)] = &[
    (b"emerg", Level::Fatal),
    (b"alert", Level::Fatal),
    (b"crit", Level::Fatal),
    (b"err", Level::Error),
    (b"warn", Level::Warn),
    (b"notice", Level::Info),
    (b"info", Level::Info),
    (b"debug", Level::Trace),
];

/// `dmesg -x`: `kern  :warn  : ` (each word padded to 6, then ` :`).
fn decoded_level(s: &[u8]) -> Option<KernelPrefix<'_>> {
    // Each name is padded to six and followed by `:`, so a name of six or
    // more (`daemon:info  :`, `kern  :notice:`) meets its colon. No facility
    // name is longer than `authpriv`: a longer first word (every NCCL
    // line's `host:pid:tid`) is not read to its end.
    let fac = padded_name(s, LONGEST_FACILITY + 1);
    if !is_facility(&s[..fac]) {
        return None;
    }
    let mut i = fac + spaces(&s[fac..]);
    if s.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    let lw = padded_name(&s[i..], 256);
    let level = LEVEL_WORDS
        .iter()
        .find(|(w, _)| *w == &s[i..i + lw])
        .map(|(_, l)| *l)?;
    i += lw;
    i += spaces(&s[i..]);
    if s.get(i) != Some(&b':') {
        return None;
    }
    i += 1 + spaces(&s[i + 1..]);
    let mut p = KernelPrefix::new(RawTime::None, i);
    p.level = Some(level);
    Some(p)
}

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];
const WEEKDAYS: [&[u8; 3]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];

fn month(s: &[u8]) -> Option<u32> {
    let m = s.get(..3)?;
    MONTHS
        .iter()
        .position(|n| &n[..] == m)
        .map(|i| i as u32 + 1)
}

/// `Mmm DD HH:MM:SS[.frac] ` with the day space- or zero-padded:
/// (month, day, time, bytes incl. the space after).
fn month_day_time(s: &[u8]) -> Option<(u32, u32, chrono::NaiveTime, usize)> {
    let m = month(s)?;
    if s.get(3) != Some(&b' ') {
        return None;
    }
    let mut i = 4 + usize::from(s.get(4) == Some(&b' '));
    let (day, dn) = digits(&s[i..])?;
    if dn > 2 || !(1..=31).contains(&day) || s.get(i + dn) != Some(&b' ') {
        return None;
    }
    i += dn + 1;
    let (t, tn) = stamps::time(&s[i..])?;
    i += tn;
    (s.get(i) == Some(&b' ')).then_some((m, day as u32, t, i + 1))
}

/// `Www Mmm DD HH:MM:SS YYYY` (ctime): (stamp, bytes).
pub(crate) fn ctime(s: &[u8]) -> Option<(NaiveDateTime, usize)> {
    let wd = s.get(..3)?;
    if !WEEKDAYS.iter().any(|w| &w[..] == wd) || s.get(3) != Some(&b' ') {
        return None;
    }
    let (m, d, t, n) = month_day_time(&s[4..])?;
    let at = 4 + n;
    let year = stamps::fixed_digits(&s[at..], 4)?;
    let date = NaiveDate::from_ymd_opt(year as i32, m, d)?;
    Some((date.and_time(t), at + 4))
}

/// `[Mon Aug  5 03:54:13 2024] ` (`dmesg -T`).
fn bracket_ctime(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (t, n) = ctime(&s[1..])?;
    if s.get(1 + n) != Some(&b']') {
        return None;
    }
    let len = 2 + n + usize::from(s.get(2 + n) == Some(&b' '));
    Some(KernelPrefix::new(RawTime::Local(t), len))
}

/// `Mon Jul 28 10:19:15 2025 kern.crit kernel: ` (OpenWrt / busybox logread).
fn logread(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (t, n) = ctime(s)?;
    let rest = s.get(n..)?.strip_prefix(b" ")?;
    let fl = word(rest);
    let (fac, lvl) = rest[..fl].split_at(memchr::memchr(b'.', &rest[..fl])?);
    let level = LEVEL_WORDS
        .iter()
        .find(|(w, _)| *w == &lvl[1..])
        .map(|(_, l)| *l)?;
    if !is_facility(fac) {
        return None;
    }
    let tag = &rest[fl..];
    let tag_len = tag
        .strip_prefix(b" ")?
        .starts_with(b"kernel: ")
        .then_some(9)?;
    let mut p = KernelPrefix::new(RawTime::Local(t), n + 1 + fl + tag_len);
    p.level = Some(level);
    Some(p)
}

/// RFC 3164 / `journalctl -o short`: `Nov  9 12:00:00 host kernel: `. The
/// host may be missing in pasted logs; the tag is `kernel` or `name[pid]`.
fn rfc3164(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (month, day, time, n) = month_day_time(s)?;
    let (host, tag_len) = host_and_tag(&s[n..])?;
    let mut p = KernelPrefix::new(RawTime::NoYear { month, day, time }, n + tag_len);
    p.host = host;
    Some(p)
}

/// A journal or syslog line whose month name follows LC_TIME (`фев 12
/// 00:48:02 host kernel: `, `4月 28 15:08:10 host kernel: `, `april 24 …`):
/// the month is read where it is a known name, else the line keeps its host
/// and loses only its time. Only the `kernel: ` tag is taken: other
/// programs' lines under an unknown first word are not a kernel log.
fn localized_syslog(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let mw = word(s);
    if mw == 0 || mw > 16 || s.get(mw) != Some(&b' ') {
        return None;
    }
    let month = localized_month(&s[..mw]);
    let mut i = mw + 1 + usize::from(s.get(mw + 1) == Some(&b' '));
    let (day, dn) = digits(&s[i..])?;
    if dn > 2 || !(1..=31).contains(&day) || s.get(i + dn) != Some(&b' ') {
        return None;
    }
    i += dn + 1;
    let (time, tn) = stamps::time(&s[i..])?;
    i += tn;
    if s.get(i) != Some(&b' ') {
        return None;
    }
    i += 1;
    let (host, tag_len) = host_and_tag(&s[i..])?;
    if !s[i..i + tag_len].ends_with(b"kernel: ") {
        return None;
    }
    let raw = match month {
        Some(month) => RawTime::NoYear {
            month,
            day: day as u32,
            time,
        },
        None => RawTime::None,
    };
    let mut p = KernelPrefix::new(raw, i + tag_len);
    p.host = host;
    Some(p)
}

/// Month names of the commonest LC_TIME locales, by their first letters
/// (lower case): English, German, French, Spanish, Italian, Dutch,
/// Portuguese, Russian; and CJK `N月`.
fn localized_month(word: &[u8]) -> Option<u32> {
    if let Some(n) = word.strip_suffix("月".as_bytes()) {
        let (m, len) = digits(n)?;
        return (len == n.len() && (1..=12).contains(&m)).then_some(m as u32);
    }
    let text = std::str::from_utf8(word).ok()?.to_lowercase();
    let text = text.trim_end_matches('.');
    const NAMES: [&[&str]; 12] = [
        &["jan", "ene", "gen", "янв"],
        &["feb", "fév", "fev", "фев"],
        &["mar", "mär", "mrt", "мар"],
        &["apr", "avr", "abr", "апр"],
        &["may", "mai", "mag", "mei", "май", "мая"],
        &["jun", "juin", "giu", "июн"],
        &["jul", "juil", "lug", "июл"],
        &["aug", "aoû", "ago", "авг"],
        &["sep", "set", "сен"],
        &["oct", "okt", "ott", "out", "окт"],
        &["nov", "ноя"],
        &["dec", "dez", "déc", "dic", "дек"],
    ];
    // Longest prefix first: `juil` (July) before `jui…`, `juin` (June).
    let mut best: Option<(usize, u32)> = None;
    for (m, names) in NAMES.iter().enumerate() {
        for name in names.iter() {
            if text.starts_with(name) && best.is_none_or(|(len, _)| name.len() > len) {
                best = Some((name.len(), m as u32 + 1));
            }
        }
    }
    best.map(|(_, m)| m)
}

/// `2025-01-17T17:10:43+0000 host kernel: ` (`journalctl -o short-iso`,
/// `short-iso-precise`). A bare ISO stamp is left to the generic reader.
fn iso_syslog(s: &[u8]) -> Option<KernelPrefix<'_>> {
    let (t, n) = stamps::date_time(s)?;
    if s.get(n) != Some(&b' ') {
        return None;
    }
    let (host, tag_len) = host_and_tag(&s[n + 1..])?;
    let mut p = KernelPrefix::new(t, n + 1 + tag_len);
    p.host = host;
    Some(p)
}

/// `host kernel: `, `kernel: ` or `host name[pid]: `: (host, bytes).
fn host_and_tag(s: &[u8]) -> Option<(Option<&[u8]>, usize)> {
    if let Some(n) = syslog_tag(s) {
        return Some((None, n));
    }
    let h = word(s);
    if h == 0 || h > 255 || s.get(h) != Some(&b' ') {
        return None;
    }
    let n = syslog_tag(&s[h + 1..])?;
    Some((Some(&s[..h]), h + 1 + n))
}

/// `kernel: ` or `name[pid]: `: bytes incl. the space.
fn syslog_tag(s: &[u8]) -> Option<usize> {
    if s.starts_with(b"kernel: ") {
        return Some(8);
    }
    let open = memchr::memchr(b'[', &s[..s.len().min(64)])?;
    if open == 0
        || s[..open]
            .iter()
            .any(|b| b.is_ascii_whitespace() || *b == b':')
    {
        return None;
    }
    let (_, n) = digits(&s[open + 1..])?;
    let end = open + 1 + n;
    s[end..].starts_with(b"]: ").then_some(end + 3)
}

/// Length of the leading run of non-space bytes.
/// The length of a `dmesg -x` name at the start of `s` (up to a space or
/// its colon), looking at no more than `max` bytes.
fn padded_name(s: &[u8], max: usize) -> usize {
    s.iter()
        .take(max)
        .take_while(|&&b| !b.is_ascii_whitespace() && b != b':')
        .count()
}

fn word(s: &[u8]) -> usize {
    s.iter()
        .take(256)
        .take_while(|b| !b.is_ascii_whitespace())
        .count()
}

fn spaces(s: &[u8]) -> usize {
    s.iter().take_while(|b| **b == b' ').count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::time::format_local;

    fn piece(line: &[u8]) -> KernelPrefix<'_> {
        prefix(line).unwrap_or_else(|| panic!("no prefix in {:?}", String::from_utf8_lossy(line)))
    }

    fn rest<'a>(line: &'a [u8], p: &KernelPrefix<'_>) -> &'a [u8] {
        &line[p.len..]
    }

    #[test]
    fn dmesg_raw_uptime() {
        let line = b"[  408.372201] infiniband mlx5_0: WC error: 4";
        let p = piece(line);
        assert_eq!(
            p.time,
            RawTime::Uptime {
                micros: 408_372_201
            }
        );
        assert_eq!(rest(line, &p), b"infiniband mlx5_0: WC error: 4");
        let line = b"[145291.904971] mlx5_core 0000:04:00.0: x";
        assert_eq!(
            piece(line).time,
            RawTime::Uptime {
                micros: 145_291_904_971
            }
        );
    }

    #[test]
    fn dmesg_printk_caller_thread_and_cpu() {
        let line = b"[   36.544994][  T291] pcieport 0000:00:01.0: x";
        let p = piece(line);
        assert_eq!(p.time, RawTime::Uptime { micros: 36_544_994 });
        assert_eq!(rest(line, &p), b"pcieport 0000:00:01.0: x");
        let line = b"[    1.000000][    C3] y";
        assert_eq!(rest(line, &piece(line)), b"y");
    }

    #[test]
    fn dmesg_r_printk_level_then_uptime() {
        let line = b"<3>[ 1137.356721] NVRM: loading";
        let p = piece(line);
        assert_eq!((p.level, p.len), (Some(Level::Error), 3));
        let p2 = piece(&line[p.len..]);
        assert_eq!(
            p2.time,
            RawTime::Uptime {
                micros: 1_137_356_721
            }
        );
        // `<30>` is daemon.info from systemd through /dev/kmsg.
        assert_eq!(piece(b"<30>[   13.0] x").level, Some(Level::Info));
    }

    #[test]
    fn dmesg_t_ctime_with_space_padded_day() {
        let line = b"[Mon Aug  5 03:54:13 2024] NVRM: GPU at PCI:0000:00:07: GPU-3b6e";
        let p = piece(line);
        let RawTime::Local(t) = p.time else {
            panic!("{:?}", p.time)
        };
        assert_eq!(format_local(&t), "2024-08-05 03:54:13");
        assert_eq!(rest(line, &p), b"NVRM: GPU at PCI:0000:00:07: GPU-3b6e");
        assert!(prefix(b"[Mon Foo  5 03:54:13 2024] x").is_none());
    }

    #[test]
    fn dmesg_x_decoded_facility_and_level() {
        let line = b"kern  :warn  : [  408.372201] x";
        let p = piece(line);
        assert_eq!(p.level, Some(Level::Warn));
        assert_eq!(rest(line, &p), b"[  408.372201] x");
        assert_eq!(piece(b"kern  :err   : y").level, Some(Level::Error));
        // Names of six or more meet their colon (util-linux `%-6s:`); the
        // longest facility name is read whole, a longer word is none.
        assert_eq!(piece(b"daemon:info  : y").level, Some(Level::Info));
        assert_eq!(piece(b"kern  :notice: y").level, Some(Level::Info));
        assert_eq!(piece(b"authpriv:info  : y").level, Some(Level::Info));
        assert!(prefix(b"authprivx:info  : y").is_none());
        assert!(prefix(b"worker-1: x").is_none());
    }

    #[test]
    fn journalctl_short_rfc3164_keeps_no_year_and_host() {
        let line = b"Dec 02 09:56:04 node1 kernel: mlx5_core 0000:d2:00.0: x";
        let p = piece(line);
        assert!(matches!(
            p.time,
            RawTime::NoYear {
                month: 12,
                day: 2,
                ..
            }
        ));
        assert_eq!(p.host, Some(&b"node1"[..]));
        assert_eq!(rest(line, &p), b"mlx5_core 0000:d2:00.0: x");
    }

    #[test]
    fn localized_journal_months_keep_host_and_month() {
        let line = "фев 12 00:48:02 gpu7 kernel: NVRM: Xid (PCI:0000:01:00): 79".as_bytes();
        let p = piece(line);
        assert!(
            matches!(
                p.time,
                RawTime::NoYear {
                    month: 2,
                    day: 12,
                    ..
                }
            ),
            "{p:?}"
        );
        assert_eq!(p.host, Some(&b"gpu7"[..]));
        assert_eq!(rest(line, &p), b"NVRM: Xid (PCI:0000:01:00): 79");
        let cjk = piece("4月 28 15:08:10 node2 kernel: x".as_bytes());
        assert!(matches!(
            cjk.time,
            RawTime::NoYear {
                month: 4,
                day: 28,
                ..
            }
        ));
        let dutch = piece(b"april 24 16:22:15 robin kernel: x");
        assert!(matches!(
            dutch.time,
            RawTime::NoYear {
                month: 4,
                day: 24,
                ..
            }
        ));
        let french = piece("juil. 3 10:00:00 h kernel: x".as_bytes());
        assert!(matches!(french.time, RawTime::NoYear { month: 7, .. }));
        let unknown = piece("xyzzy 3 10:00:00 h9 kernel: x".as_bytes());
        assert_eq!(unknown.time, RawTime::None);
        assert_eq!(unknown.host, Some(&b"h9"[..]));
        // Another program's line under an unknown first word is not kernel.
        assert!(prefix(b"april 24 16:22:15 robin sshd[12]: x").is_none());
        assert!(prefix(b"epoch 3 10:00:00 loss 0.5").is_none());
    }

    #[test]
    fn rsyslog_space_padded_day_keeps_the_raw_uptime_after_kernel() {
        let line = b"Sep  9 16:18:02 bubz kernel: [68183.615790] pcieport 0000:00:03.1: AER";
        let p = piece(line);
        assert!(matches!(
            p.time,
            RawTime::NoYear {
                month: 9,
                day: 9,
                ..
            }
        ));
        let after = rest(line, &p);
        let up = piece(after);
        assert_eq!(
            up.time,
            RawTime::Uptime {
                micros: 68_183_615_790
            }
        );
    }

    #[test]
    fn syslog_without_host_and_other_programs() {
        let p = piece(b"Nov 29 12:00:00 kernel: x");
        assert_eq!((p.host, p.len), (None, 24));
        let p = piece(b"Dec 02 09:56:04 node1 gpud[1441796]: {}");
        assert_eq!(p.host, Some(&b"node1"[..]));
        // A level and a logger name are not a host and a tag.
        assert!(prefix(b"Nov 29 12:00:00 INFO root: x").is_none());
    }

    #[test]
    fn journalctl_short_iso_systemd_250() {
        let line = b"2025-01-17T17:10:43+0000 exp03-ft-896z-1-lan.exp03-ft-896z-job-svc kernel: nvidia-peermem x";
        let p = piece(line);
        assert!(matches!(p.time, RawTime::Zoned(_)));
        assert_eq!(&*short_host(p.host.unwrap()), "exp03-ft-896z-1-lan");
        assert_eq!(rest(line, &p), b"nvidia-peermem x");
    }

    #[test]
    fn journalctl_short_iso_colon_offset_and_precise() {
        let p = piece(b"2025-01-17T17:10:43+00:00 h kernel: x");
        assert_eq!(p.host, Some(&b"h"[..]));
        let p = piece(b"2025-01-17T17:10:43.123456+0800 h kernel: x");
        let RawTime::Zoned(t) = p.time else { panic!() };
        assert_eq!(t.offset().local_minus_utc(), 8 * 3600);
        // dmesg --time-format iso has no host: left to the generic stamp reader.
        assert!(prefix(b"2024-11-15T05:39:15,491363+00:00 NVRM: Xid").is_none());
    }

    #[test]
    fn dev_kmsg_record() {
        let line = b"6,3964,206764307,-;mlx5_core 0000:41:00.0: x";
        let p = piece(line);
        assert_eq!(
            p.time,
            RawTime::Uptime {
                micros: 206_764_307
            }
        );
        assert_eq!(p.level, Some(Level::Info));
        assert_eq!(rest(line, &p), b"mlx5_core 0000:41:00.0: x");
        assert!(prefix(b"6,3964,206764307;x").is_none());
        assert!(prefix(b"3: node1:1:2 [0] NCCL INFO x").is_none());
    }

    #[test]
    fn openwrt_logread() {
        let line = b"Mon Jul 28 10:19:15 2025 kern.crit kernel: [ 7013.909286] x";
        let p = piece(line);
        assert!(matches!(p.time, RawTime::Local(_)));
        assert_eq!(p.level, Some(Level::Fatal));
        assert_eq!(rest(line, &p), b"[ 7013.909286] x");
    }

    #[test]
    fn pasted_kernel_tag_and_nvrm_lines() {
        let line = b"kernel: NVRM: Xid (PCI:0000:dc:00): 45";
        let p = piece(line);
        assert_eq!(rest(line, &p), b"NVRM: Xid (PCI:0000:dc:00): 45");
        assert!(prefix(b"NVRM: Xid (PCI:0000:dc:00): 45").is_none());
        assert!(starts_message(b"NVRM: Xid"));
    }

    #[test]
    fn message_strips_every_stamp() {
        assert_eq!(
            message(b"Sep 19 16:18:02 bubz kernel: [68183.615790] pcieport x"),
            b"pcieport x"
        );
        assert_eq!(message(b"[Mon Aug  5 03:54:13 2024] NVRM: y"), b"NVRM: y");
        assert_eq!(
            message(b"2024-11-15T05:39:15,491363+00:00 NVRM: z"),
            b"NVRM: z"
        );
    }

    #[test]
    fn garbage_never_panics() {
        // Bytes drawn from the prefixes' own alphabet reach the edge cases.
        let alphabet = b"[]<>0123456789.,;: -+TCkernl_NovMJuSeptiWdFhxZ\xff";
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let line: Vec<u8> = (0..len)
                .map(|i| alphabet[((seed >> (i % 8 * 8)) as usize + i * 7) % alphabet.len()])
                .collect();
            let _ = prefix(&line);
            let _ = message(&line);
            let _ = crate::parse::frame::frame(&line, &Default::default());
        }
    }

    #[test]
    fn not_kernel_prefixes() {
        for line in [
            &b"[2025-05-10 00:18:21] x"[..],
            b"[1,12]<stdout>:host:1:2 [0] NCCL INFO x",
            b"[default3]:[rank11]:x",
            b"[3] x",
            b"[E1129 12:34:56.789 ProcessGroupNCCL.cpp:607] x",
            b"NCCL version 2.18.3",
            b"<unknown> x",
            b"",
            b"[",
            b"[ 12.",
            b"[ 99999999999.1] x",
            b"[ 1.1234567890] x",
            b"<9999>[ 1.0] x",
            b"6,1,99999999999999999999,-;x",
            b"[Mon Feb 30 12:00:00 2024] x",
            b"kern  :bogus : x",
        ] {
            assert!(
                prefix(line).is_none(),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
