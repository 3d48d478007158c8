//! Deciding what a file holds from its first bytes, not its name.

use std::collections::BTreeMap;

use super::launcher::{LauncherStyle, digits, pdsh_candidate};
use super::lines::line_spans;

/// How many bytes of a file's (decompressed) head the sniffer reads.
pub const SNIFF_BYTES: usize = 64 * 1024;
const SNIFF_LINES: usize = 400;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Line-oriented text: application, launcher or kernel log.
    Log,
    /// A table or dump read as a whole (counters, snapshots, Flight Recorder).
    Table(TableKind),
    Empty,
    /// Not text; `why` says what it looks like.
    Binary {
        why: &'static str,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProfile {
    pub kind: FileKind,
    pub launcher: LauncherStyle,
}

impl FileProfile {
    pub fn plain_log() -> FileProfile {
        FileProfile {
            kind: FileKind::Log,
            launcher: LauncherStyle::default(),
        }
    }
}

/// Files read as a whole by `parse::tables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// sysfs `counters/` / `hw_counters/`, as `path:value` or `name value`.
    SysfsCounters,
    Perfquery,
    EthtoolStats,
    RdmaStatistic,
    Ibstat,
    Ibstatus,
    IbvDevinfo,
    ShowGids,
    Mlxlink,
    /// mlnx-tools `ibdev2netdev` (`mlx5_0 port 1 ==> ib0 (Up)`).
    Ibdev2netdev,
    /// `nvidia-smi`, its table or `-q`.
    NvidiaSmi,
    /// lldpd's `lldpcli show neighbors` (plain, `-f keyvalue` or `-f json`).
    Lldp,
    /// The bonding driver's `/proc/net/bonding/<bond>`.
    Bonding,
    /// PyTorch Flight Recorder dump (pickle, the default).
    FlightRecorderPickle,
    /// Flight Recorder dump in its JSON form.
    FlightRecorderJson,
}

impl TableKind {
    /// The text tables (every kind but the Flight Recorder dumps).
    pub const TEXT: [TableKind; 13] = [
        TableKind::SysfsCounters,
        TableKind::Perfquery,
        TableKind::EthtoolStats,
        TableKind::RdmaStatistic,
        TableKind::Ibstat,
        TableKind::Ibstatus,
        TableKind::IbvDevinfo,
        TableKind::ShowGids,
        TableKind::Mlxlink,
        TableKind::Ibdev2netdev,
        TableKind::NvidiaSmi,
        TableKind::Lldp,
        TableKind::Bonding,
    ];
}

/// Sniffs a file from its head.
pub fn sniff(head: &[u8]) -> FileProfile {
    let kind = sniff_kind(head);
    let launcher = if kind == FileKind::Log {
        sniff_launcher(head)
    } else {
        LauncherStyle::default()
    };
    FileProfile { kind, launcher }
}

fn sniff_kind(head: &[u8]) -> FileKind {
    if head.iter().all(u8::is_ascii_whitespace) {
        return FileKind::Empty;
    }
    // Pickle protocol 2+ starts with PROTO: what torch's Flight Recorder writes.
    if head.first() == Some(&0x80) && matches!(head.get(1), Some(2..=5)) {
        return FileKind::Table(TableKind::FlightRecorderPickle);
    }
    if head.starts_with(b"PK\x03\x04") {
        return FileKind::Binary {
            why: "zip archive, not yet read",
        };
    }
    if is_json_document(head) {
        return if looks_like_flight_recorder_json(head) {
            FileKind::Table(TableKind::FlightRecorderJson)
        } else if looks_like_lldp_json(head) {
            FileKind::Table(TableKind::Lldp)
        } else {
            FileKind::Binary {
                why: "a JSON document, not a log",
            }
        };
    }
    // A writer that crashed can leave a run of NULs at the end of a text
    // file (preallocated, never written): they do not make it binary.
    let sample = &head[..head.len().min(8192)];
    let end = sample.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    if end == 0 {
        return FileKind::Binary {
            why: "only NUL bytes",
        };
    }
    let sample = &sample[..end];
    // Crashed writers leave runs of NULs at the end of a text file; a file is
    // binary only when NULs or control bytes are common from its very start.
    let is_odd = |b: &&u8| **b < 0x20 && !matches!(**b, b'\n' | b'\r' | b'\t' | 0x1b | 0x0c);
    // The plain count vectorises; the exact one runs only when it matters.
    let binary = count_controls(sample) * 10 > sample.len()
        && sample.iter().filter(is_odd).count() * 10 > sample.len();
    if binary {
        return FileKind::Binary {
            why: "binary content (many NUL or control bytes)",
        };
    }
    if let Some(table) = super::sniff_tables::sniff_table(head) {
        return FileKind::Table(table);
    }
    FileKind::Log
}

