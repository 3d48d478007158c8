//! Which end of a lone failing connection lost the packets.
//!
//! A rank whose sends ran out of retries names the peer it was sending to,
//! and where several hosts name one peer, that peer is the bad end. One
//! reporting host alone says less: the connection has two ends and the
//! retries ran out on the reporter's side. Where counter dumps before and
//! after were taken, the ports' own packet-loss counters (out_of_sequence,
//! duplicate_request, discards: those that rise where packets arrive
//! missing, not the retransmissions every sender into the loss counts) say
//! which end the loss is at: the one whose counters rose several times more
//! than the other's.

use std::collections::BTreeMap;

use crate::diagnose::nic_use::NicUse;
use crate::grammar::counters::{CounterKnowledge, Side};
use crate::model::build::short_host_of;
use crate::model::{CauseKind, Job};

/// How many times more loss the reporter's port must show.
const CLEARLY_MORE: u64 = 3;
/// Below this many lost packets, neither end stands out.
const AT_LEAST: u64 = 1000;

/// Whether the reporter's own port (`host`, `hca`) lost clearly more than
/// the suspect's (`suspect_hca`, else any port of the suspect host).
pub(super) fn reporter_lost_more(
    job: &Job,
    counters: &CounterKnowledge,
    reporter: (&str, &str),
    suspect: &str,
    suspect_hca: Option<&str>,
) -> bool {
    let loss = loss_by_port(job, counters);
    let reporter_loss = loss
        .get(&(short_host_of(reporter.0), reporter.1.to_string()))
        .copied()
        .unwrap_or(0);
    let suspect = short_host_of(suspect);
    let suspect_loss = loss
        .iter()
        .filter(|((host, hca), _)| *host == suspect && suspect_hca.is_none_or(|s| s == hca))
        .map(|(_, &n)| n)
        .max()
        .unwrap_or(0);
    reporter_loss >= AT_LEAST && reporter_loss >= CLEARLY_MORE * suspect_loss.max(1)
}

/// (short host, HCA) → the summed rises of its packet-loss counters.
fn loss_by_port(job: &Job, counters: &CounterKnowledge) -> BTreeMap<(String, String), u64> {
    let usage = NicUse::new(job);
    let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
    for d in &job.counter_deltas {
        let Some(host) = d.host.as_ref().map(|h| short_host_of(h.as_str())) else {
            continue;
        };
        // Requester-side counters (retransmissions, ACK timeouts) rise on
        // whichever end sends into the loss: they say nothing of where it is.
        let loss_counter = counters.lookup(d.name.as_str()).is_some_and(|c| {
            c.cause == Some(CauseKind::PacketLoss) && !c.context && c.side == Side::Local
        });
        let Some(delta) = d.delta.filter(|_| loss_counter && !d.reset) else {
            continue;
        };
        let hca = usage.hca_of(Some(&host), d.device.as_str()).to_string();
        *out.entry((host, hca)).or_default() += delta;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CounterDelta;

    fn rose(host: &str, device: &str, name: &str, by: u64) -> CounterDelta {
        CounterDelta::rose(host, device, name, 10, 10 + by)
    }

    /// `rdma statistic` before and after: rc-a03's mlx5_2 reported the
    /// failed send to rc-a04, and lost six times what rc-a04's port did.
    #[test]
    fn the_reporters_port_that_lost_far_more_is_the_bad_end() {
        let kb = CounterKnowledge::builtin().unwrap();
        let job = Job {
            counter_deltas: vec![
                rose("rc-a03", "mlx5_2", "out_of_sequence", 418_553),
                rose("rc-a03", "mlx5_2", "packet_seq_err", 127_804),
                // A sender's retransmissions count for neither end.
                rose("rc-a04", "mlx5_2", "roce_adp_retrans", 9_000_000),
                rose("rc-a04", "mlx5_2", "out_of_sequence", 70_854),
                rose("rc-a04", "mlx5_2", "rx_write_requests", 9_000_000),
            ],
            ..Job::default()
        };
        assert!(reporter_lost_more(
            &job,
            &kb,
            ("rc-a03", "mlx5_2"),
            "rc-a04",
            Some("mlx5_2")
        ));
        // The other way round, the reporter lost less: the peer stays blamed.
        assert!(!reporter_lost_more(
            &job,
            &kb,
            ("rc-a04", "mlx5_2"),
            "rc-a03",
            Some("mlx5_2")
        ));
        // Without counters nothing moves.
        assert!(!reporter_lost_more(
            &Job::default(),
            &kb,
            ("rc-a03", "mlx5_2"),
            "rc-a04",
            None
        ));
    }
}
