//! NCCL versions as they appear in logs and in the defect list, and the
//! version ranges a defect affects.
//!
//! What a version string may carry after `MAJOR.MINOR.PATCH`:
//! - `+cuda12.2` (build metadata) or `-1` (package revision): ignored;
//! - letters then digits (`a1`, `rc2`): a pre-release, which sorts *before*
//!   the release (`2.30.6a1 < 2.30.6`): it may not hold a fix the release has;
//! - letters alone (`2.21.5a`): a site's own build of that release, equal to it.

use std::cmp::Ordering;
use std::fmt;

/// Release stage: every pre-release sorts before the release itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Stage {
    Pre(u32),
    Release,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NcclVersion {
    major: u32,
    minor: u32,
    patch: u32,
    stage: Stage,
}

impl NcclVersion {
    /// Reads `2.18.3`, `2.18.3+cuda12.2`, `2.18.3-1`, `2.21.5a`, `2.30.6a1`;
    /// `None` for anything without three numeric components.
    pub fn parse(text: &str) -> Option<NcclVersion> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let core_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let mut parts = text[..core_end].split('.');
        let mut num = || parts.next().and_then(|p| p.parse::<u32>().ok());
        let (major, minor, patch) = (num()?, num()?, num()?);
        if parts.next().is_some() {
            return None;
        }
        Some(NcclVersion {
            major,
            minor,
            patch,
            stage: stage_of(&text[core_end..]),
        })
    }

    pub fn is_prerelease(&self) -> bool {
        matches!(self.stage, Stage::Pre(_))
    }
}

/// The stage a suffix names: `a1`/`rc2` pre-release, anything else the release.
fn stage_of(suffix: &str) -> Stage {
    let tag = suffix.split(['+', '-']).next().unwrap_or("");
    let letters = tag.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = &tag[letters.len()..];
    let is_pre = !letters.is_empty()
        && letters.chars().all(|c| c.is_ascii_alphabetic())
        && !digits.is_empty();
    match digits.parse() {
        Ok(n) if is_pre => Stage::Pre(n),
        _ => Stage::Release,
    }
}

impl Ord for NcclVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch, self.stage).cmp(&(
            other.major,
            other.minor,
            other.patch,
            other.stage,
        ))
    }
}

impl PartialOrd for NcclVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        match self.stage {
            Stage::Pre(n) => write!(f, "a{n}"),
            Stage::Release => Ok(()),
        }
    }
}

/// One end of a range: the version and whether it is included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub version: NcclVersion,
    pub inclusive: bool,
}

/// The versions a defect affects: bounds (`>=2.18.1, <2.18.3`) or an
/// explicit list (`2.20.3, 2.20.5`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRange {
    Bounds {
        lower: Option<Bound>,
        upper: Option<Bound>,
    },
    List(Vec<NcclVersion>),
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<VersionRange, String> {
        let mut lower = None;
        let mut upper = None;
        let mut list = Vec::new();
        for term in text.split(',').map(str::trim) {
            let (op, rest) = split_operator(term);
            let version =
                NcclVersion::parse(rest).ok_or_else(|| format!("`{term}` is not a version"))?;
            let slot = match op {
                ">=" | ">" => &mut lower,
                "<=" | "<" => &mut upper,
                _ => {
                    list.push(version);
                    continue;
                }
            };
            if slot.is_some() {
                return Err(format!("`{text}` gives a bound twice"));
            }
            *slot = Some(Bound {
                version,
                inclusive: op.ends_with('='),
            });
        }
        match (list.is_empty(), lower.is_none() && upper.is_none()) {
            (true, false) => Ok(VersionRange::Bounds { lower, upper }),
            (false, true) => Ok(VersionRange::List(list)),
            (false, false) => Err(format!("`{text}` mixes bounds and a list")),
            (true, true) => Err("empty range".into()),
        }
    }

    pub fn contains(&self, v: &NcclVersion) -> bool {
        match self {
            VersionRange::List(list) => list.contains(v),
            VersionRange::Bounds { lower, upper } => {
                let above = lower.is_none_or(|b| {
                    if b.inclusive {
                        *v >= b.version
                    } else {
                        *v > b.version
                    }
                });
                let below = upper.is_none_or(|b| {
                    if b.inclusive {
                        *v <= b.version
                    } else {
                        *v < b.version
                    }
                });
                above && below
            }
        }
    }

    /// Why a range cannot describe a fixed defect, if it cannot: it must have
    /// both ends, hold some version, and end at or before the fix.
    pub fn check_fixed_in(&self, fixed_in: &NcclVersion) -> Result<(), String> {
        match self {
            VersionRange::List(list) => match list.iter().max() {
                Some(max) if max < fixed_in => Ok(()),
                _ => Err(format!(
                    "fixed_in {fixed_in} is not after every listed version"
                )),
            },
            VersionRange::Bounds { lower, upper } => {
                let (Some(lo), Some(up)) = (lower, upper) else {
                    return Err("a range needs a lower and an upper bound".into());
                };
                let empty = match (lo.inclusive, up.inclusive) {
                    (true, true) => lo.version > up.version,
                    _ => lo.version >= up.version,
                };
                if empty {
                    return Err("the range holds no version".into());
                }
                let after = if up.inclusive {
                    *fixed_in > up.version
                } else {
                    *fixed_in >= up.version
                };
                if !after || self.contains(fixed_in) {
                    return Err(format!("fixed_in {fixed_in} is not after the range"));
                }
                Ok(())
            }
        }
    }
}

