//! Framing: peeling the prefixes off a line to find who wrote it, when, at what
//! level, and where its message starts.
//!
//! Prefixes stack in any order real pipelines produce, e.g.
//! `2019-06-02T16:13:44.884Z: [1,12]<stdout>:host:815:864 [0] … NCCL WARN msg` or
//! `[default3]:[rank11]:[E1129 12:34:56.789 ProcessGroupNCCL.cpp:607] msg`.
//! Launcher prefixes, stamps and kernel log prefixes (`kernel`) are peeled
//! repeatedly; a writer prefix (NCCL, UCX, c10, glog, Python logging) ends the
//! peeling, because its message follows.

use crate::ingest::launcher::{self, LauncherStyle, Tag};
use std::cell::RefCell;

use crate::model::{Level, RawTime, Sym, Who};

use super::{kernel, nccl, ompi, stamps, torch, ucx};

/// A line with its prefixes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub who: Who,
    pub time: RawTime,
    pub level: Option<Level>,
    /// The message: the line after every recognised prefix.
    pub body: &'a [u8],
    /// The writer prefix was NCCL's.
    pub nccl: bool,
    /// Microseconds since boot, when a kernel prefix printed them (also when
    /// `time` holds the wall time of the same line, as syslog keeps both).
    pub uptime_us: Option<i64>,
    /// A Ray actor's line: whether Ray named its node (`ip=`), which it
    /// does only for actors on another node than the driver's.
    pub ray_node_named: Option<bool>,
}

const MAX_PREFIXES: usize = 8;

pub fn frame<'a>(line: &'a [u8], style: &LauncherStyle) -> Frame<'a> {
    let mut f = Frame {
        who: Who::default(),
        time: RawTime::None,
        level: None,
        body: line,
        nccl: false,
        uptime_us: None,
        ray_node_named: None,
    };
    let mut pos = indent_before_launcher_tag(line, style);
    for _ in 0..MAX_PREFIXES {
        let s = &line[pos..];
        if let Some(n) = colour_code(s) {
            pos += n;
            continue;
        }
        // mpirun `--timestamp-output` puts a ctime stamp right before its
        // tag (`Wed Sep  6 17:26:52 2023[1,5]<stdout>:`): keep its time.
        if let Some((t, n)) = kernel::ctime(s).filter(|(_, n)| s.get(*n) == Some(&b'[')) {
            if !f.time.is_some() {
                f.time = RawTime::Local(t);
            }
            pos += n;
            continue;
        }
        if let Some(k) = kernel::prefix(s) {
            apply_kernel(&mut f, &k);
            pos += k.len;
        } else if kernel::starts_message(s) {
            break;
        } else if let Some((n, tag)) = launcher::parse_prefix(s, style) {
            // srun's label wraps everything its task prints, so it comes
            // first: digits after a rank tag (`[0]<stderr>:11: [allreduce.…]`,
            // Horovod's stall block under horovodrun) are the message's.
            if matches!(tag, Tag::Task(_)) && f.who.rank.is_some() {
                break;
            }
            if let Tag::Actor { node, .. } = tag {
                f.ray_node_named = Some(!node.is_empty());
            }
            apply_tag(&mut f.who, tag);
            pos += n;
        } else if f.time.is_some()
            && let Some(n) = cri_stream(s)
        {
            pos += n;
        } else if f.time.is_some()
            && let Some((n, host)) = host_after_stamp(s)
        {
            apply_tag(&mut f.who, Tag::Host(host));
            pos += n;
        } else if let Some(n) = compose_service(s)
            .or_else(|| stream_label(s))
            .or_else(|| kubectl_prefix(s))
        {
            pos += n;
        } else if let Some((n, host)) = host_arrow(s) {
            apply_tag(&mut f.who, Tag::Host(host));
            pos += n;
        } else if let Some((t, n)) = leading_stamp(s) {
            if !f.time.is_some() {
                f.time = t;
            }
            pos += n;
        } else {
            let n = writer_prefix(s, &mut f);
            // Only where no writer's prefix starts the line (most lines
            // have one: this costs them nothing).
            if n == 0
                && let Some(g) = grep_file_prefix(s).or_else(|| viewer_label(s))
            {
                pos += g;
                continue;
            }
            pos += n;
            break;
        }
    }
    f.body = without_ray_dedup_note(&line[pos..]);
    f
}

/// The message without the ` [repeated 6x across cluster]` Ray's log
/// deduplication appends to a line that other workers printed too: the
/// note is Ray's, not the writer's, and would end every captured value.
fn without_ray_dedup_note(body: &[u8]) -> &[u8] {
    let trimmed = body.trim_ascii_end();
    let Some(head) = trimmed.strip_suffix(b"x across cluster]") else {
        return body;
    };
    let count = head.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let head = &head[..head.len() - count];
    match head.strip_suffix(b" [repeated ") {
        Some(message) if count > 0 => message,
        _ => body,
    }
}

/// `pytorch `: the container or stream label a log viewer shows before each
/// line (nccl#879's Kubernetes console). Peeled only where an NCCL prefix
/// follows, so no message's first word is lost.
fn viewer_label(s: &[u8]) -> Option<usize> {
    let word = s
        .iter()
        .take(64)
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
        .count();
    if word == 0 || s.get(word) != Some(&b' ') {
        return None;
    }
    nccl_writer(&s[word + 1..]).map(|_| word + 1)
}

