//! Counter dumps before and after the job, in the formats of
//! docs/sys-formats.md §(c)/(d): the sysfs `counters/` and `hw_counters/`
//! files as `grep -H .` prints them, `perfquery -x` blocks, `rdma
//! statistic` lines and `ethtool -S`. The deltas, not the values, carry the
//! story; the baselines are lifetime totals with a little harmless noise.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::plan::{Fabric, Host, Plan};
use super::rng::Rng;
use super::story::HostStory;

const PORT_COUNTERS: &[&str] = &[
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
];

const HW_COUNTERS: &[&str] = &[
    "duplicate_request",
    "implied_nak_seq_err",
    "lifespan",
    "local_ack_timeout_err",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "req_cqe_flush_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
    "req_rnr_retries_exceeded",
    "req_transport_retries_exceeded",
    "resp_cqe_error",
    "resp_cqe_flush_error",
    "resp_local_length_error",
    "resp_remote_access_errors",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "rx_atomic_requests",
    "rx_dct_connect",
    "rx_icrc_encapsulated",
    "rx_read_requests",
    "rx_write_requests",
];

/// Counters that only RoCE ports have (congestion control).
const ROCE_ONLY: &[&str] = &[
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rp_cnp_ignored",
];

const ETHTOOL_PHY: &[&str] = &[
    "rx_packets_phy",
    "tx_packets_phy",
    "rx_bytes_phy",
    "tx_bytes_phy",
    "rx_crc_errors_phy",
    "rx_in_range_len_errors_phy",
    "rx_out_of_range_len_phy",
    "rx_oversize_pkts_phy",
    "rx_symbol_err_phy",
    "rx_undersize_pkts_phy",
    "rx_discards_phy",
    "tx_discards_phy",
    "tx_errors_phy",
    "rx_buffer_passed_thres_phy",
    "rx_pcs_symbol_err_phy",
    "rx_corrected_bits_phy",
    "link_down_events_phy",
    "rx_out_of_buffer",
    "rx_pci_signal_integrity",
    "tx_pci_signal_integrity",
    "outbound_pci_stalled_rd",
    "outbound_pci_stalled_wr",
    "tx_pause_storm_warning_events",
    "tx_pause_storm_error_events",
];

/// perfquery -x names of the sysfs port counters, in perfquery's order.
const PERFQUERY: &[(&str, &str)] = &[
    ("PortXmitData", "port_xmit_data"),
    ("PortRcvData", "port_rcv_data"),
    ("PortXmitPkts", "port_xmit_packets"),
    ("PortRcvPkts", "port_rcv_packets"),
    ("PortUnicastXmitPkts", "unicast_xmit_packets"),
    ("PortUnicastRcvPkts", "unicast_rcv_packets"),
    ("PortMulticastXmitPkts", "multicast_xmit_packets"),
    ("PortMulticastRcvPkts", "multicast_rcv_packets"),
    ("CounterSelect2", ""),
    ("SymbolErrorCounter", "symbol_error"),
    ("LinkErrorRecoveryCounter", "link_error_recovery"),
    ("LinkDownedCounter", "link_downed"),
    ("PortRcvErrors", "port_rcv_errors"),
    (
        "PortRcvRemotePhysicalErrors",
        "port_rcv_remote_physical_errors",
    ),
    ("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors"),
    ("PortXmitDiscards", "port_xmit_discards"),
    ("PortXmitConstraintErrors", "port_xmit_constraint_errors"),
    ("PortRcvConstraintErrors", "port_rcv_constraint_errors"),
    ("LocalLinkIntegrityErrors", "local_link_integrity_errors"),
    (
        "ExcessiveBufferOverrunErrors",
        "excessive_buffer_overrun_errors",
    ),
    ("VL15Dropped", "VL15_dropped"),
    ("PortXmitWait", "port_xmit_wait"),
    ("QP1Dropped", "qp1_dropped"),
];

/// Counter formats a job's collection script used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `grep -H . …/counters/* …/hw_counters/*`
    Sysfs,
    /// `perfquery -x` per port and `rdma statistic`
    Tools,
}

pub fn style(plan: &Plan) -> Style {
    if Rng::derive(plan.seed, "counter-style", &[]).chance(0.5) {
        Style::Sysfs
    } else {
        Style::Tools
    }
}

/// One port's values: name → value.
type Values = BTreeMap<String, u64>;

/// Traffic-scale and noise baselines for a port, then (for `after`) the
/// job's traffic and the story's deltas on top.
fn values(plan: &Plan, host: &Host, nic: u32, story: Option<&HostStory>, after: bool) -> Values {
    let mut r = Rng::derive(plan.seed, "counters", &[host.index as u64, u64::from(nic)]);
    let mut v = Values::new();
    let big = |r: &mut Rng| r.range(10_000_000_000, 900_000_000_000) as u64;
    let names = PORT_COUNTERS.iter().chain(HW_COUNTERS).chain(ETHTOOL_PHY);
    for &name in names {
        let base = match name {
            n if n.contains("data") || n.contains("bytes") => big(&mut r) * 4,
            n if n.contains("packets") || n.contains("pkts_phy") && !n.contains("size") => {
                big(&mut r) / 8
            }
            n if n.contains("requests") => big(&mut r) / 100,
            "lifespan" => 10,
            "port_xmit_wait" => r.range(1_000_000, 3_000_000_000) as u64,
            "np_cnp_sent" | "rp_cnp_handled" | "np_ecn_marked_roce_packets"
                if plan.fabric == Fabric::Roce =>
            {
                r.range(0, 5_000_000) as u64
            }
            "excessive_buffer_overrun_errors"
            | "port_rcv_errors"
            | "VL15_dropped"
            | "rx_corrected_bits_phy"
            | "roce_adp_retrans"
                if r.chance(0.3) =>
            {
                r.range(1, 20) as u64
            }
            _ => 0,
        };
        v.insert(name.to_string(), base);
    }
    for p in 0..8 {
        for dir in ["rx", "tx"] {
            v.insert(
                format!("{dir}_prio{p}_bytes"),
                if p == 3 || p == 0 { big(&mut r) } else { 0 },
            );
            v.insert(
                format!("{dir}_prio{p}_packets"),
                if p == 3 || p == 0 {
                    big(&mut r) / 2000
                } else {
                    0
                },
            );
            let pause = if p == 3 { r.range(0, 90_000) as u64 } else { 0 };
            v.insert(format!("{dir}_prio{p}_pause"), pause);
            v.insert(format!("{dir}_prio{p}_pause_duration"), pause * 7);
            v.insert(format!("{dir}_prio{p}_pause_transition"), pause / 2);
        }
    }
    if after {
        grow(plan, &mut v, &mut r);
        for (n, name, d) in story.map(|s| s.counters.as_slice()).unwrap_or(&[]) {
            if *n == nic {
                *v.entry(name.to_string()).or_insert(0) += d;
            }
        }
    }
    v
}

