//! Accelerators for NCCL's own lines: channel connections (nine lines in
//! ten of a large job) and what every rank prints once per communicator.

use std::ops::Range;

use super::reader::Reader;
use super::{Spans, is_space, is_word};
use crate::model::FieldList;
use crate::model::FieldRef::{Int, Text};

/// `Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared` (and the
/// `Ring` form of NCCL ≤ 2.6), anchored at the start of the message: the
/// regex of `nccl.channel` in grammars/nccl.toml, read left to right.
pub(super) fn channel<'a>(body: &'a [u8], fields: &mut FieldList<'a>) -> bool {
    read_channel(body, fields).is_some() && fields.complete()
}

fn read_channel<'a>(body: &'a [u8], fields: &mut FieldList<'a>) -> Option<()> {
    let mut r = Reader::new(body);
    if !(r.eat(b"Channel ") || r.eat(b"Ring ")) {
        return None;
    }
    let (channel, channel_at) = r.int_at()?;
    let conn = if r.eat(b"/") { Some(r.int_at()?) } else { None };
    r.expect(b" : ")?;
    let (src, src_at) = r.int_at()?;
    let (src_dev, src_dev_at) = r.bracketed_hex()?;
    r.expect(b" -> ")?;
    let (dst, dst_at) = r.int_at()?;
    let (dst_dev, dst_dev_at) = r.bracketed_hex()?;
    r.expect(b" ")?;
    let dir = if r.eat(b"[send] ") {
        Some("send")
    } else if r.eat(b"[receive] ") {
        Some("receive")
    } else {
        None
    };
    r.expect(b"via ")?;
    let transport = r.transport()?;
    let suffix = r.transport_suffix()?;
    // `NET/IB/3(19)`: PXN, rank 19's proxy drives the NIC for this rank.
    let proxy = match suffix {
        Suffix::NetDev(_) => r.proxy_rank(),
        _ => None,
    };
    // `NET/IB/0/GDRDMA`: the NIC reads or writes GPU memory directly.
    let gdr = matches!(suffix, Suffix::NetDev(_)) && r.rest().starts_with(b"/GDRDMA");
    // Pushed in name order, as `Fields` keeps them.
    fields.push(slot::CHANNEL, Int(channel));
    fields.note_digits(slot::CHANNEL, channel_at);
    if let Some((conn, conn_at)) = conn {
        fields.push(slot::CONN, Int(conn));
        fields.note_digits(slot::CONN, conn_at);
    }
    if let Suffix::Detail(d) = suffix {
        fields.push(slot::DETAIL, Text(d));
    }
    if let Some(dir) = dir {
        fields.push(slot::DIR, Text(dir));
    }
    fields.push(slot::DST, Int(dst));
    fields.note_digits(slot::DST, dst_at);
    fields.push(slot::DST_DEV, Text(dst_dev));
    fields.note_digits(slot::DST_DEV, dst_dev_at);
    if gdr {
        fields.push(slot::GDR, Text("GDRDMA"));
    }
    if let Suffix::NetDev(dev) = suffix {
        fields.push(slot::NET_DEV, Int(dev));
    }
    if let Some(proxy) = proxy {
        fields.push(slot::PROXY, Int(proxy));
    }
    fields.push(slot::SRC, Int(src));
    fields.note_digits(slot::SRC, src_at);
    fields.push(slot::SRC_DEV, Text(src_dev));
    fields.note_digits(slot::SRC_DEV, src_dev_at);
    fields.push(slot::TRANSPORT, Text(transport));
    Some(())
}

/// The fields a channel line can have, sorted (the regex's named groups).
pub(super) const CHANNEL_FIELDS: &[&str] = &[
    "channel",
    "conn",
    "detail",
    "dir",
    "dst",
    "dst_dev",
    "gdr",
    "net_dev",
    "proxy",
    "src",
    "src_dev",
    "transport",
];

/// Each channel field's slot in [`CHANNEL_FIELDS`].
mod slot {
    pub const CHANNEL: u8 = 0;
    pub const CONN: u8 = 1;
    pub const DETAIL: u8 = 2;
    pub const DIR: u8 = 3;
    pub const DST: u8 = 4;
    pub const DST_DEV: u8 = 5;
    pub const GDR: u8 = 6;
    pub const NET_DEV: u8 = 7;
    pub const PROXY: u8 = 8;
    pub const SRC: u8 = 9;
    pub const SRC_DEV: u8 = 10;
    pub const TRANSPORT: u8 = 11;
}

enum Suffix<'a> {
    None,
    NetDev(i64),
    Detail(&'a str),
}