/// `LOG1.0.txt:` or `rank3.log:120:`: the file name (and line number) grep
/// puts before each line it found in several files, as pasted into issues.
/// Peeled only where an NCCL prefix follows, so no message that merely
/// starts with a file name loses it.
fn grep_file_prefix(s: &[u8]) -> Option<usize> {
    let name = s
        .iter()
        .take(256)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
        .count();
    let known = [".txt", ".log", ".out", ".err"]
        .iter()
        .any(|ext| s[..name].ends_with(ext.as_bytes()));
    if !known || s.get(name) != Some(&b':') {
        return None;
    }
    let mut n = name + 1;
    let digits = s[n..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 && s.get(n + digits) == Some(&b':') {
        n += digits + 1;
    }
    // A stamp the writer put first may stand between (NCCL 2.26+ WARN lines).
    let stamp = leading_stamp(&s[n..]).map_or(0, |(_, len)| len);
    nccl_writer(&s[n + stamp..]).map(|_| n)
}

/// Reads a writer prefix (NCCL, c10, glog, Python logging) into `f`; returns
/// its length (0 when there is none).
fn writer_prefix(s: &[u8], f: &mut Frame<'_>) -> usize {
    // A paste indented as a quote (`    E0816 01:45:43.466000 … api.py:833]`):
    // the writer's prefix after a few spaces is still the line's.
    let sp = spaces(s);
    if (1..=8).contains(&sp) {
        let n = writer_prefix(&s[sp..], f);
        return if n > 0 { sp + n } else { 0 };
    }
    if let Some(p) = nccl_writer(s) {
        // An empty host field leaves the host a collector's prefix named.
        if !p.host.is_empty() {
            f.who.host = Some(p.host);
        }
        f.who.pid = Some(p.pid);
        f.who.tid = Some(p.tid);
        f.level = Some(p.level);
        f.nccl = true;
        return p.len;
    }
    if let Some((level, len)) = super::nccl::bare_level(s) {
        f.level = Some(level);
        f.nccl = true;
        return len;
    }
    if s.first() == Some(&b'[')
        && let Some(p) = ucx::prefix(s)
    {
        f.who.host = Some(lossy(p.host));
        f.who.pid = Some(p.pid);
        f.level = p.level.or(f.level);
        if p.time.is_some() {
            f.time = p.time;
        }
        return p.len;
    }
    if s.first() == Some(&b'[')
        && let Some(p) = ompi::prefix(s)
    {
        f.who.host = Some(lossy(p.host));
        f.who.rank = f.who.rank.or(Some(p.rank));
        return p.len;
    }
    let torch = torch::c10_prefix(s)
        .or_else(|| torch::glog_prefix(s))
        .or_else(|| torch::python_logging_prefix(s))
        .or_else(|| torch::logger_tail_prefix(s));
    match torch {
        Some(p) => {
            f.level = Some(p.level);
            if p.time.is_some() {
                f.time = p.time;
            }
            p.len
        }
        None => 0,
    }
}

/// A kernel prefix piece: wall time beats uptime as the line's time, and the
/// uptime is kept beside it so the timeline can tie the two clocks together.
fn apply_kernel(f: &mut Frame<'_>, k: &kernel::KernelPrefix<'_>) {
    match k.time {
        RawTime::None => {}
        RawTime::Uptime { micros } => {
            f.uptime_us = f.uptime_us.or(Some(micros));
            if !f.time.is_some() {
                f.time = k.time;
            }
        }
        wall => {
            if matches!(f.time, RawTime::None | RawTime::Uptime { .. }) {
                f.time = wall;
            }
        }
    }
    if let (None, Some(h)) = (&f.who.host, k.host) {
        f.who.host = Some(Sym::new(&kernel::short_host(h)));
    }
    f.level = f.level.or(k.level);
}

fn apply_tag(who: &mut Who, tag: Tag<'_>) {
    match tag {
        Tag::Rank(r) => who.rank = who.rank.or(Some(r)),
        Tag::LocalRank(r) => who.local_rank = who.local_rank.or(Some(r)),
        Tag::Task(t) => who.task = who.task.or(Some(t)),
        Tag::Host(h) => who.host = who.host.take().or_else(|| Some(lossy(h))),
        Tag::Actor { pid, node } => {
            who.pid = who.pid.or(Some(pid));
            if who.host.is_none() && !node.is_empty() {
                who.host = Some(lossy(node));
            }
        }
    }
}

/// A timestamp some tool put in front of the line (NCCL 2.26+, Docker, kubectl,
/// mpirun `--timestamp-output`, log shippers): (stamp, bytes incl. separator).
fn leading_stamp(s: &[u8]) -> Option<(RawTime, usize)> {
    match s.first()? {
        // A log viewer's stamp pasted with the indent it was shown at (a
        // log platform's export separates its columns with tabs), or
        // Megatron-LM's ` [2024-11-20 05:42:09] iteration …` after a
        // launcher's tag.
        b' ' | b'\t' => {
            let sp = spaces(s);
            if !s
                .get(sp)
                .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'|' | b'['))
            {
                return None;
            }
            let (t, n) = leading_stamp(&s[sp..])?;
            Some((t, sp + n))
        }
        // A log console's table row (CloudWatch: `| 2024-11-28T07:42:11.527Z | `).
        b'|' => {
            let sp = spaces(&s[1..]);
            let (t, n) = stamps::date_time(&s[1 + sp..])?;
            let end = 1 + sp + n;
            let bar = end + spaces(&s[end..]);
            (s.get(bar) == Some(&b'|')).then(|| (t, bar + 1 + spaces(&s[bar + 1..])))
        }
        b'[' => {
            if let Some(stamped) = logger_tag_and_stamp(s) {
                return Some(stamped);
            }
            let (t, n) = stamps::date_time(&s[1..])?;
            (s.get(1 + n) == Some(&b']')).then(|| (t, 1 + n + 1 + spaces(&s[2 + n..])))
        }
        b'0'..=b'9' => {
            if let Some((t, n)) = stamps::date_time(s) {
                let n = n + usize::from(s.get(n) == Some(&b':'));
                let sp = spaces(&s[n..]);
                // A console's copy may glue a zoned stamp to the line it
                // stamps (`2025-05-16T16:39:51.208-07:00ip-10-1-2-3:…`):
                // the zone ends the stamp where no blank does.
                let glued =
                    matches!(t, RawTime::Zoned(_)) && s.get(n).is_some_and(u8::is_ascii_alphabetic);
                return (sp > 0 || glued).then_some((t, n + sp));
            }
            // A date and minute (`2025-02-18 12:54 `, a log viewer's) is
            // too coarse to order lines by: strip it only.
            if let Some(n) = date_and_minute(s) {
                return Some((RawTime::None, n + spaces(&s[n..])));
            }
            // A bare time of day (`18:11:06.680 `) carries no date: strip it only.
            let (_, n) = stamps::time(s)?;
            let sp = spaces(&s[n..]);
            (n > 8 && sp > 0).then_some((RawTime::None, n + sp))
        }
        _ => None,
    }
}

