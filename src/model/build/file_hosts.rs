//! Hosts that a file's name or folder says, where the plain folder-per-host
//! hint did not: dumps named after their host in a shared folder, a host's
//! console saved under its name, folders named by a host's address or by
//! a host with a word joined (`sys-dgx017/`).
//!
//! Collection scripts often write every host's dumps into one folder,
//! naming each file after its host: `node005-perfquery-after.txt`,
//! `ibstat_h100-r00-n027.txt`, `after_sysfs-counters.gpu-018.txt`. Which
//! word of such a name is the host cannot be told from the name alone
//! (`h100-r00-n027-ethtool-S-enp26s0np0` splits many ways), but the job's
//! logs name its hosts: the longest of them that stands as a token in the
//! name is the file's host. It decides a table row only where the row
//! has no host of the job's own: a folder per host, or a shell prompt in
//! the capture, name one more surely.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use super::short_host;
use crate::model::counter_store::CounterStore;
use crate::model::{
    EventKind, FileId, FileInfo, GidEntry, GpuSnapshot, Job, Origin, PortSnapshot, Sym,
};

/// The files of counter, port or GID rows that no folder places on a host.
pub(super) fn unplaced(
    files: &[FileInfo],
    ports: &[PortSnapshot],
    gids: &[GidEntry],
    gpus: &[GpuSnapshot],
    counters: &CounterStore,
) -> Vec<FileId> {
    // Folder layouts place every file: look at no row (millions at scale).
    let hostless: FxHashSet<FileId> = files
        .iter()
        .filter(|f| f.hints.host.is_none())
        .map(|f| f.id)
        .collect();
    if hostless.is_empty() {
        return Vec::new();
    }
    let snapshots = ports.iter().filter_map(|p| p.origin).map(|o| o.file);
    let gid_rows = gids.iter().filter_map(|g| g.origin).map(|o| o.file);
    let gpu_rows = gpus.iter().filter_map(|g| g.origin).map(|o| o.file);
    let readings = counters.readings.iter().map(|r| r.file);
    let mut with_rows: Vec<FileId> = snapshots
        .chain(gid_rows)
        .chain(gpu_rows)
        .chain(readings)
        .filter(|id| hostless.contains(id))
        .collect();
    with_rows.sort_unstable();
    with_rows.dedup();
    with_rows
}

/// Gives the rows of each `unplaced` file that have no host of the job's
/// own the job host its file's name spells. Runs once the ranks are known.
pub(super) fn adopt(
    job: &mut Job,
    unplaced: &[FileId],
    ports: &mut [PortSnapshot],
    counters: &mut CounterStore,
) {
    let known = job_hosts(job);
    let unplaced: FxHashSet<FileId> = unplaced.iter().copied().collect();
    let mut named: FxHashMap<FileId, Sym> = FxHashMap::default();
    for file in job.files.iter_mut().filter(|f| unplaced.contains(&f.id)) {
        if let Some(host) = host_token_in_name(&file.path, known.iter().map(String::as_str)) {
            named.insert(file.id, Sym::new(host));
            file.hints.host = Some(host.to_string());
        }
    }
    if named.is_empty() {
        return;
    }
    let is_job_host = |h: &str| known.contains(short_host(h));
    let rows = Rows {
        ports,
        gids: &mut job.gids,
        gpus: &mut job.gpus,
    };
    place_rows(&named, is_job_host, rows, counters);
}

/// Puts the rows of each file of `named` on its host, where the row's own
/// host is missing or not one `is_job_host` accepts.
fn place_rows(
    named: &FxHashMap<FileId, Sym>,
    is_job_host: impl Fn(&str) -> bool,
    rows: Rows<'_>,
    counters: &mut CounterStore,
) {
    counters.place_on_hosts(named, &is_job_host);
    let host_for = |origin: Option<Origin>, own: &Option<String>| {
        let host = named.get(&origin?.file)?;
        let settled = own.as_deref().is_some_and(&is_job_host);
        (!settled).then(|| host.as_str().to_string())
    };
    let place = |origin: Option<Origin>, host: &mut Option<String>| {
        if let Some(h) = host_for(origin, host) {
            *host = Some(h);
        }
    };
    rows.ports
        .iter_mut()
        .for_each(|p| place(p.origin, &mut p.host));
    rows.gids
        .iter_mut()
        .for_each(|g| place(g.origin, &mut g.host));
    rows.gpus
        .iter_mut()
        .for_each(|g| place(g.origin, &mut g.host));
}

