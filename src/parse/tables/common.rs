//! What every table parser shares: numbered lines with ANSI colours stripped,
//! the file's host and time, and building records that cite their line.

use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::LazyLock;

use regex::Regex;

use crate::ingest::InputFile;
pub use crate::ingest::sniff_tables::content_stamp;
use crate::model::build::short_host_of;
use crate::model::{
    CounterReading, CounterSource, FileId, Origin, Phase, SourceLine, Sym, SysRecord,
};

/// One line of a table file.
#[derive(Debug, Clone)]
pub struct Line<'a> {
    /// 1-based line number.
    pub no: u64,
    /// The line as written (lossy UTF-8, without its `\r`): what a citation shows.
    pub raw: Cow<'a, str>,
    /// The line with terminal colour codes removed: what the parsers read.
    pub text: Cow<'a, str>,
}

/// Splits a file into numbered lines (a counter dump has thousands: a
/// line copies nothing unless it is not UTF-8 or holds colour codes).
pub fn lines(data: &[u8]) -> Vec<Line<'_>> {
    let mut out = Vec::with_capacity(memchr::memchr_iter(b'\n', data).count() + 1);
    let mut start = 0;
    loop {
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |p| start + p);
        let l = &data[start..end];
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let raw = String::from_utf8_lossy(l);
        let text = match &raw {
            Cow::Borrowed(s) => strip_ansi(s),
            Cow::Owned(s) => Cow::Owned(strip_ansi(s).into_owned()),
        };
        out.push(Line {
            no: out.len() as u64 + 1,
            raw,
            text,
        });
        if end == data.len() {
            return out;
        }
        start = end + 1;
    }
}

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]").unwrap());

/// Removes ANSI colour / cursor codes (terminal captures of mlxlink have them).
pub fn strip_ansi(s: &str) -> Cow<'_, str> {
    if s.contains('\x1b') {
        ANSI.replace_all(s, "")
    } else {
        Cow::Borrowed(s)
    }
}

/// The file a parser reads, and what its path and content say about it.
#[derive(Debug, Clone)]
pub struct TableCtx {
    pub file: FileId,
    pub host: Option<String>,
    /// The file's path relative to the job root.
    pub path: String,
    /// When the dump was taken, where the content says (`watch`, `date`).
    pub taken_at: Option<u64>,
    /// The file can be opened again by its path (not an archive member):
    /// counter readings then keep no text, the report re-reads the few it
    /// cites (a 16k-rank job holds millions of readings).
    pub rereadable: bool,
    /// One shared copy of each device and counter name the file repeats.
    syms: RefCell<FxHashMap<Box<str>, Sym>>,
    host_sym: Option<Sym>,
}

impl TableCtx {
    pub fn new(file: &InputFile, lines: &[Line<'_>]) -> TableCtx {
        let host = file
            .hints
            .host
            .clone()
            .or_else(|| lines.iter().take(8).find_map(|l| host_in_prompt(&l.text)))
            .or_else(|| host_in_file_name(&file.display))
            .map(|h| short_host_of(&h));
        TableCtx {
            file: file.id,
            host_sym: host.as_deref().map(Sym::new),
            syms: RefCell::default(),
            host,
            path: file.display.clone(),
            taken_at: lines.iter().take(8).find_map(|l| content_stamp(&l.text)),
            rereadable: !crate::parse::archive::is_member(&file.display),
        }
    }

    /// The context of one section of a capture of many (`==> PATH <==`):
    /// its device and phase come from `path`; its host from the folder the
    /// path names, else from the file.
    pub fn section(
        file: &InputFile,
        lines: &[Line<'_>],
        path: &str,
        path_host: Option<String>,
    ) -> TableCtx {
        let mut ctx = TableCtx::new(file, lines);
        let named = path_host.or_else(|| host_in_file_name(path));
        if file.hints.host.is_none()
            && let Some(host) = named
        {
            ctx.host = Some(short_host_of(&host));
            ctx.host_sym = ctx.host.as_deref().map(Sym::new);
        }
        ctx.path = path.to_string();
        ctx
    }

    pub fn origin(&self, line: &Line<'_>) -> Origin {
        Origin {
            file: self.file,
            line: line.no,
        }
    }

    /// Where `line` is, and its text unless the file can be re-read (the
    /// report reads the few cited lines again; a 16k-rank job's snapshots
    /// hold a quarter of a million).
    pub fn source_line(&self, line: &Line<'_>) -> SourceLine {
        SourceLine {
            origin: self.origin(line),
            text: if self.rereadable {
                Box::default()
            } else {
                line.raw.trim_end().into()
            },
        }
    }

    /// A counter reading cited at `line`.
    pub fn counter(&self, at: CounterAt<'_>, value: u64, line: &Line<'_>) -> SysRecord {
        SysRecord::Counter(CounterReading {
            host: self.host_sym.clone(),
            device: self.sym(at.device),
            port: at.port,
            name: self.sym(at.name),
            value,
            source: at.source,
            phase: Phase::Unknown,
            width_bits: at.width_bits,
            taken_at: self.taken_at.and_then(NonZeroU64::new),
            origin: self.origin(line),
            text: (!self.rereadable).then(|| Sym::new(line.raw.trim_end())),
        })
    }

    /// The file's shared copy of `name`.
    fn sym(&self, name: &str) -> Sym {
        let mut syms = self.syms.borrow_mut();
        if let Some(s) = syms.get(name) {
            return s.clone();
        }
        let s = Sym::new(name);
        syms.insert(name.into(), s.clone());
        s
    }

    /// The HCA named by the path (`…/mlx5_3/…`, `show_counters_mlx5_0.txt`).
    pub fn device_in_path(&self) -> Option<String> {
        HCA_IN_PATH
            .captures_iter(&self.path)
            .last()
            .map(|c| c["d"].to_string())
    }
}

/// Where a counter belongs and how it behaves.
#[derive(Debug, Clone, Copy)]
pub struct CounterAt<'a> {
    pub device: &'a str,
    pub port: Option<u32>,
    pub name: &'a str,
    pub source: CounterSource,
    pub width_bits: Option<u8>,
}

/// Used when no device is named anywhere.
pub const UNKNOWN_DEVICE: &str = "?";

static HCA_IN_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^A-Za-z0-9])(?P<d>mlx[45]_(?:bond_)?\d+|irdma\d+|bnxt_re\d+)(?:[^0-9]|$)")
        .unwrap()
});

