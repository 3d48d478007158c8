//! Hand-written matchers for the few patterns that match most lines.
//!
//! On a large job nine lines in ten are NCCL channel lines, and running a
//! capturing regex on each cost half of the whole analysis. An accelerator
//! reads such a line directly. It is only a faster way to run its pattern's
//! regex: where the line is not in the exact form it knows it returns `None`
//! and the regex decides, and where it answers, its fields must be the
//! regex's. The self-test checks that on every sample of the pattern, and
//! tests check it on every channel line of the corpus and on generated lines.

use crate::model::FieldList;
use crate::model::FieldRef::{Int, Text};

/// Reads a message body into the fields its pattern's regex would yield,
/// listed into an empty list; `false` (the list then holds nothing of use)
/// leaves the line to the regex.
pub type Accelerator = for<'a> fn(&'a [u8], &mut FieldList<'a>) -> bool;

/// The accelerator a grammar names (`accelerator = "…"`), if it exists.
pub fn by_name(name: &str) -> Option<Accelerator> {
    match name {
        "nccl_channel" => Some(nccl_channel),
        _ => None,
    }
}

/// `Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared` (and the
/// `Ring` form of NCCL ≤ 2.6), anchored at the start of the message: the
/// regex of `nccl.channel` in grammars/nccl.toml, read left to right.
fn nccl_channel<'a>(body: &'a [u8], fields: &mut FieldList<'a>) -> bool {
    read_channel(body, fields).is_some() && fields.complete()
}

fn read_channel<'a>(body: &'a [u8], fields: &mut FieldList<'a>) -> Option<()> {
    let mut r = Reader { s: body, at: 0 };
    if !(r.eat(b"Channel ") || r.eat(b"Ring ")) {
        return None;
    }
    let channel = r.int()?;
    let conn = if r.eat(b"/") { Some(r.int()?) } else { None };
    r.expect(b" : ")?;
    let src = r.int()?;
    let src_dev = r.bracketed_hex()?;
    r.expect(b" -> ")?;
    let dst = r.int()?;
    let dst_dev = r.bracketed_hex()?;
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
    // Pushed in name order, as `Fields` keeps them.
    fields.push("channel", Int(channel));
    if let Some(conn) = conn {
        fields.push("conn", Int(conn));
    }
    if let Suffix::Detail(d) = suffix {
        fields.push("detail", Text(d));
    }
    if let Some(dir) = dir {
        fields.push("dir", Text(dir));
    }
    fields.push("dst", Int(dst));
    fields.push("dst_dev", Text(dst_dev));
    if let Suffix::NetDev(dev) = suffix {
        fields.push("net_dev", Int(dev));
    }
    fields.push("src", Int(src));
    fields.push("src_dev", Text(src_dev));
    fields.push("transport", Text(transport));
    Some(())
}

/// ASCII bytes in the regex's (Unicode) `\s`: unlike
/// `u8::is_ascii_whitespace`, it includes the vertical tab.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

enum Suffix<'a> {
    None,
    NetDev(i64),
    Detail(&'a str),
}

/// A cursor over ASCII text; anything outside ASCII makes the reader give
/// up, since the regex's `\d`, `\s` and `\w` are Unicode classes.
struct Reader<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a [u8] {
        &self.s[self.at..]
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        let hit = self.rest().starts_with(lit);
        if hit {
            self.at += lit.len();
        }
        hit
    }

    fn expect(&mut self, lit: &[u8]) -> Option<()> {
        self.eat(lit).then_some(())
    }

    /// The longest run of bytes that `keep` accepts (`None` when a
    /// non-ASCII byte ends it: the regex might read on).
    fn run(&mut self, keep: impl Fn(u8) -> bool) -> Option<&'a str> {
        let rest = self.rest();
        let len = rest
            .iter()
            .take_while(|&&b| b.is_ascii() && keep(b))
            .count();
        if rest.get(len).is_some_and(|b| !b.is_ascii()) {
            return None;
        }
        self.at += len;
        std::str::from_utf8(&rest[..len]).ok()
    }

    /// `\d+` as a field of kind int (a value too large for one stays text in
    /// the regex path, so the reader gives up on it).
    fn int(&mut self) -> Option<i64> {
        let rest = self.rest();
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || rest.get(len).is_some_and(|b| !b.is_ascii()) {
            return None;
        }
        let value = rest[..len].iter().try_fold(0i64, |n, &d| {
            n.checked_mul(10)?.checked_add(i64::from(d - b'0'))
        })?;
        self.at += len;
        Some(value)
    }

    /// `\[([0-9a-fA-F]+)\]`.
    fn bracketed_hex(&mut self) -> Option<&'a str> {
        self.expect(b"[")?;
        let hex = self.run(|b| b.is_ascii_hexdigit())?;
        self.expect(b"]")?;
        (!hex.is_empty()).then_some(hex)
    }

    /// `NET/[^/\s]+|P2P|SHM|COLLNET\w*`, first alternative first.
    fn transport(&mut self) -> Option<&'a str> {
        let start = self.at;
        if self.eat(b"NET/") {
            let name = self.run(|b| b != b'/' && !is_space(b))?;
            if !name.is_empty() {
                return std::str::from_utf8(&self.s[start..self.at]).ok();
            }
            self.at = start;
        }
        if self.eat(b"P2P") || self.eat(b"SHM") {
            return std::str::from_utf8(&self.s[start..self.at]).ok();
        }
        if self.eat(b"COLLNET") {
            self.run(|b| b.is_ascii_alphanumeric() || b == b'_')?;
            return std::str::from_utf8(&self.s[start..self.at]).ok();
        }
        None
    }

    /// `(?:/(\d+)|/(\S+))?`: a NIC index when digits follow the slash,
    /// else the rest of the word.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Option<crate::model::Fields> {
        let mut fields = FieldList::new();
        nccl_channel(line.as_bytes(), &mut fields).then(|| fields.to_fields())
    }

    fn fields(line: &str) -> Vec<(String, String)> {
        read(line)
            .expect("read")
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
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
}
