//! `ncclpm simulate`: writes a job folder as a real failed (or healthy) job
//! leaves it — NCCL, PyTorch and launcher logs in several releases' shapes
//! and layouts, kernel logs, counter dumps and port snapshots — and beside
//! it the truth an analyzer should find.
//!
//! The simulator shares only the model's vocabulary (`CauseKind`) with the
//! parsers. Every format is written from the format docs, never from the
//! grammars, so the two can disagree: that is what testing one with the
//! other is for.
//!
//! Stages: [`plan`] draws the job (hosts, ranks, versions, clocks) from the
//! seed; [`causes`] builds the [`story`] of the scenario; [`sched`] decides
//! when processes end; the writers ([`nccl`], [`torch`], [`launcher`],
//! [`kernel`], [`counters`], [`snapshots`]) render it; [`layout`] puts the
//! files where a real job would.

pub mod causes;
pub mod clock;
pub mod counters;
pub mod kernel;
pub mod launcher;
pub mod layout;
pub mod lldp;
pub mod nccl;
pub mod plan;
pub mod rank;
pub mod rng;
pub mod sched;
pub mod snapshots;
pub mod story;
pub mod stream;
pub mod topo;
pub mod torch;
pub mod versions;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model::CauseKind;

pub use layout::Written;
pub use plan::{Layout, Plan, Profile, Scenario, SimNames, SimOptions};
pub use story::{Truth, TruthCause, TruthCollective};
pub use versions::Ver;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Options(String),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The truth file written beside the job folder.
#[derive(Debug, Clone, Serialize)]
pub struct TruthDoc {
    pub schema_version: u32,
    pub generator: String,
    pub scenario: &'static str,
    pub seed: u64,
    pub ranks: u32,
    pub hosts: usize,
    pub gpus_per_host: u32,
    pub layout: &'static str,
    pub profile: &'static str,
    pub fabric: &'static str,
    pub nccl_version: String,
    pub torch_version: String,
    pub sources: SourcesDoc,
    #[serde(flatten)]
    pub truth: Truth,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SourcesDoc {
    pub kernel: bool,
    pub counters: bool,
    pub snapshots: bool,
}

/// What one run of the simulator produced.
#[derive(Debug)]
pub struct Summary {
    pub truth: TruthDoc,
    pub truth_path: PathBuf,
    pub written: Written,
}

/// `OUT_DIR.truth.json`, beside the job folder.
pub fn truth_path(out: &Path) -> Result<PathBuf, SimError> {
    let name = out.file_name().ok_or_else(|| {
        SimError::Options(format!("{}: name the job folder itself", out.display()))
    })?;
    Ok(out.with_file_name(format!("{}.truth.json", name.to_string_lossy())))
}

/// Writes the job folder `out` (which must not exist, or be empty) and its
/// truth file.
pub fn simulate(opts: &SimOptions, out: &Path) -> Result<Summary, SimError> {
    opts.check().map_err(SimError::Options)?;
    let truth_path = truth_path(out)?;
    if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(SimError::Options(format!(
            "{} exists and is not empty",
            out.display()
        )));
    }
    let mut plan = Plan::build(opts);
    let mut story = causes::build(&plan);
    keep_the_evidence(&mut plan);
    died_of_the_fault(&plan, &mut story);
    let written = layout::write_job(&plan, &story, out)?;
    let truth = truth_doc(&plan, &story);
    let json = serde_json::to_string_pretty(&truth).unwrap_or_default() + "\n";
    std::fs::write(&truth_path, json).map_err(|source| SimError::Io {
        path: truth_path.clone(),
        source,
    })?;
    Ok(Summary {
        truth,
        truth_path,
        written,
    })
}

/// A source may be missing from a job, but never the one that carries the
/// scenario's own evidence: the truth must stay decidable from the files.
fn keep_the_evidence(plan: &mut Plan) {
    let Scenario::Fault(kind) = plan.scenario else {
        return;
    };
    let s = &mut plan.sources;
    match kind {
        CauseKind::LinkFlap => {
            s.kernel = true;
            s.counters = true;
        }
        CauseKind::PacketLoss | CauseKind::Congestion => s.counters = true,
        // LLDP shows a cross-rail job's stray cable.
        CauseKind::MtuMismatch | CauseKind::GidIndex | CauseKind::CrossRail => {
            s.snapshots = true;
        }
        CauseKind::PortDegraded => {
            s.snapshots = true;
            s.kernel = true;
        }
        CauseKind::HcaFault | CauseKind::GpuFault | CauseKind::ProcessCrash => s.kernel = true,
        _ => {}
    }
}

/// A fault on the wire or the NIC is a hang where ranks wait in the
/// collective until their watchdog fires (step 4's link flap). Where the
/// ranks it reached were aborted by NCCL's error before any watchdog fired
/// (and their launchers may take every host down before one does), the
/// job crashed of the fault, as on-call engineers file it.
fn died_of_the_fault(plan: &Plan, story: &mut story::Story) {
    let aborts = story.truth.cause.as_ref().is_some_and(|c| {
        matches!(
            c.kind,
            "link_flap" | "packet_loss" | "mtu_mismatch" | "hca_fault"
        )
    });
    if story.truth.status == "hang" && aborts && sched::died_of_an_error_first(plan, story) {
        story.truth.status = "crash";
    }
}

fn truth_doc(plan: &Plan, story: &story::Story) -> TruthDoc {
    TruthDoc {
        schema_version: 1,
        generator: format!("ncclpm simulate {}", env!("CARGO_PKG_VERSION")),
        scenario: plan.scenario.name(),
        seed: plan.seed,
        ranks: plan.world,
        hosts: plan.hosts.len(),
        gpus_per_host: plan.gpus_per_host,
        layout: plan.layout.name(),
        profile: match plan.profile {
            Profile::Small => "small",
            Profile::Full => "full",
        },
        fabric: match plan.fabric {
            plan::Fabric::Ib => "IB",
            plan::Fabric::Roce => "RoCE",
        },
        nccl_version: plan.versions.nccl.to_string(),
        torch_version: plan.versions.torch.to_string(),
        sources: SourcesDoc {
            kernel: plan.sources.kernel,
            counters: plan.sources.counters,
            snapshots: plan.sources.snapshots,
        },
        truth: story.truth.clone(),
    }
}
