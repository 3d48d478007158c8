//! What a file's path says about who wrote it.
//!
//! Job folders are laid out by launchers and collection scripts: torchrun's
//! `--log-dir` puts each worker in `attempt_N/<local_rank>/stdout.log`, NCCL's
//! `NCCL_DEBUG_FILE=nccl.%h.%p` names host and pid, collection scripts make a
//! folder per node. These hints are weaker than what a line says about itself
//! and are used only where the line is silent.

use regex::Regex;
use std::sync::LazyLock;

pub use crate::model::PathHints;

static NCCL_DEBUG_FILE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^nccl[._-](?P<host>[A-Za-z0-9][A-Za-z0-9-]*)[._-](?P<pid>\d+)(?:\.(?:log|txt|out))?$",
    )
    .unwrap()
});
static RANK_IN_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?:^|[^a-z])rank[_-]?(?P<rank>\d+)(?:[^0-9]|$)").unwrap());
static HOST_LIKE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z][A-Za-z0-9-]*[0-9][A-Za-z0-9-]*$").unwrap());
static NOT_A_HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:attempt|rank|run|job|slurm|step|epoch|log|logs|out|output|default|local|worker_?group|trial|iter|ckpt|checkpoint)[_-]?\d*$|^\d")
        .unwrap()
});

/// Reads hints from a `/`-separated path relative to the job root.
pub fn hints_from_path(path: &str) -> PathHints {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut hints = PathHints::default();
    let Some((file, dirs)) = parts.split_last() else {
        return hints;
    };
    read_torchrun_log_dir(&mut hints, dirs);
    if let Some(c) = NCCL_DEBUG_FILE.captures(file) {
        hints.host = Some(c["host"].to_string());
        hints.pid = c["pid"].parse().ok();
    }
    if hints.rank.is_none() {
        hints.rank = parts.iter().rev().find_map(|p| {
            RANK_IN_NAME
                .captures(p)
                .and_then(|c| c["rank"].parse().ok())
        });
    }
    if hints.host.is_none() {
        hints.host = dirs
            .iter()
            .find_map(|d| host_of_folder(d))
            .map(str::to_string);
    }
    hints
}

/// The host an archive of one host's files is named after
/// (`node005.tar.gz`, `gpu-17.cluster.local.tgz`, `node006.zip`).
pub fn host_of_archive(path: &str) -> Option<String> {
    host_of_folder(archive_stem(path)?).map(str::to_string)
}

/// The name of an archive without its extensions (`job-77.tar.gz` → `job-77`).
fn archive_stem(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    [".tar.gz", ".tar.zst", ".tar.zstd", ".tgz", ".tar", ".zip"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
}

/// A member's path below the folder the archive was made of: `tar czf
/// job-77.tar.gz job-77/` wraps every member in `job-77/`, which is the
/// job's root, not a folder of it (a host's, a rank's).
pub fn inside_the_wrapper<'p>(member: &'p str, archive: &str) -> &'p str {
    let Some(stem) = archive_stem(archive) else {
        return member;
    };
    let member = member.trim_start_matches("./");
    member
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty())
        .unwrap_or(member)
}

