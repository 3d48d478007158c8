//! Launcher prefixes: who printed a line, as the launcher that collected it says.
//!
//! Launchers that merge many workers' output into one stream prefix each line:
//! - Open MPI `--tag-output`: `[1,3]<stdout>:` (job id, MPI rank), no space after,
//!   `[1,mpirank:3,host]<stdout>:` as SageMaker runs it; horovodrun (Gloo):
//!   `[3]<stdout>:`; either may follow a `--timestamp-output` ctime stamp;
//! - torchrun `--tee`: `[default3]:` (role + LOCAL rank), no space after;
//! - PyTorch ≥ 2.2 C++ logging: `[rank3]:` (GLOBAL rank of the default group);
//! - Ray actors: `(WorkerDict pid=1230, ip=10.0.0.1) `;
//! - Slurm `srun --label`: `%*d: ` (task id right-aligned to the widest id);
//! - pdsh (DeepSpeed's multi-node runner): `<host>: `;
//! - MPICH / Intel MPI `-prepend-rank`: `[3] `.
//!
//! The last three are ambiguous on their own (`RuntimeError: ` looks like a pdsh
//! host), so they are stripped only where sniffing found them on most lines of
//! the file (`LauncherStyle`).

/// What a launcher prefix says about the line's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag<'a> {
    Rank(u32),
    LocalRank(u32),
    Task(u32),
    Host(&'a [u8]),
    /// Ray: worker pid and the node (an IP or host name).
    Actor {
        pid: u32,
        node: &'a [u8],
    },
}

/// Prefix styles that need sniffing before they can be trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LauncherStyle {
    pub slurm_label: bool,
    pub mpich_rank: bool,
    /// pdsh host prefixes seen (sorted); empty when the file has none.
    pub pdsh_hosts: Vec<Vec<u8>>,
}

/// Parses one launcher prefix at the start of `s`: (bytes consumed, tag).
pub fn parse_prefix<'a>(s: &'a [u8], style: &LauncherStyle) -> Option<(usize, Tag<'a>)> {
    match s.first()? {
        b'[' => mpi_tag(s).or_else(|| bracket_rank(s)).or_else(|| {
            if style.mpich_rank {
                mpich_rank(s)
            } else {
                None
            }
        }),
        b'(' => ray_actor(s),
        b'A'..=b'Z' if s.get(CTIME_LEN) == Some(&b'[') && is_ctime(&s[..CTIME_LEN]) => {
            let (len, tag) = mpi_tag(&s[CTIME_LEN..])?;
            Some((CTIME_LEN + len, tag))
        }
        b' ' | b'0'..=b'9' if style.slurm_label => slurm_label(s),
        _ if !style.pdsh_hosts.is_empty() => pdsh_host(s, &style.pdsh_hosts),
        _ => None,
    }
}

/// Leading decimal digits of `s`: (value, count).
pub fn digits(s: &[u8]) -> Option<(u64, usize)> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return None;
    }
    let v = s[..n]
        .iter()
        .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
    Some((v, n))
}

