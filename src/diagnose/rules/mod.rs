//! The cause rules: each looks at the joined evidence and proposes hypotheses
//! with their culprit and support. Message meanings come from the grammars;
//! cause texts and code tables from `grammars/knowledge.toml`; what is left
//! here is how evidence combines.

mod application;
mod common_peer;
mod config;
mod fabric;
mod gpu;
mod kernel;
mod nccl_bug;
mod network;
mod process;
mod setup;

use crate::grammar::knowledge::Knowledge;
use crate::model::Job;
use crate::timeline::Timeline;

use super::hang::Hang;
use super::hypothesis::Hypothesis;

/// What every rule may read.
pub struct Ctx<'a> {
    pub job: &'a Job,
    pub timeline: &'a Timeline,
    pub kb: &'a Knowledge,
}

/// Runs every rule.
pub fn hypotheses(ctx: &Ctx<'_>, hang: Option<&Hang>, review: &FabricReview) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    out.extend(process::hypotheses(ctx));
    out.extend(gpu::hypotheses(ctx));
    out.extend(network::hypotheses(ctx, hang));
    out.extend(setup::hypotheses(ctx));
    out.extend(config::config_mismatch(ctx));
    out.extend(application::hypotheses(ctx, hang));
    out.extend(fabric::hypotheses(ctx, hang, review));
    out.extend(kernel::hypotheses(ctx));
    out.extend(nccl_bug::hypotheses(ctx, hang));
    out
}

pub use fabric::{FabricReview, fabric_review};
pub use gpu::cuda_error_text;
pub use process::culprit_deaths;
