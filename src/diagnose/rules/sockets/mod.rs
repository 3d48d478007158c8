//! Sockets that cannot connect: NCCL's bootstrap and socket transport, Gloo
//! and Open MPI's TCP transport on an interface other hosts cannot reach
//! (`socket_interface`), or connections a firewall refuses (`firewall`).
//!
//! `lines.rs` reads what the errors say by themselves, `interfaces.rs`
//! weighs the local-only interfaces NCCL chose, `connects.rs` places each
//! failed connect on the host it could not reach.

mod connects;
mod interfaces;
mod lines;

pub(super) use interfaces::{listed_interfaces, listing_text};

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::diagnose::hypothesis::Hypothesis;
use crate::model::build::short_host_of;
use crate::model::{CauseKind, Event, EventKind, Job};

use super::Ctx;

/// Bootstrap and socket connects that fail, and the interfaces NCCL chose.
pub(super) fn socket_failures(ctx: &Ctx<'_>) -> Vec<Hypothesis> {
    let mut leads = Leads::new();
    let connect_errors = lines::read(ctx, &mut leads);
    interfaces::weigh(ctx, !connect_errors.is_empty(), &mut leads.iface);
    connects::place(ctx, &connect_errors, &mut leads);
    if connect_errors.is_empty() {
        connects::unanswered_retries(ctx.job, &mut leads.fw, &mut leads.iface);
    }
    leads.finish(ctx.job)
}

/// The two causes socket failures point to, as the lines build them up.
struct Leads {
    iface: Hypothesis,
    fw: Hypothesis,
    /// A host-local address a peer advertised (docker0's): no log says
    /// whose it was.
    local_peer: Option<String>,
    /// The bootstrap ring's next rank that a failed connect dialled, where
    /// no line places it: the unreachable host is its.
    ring_rank: Option<u32>,
}

impl Leads {
    fn new() -> Leads {
        Leads {
            iface: Hypothesis::new(CauseKind::SocketInterface),
            fw: Hypothesis::new(CauseKind::Firewall),
            local_peer: None,
            ring_rank: None,
        }
    }

    /// The causes with support, each naming what the lines say of an
    /// unnamed host and the ranks of a named one.
    fn finish(mut self, job: &Job) -> Vec<Hypothesis> {
        for h in [&mut self.iface, &mut self.fw] {
            if h.host.is_none()
                && let Some(whose) = unnamed_host(h.kind, self.ring_rank, &self.local_peer)
            {
                h.values.insert("host", whose);
            }
            if h.ranks.is_empty()
                && let Some(host) = h.host.clone()
            {
                h.ranks = job
                    .ranks
                    .values()
                    .filter(|r| r.host.as_deref() == Some(host.as_str()))
                    .map(|r| r.rank)
                    .collect();
            }
            if h.kind == CauseKind::SocketInterface && h.device.is_none() {
                h.device = chosen_interface(h)
                    .or_else(|| dialled_interface(job, h))
                    .or_else(|| pinned_interface(job));
            }
            // Only Open MPI's own TCP lines: its transport, not NCCL's, is pinned.
            if !h.support.is_empty() && by_mpi_only(job, h) {
                h.value("variant", "mpi_tcp");
            }
        }
        [self.iface, self.fw]
            .into_iter()
            .filter(|h| !h.support.is_empty())
            .collect()
    }
}

/// The interface NCCL chose, as the detail quotes it (`` `lo:127.0.0.1` ``):
/// the place of a socket_interface cause, as a NIC is a port's.
fn chosen_interface(h: &Hypothesis) -> Option<String> {
    static CHOSEN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"`(?P<iface>[A-Za-z][\w.@-]*):[0-9a-fA-F.:%]+(?:<\d+>)?`").expect("valid")
    });
    let detail = h.values.get("detail")?;
    CHOSEN.captures(detail).map(|c| c["iface"].to_string())
}

/// The interface the host's own bootstrap line advertised the address the
/// failed connects dialled on (`Bootstrap : Using ib0:192.168.200.13<0>`):
/// the one its peers could not reach.
fn dialled_interface(job: &Job, h: &Hypothesis) -> Option<String> {
    let host = h.host.as_deref().map(short_host_of)?;
    let dialled: BTreeSet<&str> = h
        .support
        .iter()
        .filter_map(|s| s.event)
        .filter_map(|i| job.events[i].text_field("peer"))
        .collect();
    job.events_where(|k| k == EventKind::NcclBootstrapIface)
        .filter(|(_, ev)| job.host_of_event(ev).map(short_host_of).as_deref() == Some(&host))
        .find(|(_, ev)| ev.text_field("ip").is_some_and(|ip| dialled.contains(ip)))
        .and_then(|(_, ev)| ev.text_field("iface"))
        .map(str::to_string)
}