/// The snapshot rows whose files may be placed on a host.
struct Rows<'a> {
    ports: &'a mut [PortSnapshot],
    gids: &'a mut [GidEntry],
    gpus: &'a mut [GpuSnapshot],
}

impl<'a> Rows<'a> {
    fn of_job(job: &'a mut Job) -> Rows<'a> {
        Rows {
            ports: &mut job.ports,
            gids: &mut job.gids,
            gpus: &mut job.gpus,
        }
    }
}

/// Folders named by a host's address (`10.0.0.5/`, as scripts that reach
/// the hosts by address save them): the host whose NCCL lines print that
/// address (bootstrap, OOB or socket interface) owns the folder's files.
/// Runs before the ranks are resolved, so that its lines count for them.
pub(super) fn adopt_address_folders(job: &mut Job, counters: &mut CounterStore) {
    let folders: Vec<(FileId, IpAddr)> = job
        .files
        .iter()
        .filter(|f| f.hints.host.is_none())
        .filter_map(|f| Some((f.id, address_folder(&f.path)?)))
        .collect();
    if folders.is_empty() {
        return;
    }
    let owners = address_owners(job);
    let named: FxHashMap<FileId, Sym> = folders
        .into_iter()
        .filter_map(|(id, addr)| {
            let hosts = owners.get(&addr)?;
            let host = hosts.first().filter(|_| hosts.len() == 1)?;
            Some((id, Sym::new(host)))
        })
        .collect();
    if named.is_empty() {
        return;
    }
    place_files(job, &named);
    // A row with any host of its own (a prompt in the capture) keeps it.
    place_rows(&named, |_| true, Rows::of_job(job), counters);
}

/// Folders named exactly as a host prints itself in NCCL's lines, in a
/// shape the path alone does not take for a host (AzureML's hex node ids,
/// `4f1d3c9a…000002/ibstat.txt`): that host's files. Runs before the ranks
/// are resolved, so that its lines count for them.
pub(super) fn adopt_line_named_folders(job: &mut Job, counters: &mut CounterStore) {
    let printed: FxHashSet<String> = job
        .events
        .iter()
        .filter(|e| e.pattern.starts_with("nccl."))
        .filter_map(|e| e.who.host.as_ref())
        .map(|h| short_host(h.as_str()).to_string())
        .collect();
    if printed.is_empty() {
        return;
    }
    let named: FxHashMap<FileId, Sym> = job
        .files
        .iter()
        .filter(|f| f.hints.host.is_none())
        .filter_map(|f| {
            let mut folders = f.path.rsplit('/').skip(1);
            let host = folders.find(|d| printed.contains(*d))?;
            Some((f.id, Sym::new(host)))
        })
        .collect();
    if named.is_empty() {
        return;
    }
    place_files(job, &named);
    place_rows(&named, |_| true, Rows::of_job(job), counters);
}

/// Folders named after a host with a word joined to it (`sys-dgx017/`,
/// `counters-node005/`) were taken for a host of that whole name. Where a
/// job host stands as a token inside such a name, and no NCCL line names
/// the whole of it as a host, the folder is that job host's. Runs before
/// the ranks are resolved, so that its lines count for them.
pub(super) fn adopt_prefixed_folders(job: &mut Job, counters: &mut CounterStore) {
    let folder_hosts: BTreeSet<&str> = job
        .files
        .iter()
        .filter_map(|f| f.hints.host.as_deref())
        .collect();
    if folder_hosts.len() < 2 {
        return;
    }
    let mut known: FxHashSet<String> = folder_hosts.iter().map(|h| h.to_string()).collect();
    known.extend(line_hosts(job));
    known.extend(launcher_hosts(job));
    let mut renamed: BTreeMap<String, Sym> = folder_hosts
        .iter()
        .filter_map(|h| Some((h.to_string(), Sym::new(inner_host(h, &known)?))))
        .collect();
    if renamed.is_empty() {
        return;
    }
    // A name an NCCL line prints as its own host is a host, whatever it holds.
    for e in job.events.iter().filter(|e| e.pattern.starts_with("nccl.")) {
        if let Some(h) = &e.who.host {
            renamed.remove(short_host(h.as_str()));
        }
    }
    if renamed.is_empty() {
        return;
    }
    let named: FxHashMap<FileId, Sym> = job
        .files
        .iter()
        .filter_map(|f| Some((f.id, renamed.get(f.hints.host.as_deref()?)?.clone())))
        .collect();
    for e in &mut job.events {
        if let Some(host) = named.get(&e.origin.file)
            && e.who
                .host
                .as_ref()
                .is_some_and(|h| renamed.contains_key(h.as_str()))
        {
            e.who.host = Some(host.clone());
        }
    }
    place_files(job, &named);
    let is_job_host = |h: &str| !renamed.contains_key(h);
    place_rows(&named, is_job_host, Rows::of_job(job), counters);
}

/// The hosts the launcher names (`srun: error: node07: tasks 8-15: …`,
/// the ChildFailedError's `host :`), one host a line.
fn launcher_hosts(job: &Job) -> Vec<String> {
    let kinds = |k| matches!(k, EventKind::TaskExited | EventKind::ChildFailedField);
    job.events_where(kinds)
        .filter_map(|(_, e)| match e.kind {
            EventKind::TaskExited => e.text_field("hosts"),
            _ => e
                .text_field("value")
                .filter(|_| e.text_field("field") == Some("host")),
        })
        .filter(|h| !h.contains(['[', ',']))
        .map(|h| short_host(h).to_string())
        .collect()
}

/// The longest of `known` other than `name` that stands as a token inside
/// `name` (`dgx017` in `sys-dgx017`).
fn inner_host<'k>(name: &str, known: &'k FxHashSet<String>) -> Option<&'k str> {
    let cuts: Vec<usize> = std::iter::once(0)
        .chain(
            name.char_indices()
                .filter(|(_, c)| !c.is_ascii_alphanumeric())
                .flat_map(|(i, c)| [i, i + c.len_utf8()]),
        )
        .chain([name.len()])
        .collect();
    let mut best: Option<&'k str> = None;
    for (i, &from) in cuts.iter().enumerate() {
        for &to in &cuts[i + 1..] {
            let part = &name[from..to];
            if part.len() < name.len()
                && let Some(k) = known.get(part)
                && best.is_none_or(|b| k.len() > b.len())
            {
                best = Some(k.as_str());
            }
        }
    }
    best
}

