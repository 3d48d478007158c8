//! IOMMU faults on a host whose IOMMU translates, in a job where other
//! hosts boot it in pass-through: the same peer-to-peer transfers fault on
//! the one host only because it was set up differently (a re-image lost
//! `iommu=pt`). The hosts disagree: a configuration mismatch, placed on the
//! translating host, rather than a fault of its GPUs.

use std::collections::BTreeMap;

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, EventIdx, EventKind, Job};

/// Each host's boot-time IOMMU mode line: (mode, the line).
fn modes(job: &Job) -> BTreeMap<String, (&str, EventIdx)> {
    let mut out = BTreeMap::new();
    for (idx, ev) in job.events_where(|k| k == EventKind::IommuMode) {
        let (Some(host), Some(mode)) = (job.host_of_event(ev), ev.text_field("mode")) else {
            continue;
        };
        // The last boot's line counts: a host rebooted into another mode.
        out.insert(short_host_of(host), (mode, idx));
    }
    out
}

/// Turns each host-wide IOMMU GPU fault on a translating host into a
/// configuration mismatch where another host of the job passes DMA through.
pub(super) fn modes_differ(job: &Job, hypotheses: &mut [Hypothesis]) {
    let modes = modes(job);
    let Some((pt_host, &(_, pt_line))) = modes.iter().find(|(_, (m, _))| *m == "Passthrough")
    else {
        return;
    };
    for h in hypotheses.iter_mut() {
        let iommu = h.values.get("variant").is_some_and(|v| v == "iommu");
        if h.kind != CauseKind::GpuFault || !iommu {
            continue;
        }
        let Some(host) = h.host.as_deref().map(short_host_of) else {
            continue;
        };
        let Some(&(mode, line)) = modes.get(&host).filter(|(m, _)| *m == "Translated") else {
            continue;
        };
        h.kind = CauseKind::ConfigMismatch;
        h.peer_host = Some(pt_host.clone());
        h.support(
            Source::Kernel,
            0.5,
            Some(line),
            format!("{host}'s IOMMU boots {mode}: its GPUs' peer-to-peer DMA goes through it"),
        );
        h.support(
            Source::Kernel,
            0.3,
            Some(pt_line),
            format!("{pt_host}'s IOMMU boots in pass-through: the hosts are set up differently"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Fields, Value, Who};

    fn mode_line(host: &str, mode: &str) -> Event {
        let mut f = Fields::default();
        f.insert("mode", Value::Text(mode.into()));
        let mut ev = Event::with_fields(EventKind::IommuMode, f);
        ev.who = Who {
            host: Some(host.into()),
            ..Who::default()
        };
        ev
    }

    fn iommu_fault_on(host: &str) -> Hypothesis {
        let mut h = Hypothesis::new(CauseKind::GpuFault);
        h.host = Some(host.into());
        h.value("variant", "iommu");
        h
    }

    #[test]
    fn a_translating_host_among_pass_through_ones_is_set_up_differently_linux_5_15() {
        let mut job = Job::with_ranks_on(&[(0, "a07"), (1, "a08")]);
        job.events = vec![
            mode_line("a07", "Passthrough"),
            mode_line("a08", "Translated"),
        ];
        let mut found = vec![iommu_fault_on("a08")];
        modes_differ(&job, &mut found);
        assert_eq!(found[0].kind, CauseKind::ConfigMismatch);
        assert_eq!(found[0].peer_host.as_deref(), Some("a07"));
        assert_eq!(found[0].support.len(), 2);
    }

    #[test]
    fn hosts_that_all_translate_keep_the_gpu_fault() {
        let mut job = Job::with_ranks_on(&[(0, "a07"), (1, "a08")]);
        job.events = vec![
            mode_line("a07", "Translated"),
            mode_line("a08", "Translated"),
        ];
        let mut found = vec![iommu_fault_on("a08")];
        modes_differ(&job, &mut found);
        assert_eq!(found[0].kind, CauseKind::GpuFault);
        // A fault on the pass-through host itself is no mismatch either.
        job.events = vec![
            mode_line("a07", "Translated"),
            mode_line("a08", "Passthrough"),
        ];
        modes_differ(&job, &mut found);
        assert_eq!(found[0].kind, CauseKind::GpuFault);
    }
}