/// The one interface NCCL_SOCKET_IFNAME names (`bond0`, `=bond0`), where the
/// job set one: where NCCL found no interface, the one it was told to use.
fn pinned_interface(job: &Job) -> Option<String> {
    let values = job.env.get("NCCL_SOCKET_IFNAME")?;
    let [value] = values.keys().collect::<Vec<_>>()[..] else {
        return None;
    };
    let name = value.trim_start_matches('=');
    let plain = !name.is_empty()
        && !name.starts_with('^')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    plain.then(|| name.to_string())
}

/// Where no host is named, what the lines do say of it: the ring's rank it
/// is, the address its ranks advertised; for a connect whose line names
/// neither end (NCCL 2.2–2.3 print no address, and without their `NCCL`
/// tag no host), the peer it dialled.
fn unnamed_host(
    kind: CauseKind,
    ring_rank: Option<u32>,
    local_peer: &Option<String>,
) -> Option<String> {
    match (ring_rank, local_peer) {
        (Some(rank), Some(addr)) => {
            Some(format!("rank {rank}'s host, whose ranks advertised {addr}"))
        }
        (None, Some(addr)) => Some(format!("the host whose ranks advertised {addr}")),
        (Some(rank), None) => Some(format!("rank {rank}'s host")),
        (None, None) => (kind == CauseKind::Firewall).then(|| "the peer host".to_string()),
    }
}

fn by_mpi_only(job: &Job, h: &Hypothesis) -> bool {
    h.support.iter().all(|s| {
        s.event
            .is_some_and(|i| job.events[i].text_field("via") == Some("mpi"))
    })
}

/// The hypothesis keeps its host, else takes the reporting line's.
fn keep_host_or_reporters(h: &mut Hypothesis, ev: &Event) {
    h.host = h
        .host
        .take()
        .or_else(|| ev.who.host.as_deref().map(str::to_string));
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_cause_names_the_interface_nccl_chose_or_was_told_to_use() {
        let mut h = Hypothesis::new(CauseKind::SocketInterface);
        h.value("detail", "`lo:127.0.0.1`");
        assert_eq!(chosen_interface(&h).as_deref(), Some("lo"));
        h.value("detail", "`docker0:172.17.0.1<0>`");
        assert_eq!(chosen_interface(&h).as_deref(), Some("docker0"));
        h.value("detail", "`Bootstrap : no socket interface found`");
        assert_eq!(chosen_interface(&h), None);

        let mut job = Job::default();
        let pin = |v: &str| BTreeMap::from([(v.to_string(), Default::default())]);
        job.env.insert("NCCL_SOCKET_IFNAME".into(), pin("bond0"));
        assert_eq!(pinned_interface(&job).as_deref(), Some("bond0"));
        job.env
            .insert("NCCL_SOCKET_IFNAME".into(), pin("^docker0,lo"));
        assert_eq!(pinned_interface(&job), None);
    }

    #[test]
    fn the_interface_is_the_one_the_host_advertised_the_dialled_address_on_nccl_2_19() {
        use crate::diagnose::hypothesis::Source;
        use crate::model::{Fields, Sym, Value, Who};
        let event = |kind, host: &str, f: &[(&'static str, &str)]| {
            let mut fields = Fields::default();
            for (k, v) in f {
                fields.insert(k, Value::Text((*v).into()));
            }
            let mut ev = Event::with_fields(kind, fields);
            ev.who = Who {
                host: Some(Sym::new(host)),
                ..Who::default()
            };
            ev
        };
        let mut job = Job {
            events: vec![
                event(
                    EventKind::NcclBootstrapIface,
                    "g4-03",
                    &[("iface", "bond0"), ("ip", "10.52.8.3")],
                ),
                event(
                    EventKind::NcclBootstrapIface,
                    "g4-03",
                    &[("iface", "ib0"), ("ip", "192.168.200.13")],
                ),
                event(
                    EventKind::SocketError,
                    "g4-01",
                    &[("peer", "192.168.200.13")],
                ),
            ],
            ..Job::default()
        };
        job.index_kinds();
        let mut h = Hypothesis::new(CauseKind::SocketInterface);
        h.host = Some("g4-03".into());
        h.support(Source::Nccl, 0.5, Some(2), "a connect failed");
        assert_eq!(dialled_interface(&job, &h).as_deref(), Some("ib0"));
        h.host = Some("g4-01".into());
        assert_eq!(dialled_interface(&job, &h), None);
    }
}