/// Gives each file of `named` its host, and its lines that name none.
fn place_files(job: &mut Job, named: &FxHashMap<FileId, Sym>) {
    for e in &mut job.events {
        if e.who.host.is_none()
            && let Some(host) = named.get(&e.origin.file)
        {
            e.who.host = Some(host.clone());
        }
    }
    for f in &mut job.files {
        if let Some(host) = named.get(&f.id) {
            f.hints.host = Some(host.as_str().to_string());
        }
    }
}

/// The first folder of `path` named by an address.
fn address_folder(path: &str) -> Option<IpAddr> {
    let (dirs, _) = path.rsplit_once('/')?;
    dirs.split('/').find_map(|d| d.parse().ok())
}

/// Each address NCCL's lines print, with the hosts that print it.
pub(super) fn address_owners(job: &Job) -> BTreeMap<IpAddr, BTreeSet<String>> {
    let mut owners: BTreeMap<IpAddr, BTreeSet<String>> = BTreeMap::new();
    let kinds = |k| {
        matches!(
            k,
            EventKind::NcclBootstrapIface | EventKind::NcclNetIb | EventKind::NcclNetSocket
        )
    };
    for (_, e) in job.events_where(kinds) {
        let Some(host) = e.who.host.as_ref().map(|h| short_host(h.as_str())) else {
            continue;
        };
        let listed = e.text_field("interfaces").unwrap_or("");
        // `eth0:10.0.0.1<0>`: the address sits between the colon and `<`.
        let in_list = listed.split_whitespace().filter_map(|w| {
            let (_, rest) = w.split_once(':')?;
            rest.split('<').next()
        });
        let named = [e.text_field("ip"), e.text_field("oob_ip")];
        for addr in named.into_iter().flatten().chain(in_list) {
            let addr = addr.split(['%', '<']).next().unwrap_or(addr);
            if let Ok(ip) = addr.parse::<IpAddr>() {
                owners.entry(ip).or_default().insert(host.to_string());
            }
        }
    }
    owners
}

