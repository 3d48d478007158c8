//! Hand-written matchers for the patterns that match most lines.
//!
//! On a large job nine lines in ten are NCCL channel lines, and running a
//! capturing regex on each cost half of the whole analysis; the lines every
//! rank prints once (communicator init, trees, watchdog reports) cost
//! microseconds each through a regex with many optional groups. An
//! accelerator reads such a line directly. It is only a faster way to run
//! its pattern's regex: where the line is not in the exact form it knows it
//! declines and the regex decides, and where it answers, its fields must be
//! the regex's. The self-test checks that on every sample of the pattern,
//! and tests/accelerator.rs on every corpus line holding a pattern's literal
//! and on generated lines around each form's edges.

mod nccl;
mod reader;
mod torch;

use std::ops::Range;

use crate::model::FieldList;

/// How an accelerator answers for its regex.
#[derive(Debug, Clone, Copy)]
pub enum Accelerator {
    /// Lists the fields itself, borrowed from the line and unpacked: for
    /// channel lines, which are nearly all repeats that are never kept.
    /// `false` (the list then holds nothing of use) leaves the line to the
    /// regex.
    Fields(ListFields),
    /// Finds where each named group of the regex would match; the pattern's
    /// field kinds then convert them exactly as after the regex. `false`
    /// leaves the line to the regex.
    Spans(fn(&[u8], &mut Spans) -> bool),
}

/// A reader that lists a line's fields, borrowed from the line, each by
/// its slot in `names` (sorted: the order `Fields` keeps).
#[derive(Clone, Copy)]
pub struct ListFields {
    pub names: &'static [&'static str],
    pub read: for<'a> fn(&'a [u8], &mut FieldList<'a>) -> bool,
}

impl ListFields {
    /// Reads `body` into `fields` (emptied first).
    pub fn list<'a>(&self, body: &'a [u8], fields: &mut FieldList<'a>) -> bool {
        fields.reset(self.names);
        (self.read)(body, fields)
    }
}

impl std::fmt::Debug for ListFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListFields")
            .field("names", &self.names)
            .finish()
    }
}

/// The accelerator a grammar names (`accelerator = "…"`), if it exists.
pub fn by_name(name: &str) -> Option<Accelerator> {
    use Accelerator::{Fields, Spans};
    Some(match name {
        "nccl_channel" => Fields(ListFields {
            names: nccl::CHANNEL_FIELDS,
            read: nccl::channel,
        }),
        "nccl_comm_init" => Spans(nccl::comm_init),
        "nccl_comm_layout" => Spans(nccl::comm_layout),
        "nccl_trees" => Spans(nccl::trees),
        "nccl_net_ib" => Spans(nccl::net_ib),
        "torch_watchdog_timeout" => Spans(torch::watchdog_timeout),
        "torch_watchdog_exception" => Spans(torch::watchdog_exception),
        "torch_process_taken_down" => Spans(torch::process_taken_down),
        "torch_exception_origin" => Spans(torch::exception_origin),
        _ => return None,
    })
}

/// Where the named groups of a regex matched in a message, as an
/// accelerator found them (a group that took no part is absent).
#[derive(Debug)]
pub struct Spans {
    found: [(&'static str, usize, usize); Spans::MAX],
    len: usize,
}

impl Spans {
    /// More named groups than any accelerated regex has.
    pub const MAX: usize = 16;

    pub fn new() -> Spans {
        Spans {
            found: [("", 0, 0); Spans::MAX],
            len: 0,
        }
    }

    /// Forgets every group found.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Records where group `name` matched; `None` when there is no room
    /// (the accelerator then declines).
    pub fn set(&mut self, name: &'static str, at: Range<usize>) -> Option<()> {
        let slot = self.found.get_mut(self.len)?;
        *slot = (name, at.start, at.end);
        self.len += 1;
        Some(())
    }

    /// Where group `name` matched, if it took part.
    pub fn get(&self, name: &str) -> Option<(usize, usize)> {
        self.found[..self.len]
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, s, e)| (s, e))
    }
}

impl Default for Spans {
    fn default() -> Self {
        Spans::new()
    }
}

/// ASCII bytes in the regex's (Unicode) `\s`: unlike
/// `u8::is_ascii_whitespace`, it includes the vertical tab.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// The regex's `\w` on ASCII.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
