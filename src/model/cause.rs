//! The cause vocabulary of docs/verdict.md: one list for grammars, JSON, HTML
//! and the batch index.

use schemars::JsonSchema;
use serde::Serialize;

macro_rules! cause_kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// What made the job fail.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum CauseKind { $($variant,)* }

        impl CauseKind {
            pub const ALL: &'static [CauseKind] = &[$(CauseKind::$variant,)*];

            pub fn name(self) -> &'static str {
                match self { $(CauseKind::$variant => $name,)* }
            }
        }
    };
}

cause_kinds! {
    LinkFlap => "link_flap",
    PacketLoss => "packet_loss",
    Congestion => "congestion",
    MtuMismatch => "mtu_mismatch",
    PortDegraded => "port_degraded",
    GidIndex => "gid_index",
    Memlock => "memlock",
    SocketInterface => "socket_interface",
    Firewall => "firewall",
    CrossRail => "cross_rail",
    ConfigMismatch => "config_mismatch",
    HcaFault => "hca_fault",
    GpuFault => "gpu_fault",
    ProcessCrash => "process_crash",
    CollectiveMismatch => "collective_mismatch",
    RankStalled => "rank_stalled",
    NcclBug => "nccl_bug",
    Unknown => "unknown",
}

impl CauseKind {
    pub fn from_name(name: &str) -> Option<CauseKind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for CauseKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