/// RDMA device names as the kernel and rdma-core give them (mlx4/mlx5,
/// Broadcom, Intel, Omni-Path, QLogic, Alibaba eRDMA, predictable names).
static RDMA_DEVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w])(?P<d>mlx[45]_\d+|bnxt_re\d+|irdma\d+|hfi1_\d+|qedr\d+|erdma_\d+|rocep\d+s\d+f\d+)(?:[^\w]|$)")
        .expect("valid")
});

/// The one RDMA device a line names, as a collection script's title over a
/// device's dump does (`== mlx5_1`, `### enp188s0np0 (mlx5_6)`); none where
/// it names none or two.
pub fn one_rdma_device_in(text: &str) -> Option<String> {
    let mut found = RDMA_DEVICE.captures_iter(text).map(|c| c["d"].to_string());
    let first = found.next()?;
    found.all(|d| d == first).then_some(first)
}

static PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[?[A-Za-z0-9_.-]+@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)[ :\]][^#$]*[#$] ").unwrap()
});

/// `[root@node005 ~]# ibstat` / `user@node005:~$ …`: the host of a capture.
pub fn host_in_prompt(line: &str) -> Option<String> {
    PROMPT.captures(line).map(|c| c["host"].to_string())
}

static NAME_HOST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z][a-z-]*[a-z]-?\d+$").unwrap());
static NOT_HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:mlx\d*|mt\d+|ib\d+|eth\d+|en[a-z]*\d+|port\d*|hca\d*|bond\d*|rank\d+|run\d+|job\d+|step\d+|attempt\d+|node|v\d+|counters?\d*|perfquery\d*|ethtool\d*|ibstat\d*|ibstatus\d*|mlxlink\d*|gids?\d*|dump\d*|snap\d*|pci\w*)$")
        .unwrap()
});

/// `ibstat_node005.txt`, `node005.ethtool`: a host-like word in the file name.
fn host_in_file_name(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    name.split(['.', '_', ' '])
        .find(|w| NAME_HOST.is_match(w) && !NOT_HOST.is_match(w))
        .map(str::to_string)
}

/// `key: value` split at the first `:` (values may hold colons).
pub fn key_value(text: &str) -> Option<(&str, &str)> {
    let (k, v) = text.split_once(':')?;
    Some((k.trim(), v.trim()))
}

/// A counter value: decimal, or `0x` hex.
pub fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// The leading number of `400 Gb/sec (4X NDR)`, `56 (FDR10)`, `2.5`.
pub fn leading_f64(text: &str) -> Option<f64> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text[..end].parse().ok().filter(|v: &f64| v.is_finite())
}

