//! Message grammars: the knowledge of what log lines mean, loaded from data.
//!
//! The built-in grammars (`grammars/*.toml`) are embedded in the binary; users add
//! their own with `--grammar FILE`. All patterns are compiled once into a
//! [`Grammar`]: an Aho-Corasick automaton over every pattern's literals finds the
//! few lines worth a regex, then the candidate patterns' regexes run in priority
//! order on those lines only.

mod accel;
mod compile;
pub mod counters;
mod fields;
pub mod knowledge;
pub mod nccl_bugs;
pub mod nccl_cuda;
pub mod release_marks;
pub mod sockets;
pub mod spec;
pub mod template;

pub use compile::{Grammar, KeepLast, Match, MatchScratch, Pattern, PatternIdx};
pub use fields::{convert_field, normalize_bus_id};

use std::path::PathBuf;

/// The grammars shipped with ncclpm, as (file name, text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("nccl.toml", include_str!("../../grammars/nccl.toml")),
    ("torch.toml", include_str!("../../grammars/torch.toml")),
    (
        "tensorflow.toml",
        include_str!("../../grammars/tensorflow.toml"),
    ),
    (
        "launcher.toml",
        include_str!("../../grammars/launcher.toml"),
    ),
    ("kernel.toml", include_str!("../../grammars/kernel.toml")),
    (
        "nccl_tests.toml",
        include_str!("../../grammars/nccl_tests.toml"),
    ),
    ("horovod.toml", include_str!("../../grammars/horovod.toml")),
    (
        "frameworks.toml",
        include_str!("../../grammars/frameworks.toml"),
    ),
    ("ucx.toml", include_str!("../../grammars/ucx.toml")),
    ("stacks.toml", include_str!("../../grammars/stacks.toml")),
    ("host.toml", include_str!("../../grammars/host.toml")),
];

#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    #[error("cannot read grammar file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("grammar {file}: invalid TOML")]
    Toml {
        file: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("grammar {file}: pattern {id}: {reason}")]
    Pattern {
        file: String,
        id: String,
        reason: String,
    },
    #[error("grammar {file}: pattern {id}: invalid regex")]
    Regex {
        file: String,
        id: String,
        #[source]
        source: regex::Error,
    },
    #[error("grammar literal prefilter could not be built")]
    Prefilter(#[source] aho_corasick::BuildError),
}

/// Reads one grammar or knowledge file's TOML into its spec type.
pub(crate) fn read_toml<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<T, GrammarError> {
    toml::from_str(text).map_err(|source| GrammarError::Toml {
        file: file.into(),
        source,
    })
}

/// Reads user grammar files from disk, to be compiled with the built-in ones.
pub fn read_user_grammars(paths: &[PathBuf]) -> Result<Vec<(String, String)>, GrammarError> {
    paths
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|text| (p.display().to_string(), text))
                .map_err(|source| GrammarError::Read {
                    path: p.clone(),
                    source,
                })
        })
        .collect()
}
