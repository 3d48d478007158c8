//! Lines that say again what one of the last few lines said.
//!
//! NCCL prints one connection line per channel and peer: runs of lines
//! that differ only in numbers (`Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM`,
//! `Channel 01/0 : …`, a peer's send and receive lines alternating, then
//! the next peer's). Such a line repeats the fact its run's first line
//! keeps and adds only its two ends, so reading it whole again (framing,
//! the accelerator, the repeat key) only to fold it is wasted. The memo
//! keeps the last few lines read in the line-by-line lane, what they came
//! to, and where the numbers lie that their pattern lets repeats differ in;
//! a line equal to one of them outside those numbers, with digits inside,
//! comes to the same event, with the ends its own digits say.
//!
//! Why that holds: the numbers lie inside the message, past every prefix,
//! and each is bounded by the same bytes as before, so the accelerator
//! would read the same fields in the same places, with other values only
//! in fields the repeat key passes over.

use std::ops::Range;

use crate::grammar::Pattern;
use crate::model::FieldList;

/// Lines remembered: a channel's send and receive lines alternate.
const ENTRIES: usize = 2;
/// Digit runs longer than this are not freed: a longer number may not fit
/// the integer the first one did, and the accelerator would decline it.
const MAX_FREE_DIGITS: usize = 9;

/// What a line came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Outcome {
    /// The event its fact is kept in.
    pub anchor: u32,
    /// A channel line's two ranks.
    pub link: Option<(u32, u32)>,
}

/// What a number a repeat may differ in is to the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Neither end: read by nothing a repeat comes to.
    Passed,
    Src,
    Dst,
}

#[derive(Default)]
struct Entry {
    line: Vec<u8>,
    /// Byte ranges of `line` whose digits may differ, in order.
    free: Vec<(Range<usize>, Role)>,
    outcome: Option<Outcome>,
}

impl Entry {
    /// What `line` comes to, if it equals this entry's line but for digits
    /// in its free ranges.
    fn recall(&self, line: &[u8]) -> Option<Outcome> {
        let mut outcome = self.outcome?;
        if line.len() != self.line.len() {
            return None;
        }
        let mut at = 0;
        for (run, role) in &self.free {
            let digits = &line[run.clone()];
            if line[at..run.start] != self.line[at..run.start]
                || !digits.iter().all(u8::is_ascii_digit)
            {
                return None;
            }
            if let (Some((src, dst)), Role::Src | Role::Dst) = (&mut outcome.link, role) {
                let rank = if *role == Role::Src { src } else { dst };
                *rank = decimal(digits)?;
            }
            at = run.end;
        }
        (line[at..] == self.line[at..]).then_some(outcome)
    }
}