/// A JSON document (metadata, configs, error files): the head is one JSON
/// value, complete or cut off by the head's end. JSON Lines (one object per
/// line) and lines that merely start with `[` (`[rank0]:`, `[1,0]<stdout>:`)
/// are logs.
fn is_json_document(head: &[u8]) -> bool {
    use serde::de::IgnoredAny;
    let text = head.trim_ascii_start();
    if !matches!(text.first(), Some(b'{' | b'[')) {
        return false;
    }
    let mut values = serde_json::Deserializer::from_slice(text).into_iter::<IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => text[values.byte_offset()..].trim_ascii().is_empty(),
        Some(Err(e)) => e.is_eof(),
        None => false,
    }
}

/// The JSON form of a Flight Recorder dump names its entries and group status.
fn looks_like_flight_recorder_json(head: &[u8]) -> bool {
    let has = |key: &[u8]| memchr::memmem::find(head, key).is_some();
    has(b"\"entries\"")
        && (has(b"\"pg_status\"") || has(b"\"pg_config\"") || has(b"\"profiling_name\""))
}

/// `lldpcli -f json show neighbors`: one `lldp` object holding `interface`.
fn looks_like_lldp_json(head: &[u8]) -> bool {
    let text = head.trim_ascii_start();
    let opening = &text[..text.len().min(64)];
    memchr::memmem::find(opening, b"\"lldp\"").is_some()
        && memchr::memmem::find(head, b"\"interface\"").is_some()
}

/// Finds launcher prefixes that cannot be recognised line by line (Slurm
/// labels, pdsh hosts, MPICH ranks): each must start most lines of the head.
fn sniff_launcher(head: &[u8]) -> LauncherStyle {
    let mut total = 0usize;
    let (mut slurm, mut mpich) = (0usize, 0usize);
    let mut pdsh: BTreeMap<&[u8], usize> = BTreeMap::new();
    for line in line_spans(head).map(|span| &head[span]).take(SNIFF_LINES) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        total += 1;
        slurm += usize::from(is_slurm_label(line));
        mpich += usize::from(is_mpich_rank(line));
        if let Some(host) = pdsh_candidate(line) {
            *pdsh.entry(host).or_default() += 1;
        }
    }
    let most = |n: usize| total >= 2 && n * 2 > total;
    let pdsh_lines: usize = pdsh.values().filter(|&&n| n >= 2).sum();
    let pdsh_hosts = if most(pdsh_lines) && pdsh.len() <= 4096 {
        pdsh.into_iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(h, _)| h.to_vec())
            .collect()
    } else {
        Vec::new()
    };
    LauncherStyle {
        slurm_label: most(slurm),
        mpich_rank: most(mpich),
        pdsh_hosts,
    }
}

/// Bytes below 0x20, counted in byte-wide lanes (a count of bytes that
/// matched is at most 255 per block, so the compiler can use vector adds).
fn count_controls(s: &[u8]) -> usize {
    s.chunks(255)
        .map(|block| usize::from(block.iter().fold(0u8, |n, &b| n + u8::from(b < 0x20))))
        .sum()
}

fn is_slurm_label(line: &[u8]) -> bool {
    let spaces = line.iter().take_while(|b| **b == b' ').count();
    match digits(&line[spaces..]) {
        Some((_, n)) => matches!(&line[spaces + n..], [b':', b' ', ..] | [b':']),
        None => false,
    }
}

