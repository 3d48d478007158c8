//! One rail congested end to end: the same NIC of most hosts waiting for
//! credits far more than every other NIC.
//!
//! A credit-wait counter (`PortXmitWait`) means nothing alone: a dump gives
//! no time base, and a busy fabric waits everywhere. Against the job's own
//! other rails it does: hosts are built alike and NCCL spreads traffic over
//! the rails evenly, so where the k-th NIC of most hosts waited a hundred
//! times longer than the others, rail k's switches are congested (another
//! job's traffic, an uplink down, a misrouted flow). No single host is to
//! blame; the ranks behind that NIC on every host are the slow ones.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::nic_use::NicUse;
use crate::grammar::counters::CounterKnowledge;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, CounterDelta, Job};

/// How many times the other rails' median the rail must wait.
const STANDS_OUT: u64 = 100;
/// Hosts a rail must be seen on for the comparison to mean anything.
const MIN_HOSTS: usize = 3;
const WEIGHT: f64 = 0.5;

/// The rail whose credit waits stand out, as a congestion hypothesis.
pub(super) fn congested_rail(job: &Job, counters: &CounterKnowledge) -> Option<Hypothesis> {
    let usage = NicUse::new(job);
    let mut by_rail: Rails<'_> = BTreeMap::new();
    for d in &job.counter_deltas {
        let waits = counters
            .lookup(d.name.as_str())
            .is_some_and(|c| c.cause == Some(CauseKind::Congestion) && !c.corroborates_only);
        let Some(host) = d.host.as_ref().map(|h| short_host_of(h.as_str())) else {
            continue;
        };
        if !waits || d.reset || d.delta.is_none() {
            continue;
        }
        let hca = usage.hca_of(Some(&host), d.device.as_str()).to_string();
        let name = counters.lookup(d.name.as_str())?.name.clone();
        by_rail.entry((name, hca)).or_default().push((host, d));
    }
    let (name, rail, hosts) = standing_out(&by_rail)?;
    let mut h = Hypothesis::new(CauseKind::Congestion);
    h.value("variant", "rail");
    h.device = Some(rail.clone());
    h.ranks = hosts
        .iter()
        .flat_map(|(host, _)| usage.of(Some(host), &rail).ranks())
        .collect();
    let biggest = hosts.iter().max_by_key(|(_, d)| d.delta)?;
    let spread: BTreeSet<&str> = hosts.iter().map(|(h, _)| h.as_str()).collect();
    h.value(
        "detail",
        format!(
            "{name} on {rail} of {} hosts rose over {STANDS_OUT} times the other NICs' median",
            spread.len()
        ),
    );
    h.support_table(
        Source::Counters,
        WEIGHT,
        biggest.1.cite.clone(),
        format!(
            "{name} +{} on {} {rail}; the same NIC of {} hosts waited alike, the other NICs hardly at all",
            biggest.1.delta.unwrap_or(0),
            biggest.0,
            spread.len()
        ),
    );
    Some(h)
}

/// One host's rise of a counter on the rail.
type HostRise<'a> = (String, &'a CounterDelta);
type Rails<'a> = BTreeMap<(String, String), Vec<HostRise<'a>>>;

/// (counter, rail, its hosts' deltas) of the one rail whose median rise is
/// far above every other rail's of that counter.
fn standing_out<'a>(by_rail: &'a Rails<'a>) -> Option<(String, String, &'a [HostRise<'a>])> {
    let mut found = None;
    let names: BTreeSet<&String> = by_rail.keys().map(|(n, _)| n).collect();
    for name in names {
        let rails: Vec<(&String, u64, &[HostRise<'_>])> = by_rail
            .iter()
            .filter(|((n, _), hosts)| n == name && hosts.len() >= MIN_HOSTS)
            .map(|((_, rail), hosts)| (rail, median(hosts), hosts.as_slice()))
            .collect();
        if rails.len() < 2 {
            continue;
        }
        let mut medians: Vec<u64> = rails.iter().map(|r| r.1).collect();
        medians.sort_unstable();
        let top = rails.iter().max_by_key(|r| r.1)?;
        let others = medians[..medians.len() - 1].to_vec();
        let others_median = others[others.len() / 2];
        let second = *others.last()?;
        if top.1 >= STANDS_OUT * others_median.max(1) && top.1 >= STANDS_OUT * second.max(1) / 10 {
            if found.is_some() {
                return None;
            }
            found = Some((name.clone(), top.0.clone(), top.2));
        }
    }
    found
}

fn median(hosts: &[HostRise<'_>]) -> u64 {
    let mut v: Vec<u64> = hosts.iter().filter_map(|(_, d)| d.delta).collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waited(host: &str, hca: &str, by: u64) -> CounterDelta {
        CounterDelta::rose(host, hca, "PortXmitWait", 1_000, 1_000 + by)
    }

    fn builtin() -> CounterKnowledge {
        CounterKnowledge::builtin().unwrap()
    }

    fn job(rail1: u64) -> Job {
        let mut deltas = Vec::new();
        for host in ["n101", "n102", "n103", "n104"] {
            deltas.push(waited(host, "mlx5_0", 900_000_000));
            deltas.push(waited(host, "mlx5_1", rail1));
            deltas.push(waited(host, "mlx5_2", 700_000_000));
        }
        Job {
            counter_deltas: deltas,
            ..Job::default()
        }
    }

    /// Prolog/epilog perfquery of eight hosts: mlx5_1 waited ~400 times
    /// longer than the other NICs everywhere.
    #[test]
    fn a_rail_waiting_far_longer_on_every_host_is_congested() {
        let h = congested_rail(&job(300_000_000_000), &builtin()).expect("a congested rail");
        assert_eq!(h.kind, CauseKind::Congestion);
        assert_eq!(h.device.as_deref(), Some("mlx5_1"));
        assert_eq!(h.host, None);
    }

    /// Waits of one order everywhere are a busy fabric, not a rail's fault.
    #[test]
    fn rails_that_wait_alike_are_load() {
        assert!(congested_rail(&job(2_000_000_000), &builtin()).is_none());
    }
}
