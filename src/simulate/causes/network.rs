//! Network causes: the failing port is one NIC of one host; the ranks that
//! send into it over the default group see their retries run out and name
//! the port's host; everyone else waits for the watchdog.

use crate::model::CauseKind;

use super::super::clock::{MIN, MS, SEC, Us};
use super::super::kernel;
use super::super::plan::Fabric;
use super::super::story::{Fate, PortOverride, Story, Warn};
use super::{Ctx, Place};

/// The hang story for a port fault: culprit, collective, peer, truth.
fn port_story(c: &mut Ctx<'_>, kind: CauseKind, p: Place, text: String) -> (Story, Vec<u32>) {
    let mut story = c.story("hang", text);
    let senders: Vec<u32> = c.topo.senders_into(p.host, p.local).into_iter().collect();
    let peer = senders.first().map(|&s| c.host_of(s));
    story.truth.stuck_ranks = vec![p.rank];
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.port_cause(kind, p, peer));
    (story, senders)
}

fn nic_name(c: &Ctx<'_>, p: Place) -> String {
    c.plan.hosts[p.host].nics[p.local as usize].name.clone()
}

/// Kernel lines for a link going down (and up again when `up` is given).
fn link_lines(c: &mut Ctx<'_>, p: Place, down: Us, up: Option<Us>) -> Vec<(Us, String)> {
    let nic = c.plan.hosts[p.host].nics[p.local as usize].clone();
    match c.plan.fabric {
        Fabric::Roce => {
            let mut v = vec![(down, kernel::roce_link(&nic, false))];
            v.extend(up.map(|u| (u, kernel::roce_link(&nic, true))));
            v
        }
        // Kernels before 2024 log nothing when an IB port changes state.
        Fabric::Ib if c.rng.chance(0.3) => Vec::new(),
        Fabric::Ib => {
            let mut v = vec![(down, kernel::ib_port_state(&nic, "DOWN"))];
            if let Some(u) = up {
                v.push((u, kernel::ib_port_state(&nic, "INIT")));
                v.push((
                    u + c.rng.range(50, 900) * MS,
                    kernel::ib_port_state(&nic, "ACTIVE"),
                ));
            }
            v
        }
    }
}

/// The culprit rank's own view of its port: the async events (at their
/// times), then its own sends to the next hosts failing.
fn culprit_errors(c: &mut Ctx<'_>, p: Place, events: &[(Us, &'static str)], from: Us) -> Fate {
    let mut warns: Vec<(Us, Warn)> = events
        .iter()
        .map(|&(t, event)| {
            (
                t,
                Warn::IbAsync {
                    nic: p.local,
                    event,
                    fatal: false,
                },
            )
        })
        .collect();
    let receivers: Vec<u32> = c.topo.receivers_from(p.host, p.local).into_iter().collect();
    let at = c.retry_exhausted(from);
    if let Some(&r) = receivers.first() {
        warns.push((
            at,
            Warn::IbCompletion {
                peer: r,
                status: 12,
                nic: p.local,
            },
        ));
        warns.push((
            at + 90,
            Warn::IbCompletion {
                peer: r,
                status: 5,
                nic: p.local,
            },
        ));
    }
    warns.sort_by_key(|w| w.0);
    Fate::NcclError {
        warns,
        result: c.remote_error(),
    }
}

/// Every process on the culprit's host prints its NIC's async events, not
/// only the rank that uses the NIC (one event thread per device found).
fn heard_on_the_host(story: &mut Story, p: Place) {
    let Some(Fate::NcclError { warns, .. }) = story.fates.get(&p.rank) else {
        return;
    };
    let heard: Vec<(Us, Warn)> = warns
        .iter()
        .filter(|(_, w)| matches!(w, Warn::IbAsync { .. }))
        .cloned()
        .collect();
    story.host_mut(p.host).ib_async.extend(heard);
}

/// Symbol errors and retransmissions a bad link leaves on its counters.
fn link_error_counters(c: &mut Ctx<'_>, flaps: u64) -> Vec<(&'static str, u64)> {
    let r = &mut c.rng;
    match c.plan.fabric {
        Fabric::Ib => vec![
            ("link_downed", flaps),
            ("symbol_error", r.range(200, 30_000) as u64),
            ("link_error_recovery", flaps + r.range(0, 4) as u64),
            ("port_rcv_errors", r.range(10, 600) as u64),
        ],
        Fabric::Roce => vec![
            ("link_down_events_phy", flaps),
            ("rx_symbol_err_phy", r.range(200, 30_000) as u64),
            ("rx_crc_errors_phy", r.range(20, 3_000) as u64),
            ("rx_pcs_symbol_err_phy", r.range(100, 9_000) as u64),
            ("link_downed", flaps),
        ],
    }
}