/// `[1,3]<stdout>:` or `[1,3]<stderr>:` (Open MPI `--tag-output`: job id,
/// MPI rank), `[1,3]:`, `[1,mpirank:3,algo-1]<stdout>:` (Open MPI 4 as
/// SageMaker runs it, the host last) and `[3]<stdout>:` (horovodrun's own
/// prefix under Gloo).
fn mpi_tag(s: &[u8]) -> Option<(usize, Tag<'_>)> {
    let (first, n) = digits(&s[1..])?;
    let mut i = 1 + n;
    let rank = match s.get(i) {
        Some(b',') => {
            i += 1;
            if s[i..].starts_with(b"mpirank:") {
                i += b"mpirank:".len();
            }
            let (rank, rn) = digits(&s[i..])?;
            i += rn;
            if s.get(i) == Some(&b',') {
                let host = s[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
                    .count();
                i += 1 + host;
            }
            rank
        }
        Some(b']') => first,
        _ => return None,
    };
    let rest = &s[i..];
    let len = if rest.starts_with(b"]<stdout>:") || rest.starts_with(b"]<stderr>:") {
        10
    } else if rest.starts_with(b"]:") && s[1 + n] == b',' {
        2
    } else {
        return None;
    };
    Some((i + len, Tag::Rank(rank as u32)))
}

/// `[rank3]:` (global rank) or `[<role>3]:` (torchrun role + local rank).
fn bracket_rank(s: &[u8]) -> Option<(usize, Tag<'_>)> {
    let name_len = s[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphabetic() || **b == b'_')
        .count();
    if name_len == 0 {
        return None;
    }
    let (n, dn) = digits(&s[1 + name_len..])?;
    let end = 1 + name_len + dn;
    if !s[end..].starts_with(b"]:") {
        return None;
    }
    let tag = if &s[1..1 + name_len] == b"rank" {
        Tag::Rank(n as u32)
    } else {
        Tag::LocalRank(n as u32)
    };
    Some((end + 2, tag))
}

/// `Tue Apr 21 18:22:53 2020`: the stamp `mpirun --timestamp-output` and
/// horovodrun's `--prefix-output-with-timestamp` put before their tag.
const CTIME_LEN: usize = 24;

fn is_ctime(s: &[u8]) -> bool {
    const SHAPE: &[u8; CTIME_LEN] = b"Aaa Aaa 99 99:99:99 9999";
    s.len() == CTIME_LEN
        && s.iter().zip(SHAPE).all(|(b, want)| match want {
            b'A' => b.is_ascii_uppercase(),
            b'a' => b.is_ascii_lowercase(),
            b'9' => b.is_ascii_digit() || (*b == b' '),
            other => b == other,
        })
}

/// `[3] ` (MPICH `-prepend-rank`).
fn mpich_rank(s: &[u8]) -> Option<(usize, Tag<'_>)> {
    let (n, dn) = digits(&s[1..])?;
    s[1 + dn..]
        .starts_with(b"] ")
        .then_some((dn + 3, Tag::Rank(n as u32)))
}

/// `(WorkerDict pid=1230, ip=10.0.0.1) ` or `(raylet, ip=…)`.
fn ray_actor(s: &[u8]) -> Option<(usize, Tag<'_>)> {
    let close = memchr::memchr(b')', &s[..s.len().min(256)])?;
    let inner = &s[1..close];
    let pid_at = memchr::memmem::find(inner, b"pid=")?;
    let (pid, _) = digits(&inner[pid_at + 4..])?;
    let node = memchr::memmem::find(inner, b"ip=")
        .map(|p| &inner[p + 3..])
        .unwrap_or(b"");
    let end = close + 1 + usize::from(s.get(close + 1) == Some(&b' '));
    Some((
        end,
        Tag::Actor {
            pid: pid as u32,
            node,
        },
    ))
}

/// ` 3: ` — spaces, a task id, `: `.
fn slurm_label(s: &[u8]) -> Option<(usize, Tag<'_>)> {
    let spaces = s.iter().take_while(|b| **b == b' ').count();
    if spaces > 6 {
        return None;
    }
    let (n, dn) = digits(&s[spaces..])?;
    let end = spaces + dn;
    // A partial line from srun ends right after the label, without the space.
    match &s[end..] {
        [b':', b' ', ..] => Some((end + 2, Tag::Task(n as u32))),
        [b':'] => Some((end + 1, Tag::Task(n as u32))),
        _ => None,
    }
}

/// `<host>: ` where `<host>` is one of the hosts sniffing found.
fn pdsh_host<'a>(s: &'a [u8], hosts: &[Vec<u8>]) -> Option<(usize, Tag<'a>)> {
    let colon = memchr::memchr(b':', &s[..s.len().min(256)])?;
    let name = &s[..colon];
    if hosts.binary_search_by(|h| h.as_slice().cmp(name)).is_err() {
        return None;
    }
    // pdsh writes `host: line`; a colon with no space after it is the
    // line's own (NCCL's `host:pid:tid` prefix repeats the same host).
    let end = match s.get(colon + 1) {
        Some(b' ') => colon + 2,
        None | Some(b'\r' | b'\n') => colon + 1,
        Some(_) => return None,
    };
    Some((end, Tag::Host(name)))
}

/// A pdsh-style `<host>: ` candidate, for sniffing: the name before `: ` when
/// it looks like a host name.
pub fn pdsh_candidate(line: &[u8]) -> Option<&[u8]> {
    let colon = memchr::memchr(b':', &line[..line.len().min(128)])?;
    let name = &line[..colon];
    let ok = !name.is_empty()
        && line.get(colon + 1) == Some(&b' ')
        && name[0].is_ascii_alphanumeric()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        // A number is a Slurm label (`srun --label`), not a host.
        && !name.iter().all(u8::is_ascii_digit)
        && !name.ends_with(b"Error")
        && !name.ends_with(b"Exception")
        && !LAUNCHER_PROGRAMS.contains(&name);
    ok.then_some(name)
}

