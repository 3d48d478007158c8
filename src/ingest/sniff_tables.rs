//! Recognising table files (counter dumps, fabric snapshots, Flight Recorder
//! JSON) by their content.
//!
//! Each kind has a *header* (a line only that tool prints: `CA '…'`,
//! `# Port counters:`, `NIC statistics:`, …) and a *line shape* its other
//! lines fit. A file is a table when a header sits among its first lines and
//! most of its head fits the shape, or, for header-less captures (grep'd
//! sysfs or ethtool, `rdma statistic` lines), when nearly every line fits.
//! Logs fail both tests: a pasted `ibstat` in the middle of a Slurm log stays
//! a log.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use super::lines::line_spans;
use super::sniff::TableKind;

/// Lines of the head looked at.
const HEAD_LINES: usize = 200;
/// A header must appear within this many non-empty lines.
const HEADER_WITHIN: usize = 6;
/// Share of lines that must fit a kind that has a header.
const FIT_WITH_HEADER: f64 = 0.6;
/// Share of lines that must fit a header-less capture.
const FIT_WITHOUT_HEADER: f64 = 0.9;

/// Names that make a bare `name value` list a counter dump.
const COUNTER_ANCHORS: &[&str] = &[
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_xmit_discards",
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_wait",
    "local_ack_timeout_err",
    "out_of_sequence",
    "out_of_buffer",
    "packet_seq_err",
    "duplicate_request",
    "rnr_nak_retry_err",
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "req_cqe_error",
    "resp_cqe_error",
    "rx_write_requests",
    "roce_adp_retrans",
];

/// The table kind a file's head looks like, if any.
pub fn sniff_table(head: &[u8]) -> Option<TableKind> {
    let looked_at = first_lines(head, HEAD_LINES);
    // Valid UTF-8 (nearly every file) is checked far faster than it is
    // decoded lossily.
    let text = match std::str::from_utf8(looked_at) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(looked_at),
    };
    let lines: Vec<Cow<'_, str>> = line_spans(text.as_bytes())
        .map(|span| &text[span])
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .take(HEAD_LINES)
        .map(strip_ansi)
        .filter(|l| !l.trim().is_empty() && content_stamp(l).is_none())
        .collect();
    // A head cut mid-line would count its last line as a misfit.
    let cut_mid_line = looked_at.len() == head.len() && head.len() >= super::sniff::SNIFF_BYTES;
    let lines = if cut_mid_line && lines.len() > 1 {
        &lines[..lines.len() - 1]
    } else {
        &lines[..]
    };
    if lines.is_empty() {
        return None;
    }
    if let Some(section) = first_section(lines) {
        return section_kind(section);
    }
    if let Some(kind) = with_header(lines) {
        return Some(kind);
    }
    without_header(lines)
}

/// The stamp a capture line stands for, as `YYYYMMDDhhmmss`: `watch`'s
/// header (`Every 1.0s: perfquery …   Wed Nov  5 11:32:44 2014`), a `date`
/// line (`Tue Dec  1 08:00:00 UTC 2026`), or a line that is only an ISO
/// time (`date -Iseconds`: `2026-12-01T08:00:00+00:00`).
pub fn content_stamp(line: &str) -> Option<u64> {
    static DATE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?P<wd>Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<t>\d\d:\d\d:\d\d)(?: [A-Z]{2,5})? (?P<y>\d{4})\s*$")
            .unwrap()
    });
    static ISO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?P<y>\d{4})-(?P<m>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| [A-Z]{2,5})?\s*$")
            .unwrap()
    });
    // Cheap shapes first: sniffing runs this over the head of every file.
    let t = line.trim();
    let year_last = t.len() >= 24 && t.bytes().rev().take(4).all(|b| b.is_ascii_digit());
    let iso_first =
        (19..=40).contains(&t.len()) && t.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    if !year_last && !iso_first {
        return None;
    }
    if let Some(c) = ISO.captures(line) {
        let digits: String = ["y", "m", "d", "h", "mi", "s"]
            .iter()
            .map(|k| &c[*k])
            .collect();
        return digits.parse().ok();
    }
    let c = DATE.captures(line)?;
    let text = format!("{} {} {} {}", &c["mon"], &c["d"], &c["t"], &c["y"]);
    let t = chrono::NaiveDateTime::parse_from_str(&text, "%b %d %H:%M:%S %Y").ok()?;
    t.format("%Y%m%d%H%M%S").to_string().parse().ok()
}