fn is_mpich_rank(line: &[u8]) -> bool {
    line.first() == Some(&b'[')
        && digits(&line[1..]).is_some_and(|(_, n)| line[1 + n..].starts_with(b"] "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_label_files_are_recognised() {
        let head = b" 0: hello\n 1: world\n10: again\n";
        assert!(sniff(head).launcher.slurm_label);
        assert!(!sniff(b"plain\ntext\n").launcher.slurm_label);
    }

    #[test]
    fn pdsh_hosts_are_collected_but_exception_names_are_not() {
        let head = b"worker-0: a\nworker-1: b\nworker-0: c\nworker-1: d\nRuntimeError: x\n";
        let style = sniff(head).launcher;
        assert_eq!(
            style.pdsh_hosts,
            vec![b"worker-0".to_vec(), b"worker-1".to_vec()]
        );
    }

    /// A short `srun --label` job output read whole as the head: its srun
    /// and slurmstepd lines must keep their program names, which the
    /// task-exit and cancel patterns read (Slurm 17+).
    #[test]
    fn a_slurm_labelled_output_has_no_pdsh_hosts_slurm_23() {
        let head = b"0: NCCL version 2.21.5+cuda12.4\n1: NCCL version 2.21.5+cuda12.4\n\
                     0: step 10/685\n1: step 10/685\n0: step 20/685\n1: step 20/685\n\
                     0: step 30/685\n1: step 30/685\n\
                     srun: error: dgx003: tasks 4-5,7: Aborted (core dumped)\n\
                     srun: error: dgx002: tasks 0-3: Aborted (core dumped)\n\
                     slurmstepd: error: *** STEP 1.0 ON dgx002 CANCELLED AT 2024-05-18T15:03:37 ***\n\
                     slurmstepd: error: *** JOB 1 ON dgx002 CANCELLED AT 2024-05-18T15:03:37 ***\n\
                     srun: error: dgx003: task 6: Terminated\n";
        let style = sniff(head).launcher;
        assert!(style.slurm_label);
        assert!(style.pdsh_hosts.is_empty(), "{:?}", style.pdsh_hosts);
    }

    #[test]
    fn json_documents_are_not_logs_but_json_lines_are() {
        assert!(matches!(
            sniff(b"{\n  \"source\": \"x\"\n}\n").kind,
            FileKind::Binary { .. }
        ));
        assert!(matches!(sniff(b"[1, 2]").kind, FileKind::Binary { .. }));
        assert_eq!(
            sniff(b"{\"msg\": \"a\"}\n{\"msg\": \"b\"}\n").kind,
            FileKind::Log
        );
        assert_eq!(
            sniff(b"[1,0]<stdout>:hello\n[1,1]<stdout>:x\n").kind,
            FileKind::Log
        );
        assert_eq!(
            sniff(b"[E ProcessGroupNCCL.cpp:475] x\n").kind,
            FileKind::Log
        );
        assert!(matches!(
            sniff(b"{\n  \"a\": [1, 2,").kind,
            FileKind::Binary { .. }
        ));
    }

    #[test]
    fn lldpcli_json_is_a_table() {
        let head =
            b"{\n  \"lldp\": {\n    \"interface\": {\"eth0\": {\"via\": \"LLDP\"}}\n  }\n}\n";
        assert_eq!(sniff(head).kind, FileKind::Table(TableKind::Lldp));
    }

    #[test]
    fn control_bytes_are_counted_across_blocks_without_overflow() {
        let all: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let naive = all.iter().filter(|&&b| b < 0x20).count();
        assert_eq!(count_controls(&all), naive);
        assert_eq!(count_controls(&[0u8; 1000]), 1000);
        assert_eq!(count_controls(b""), 0);
    }

    #[test]
    fn binary_and_empty_files() {
        assert_eq!(sniff(b"\n \n").kind, FileKind::Empty);
        assert!(matches!(sniff(&[0u8; 100]).kind, FileKind::Binary { .. }));
        assert_eq!(
            sniff(b"\x80\x02}q\x00").kind,
            FileKind::Table(TableKind::FlightRecorderPickle)
        );
        let mut text = b"line\n".repeat(100);
        text.extend([0u8; 20]);
        assert_eq!(sniff(&text).kind, FileKind::Log);
    }
}
