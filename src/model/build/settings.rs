//! The settings a job ran with, as its logs show them: `NCCL_*` from NCCL's
//! ENV lines and the launching shell's assignments, `TORCH_*` from
//! ProcessGroupNCCL's environment line, and the NCCL release of every host.

use crate::model::{Event, EventKind, Job};

pub fn collect(job: &mut Job) {
    collect_versions(job);
    collect_env(job);
}

/// `2.21.5+cuda12.4` → (2, 21): what NCCL's behaviour changes keyed on.
pub fn nccl_major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version
        .split(['.', '+', '-'])
        .map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

/// The NCCL release an event states. NCCL prints its banner on rank 0 only,
/// so the other hosts' releases come from PyTorch: its error lines end in
/// `, NCCL version X` and its environment line starts with it.
pub fn nccl_version_of(ev: &Event) -> Option<&str> {
    match ev.kind {
        EventKind::NcclVersion | EventKind::NcclErrorReport => ev.text_field("version"),
        EventKind::TorchEnvSettings => ev
            .text_field("settings")?
            .split(", ")
            .find_map(|pair| pair.trim().strip_prefix("NCCL version: "))
            .map(|v| v.split(['+', ' ']).next().unwrap_or(v)),
        _ => None,
    }
}

fn collect_versions(job: &mut Job) {
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    let states_version = |k| {
        matches!(
            k,
            EventKind::NcclVersion | EventKind::NcclErrorReport | EventKind::TorchEnvSettings
        )
    };
    for (_, ev) in job.events_where(states_version) {
        if let Some(v) = nccl_version_of(ev).filter(|v| !v.is_empty()) {
            seen.push((v.to_string(), job.host_of_event(ev).map(str::to_string)));
        }
    }
    for (version, host) in seen {
        job.nccl_versions.insert(version.clone());
        if let Some(h) = host {
            job.hosts
                .entry(h)
                .or_default()
                .nccl_versions
                .insert(version);
        }
    }
}

fn collect_env(job: &mut Job) {
    let mut seen: Vec<(String, String, String)> = Vec::new();
    let settings = |k| {
        matches!(
            k,
            EventKind::NcclEnvSetting | EventKind::TorchEnvSettings | EventKind::ShellEnv
        )
    };
    for (_, ev) in job.events_where(settings) {
        match ev.kind {
            EventKind::NcclEnvSetting => {
                if let (Some(name), Some(value)) = (ev.text_field("name"), ev.text_field("value")) {
                    seen.push((name.to_string(), value.to_string(), who(ev)));
                }
            }
            EventKind::TorchEnvSettings => {
                let list = ev.text_field("settings").unwrap_or("");
                seen.extend(
                    torch_settings(list).map(|(n, v)| (n.to_string(), v.to_string(), who(ev))),
                );
            }
            EventKind::ShellEnv => {
                let text = ev.text_field("settings").unwrap_or("");
                let pairs = match ev.text_field("form") {
                    Some("mpirun") => mpirun_exports(text),
                    _ => leading_assignments(text),
                };
                seen.extend(
                    pairs
                        .into_iter()
                        .filter(|(n, _)| n.starts_with("NCCL_") || n.starts_with("TORCH_"))
                        .map(|(n, v)| (n.to_string(), v.to_string(), who(ev))),
                );
            }
            _ => {}
        }
    }
    for (name, value, who) in seen {
        job.env
            .entry(name)
            .or_default()
            .entry(value)
            .or_default()
            .insert(who);
    }
}

/// Who printed a setting: its rank, else its host.
fn who(ev: &Event) -> String {
    ev.who
        .rank
        .map(|r| format!("rank {r}"))
        .or_else(|| ev.who.host.as_deref().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// `NAME=value` split, the value unquoted; `None` for a token that is not
/// an assignment to an upper-case name.
fn assignment(token: &str) -> Option<(&str, &str)> {
    let (name, value) = token.split_once('=')?;
    let named = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    let value = value.trim_matches(|c| c == '"' || c == '\'');
    (named && !value.is_empty()).then_some((name, value))
}

/// The assignments that open a shell line (`A=1 B=2 ./cmd …`, `export
/// A=1`): the first other word is the command, whose arguments set nothing.
fn leading_assignments(text: &str) -> Vec<(&str, &str)> {
    text.split_whitespace()
        .skip_while(|w| *w == "export")
        .map_while(assignment)
        .collect()
}

/// Open MPI's `-x NAME=value` arguments (a bare `-x NAME` passes the
/// shell's value, which the line does not show).
fn mpirun_exports(text: &str) -> Vec<(&str, &str)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-x")
        .filter_map(|w| assignment(w[1]))
        .collect()
}

/// The `TORCH_*: value` pairs of `NCCL version: 2.20.5, TORCH_X: 1, …`.
fn torch_settings(list: &str) -> impl Iterator<Item = (&str, &str)> {
    list.split(", ").filter_map(|pair| {
        let (name, value) = pair.split_once(": ")?;
        let name = name.trim();
        (name.starts_with("TORCH_")
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
        .then_some((name, value.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::{leading_assignments, mpirun_exports, nccl_major_minor, torch_settings};

    #[test]
    fn shell_lines_set_what_their_leading_assignments_and_mpirun_exports_say() {
        assert_eq!(
            leading_assignments(
                "NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1  ./build/all_reduce_perf -b 8 X=1"
            ),
            vec![("NCCL_DEBUG", "INFO"), ("NCCL_P2P_DISABLE", "1")]
        );
        assert_eq!(
            leading_assignments("NCCL_IB_HCA=\"mlx5_0,mlx5_1\""),
            vec![("NCCL_IB_HCA", "mlx5_0,mlx5_1")]
        );
        assert_eq!(leading_assignments("NCCL_X= ./run"), vec![]);
        assert_eq!(
            mpirun_exports(
                "-np 4 -x TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=10 -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO ./t"
            ),
            vec![
                ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "10"),
                ("NCCL_DEBUG", "INFO")
            ]
        );
    }

    #[test]
    fn nccl_release_strings_as_nccl_and_torch_print_them() {
        assert_eq!(nccl_major_minor("2.21.5+cuda12.4"), Some((2, 21)));
        assert_eq!(nccl_major_minor("2.14.3"), Some((2, 14)));
        assert_eq!(nccl_major_minor("2.19.3-1"), Some((2, 19)));
        assert_eq!(nccl_major_minor("2"), None);
        assert_eq!(nccl_major_minor("unknown"), None);
    }

    #[test]
    fn torch_2_5_environment_line_yields_its_torch_settings() {
        let list = "NCCL version: 2.20.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, \
                    TORCH_DISTRIBUTED_DEBUG: OFF, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: 480";
        let got: Vec<_> = torch_settings(list).collect();
        assert_eq!(
            got,
            vec![
                ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
                ("TORCH_DISTRIBUTED_DEBUG", "OFF"),
                ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "480"),
            ]
        );
    }
}