/// The host a folder is named after: `node005`, or `node005.cluster.local`
/// (collected by `hostname -f`) read as NCCL prints it, `node005`.
fn host_of_folder(name: &str) -> Option<&str> {
    let (first, domain) = name.split_once('.').unwrap_or((name, ""));
    let domain_ok = domain.is_empty()
        || domain.split('.').all(|label| {
            label.starts_with(|c: char| c.is_ascii_alphabetic())
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    (domain_ok && looks_like_host(first)).then_some(first)
}

/// `…/attempt_0/3/stdout.log`: the folder `3` is local rank 3's own.
fn read_torchrun_log_dir(hints: &mut PathHints, dirs: &[&str]) {
    let n = dirs.len();
    if n >= 2
        && dirs[n - 2].starts_with("attempt_")
        && let Ok(local) = dirs[n - 1].parse::<u32>()
    {
        hints.local_rank = Some(local);
        hints.process_dir = Some(dirs.join("/"));
    }
}

fn looks_like_host(name: &str) -> bool {
    HOST_LIKE.is_match(name) && !NOT_A_HOST.is_match(name) && !names_a_collection(name)
}

/// Words that name what a folder or archive holds rather than a machine
/// (`job-5582913-logs`, `run17_output`, `incident-2024-05-bundle`): no
/// GPU node is called that, and taking one for a host puts every line of
/// the collection on a machine that does not exist.
fn names_a_collection(name: &str) -> bool {
    const WORDS: [&str; 16] = [
        "logs",
        "log",
        "job",
        "jobs",
        "slurm",
        "output",
        "outputs",
        "results",
        "archive",
        "dump",
        "dumps",
        "bundle",
        "collected",
        "incident",
        "artifacts",
        "traces",
    ];
    name.split(['-', '_', '.'])
        .any(|word| WORDS.iter().any(|w| word.eq_ignore_ascii_case(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchrun_log_dir_names_the_local_rank_and_host_folder() {
        let h = hints_from_path("node002/logs/abc_x1/attempt_0/1/stderr.log");
        assert_eq!(h.local_rank, Some(1));
        assert_eq!(h.host.as_deref(), Some("node002"));
        assert_eq!(
            h.process_dir.as_deref(),
            Some("node002/logs/abc_x1/attempt_0/1")
        );
    }

    #[test]
    fn nccl_debug_file_names_host_and_pid() {
        let h = hints_from_path("logs/nccl.gpu-node17.48211");
        assert_eq!(h.host.as_deref(), Some("gpu-node17"));
        assert_eq!(h.pid, Some(48211));
    }

    #[test]
    fn rank_in_file_name() {
        assert_eq!(hints_from_path("out/rank_12.log").rank, Some(12));
        assert_eq!(hints_from_path("out/train-rank3.txt").rank, Some(3));
        assert_eq!(hints_from_path("out/frankly.txt").rank, None);
    }

    #[test]
    fn a_folder_named_by_its_fqdn_is_its_short_host() {
        let h = hints_from_path("gpu-17.cluster.example.com/counters/before/x.txt");
        assert_eq!(h.host.as_deref(), Some("gpu-17"));
        assert_eq!(hints_from_path("v1.2/x.log").host, None);
    }

    #[test]
    fn an_archive_of_one_host_is_named_after_it() {
        assert_eq!(
            host_of_archive("x/node005.tar.gz").as_deref(),
            Some("node005")
        );
        assert_eq!(
            host_of_archive("gpu-17.cluster.local.tgz").as_deref(),
            Some("gpu-17")
        );
        assert_eq!(host_of_archive("node006.zip").as_deref(), Some("node006"));
        assert_eq!(host_of_archive("logs.tar.gz"), None);
        assert_eq!(host_of_archive("job-5582913-logs.tar.gz"), None);
        assert_eq!(host_of_archive("run17_output.tgz"), None);
        assert_eq!(host_of_archive("node005.log"), None);
    }

    #[test]
    fn generic_folder_names_are_not_hosts() {
        assert_eq!(hints_from_path("logs/attempt_0/x.log").host, None);
        assert_eq!(hints_from_path("slurm-123/x.log").host, None);
    }

    #[test]
    fn an_archives_wrapper_folder_is_the_jobs_root() {
        let p = "f5-07-job318842/nodes/node007/dmesg.txt";
        let inner = inside_the_wrapper(p, "/data/f5-07-job318842.tar.gz");
        assert_eq!(inner, "nodes/node007/dmesg.txt");
        assert_eq!(hints_from_path(inner).host.as_deref(), Some("node007"));
        assert_eq!(inside_the_wrapper("./job-77/x.log", "job-77.tgz"), "x.log");
        // Another folder, or one named like the archive but holding no files.
        assert_eq!(
            inside_the_wrapper("node005/x.log", "job-77.tgz"),
            "node005/x.log"
        );
        assert_eq!(inside_the_wrapper("job-77/", "job-77.tgz"), "job-77/");
    }
}