fn split_operator(term: &str) -> (&str, &str) {
    for op in [">=", "<=", ">", "<", "="] {
        if let Some(rest) = term.strip_prefix(op) {
            return (op, rest.trim());
        }
    }
    ("", term)
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionRange::List(list) => {
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                f.write_str(&items.join(", "))
            }
            VersionRange::Bounds { lower, upper } => {
                let mut parts = Vec::new();
                if let Some(b) = lower {
                    parts.push(format!(
                        ">{}{}",
                        if b.inclusive { "=" } else { "" },
                        b.version
                    ));
                }
                if let Some(b) = upper {
                    parts.push(format!(
                        "<{}{}",
                        if b.inclusive { "=" } else { "" },
                        b.version
                    ));
                }
                f.write_str(&parts.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> NcclVersion {
        NcclVersion::parse(s).unwrap()
    }

    #[test]
    fn suffixes_build_tags_and_prereleases() {
        assert_eq!(v("2.18.3+cuda12.2"), v("2.18.3"));
        assert_eq!(v("2.18.3-1"), v("2.18.3"));
        assert_eq!(v("v2.18.3"), v("2.18.3"));
        // A site build tag is the release itself.
        assert_eq!(v("2.21.5a"), v("2.21.5"));
        assert_eq!(v("2.21.5a+cuda12.4"), v("2.21.5"));
        // A pre-release comes before its release, after the one before.
        assert!(v("2.30.6a1") < v("2.30.6"));
        assert!(v("2.30.6a1") > v("2.30.5"));
        assert!(v("2.30.6a1") < v("2.30.6a2"));
        assert!(v("2.31.0a7") < v("2.31.0"));
        assert!(v("2.30.6a1").is_prerelease());
        assert_eq!(v("2.30.6a1").to_string(), "2.30.6a1");
        // Numeric, not lexical, order.
        assert!(v("2.9.9") < v("2.10.3"));
        assert!(v("2.18.10") > v("2.18.3"));
    }

    #[test]
    fn malformed_versions_are_rejected() {
        for bad in ["", "2", "2.18", "2.x.3", "2.18.3.4", "latest", "2..3"] {
            assert!(NcclVersion::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn bounds_are_inclusive_below_and_exclusive_above() {
        let r = VersionRange::parse(">=2.18.1, <2.18.3").unwrap();
        assert!(r.contains(&v("2.18.1")));
        assert!(r.contains(&v("2.18.1+cuda12.1")));
        assert!(r.contains(&v("2.18.2")));
        assert!(!r.contains(&v("2.18.3")));
        assert!(!r.contains(&v("2.18.3+cuda12.2")));
        assert!(!r.contains(&v("2.17.1")));
        // The pre-release of the lower bound predates it; that of the fix does not.
        assert!(!r.contains(&v("2.18.1a2")));
        assert!(r.contains(&v("2.18.3a1")));
        let r = VersionRange::parse(">2.18.1, <=2.18.3").unwrap();
        assert!(!r.contains(&v("2.18.1")));
        assert!(r.contains(&v("2.18.3")));
        assert_eq!(r.to_string(), ">2.18.1, <=2.18.3");
    }

    #[test]
    fn explicit_lists_hold_only_their_versions() {
        let r = VersionRange::parse("2.28.3, =2.27.7").unwrap();
        assert!(r.contains(&v("2.28.3+cuda12.9")));
        assert!(r.contains(&v("2.27.7")));
        assert!(!r.contains(&v("2.28.4")));
        assert!(r.check_fixed_in(&v("2.28.7")).is_ok());
        assert!(r.check_fixed_in(&v("2.28.3")).is_err());
    }

    #[test]
    fn ranges_that_cannot_describe_a_fixed_defect_are_rejected() {
        assert!(VersionRange::parse("").is_err());
        assert!(VersionRange::parse(">=2.18.1, 2.18.2").is_err());
        assert!(VersionRange::parse(">=2.18.1, >=2.18.2").is_err());
        assert!(VersionRange::parse(">=two").is_err());
        let check =
            |r: &str, fixed: &str| VersionRange::parse(r).unwrap().check_fixed_in(&v(fixed));
        assert!(check(">=2.18.1, <2.18.3", "2.18.3").is_ok());
        assert!(check(">=2.18.1, <2.18.3", "2.18.2").is_err());
        assert!(check(">=2.18.1, <=2.18.3", "2.18.3").is_err());
        assert!(check(">=2.18.1", "2.19.1").is_err());
        assert!(check("<2.18.3", "2.18.3").is_err());
        assert!(check(">=2.18.3, <2.18.3", "2.19.1").is_err());
        assert!(check(">=2.18.3, <=2.18.3", "2.19.1").is_ok());
    }
}
