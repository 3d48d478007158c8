//! The cause texts of grammars/knowledge.toml are templates: `{name}` takes
//! a value of the verdict (host, device, rank …), and `{? … }` encloses an
//! optional part, left out whole when a name inside it has no value, so a
//! summary reads "Rank 3 never entered ALLREDUCE" rather than "Rank 3 on ?".

use std::collections::BTreeMap;

/// Fills a summary: a name without a value outside any optional part
/// becomes `?`.
pub fn fill_template(template: &str, values: &BTreeMap<&str, String>) -> String {
    fill_template_with(template, values, |_| "?".to_string())
}

/// Fills a template, writing `missing(name)` for a name without a value
/// outside any optional part (a remedy's command reads `<device>`).
pub fn fill_template_with(
    template: &str,
    values: &BTreeMap<&str, String>,
    missing: impl Fn(&str) -> String,
) -> String {
    let mut out = String::with_capacity(template.len());
    fill_part(template, values, &mut out, Some(&missing));
    out
}

/// Writes `part` into `out`. Inside an optional part (`missing` is `None`)
/// it stops at the first name without a value and returns false.
fn fill_part(
    part: &str,
    values: &BTreeMap<&str, String>,
    out: &mut String,
    missing: Option<&dyn Fn(&str) -> String>,
) -> bool {
    let mut rest = part;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(inner) = after.strip_prefix('?') {
            let Some(close) = matching_brace(inner) else {
                out.push('{');
                rest = after;
                continue;
            };
            let mut optional = String::new();
            if fill_part(&inner[..close], values, &mut optional, None) {
                out.push_str(&optional);
            }
            rest = &inner[close + 1..];
            continue;
        }
        match after.find('}').filter(|&c| is_name(&after[..c])) {
            Some(close) => {
                let name = &after[..close];
                match (values.get(name), missing) {
                    (Some(value), _) => out.push_str(value),
                    (None, Some(missing)) => out.push_str(&missing(name)),
                    (None, None) => return false,
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    true
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where the `}` closing an optional part is, counting the braces of the
/// names and optional parts nested in it.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    #[test]
    fn names_take_their_values_and_a_missing_one_is_marked() {
        let v = values(&[("host", "node5")]);
        assert_eq!(
            fill_template("on {host} port {port} {not a name}", &v),
            "on node5 port ? {not a name}"
        );
        let cmd = fill_template_with("ibstat {device} {port}", &v, |n| format!("<{n}>"));
        assert_eq!(cmd, "ibstat <device> <port>");
    }

    #[test]
    fn an_optional_part_goes_whole_when_a_name_in_it_has_no_value() {
        let t = "Rank {rank}{? on {host}} never entered {op}{? #{seq}}.";
        let known = values(&[
            ("rank", "3"),
            ("host", "n1"),
            ("op", "ALLREDUCE"),
            ("seq", "7"),
        ]);
        assert_eq!(
            fill_template(t, &known),
            "Rank 3 on n1 never entered ALLREDUCE #7."
        );
        let bare = values(&[("rank", "3"), ("op", "ALLREDUCE")]);
        assert_eq!(fill_template(t, &bare), "Rank 3 never entered ALLREDUCE.");
    }

    #[test]
    fn optional_parts_nest_and_an_unclosed_one_stays_text() {
        let t = "retries{? between {host}{? ({device}{? port {port}})}} ran out";
        let host = values(&[("host", "n1")]);
        assert_eq!(fill_template(t, &host), "retries between n1 ran out");
        let device = values(&[("host", "n1"), ("device", "mlx5_0")]);
        assert_eq!(
            fill_template(t, &device),
            "retries between n1 (mlx5_0) ran out"
        );
        let all = values(&[("host", "n1"), ("device", "mlx5_0"), ("port", "1")]);
        assert_eq!(
            fill_template(t, &all),
            "retries between n1 (mlx5_0 port 1) ran out"
        );
        assert_eq!(fill_template("a {? b", &host), "a {? b");
    }
}