/// Port states as one vocabulary: `Active`, `Down`, `Initializing`, `Armed`.
pub fn normalize_state(text: &str) -> String {
    let t = text.trim();
    // `4: ACTIVE`, `PORT_ACTIVE (4)`, `ACTIVE`
    let word = t
        .split_once(": ")
        .map_or(t, |(_, w)| w)
        .split(" (")
        .next()
        .unwrap_or(t)
        .trim_start_matches("PORT_");
    match word.to_ascii_uppercase().as_str() {
        "ACTIVE" | "ACTIVE_DEFER" => "Active".into(),
        "DOWN" => "Down".into(),
        "INIT" | "INITIALIZING" | "INITIALIZE" => "Initializing".into(),
        "ARMED" => "Armed".into(),
        "NOP" => "Nop".into(),
        _ => word.to_string(),
    }
}

/// Physical states as ibstat prints them: `LinkUp`, `Disabled`, `Polling`, …
pub fn normalize_phys_state(text: &str) -> String {
    let t = text.trim();
    let word = t
        .split_once(": ")
        .map_or(t, |(_, w)| w)
        .split(" (")
        .next()
        .unwrap_or(t);
    match word.to_ascii_uppercase().replace(['_', ' '], "").as_str() {
        "LINKUP" => "LinkUp".into(),
        "DISABLED" => "Disabled".into(),
        "POLLING" => "Polling".into(),
        "SLEEP" => "Sleep".into(),
        "PORTCONFIGURATIONTRAINING" => "PortConfigurationTraining".into(),
        "LINKERRORRECOVERY" => "LinkErrorRecovery".into(),
        "PHYTEST" => "PhyTest".into(),
        _ => word.to_string(),
    }
}

/// Down or disabled ports report a placeholder rate.
pub fn rate_is_placeholder(state: Option<&str>, phys: Option<&str>) -> bool {
    state.is_some_and(|s| s != "Active" && s != "Armed" && s != "Initializing")
        || phys.is_some_and(|p| matches!(p, "Disabled" | "Polling" | "Sleep"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_and_numbered_as_split_on_newlines_would() {
        let inputs: [&[u8]; 6] = [
            b"",
            b"a",
            b"a\r\nb\n",
            b"\n\nx\n",
            b"bad \xff byte\n\x1b[1mbold\x1b[0m\n",
            b"\xff\x1b[1m\n",
        ];
        for data in inputs {
            let want: Vec<(u64, String, String)> = data
                .split(|&b| b == b'\n')
                .enumerate()
                .map(|(i, l)| {
                    let l = l.strip_suffix(b"\r").unwrap_or(l);
                    let raw = String::from_utf8_lossy(l).into_owned();
                    let text = strip_ansi(&raw).into_owned();
                    (i as u64 + 1, raw, text)
                })
                .collect();
            let got: Vec<(u64, String, String)> = lines(data)
                .into_iter()
                .map(|l| (l.no, l.raw.into_owned(), l.text.into_owned()))
                .collect();
            assert_eq!(got, want, "{data:?}");
        }
    }

    #[test]
    fn ansi_codes_are_stripped() {
        assert_eq!(strip_ansi("a \x1b[32m15E-255\x1b[0m b"), "a 15E-255 b");
    }

    #[test]
    fn hosts_from_prompts_and_names() {
        assert_eq!(
            host_in_prompt("[root@node005 ~]# ibstat"),
            Some("node005".into())
        );
        assert_eq!(
            host_in_prompt("alice@gpu-12:~$ perfquery -x"),
            Some("gpu-12".into())
        );
        assert_eq!(host_in_prompt("State: Active"), None);
        assert_eq!(
            host_in_file_name("x/ibstat_node005.txt"),
            Some("node005".into())
        );
        assert_eq!(host_in_file_name("x/mlx5_0.txt"), None);
        assert_eq!(host_in_file_name("x/ethtool-S.txt"), None);
    }

    #[test]
    fn states_are_normalised() {
        assert_eq!(normalize_state("4: ACTIVE"), "Active");
        assert_eq!(normalize_state("PORT_ACTIVE (4)"), "Active");
        assert_eq!(normalize_state("1: DOWN"), "Down");
        assert_eq!(normalize_state("Initializing"), "Initializing");
        assert_eq!(normalize_phys_state("5: LinkUp"), "LinkUp");
        assert_eq!(normalize_phys_state("LINK_UP (5)"), "LinkUp");
    }

    #[test]
    fn watch_header_gives_a_stamp() {
        let l = "Every 1.0s: perfquery -l 7 1          Wed Nov  5 11:32:44 2014";
        assert_eq!(content_stamp(l), Some(20141105113244));
    }
}
