//! `[[nccl_cuda_failure]]` of knowledge.toml: NCCL's own CUDA failures that
//! say the install or the platform does not fit the job.

use serde::Deserialize;
use std::collections::BTreeSet;

use super::nccl_bugs::NcclVersion;

/// One kind of NCCL CUDA failure and the `config_mismatch` it makes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NcclCudaFailure {
    /// The `config_mismatch` variant it makes.
    pub variant: String,
    /// Where the error came from, for the finding's detail.
    pub from: String,
    pub weight: f64,
    pub why: String,
    /// CUDA error texts that name it (lower-cased on load).
    errors: Vec<String>,
    /// Whether an error must be one of `errors` whole, not merely hold one.
    #[serde(default)]
    whole: bool,
    /// The NCCL source file the failing line must come from (`init.cc`).
    #[serde(default)]
    source_file: Option<String>,
    /// The first NCCL release that makes the failing call.
    #[serde(default)]
    from_release: Option<String>,
}

impl NcclCudaFailure {
    pub(super) fn lower_errors(mut self) -> Self {
        for e in &mut self.errors {
            *e = e.to_ascii_lowercase();
        }
        self
    }

    /// Whether a CUDA error text is one of this failure's.
    pub fn names(&self, error: &str) -> bool {
        let lower = error.to_ascii_lowercase();
        let lower = lower.trim();
        self.errors.iter().any(|e| match self.whole {
            true => lower == e,
            false => lower.contains(e.as_str()),
        })
    }

    /// Whether a line comes from the source file this failure needs
    /// (`init.cc:417 NCCL WARN …`, `…/transport/p2p.cc:280 …`); any line
    /// where none is named.
    pub fn from_source(&self, text: &str) -> bool {
        let Some(file) = &self.source_file else {
            return true;
        };
        let needle = format!("{file}:");
        text.match_indices(&needle).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            before.is_none_or(|c| c == ' ' || c == '/' || c == ']')
        })
    }

    /// Whether releases the logs print rule it out: every one is older
    /// than the first that makes the call.
    pub fn ruled_out_by(&self, releases: &BTreeSet<String>) -> bool {
        let Some(from) = self.from_release.as_deref().and_then(NcclVersion::parse) else {
            return false;
        };
        !releases.is_empty()
            && releases
                .iter()
                .all(|v| NcclVersion::parse(v).is_some_and(|r| r < from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(whole: bool, source: Option<&str>, from: Option<&str>) -> NcclCudaFailure {
        NcclCudaFailure {
            variant: "v".into(),
            from: "f".into(),
            weight: 0.5,
            why: "w".into(),
            errors: vec!["Invalid Argument".into()],
            whole,
            source_file: source.map(str::to_string),
            from_release: from.map(str::to_string),
        }
        .lower_errors()
    }

    #[test]
    fn a_whole_error_must_match_all_of_it() {
        let f = failure(true, None, None);
        assert!(f.names("invalid argument"));
        assert!(!f.names("invalid argument in cuMemMap"));
        assert!(failure(false, None, None).names("an invalid argument here"));
    }

    #[test]
    fn the_source_file_must_be_a_whole_file_name() {
        let f = failure(true, Some("p2p.cc"), None);
        assert!(f.from_source("node1:7:7 [0] transport/p2p.cc:280 NCCL WARN Cuda failure"));
        assert!(f.from_source("p2p.cc:280 NCCL WARN Cuda failure"));
        assert!(!f.from_source("nvls_p2p.cc:280 NCCL WARN Cuda failure"));
        assert!(!f.from_source("init.cc:417 NCCL WARN Cuda failure"));
    }

    #[test]
    fn only_older_releases_rule_a_failure_out() {
        let f = failure(true, None, Some("2.23.4"));
        let r = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert!(f.ruled_out_by(&r(&["2.21.5", "2.18.1"])));
        assert!(!f.ruled_out_by(&r(&["2.21.5", "2.23.4"])));
        assert!(!f.ruled_out_by(&BTreeSet::new()));
        assert!(!failure(true, None, None).ruled_out_by(&r(&["2.4.8"])));
    }
}