/// A host's console captured under its name (`torchrun … | tee node005.log`)
/// holds that host's lines: those that name no host of their own take it.
/// A file whose lines name another host, or carry a launcher's task labels
/// (`srun --label`, `mpirun --tag-output`: many hosts' ranks in one file),
/// is left alone. Runs before the ranks are resolved, so that they are
/// resolved with it.
pub(super) fn adopt_logs(job: &mut Job) {
    let unplaced: Vec<FileId> = job
        .files
        .iter()
        .filter(|f| f.hints.host.is_none() && f.path.bytes().any(|b| b.is_ascii_digit()))
        .map(|f| f.id)
        .collect();
    if unplaced.is_empty() {
        return;
    }
    let known = job_hosts(job);
    let mut named: FxHashMap<FileId, Sym> = unplaced
        .into_iter()
        .filter_map(|id| {
            let host = host_token_in_name(job.file_path(id), known.iter().map(String::as_str))?;
            Some((id, Sym::new(host)))
        })
        .collect();
    // Table files have no events: their rows are placed with the counters.
    let mut with_lines: FxHashSet<FileId> = FxHashSet::default();
    for e in &job.events {
        let Some(host) = named.get(&e.origin.file) else {
            continue;
        };
        let elsewhere = e
            .who
            .host
            .as_ref()
            .is_some_and(|h| short_host(h.as_str()) != host.as_str());
        if elsewhere || e.who.task.is_some() {
            named.remove(&e.origin.file);
        } else {
            with_lines.insert(e.origin.file);
        }
    }
    named.retain(|id, _| with_lines.contains(id));
    if named.is_empty() {
        return;
    }
    place_files(job, &named);
}

/// The short names of the hosts the job's ranks, lines and folders name.
fn job_hosts(job: &Job) -> FxHashSet<String> {
    let ranks = job.ranks.values().filter_map(|r| r.host.as_deref());
    let folders = job.files.iter().filter_map(|f| f.hints.host.as_deref());
    let mut known: FxHashSet<String> = ranks
        .chain(folders)
        .map(|h| short_host(h).to_string())
        .collect();
    known.extend(line_hosts(job));
    known.extend(reported_hosts(job));
    known.retain(|h| !h.is_empty());
    known
}

/// Hosts the launchers' reports name (torchrun's failure summary `host :
/// gpu-e01.hpc.local`, srun's `srun: error: gpu-e02: task 1: …`,
/// DeepSpeed's rank layout): with NCCL_DEBUG unset, often the only lines
/// naming a host at all.
fn reported_hosts(job: &Job) -> FxHashSet<String> {
    let mut hosts: FxHashSet<String> = job
        .events
        .iter()
        .filter_map(reported_host)
        .map(|h| short_host(h).to_string())
        .collect();
    // A launcher's rank layout (DeepSpeed's `global_rank_mapping`) names
    // every host of the job.
    for (_, e) in job.events_where(|k| k == EventKind::RankLayout) {
        let layout = super::identity::host_rank_lists(e.text_field("mapping").unwrap_or(""));
        hosts.extend(layout.into_iter().map(|(h, _)| short_host(h).to_string()));
    }
    hosts
}

/// The host a launcher's report line names: srun's exit notice, or the
/// `host :` field of torchrun's failure summary.
pub(super) fn reported_host(e: &crate::model::Event) -> Option<&str> {
    match e.kind {
        EventKind::ChildFailedField if e.text_field("field") == Some("host") => {
            e.text_field("value")
        }
        EventKind::TaskExited => e.text_field("hosts").filter(|h| !h.contains(['[', ','])),
        _ => None,
    }
}

