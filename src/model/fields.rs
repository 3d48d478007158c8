//! The named values an event's line yielded, packed into one small buffer.
//!
//! A 16k-rank job keeps hundreds of thousands of events with about eight
//! fields each. As a vector of (name, value) pairs every field took 40 bytes
//! plus the vector's slack, a quarter of the whole run's memory; packed as
//! bytes (name, kind, value) a field takes about ten. Reading walks the
//! buffer: an event has a dozen fields at most, so that is as fast as a
//! search, and no name table is shared between threads.

use compact_str::CompactString;
use serde::Serialize;
use std::fmt;
use std::ops::Range;

/// A field value, as a pattern or a rule hands it over.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Text(CompactString),
}

impl Value {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Text(t) => t.parse().ok(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t.as_str()),
            Value::Int(_) => None,
        }
    }

    /// The value as [`Fields`] hands it out.
    pub fn as_ref(&self) -> FieldRef<'_> {
        match self {
            Value::Int(n) => FieldRef::Int(*n),
            Value::Text(t) => FieldRef::Text(t),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// A field value read in place from [`Fields`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRef<'a> {
    Int(i64),
    Text(&'a str),
}

impl FieldRef<'_> {
    /// The integer, or the text read as one.
    pub fn as_int(self) -> Option<i64> {
        match self {
            FieldRef::Int(n) => Some(n),
            FieldRef::Text(t) => t.parse().ok(),
        }
    }

    pub fn to_value(self) -> Value {
        match self {
            FieldRef::Int(n) => Value::Int(n),
            FieldRef::Text(t) => Value::Text(t.into()),
        }
    }
}

impl fmt::Display for FieldRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldRef::Int(v) => write!(f, "{v}"),
            FieldRef::Text(t) => f.write_str(t),
        }
    }
}

const INT: u8 = 0;
const TEXT: u8 = 1;

/// Named fields, sorted by name so output order is stable. Each entry is
/// `name length, name, kind, value`: lengths as LEB128, integers zigzagged.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Fields(Box<[u8]>);

impl Fields {
    /// Fields already sorted by name, each name once (a pattern's slots).
    pub fn from_sorted<N: AsRef<str>>(fields: impl IntoIterator<Item = (N, Value)>) -> Fields {
        let mut packed = FieldsBuilder::with_capacity(128);
        for (name, value) in fields {
            packed.push(name.as_ref(), value.as_ref());
        }
        packed.finish()
    }

    /// Sets `name` (replacing a value it had).
    pub fn insert(&mut self, name: &str, value: Value) {
        let mut packed = FieldsBuilder::default();
        let mut placed = false;
        for (k, v) in self.iter() {
            if !placed && k >= name {
                packed.push(name, value.as_ref());
                placed = true;
                if k == name {
                    continue;
                }
            }
            packed.push(k, v);
        }
        if !placed {
            packed.push(name, value.as_ref());
        }
        *self = packed.finish();
    }