/// The value of a run of at most `MAX_FREE_DIGITS` ASCII digits.
fn decimal(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &d| {
        n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

#[derive(Default)]
pub(super) struct RunMemo {
    entries: [Entry; ENTRIES],
    /// The entry written last.
    last: usize,
    /// Lines recalled (tests check the memo is used at all).
    #[cfg(test)]
    pub(super) hits: u64,
}

impl RunMemo {
    /// What `line` comes to, if it only repeats a remembered line.
    pub(super) fn recall(&mut self, line: &[u8]) -> Option<Outcome> {
        let outcome = (0..ENTRIES)
            .map(|i| &self.entries[(self.last + ENTRIES - i) % ENTRIES])
            .find_map(|e| e.recall(line))?;
        #[cfg(test)]
        {
            self.hits += 1;
        }
        Some(outcome)
    }

    /// Remembers a line an accelerator read into `fields` from `scope_start`
    /// on (the part of the line its pattern reads) and what it came to.
    pub(super) fn remember(
        &mut self,
        line: &[u8],
        scope_start: usize,
        pattern: &Pattern,
        fields: &FieldList<'_>,
        outcome: Outcome,
    ) {
        self.last = (self.last + 1) % ENTRIES;
        let entry = &mut self.entries[self.last];
        entry.line.clear();
        entry.line.extend_from_slice(line);
        entry.free.clear();
        let ends = pattern.listed_ends();
        for (slot, at) in fields.digit_runs() {
            let role = match ends {
                Some((src, _)) if slot == src => Role::Src,
                Some((_, dst)) if slot == dst => Role::Dst,
                _ => Role::Passed,
            };
            if pattern.ignores_listed(slot) && at.len() <= MAX_FREE_DIGITS {
                let at = scope_start + at.start..scope_start + at.end;
                entry.free.push((at, role));
            }
        }
        entry.free.sort_unstable_by_key(|(at, _)| at.start);
        entry.outcome = Some(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::parse::frame::frame;

    fn remember(grammar: &Grammar, memo: &mut RunMemo, line: &str, outcome: Outcome) {
        let line = line.as_bytes();
        let body_start = line.len() - frame(line, &Default::default()).body.len();
        let mut fields = FieldList::new();
        let pattern = grammar
            .accelerated_match(line, body_start, &mut fields)
            .expect("a channel line");
        let scope_start = pattern.scope_start(body_start);
        memo.remember(line, scope_start, pattern, &fields, outcome);
    }

    fn kept(anchor: u32, src: u32, dst: u32) -> Outcome {
        Outcome {
            anchor,
            link: Some((src, dst)),
        }
    }

    const FIRST: &str = "node1:7:9 [5] NCCL INFO Channel 00/1 : 120[0] -> 21[5] [receive] via NET/IB/5/GDRDMA/Shared";

    #[test]
    fn a_channel_line_is_recalled_where_only_its_channel_peers_and_devices_differ_nccl_2_19() {
        let g = Grammar::builtin().unwrap();
        let mut memo = RunMemo::default();
        remember(&g, &mut memo, FIRST, kept(3, 120, 21));
        let same_fact = FIRST.replace("00/1", "07/0").replace("120[0]", "131[1]");
        assert_eq!(memo.recall(same_fact.as_bytes()), Some(kept(3, 131, 21)));
        // Another NIC, process or host: another fact. Another width or a
        // non-digit: not known to read alike.
        for other in [
            FIRST.replace("NET/IB/5", "NET/IB/4"),
            FIRST.replace("node1:7:9", "node1:8:9"),
            FIRST.replace("node1", "node2"),
            FIRST.replace("120[0]", "1200[0]"),
            FIRST.replace("00/1", "0a/1"),
            FIRST.replace("[0]", "[a]"),
        ] {
            assert_eq!(memo.recall(other.as_bytes()), None, "{other}");
        }
        assert_eq!(memo.hits, 1);
    }

    #[test]
    fn the_last_two_lines_are_remembered_for_alternating_send_and_receive() {
        let g = Grammar::builtin().unwrap();
        let mut memo = RunMemo::default();
        let send = FIRST.replace("120[0] -> 21[5] [receive]", "21[5] -> 120[0] [send]");
        remember(&g, &mut memo, FIRST, kept(3, 120, 21));
        remember(&g, &mut memo, &send, kept(4, 21, 120));
        let next_receive = FIRST.replace("00/1", "01/1");
        let next_send = send.replace("00/1", "01/1");
        assert_eq!(memo.recall(next_receive.as_bytes()), Some(kept(3, 120, 21)));
        assert_eq!(memo.recall(next_send.as_bytes()), Some(kept(4, 21, 120)));
        let p2p = "node1:7:9 [5] NCCL INFO Channel 00/0 : 21[5] -> 22[6] via P2P/CUMEM";
        remember(&g, &mut memo, p2p, kept(5, 21, 22));
        assert_eq!(
            memo.recall(next_receive.as_bytes()),
            None,
            "the oldest is gone"
        );
        assert_eq!(memo.recall(next_send.as_bytes()), Some(kept(4, 21, 120)));
    }
}