/// The short names of the hosts the job's lines carry (their own, or their
/// file's).
fn line_hosts(job: &Job) -> FxHashSet<String> {
    let mut hosts = FxHashSet::default();
    // The events of one writer share one copy of its host: look each
    // copy up once, not once per line.
    let mut last: Option<*const u8> = None;
    for host in job.events.iter().filter_map(|e| e.who.host.as_ref()) {
        let at = host.as_str().as_ptr();
        if last != Some(at) {
            last = Some(at);
            hosts.insert(short_host(host.as_str()).to_string());
        }
    }
    hosts
}

/// The longest of `hosts` that stands as a token (bounded by anything but a
/// letter or digit) in the last part of `path`.
pub(super) fn host_token_in_name<'h>(
    path: &str,
    hosts: impl Iterator<Item = &'h str>,
) -> Option<&'h str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let edge = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
    let bounded = |at: usize, len: usize| {
        edge(name[..at].chars().next_back()) && edge(name[at + len..].chars().next())
    };
    hosts
        .filter(|h| !h.is_empty())
        .filter(|h| name.match_indices(h).any(|(at, _)| bounded(at, h.len())))
        .max_by(|a, b| a.len().cmp(&b.len()).then_with(|| b.cmp(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventKind, Fields, Origin, PathHints, Who};

    /// A job of one host folder (`node005/ibstat.txt`) and consoles at its
    /// root, each holding one line written by `who`.
    fn consoles(files: &[(&str, Who)]) -> Job {
        let mut job = Job::default();
        let folder = PathHints {
            host: Some("node005".into()),
            ..PathHints::default()
        };
        let paths = std::iter::once(("node005/ibstat.txt", folder))
            .chain(files.iter().map(|(p, _)| (*p, PathHints::default())));
        for (i, (path, hints)) in paths.enumerate() {
            job.files.push(FileInfo {
                id: FileId(i as u32),
                path: path.into(),
                hints,
                ..FileInfo::default()
            });
        }
        for (i, (_, who)) in files.iter().enumerate() {
            job.events.push(Event {
                kind: EventKind::WatchdogTimeout,
                pattern: "test",
                origin: Origin {
                    file: FileId(i as u32 + 1),
                    line: 1,
                },
                who: who.clone(),
                level: Default::default(),
                time: Default::default(),
                fields: Fields::default(),
                text: "".into(),
            });
        }
        job
    }

    fn host_of_line(job: &Job, file: u32) -> Option<&str> {
        let e = job.events.iter().find(|e| e.origin.file == FileId(file))?;
        e.who.host.as_ref().map(|h| h.as_str())
    }

    #[test]
    fn a_console_named_after_a_host_gives_its_lines_that_host() {
        let rank = Who {
            rank: Some(3),
            ..Who::default()
        };
        let task = Who {
            task: Some(3),
            ..Who::default()
        };
        let elsewhere = Who {
            host: Some(Sym::new("node006")),
            ..Who::default()
        };
        let mut job = consoles(&[
            ("node005.log", rank.clone()),
            ("node005-srun.log", task),
            ("console-node005.txt", elsewhere),
            ("node0055.log", rank),
        ]);
        adopt_logs(&mut job);
        assert_eq!(host_of_line(&job, 1), Some("node005"));
        assert_eq!(job.files[1].hints.host.as_deref(), Some("node005"));
        assert_eq!(
            host_of_line(&job, 2),
            None,
            "launcher task labels span hosts"
        );
        assert_eq!(
            host_of_line(&job, 3),
            Some("node006"),
            "a line's own host stays"
        );
        assert_eq!(job.files[3].hints.host, None, "the file mixes hosts");
        assert_eq!(host_of_line(&job, 4), None, "not a host of the job");
    }

    /// NCCL_DEBUG unset, torch 2.2: no line carries a host prefix; only
    /// torchrun's failure summary in the console (`host : gpu-e01.hpc.local`)
    /// names the host its file is named after.
    #[test]
    fn a_host_a_failure_summary_names_places_its_console_torch_2_2() {
        let rank = Who {
            rank: Some(3),
            ..Who::default()
        };
        let mut job = consoles(&[
            ("node-logs/gpu-e01.log", rank.clone()),
            ("gpu-e02.log", rank),
        ]);
        let mut summary = job.events[0].clone();
        summary.kind = EventKind::ChildFailedField;
        summary.origin.line = 2;
        summary.who = Who::default();
        summary.fields = Fields::from_sorted([
            ("field", crate::model::Value::Text("host".into())),
            (
                "value",
                crate::model::Value::Text("gpu-e01.hpc.local".into()),
            ),
        ]);
        job.events.insert(1, summary);
        adopt_logs(&mut job);
        assert_eq!(host_of_line(&job, 1), Some("gpu-e01"));
        assert_eq!(job.files[2].hints.host, None, "gpu-e02 is named by no line");
    }

    /// AzureML names its VMs by hex node ids, which no path reads as a
    /// host; NCCL prints them as its own host, and a folder of that name
    /// holds that host's snapshots.
    #[test]
    fn a_folder_named_as_nccl_names_a_host_is_that_hosts_azureml() {
        let id = "4f1d3c9a2b0e4e9c8a7b6d5e4f3a2b1c000002";
        let nccl = Who {
            host: Some(Sym::new(id)),
            ..Who::default()
        };
        let mut job = consoles(&[("user_logs/std_log_process_21.txt", nccl)]);
        job.events[0].pattern = "nccl.init";
        job.files.push(FileInfo {
            id: FileId(2),
            path: format!("node_diagnostics/{id}/ibstat.txt"),
            ..FileInfo::default()
        });
        job.files.push(FileInfo {
            id: FileId(3),
            path: "node_diagnostics/4f1d3c9a2b0e4e9c8a7b6d5e4f3a2b1c000003/ibstat.txt".into(),
            ..FileInfo::default()
        });
        adopt_line_named_folders(&mut job, &mut CounterStore::default());
        assert_eq!(job.files[2].hints.host.as_deref(), Some(id));
        assert_eq!(job.files[3].hints.host, None, "no line names that host");
    }

    const HOSTS: [&str; 4] = ["gpu-1", "gpu-13", "h100-r00-n027", "node005"];

    fn host_of(path: &str) -> Option<&'static str> {
        host_token_in_name(path, HOSTS.iter().copied())
    }

    #[test]
    fn a_host_stands_between_any_separators() {
        assert_eq!(host_of("x/node005-perfquery-after.txt"), Some("node005"));
        assert_eq!(host_of("ibstat_h100-r00-n027.txt"), Some("h100-r00-n027"));
        assert_eq!(
            host_of("after_sysfs-counters.h100-r00-n027.txt"),
            Some("h100-r00-n027")
        );
        assert_eq!(
            host_of("gpu-13-ethtool-S-enp26s0np0-before.txt"),
            Some("gpu-13")
        );
    }

    #[test]
    fn a_folder_named_by_an_address_is_read_as_one() {
        let at = |p: &str| address_folder(p).map(|a| a.to_string());
        assert_eq!(
            at("10.0.0.5/counters/before/x.txt").as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(at("logs/fe80::1/x.txt").as_deref(), Some("fe80::1"));
        assert_eq!(
            at("10.0.0.5.txt"),
            None,
            "a file's own name is not a folder"
        );
        assert_eq!(at("node005/x.txt"), None);
    }

    #[test]
    fn a_host_joined_to_a_word_is_found_inside_the_name() {
        let known: FxHashSet<String> = ["dgx017", "h100-r00-n027", "sys-dgx017", "r00"]
            .map(String::from)
            .into_iter()
            .collect();
        assert_eq!(inner_host("sys-dgx017", &known), Some("dgx017"));
        assert_eq!(
            inner_host("counters-h100-r00-n027", &known),
            Some("h100-r00-n027")
        );
        assert_eq!(inner_host("dgx0171", &known), None);
        assert_eq!(
            inner_host("dgx017", &known),
            None,
            "a name is not inside itself"
        );
    }

    #[test]
    fn a_host_inside_a_longer_word_is_not_named() {
        assert_eq!(host_of("gpu-134-ibstat.txt"), None);
        assert_eq!(host_of("node0055.txt"), None);
        assert_eq!(
            host_of("node005/ibstat.txt"),
            None,
            "folders are hints already"
        );
    }
}
