//! A cursor over the ASCII text of one message, for the accelerators.

use std::ops::Range;

/// A cursor over ASCII text; anything outside ASCII makes the reader give
/// up, since the regex's `\d`, `\s` and `\w` are Unicode classes.
pub(super) struct Reader<'a> {
    pub(super) s: &'a [u8],
    pub(super) at: usize,
    /// `s` as text when it is valid UTF-8 (checked once, not per field:
    /// a channel line gives five text fields).
    text: Option<&'a str>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(s: &'a [u8]) -> Reader<'a> {
        Reader {
            s,
            at: 0,
            text: std::str::from_utf8(s).ok(),
        }
    }

    /// The text of `s[range]`, where it is valid UTF-8.
    pub(super) fn str_at(&self, range: Range<usize>) -> Option<&'a str> {
        match self.text {
            Some(text) => text.get(range),
            None => std::str::from_utf8(self.s.get(range)?).ok(),
        }
    }

    pub(super) fn rest(&self) -> &'a [u8] {
        &self.s[self.at..]
    }

    // Inlined so each literal's length is known where it is compared: a
    // call into `memcmp` for a few bytes showed in profiles.
    #[inline(always)]
    pub(super) fn eat(&mut self, lit: &[u8]) -> bool {
        let hit = self.rest().starts_with(lit);
        if hit {
            self.at += lit.len();
        }
        hit
    }

    #[inline(always)]
    pub(super) fn expect(&mut self, lit: &[u8]) -> Option<()> {
        self.eat(lit).then_some(())
    }

    /// The longest run of bytes that `keep` accepts (`None` when a
    /// non-ASCII byte ends it: the regex might read on).
    pub(super) fn run(&mut self, keep: impl Fn(u8) -> bool) -> Option<&'a str> {
        let rest = self.rest();
        let len = rest
            .iter()
            .take_while(|&&b| b.is_ascii() && keep(b))
            .count();
        if rest.get(len).is_some_and(|b| !b.is_ascii()) {
            return None;
        }
        let start = self.at;
        self.at += len;
        self.str_at(start..self.at)
    }

    /// `\d+` as a field of kind int (a value too large for one stays text in
    /// the regex path, so the reader gives up on it).
    pub(super) fn int(&mut self) -> Option<i64> {
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

    /// [`Reader::int`], and where its digits lie.
    pub(super) fn int_at(&mut self) -> Option<(i64, Range<usize>)> {
        let start = self.at;
        let value = self.int()?;
        Some((value, start..self.at))
    }

    /// The longest run of bytes `keep` accepts, where it lies (the body is
    /// known to be ASCII).
    pub(super) fn span(&mut self, keep: impl Fn(u8) -> bool) -> Range<usize> {
        let start = self.at;
        self.at += self.rest().iter().take_while(|&&b| keep(b)).count();
        start..self.at
    }

    /// A run of at least one byte `keep` accepts.
    pub(super) fn span1(&mut self, keep: impl Fn(u8) -> bool) -> Option<Range<usize>> {
        let span = self.span(keep);
        (!span.is_empty()).then_some(span)
    }

    /// `\d+`, where it lies.
    pub(super) fn digits(&mut self) -> Option<Range<usize>> {
        self.span1(|b| b.is_ascii_digit())
    }

    /// `-?\d+`, where it lies.
    pub(super) fn signed_digits(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        self.eat(b"-");
        match self.digits() {
            Some(span) => Some(start..span.end),
            None => {
                self.at = start;
                None
            }
        }
    }

    /// `\s*`.
    pub(super) fn skip_spaces(&mut self) {
        self.span(super::is_space);
    }
}
