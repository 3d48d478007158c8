//! The settings a job ran with, as its logs show them: `NCCL_*` from NCCL's
//! ENV lines, `TORCH_*` from ProcessGroupNCCL's environment line, and the
//! NCCL release of every host.

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
    let settings = |k| matches!(k, EventKind::NcclEnvSetting | EventKind::TorchEnvSettings);
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
    use super::{nccl_major_minor, torch_settings};

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
