//! Hosts that lines name by address. Ray prefixes an actor's lines with
//! its node's address (`(RayTrainWorker pid=2877, ip=10.0.3.191)`), so one
//! host's lines arrive under two names: the address there, NCCL's host
//! name (`ip-10-0-3-191`) in the lines of the same processes that Ray
//! did not prefix. An address is a host's where exactly one named host
//! prints it as its own (NCCL's bootstrap, OOB or socket interface) or
//! spells it in its name (EC2's `ip-10-0-3-191`); its lines take that name,
//! so each process is one writer on one host before ranks are resolved.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::model::job::spelled_ipv4;
use crate::model::{Job, Sym};

/// Renames the hosts that lines name by an address one named host owns;
/// returns address → name for the fields that name nodes by address.
pub(super) fn name_address_hosts(job: &mut Job) -> BTreeMap<String, String> {
    let by_address: BTreeSet<Sym> = job
        .events
        .iter()
        .filter_map(|e| e.who.host.as_ref())
        .filter(|h| looks_like_address(h))
        .cloned()
        .collect();
    if by_address.is_empty() {
        return BTreeMap::new();
    }
    let names = owners(job);
    let renamed: BTreeMap<Sym, Sym> = by_address
        .iter()
        .filter_map(|a| Some((a.clone(), Sym::new(names.get::<str>(a)?))))
        .collect();
    for e in &mut job.events {
        if let Some(name) = e.who.host.as_ref().and_then(|h| renamed.get(h)) {
            e.who.host = Some(name.clone());
        }
    }
    names
}

/// Cheap first sieve: host names start with a letter far more often.
fn looks_like_address(host: &str) -> bool {
    host.starts_with(|c: char| c.is_ascii_digit() || c == ':') && host.parse::<IpAddr>().is_ok()
}

/// Each address that exactly one named host prints or spells.
fn owners(job: &Job) -> BTreeMap<String, String> {
    let mut claims: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (ip, hosts) in super::file_hosts::address_owners(job) {
        let named = hosts.into_iter().filter(|h| h.parse::<IpAddr>().is_err());
        claims.entry(ip.to_string()).or_default().extend(named);
    }
    let hosts: BTreeSet<&str> = job
        .events
        .iter()
        .filter_map(|e| e.who.host.as_deref())
        .collect();
    for host in hosts {
        let short = super::short_host(host);
        if let Some(ip) = spelled_ipv4(short) {
            claims.entry(ip).or_default().insert(short.to_string());
        }
    }
    claims
        .into_iter()
        .filter_map(|(ip, hosts)| match hosts.len() {
            1 => Some((ip, hosts.into_iter().next()?)),
            _ => None,
        })
        .collect()
}