/// The requester side of lost packets: ACK timeouts and exhausted retries.
fn sender_counters(c: &mut Ctx<'_>, story: &mut Story, senders: &[u32], scale: i64) {
    for &s in senders {
        let (host, nic) = (c.host_of(s), c.plan.rank(s).local);
        let mut v = vec![
            (
                "local_ack_timeout_err",
                c.rng.range(7, 40) as u64 * scale as u64,
            ),
            ("packet_seq_err", c.rng.range(0, 30) as u64 * scale as u64),
            ("req_transport_retries_exceeded", 1),
        ];
        if c.plan.fabric == Fabric::Roce {
            v.push((
                "roce_adp_retrans",
                c.rng.range(50, 900) as u64 * scale as u64,
            ));
        }
        let hs = story.host_mut(host);
        hs.counters.extend(v.into_iter().map(|(n, d)| (nic, n, d)));
    }
}

pub fn link_flap(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let t_f = c.plan.times.hang - c.rng.range(0, 2_000) * MS;
    let flaps = c.rng.range(1, 4) as u64;
    let text = format!(
        "{}'s {} port 1 went down and up {flaps} time(s) while ALLREDUCE/step collectives were in flight; the peers sending into it ran out of retries (IB status 12), the rest timed out.",
        c.host_name(p.host),
        nic_name(c, p)
    );
    let (mut story, senders) = port_story(c, CauseKind::LinkFlap, p, text);
    let mut t = t_f;
    let mut kern = Vec::new();
    let mut events = Vec::new();
    for _ in 0..flaps {
        let up = t + c.rng.range(2, 15) * SEC;
        kern.extend(link_lines(c, p, t, Some(up)));
        events.push((t + c.rng.range(1, 80) * MS, "port error"));
        events.push((up + c.rng.range(1, 900) * MS, "port active"));
        t = up + c.rng.range(3, 40) * SEC;
    }
    let last_ok = t_f + 25 * SEC;
    events.retain(|e| e.0 < last_ok);
    c.report_completions(&mut story, &senders, p.rank, 12, t_f);
    let fate = culprit_errors(c, p, &events, t_f);
    story.fates.insert(p.rank, fate);
    heard_on_the_host(&mut story, p);
    let counters = link_error_counters(c, flaps);
    sender_counters(c, &mut story, &senders, 1);
    let hs = story.host_mut(p.host);
    hs.kernel.extend(kern);
    hs.counters
        .extend(counters.into_iter().map(|(n, d)| (p.local, n, d)));
    story
}

pub fn packet_loss(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let t_f = c.plan.times.hang - c.rng.range(0, 2_000) * MS;
    let text = format!(
        "Packets to {}'s {} port 1 were dropped without the link going down; its peers' transport retries ran out (IB status 12) and the rest timed out.",
        c.host_name(p.host),
        nic_name(c, p)
    );
    let (mut story, senders) = port_story(c, CauseKind::PacketLoss, p, text);
    c.report_completions(&mut story, &senders, p.rank, 12, t_f);
    sender_counters(c, &mut story, &senders, 100);
    let r = &mut c.rng;
    let mut own = vec![
        ("out_of_sequence", r.range(1_000, 60_000) as u64),
        ("duplicate_request", r.range(100, 6_000) as u64),
    ];
    own.push(match c.plan.fabric {
        Fabric::Ib => ("port_rcv_errors", r.range(50, 3_000) as u64),
        Fabric::Roce => ("rx_discards_phy", r.range(500, 90_000) as u64),
    });
    story
        .host_mut(p.host)
        .counters
        .extend(own.into_iter().map(|(n, d)| (p.local, n, d)));
    story
}

pub fn congestion(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let text = format!(
        "A PFC pause storm on {}'s {} port 1 (RoCE, priority 3): pauses and CNPs rose, steps slowed, then a collective never finished and every rank timed out; no hard errors.",
        c.host_name(p.host),
        nic_name(c, p)
    );
    let (mut story, senders) = port_story(c, CauseKind::Congestion, p, text);
    story.slow_from = Some(c.plan.times.hang - c.rng.range(8, 40) * MIN);
    let r = &mut c.rng;
    let own = [
        ("tx_prio3_pause", r.range(2_000_000, 90_000_000) as u64),
        (
            "tx_prio3_pause_duration",
            r.range(200_000_000, 5_000_000_000) as u64,
        ),
        ("np_cnp_sent", r.range(1_000_000, 40_000_000) as u64),
        (
            "np_ecn_marked_roce_packets",
            r.range(5_000_000, 90_000_000) as u64,
        ),
        ("tx_pause_storm_warning_events", r.range(1, 20) as u64),
        ("rx_discards_phy", r.range(0, 5_000) as u64),
    ];
    story
        .host_mut(p.host)
        .counters
        .extend(own.into_iter().map(|(n, d)| (p.local, n, d)));
    for &s in &senders {
        let (h, k) = (c.host_of(s), c.plan.rank(s).local);
        let v = [
            ("rx_prio3_pause", c.rng.range(1_000_000, 40_000_000) as u64),
            (
                "rx_prio3_pause_duration",
                c.rng.range(100_000_000, 2_000_000_000) as u64,
            ),
            ("rp_cnp_handled", c.rng.range(1_000_000, 40_000_000) as u64),
        ];
        story
            .host_mut(h)
            .counters
            .extend(v.into_iter().map(|(n, d)| (k, n, d)));
    }
    story
}

