//! The model stage: join the events of every file into one [`Job`].
//!
//! Order matters: ranks are resolved first (every later step keys on them),
//! then the network picture, the process groups and the deaths; the kernel
//! logs last, as they join onto all of these (and add deaths).

mod address_hosts;
mod blocks;
mod call_traces;
mod collectives;
mod counters;
mod deaths;
mod file_hosts;
mod flight;
mod identity;
mod inits;
mod kernel;
mod network;
mod rank_index;
mod settings;
mod stacks;
mod sweeps;
mod task_files;
mod trees;

use super::{Event, FileInfo, Job, PeerLink, SysTables};

pub use counters::phase_of_path;
pub use deaths::{ConsequenceRules, TRACEBACK_LINES, signal_of};
pub use settings::{nccl_major_minor, nccl_version_of};
pub use trees::{tree_edges, tree_rank};

/// Builds the job model from the file table and all events in (file, line) order.
pub fn build(
    root: String,
    files: Vec<FileInfo>,
    events: Vec<Event>,
    tables: SysTables,
    links: Vec<PeerLink>,
    rules: &ConsequenceRules,
) -> Job {
    let mut job = Job {
        root,
        files,
        events,
        ..Job::default()
    };
    job.ports = tables.ports;
    job.gids = tables.gids;
    job.flight = tables.flight;
    job.gpus = tables.gpus;
    job.neighbors = tables.neighbors;
    job.bond_slaves = tables.bond_slaves;
    flight::synthesize(&mut job);
    file_hosts::adopt_logs(&mut job);
    task_files::assign_ranks(&mut job);
    job.index_kinds();
    let mut store = tables.counters;
    file_hosts::adopt_address_folders(&mut job, &mut store);
    file_hosts::adopt_line_named_folders(&mut job, &mut store);
    file_hosts::adopt_prefixed_folders(&mut job, &mut store);
    job.addr_hosts = address_hosts::name_address_hosts(&mut job);
    let clues = counters::FileClues::of(&job.files);
    let mut ports = std::mem::take(&mut job.ports);
    let unplaced = file_hosts::unplaced(&job.files, &ports, &job.gids, &job.gpus, &store);
    let ((counted, distinct), inits) = if unplaced.is_empty() {
        // The counters and the distinct links need nothing the ranks are
        // resolved from: all are built at once (the first two each about a
        // third of a second at 16k ranks).
        rayon::join(
            || {
                rayon::join(
                    || counters::collect(&clues, &ports, store),
                    || network::distinct_links(&links),
                )
            },
            || identity::resolve(&mut job),
        )
    } else {
        // Dumps that only their file's name places wait for the ranks,
        // whose hosts are the names to look for.
        let inits = identity::resolve(&mut job);
        file_hosts::adopt(&mut job, &unplaced, &mut ports, &mut store);
        let built = rayon::join(
            || counters::collect(&clues, &ports, store),
            || network::distinct_links(&links),
        );
        (built, inits)
    };
    job.ports = ports;
    counted.store_in(&mut job);
    network::collect(&mut job, &links, distinct);
    // Millions of channel ends at scale: free them before the rest is built.
    drop(links);
    trees::collect(&mut job, &inits);
    drop(inits);
    settings::collect(&mut job);
    collectives::collect(&mut job);
    call_traces::collect(&mut job);
    deaths::collect(&mut job, rules);
    stacks::collect(&mut job);
    blocks::place_silent_ranks(&mut job);
    kernel::collect(&mut job);
    // The tables grew by doubling while batches were merged; the job lives
    // through the diagnosis, when memory peaks.
    job.events.shrink_to_fit();
    job.counter_deltas.shrink_to_fit();
    job
}

/// The short host name NCCL would print for a name that may be a FQDN.
pub(crate) fn short_host(name: &str) -> &str {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return name;
    }
    name.split('.').next().unwrap_or(name)
}

/// [`short_host`], owned: for peer names that no address table knows.
pub fn short_host_of(name: &str) -> String {
    short_host_in(name).to_string()
}

/// [`short_host_of`], borrowed from the name.
pub(crate) fn short_host_in(name: &str) -> &str {
    let host = name.split('<').next().unwrap_or(name);
    short_host(host)
}
