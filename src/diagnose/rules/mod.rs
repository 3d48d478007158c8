//! The cause rules: each looks at the joined evidence and proposes hypotheses
//! with their culprit and support. Message meanings come from the grammars;
//! cause texts and code tables from `grammars/knowledge.toml`; what is left
//! here is how evidence combines.

mod application;
mod barrier;
mod bootstrap;
mod bootstrap_ring;
mod bundled;
mod cabling;
mod calls;
mod common_peer;
mod config;
mod duplicate_gpu;
mod efa;
mod fabric;
mod firewall_log;
mod forced_algorithm;
mod fr_analysis;
mod framework;
mod gloo;
mod gpu;
mod gpu_health;
mod gpu_memory;
mod gpudirect;
mod horovod;
mod host_setup;
mod host_stopped;
mod invalid_rank;
mod kernel;
mod launch_env;
mod lossier_end;
mod main_process;
mod nccl_bug;
mod nccl_cuda;
mod nccl_install;
mod network;
mod passed_over;
mod peer_path;
mod process;
mod progress;
mod rail_congestion;
mod rank_claims;
mod ras_report;
mod setup;
mod shared_hostname;
mod shm;
mod sockets;
mod stacks;
mod store;
mod topology_file;
mod unstoppable;
mod verbs;
mod waiting_elsewhere;

use crate::grammar::knowledge::Knowledge;
use crate::model::Job;
use crate::timeline::Timeline;
use rayon::prelude::*;

use super::hang::Hang;
use super::hypothesis::Hypothesis;

/// What every rule may read.
pub struct Ctx<'a> {
    pub job: &'a Job,
    pub timeline: &'a Timeline,
    pub kb: &'a Knowledge,
}

#[cfg(test)]
impl Ctx<'_> {
    /// Runs `f` over a context of `job` with the built-in knowledge and the
    /// job's own timeline (for unit tests).
    pub(crate) fn over<R>(job: &Job, f: impl FnOnce(&Ctx<'_>) -> R) -> R {
        let kb = Knowledge::builtin().unwrap();
        let timeline = Timeline::build(job);
        f(&Ctx {
            job,
            timeline: &timeline,
            kb: &kb,
        })
    }
}

impl Ctx<'_> {
    /// The host an address is: NCCL's own lines first (a host that printed
    /// it as its own), else the one host whose tools list it (`ip addr`),
    /// unless it lies in a network every host has its own copy of.
    pub fn host_of_addr(&self, addr: &str) -> Option<&str> {
        self.job.host_of_addr(addr).or_else(|| {
            self.kb
                .local_only
                .network_of(addr)
                .is_none()
                .then(|| self.job.listed_host_of(addr))
                .flatten()
        })
    }
}

/// One family of rules, run over the shared, read-only context.
type RuleFamily<'r> = &'r (dyn Fn() -> Vec<Hypothesis> + Sync);

/// Runs every rule, and reviews the fabric (which the fabric rules read and
/// the report shows). The rule families only read the job, so they run in
/// parallel, beside the review; their hypotheses come back in this fixed
/// order, which the selection keeps where hypotheses tie.
pub fn hypotheses(
    ctx: &Ctx<'_>,
    hang: Option<&Hang>,
    fabric: FabricFacts,
) -> (Vec<Hypothesis>, FabricReview) {
    let families: [RuleFamily<'_>; 8] = [
        &|| {
            let mut found = process::hypotheses(ctx);
            found.extend(host_stopped::host_stopped_under_the_job(ctx));
            found
        },
        &|| {
            gpu::hypotheses(ctx)
                .into_iter()
                .chain(gpu_health::hypotheses(ctx))
                .chain(gpudirect::broken_gpudirect(ctx))
                .chain(peer_path::stuck_between_gpus(ctx, hang))
                .collect()
        },
        &|| {
            let mut found = network::hypotheses(ctx, hang);
            found.extend(rail_congestion::congested_rail(ctx.job, &ctx.kb.counters));
            found
        },
        &|| setup::hypotheses(ctx, hang),
        &|| {
            config::config_mismatch(ctx)
                .into_iter()
                .chain(topology_file::topology_file(ctx))
                .chain(duplicate_gpu::shared_gpu(ctx))
                .chain(shared_hostname::one_name_two_machines(ctx))
                .chain(invalid_rank::rank_outside_the_world(ctx))
                .chain(rank_claims::colliding_rank_claims(ctx))
                .chain(forced_algorithm::forced_algorithm(ctx))
                .chain(nccl_install::hypotheses(ctx))
                .chain(nccl_cuda::hypotheses(ctx))
                .chain(host_setup::host_set_up_wrongly(ctx))
                .chain(launch_env::settings_on_some_hosts(ctx, hang))
                .collect()
        },
        &|| {
            let mut found = application::hypotheses(ctx, hang);
            found.extend(unstoppable::ignored_sigterm(ctx, hang));
            found
        },
        &|| {
            let mut found = kernel::hypotheses(ctx);
            found.extend(firewall_log::denied_connections(ctx));
            found
        },
        &|| nccl_bug::hypotheses(ctx, hang).into_iter().collect(),
    ];
    /// Where the fabric rules, which wait for the review, take their turn.
    const FABRIC_AT: usize = 6;
    let (review, mut found) = rayon::join(
        || fabric_review(ctx, hang, fabric),
        || -> Vec<Vec<Hypothesis>> { families.par_iter().map(|family| family()).collect() },
    );
    found.insert(FABRIC_AT, fabric::hypotheses(ctx, hang, &review));
    (found.into_iter().flatten().collect(), review)
}

pub use fabric::{FabricFacts, FabricReview, fabric_review};
pub use fr_analysis::analysed_collective;
pub use gpu::cuda_error_text;
pub use peer_path::{nccl_tests_run, on_one_host};
pub use process::culprit_deaths;
pub use ras_report::{ras_collective, ras_shows_a_hang, ras_shows_lost_processes};
pub use stacks::{dumped_collective, dumps_show_a_wait};