    pub fn get(&self, name: &str) -> Option<Value> {
        self.find(name).map(FieldRef::to_value)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        self.find(name)?.as_int()
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.find(name)? {
            FieldRef::Text(t) => Some(t),
            FieldRef::Int(_) => None,
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, FieldRef<'_>)> {
        self.raw().filter_map(|(name, kind, payload)| {
            Some((std::str::from_utf8(name).ok()?, decode(kind, payload)?))
        })
    }

    /// Each entry as stored: name, kind byte, value bytes. Equal values have
    /// equal bytes, so a caller may compare or hash them without decoding.
    pub fn raw(&self) -> impl Iterator<Item = (&[u8], u8, &[u8])> {
        Entries { rest: &self.0 }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The model and the rules look fields up millions of times at scale
    /// (about five per event), so the walk stops at the first name past the
    /// one sought (names are sorted), judged by first byte, and skips a
    /// field without decoding it.
    fn find(&self, name: &str) -> Option<FieldRef<'_>> {
        let name = name.as_bytes();
        let first = *name.first()?;
        for (k, kind, payload) in self.raw() {
            match k.first().map(|&b| b.cmp(&first)) {
                Some(std::cmp::Ordering::Greater) => return None,
                Some(std::cmp::Ordering::Equal) if same_name(k, name) => {
                    return decode(kind, payload);
                }
                _ => {}
            }
        }
        None
    }
}

/// Name equality for short names, compared in line: a call into `memcmp`
/// for a few bytes cost more than the compare (this runs for every field of
/// every line).
pub fn same_name(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Writes fields in name order, straight into the packed form (the hot
/// parsers use it to skip building a [`Value`] per field).
#[derive(Default)]
pub struct FieldsBuilder {
    buf: Vec<u8>,
}

impl FieldsBuilder {
    /// Room for `bytes` of fields (a line's fields take about 100).
    pub fn with_capacity(bytes: usize) -> FieldsBuilder {
        FieldsBuilder {
            buf: Vec::with_capacity(bytes),
        }
    }

    /// Appends a field; names must come in sorted order, each once.
    pub fn push(&mut self, name: &str, value: FieldRef<'_>) {
        put_len(&mut self.buf, name.len());
        self.buf.extend_from_slice(name.as_bytes());
        match value {
            FieldRef::Int(n) => {
                self.buf.push(INT);
                put_varint(&mut self.buf, zigzag(n));
            }
            FieldRef::Text(t) => {
                self.buf.push(TEXT);
                put_len(&mut self.buf, t.len());
                self.buf.extend_from_slice(t.as_bytes());
            }
        }
    }

    pub fn finish(self) -> Fields {
        let fields = Fields(self.buf.as_slice().into());
        // A lookup stops at the first name past the one sought.
        debug_assert!(
            fields.raw().map(|(name, _, _)| name).is_sorted(),
            "fields pushed out of name order: {fields:?}"
        );
        fields
    }
}

/// A line's fields as a hand-written reader yields them: borrowed from the
/// line, in name order, not yet packed. Most such lines only repeat an
/// earlier one and are never kept, so they are never packed either. Filled
/// in place by the reader (it is a few hundred bytes: copies cost).
///
/// A field is pushed by its slot in the reader's sorted list of names, so
/// what a pattern makes of a name (part of a repeat's key or not, a
/// channel's end) is looked up by slot, not by comparing names per line.
pub struct FieldList<'a> {
    names: &'static [&'static str],
    entries: [(u8, FieldRef<'a>); FieldList::MAX],
    len: usize,
    /// More than `MAX` were pushed, or a slot past the names: the list is
    /// not to be used.
    overflowed: bool,
    /// Where some fields' digits lie in the text read, by slot.
    digits: [(u8, u32, u32); FieldList::MAX_DIGIT_RUNS],
    digit_runs: usize,
}

impl<'a> FieldList<'a> {
    /// Room for the fields of the patterns that have a reader (a channel
    /// line has at most ten).
    pub const MAX: usize = 12;
    /// Digit runs a reader may note (a channel line's six numbers).
    pub const MAX_DIGIT_RUNS: usize = 6;

    pub fn new() -> FieldList<'a> {
        FieldList {
            names: &[],
            entries: [(0, FieldRef::Int(0)); FieldList::MAX],
            len: 0,
            overflowed: false,
            digits: [(0, 0, 0); FieldList::MAX_DIGIT_RUNS],
            digit_runs: 0,
        }
    }

    /// Empties the list for a line read by a reader of these (sorted) names.
    pub fn reset(&mut self, names: &'static [&'static str]) {
        self.names = names;
        self.len = 0;
        self.overflowed = false;
        self.digit_runs = 0;
    }

    /// Notes that the field in `slot` was read from the bytes at `at` of
    /// the text read, and from nothing else: another line that differs
    /// from this one only in other digits there reads alike but for that
    /// field's value. Runs past room are not noted (only a chance to skip
    /// work is lost).
    pub fn note_digits(&mut self, slot: u8, at: Range<usize>) {
        let (Ok(start), Ok(end)) = (u32::try_from(at.start), u32::try_from(at.end)) else {
            return;
        };
        if let Some(run) = self.digits.get_mut(self.digit_runs) {
            *run = (slot, start, end);
            self.digit_runs += 1;
        }
    }

    /// The digit runs noted, by slot, in the order they were noted.
    pub fn digit_runs(&self) -> impl Iterator<Item = (u8, Range<usize>)> + '_ {
        self.digits[..self.digit_runs]
            .iter()
            .map(|&(slot, start, end)| (slot, start as usize..end as usize))
    }