/// A Python logger's bracketed name before its `asctime` stamp: torchtitan
/// logs `[titan] 2025-01-08 13:43:27,894 - root - INFO - step: 10 …`.
fn logger_tag_and_stamp(s: &[u8]) -> Option<(RawTime, usize)> {
    let close = s.iter().take(24).position(|&b| b == b']')?;
    let name = &s[1..close];
    let word = !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.iter().all(u8::is_ascii_digit);
    if !word || s.get(close + 1) != Some(&b' ') {
        return None;
    }
    let at = close + 2;
    let (t, n) = stamps::date_time(&s[at..])?;
    let sp = spaces(&s[at + n..]);
    (sp > 0).then_some((t, at + n + sp))
}

/// `[pod/trainer-worker-1/pytorch] `: `kubectl logs --prefix` names the pod
/// and container before each line (several pods' logs in one stream). The
/// pod's name is the host NCCL's own prefix then prints, so it is peeled.
fn kubectl_prefix(s: &[u8]) -> Option<usize> {
    let rest = s.strip_prefix(b"[pod/")?;
    let close = rest.iter().take(320).position(|&b| b == b']')?;
    let inner = &rest[..close];
    let named = inner.contains(&b'/') && !inner.iter().any(u8::is_ascii_whitespace);
    (named && rest.get(close + 1) == Some(&b' ')).then_some(5 + close + 2)
}

/// `opt-1_3b.0 [stderr] `: the run and stream a benchmark harness (milabench)
/// writes before each line its workers print. The label has a host's shape
/// but is a run's name, so it is only peeled.
fn stream_label(s: &[u8]) -> Option<usize> {
    let (end, _) = host_word(s)?;
    let rest = &s[end..];
    let tagged = rest.starts_with(b" [stderr] ") || rest.starts_with(b" [stdout] ");
    tagged.then_some(end + 10)
}

/// `trainer-worker-1  | ` (Compose v2) or `bug_1  | ` (v1): the container
/// `docker compose up` / `logs` names before each of its lines, padded to
/// align the bars. The container's own prefix (NCCL's host) follows.
fn compose_service(s: &[u8]) -> Option<usize> {
    let name_len = s.iter().position(|&b| b == b' ')?;
    let name = &s[..name_len];
    let digits = name.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let stem = &name[..name_len - digits];
    let named = digits > 0
        && name[0].is_ascii_alphanumeric()
        && matches!(stem.last(), Some(b'-' | b'_'))
        && stem.len() > 1
        && stem
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let bar = name_len + spaces(&s[name_len..]);
    (named && s.get(bar) == Some(&b'|') && s.get(bar + 1).is_none_or(|&b| b == b' '))
        .then(|| bar + 1 + usize::from(s.get(bar + 1) == Some(&b' ')))
}

/// `worker-0 >> `: the host a job platform's log collector puts before each
/// line it gathered (after its own stamp), seen in front of NCCL's prefix
/// and of torch's `[rank0]:`.
fn host_arrow(s: &[u8]) -> Option<(usize, &[u8])> {
    let (end, host) = host_word(s)?;
    s[end..].starts_with(b" >> ").then_some((end + 4, host))
}

