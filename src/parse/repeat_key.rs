//! Repeat keys: what makes a matched line a new fact.
//!
//! A pattern that declares `repeats_differ_in` keeps one event per distinct
//! key (NCCL prints a channel line per channel and peer; the transport is the
//! fact, the channel numbers and peers become links). The key is the
//! pattern, the writing process, and every field but the ones its repeats
//! may differ in. This runs for every channel line (nine lines in ten of a
//! large job), so the key is written with few, fixed-size pieces.
//!
//! Every part is self-delimiting, so equal keys mean equal parts. A line
//! may reach the scanner with its fields listed by an accelerator or packed
//! by the regex path; both give the same key bytes. For a pattern whose
//! accelerator lists fields, a field is keyed by its slot among the
//! reader's names (no name is written or compared per line); otherwise by
//! its name.

use crate::grammar::Pattern;
use crate::model::fields::{decode, put_varint, same_name};
use crate::model::{EventKind, FieldList, FieldRef, Fields, Who};

/// A match's fields: packed (a regex's, or any match the literal scan's
/// path made), or as an accelerator listed them (packed only if kept).
pub(super) enum LineFields<'l, 'a> {
    Packed(Fields),
    Listed(&'l FieldList<'a>),
}

impl LineFields<'_, '_> {
    pub(super) fn into_fields(self) -> Fields {
        match self {
            LineFields::Packed(fields) => fields,
            LineFields::Listed(list) => list.to_fields(),
        }
    }
}

/// What one walk over a match's fields gives every line: whether its
/// pattern folds repeats (its key then written), and a channel line's two
/// ranks.
pub(super) struct FieldsRead {
    pub repeats: bool,
    pub link: Option<(u32, u32)>,
}

/// Reads a match's fields once: writes the repeat key of a pattern that
/// folds repeats into `key`, and reads a channel line's two ends.
pub(super) fn read_fields(
    key: &mut Vec<u8>,
    pattern: &Pattern,
    who: &Who,
    fields: &LineFields<'_, '_>,
) -> FieldsRead {
    let keyed = pattern.repeats_differ_in.is_some();
    let channel = pattern.kind == EventKind::NcclChannel;
    if keyed {
        key.clear();
        put_writer(key, pattern, who);
    } else if !channel {
        return FieldsRead {
            repeats: false,
            link: None,
        };
    }
    let link = match fields {
        LineFields::Packed(fields) => read_packed(key, pattern, keyed, fields),
        LineFields::Listed(list) => read_listed(key, pattern, keyed, list),
    };
    FieldsRead {
        repeats: keyed,
        link: link.filter(|_| channel),
    }
}

/// The pattern and the process: one fixed-size piece (a flag byte says
/// which ids are known), then the host's name.
pub(super) fn put_writer(key: &mut Vec<u8>, pattern: &Pattern, who: &Who) {
    let mut head = [0u8; 8 + 1 + 3 * 4];
    head[..8].copy_from_slice(&(pattern.id.as_ptr() as u64).to_le_bytes());
    for (i, id) in [who.pid, who.rank, who.local_rank].into_iter().enumerate() {
        if let Some(id) = id {
            head[8] |= 1 << i;
            head[9 + 4 * i..13 + 4 * i].copy_from_slice(&id.to_le_bytes());
        }
    }
    key.extend_from_slice(&head);
    let host = who.host.as_deref().unwrap_or("");
    put_varint(key, host.len() as u64);
    key.extend_from_slice(host.as_bytes());
}

/// A field's value: a kind byte, then an integer's eight bytes or a text's
/// length and bytes.
#[inline(always)]
fn put_value(key: &mut Vec<u8>, value: FieldRef<'_>) {
    match value {
        FieldRef::Int(n) => {
            let mut piece = [0u8; 9];
            piece[1..].copy_from_slice(&n.to_le_bytes());
            key.extend_from_slice(&piece);
        }
        FieldRef::Text(t) => {
            key.push(1);
            put_varint(key, t.len() as u64);
            key.extend_from_slice(t.as_bytes());
        }
    }
}

/// A field the reader lists in `slot`.
#[inline(always)]
fn put_slot(key: &mut Vec<u8>, slot: u8, value: FieldRef<'_>) {
    key.push(slot);
    put_value(key, value);
}

/// A field known by name only: a mark no slot takes, then the name.
fn put_named(key: &mut Vec<u8>, name: &[u8], value: FieldRef<'_>) {
    key.push(u8::MAX);
    put_varint(key, name.len() as u64);
    key.extend_from_slice(name);
    put_value(key, value);
}

