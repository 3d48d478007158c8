//! The IB PMA counters: the sysfs file name, the perfquery field name and the
//! width (in bits) of the legacy PortCounters attribute, where the counter
//! saturates. sysfs keeps these widths even on mlx5 (docs/sys-formats.md §c).

/// (sysfs name, perfquery name, legacy width).
pub const PMA_COUNTERS: &[(&str, &str, u8)] = &[
    ("symbol_error", "SymbolErrorCounter", 16),
    ("link_error_recovery", "LinkErrorRecoveryCounter", 8),
    ("link_downed", "LinkDownedCounter", 8),
    ("port_rcv_errors", "PortRcvErrors", 16),
    (
        "port_rcv_remote_physical_errors",
        "PortRcvRemotePhysicalErrors",
        16,
    ),
    (
        "port_rcv_switch_relay_errors",
        "PortRcvSwitchRelayErrors",
        16,
    ),
    ("port_xmit_discards", "PortXmitDiscards", 16),
    ("port_xmit_constraint_errors", "PortXmitConstraintErrors", 8),
    ("port_rcv_constraint_errors", "PortRcvConstraintErrors", 8),
    ("local_link_integrity_errors", "LocalLinkIntegrityErrors", 4),
    (
        "excessive_buffer_overrun_errors",
        "ExcessiveBufferOverrunErrors",
        4,
    ),
    ("VL15_dropped", "VL15Dropped", 16),
    ("port_xmit_wait", "PortXmitWait", 32),
    ("port_xmit_data", "PortXmitData", 32),
    ("port_rcv_data", "PortRcvData", 32),
    ("port_xmit_packets", "PortXmitPkts", 32),
    ("port_rcv_packets", "PortRcvPkts", 32),
    ("QP1_dropped", "QP1Dropped", 16),
];

/// PortRcvErrorDetails (`perfquery -E`) and other 16-bit detail counters.
const DETAIL_16: &[&str] = &[
    "PortLocalPhysicalErrors",
    "PortMalformedPktErrors",
    "PortBufferOverrunErrors",
    "PortDLIDMappingErrors",
    "PortVLMappingErrors",
    "PortLoopingErrors",
    "PortInactiveDiscards",
    "PortNeighborMTUDiscards",
    "PortSWLifetimeLimitDiscards",
    "PortSWHOQLifetimeLimitDiscards",
];

/// The legacy width of a sysfs `counters/` file. Data and packet files are
/// left open: sysfs switches them to 64 bits when the HCA supports it.
pub fn sysfs_width(name: &str) -> Option<u8> {
    PMA_COUNTERS
        .iter()
        .find(|(s, _, _)| *s == name)
        .map(|(_, _, w)| *w)
        .filter(|_| !is_traffic(name))
}

/// The legacy (non `-x`) width of a perfquery field.
pub fn perfquery_width(name: &str) -> Option<u8> {
    PMA_COUNTERS
        .iter()
        .find(|(_, p, _)| *p == name)
        .map(|(_, _, w)| *w)
        .or_else(|| DETAIL_16.contains(&name).then_some(16))
}

/// Whether a bare name is a PMA (`counters/`) file rather than a hw counter.
pub fn is_pma_name(name: &str) -> bool {
    PMA_COUNTERS.iter().any(|(s, _, _)| *s == name)
        || matches!(
            name,
            "unicast_xmit_packets"
                | "unicast_rcv_packets"
                | "multicast_xmit_packets"
                | "multicast_rcv_packets"
        )
}

fn is_traffic(name: &str) -> bool {
    name.ends_with("_data") || name.ends_with("_packets")
}
