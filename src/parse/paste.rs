//! Undoing what pasting a log into a web page does to it, so lines copied out
//! of issue trackers and chat still parse: Markdown autolinks
//! (`transport/[net_ib.cc:101](http://net_ib.cc:101/)`), quote markers (`> `) and
//! a terminal viewer's box borders (`│ … │`);
//! and what a terminal does when two writers share it: a progress bar that
//! redraws itself without a newline, with the next message glued after it.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem;

/// Built once: building a searcher per line cost more than the search.
static AUTOLINK: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("](http"));

/// The line as it was before pasting; borrowed when nothing needed undoing.
pub fn unpaste(line: &[u8]) -> Cow<'_, [u8]> {
    let line = inside_box_borders(line);
    let quote = quote_markers(line);
    let linked = AUTOLINK.find(line).is_some();
    if quote == 0 && !linked {
        return Cow::Borrowed(line);
    }
    let line = &line[quote..];
    if !linked {
        return Cow::Borrowed(line);
    }
    Cow::Owned(strip_autolinks(line))
}

/// The length of the quote markers that start a line: `> `, a reply's
/// reply's `> > > ` or `>> ` (mail and forum quoting nests them), and a bare
/// `>` that quotes an empty line.
fn quote_markers(line: &[u8]) -> usize {
    let (mut at, mut whole) = (0, 0);
    while line.get(at) == Some(&b'>') {
        match line.get(at + 1) {
            Some(b' ') => {
                at += 2;
                whole = at;
            }
            Some(b'>') => at += 1,
            None => return line.len(),
            Some(_) => break,
        }
    }
    whole
}

/// A terminal viewer's frame around each line (k9s, `kubectl` in a TUI:
/// `│ text … │`, padded to the box's width), as copied from the screen.
fn inside_box_borders(line: &[u8]) -> &[u8] {
    const BAR: &[u8] = "│".as_bytes();
    let Some(inner) = line.strip_prefix(BAR) else {
        return line;
    };
    let inner = inner.strip_prefix(b" ").unwrap_or(inner);
    let trimmed = inner.trim_ascii_end();
    trimmed
        .strip_suffix(BAR)
        .map_or(inner, <[u8]>::trim_ascii_end)
}

/// Where a progress bar's last redraw ends and another message glued to it
/// begins (`… 1582/1818 [30:02<04:26,  1.13s/it][E ProcessGroupNCCL.cpp:828] …`):
/// the byte after the bar's closing bracket, when a bracket opens there.
pub fn glued_after_progress_bar(line: &[u8]) -> Option<usize> {
    let close = memmem::find(line, b"][")?;
    let open = memchr::memrchr(b'[', &line[..close])?;
    let cell = &line[open + 1..close];
    // tqdm's cell: `elapsed<remaining, rate` or `elapsed, rate`.
    let rate = memmem::find(cell, b"/s").is_some() || memmem::find(cell, b"s/it").is_some();
    let clock = cell.first().is_some_and(u8::is_ascii_digit) && cell.contains(&b':');
    (rate && clock && cell.len() <= 80 && close + 1 < line.len()).then_some(close + 1)
}

/// `[text](http…)` → `text`, wherever a link closes with `)`.
fn strip_autolinks(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if line[i] == b'['
            && let Some(len) = autolink_at(&line[i..], &mut out)
        {
            i += len;
            continue;
        }
        out.push(line[i]);
        i += 1;
    }
    out
}

/// If `s` starts with `[text](http…)`, appends `text` and returns the length.
fn autolink_at(s: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let close = memchr::memchr(b']', s)?;
    let text = &s[1..close];
    if text.contains(&b'[') || !s[close + 1..].starts_with(b"(http") {
        return None;
    }
    let end = memchr::memchr(b')', &s[close..])? + close;
    out.extend_from_slice(text);
    Some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_quote_markers_are_undone() {
        let line = b"> > > node5:104:204 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB";
        assert_eq!(
            &*unpaste(line),
            &b"node5:104:204 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB"[..]
        );
        assert_eq!(&*unpaste(b">> node5:1:2 [0] x"), &b"node5:1:2 [0] x"[..]);
        assert_eq!(&*unpaste(b">"), &b""[..]);
        // Not quote markers: a comparison, an arrow.
        assert_eq!(&*unpaste(b">>x"), &b">>x"[..]);
        assert_eq!(&*unpaste(b">x > y"), &b">x > y"[..]);
    }

    #[test]
    fn markdown_autolinks_and_quotes_are_undone() {
        let line = b"> node023:10214:10303 [0] transport/[net_ib.cc:1909](http://net_ib.cc:1909/) NCCL WARN NET/IB : Got completion from peer [10.1.3.201](http://10.1.3.201/)<33057> with status=9";
        assert_eq!(
            &*unpaste(line),
            &b"node023:10214:10303 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer 10.1.3.201<33057> with status=9"[..]
        );
    }

    #[test]
    fn a_terminal_viewers_box_borders_are_not_part_of_the_line() {
        let line = "│ node2:202:202 [0] NCCL INFO Init COMPLETE            │".as_bytes();
        assert_eq!(
            &*unpaste(line),
            b"node2:202:202 [0] NCCL INFO Init COMPLETE"
        );
        // Cut at the box's width: no closing border.
        let line = "│ node2:202:202 [0] NCCL WARN cut".as_bytes();
        assert_eq!(&*unpaste(line), b"node2:202:202 [0] NCCL WARN cut");
        assert!(matches!(unpaste(line), Cow::Borrowed(_)));
    }

    #[test]
    fn a_message_glued_after_a_progress_bar_starts_after_its_bracket() {
        let line = b" 87%|####     | 1582/1818 [30:02<04:26,  1.13s/it][E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog";
        let at = glued_after_progress_bar(line).unwrap();
        assert!(line[at..].starts_with(b"[E ProcessGroupNCCL.cpp:828]"));
        let line = b"Generating train split: 2230000 examples [29:59, 1466.92 examples/s][E ProcessGroupNCCL.cpp:475] x";
        assert!(glued_after_progress_bar(line).is_some());
        // Brackets that are no bar's cell, and a bar alone, are left whole.
        assert_eq!(glued_after_progress_bar(b"[rank0]:[E x] [Rank 0] y"), None);
        assert_eq!(glued_after_progress_bar(b"a [PG 0 Rank 1][x] b"), None);
        assert_eq!(
            glued_after_progress_bar(b" 87%| | 1/2 [30:02<04:26,  1.13s/it]"),
            None
        );
    }

    #[test]
    fn ordinary_lines_are_borrowed_untouched() {
        assert!(matches!(unpaste(b"[rank0]:[E x] y"), Cow::Borrowed(_)));
        assert_eq!(&*unpaste(b"[1] a](b"), b"[1] a](b");
    }
}
