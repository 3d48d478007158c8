//! The launching shell's NCCL settings that reached some hosts only. A
//! launcher that starts remote processes passes them the shell's variables
//! only when told to (Open MPI's `-x NAME`, MPICH's `-genv`, `srun
//! --export`): NCCL_DEBUG and every other NCCL_* setting then hold on the
//! launching host alone (nccl-tests#125: NCCL_SHM_DISABLE=1 set for a pod
//! with a small /dev/shm, the other pod's processes running without it).
//!
//! Seen from one merged output (the launcher's, where every process writes
//! and nccl-tests' first process lists every rank's host): processes of the
//! run's other hosts print no NCCL line at all, while those of the
//! launching host print NCCL's debug output. Where each host wrote its own
//! file, a missing host is a missing file, not this.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, FileId};

use super::Ctx;
use super::peer_path::TestRun;

pub fn settings_on_some_hosts(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    let job = ctx.job;
    let run = super::nccl_tests_run(job)?;
    if hang.is_none() && !run.stopped(job) {
        return None;
    }
    let placed = hosts_of_ranks(&run);
    let (printing, files) = hosts_printing_nccl(ctx);
    // One output holds every line, the run's rank lines too: a host that
    // printed nothing there printed nothing at all.
    let rank_lines = job.events[run.first_line?].origin.file;
    if files.len() != 1 || !files.contains(&rank_lines) || printing.is_empty() {
        return None;
    }
    // The rank lines and NCCL name hosts alike (a container's id in one, a
    // pod's name in the other would make every host look silent).
    if !placed.keys().any(|h| printing.contains(h)) {
        return None;
    }
    let silent: BTreeSet<&String> = placed.keys().filter(|h| !printing.contains(*h)).collect();
    let first_silent = silent.iter().next()?;
    let settings: Vec<&str> = job
        .env
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "NCCL_DEBUG")
        .collect();
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "launch_env");
    h.host = Some((*first_silent).clone());
    h.ranks = silent
        .iter()
        .flat_map(|host| placed[*host].iter().copied())
        .collect();
    let printed: Vec<&str> = printing.iter().map(String::as_str).collect();
    let quiet: Vec<&str> = silent.iter().map(|h| h.as_str()).collect();
    let set = match settings.as_slice() {
        [] => ",".to_string(),
        s => format!(", and {} set,", s.join(", ")),
    };
    h.value(
        "detail",
        format!(
            "the processes on {} printed NCCL's debug output{set} those on {} no NCCL line",
            printed.join(", "),
            quiet.join(", ")
        ),
    );
    let cite = ctx
        .job
        .events
        .iter()
        .position(|e| e.pattern.starts_with("nccl.") && e.who.host.is_some());
    h.support(
        Source::Launcher,
        0.45,
        cite,
        format!(
            "every process writes to this output, yet only those on {} printed NCCL's debug output: the launching shell's NCCL settings did not reach the others",
            printed.join(", ")
        ),
    );
    Some(h)
}

/// Short host → the ranks an nccl-tests run's rank lines place there (its
/// first process prints every rank's line into the launcher's output).
fn hosts_of_ranks(run: &TestRun) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for (host, ranks) in &run.placed {
        out.entry(short_host_of(host)).or_default().extend(ranks);
    }
    out
}

/// Short hosts whose processes wrote NCCL lines, and the files those lines
/// are in.
fn hosts_printing_nccl(ctx: &Ctx<'_>) -> (BTreeSet<String>, BTreeSet<FileId>) {
    let mut hosts: BTreeSet<&str> = BTreeSet::new();
    let mut files = BTreeSet::new();
    for ev in ctx
        .job
        .events
        .iter()
        .filter(|e| e.pattern.starts_with("nccl."))
    {
        if let Some(host) = ev.who.host.as_deref() {
            hosts.insert(host);
            files.insert(ev.origin.file);
        }
    }
    (hosts.into_iter().map(short_host_of).collect(), files)
}