/// `==> PATH <==`: the header `head` and `tail` print over each file they
/// show when shown several; the path it names.
pub fn section_header(line: &str) -> Option<&str> {
    let path = line.trim().strip_prefix("==> ")?.strip_suffix(" <==")?;
    (!path.is_empty()).then_some(path)
}

/// The lines of a capture's first `==> PATH <==` section, its header
/// included, where one opens the capture.
fn first_section<'l, 'a>(lines: &'l [Cow<'a, str>]) -> Option<&'l [Cow<'a, str>]> {
    let at = lines
        .iter()
        .take(HEADER_WITHIN)
        .position(|l| section_header(l).is_some())?;
    let len = lines[at + 1..]
        .iter()
        .position(|l| section_header(l).is_some())
        .unwrap_or(lines.len() - at - 1);
    Some(&lines[at..at + 1 + len])
}

/// A section is read as the file its header names; a sysfs counter file
/// holds only its value.
fn section_kind(section: &[Cow<'_, str>]) -> Option<TableKind> {
    let (header, body) = section.split_first()?;
    let path = section_header(header)?;
    let one_value = body.len() == 1 && !body[0].trim().contains(char::is_whitespace);
    if one_value && path.contains("/ports/") && path.contains("counters/") {
        return Some(TableKind::SysfsCounters);
    }
    if body.is_empty() {
        return None;
    }
    with_header(body).or_else(|| without_header(body))
}

/// The bytes of the first `n` lines (only those are decoded and looked at).
fn first_lines(head: &[u8], n: usize) -> &[u8] {
    match memchr::memchr_iter(b'\n', head).nth(n.saturating_sub(1)) {
        Some(end) => &head[..end],
        None => head,
    }
}

/// Kinds recognised by a header line, in the order they are tried.
fn with_header(lines: &[Cow<'_, str>]) -> Option<TableKind> {
    const KINDS: &[TableKind] = &[
        TableKind::ShowGids,
        TableKind::Ibstat,
        TableKind::Ibstatus,
        TableKind::IbvDevinfo,
        TableKind::Perfquery,
        TableKind::Mlxlink,
        TableKind::EthtoolStats,
        TableKind::SysfsCounters,
        TableKind::RdmaStatistic,
        TableKind::NvidiaSmi,
        TableKind::Lldp,
        TableKind::Bonding,
    ];
    KINDS.iter().copied().find(|&kind| {
        let header = lines
            .iter()
            .take(HEADER_WITHIN)
            .any(|l| is_header(kind, l.trim_end()));
        header && fits_share(lines, |l| fits(kind, l), FIT_WITH_HEADER)
    })
}

/// Captures whose header was lost (`grep`) or that never had one.
fn without_header(lines: &[Cow<'_, str>]) -> Option<TableKind> {
    if lines.iter().all(|l| {
        l.trim_start().starts_with("[{\"ifname\"")
            || l.trim_start().starts_with('[') && l.contains("\"ifname\"")
    }) && lines[0].contains("\"port\"")
    {
        return Some(TableKind::RdmaStatistic);
    }
    if fits_share(lines, is_ibdev2netdev_row, FIT_WITHOUT_HEADER)
        && lines.iter().any(|l| !is_prompt(l.trim()))
    {
        return Some(TableKind::Ibdev2netdev);
    }
    // Each test checks the share of fitting lines first: a log fails that
    // within a few lines, while the `any` scans read the whole head.
    if fits_share(
        lines,
        |l| fits(TableKind::SysfsCounters, l),
        FIT_WITHOUT_HEADER,
    ) && lines.iter().any(|l| is_sysfs_path_line(l))
    {
        return Some(TableKind::SysfsCounters);
    }
    if lines.len() >= 2
        && fits_share(
            lines,
            |l| is_rdma_stat_line(l) || is_rdma_pair(l),
            FIT_WITHOUT_HEADER,
        )
        && lines.iter().any(|l| is_rdma_stat_line(l))
    {
        return Some(TableKind::RdmaStatistic);
    }
    if lines.len() >= 2
        && fits_share(lines, is_indented_stat, FIT_WITHOUT_HEADER)
        && lines.iter().any(|l| looks_like_ethtool_name(stat_name(l)))
    {
        return Some(TableKind::EthtoolStats);
    }
    if fits_share(
        lines,
        |l| is_gid_line(l) || fits(TableKind::IbvDevinfo, l),
        FIT_WITHOUT_HEADER,
    ) && lines.iter().any(|l| is_gid_line(l))
    {
        return Some(TableKind::IbvDevinfo);
    }
    if lines.len() >= 2
        && fits_share(lines, is_name_value, FIT_WITHOUT_HEADER)
        && lines
            .iter()
            .any(|l| is_name_value(l) && COUNTER_ANCHORS.contains(&stat_name(l)))
    {
        return Some(TableKind::SysfsCounters);
    }
    None
}

fn is_header(kind: TableKind, line: &str) -> bool {
    let t = line.trim_start();
    match kind {
        TableKind::ShowGids => t
            .split_whitespace()
            .take(4)
            .eq(["DEV", "PORT", "INDEX", "GID"]),
        TableKind::Ibstat => t.starts_with("CA '") && t.ends_with('\''),
        TableKind::Ibstatus => t.starts_with("Infiniband device '") && t.ends_with("status:"),
        TableKind::IbvDevinfo => t.starts_with("hca_id:"),
        TableKind::Perfquery => {
            t.starts_with("# Port") && t.contains(" counters: ") && t.contains(" port ")
        }
        TableKind::Mlxlink => matches!(
            t,
            "Operational Info" | "Physical Counters and BER Info" | "Troubleshooting Info"
        ),
        TableKind::EthtoolStats => t == "NIC statistics:",
        TableKind::SysfsCounters => {
            t.starts_with("Port ") && t.ends_with(" counters:") && t.len() < 40
        }
        TableKind::RdmaStatistic => is_rdma_stat_line(t),
        TableKind::NvidiaSmi => {
            t.contains("==NVSMI LOG==") || t.starts_with("| NVIDIA-SMI ") && t.ends_with('|')
        }
        TableKind::Lldp => t == "LLDP neighbors:" || is_lldp_keyvalue(t),
        TableKind::Bonding => {
            t.starts_with("Ethernet Channel Bonding Driver:") || t.starts_with("Bonding Mode:")
        }
        _ => false,
    }
}

/// `lldp.ens12f0np0.chassis.name=leaf-rail3-a` (`lldpcli -f keyvalue`).
fn is_lldp_keyvalue(t: &str) -> bool {
    t.strip_prefix("lldp.")
        .and_then(|rest| rest.split_once('='))
        .is_some_and(|(key, _)| key.contains('.'))
}

/// Whether a line fits a kind's shape (blank lines never reach here).
fn fits(kind: TableKind, line: &str) -> bool {
    let t = line.trim();
    if is_header(kind, line) || is_prompt(t) {
        return true;
    }
    match kind {
        TableKind::ShowGids => {
            t.starts_with("---") || t.starts_with("n_gids_found=") || line.split('\t').count() >= 5
        }
        TableKind::Ibstat => {
            line.starts_with(['\t', ' ']) && t.contains(':') || t.starts_with("ibpanic:")
        }
        TableKind::Ibstatus => line.starts_with(['\t', ' ']) && t.contains(':'),
        TableKind::IbvDevinfo => line.starts_with(['\t', ' ']) && t.contains(':'),
        TableKind::Perfquery => is_dotted_field(t) || t.starts_with("Every "),
        TableKind::Mlxlink => {
            t.contains(" : ")
                || t.bytes().all(|b| b == b'-')
                || t.starts_with("-E-")
                || t.starts_with("-W-")
                || t.starts_with("===")
                || !t.contains(':') && t.split_whitespace().count() <= 6
        }
        TableKind::EthtoolStats => is_indented_stat(line) || is_name_value(t),
        TableKind::SysfsCounters => is_sysfs_path_line(t) || is_name_value(t),
        TableKind::RdmaStatistic => is_rdma_stat_line(t) || is_rdma_pair(line),
        // The table's rows and rules, or `-q`'s `key : value` lines and
        // section titles.
        TableKind::NvidiaSmi => {
            t.starts_with(['|', '+'])
                || t.contains(" : ")
                || !t.contains(':') && t.split_whitespace().count() <= 6
                || t.starts_with("GPU ")
        }
        // Rules of dashes, `Key: value` lines and the section titles
        // (`Chassis:`), or `lldp.<if>.<key>=value`.
        TableKind::Lldp => t.bytes().all(|b| b == b'-') || t.contains(':') || is_lldp_keyvalue(t),
        // `Key: value` lines, `802.3ad info`, and lines naming the file.
        TableKind::Bonding => {
            t.contains(':') || t == "802.3ad info" || t.contains("/proc/net/bonding/")
        }
        _ => false,
    }
}

/// Whether at least the share `min` of `lines` fits `pred`. Gives up as
/// soon as too many misfit: every log file is sniffed, and fails at once.
fn fits_share(lines: &[Cow<'_, str>], pred: impl Fn(&str) -> bool, min: f64) -> bool {
    let allowed_misfits = ((1.0 - min) * lines.len() as f64).floor() as usize;
    let mut misfits = 0;
    for line in lines {
        if !pred(line) {
            misfits += 1;
            if misfits > allowed_misfits {
                return false;
            }
        }
    }
    true
}

/// `mlx5_0 port 1 ==> ib0 (Up)` (`<===>` in the script's old style).
fn is_ibdev2netdev_row(line: &str) -> bool {
    let t = line.trim();
    is_prompt(t) || t.contains(" port ") && (t.contains(" ==> ") || t.contains(" <===> "))
}

/// `$ ibstat`, `[root@node5 ~]# perfquery -x`: a shell prompt in a capture.
fn is_prompt(t: &str) -> bool {
    t.starts_with("$ ") || (t.starts_with('[') && t.contains("]# ")) || t.contains("]$ ")
}

/// `/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0`.
fn is_sysfs_path_line(t: &str) -> bool {
    let Some((path, value)) = t.split_once(':') else {
        return false;
    };
    let in_ib = path.contains("/ports/")
        || path.contains("/counters/")
        || path.contains("/hw_counters/")
        || path.starts_with("counters/")
        || path.starts_with("hw_counters/");
    in_ib && !path.contains(' ') && !value.is_empty()
}

/// `SymbolErrorCounter:..............0`.
fn is_dotted_field(t: &str) -> bool {
    match t.split_once(':') {
        Some((name, rest)) => {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && rest.starts_with("..")
        }
        None => false,
    }
}

/// `GID[  3]:        ::ffff:200.0.209.6, RoCE v2` (ibv_devinfo -v).
fn is_gid_line(t: &str) -> bool {
    let t = t.trim();
    t.starts_with("GID[") && t.contains("]:")
}

/// `link mlx5_0/1 rx_write_requests 0 …` (or a `rdma link` line).
fn is_rdma_stat_line(t: &str) -> bool {
    let mut w = t.split_whitespace();
    w.next() == Some("link")
        && w.next().is_some_and(|dp| {
            dp.rsplit_once('/')
                .is_some_and(|(d, p)| !d.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// An indented `name value` pair of `rdma statistic -p`.
fn is_rdma_pair(line: &str) -> bool {
    if !line.starts_with(char::is_whitespace) {
        return false;
    }
    let mut words = line.split_whitespace();
    let (Some(_), Some(value), None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    value
        .trim_start_matches('-')
        .bytes()
        .all(|b| b.is_ascii_digit())
}

/// `     rx_discards_phy: 0`: ethtool's five-space indent.
fn is_indented_stat(line: &str) -> bool {
    line.starts_with(char::is_whitespace) && is_name_value(line.trim()) && line.contains(": ")
}

/// `name: 123` or `name 123`, integer values only.
fn is_name_value(t: &str) -> bool {
    let t = t.trim();
    let (name, value) = match t.split_once(':') {
        Some((n, v)) => (n, v.trim()),
        None => match t.split_once(' ') {
            Some((n, v)) => (n, v.trim()),
            None => return false,
        },
    };
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_digit())
}

fn stat_name(t: &str) -> &str {
    let t = t.trim();
    t.split([':', ' ']).next().unwrap_or(t)
}

/// mlx5 ethtool names: `_phy` groups, per-queue `rx3_…`, `ch0_…`, prio groups.
fn looks_like_ethtool_name(name: &str) -> bool {
    name.ends_with("_phy")
        || name.contains("prio")
        || name.contains("pause")
        || name.starts_with("ch")
            && name[2..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with('_')
        || name.starts_with("rx_")
        || name.starts_with("tx_")
        || name.starts_with("rx") && name[2..].starts_with(|c: char| c.is_ascii_digit())
        || name.starts_with("tx") && name[2..].starts_with(|c: char| c.is_ascii_digit())
}

fn strip_ansi(line: &str) -> Cow<'_, str> {
    if memchr::memchr(0x1b, line.as_bytes()).is_none() {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