/// The word before the first space, where it has a host name's shape.
fn host_word(s: &[u8]) -> Option<(usize, &[u8])> {
    let end = s.iter().take(128).position(|&b| b == b' ')?;
    let host = &s[..end];
    let named = host.first().is_some_and(u8::is_ascii_alphanumeric)
        && host
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    named.then_some((end, host))
}

/// `sm228-a100-40g-23 [rank3]:`: the host a log collector writes after its
/// stamp, bare, before torch's rank prefix (chitu#80). Only before that
/// prefix, and only a host's shape: a level word (`INFO`, `ERROR`) is all
/// capitals, a number no host.
fn host_after_stamp(s: &[u8]) -> Option<(usize, &[u8])> {
    let (end, host) = host_word(s)?;
    let rest = end + spaces(&s[end..]);
    let ranked = s[rest..]
        .strip_prefix(b"[rank")
        .is_some_and(|r| r.first().is_some_and(u8::is_ascii_digit));
    (host.iter().any(u8::is_ascii_lowercase) && ranked).then_some((rest, host))
}

/// `stderr F `: the stream and full/partial tag the container runtime
/// (CRI: containerd, CRI-O) writes after its stamp in a pod's log file
/// (/var/log/pods/…/0.log).
fn cri_stream(s: &[u8]) -> Option<usize> {
    let rest = s
        .strip_prefix(b"stdout ")
        .or_else(|| s.strip_prefix(b"stderr "))?;
    matches!(rest, [b'F' | b'P', b' ', ..]).then_some(9)
}

/// The spaces a paste indented a whole log by (a quote in an issue), when a
/// launcher's tag follows them (`    [rank7]:[E816 …]`): 0 otherwise.
fn indent_before_launcher_tag(line: &[u8], style: &LauncherStyle) -> usize {
    let sp = spaces(line);
    let tagged = (1..=8).contains(&sp) && launcher::parse_prefix(&line[sp..], style).is_some();
    if tagged { sp } else { 0 }
}

/// `YYYY-MM-DD HH:MM ` (a space after the minutes): its length.
fn date_and_minute(s: &[u8]) -> Option<usize> {
    let shape = b"dddd-dd-dd dd:dd ";
    let fits = s.len() >= shape.len()
        && shape.iter().zip(s).all(|(want, got)| match want {
            b'd' => got.is_ascii_digit(),
            w => w == got,
        });
    fits.then_some(shape.len() - 1)
}

/// A terminal colour code before or between prefixes (Ray's coloured
/// `(RayWorker pid=N)`, coloured loggers captured from a terminal), with the
/// spaces after it; also as syslog escapes it (`#033[2m`). Pasted into an issue, the ESC byte is often lost and
/// `[0m ` is left: that residue is peeled too.
fn colour_code(s: &[u8]) -> Option<usize> {
    // rsyslog writes the escape byte as `#033` (its control-character escape),
    // `cat -v` and less as `^[`, a paste that lost it as U+FFFD, and a
    // Windows console's code page 437 shows it as `←` (copied as U+2190).
    let start = if s.starts_with(b"#033[") {
        4
    } else if s.starts_with("\u{FFFD}[".as_bytes()) || s.starts_with("\u{2190}[".as_bytes()) {
        3
    } else if s.starts_with(b"^[[") {
        2
    } else {
        usize::from(s.first() == Some(&0x1b))
    };
    if s.get(start) != Some(&b'[') {
        return None;
    }
    let params = s[start + 1..]
        .iter()
        .take(16)
        .take_while(|b| b.is_ascii_digit() || **b == b';')
        .count();
    if (params == 0 && start == 0) || s.get(start + 1 + params) != Some(&b'm') {
        return None;
    }
    let n = start + params + 2;
    Some(n + spaces(&s[n..]))
}

/// The blanks (spaces, or a log platform's tabs) that end a prefix.
fn spaces(s: &[u8]) -> usize {
    s.iter().take_while(|b| matches!(b, b' ' | b'\t')).count()
}

fn lossy(b: &[u8]) -> Sym {
    Sym::new(&String::from_utf8_lossy(b))
}

/// An NCCL prefix as the frame keeps it.
#[derive(Clone)]
struct NcclWriter {
    host: Sym,
    pid: u32,
    tid: u32,
    level: Level,
    len: usize,
}

thread_local! {
    /// The last NCCL prefix this thread read, its bytes and what it gave.
    static LAST_NCCL: RefCell<Option<(Vec<u8>, NcclWriter)>> = const { RefCell::new(None) };
}

