//! Cables plugged into another rail's switch, from LLDP.
//!
//! On a rail-optimised fabric the k-th NIC of every host goes to rail k's
//! leaf switch, and rails are not routed to each other. Hosts are built
//! alike, so the same interface name is the same rail on each: where the
//! other hosts' `ens12f0np0` all reach one set of switches and this host's
//! reaches a switch that the others reach through another interface, the
//! cable went to the wrong rail (two cables swapped at a repair, the usual
//! way). Queue pairs between that NIC and its rail's peers time out.
//!
//! Two hosts alone cannot say which of them swapped two cables: each sees
//! the other as the odd one. Three or more can. Two can where one cable
//! went astray without a swap: its host then reaches one leaf through two
//! interfaces, which a rail-optimised host never does, while the other
//! host reaches each leaf through one.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::diagnose::nic_use::NicUse;
use crate::model::build::short_host_of;
use crate::model::{Job, LinkNeighbor};

/// One host's NIC whose cable reaches another interface's switch.
#[derive(Debug)]
pub(super) struct Miscabled<'j> {
    pub host: String,
    pub neighbor: &'j LinkNeighbor,
    /// The interface the other hosts reach that switch through.
    pub switch_of: &'j str,
    /// The switches the other hosts' same interface reaches.
    pub expected: BTreeSet<&'j str>,
}

/// Interface → switch → hosts reaching it through that interface.
type Reach<'j> = BTreeMap<&'j str, BTreeMap<&'j str, BTreeSet<String>>>;

pub(super) fn miscabled(job: &Job) -> Vec<Miscabled<'_>> {
    let mut reach: Reach<'_> = BTreeMap::new();
    for n in &job.neighbors {
        let Some(host) = n.host.as_deref() else {
            continue;
        };
        reach
            .entry(n.netdev.as_str())
            .or_default()
            .entry(n.switch.as_str())
            .or_default()
            .insert(short_host_of(host));
    }
    let mut out = Vec::new();
    for n in &job.neighbors {
        let Some(host) = n.host.as_deref().map(short_host_of) else {
            continue;
        };
        if let Some(m) = odd_one(&reach, n, &host) {
            out.push(m);
        }
    }
    out
}

/// `n` as a miscabled NIC, where two or more other hosts reach other
/// switches through its interface, and some other host reaches its switch
/// through another interface.
fn odd_one<'j>(reach: &Reach<'j>, n: &'j LinkNeighbor, host: &str) -> Option<Miscabled<'j>> {
    let others = |switches: &BTreeMap<&'j str, BTreeSet<String>>| -> BTreeMap<&'j str, usize> {
        switches
            .iter()
            .map(|(&s, hosts)| (s, hosts.iter().filter(|h| *h != host).count()))
            .filter(|&(_, count)| count > 0)
            .collect()
    };
    let same_interface = others(reach.get(n.netdev.as_str())?);
    let peers: usize = same_interface.values().sum();
    if same_interface.contains_key(n.switch.as_str()) {
        return None;
    }
    let outvoted = peers >= 2;
    let one_peer_alike = peers == 1
        && interfaces_into(reach, host, &n.switch) >= 2
        && peer_host(reach, n, host).is_some_and(|peer| one_interface_per_leaf(reach, &peer));
    if !outvoted && !one_peer_alike {
        return None;
    }
    let switch_of = reach
        .iter()
        .filter(|&(&netdev, _)| netdev != n.netdev)
        .find(|(_, switches)| others(switches).contains_key(n.switch.as_str()))
        .map(|(&netdev, _)| netdev)?;
    Some(Miscabled {
        host: host.to_string(),
        neighbor: n,
        switch_of,
        expected: same_interface.into_keys().collect(),
    })
}

/// How many of `host`'s interfaces reach `switch`.
fn interfaces_into(reach: &Reach<'_>, host: &str, switch: &str) -> usize {
    reach
        .values()
        .filter(|switches| switches.get(switch).is_some_and(|h| h.contains(host)))
        .count()
}

/// The one other host that reaches a switch through `n`'s interface.
fn peer_host(reach: &Reach<'_>, n: &LinkNeighbor, host: &str) -> Option<String> {
    reach
        .get(n.netdev.as_str())?
        .values()
        .flatten()
        .find(|h| *h != host)
        .cloned()
}

/// Whether `host` reaches every switch it reaches through one interface.
fn one_interface_per_leaf(reach: &Reach<'_>, host: &str) -> bool {
    let switches: BTreeSet<&str> = reach
        .values()
        .flat_map(|switches| switches.iter())
        .filter(|(_, hosts)| hosts.contains(host))
        .map(|(&s, _)| s)
        .collect();
    switches
        .iter()
        .all(|s| interfaces_into(reach, host, s) == 1)
}

