//! Undoing what pasting a log into a web page does to it, so lines copied out
//! of issue trackers and chat still parse: Markdown autolinks
//! (`transport/[net_ib.cc:101](http://net_ib.cc:101/)`) and quote markers (`> `).

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem;

/// Built once: building a searcher per line cost more than the search.
static AUTOLINK: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("](http"));

/// The line as it was before pasting; borrowed when nothing needed undoing.
pub fn unpaste(line: &[u8]) -> Cow<'_, [u8]> {
    let quoted = line.starts_with(b"> ") || line == b">";
    let linked = AUTOLINK.find(line).is_some();
    if !quoted && !linked {
        return Cow::Borrowed(line);
    }
    let line = if quoted {
        &line[line.len().min(2)..]
    } else {
        line
    };
    if !linked {
        return Cow::Borrowed(line);
    }
    Cow::Owned(strip_autolinks(line))
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
    fn markdown_autolinks_and_quotes_are_undone() {
        let line = b"> node023:10214:10303 [0] transport/[net_ib.cc:1909](http://net_ib.cc:1909/) NCCL WARN NET/IB : Got completion from peer [10.1.3.201](http://10.1.3.201/)<33057> with status=9";
        assert_eq!(
            &*unpaste(line),
            &b"node023:10214:10303 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer 10.1.3.201<33057> with status=9"[..]
        );
    }

    #[test]
    fn ordinary_lines_are_borrowed_untouched() {
        assert!(matches!(unpaste(b"[rank0]:[E x] y"), Cow::Borrowed(_)));
        assert_eq!(&*unpaste(b"[1] a](b"), b"[1] a](b");
    }
}