pub fn mtu_mismatch(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let (mtu, other) = match c.plan.fabric {
        Fabric::Ib => (2048, 4096),
        Fabric::Roce => (1024, 4096),
    };
    let text = format!(
        "{}'s {} port 1 has active MTU {mtu} where the rest of the fabric has {other}; large packets into it were dropped silently and the collective hung.",
        c.host_name(p.host),
        nic_name(c, p)
    );
    let (mut story, senders) = port_story(c, CauseKind::MtuMismatch, p, text);
    if c.rng.chance(0.6) {
        c.report_completions(&mut story, &senders, p.rank, 12, c.plan.times.hang);
        sender_counters(c, &mut story, &senders, 20);
    }
    let drop = match c.plan.fabric {
        Fabric::Ib => ("port_rcv_errors", c.rng.range(500, 90_000) as u64),
        Fabric::Roce => ("rx_oversize_pkts_phy", c.rng.range(500, 90_000) as u64),
    };
    let hs = story.host_mut(p.host);
    hs.counters.push((p.local, drop.0, drop.1));
    hs.ports.push(PortOverride {
        nic: p.local,
        active_mtu: Some(mtu),
        ..PortOverride::default()
    });
    story
}

pub fn port_degraded(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let t_f = c.plan.times.hang - c.rng.range(0, 2_000) * MS;
    let state = *c.rng.pick(&[
        ("Down", "Polling"),
        ("Down", "Disabled"),
        ("Initializing", "LinkUp"),
    ]);
    let text = format!(
        "{}'s {} port 1 left the Active state mid-job and stayed {} / {}; its peers' retries ran out and the rest timed out.",
        c.host_name(p.host),
        nic_name(c, p),
        state.0,
        state.1
    );
    let (mut story, senders) = port_story(c, CauseKind::PortDegraded, p, text);
    let kern = if state.0 == "Initializing" && c.plan.fabric == Fabric::Ib {
        let nic = c.plan.hosts[p.host].nics[p.local as usize].clone();
        vec![(t_f, kernel::ib_port_state(&nic, "INIT"))]
    } else {
        link_lines(c, p, t_f, None)
    };
    c.report_completions(&mut story, &senders, p.rank, 12, t_f);
    let fate = culprit_errors(c, p, &[(t_f + 20 * MS, "port error")], t_f);
    story.fates.insert(p.rank, fate);
    heard_on_the_host(&mut story, p);
    sender_counters(c, &mut story, &senders, 1);
    let state = if c.plan.fabric == Fabric::Roce && state.0 == "Initializing" {
        ("Down", "Polling")
    } else {
        state
    };
    let hs = story.host_mut(p.host);
    hs.kernel.extend(kern);
    hs.counters.push((p.local, "link_downed", 1));
    hs.ports.push(PortOverride {
        nic: p.local,
        state: Some(state),
        ..PortOverride::default()
    });
    story
}

pub fn hca_fault(c: &mut Ctx<'_>) -> Story {
    let p = c.net_place();
    let t_f = c.plan.times.hang - c.rng.range(0, 2_000) * MS;
    let text = format!(
        "{}'s {} (PCI {}) hit a firmware fault (mlx5 health / command timeouts); NCCL got a fatal async event, the peers' retries ran out and the rest timed out.",
        c.host_name(p.host),
        nic_name(c, p),
        c.plan.hosts[p.host].nics[p.local as usize].bdf
    );
    let (mut story, senders) = port_story(c, CauseKind::HcaFault, p, text);
    let nic = c.plan.hosts[p.host].nics[p.local as usize].clone();
    let lines = if c.rng.chance(0.5) {
        kernel::hca_health(&nic, &mut c.rng)
    } else {
        kernel::hca_cmd_timeouts(&nic, &mut c.rng)
    };
    let step = if lines.len() > 10 { MS } else { 20 * SEC };
    let kern: Vec<(Us, String)> = lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| (t_f + i as i64 * step, l))
        .collect();
    c.report_completions(&mut story, &senders, p.rank, 12, t_f);
    let at = t_f + c.rng.range(1, 5) * SEC;
    let peer = senders.first().copied().unwrap_or(p.rank);
    let warns = vec![
        (
            at,
            Warn::IbAsync {
                nic: p.local,
                event: "local catastrophic error",
                fatal: true,
            },
        ),
        (
            at + 300 * MS,
            Warn::IbCompletion {
                peer,
                status: 5,
                nic: p.local,
            },
        ),
    ];
    story
        .fates
        .insert(p.rank, Fate::NcclError { warns, result: 2 });
    heard_on_the_host(&mut story, p);
    let hs = story.host_mut(p.host);
    hs.kernel.extend(kern);
    hs.counters
        .push((p.local, "req_cqe_flush_error", c.rng.range(10, 900) as u64));
    story
}
