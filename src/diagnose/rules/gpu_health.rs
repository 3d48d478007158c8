//! GPU faults that `nvidia-smi` shows: the fields in which the driver says a
//! GPU is faulty (`[[gpu_health]]` in knowledge.toml), placed on the GPU and
//! the ranks that used it. A GPU the job did not use counts little, as for
//! kernel lines; the same GPU's Xid lines are another source and combine.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, GpuSnapshot};

use super::Ctx;
use super::kernel::JobGpus;

/// At most this many fields are cited per GPU.
const MAX_SUPPORT: usize = 4;

pub fn hypotheses(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    if ctx.job.gpus.iter().all(|g| g.findings.is_empty()) {
        return Vec::new();
    }
    let gpus = JobGpus::of(ctx);
    ctx.job
        .gpus
        .iter()
        .filter_map(|g| faulty_gpu(ctx, &gpus, g))
        .collect()
}

fn faulty_gpu(ctx: &Ctx<'_>, gpus: &JobGpus, g: &GpuSnapshot) -> Option<Hypothesis> {
    let mut known: Vec<_> = g
        .findings
        .iter()
        .filter_map(|f| Some((f, ctx.kb.gpu_health(f.finding)?)))
        .collect();
    known.sort_by(|a, b| b.1.weight.total_cmp(&a.1.weight));
    let (_, strongest) = known.first()?;
    let ranks = g
        .pci
        .as_deref()
        .map(|pci| gpus.ranks(&g.host, pci))
        .unwrap_or_default();
    let ownership = gpus.ownership(&g.host, &ranks);
    let mut h = Hypothesis::new(CauseKind::GpuFault);
    h.host = g.host.clone();
    h.gpu_bus_id = g.pci.clone();
    h.ranks = ranks;
    // Told as the fabric's fault only where every finding is the fabric's.
    if known.iter().all(|(_, k)| k.variant.is_some())
        && let Some(variant) = &strongest.variant
    {
        h.value("variant", variant.clone());
    }
    h.value("detail", format!("nvidia-smi: {}", strongest.meaning));
    let gpu = g.pci.as_deref().unwrap_or("a GPU");
    for (f, k) in known.iter().take(MAX_SUPPORT) {
        let why = format!("nvidia-smi on {gpu}: {}", k.meaning);
        h.support_table(Source::Snapshot, k.weight * ownership, f.line.clone(), why);
    }
    Some(h)
}
