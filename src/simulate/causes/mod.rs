//! One story per scenario: which ranks fail how, what the victims print,
//! and what the kernel, counters and port snapshots of each host show, as
//! docs/troubleshooting.md and the format docs say a real occurrence leaves.

mod app;
mod network;
mod setup;

use std::collections::BTreeMap;

use crate::model::CauseKind;

use super::clock::{SEC, Us};
use super::plan::{Plan, Scenario};
use super::rng::Rng;
use super::story::{End, Fate, Story, Truth, TruthCause, TruthCollective, Warn};
use super::topo::Topo;

/// Builds the story of the plan's scenario.
pub fn build(plan: &Plan) -> Story {
    let mut c = Ctx {
        plan,
        topo: Topo::new(plan),
        rng: Rng::derive(plan.seed, "story", &[]),
    };
    match plan.scenario {
        Scenario::Healthy => app::healthy(&mut c),
        Scenario::Cancelled => app::cancelled(&mut c),
        Scenario::Fault(kind) => fault(&mut c, kind),
    }
}

fn fault(c: &mut Ctx<'_>, kind: CauseKind) -> Story {
    match kind {
        CauseKind::LinkFlap => network::link_flap(c),
        CauseKind::PacketLoss => network::packet_loss(c),
        CauseKind::Congestion => network::congestion(c),
        CauseKind::MtuMismatch => network::mtu_mismatch(c),
        CauseKind::PortDegraded => network::port_degraded(c),
        CauseKind::HcaFault => network::hca_fault(c),
        CauseKind::GidIndex => setup::gid_index(c),
        CauseKind::Memlock => setup::memlock(c),
        CauseKind::SocketInterface => setup::socket_interface(c),
        CauseKind::Firewall => setup::firewall(c),
        CauseKind::CrossRail => setup::cross_rail(c),
        CauseKind::ConfigMismatch => setup::config_mismatch(c),
        CauseKind::GpuFault => app::gpu_fault(c),
        CauseKind::ProcessCrash => app::process_crash(c),
        CauseKind::CollectiveMismatch => app::collective_mismatch(c),
        CauseKind::RankStalled => app::rank_stalled(c),
        CauseKind::NcclBug | CauseKind::Unknown => app::rank_stalled(c),
    }
}

/// A port on a host: the culprit of the network causes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub host: usize,
    pub local: u32,
    pub rank: u32,
}

pub(crate) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub topo: Topo<'a>,
    pub rng: Rng,
}

impl<'a> Ctx<'a> {
    /// A story with every rank timing out in the hung collective.
    pub fn story(&self, status: &'static str, text: String) -> Story {
        Story {
            truth: Truth {
                status,
                stuck_ranks: Vec::new(),
                collective: None,
                cause: None,
                story: text,
            },
            default_fate: self.timeout(),
            fates: BTreeMap::new(),
            hosts: BTreeMap::new(),
            end: End::Exits,
            hung: self.plan.hung.clone(),
            hang_at: self.plan.times.hang,
            slow_from: None,
            detail_debug: false,
            env: Vec::new(),
        }
    }

    pub fn timeout(&self) -> Fate {
        let h = &self.plan.hung;
        Fate::Timeout {
            op: h.op,
            numel_in: h.numel_in,
            numel_out: h.numel_out,
            enqueued: h.seq,
        }
    }

    pub fn collective(&self, story: &Story) -> Option<TruthCollective> {
        Some(TruthCollective {
            op: story.hung.op.to_string(),
            seq: story.hung.seq,
            pg: story.hung.pg.clone(),
        })
    }

    /// A port that carries the default group's inter-host traffic.
    pub fn net_place(&mut self) -> Place {
        let locals: Vec<u32> = self.topo.net_locals().into_iter().collect();
        let host = self.rng.index(self.plan.hosts.len());
        let local = *self.rng.pick(&locals);
        self.place(host, local)
    }

    pub fn place(&self, host: usize, local: u32) -> Place {
        Place {
            host,
            local,
            rank: self.plan.hosts[host].first_rank + local,
        }
    }

    pub fn any_rank(&mut self) -> u32 {
        self.rng.below(u64::from(self.plan.world)) as u32
    }

    pub fn host_ranks(&self, host: usize) -> Vec<u32> {
        let h = &self.plan.hosts[host];
        (h.first_rank..h.first_rank + h.local_ranks).collect()
    }

    pub fn host_name(&self, host: usize) -> String {
        self.plan.hosts[host].name.clone()
    }

    /// The truth's cause placed on a port.
    pub fn port_cause(&self, kind: CauseKind, p: Place, peer: Option<usize>) -> TruthCause {
        TruthCause {
            kind: kind.name(),
            host: Some(self.host_name(p.host)),
            device: Some(self.plan.hosts[p.host].nics[p.local as usize].name.clone()),
            port: Some(1),
            gpu_bus_id: None,
            peer_host: peer.map(|h| self.host_name(h)),
        }
    }

    /// The truth's cause placed on a rank's host and GPU.
    pub fn rank_cause(&self, kind: CauseKind, rank: u32) -> TruthCause {
        TruthCause {
            kind: kind.name(),
            host: Some(self.plan.host_of(rank).name.clone()),
            device: None,
            port: None,
            gpu_bus_id: Some(self.plan.gpu_bdf(rank).to_string()),
            peer_host: None,
        }
    }

    /// The truth's cause placed on a host only.
    pub fn host_cause(&self, kind: CauseKind, host: usize, peer: Option<usize>) -> TruthCause {
        TruthCause {
            kind: kind.name(),
            host: Some(self.host_name(host)),
            device: None,
            port: None,
            gpu_bus_id: None,
            peer_host: peer.map(|h| self.host_name(h)),
        }
    }

    /// ncclRemoteError where it exists (2.13+), else ncclSystemError.
    pub fn remote_error(&self) -> u8 {
        if self.plan.versions.nccl.ge(2, 13, 0) {
            6
        } else {
            2
        }
    }

    /// IB transport retries take NCCL_IB_TIMEOUT=20 × 7 retries ≈ 30 s.
    pub fn retry_exhausted(&mut self, from: Us) -> Us {
        from + self.rng.range(27 * SEC, 36 * SEC)
    }

    /// Each rank in `senders` reports status `status` on its connection to
    /// `target` (then one or two flushes), and the watchdog aborts it.
    pub fn report_completions(
        &mut self,
        story: &mut Story,
        senders: &[u32],
        target: u32,
        status: u32,
        from: Us,
    ) {
        for &s in senders {
            let at = self.retry_exhausted(from);
            let nic = self.plan.rank(s).local;
            let mut warns = vec![(
                at,
                Warn::IbCompletion {
                    peer: target,
                    status,
                    nic,
                },
            )];
            for i in 0..self.rng.range(0, 2) {
                let w = Warn::IbCompletion {
                    peer: target,
                    status: 5,
                    nic,
                };
                warns.push((at + (i + 1) * self.rng.range(1, 400), w));
            }
            story.fates.insert(
                s,
                Fate::NcclError {
                    warns,
                    result: self.remote_error(),
                },
            );
        }
    }

    /// The host of a rank.
    pub fn host_of(&self, rank: u32) -> usize {
        self.plan.rank(rank).host
    }
}