/// Reads an NCCL prefix at the start of `s`. Consecutive lines of one file
/// mostly start with the same prefix bytes, and what the prefix parser
/// gives depends on those bytes alone where it ends with the space before
/// the message, so a line that starts with such a prefix's bytes takes its
/// reading (and shares its host name instead of a copy per line). A prefix
/// without that space depends on the byte after it too (the line's end, or
/// no space), and is not remembered.
fn nccl_writer(s: &[u8]) -> Option<NcclWriter> {
    LAST_NCCL.with_borrow_mut(|last| {
        if let Some((bytes, writer)) = last.as_ref()
            && s.starts_with(bytes)
        {
            return Some(writer.clone());
        }
        let p = nccl::parse_prefix(s)?;
        let host = match last.as_ref() {
            Some((bytes, writer))
                if bytes.starts_with(p.host) && bytes.get(p.host.len()) == Some(&b':') =>
            {
                writer.host.clone()
            }
            _ => lossy(p.host),
        };
        let writer = NcclWriter {
            host,
            pid: p.pid,
            tid: p.tid,
            level: p.level,
            len: p.len,
        };
        if s[..p.len].ends_with(b" ") {
            *last = Some((s[..p.len].to_vec(), writer.clone()));
        }
        Some(writer)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(line: &[u8]) -> Frame<'_> {
        frame(line, &LauncherStyle::default())
    }

    /// containerd / CRI-O pod log files: stamp, stream, full/partial tag.
    #[test]
    fn a_pod_log_files_stream_and_tag_are_peeled_after_its_stamp() {
        let f = plain(b"2024-05-01T10:00:00.123456789Z stderr F node1:123:456 [0] NCCL INFO x");
        assert_eq!(f.who.host.as_deref(), Some("node1"));
        assert!(f.time.is_some());
        assert_eq!(f.body, b"x");
        // Without a stamp before it, `stdout F` is a message's own words.
        let f = plain(b"stdout F is not a prefix");
        assert_eq!(f.body, b"stdout F is not a prefix");
    }

    #[test]
    fn a_line_that_starts_with_the_last_prefix_reads_as_if_read_afresh() {
        let lines: [&[u8]; 9] = [
            b"node1:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P",
            b"node1:7:9 [0] NCCL INFO Connected all rings",
            b"node1:7:9 [0] NCCL WARN NET/IB : Got completion",
            b"node1:7:99 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] via P2P",
            b"node1:7:9 [0] NCCL INFO ",
            b"node12:7:9 [0] NCCL INFO Connected all trees",
            b"node1:7:9 [0] NCCL INFOx",
            // The level word ends the line: whether a space follows is not
            // in the bytes read (found by fuzzing).
            b"node1:7:9 [0] NCCL INFO",
            b"node1:7:9 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[0] via P2P",
        ];
        for line in lines.iter().chain(lines.iter().rev()) {
            let remembered = plain(line);
            LAST_NCCL.set(None);
            assert_eq!(remembered, plain(line), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn mpirun_ctime_stamp_keeps_its_time_ompi_4() {
        let f = plain(b"Wed Sep  6 17:26:52 2023[1,5]<stdout>:node7:2406:2406 [5] NCCL INFO x");
        assert_eq!(
            (f.who.rank, f.who.pid, f.body),
            (Some(5), Some(2406), &b"x"[..])
        );
        let t = chrono::NaiveDate::from_ymd_opt(2023, 9, 6)
            .and_then(|d| d.and_hms_opt(17, 26, 52))
            .unwrap();
        assert_eq!(f.time, RawTime::Local(t));
    }

    #[test]
    fn mpirun_stamp_and_tag_then_nccl_nccl_2_4() {
        let f = plain(b"2019-06-02T16:13:44.884Z: [1,12]<stdout>:c-57:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error");
        assert_eq!(f.who.rank, Some(12));
        assert_eq!(f.who.host.as_deref(), Some("c-57"));
        assert_eq!(f.level, Some(Level::Warn));
        assert!(f.time.is_some());
        assert_eq!(
            f.body,
            b"NET/IB : Got async event : local catastrophic error"
        );
    }

    #[test]
    fn torchrun_tee_stacked_on_c10_torch_2_4() {
        let f = plain(b"[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 12] Process group watchdog");
        assert_eq!((f.who.rank, f.who.local_rank), (Some(12), Some(0)));
        assert!(matches!(
            f.time,
            RawTime::NoYear {
                month: 8,
                day: 17,
                ..
            }
        ));
        assert!(f.body.starts_with(b"[PG 0 (default_pg) Rank 12]"));
    }

    #[test]
    fn megatrons_bracketed_stamp_after_a_torchrun_tag_is_the_lines_time_megatron_core_0_8() {
        let style = LauncherStyle {
            slurm_label: true,
            ..LauncherStyle::default()
        };
        let line = b"39: [default7]: [2024-11-20 05:59:52] iteration   181780/  250000 | consumed samples:    232678400 | lm loss: 1.854207E+00 |";
        let f = frame(line, &style);
        assert!(f.time.is_some(), "{:?}", f.time);
        assert!(
            f.body.starts_with(b"iteration"),
            "{}",
            String::from_utf8_lossy(f.body)
        );
        assert_eq!(f.who.local_rank, Some(7));
        // A torch rank prefix after a blank is no stamp.
        let f = frame(b"0: [rank0]:[E ProcessGroupNCCL.cpp:563] x", &style);
        assert_eq!(f.who.rank, Some(0));
    }

    #[test]
    fn nccl_2_26_timestamp_after_an_external_one() {
        let f = plain(b"2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN communicator encountered a fatal error");
        assert_eq!(f.who.host.as_deref(), Some("h100-28"));
        assert_eq!(f.who.pid, Some(238));
        assert_eq!(f.body, b"communicator encountered a fatal error");
    }

    #[test]
    fn colour_codes_and_their_pasted_residue_are_peeled_ray_2_x() {
        let f = plain(b"\x1b[36m(RayWorkerWrapper pid=927)\x1b[0m corona:927:927 [0] NCCL INFO x");
        assert_eq!((f.who.pid, f.nccl, f.body), (Some(927), true, &b"x"[..]));
        let f = plain(
            "←[36m(RayWorkerWrapper pid=194, ip=10.0.130.237)←[0m vllm-0-1:194:194 [0] NCCL INFO x"
                .as_bytes(),
        );
        assert_eq!((f.who.pid, f.nccl, f.body), (Some(194), true, &b"x"[..]));
        let f = plain(b"[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO NCCL version 2.7.8");
        assert_eq!(f.who.pid, Some(14605));
        assert_eq!(f.body, b"NCCL version 2.7.8");
        // Not colour codes: a launcher's rank label, an mpirun tag.
        assert_eq!(plain(b"[1,12]<stdout>:x").who.rank, Some(12));
        assert!(colour_code(b"[m x").is_none());
        assert!(colour_code(b"[12345] x").is_none());
    }

    #[test]
    fn an_indented_minute_stamp_before_the_rank_prefix_torch_2_5() {
        let f = plain(b" 2025-02-18 12:54 [rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] x");
        assert_eq!((f.who.rank, f.body), (Some(13), &b"[Rank 1] x"[..]));
        // Indented text that is no stamp stays the body (NVRM continuations).
        let f = plain(b"  responding to commands");
        assert_eq!(f.body, b"  responding to commands");
    }

    #[test]
    fn a_writer_prefix_indented_by_a_paste_is_still_read_torch_2_4() {
        let f = plain(b"    E0816 01:45:43.466000 140650667333440 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: -6) local_rank: 7 (pid: 340264)");
        assert_eq!(f.body, b"failed (exitcode: -6) local_rank: 7 (pid: 340264)");
        let f = plain(b"    [rank7]:[E816 01:45:41.635484056 ProcessGroupNCCL.cpp:1709] x");
        assert_eq!((f.who.rank, f.body), (Some(7), &b"x"[..]));
        // A traceback's indented source line has no prefix.
        assert_eq!(
            plain(b"    raise RuntimeError(x)").body,
            b"    raise RuntimeError(x)"
        );
    }

    #[test]
    fn colour_codes_as_syslog_escapes_them_are_peeled_ray_2_x() {
        // vllm-project/vllm#1160: the raylet's colours through rsyslog.
        let f = plain(b"#033[2m#033[36m(RayWorkerVllm pid=1234, ip=10.0.167.26)#033[0m INFO msg");
        assert_eq!(f.who.pid, Some(1234));
        assert_eq!(f.body, b"INFO msg");
        // vllm#5477 (OpenRLHF): a paste that turned the escape byte into U+FFFD,
        // and `cat -v`'s caret form.
        for line in [
            "\u{FFFD}[36m(RayWorkerWrapper pid=4183, ip=10.3.32.122)\u{FFFD}[0m node3:4183:4200 [0] NCCL WARN x",
            "^[[36m(RayWorkerWrapper pid=4183, ip=10.3.32.122)^[[0m node3:4183:4200 [0] NCCL WARN x",
        ] {
            let f = plain(line.as_bytes());
            assert_eq!(f.who.host.as_deref(), Some("node3"), "{line}");
            assert_eq!(f.body, b"x", "{line}");
        }
    }

    #[test]
    fn digits_after_a_rank_tag_are_the_message_not_a_slurm_label_horovod_0_22() {
        let style = LauncherStyle {
            slurm_label: true,
            ..LauncherStyle::default()
        };
        let f = frame(b"[0]<stderr>:11: [allreduce.module.head.bias]", &style);
        assert_eq!(f.who.rank, Some(0));
        assert_eq!(f.who.task, None);
        assert_eq!(f.body, b"11: [allreduce.module.head.bias]");
    }

    #[test]
    fn ray_and_time_only_stamps() {
        let f = plain(b"[2025-05-10 00:18:21] (WorkerDict pid=1230, ip=w-0) [rank15]:[E510 00:18:19.328053719 ProcessGroupNCCL.cpp:629] [Rank 1] x");
        assert_eq!((f.who.rank, f.who.pid), (Some(15), Some(1230)));
        assert_eq!(f.body, b"[Rank 1] x");
        let f =
            plain(b"18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] y");
        assert_eq!((f.who.rank, f.body), (Some(4), &b"y"[..]));
    }

    #[test]
    fn syslog_keeps_wall_time_host_and_uptime() {
        let f =
            plain(b"Sep 19 16:18:02 bubz.lan kernel: [68183.615790] pcieport 0000:00:03.1: AER: x");
        assert!(matches!(
            f.time,
            RawTime::NoYear {
                month: 9,
                day: 19,
                ..
            }
        ));
        assert_eq!(f.uptime_us, Some(68_183_615_790));
        assert_eq!(f.who.host.as_deref(), Some("bubz"));
        assert_eq!(f.body, b"pcieport 0000:00:03.1: AER: x");
    }

    #[test]
    fn dmesg_x_iso_and_raw_forms_reach_the_message() {
        let f = plain(
            b"kern  :err   : 2024-11-15T05:39:15,491363+00:00 NVRM: Xid (PCI:0000:19:00): 48",
        );
        assert_eq!(f.level, Some(Level::Error));
        assert!(matches!(f.time, RawTime::Zoned(_)));
        assert_eq!(f.body, b"NVRM: Xid (PCI:0000:19:00): 48");
        let f = plain(b"<6>[   11.110211] mlx5_core 0000:41:00.0 enp65s0f0np0: renamed from eth0");
        assert_eq!(f.time, RawTime::Uptime { micros: 11_110_211 });
        assert_eq!(
            f.body,
            b"mlx5_core 0000:41:00.0 enp65s0f0np0: renamed from eth0"
        );
    }

    #[test]
    fn bare_nvrm_lines_are_not_pdsh_hosts() {
        let style = LauncherStyle {
            pdsh_hosts: vec![b"NVRM".to_vec()],
            ..LauncherStyle::default()
        };
        let f = frame(b"NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal", &style);
        assert_eq!(f.who.host, None);
        assert!(f.body.starts_with(b"NVRM: Xid"));
    }

    #[test]
    fn grep_file_names_before_nccl_prefixes_are_peeled_nccl_2_3() {
        // NVIDIA/nccl#147: a grep over per-rank logs, pasted.
        let f = plain(b"LOG1.1.txt:learnfair062:32617:32617 [1] NCCL INFO Broadcast: opCount 0");
        assert_eq!(f.who.pid, Some(32617));
        assert_eq!(f.body, b"Broadcast: opCount 0");
        let f = plain(b"logs/rank3.log:120:node7:1:2 [3] NCCL WARN Call to connect returned");
        assert_eq!(f.who.host.as_deref(), Some("node7"));
        assert_eq!(f.body, b"Call to connect returned");
        // A message that starts with a file name keeps it.
        let f = plain(b"notes.txt: saved");
        assert_eq!(f.body, b"notes.txt: saved");
        // llm-d#191: NCCL 2.26+ stamps its WARN lines before the prefix.
        let f = plain(b"ms-pd-prefill-2.log:[2025-09-17 15:16:23] host7:311:405 [0] misc/ibvwrap.cc:262 NCCL WARN x");
        assert_eq!(f.who.host.as_deref(), Some("host7"));
        assert!(f.time.is_some());
        assert_eq!(f.body, b"x");
    }

    #[test]
    fn a_log_consoles_table_row_stamp_is_peeled_cloudwatch() {
        // aws-ofi-nccl#715: SageMaker logs copied from CloudWatch's table.
        let f = plain(b"  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] NCCL INFO NET/OFI Selected provider is efa");
        assert_eq!(f.who.host.as_deref(), Some("algo-1"));
        assert_eq!(f.who.pid, Some(17778));
        assert!(f.time.is_some());
        assert_eq!(f.body, b"NET/OFI Selected provider is efa");
        // A pipe that is not a stamp's cell stays in the body.
        let f = plain(b"| rank | host |");
        assert_eq!(f.body, b"| rank | host |");
    }

    #[test]
    fn a_harness_run_and_stream_label_is_peeled_milabench() {
        let f = plain(b"dinov2-giant-nodes.cn-d003.nolog [stderr] [rank3]:[E909 19:03:11.000000000 ProcessGroupNCCL.cpp:632] x");
        assert_eq!(f.who.rank, Some(3));
        assert_eq!(f.body, b"x");
        let f = plain(b"opt-1_3b.0 [stderr] ncclInternalError: Internal check failed.");
        assert_eq!(f.body, b"ncclInternalError: Internal check failed.");
        // A sentence that mentions a stream keeps its words.
        let f = plain(b"wrote to [stderr] twice");
        assert_eq!(f.body, b"wrote to [stderr] twice");
    }

    #[test]
    fn a_zoned_stamp_glued_to_the_host_is_peeled_aws_ofi_nccl_889() {
        // A console copy that lost the blank after the stamp's zone.
        let f =
            plain(b"2025-05-16T16:39:51.208-07:00ip-10-1-2-3:362:362 [0] NCCL INFO Init COMPLETE");
        assert_eq!(f.who.host.as_deref(), Some("ip-10-1-2-3"));
        assert!(matches!(f.time, RawTime::Zoned(_)));
        assert_eq!(f.body, b"Init COMPLETE");
        // Without a zone the stamp's end is not known: nothing is guessed.
        let f = plain(b"2025-05-16T16:39:51.208ip-10-1-2-3:362:362 [0] NCCL INFO x");
        assert_ne!(f.who.host.as_deref(), Some("ip-10-1-2-3"));
    }

    #[test]
    fn a_log_platforms_tab_separated_columns_are_peeled_sglang_4088() {
        // A Kubernetes log platform's export (its quote marker is
        // undone before framing): blanks, stamp, tab.
        let f = plain(b" \t \t2025-03-11 09:37:39.811\tdeepseek-r1-0:100:100 [1] NCCL INFO NET/IB : No device found.\t ");
        assert_eq!(f.who.host.as_deref(), Some("deepseek-r1-0"));
        assert_eq!(f.who.pid, Some(100));
        assert!(f.time.is_some());
        assert!(f.body.starts_with(b"NET/IB : No device found."));
    }
    #[test]
    fn a_viewers_label_before_an_nccl_prefix_is_peeled() {
        // nccl#879's shape: a console's container label before each line.
        let f = plain(b"pytorch card-16-master-0:22789:28201 [0] graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (14 != 0)");
        assert_eq!(f.who.host.as_deref(), Some("card-16-master-0"));
        assert!(f.nccl);
        // A first word before anything else stays.
        let f = plain(b"pytorch version 2.1.0");
        assert_eq!(f.body, b"pytorch version 2.1.0");
    }

    #[test]
    fn a_collectors_host_arrow_names_the_host() {
        // nccl#1808's shape: NCCL's own host field empty behind the arrow.
        let f = plain(b"2025-08-12 09:37:02.216313 worker-9 >> :168:1228 [2] NCCL INFO NET/IB : No device found.");
        assert_eq!(f.who.host.as_deref(), Some("worker-9"));
        assert_eq!(f.body, b"NET/IB : No device found.");
        // DeepSpeed#7044's shape: torch's rank prefix behind it.
        let f = plain(b"[2026-02-22 23:55:59] worker-0 >> [rank0]: RuntimeError: x");
        assert_eq!(f.who.host.as_deref(), Some("worker-0"));
        assert_eq!(f.who.rank, Some(0));
        // A shell's redirection in a command line is no prefix.
        let f = plain(b"echo x >> out.log");
        assert_eq!(f.who.host, None);
    }

    #[test]
    fn a_collectors_bare_host_after_its_stamp_names_the_host() {
        // chitu#80's shape: the collector's stamp, two spaces, the host.
        let f = plain(b"2025-03-27 17:31:09.952  sm228-a100-40g-23 [rank3]:[E327 17:31:09.952000000 ProcessGroupNCCL.cpp:632] [Rank 3] x");
        assert_eq!(f.who.host.as_deref(), Some("sm228-a100-40g-23"));
        assert_eq!(f.who.rank, Some(3));
        // A level word after a stamp is no host.
        let f = plain(b"2025-03-27 17:31:09,952 ERROR [rank3]: x");
        assert_eq!(f.who.host, None);
        // Without a stamp, a word before the rank prefix is the message.
        let f = plain(b"node7 [rank3]: x");
        assert_eq!(f.who.host, None);
    }

    #[test]
    fn a_compose_containers_name_is_peeled_docker_compose_v1_and_v2() {
        // pytorch#73790's shape: `docker-compose up` of one container per node.
        let f = plain(b"bug_1  | node4:103:203 [0] NCCL INFO NET/IB : No device found.");
        assert_eq!(f.who.host.as_deref(), Some("node4"));
        assert_eq!(f.body, b"NET/IB : No device found.");
        let f = plain(b"trainer-worker-12 | [rank3]:[E ProcessGroupNCCL.cpp:475] x");
        assert_eq!(f.who.rank, Some(3));
        // Not a container's name: no number after its dash, or a table.
        let f = plain(b"step-x  | loss 2.1");
        assert_eq!(f.body, b"step-x  | loss 2.1");
        let f = plain(b"epoch_3 |loss 2.1");
        assert_eq!(f.body, b"epoch_3 |loss 2.1");
    }

    /// Ray names an actor's node only where it is not the driver's.
    #[test]
    fn a_ray_actor_prefix_says_whether_it_named_the_node_ray_2_x() {
        let f = plain(b"(RayWorkerVllm pid=409241) [E ProcessGroupNCCL.cpp:474] x");
        assert_eq!((f.who.pid, f.ray_node_named), (Some(409241), Some(false)));
        let f = plain(b"(RayWorkerVllm pid=409241, ip=10.0.0.7) x");
        assert_eq!(f.ray_node_named, Some(true));
        assert_eq!(plain(b"[rank1]: x").ray_node_named, None);
    }

    #[test]
    fn ray_dedup_note_is_not_part_of_the_message_ray_2_x() {
        let line = b"(RayWorkerWrapper pid=11934) node1:123:456 [1] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0 [repeated 6x across cluster]";
        let f = plain(line);
        assert!(f.nccl);
        assert_eq!(f.body, b"NCCL_SOCKET_IFNAME set by environment to eth0");
        let odd = b"node1:123:456 [1] NCCL INFO see [repeated x across cluster]";
        assert!(plain(odd).body.ends_with(b"cluster]"));
    }

    #[test]
    fn a_loggers_name_before_its_stamp_is_peeled_torchtitan() {
        let f = plain(
            b"[default0]:[titan] 2025-01-08 13:43:27,894 - root - INFO - step: 14700  loss:  2.3178",
        );
        assert!(f.time.is_some());
        assert_eq!(f.who.local_rank, Some(0));
        assert_eq!(f.body, b"- root - INFO - step: 14700  loss:  2.3178");
    }

    #[test]
    fn kubectls_pod_and_container_prefix_is_peeled_kubectl_1_17() {
        let f = plain(
            b"[pod/vit-g-worker-1/pytorch] [default0]:vit-g-worker-1:40:138 [0] misc/ibvwrap.cc:206 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument errno 22",
        );
        assert_eq!(f.who.local_rank, Some(0));
        assert_eq!(f.who.host.as_deref(), Some("vit-g-worker-1"));
        assert!(f.nccl);
    }

    #[test]
    fn unprefixed_lines_are_all_body() {
        let f = plain(b"  exitcode  : -6 (pid: 48212)");
        assert_eq!(f.body, b"  exitcode  : -6 (pid: 48212)");
        assert_eq!(f.who, Who::default());
    }
}