/// [`read_fields`] over packed fields: a field is known by its name (and,
/// for a pattern with a listing reader, keyed by that name's slot).
fn read_packed(
    key: &mut Vec<u8>,
    pattern: &Pattern,
    keyed: bool,
    fields: &Fields,
) -> Option<(u32, u32)> {
    let ignored = pattern.repeats_differ_in.as_deref().unwrap_or_default();
    let (mut src, mut dst) = (None, None);
    for (name, kind, payload) in fields.raw() {
        let Some(value) = decode(kind, payload) else {
            continue;
        };
        match name {
            b"src" => src = rank_of(value),
            b"dst" => dst = rank_of(value),
            _ => {}
        }
        if !keyed || ignored.iter().any(|i| same_name(i.as_bytes(), name)) {
            continue;
        }
        match pattern.listed_slot(name) {
            Some(slot) => put_slot(key, slot, value),
            None => put_named(key, name, value),
        }
    }
    src.zip(dst)
}

/// [`read_fields`] over an accelerator's list (nine in ten channel lines):
/// a field is known by its slot, and the fields a repeat may differ in
/// (most of a channel line's) are passed over.
fn read_listed(
    key: &mut Vec<u8>,
    pattern: &Pattern,
    keyed: bool,
    list: &FieldList<'_>,
) -> Option<(u32, u32)> {
    let ends = pattern.listed_ends();
    let (mut src, mut dst) = (None, None);
    for (slot, value) in list.slots() {
        if let Some((s, d)) = ends {
            if slot == s {
                src = rank_of(value);
            } else if slot == d {
                dst = rank_of(value);
            }
        }
        if keyed && !pattern.ignores_listed(slot) {
            put_slot(key, slot, value);
        }
    }
    src.zip(dst)
}

fn rank_of(value: FieldRef<'_>) -> Option<u32> {
    value.as_int().and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::model::Sym;

    fn writer(pid: u32) -> Who {
        Who {
            host: Some(Sym::new("node1")),
            pid: Some(pid),
            ..Who::default()
        }
    }

    /// A line's repeat key and channel ends.
    type KeyAndEnds = (Vec<u8>, Option<(u32, u32)>);

    /// The key and ends of a channel message as the accelerator lists it
    /// and as the regex path packs it.
    fn both_ways(grammar: &Grammar, body: &str, who: &Who) -> [KeyAndEnds; 2] {
        let mut list = FieldList::new();
        let pattern = grammar
            .accelerated_match(body.as_bytes(), 0, &mut list)
            .expect("the reader lists a channel line");
        let mut listed = Vec::new();
        let read = read_fields(&mut listed, pattern, who, &LineFields::Listed(&list));
        assert!(read.repeats);
        let fields = LineFields::Packed(list.to_fields());
        let mut packed = Vec::new();
        let read_packed = read_fields(&mut packed, pattern, who, &fields);
        [(listed, read.link), (packed, read_packed.link)]
    }

    #[test]
    fn a_channel_line_keys_alike_listed_or_packed_and_by_its_transport_nccl_2_19() {
        let g = Grammar::builtin().unwrap();
        let who = writer(7);
        let line = "Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA/Shared";
        let [listed, packed] = both_ways(&g, line, &who);
        assert_eq!(listed, packed);
        assert_eq!(listed.1, Some((0, 8)));
        // Another channel and peer: the same fact.
        let other_peer = "Channel 03/0 : 0[0] -> 16[0] [send] via NET/IB/0/GDRDMA/Shared";
        let [repeat, _] = both_ways(&g, other_peer, &who);
        assert_eq!(repeat.0, listed.0);
        assert_eq!(repeat.1, Some((0, 16)));
        // Another NIC, direction, transport or process: a new fact.
        for differs in [
            "Channel 00/1 : 0[0] -> 8[0] [send] via NET/IB/1/GDRDMA/Shared",
            "Channel 00/1 : 0[0] -> 8[0] [receive] via NET/IB/0/GDRDMA/Shared",
            "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        ] {
            let [other, other_packed] = both_ways(&g, differs, &who);
            assert_ne!(other.0, listed.0, "{differs}");
            assert_eq!(other, other_packed, "{differs}");
        }
        let [elsewhere, _] = both_ways(&g, line, &writer(8));
        assert_ne!(elsewhere.0, listed.0);
    }
}
