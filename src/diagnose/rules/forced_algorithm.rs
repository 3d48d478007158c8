//! NCCL found no algorithm and protocol that can run a collective
//! (`no algorithm/protocol available`). With NCCL_ALGO or NCCL_PROTO set,
//! the setting forbade every one that could: CollNet forced without a
//! CollNet network, NVLS without NVSwitch, a protocol list that leaves
//! none. A job set up with NCCL settings that do not fit it; unset, NCCL
//! returns an internal error and no setting is to blame.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind, Job};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn forced_algorithm(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "forced_algo");
    for (idx, ev) in job.events_where(|k| k == EventKind::NoAlgorithm) {
        let algo = ev.text_field("algo").or_else(|| setting(job, "NCCL_ALGO"));
        let proto = ev
            .text_field("proto")
            .or_else(|| setting(job, "NCCL_PROTO"));
        let forced: Vec<String> = [("NCCL_ALGO", algo), ("NCCL_PROTO", proto)]
            .into_iter()
            .filter_map(|(name, v)| Some(format!("{name}={}", v?)))
            .collect();
        if forced.is_empty() {
            continue;
        }
        if h.support.is_empty() {
            h.host = job.host_of_event(ev).map(str::to_string);
            let op = match (ev.text_field("func"), ev.text_field("datatype")) {
                (Some(f), Some(d)) => format!("{f} of {d}"),
                (Some(f), None) => f.to_string(),
                _ => "a collective".to_string(),
            };
            h.value("detail", format!("{op} with {}", forced.join(", ")));
        }
        if h.support.len() < CITED {
            h.support(
                Source::Nccl,
                0.7,
                Some(idx),
                format!(
                    "NCCL found no algorithm and protocol to run it with {}",
                    forced.join(", ")
                ),
            );
        }
    }
    (!h.support.is_empty()).then_some(h)
}

/// A setting's one value, as NCCL printed it (`NCCL_ALGO set by environment to …`).
fn setting<'j>(job: &'j Job, name: &str) -> Option<&'j str> {
    let values = job.env.get(name)?;
    (values.len() == 1).then(|| values.keys().next().map(String::as_str))?
}