/// Programs that start their own lines with `name: ` (`srun: error: …`,
/// `slurmstepd: error: *** JOB … CANCELLED`): never a pdsh host.
const LAUNCHER_PROGRAMS: &[&[u8]] = &[
    b"srun",
    b"slurmstepd",
    b"salloc",
    b"sbatch",
    b"mpirun",
    b"mpiexec",
    b"prterun",
    b"orterun",
    b"torchrun",
    b"pdsh",
    b"clush",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> LauncherStyle {
        LauncherStyle::default()
    }

    #[test]
    fn openmpi_tag_output_names_the_mpi_rank() {
        let line = b"[1,12]<stdout>:host:815:864 [0] NCCL INFO x";
        assert_eq!(parse_prefix(line, &plain()), Some((15, Tag::Rank(12))));
    }

    #[test]
    fn horovodrun_and_sagemaker_tags_name_the_rank_too() {
        let horovod = b"[3]<stderr>:Missing ranks:";
        assert_eq!(parse_prefix(horovod, &plain()), Some((12, Tag::Rank(3))));
        let sagemaker = b"[1,mpirank:2,algo-1]<stderr>:INFO:root:x";
        assert_eq!(parse_prefix(sagemaker, &plain()), Some((29, Tag::Rank(2))));
        let stamped = b"Tue Apr 21 18:22:57 2020[2]<stderr>:/home/node/x.py:88: UserWarning";
        assert_eq!(parse_prefix(stamped, &plain()), Some((36, Tag::Rank(2))));
        let stamped_mpi = b"Thu Jun 18 14:28:35 2020[1,2]<stderr>:2020-06-18 x";
        assert_eq!(
            parse_prefix(stamped_mpi, &plain()),
            Some((38, Tag::Rank(2)))
        );
        // MPICH's `[3] ` needs sniffing; `[3]:` is no launcher's.
        assert_eq!(parse_prefix(b"[3]: x", &plain()), None);
        assert_eq!(parse_prefix(b"[3] x", &plain()), None);
    }

    #[test]
    fn torchrun_tee_prefix_is_a_local_rank_and_rank_prefix_is_global() {
        let line = b"[default3]:[rank11]:[E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:607] x";
        assert_eq!(parse_prefix(line, &plain()), Some((11, Tag::LocalRank(3))));
        assert_eq!(
            parse_prefix(&line[11..], &plain()),
            Some((9, Tag::Rank(11)))
        );
    }

    #[test]
    fn slurm_labels_only_when_sniffed() {
        let style = LauncherStyle {
            slurm_label: true,
            ..plain()
        };
        assert_eq!(parse_prefix(b" 3: hello", &style), Some((4, Tag::Task(3))));
        assert_eq!(parse_prefix(b"15: hello", &style), Some((4, Tag::Task(15))));
        assert_eq!(parse_prefix(b" 3: hello", &plain()), None);
    }

    #[test]
    fn ray_actor_prefix_gives_pid_and_node() {
        let line = b"(WorkerDict pid=1230, ip=train-worker-0) [rank15]:x";
        let (len, tag) = parse_prefix(line, &plain()).unwrap();
        assert_eq!(&line[len..len + 8], b"[rank15]");
        assert_eq!(
            tag,
            Tag::Actor {
                pid: 1230,
                node: b"train-worker-0"
            }
        );
    }

    #[test]
    fn pdsh_hosts_must_have_been_sniffed() {
        let style = LauncherStyle {
            pdsh_hosts: vec![b"worker-1".to_vec()],
            ..plain()
        };
        assert_eq!(
            parse_prefix(b"worker-1: x", &style),
            Some((10, Tag::Host(b"worker-1")))
        );
        assert_eq!(parse_prefix(b"RuntimeError: x", &style), None);
        // DeepSpeed's pdsh launch: the host, then NCCL's own `host:pid:tid`.
        assert_eq!(
            parse_prefix(b"worker-1:44004:44223 [0] NCCL INFO x", &style),
            None
        );
        assert_eq!(pdsh_candidate(b"RuntimeError: x"), None);
        // Slurm labels and the launchers' own lines are not hosts.
        assert_eq!(pdsh_candidate(b"12: step 10/685"), None);
        assert_eq!(
            pdsh_candidate(b"srun: error: dgx003: task 6: Terminated"),
            None
        );
        assert_eq!(pdsh_candidate(b"worker-1: x"), Some(&b"worker-1"[..]));
    }
}