/// The channel line's own parts.
impl<'a> Reader<'a> {
    /// `\[([0-9a-fA-F]+)\]`, and where the digits lie.
    fn bracketed_hex(&mut self) -> Option<(&'a str, Range<usize>)> {
        self.expect(b"[")?;
        let start = self.at;
        let hex = self.run(|b| b.is_ascii_hexdigit())?;
        self.expect(b"]")?;
        (!hex.is_empty()).then_some((hex, start..start + hex.len()))
    }

    /// `NET/[^/\s]+|P2P|SHM|COLLNET\w*`, first alternative first.
    fn transport(&mut self) -> Option<&'a str> {
        let start = self.at;
        if self.eat(b"NET/") {
            let name = self.run(|b| b != b'/' && !is_space(b))?;
            if !name.is_empty() {
                return self.str_at(start..self.at);
            }
            self.at = start;
        }
        if self.eat(b"P2P") || self.eat(b"SHM") {
            return self.str_at(start..self.at);
        }
        if self.eat(b"COLLNET") {
            self.run(|b| b.is_ascii_alphanumeric() || b == b'_')?;
            return self.str_at(start..self.at);
        }
        None
    }

    /// `(?:/(\d+)|/(\S+))?`: a NIC index when digits follow the slash,
    /// else the rest of the word.
    /// `(19)` right after a NIC index: the proxy rank, else nothing read.
    fn proxy_rank(&mut self) -> Option<i64> {
        let start = self.at;
        let rank = self
            .eat(b"(")
            .then(|| self.int_at())
            .flatten()
            .filter(|_| self.eat(b")"));
        if rank.is_none() {
            self.at = start;
        }
        rank.map(|(rank, _)| rank)
    }

    fn transport_suffix(&mut self) -> Option<Suffix<'a>> {
        if !self.eat(b"/") {
            return Some(Suffix::None);
        }
        let after_slash = self.at;
        let digits = self.run(|b| b.is_ascii_digit())?;
        if !digits.is_empty() {
            return digits.parse().ok().map(Suffix::NetDev);
        }
        self.at = after_slash;
        let word = self.run(|b| !is_space(b))?;
        Some(if word.is_empty() {
            Suffix::None
        } else {
            Suffix::Detail(word)
        })
    }
}

/// `[Rank 10] ncclCommInitRankConfig comm 0x9 rank 10 nranks 16 cudaDev 1
/// nvmlDev 1 busId 3b000 commId 0x1 - Init START` in each form since NCCL
/// 2.4 (`nccl.comm_init`), read from the start of the message: every
/// optional part is taken where its keyword stands, as the regex prefers.
pub(super) fn comm_init(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_comm_init(&mut Reader::new(body), spans).is_some()
}

fn read_comm_init(r: &mut Reader<'_>, spans: &mut Spans) -> Option<()> {
    if r.eat(b"[Rank ") {
        r.digits()?;
        r.expect(b"] ")?;
    }
    if r.rest().starts_with(b"nccl") {
        let api = r.span(is_word);
        r.expect(b" ")?;
        (api.len() > 4).then_some(())?;
        spans.set("api", api)?;
    }
    r.expect(b"comm ")?;
    let comm = if r.eat(b"(nil)") {
        r.at - 5..r.at
    } else {
        hex_number(r)?
    };
    spans.set("comm", comm)?;
    keyword_digits(r, spans, b" rank ", "rank")?;
    keyword_digits(r, spans, b" nranks ", "nranks")?;
    keyword_digits(r, spans, b" cudaDev ", "cuda_dev")?;
    if r.rest().starts_with(b" nvmlDev ") {
        keyword_digits(r, spans, b" nvmlDev ", "nvml_dev")?;
    }
    if r.eat(b" busId ") {
        let bus = r.span1(|b| b.is_ascii_hexdigit())?;
        spans.set("bus_id", bus)?;
    }
    if r.eat(b" parent ") {
        let parent = r.span1(|b| !is_space(b))?;
        spans.set("parent", parent)?;
    }
    if r.eat(b" splitCount ") || r.eat(b" childCount ") {
        r.digits()?;
    }
    for (keyword, name) in [(&b" color "[..], "color"), (b" key ", "key")] {
        if r.eat(keyword) {
            let value = r.signed_digits()?;
            spans.set(name, value)?;
        }
    }
    if r.eat(b" commId ") {
        let id = hex_number(r)?;
        spans.set("comm_id", id)?;
    }
    if r.rest().first().is_some_and(|&b| is_space(b)) {
        r.at += 1;
    }
    r.expect(b"- Init ")?;
    let start = r.at;
    if !(r.eat(b"START") || r.eat(b"COMPLETE")) {
        return None;
    }
    spans.set("phase", start..r.at)
}