    /// Appends the field named `names[slot]`; slots must come in
    /// increasing order.
    pub fn push(&mut self, slot: u8, value: FieldRef<'a>) {
        let known = usize::from(slot) < self.names.len();
        match self.entries.get_mut(self.len) {
            Some(entry) if known => {
                *entry = (slot, value);
                self.len += 1;
            }
            _ => self.overflowed = true,
        }
    }

    /// Whether every field pushed found room.
    pub fn complete(&self) -> bool {
        !self.overflowed
    }

    /// Each field by its slot among the reader's names.
    pub fn slots(&self) -> impl Iterator<Item = (u8, FieldRef<'a>)> + '_ {
        self.entries[..self.len].iter().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, FieldRef<'a>)> + '_ {
        self.slots()
            .map(|(slot, value)| (self.names[usize::from(slot)], value))
    }

    pub fn to_fields(&self) -> Fields {
        let mut packed = FieldsBuilder::with_capacity(16 * self.len);
        for (name, value) in self.iter() {
            packed.push(name, value);
        }
        packed.finish()
    }
}

impl Default for FieldList<'_> {
    fn default() -> Self {
        FieldList::new()
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn put_len(buf: &mut Vec<u8>, len: usize) {
    put_varint(buf, len as u64);
}

/// Appends `n` as LEB128 (one byte below 128): how lengths and integers
/// are packed, and a compact self-delimiting form for keys built elsewhere.
#[inline(always)]
pub fn put_varint(buf: &mut Vec<u8>, n: u64) {
    // Lengths and small numbers, nearly all, take one byte.
    if n < 0x80 {
        buf.push(n as u8);
        return;
    }
    let mut bytes = [0u8; MAX_VARINT];
    let len = varint_into(n, &mut bytes);
    buf.extend_from_slice(&bytes[..len]);
}

/// The most bytes a `u64` takes as LEB128.
const MAX_VARINT: usize = 10;

/// Writes `n` as LEB128 into `out`; returns how many bytes it took.
fn varint_into(mut n: u64, out: &mut [u8; MAX_VARINT]) -> usize {
    let mut len = 0;
    while n >= 0x80 {
        out[len] = (n as u8) | 0x80;
        n >>= 7;
        len += 1;
    }
    out[len] = n as u8;
    len + 1
}

/// A value from its kind byte and bytes (as [`Fields::raw`] gives them).
pub fn decode(kind: u8, payload: &[u8]) -> Option<FieldRef<'_>> {
    if kind == INT {
        let z = Entries { rest: payload }.varint()?;
        Some(FieldRef::Int(((z >> 1) as i64) ^ -((z & 1) as i64)))
    } else {
        std::str::from_utf8(payload).ok().map(FieldRef::Text)
    }
}

/// Walks the entries; a buffer only [`FieldsBuilder`] wrote, so a malformed one
/// (which cannot happen) ends the walk instead of panicking.
struct Entries<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let name_len = self.varint()? as usize;
        let name = self.take(name_len)?;
        let (&kind, tail) = self.rest.split_first()?;
        self.rest = tail;
        let payload = if kind == INT {
            // A varint ends at its first byte without the high bit.
            let len = self.rest.iter().position(|b| b & 0x80 == 0)? + 1;
            self.take(len)?
        } else {
            let len = self.varint()? as usize;
            self.take(len)?
        };
        Some((name, kind, payload))
    }
}

