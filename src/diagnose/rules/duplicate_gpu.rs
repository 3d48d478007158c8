//! Two ranks of one communicator on the same GPU: NCCL's init refuses them
//! (`Duplicate GPU detected`, ncclInvalidUsage). The launch mapped ranks to
//! GPUs wrongly (a process that never selected its local rank's device,
//! CUDA_VISIBLE_DEVICES handing one device to two processes): ranks set up
//! wrongly, in NCCL's own words.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn shared_gpu(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "duplicate_gpu");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::DuplicateGpu) {
        let (Some(a), Some(b)) = (ev.int("rank_a"), ev.int("rank_b")) else {
            continue;
        };
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.gpu_bus_id = ev.text_field("bus_id").map(str::to_string);
            h.value("detail", format!("ranks {b} and {a}"));
        }
        h.ranks
            .extend([a, b].into_iter().filter_map(|r| u32::try_from(r).ok()));
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.8,
                Some(idx),
                format!("NCCL found ranks {a} and {b} on one GPU and refused to set up"),
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}
