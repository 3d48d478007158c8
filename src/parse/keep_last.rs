//! Patterns that keep only their last matches (`keep_last` in a grammar).
//!
//! NCCL's call trace (`NCCL_DEBUG_SUBSYS=COLL`) prints a line for every
//! collective a process calls: millions in a long run, of which what
//! matters is where each caller stopped. Such matches are held aside, the
//! last few per process and key, and put back among the file's events in
//! line order when the file (or its part) ends. The first match kept after
//! others were let go says how many (`earlier`), so a reader knows the
//! window does not start at the first call.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::grammar::Pattern;
use crate::model::{Event, Value};

use super::repeat_key::put_writer;
use super::scan::FileParse;

/// The name of the field that counts the matches let go before a kept one.
pub const EARLIER: &str = "earlier";

#[derive(Debug, Default)]
pub(super) struct Held {
    by_key: FxHashMap<Box<[u8]>, Recent>,
    key: Vec<u8>,
}

#[derive(Debug, Default)]
struct Recent {
    events: VecDeque<Event>,
    dropped: u64,
}

impl Held {
    /// Holds `event` of `pattern` (which keeps its last matches), letting go
    /// of the oldest held for the same key once more than it keeps are held.
    pub(super) fn hold(&mut self, pattern: &Pattern, event: Event) {
        let Some(keep) = &pattern.keep_last else {
            return;
        };
        self.key.clear();
        put_writer(&mut self.key, pattern, &event.who);
        for name in &keep.per {
            match event.fields.get(name) {
                Some(Value::Int(n)) => self.key.extend_from_slice(&n.to_le_bytes()),
                Some(Value::Text(t)) => {
                    self.key.extend_from_slice(&(t.len() as u64).to_le_bytes());
                    self.key.extend_from_slice(t.as_bytes());
                }
                _ => self.key.push(0xff),
            }
        }
        let recent = match self.by_key.get_mut(self.key.as_slice()) {
            Some(recent) => recent,
            None => self.by_key.entry(self.key.as_slice().into()).or_default(),
        };
        recent.events.push_back(event);
        if recent.events.len() > keep.count {
            recent.events.pop_front();
            recent.dropped += 1;
        }
    }

    /// Puts the held matches among `out`'s events by line number; the
    /// links' anchors follow the events they point at.
    pub(super) fn release(self, out: &mut FileParse) {
        let mut held: Vec<Event> = Vec::new();
        for recent in self.by_key.into_values() {
            let dropped = recent.dropped;
            for (i, mut event) in recent.events.into_iter().enumerate() {
                if i == 0 && dropped > 0 {
                    event.fields.insert(EARLIER, Value::Int(dropped as i64));
                }
                held.push(event);
            }
        }
        if held.is_empty() {
            return;
        }
        held.sort_by_key(|e| e.origin.line);
        let events = std::mem::take(&mut out.events);
        let mut new_index = Vec::with_capacity(events.len());
        let mut merged = Vec::with_capacity(events.len() + held.len());
        let mut held = held.into_iter().peekable();
        for event in events {
            while let Some(h) = held.next_if(|h| h.origin.line < event.origin.line) {
                merged.push(h);
            }
            new_index.push(merged.len() as u32);
            merged.push(event);
        }
        merged.extend(held);
        for link in &mut out.links {
            if let Some(&at) = new_index.get(link.anchor as usize) {
                link.anchor = at;
            }
        }
        out.events = merged;
    }
}
