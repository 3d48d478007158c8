//! What the kernel logs say about each host's devices, and where each kernel
//! event happened: host, PCI function, NIC names, and the ranks it touches.
//! Built by `build::kernel`.

use std::collections::{BTreeMap, BTreeSet};

use super::{EventIdx, EventKind};

/// The kernel-log kinds (dmesg, journalctl -k, syslog).
pub fn is_kernel(kind: EventKind) -> bool {
    use EventKind::*;
    matches!(
        kind,
        KernelBoot
            | KernelDeviceMap
            | KernelNicLink
            | KernelIbPortState
            | KernelNicModule
            | KernelNicCmdError
            | KernelNicHealth
            | KernelNicTxTimeout
            | KernelCqeError
            | KernelPcieAer
            | KernelIommuFault
            | KernelGpuXid
            | KernelGpuLost
            | KernelOomKill
            | KernelSegfault
    )
}

/// One NIC PCI function's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NicNames {
    /// The driver that printed it (`mlx5_core`).
    pub driver: Option<String>,
    /// The RDMA device (what NCCL calls the HCA: `mlx5_1`).
    pub ibdev: Option<String>,
    /// The RDMA device was inferred from probe order (mlx5_N in PCI order),
    /// not read from a line.
    pub ibdev_guessed: bool,
    pub netdevs: BTreeSet<String>,
}

/// One GPU's identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuNames {
    pub uuid: Option<String>,
    pub serial: Option<String>,
}

/// One host's devices, keyed by PCI address (`dddd:bb:dd.f`).
#[derive(Debug, Clone, Default)]
pub struct HostDevices {
    pub nics: BTreeMap<String, NicNames>,
    pub gpus: BTreeMap<String, GpuNames>,
    /// netdev → (RDMA device, port) that a table (show_gids, `rdma link`,
    /// ibdev2netdev) states for a netdev no PCI function is known for.
    pub netdev_ports: BTreeMap<String, (String, Option<u32>)>,
}

impl HostDevices {
    /// The PCI function of a NIC known by its RDMA device or netdev name.
    pub fn nic_by_name(&self, name: &str) -> Option<&str> {
        self.nics
            .iter()
            .find(|(_, n)| n.ibdev.as_deref() == Some(name) || n.netdevs.contains(name))
            .map(|(pci, _)| pci.as_str())
    }
}

/// Where one kernel event happened and whom it touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelPlace {
    pub host: Option<String>,
    pub pci: Option<String>,
    /// The NIC's RDMA device name, from the line or the host's name table.
    pub ibdev: Option<String>,
    pub netdev: Option<String>,
    pub port: Option<u32>,
    /// The event is about a GPU (not a NIC).
    pub gpu: bool,
    /// Ranks whose GPU, NIC or process the event is about.
    pub ranks: BTreeSet<u32>,
}

impl KernelPlace {
    /// The device name a verdict cites: the RDMA device, else the netdev,
    /// else the PCI address.
    pub fn device(&self) -> Option<&str> {
        self.ibdev
            .as_deref()
            .or(self.netdev.as_deref())
            .or(self.pci.as_deref())
    }
}

/// The joined picture of every kernel log of the job.
#[derive(Debug, Clone, Default)]
pub struct KernelMap {
    pub hosts: BTreeMap<String, HostDevices>,
    /// Every kernel event's place, by event index.
    pub places: BTreeMap<EventIdx, KernelPlace>,
}

impl KernelMap {
    pub fn place(&self, idx: EventIdx) -> Option<&KernelPlace> {
        self.places.get(&idx)
    }
}