impl<'a> Entries<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn varint(&mut self) -> Option<u64> {
        // Nearly every length and small number is one byte.
        if let Some((&b, tail)) = self.rest.split_first()
            && b < 0x80
        {
            self.rest = tail;
            return Some(u64::from(b));
        }
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.take(1)?.first()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_line_packs_into_the_same_fields() {
        let mut list = FieldList::new();
        list.reset(&["a", "b", "c"]);
        list.push(0, FieldRef::Int(-300));
        list.push(1, FieldRef::Text("x y"));
        list.push(2, FieldRef::Int(i64::MAX));
        assert!(list.complete());
        let packed = list.to_fields();
        let listed: Vec<(&str, FieldRef<'_>)> = list.iter().collect();
        let unpacked: Vec<(&str, FieldRef<'_>)> = packed.iter().collect();
        assert_eq!(listed, unpacked);
        let slots: Vec<u8> = list.slots().map(|(slot, _)| slot).collect();
        assert_eq!(slots, [0, 1, 2]);
        assert_eq!(packed.int("a"), Some(-300));
        assert_eq!(packed.text("b"), Some("x y"));
    }

    #[test]
    fn a_list_that_ran_out_of_room_or_names_says_so() {
        let mut list = FieldList::new();
        list.reset(&["n"]);
        for _ in 0..=FieldList::MAX {
            list.push(0, FieldRef::Int(1));
        }
        assert!(!list.complete());
        list.reset(&["n"]);
        assert!(list.complete());
        assert!(list.to_fields().is_empty());
        list.push(1, FieldRef::Int(1));
        assert!(!list.complete(), "a slot past the names");
    }

    #[test]
    fn fields_stay_sorted_and_replace_on_reinsert() {
        let mut f = Fields::default();
        f.insert("status", Value::Int(12));
        f.insert("peer", Value::Text("10.0.0.1".into()));
        f.insert("status", Value::Int(5));
        f.insert("zone", Value::Int(-1));
        let names: Vec<_> = f.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["peer", "status", "zone"]);
        assert_eq!(f.int("status"), Some(5));
        assert_eq!(f.text("peer"), Some("10.0.0.1"));
        assert_eq!(f.get("missing"), None);
    }

    #[test]
    fn a_lookup_finds_every_name_and_stops_past_the_sought_one() {
        let long = "y".repeat(200);
        let f = Fields::from_sorted([
            ("a", Value::Int(1)),
            ("ab", Value::Text(long.as_str().into())),
            ("b", Value::Int(-500)),
            ("bc", Value::Text("t".into())),
            ("c", Value::Int(3)),
        ]);
        assert_eq!(f.int("a"), Some(1));
        assert_eq!(f.text("ab"), Some(long.as_str()));
        assert_eq!(f.int("b"), Some(-500));
        assert_eq!(f.text("bc"), Some("t"));
        assert_eq!(f.int("c"), Some(3));
        for absent in ["", "0", "aa", "abc", "ba", "bd", "d", "zz"] {
            assert!(!f.contains(absent), "{absent:?}");
        }
    }

    #[test]
    fn every_integer_and_any_text_round_trips() {
        let ints = [0, 1, -1, 63, -64, 64, i64::MAX, i64::MIN, 1 << 40];
        let long = "x".repeat(300);
        let mut pairs: Vec<(String, Value)> = ints
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("i{i}"), Value::Int(*n)))
            .collect();
        pairs.push(("t0".into(), Value::Text("".into())));
        pairs.push(("t1".into(), Value::Text("é ✓".into())));
        pairs.push(("t2".into(), Value::Text(long.as_str().into())));
        let f = Fields::from_sorted(pairs.clone());
        let back: Vec<(String, Value)> = f
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_value()))
            .collect();
        assert_eq!(back, pairs);
        assert_eq!(f.int("t1"), None);
        assert_eq!(f.text("i0"), None);
    }
}
