//! Finding the jobs under a batch root, and telling when one changed.
//!
//! By default a job is each entry directly under the root: a folder, or a
//! file (an archive or a single log). `--job-glob` replaces that with a glob
//! over paths relative to the root (`*/*` for `cluster/job-123/`), for
//! archives laid out deeper. Job ids are the relative paths made safe for a
//! folder name; fingerprints hash every file's path, size and modification
//! time, so a rerun re-analyses only new or changed jobs. A symbolic link
//! at the jobs' level is a job where it leads to a folder or a file (an
//! archive of links into the real storage); inside a job, links are not
//! followed (`ingest::discover`).

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use walkdir::WalkDir;

/// One job to analyse.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct JobInput {
    pub id: String,
    /// Path relative to the batch root.
    pub rel: String,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error("cannot list {path}")]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid --job-glob `{glob}`")]
    Glob {
        glob: String,
        #[source]
        source: globset::Error,
    },
}

/// The jobs under `root`, sorted by id.
pub fn find_jobs(root: &Path, glob: Option<&str>) -> Result<Vec<JobInput>, JobsError> {
    let rels = match glob {
        None => children(root)?,
        Some(g) => glob_matches(root, g)?,
    };
    let mut jobs: Vec<JobInput> = rels
        .into_iter()
        .map(|rel| JobInput {
            id: job_id(&rel),
            path: root.join(&rel),
            rel,
        })
        .collect();
    jobs.sort();
    jobs.dedup_by(|a, b| a.id == b.id);
    Ok(jobs)
}

fn children(root: &Path) -> Result<Vec<String>, JobsError> {
    let entries = std::fs::read_dir(root).map_err(|source| JobsError::List {
        path: root.to_path_buf(),
        source,
    })?;
    Ok(entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| is_job(&e.path(), t)))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect())
}

fn glob_matches(root: &Path, glob: &str) -> Result<Vec<String>, JobsError> {
    let matcher: GlobMatcher = Glob::new(glob)
        .map_err(|source| JobsError::Glob {
            glob: glob.to_string(),
            source,
        })?
        .compile_matcher();
    let depth = glob.split('/').count();
    Ok(WalkDir::new(root)
        .min_depth(depth)
        .max_depth(depth)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| is_job(e.path(), e.file_type()))
        .filter_map(|e| {
            e.path()
                .strip_prefix(root)
                .ok()
                .map(|p| p.to_string_lossy().replace('\\', "/"))
        })
        .filter(|rel| matcher.is_match(rel))
        .collect())
}

/// A folder or a file, or a link to one.
fn is_job(path: &Path, file_type: std::fs::FileType) -> bool {
    if file_type.is_symlink() {
        return std::fs::metadata(path).is_ok_and(|m| m.is_dir() || m.is_file());
    }
    file_type.is_dir() || file_type.is_file()
}

/// A job id: the relative path without archive extensions, safe as a folder name.
pub fn job_id(rel: &str) -> String {
    let mut id = rel.to_string();
    for ext in [".tar.gz", ".tar.zst", ".tgz", ".tar", ".zip", ".gz", ".zst"] {
        if let Some(stripped) = id.strip_suffix(ext) {
            id = stripped.to_string();
            break;
        }
    }
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_matches('.').to_string();
    if safe.is_empty() { "job".into() } else { safe }
}

/// Hash of every file's relative path, size and modification time.
pub fn fingerprint(job: &Path) -> String {
    let mut h = blake3::Hasher::new();
    for entry in WalkDir::new(job)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(job).unwrap_or(entry.path());
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&meta.len().to_le_bytes());
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        h.update(&mtime.map_or(0, |d| d.as_nanos()).to_le_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

/// Whether job `id` belongs to shard `k` of `n` (1-based): a stable split.
pub fn in_shard(id: &str, k: u32, n: u32) -> bool {
    let digest = blake3::hash(id.as_bytes());
    let v = u32::from_le_bytes(digest.as_bytes()[..4].try_into().unwrap());
    v % n == k - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_to_jobs_are_jobs_and_dangling_ones_are_not() {
        let store = tempfile::tempdir().unwrap();
        std::fs::create_dir(store.path().join("job-1")).unwrap();
        std::fs::write(store.path().join("job-2.log"), "x").unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("cluster")).unwrap();
        for (link, to) in [("a", "job-1"), ("b.log", "job-2.log"), ("gone", "none")] {
            std::os::unix::fs::symlink(store.path().join(to), root.path().join(link)).unwrap();
            let deep = root.path().join("cluster").join(link);
            std::os::unix::fs::symlink(store.path().join(to), deep).unwrap();
        }
        let ids = |glob| -> Vec<String> {
            let jobs = find_jobs(root.path(), glob).unwrap();
            jobs.into_iter().map(|j| j.id).collect()
        };
        assert_eq!(ids(None), ["a", "b.log", "cluster"]);
        assert_eq!(ids(Some("cluster/*")), ["cluster_a", "cluster_b.log"]);
    }

    #[test]
    fn ids_drop_archive_extensions_and_unsafe_characters() {
        assert_eq!(job_id("job-17.tar.gz"), "job-17");
        assert_eq!(job_id("cluster a/job 9"), "cluster_a_job_9");
        assert_eq!(job_id("../x"), "_x");
    }

    #[test]
    fn shards_partition_the_jobs() {
        let ids: Vec<String> = (0..200).map(|i| format!("job-{i}")).collect();
        let mut counts = [0; 4];
        for id in &ids {
            let owners: Vec<u32> = (1..=4).filter(|&k| in_shard(id, k, 4)).collect();
            assert_eq!(owners.len(), 1);
            counts[owners[0] as usize - 1] += 1;
        }
        assert!(counts.iter().all(|&c| c > 20), "{counts:?}");
    }

    #[test]
    fn fingerprints_change_when_a_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.log"), "x").unwrap();
        let before = fingerprint(dir.path());
        assert_eq!(before, fingerprint(dir.path()));
        std::fs::write(dir.path().join("a.log"), "xy").unwrap();
        assert_ne!(before, fingerprint(dir.path()));
    }
}