/// `0x` and at least one hex digit, where they lie (the reader moves past
/// them only when they are there).
fn hex_number(r: &mut Reader<'_>) -> Option<Range<usize>> {
    let start = r.at;
    r.expect(b"0x")?;
    match r.span1(|b| b.is_ascii_hexdigit()) {
        Some(digits) => Some(start..digits.end),
        None => {
            r.at = start;
            None
        }
    }
}

/// `keyword` then `\d+`, the digits recorded as group `name`.
fn keyword_digits(
    r: &mut Reader<'_>,
    spans: &mut Spans,
    keyword: &[u8],
    name: &'static str,
) -> Option<()> {
    r.expect(keyword)?;
    let digits = r.digits()?;
    spans.set(name, digits)
}

/// `comm 0x55d0 rank 2 nRanks 8 nNodes 2 localRanks 4 localRank 2 MNNVL 0`
/// (`nccl.comm_layout`, NCCL 2.21+), from the start of the message.
pub(super) fn comm_layout(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_comm_layout(&mut Reader::new(body), spans).is_some()
}

fn read_comm_layout(r: &mut Reader<'_>, spans: &mut Spans) -> Option<()> {
    r.expect(b"comm ")?;
    let comm = hex_number(r)?;
    spans.set("comm", comm)?;
    keyword_digits(r, spans, b" rank ", "rank")?;
    keyword_digits(r, spans, b" nRanks ", "nranks")?;
    keyword_digits(r, spans, b" nNodes ", "nnodes")?;
    keyword_digits(r, spans, b" localRanks ", "local_ranks")?;
    keyword_digits(r, spans, b" localRank ", "local_rank")?;
    // Optional and last: where it is not whole the match ends before it.
    let before = r.at;
    if keyword_digits(r, spans, b" MNNVL ", "mnnvl").is_none() {
        r.at = before;
    }
    Some(())
}

/// `Trees [0] 14/-1/-1->12->11 [1] …` (`nccl.trees`): the list runs to the
/// line's last non-space character, which must come after the first
/// neighbour's first digit (the regex's `-?\d+[/\d>-]*.*\S`).
pub(super) fn trees(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_trees(body, spans).is_some()
}

fn read_trees(body: &[u8], spans: &mut Spans) -> Option<()> {
    let mut r = Reader::new(body);
    r.expect(b"Trees ")?;
    let start = r.at;
    r.expect(b"[")?;
    r.digits()?;
    r.expect(b"] ")?;
    r.eat(b"-");
    let first_digit = r.at;
    r.digits()?;
    let end = body.iter().rposition(|&b| !is_space(b))? + 1;
    (end >= first_digit + 2).then_some(())?;
    spans.set("trees", start..end)
}

/// `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [RO]; OOB ib0:10.3.0.17<0>`
/// (`nccl.net_ib`): the device list ends where the shortest run of spaces
/// and `[RO]` before the first `; OOB ` begins (the regex's lazy `.*?`).
pub(super) fn net_ib(body: &[u8], spans: &mut Spans) -> bool {
    body.is_ascii() && read_net_ib(body, spans).is_some()
}

fn read_net_ib(body: &[u8], spans: &mut Spans) -> Option<()> {
    let mut r = Reader::new(body);
    if !(r.eat(b"NET/IB : Using ") || r.eat(b"NET/IB: Using ")) {
        return None;
    }
    let start = r.at;
    let oob = start + memchr::memmem::find(r.rest(), b"; OOB ")?;
    let (devices_end, relaxed) = (oob.saturating_sub(6).max(start)..=oob)
        .find_map(|q| relaxed_tail(&body[q..oob]).map(|ro| (q, ro.map(|at| q + at))))?;
    spans.set("devices", start..devices_end)?;
    if let Some(at) = relaxed {
        spans.set("relaxed", at..at + 4)?;
    }
    r.at = oob + b"; OOB ".len();
    let iface = r.span1(|b| b != b':' && !is_space(b))?;
    r.expect(b":")?;
    let ip = r.span1(|b| b != b'<' && !is_space(b))?;
    r.expect(b"<")?;
    r.digits()?;
    r.expect(b">")?;
    spans.set("oob_iface", iface)?;
    spans.set("oob_ip", ip)
}