/// The job's own traffic between the two dumps, and harmless noise.
fn grow(plan: &Plan, v: &mut Values, r: &mut Rng) {
    let hours = ((plan.times.hang - plan.times.start) / super::clock::HOUR).max(1) as u64;
    for (name, val) in v.iter_mut() {
        let d = match name.as_str() {
            n if n.contains("data") || n.contains("bytes") => {
                hours * r.range(1_000_000_000, 90_000_000_000) as u64
            }
            n if n.contains("packets") || n.contains("requests") => {
                hours * r.range(1_000_000, 900_000_000) as u64
            }
            "port_xmit_wait" => hours * r.range(1_000, 9_000_000) as u64,
            "np_cnp_sent" | "rp_cnp_handled" | "np_ecn_marked_roce_packets"
                if plan.fabric == Fabric::Roce =>
            {
                r.range(0, 20_000) as u64
            }
            "rx_corrected_bits_phy" => r.range(0, 3) as u64,
            "rx_prio3_pause" | "tx_prio3_pause" if plan.fabric == Fabric::Roce => {
                r.range(0, 200) as u64
            }
            _ => 0,
        };
        *val += d;
    }
}

fn hw_names(plan: &Plan) -> impl Iterator<Item = &'static str> + '_ {
    HW_COUNTERS
        .iter()
        .copied()
        .filter(move |n| plan.fabric == Fabric::Roce || !ROCE_ONLY.contains(n))
}

/// `grep -H . /sys/class/infiniband/*/ports/1/{counters,hw_counters}/*`
pub fn write_sysfs(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    after: bool,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let v = values(plan, host, k as u32, story, after);
        let base = format!("/sys/class/infiniband/{}/ports/1", nic.name);
        for &name in PORT_COUNTERS {
            writeln!(
                w,
                "{base}/counters/{name}:{}",
                v.get(name).copied().unwrap_or(0)
            )?;
        }
        for name in hw_names(plan) {
            writeln!(
                w,
                "{base}/hw_counters/{name}:{}",
                v.get(name).copied().unwrap_or(0)
            )?;
        }
    }
    Ok(())
}

/// `perfquery -x <lid> 1` for every port, concatenated.
pub fn write_perfquery(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    after: bool,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let v = values(plan, host, k as u32, story, after);
        writeln!(
            w,
            "# Port extended counters: Lid {} port 1 (CapMask: 0x5A00 CapMask2: 0x0000002)",
            nic.lid
        )?;
        dotted(w, "PortSelect", "1")?;
        dotted(w, "CounterSelect", "0x0000")?;
        for (label, name) in PERFQUERY {
            let value = if name.is_empty() {
                "0x00000000".to_string()
            } else {
                v.get(*name).copied().unwrap_or(0).to_string()
            };
            dotted(w, label, &value)?;
        }
    }
    Ok(())
}

fn dotted(w: &mut impl Write, label: &str, value: &str) -> io::Result<()> {
    let head = format!("{label}:");
    writeln!(w, "{head:.<33}{value}")
}

/// `rdma statistic`: one line per port with every hw counter.
pub fn write_rdma_statistic(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    after: bool,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let v = values(plan, host, k as u32, story, after);
        write!(w, "link {}/1", nic.name)?;
        for name in hw_names(plan).filter(|n| *n != "lifespan") {
            write!(w, " {name} {}", v.get(name).copied().unwrap_or(0))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// `ethtool -S <netdev>` of a RoCE port.
pub fn write_ethtool(
    plan: &Plan,
    host: &Host,
    k: u32,
    story: Option<&HostStory>,
    after: bool,
    w: &mut impl Write,
) -> io::Result<()> {
    let v = values(plan, host, k, story, after);
    writeln!(w, "NIC statistics:")?;
    for &name in ETHTOOL_PHY {
        writeln!(w, "     {name}: {}", v.get(name).copied().unwrap_or(0))?;
    }
    for p in 0..8 {
        for suffix in [
            "bytes",
            "packets",
            "pause",
            "pause_duration",
            "pause_transition",
        ] {
            for dir in ["rx", "tx"] {
                if dir == "tx" && suffix == "pause_transition" {
                    continue;
                }
                let name = format!("{dir}_prio{p}_{suffix}");
                writeln!(w, "     {name}: {}", v.get(&name).copied().unwrap_or(0))?;
            }
        }
    }
    Ok(())
}
