//! Captures of many dumps in one file: dumps taken one after another, each
//! under the time it was taken (a `date` line, `watch`'s header), or each
//! under the header `head` and `tail` print when shown several files:
//!
//! ```text
//! ==> node005/counters/before/ethtool-S-enp26s0np0.txt <==
//! NIC statistics:
//!      rx_prio3_pause: 17
//!
//! ==> /sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_wait <==
//! 123456
//! ```
//!
//! Each section is read as the file its header names: its kind from its own
//! lines, its device, port, phase and host from the header's path. A sysfs
//! counter file shown this way holds only its value; the header is its name.

use std::borrow::Cow;

use crate::ingest::TableKind;
use crate::ingest::path_hints::hints_from_path;
use crate::ingest::sniff_tables::{content_stamp, section_header, sniff_table};
use crate::model::build::phase_of_path;
use crate::model::{Phase, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx};

/// One header and the lines under it.
struct Section<'l, 'a> {
    path: &'l str,
    lines: &'l [Line<'a>],
}

/// The sections of a capture, or `None` when no line is a section header.
/// Lines before the first header (a prompt, the command) belong to none.
fn split<'l, 'a>(lines: &'l [Line<'a>]) -> Option<Vec<Section<'l, 'a>>> {
    let headers: Vec<(usize, &'l str)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| Some((i, section_header(&l.text)?)))
        .collect();
    if headers.is_empty() {
        return None;
    }
    let ends = headers.iter().skip(1).map(|&(i, _)| i).chain([lines.len()]);
    let sections = headers.iter().zip(ends).map(|(&(at, path), end)| Section {
        path,
        lines: &lines[at + 1..end],
    });
    Some(sections.collect())
}

/// Reads a capture of sections, or returns `None` for a file of one dump.
/// `fallback` is the kind the whole file was taken for.
pub fn parse(
    fallback: TableKind,
    file: &crate::ingest::InputFile,
    lines: &[Line<'_>],
    parse_kind: impl Fn(TableKind, &TableCtx, &[Line<'_>]) -> TableParse,
) -> Option<TableParse> {
    match split(lines) {
        Some(sections) => Some(parse_headed(fallback, file, lines, &sections, parse_kind)),
        None => parse_stamped(fallback, file, lines, parse_kind),
    }
}

/// Dumps taken one after another into one file, each under the time it
/// was taken (`date; perfquery -x; …; date; perfquery -x`, or `watch`
/// screens saved one after another): each section is a dump of its own
/// time, so the earliest and latest of a port pair as before and after.
fn parse_stamped(
    fallback: TableKind,
    file: &crate::ingest::InputFile,
    lines: &[Line<'_>],
    parse_kind: impl Fn(TableKind, &TableCtx, &[Line<'_>]) -> TableParse,
) -> Option<TableParse> {
    let stamps: Vec<usize> = (0..lines.len())
        .filter(|&i| content_stamp(&lines[i].text).is_some())
        .collect();
    if stamps.len() < 2 {
        return None;
    }
    // Lines before the first stamp (a prompt, a command) join the first dump.
    let starts = std::iter::once(0).chain(stamps[1..].iter().copied());
    let ends = stamps[1..].iter().copied().chain([lines.len()]);
    let mut out = TableParse::default();
    for (start, end) in starts.zip(ends) {
        let section = &lines[start..end];
        let kind = sniff_table(text_of(section).as_bytes()).unwrap_or(fallback);
        // The host comes from the whole capture (its prompt opens it).
        let mut ctx = TableCtx::new(file, lines);
        ctx.taken_at = section.iter().find_map(|l| content_stamp(&l.text));
        merge(&mut out, parse_kind(kind, &ctx, section), Phase::Unknown);
    }
    Some(out)
}

fn parse_headed(
    fallback: TableKind,
    file: &crate::ingest::InputFile,
    lines: &[Line<'_>],
    sections: &[Section<'_, '_>],
    parse_kind: impl Fn(TableKind, &TableCtx, &[Line<'_>]) -> TableParse,
) -> TableParse {
    let mut out = TableParse::default();
    let mut values: Vec<Line<'_>> = Vec::new();
    let mut values_path = "";
    for s in sections {
        if let Some(line) = sysfs_value(s) {
            values_path = s.path;
            values.push(line);
            continue;
        }
        let kind = sniff_table(text_of(s.lines).as_bytes()).unwrap_or(fallback);
        let ctx = TableCtx::section(file, lines, s.path, hints_from_path(s.path).host);
        merge(
            &mut out,
            parse_kind(kind, &ctx, s.lines),
            phase_of_path(s.path),
        );
    }
    if !values.is_empty() {
        let host = hints_from_path(values_path).host;
        let ctx = TableCtx::section(file, lines, values_path, host);
        let read = parse_kind(TableKind::SysfsCounters, &ctx, &values);
        merge(&mut out, read, Phase::Unknown);
    }
    out
}

/// `==> /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error <==`
/// over one number: the line `grep ""` would have printed for it, cited
/// at the number.
fn sysfs_value<'a>(s: &Section<'_, 'a>) -> Option<Line<'a>> {
    let is_sysfs = s.path.contains("/ports/") && s.path.contains("counters/");
    let mut body = s.lines.iter().filter(|l| !l.text.trim().is_empty());
    let value = body.next()?;
    if !is_sysfs || body.next().is_some() || value.text.trim().contains(char::is_whitespace) {
        return None;
    }
    Some(Line {
        no: value.no,
        raw: value.raw.clone(),
        text: Cow::Owned(format!("{}:{}", s.path, value.text.trim())),
    })
}

fn text_of(lines: &[Line<'_>]) -> String {
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.text);
        text.push('\n');
    }
    text
}

/// Adds one section's records, giving its counters the phase its header
/// names where they have none of their own.
fn merge(out: &mut TableParse, mut read: TableParse, phase: Phase) {
    for r in &mut read.records {
        if let SysRecord::Counter(c) = r
            && c.phase == Phase::Unknown
        {
            c.phase = phase;
        }
    }
    out.records.append(&mut read.records);
    out.unparsed += read.unparsed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tables::testing::{counters, parse_text};

    /// `tail -n +1 */counters/*/ethtool-S-*` over two hosts' folders.
    const TAIL: &str = "\
==> node005/counters/before/ethtool-S-enp26s0np0.txt <==
NIC statistics:
     rx_prio3_pause: 17

==> node005/counters/after/ethtool-S-enp26s0np0.txt <==
NIC statistics:
     rx_prio3_pause: 90017

==> node006/counters/after/rdma-statistic.txt <==
link mlx5_0/1 rx_write_requests 0 local_ack_timeout_err 12
";

    #[test]
    fn each_tail_section_is_read_as_the_file_its_header_names() {
        let t = parse_text(TableKind::EthtoolStats, "all-counters.txt", TAIL);
        let c = counters(&t);
        let pause: Vec<_> = c.iter().filter(|c| c.name == "rx_prio3_pause").collect();
        assert_eq!(pause.len(), 2);
        assert_eq!(pause[0].phase, Phase::Before);
        assert_eq!(pause[1].phase, Phase::After);
        assert_eq!(pause[1].device, "enp26s0np0");
        assert_eq!(pause[1].host.as_deref(), Some("node005"));
        assert_eq!(pause[1].origin.line, 7, "cited where the capture holds it");
        let ack = c
            .iter()
            .find(|c| c.name == "local_ack_timeout_err")
            .unwrap();
        assert_eq!((ack.device.as_str(), ack.port), ("mlx5_0", Some(1)));
        assert_eq!(ack.host.as_deref(), Some("node006"));
        assert_eq!(ack.phase, Phase::After);
    }

    #[test]
    fn head_of_sysfs_counter_files_reads_each_header_as_the_counter() {
        let text = "\
==> /sys/class/infiniband/mlx5_3/ports/1/counters/link_downed <==
4

==> /sys/class/infiniband/mlx5_3/ports/1/hw_counters/local_ack_timeout_err <==
311
";
        let t = parse_text(TableKind::SysfsCounters, "node007/before.txt", text);
        let c = counters(&t);
        assert_eq!(c.len(), 2, "{t:?}");
        assert_eq!((c[0].name.as_str(), c[0].value), ("link_downed", 4));
        assert_eq!((c[0].device.as_str(), c[0].port), ("mlx5_3", Some(1)));
        assert_eq!(c[0].origin.line, 2);
        assert_eq!(
            (c[1].name.as_str(), c[1].value),
            ("local_ack_timeout_err", 311)
        );
        assert_eq!(c[1].host.as_deref(), Some("node007"));
    }
}

#[cfg(test)]
mod stamped_tests {
    use super::*;
    use crate::parse::tables::testing::{counters, parse_text};

    #[test]
    fn each_dated_dump_in_one_file_keeps_its_own_time() {
        let text = "\
[root@node005 ~]# for i in 1 2; do date -Iseconds; rdma statistic; sleep 5400; done
2026-12-01T08:00:00+00:00
link mlx5_0/1 local_ack_timeout_err 0 out_of_sequence 0
2026-12-01T09:30:00+00:00
link mlx5_0/1 local_ack_timeout_err 12 out_of_sequence 3
";
        let t = parse_text(TableKind::RdmaStatistic, "x/rdma.txt", text);
        let c = counters(&t);
        let acks: Vec<_> = c
            .iter()
            .filter(|c| c.name == "local_ack_timeout_err")
            .collect();
        assert_eq!(acks.len(), 2, "{t:?}");
        let at = |i: usize| acks[i].taken_at.map(|t| t.get());
        assert_eq!((at(0), at(1)), (Some(20261201080000), Some(20261201093000)));
        assert_eq!((acks[1].value, acks[1].origin.line), (12, 5));
        assert_eq!(
            acks[1].host.as_deref(),
            Some("node005"),
            "the prompt names the host"
        );
    }
}