/// Whether `text` is all of `\s?(\[RO\])?\s?`, and where `[RO]` stands in
/// it if it is there.
fn relaxed_tail(text: &[u8]) -> Option<Option<usize>> {
    let mut at = usize::from(text.first().is_some_and(|&b| is_space(b)));
    let relaxed = text[at..].starts_with(b"[RO]").then_some(at);
    at += relaxed.map_or(0, |_| 4);
    at += usize::from(text.get(at).is_some_and(|&b| is_space(b)));
    (at == text.len()).then_some(relaxed)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Option<crate::model::Fields> {
        let mut fields = FieldList::new();
        fields.reset(CHANNEL_FIELDS);
        channel(line.as_bytes(), &mut fields).then(|| fields.to_fields())
    }

    fn fields(line: &str) -> Vec<(String, String)> {
        read(line)
            .expect("read")
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_channel_slot_names_its_field_and_the_names_are_sorted() {
        let slots = [
            (slot::CHANNEL, "channel"),
            (slot::CONN, "conn"),
            (slot::DETAIL, "detail"),
            (slot::DIR, "dir"),
            (slot::DST, "dst"),
            (slot::DST_DEV, "dst_dev"),
            (slot::GDR, "gdr"),
            (slot::NET_DEV, "net_dev"),
            (slot::PROXY, "proxy"),
            (slot::SRC, "src"),
            (slot::SRC_DEV, "src_dev"),
            (slot::TRANSPORT, "transport"),
        ];
        for (slot, name) in slots {
            assert_eq!(CHANNEL_FIELDS[usize::from(slot)], name);
        }
        assert_eq!(slots.len(), CHANNEL_FIELDS.len());
        assert!(CHANNEL_FIELDS.is_sorted());
    }

    #[test]
    fn a_net_channel_line_of_nccl_2_19_reads_whole() {
        let got = fields("Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared");
        let want = [
            ("channel", "0"),
            ("conn", "1"),
            ("dir", "send"),
            ("dst", "8"),
            ("dst_dev", "0"),
            ("gdr", "GDRDMA"),
            ("net_dev", "0"),
            ("src", "0"),
            ("src_dev", "0"),
            ("transport", "NET/IB"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_pxn_line_names_its_proxy_rank_nccl_2_21() {
        let got = fields("Channel 03/0 : 18[2] -> 27[3] [send] via NET/IB/3(19)/GDRDMA");
        let proxy = got.iter().find(|(k, _)| k == "proxy");
        assert_eq!(proxy.map(|(_, v)| v.as_str()), Some("19"), "{got:?}");
        assert!(
            got.iter().any(|(k, v)| k == "gdr" && v == "GDRDMA"),
            "{got:?}"
        );
        let own = fields("Channel 03/0 : 19[3] -> 28[4] [send] via NET/IB/3/GDRDMA(PCI)");
        assert!(own.iter().all(|(k, _)| k != "proxy"), "{own:?}");
    }

    #[test]
    fn lines_outside_the_known_form_are_left_to_the_regex() {
        for line in [
            "Channel 00/ : 0[0] -> 8[0] via P2P",
            "Channel 00 : 0[0] -> 8[0] via NVLS",
            "Channel 00 : 0[0] -> 8[0] via NET/IB/０",
            "Channel 99999999999999999999 : 0[0] -> 8[0] via P2P",
            "Channel 00 : 0[] -> 8[0] via P2P",
            "Connected all rings",
        ] {
            assert!(read(line).is_none(), "{line}");
        }
    }

    fn spans(reader: fn(&[u8], &mut Spans) -> bool, body: &str, name: &str) -> Option<String> {
        let mut spans = Spans::new();
        reader(body.as_bytes(), &mut spans)
            .then(|| spans.get(name).map(|(s, e)| body[s..e].to_string()))
            .flatten()
    }

    #[test]
    fn the_device_list_ends_where_the_shortest_tail_before_oob_begins() {
        let line = "NET/IB : Using [0]mlx5_0:1/IB  [RO]; OOB ib0:10.0.0.1<0>";
        assert_eq!(
            spans(net_ib, line, "devices").as_deref(),
            Some("[0]mlx5_0:1/IB ")
        );
        assert_eq!(spans(net_ib, line, "relaxed").as_deref(), Some("[RO]"));
    }

    #[test]
    fn a_comm_init_line_in_a_form_it_does_not_know_is_left_to_the_regex() {
        let known = "ncclCommSplit comm 0x77 rank 1 nranks 2 cudaDev 1 parent 0x55 splitCount 1 color -7 key 1- Init START";
        assert_eq!(spans(comm_init, known, "color").as_deref(), Some("-7"));
        for odd in [
            "nccl comm 0x77 rank 1 nranks 2 cudaDev 1 - Init START",
            "comm 0x77 rank 1 nranks 2 cudaDev 1 parent 0x55- Init START",
            "comm 0x77 rank 1 nranks 2 cudaDev 1  - Init START",
        ] {
            assert_eq!(spans(comm_init, odd, "comm"), None, "{odd}");
        }
    }
}