/// Moves a cross-rail hypothesis onto the miscabled NICs of the hosts its
/// failing ranks run on (or of any host, where the ranks name none), with
/// the LLDP line as support. Leaves it alone where no cable is wrong, or
/// the wrong ones sit on several hosts.
pub(super) fn place_on_the_miscabled_nic(job: &Job, h: &mut Hypothesis) {
    let wrong = miscabled(job);
    let failing_hosts: BTreeSet<String> = h
        .ranks
        .iter()
        .filter_map(|&r| job.short_host_of_rank(r).map(str::to_string))
        .chain(h.host.as_deref().map(short_host_of))
        .collect();
    let near: Vec<&Miscabled<'_>> = wrong
        .iter()
        .filter(|m| failing_hosts.is_empty() || failing_hosts.contains(&m.host))
        .collect();
    let hosts: BTreeSet<&str> = near.iter().map(|m| m.host.as_str()).collect();
    let ([host], Some(first)) = (&hosts.into_iter().collect::<Vec<_>>()[..], near.first()) else {
        return;
    };
    let usage = NicUse::new(job);
    let hca_of = |m: &Miscabled<'_>| usage.hca_of(Some(host), &m.neighbor.netdev).to_string();
    let users: BTreeSet<u32> = near
        .iter()
        .flat_map(|m| usage.of(Some(host), &hca_of(m)).ranks())
        .collect();
    h.host = Some(host.to_string());
    h.device = Some(hca_of(first));
    h.port = None;
    if !users.is_empty() {
        h.ranks = users;
    }
    for m in near {
        let Some(line) = m.neighbor.line.clone() else {
            continue;
        };
        let expected: Vec<&str> = m.expected.iter().copied().collect();
        h.support_table(
            Source::Snapshot,
            0.5,
            line,
            format!(
                "LLDP: {host}'s {} is cabled to {}, the switch the other hosts reach through {}; their {} reach {}",
                m.neighbor.netdev,
                m.neighbor.switch,
                m.switch_of,
                m.neighbor.netdev,
                expected.join(", ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cables: &[(&str, &str, &str)]) -> Job {
        let mut job = Job::default();
        for &(host, netdev, switch) in cables {
            job.neighbors.push(LinkNeighbor {
                host: Some(host.into()),
                netdev: netdev.into(),
                switch: switch.into(),
                switch_port: None,
                origin: None,
                line: None,
            });
        }
        job
    }

    fn rails(hosts: &[&str]) -> Vec<(String, String, String)> {
        let mut cables = Vec::new();
        for host in hosts {
            for rail in 0..4 {
                cables.push((
                    host.to_string(),
                    format!("ens{}f0np0", 10 + rail),
                    format!("leaf-rail{rail}"),
                ));
            }
        }
        cables
    }

    fn as_refs(v: &[(String, String, String)]) -> Vec<(&str, &str, &str)> {
        v.iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect()
    }

    /// n3's rail-2 and rail-3 cables were swapped: both its NICs are odd,
    /// no other host's is.
    #[test]
    fn swapped_cables_on_one_host_are_found_there() {
        let mut cables = rails(&["n1", "n2", "n3", "n4"]);
        for c in cables.iter_mut().filter(|c| c.0 == "n3") {
            c.2 = match c.1.as_str() {
                "ens12f0np0" => "leaf-rail3".into(),
                "ens13f0np0" => "leaf-rail2".into(),
                _ => c.2.clone(),
            };
        }
        let j = job(&as_refs(&cables));
        let found: Vec<(String, &str, &str)> = miscabled(&j)
            .into_iter()
            .map(|m| (m.host, m.neighbor.netdev.as_str(), m.switch_of))
            .collect();
        assert_eq!(
            found,
            vec![
                ("n3".to_string(), "ens12f0np0", "ens13f0np0"),
                ("n3".to_string(), "ens13f0np0", "ens12f0np0"),
            ]
        );
    }

    /// Each rail has two leaves (hosts 1–2 on -a, 3–4 on -b): a host on the
    /// other leaf of its own rail is cabled right.
    #[test]
    fn a_second_leaf_of_the_same_rail_is_not_a_wrong_cable() {
        let mut cables = rails(&["n1", "n2", "n3", "n4"]);
        for c in cables.iter_mut().filter(|c| c.0 == "n3" || c.0 == "n4") {
            c.2 = format!("{}-b", c.2);
        }
        assert!(miscabled(&job(&as_refs(&cables))).is_empty());
    }

    /// Two hosts with one pair swapped: each is the other's odd one, and
    /// one other host is not enough to say which is wrong.
    #[test]
    fn two_hosts_cannot_say_which_is_wrong() {
        let mut cables = rails(&["n1", "n2"]);
        for c in cables.iter_mut().filter(|c| c.0 == "n2") {
            if c.1 == "ens10f0np0" {
                c.2 = "leaf-rail1".into();
            } else if c.1 == "ens11f0np0" {
                c.2 = "leaf-rail0".into();
            }
        }
        assert!(miscabled(&job(&as_refs(&cables))).is_empty());
    }

    /// n2's rail-0 cable went to rail 1's leaf, no swap: n2 reaches that
    /// leaf twice, n1 each leaf once, so two hosts decide it.
    #[test]
    fn two_hosts_decide_a_cable_on_a_leaf_its_host_already_reaches() {
        let mut cables = rails(&["n1", "n2"]);
        for c in cables
            .iter_mut()
            .filter(|c| c.0 == "n2" && c.1 == "ens10f0np0")
        {
            c.2 = "leaf-rail1".into();
        }
        let found: Vec<(String, String, String)> = miscabled(&job(&as_refs(&cables)))
            .into_iter()
            .map(|m| (m.host, m.neighbor.netdev.clone(), m.switch_of.to_string()))
            .collect();
        assert_eq!(
            found,
            vec![("n2".into(), "ens10f0np0".into(), "ens11f0np0".into())]
        );
    }

    /// Sites with two NICs per leaf reach each leaf twice by design: with
    /// two hosts, a doubled leaf is then no sign of a stray cable.
    #[test]
    fn two_hosts_of_a_two_nics_per_leaf_design_decide_nothing() {
        let mut cables = Vec::new();
        for host in ["n1", "n2"] {
            for nic in 0..4 {
                cables.push((
                    host.to_string(),
                    format!("ens{}f0np0", 10 + nic),
                    format!("leaf-{}", nic / 2),
                ));
            }
        }
        for c in cables
            .iter_mut()
            .filter(|c| c.0 == "n2" && c.1 == "ens10f0np0")
        {
            c.2 = "leaf-1".into();
        }
        assert!(miscabled(&job(&as_refs(&cables))).is_empty());
    }
}
