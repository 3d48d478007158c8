//! A worker its launcher could not stop with SIGTERM (torchrun had to kill
//! it: `Unable to shutdown process N via Signals.SIGTERM, forcefully
//! exiting via Signals.SIGKILL`, its exit `-9` in the failure summary) in a
//! job that hung, while it reported no timeout of its own: a process stuck
//! outside Python's reach (a GIL deadlock, a hung system call, a driver
//! call that never returns) is what the others' collectives waited for.

use std::collections::BTreeSet;

use crate::diagnose::hang::Hang;
use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::CauseKind;

use super::Ctx;

pub(super) fn ignored_sigterm(ctx: &Ctx<'_>, hang: Option<&Hang>) -> Option<Hypothesis> {
    let hang = hang?;
    let stuck: Vec<_> = ctx
        .job
        .deaths
        .iter()
        .filter(|d| d.ignored_sigterm)
        .filter(|d| d.rank.is_some_and(|r| !hang.timed_out.contains(&r)))
        .collect();
    let hosts: BTreeSet<Option<&str>> = stuck.iter().map(|d| d.host.as_deref()).collect();
    // A few ranks: a whole job that ignored SIGTERM says nothing of one.
    if stuck.is_empty() || stuck.len() > 8 || hosts.len() > 1 {
        return None;
    }
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    h.host = stuck[0].host.clone();
    h.ranks = stuck.iter().filter_map(|d| d.rank).collect();
    for d in &stuck {
        for &ev in d.evidence.iter().take(1) {
            h.support(
                Source::Launcher,
                0.5,
                Some(ev),
                "its launcher's SIGTERM did not stop it and it had to be killed, while it reported no timeout: stuck outside Python's reach while the others waited",
            );
        }
    }
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Death, DeathKind, Job, RawTime};

    fn killed(rank: u32, ignored_sigterm: bool) -> Death {
        Death {
            rank: Some(rank),
            host: Some("w17".into()),
            pid: Some(100 + rank),
            kind: DeathKind::Signal,
            exitcode: Some(-9),
            signal: Some("SIGKILL".into()),
            reason: "Signal 9 (SIGKILL) received by PID".into(),
            consequence: true,
            stopped_by_launcher: true,
            ignored_sigterm,
            time: RawTime::None,
            evidence: vec![0],
        }
    }

    #[test]
    fn a_rank_the_agent_had_to_kill_that_never_timed_out_stalled_torch_2_5() {
        let mut job = Job::with_ranks_on(&[(136, "w17"), (137, "w17")]);
        job.deaths = vec![killed(137, true), killed(136, false)];
        let mut hang = Hang::default();
        hang.timed_out.insert(136);
        let found = Ctx::over(&job, |ctx| ignored_sigterm(ctx, Some(&hang))).unwrap();
        assert_eq!(found.kind, CauseKind::RankStalled);
        assert_eq!(found.ranks.iter().copied().collect::<Vec<_>>(), [137]);
        // It timed out like the others: it was waiting, not stuck.
        hang.timed_out.insert(137);
        assert!(Ctx::over(&job, |ctx| ignored_sigterm(ctx, Some(&hang))).is_none());
        assert!(Ctx::over(&job, |ctx| ignored_sigterm(ctx, None)).is_none());
    }
}
