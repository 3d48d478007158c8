//! The event: one interesting log line turned into a typed fact with provenance.
//!
//! Parsers emit events; every later stage reads only events and the job model
//! built from them. An event keeps the line it came from (file and 1-based line
//! number) and the matched text, so any claim the report makes can cite it.

use serde::Serialize;

pub use super::fields::{FieldRef, Fields, Value};
use super::sym::Sym;
use super::time::RawTime;

/// Index of an input file in the job's file table (`Job::files`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct FileId(pub u32);

/// Where a line came from: file and 1-based line number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub file: FileId,
    pub line: u64,
}

/// Who wrote a line, as far as the line, its launcher prefix and its path say.
///
/// Ranks are resolved in stages: a `[rank3]:` prefix or an MPI tag names the global
/// rank directly; a torchrun `[default3]:` prefix or a log-dir path names only the
/// local rank; a Slurm label names the task id, which equals the rank only with one
/// task per GPU. The model stage fills in what the line itself did not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Who {
    /// Shared by the events of one writer (one copy per host a thread
    /// parses, not one per line).
    pub host: Option<Sym>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    /// Global rank, when known.
    pub rank: Option<u32>,
    /// Rank within the node, from torchrun prefixes or log-dir paths.
    pub local_rank: Option<u32>,
    /// Launcher task id (Slurm `--label`), resolved to a rank by the model.
    pub task: Option<u32>,
}

impl Who {
    /// Fills every field of `self` that is empty from `other`.
    pub fn fill_from(&mut self, other: &Who) {
        if self.host.is_none() {
            self.host.clone_from(&other.host);
        }
        self.pid = self.pid.or(other.pid);
        self.tid = self.tid.or(other.tid);
        self.rank = self.rank.or(other.rank);
        self.local_rank = self.local_rank.or(other.local_rank);
        self.task = self.task.or(other.task);
    }
}

/// Log level of the line as its writer printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Trace,
    #[default]
    Info,
    Warn,
    Error,
    Fatal,
}

impl Level {
    /// Reads the level words and letters of NCCL, c10, glog and Python logging.
    pub fn from_word(word: &str) -> Option<Level> {
        Some(match word {
            "TRACE" | "V" | "DEBUG" | "debug" => Level::Trace,
            "INFO" | "I" | "info" | "notice" => Level::Info,
            "WARN" | "WARNING" | "W" | "warn" | "warning" => Level::Warn,
            "ERROR" | "E" | "error" | "err" => Level::Error,
            "FATAL" | "F" | "CRITICAL" | "C" | "fatal" | "crit" | "alert" | "emerg" => Level::Fatal,
            _ => return None,
        })
    }
}

/// Declares `EventKind` with its snake_case names (used in grammars and JSON) and
/// the list of all kinds, from one table so the three cannot drift apart.
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// What a line means. Grammar entries name one of these (snake_case) as their
        /// `event`; the diagnosis matches on them. A new message that means an existing
        /// kind is a grammar edit; a new kind of fact is a new row here.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum EventKind { $($(#[$doc])* $variant,)* }

        impl EventKind {
            /// All kinds, in declaration order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The snake_case name used in grammars and JSON.
            pub fn name(self) -> &'static str {
                match self { $(EventKind::$variant => $name,)* }
            }
        }
    };
}

event_kinds! {
    // NCCL: identity and topology
    NcclVersion => "nccl_version",
    NcclCommInit => "nccl_comm_init",
    NcclCommTeardown => "nccl_comm_teardown",
    NcclBootstrapIface => "nccl_bootstrap_iface",
    NcclNetIb => "nccl_net_ib",
    NcclNetSocket => "nccl_net_socket",
    NcclNetSelected => "nccl_net_selected",
    /// The external network plugin a process loaded, or `internal`.
    NcclNetPlugin => "nccl_net_plugin",
    NcclChannel => "nccl_channel",
    NcclTrees => "nccl_trees",
    NcclEnvSetting => "nccl_env_setting",
    /// A call as its caller enqueued it (NCCL's COLL trace: op, opCount,
    /// count, datatype, root, comm); only each caller's last few are kept.
    NcclCollCall => "nccl_coll_call",
    // NCCL: failures
    IbCompletionError => "ib_completion_error",
    IbAsyncEvent => "ib_async_event",
    VerbsCallFailed => "verbs_call_failed",
    /// A queue-pair transition NCCL is still retrying (INFO): not a failure
    /// by itself; the last try's failure is a `verbs_call_failed` WARN.
    VerbsRetry => "verbs_retry",
    SocketError => "socket_error",
    /// A refused or timed-out connect NCCL is still retrying (INFO): not a
    /// failure by itself, since peers start listening at different times.
    SocketRetry => "socket_retry",
    /// A connection to one of NCCL's listening ports that did not open
    /// with NCCL's magic (a port scanner, a metrics scraper, another job
    /// dialling a reused port): NCCL drops it; not a failure by itself.
    ForeignConnection => "foreign_connection",
    /// A host's locked-memory limit as a tool printed it (`ulimit -a`,
    /// /proc/PID/limits): `kbytes` or `bytes`, absent when unlimited.
    MemlockLimit => "memlock_limit",
    BootstrapError => "bootstrap_error",
    /// The AWS EFA plugin (aws-ofi-nccl) failed a request or could not
    /// add a peer's address (`what`: completion, address).
    OfiError => "ofi_error",
    /// NCCL could not create or size a shared-memory segment (/dev/shm).
    ShmFailure => "shm_failure",
    /// A topology or graph XML file (NCCL_TOPO_FILE, NCCL_GRAPH_FILE, a
    /// network plugin's) that does not describe the machine (`what`).
    TopologyFileError => "topology_file_error",
    /// Two ranks of one communicator on the same GPU (NCCL's init check).
    DuplicateGpu => "duplicate_gpu",
    /// A process asked NCCL for a rank outside the communicator's size.
    InvalidRank => "invalid_rank",
    /// A line of the RAS client's report (`ncclras`): a flagged
    /// communicator, a section of its block, a launch count, a rank.
    RasReport => "ras_report",
    /// No algorithm and protocol could run a collective (NCCL_ALGO /
    /// NCCL_PROTO forbade every one that could).
    NoAlgorithm => "no_algorithm",
    /// The NCCL install does not fit the process (`what`): the network it
    /// was told to use is missing, a plugin failed to load, the library is
    /// older than the program's headers, its build cannot capture graphs.
    NcclInstall => "nccl_install",
    /// NVLS multicast memory the NVSwitches would not bind or allocate.
    NvlsFailure => "nvls_failure",
    ProxyError => "proxy_error",
    CudaFailure => "cuda_failure",
    NcclErrorChain => "nccl_error_chain",
    /// NCCL itself caught ranks disagreeing on a collective: its IB
    /// transport had more to send than the peer's posted receive (2.3–2.19),
    /// or its kernels asserted a mismatched collective (2.4–2.6).
    NcclMismatch => "nccl_mismatch",
    /// A NCCL WARN line no specific pattern knows.
    NcclWarn => "nccl_warn",
    // PyTorch ProcessGroupNCCL
    WatchdogTimeout => "watchdog_timeout",
    PgStatus => "pg_status",
    WatchdogException => "watchdog_exception",
    ProcessTakenDown => "process_taken_down",
    NcclErrorReport => "nccl_error_report",
    CommAborted => "comm_aborted",
    HeartbeatStuck => "heartbeat_stuck",
    DumpSignal => "dump_signal",
    CollectiveMismatch => "collective_mismatch",
    /// The collective a rank is about to run, as DETAIL debugging logs it.
    CollectiveFingerprint => "collective_fingerprint",
    /// `ProcessGroupNCCL environments: TORCH_…: v, …` (torch 2.2+ at INFO).
    TorchEnvSettings => "torch_env_settings",
    /// A line of the desync debug report (TORCH_NCCL_DESYNC_DEBUG=1), which
    /// names the lagging ranks itself.
    DesyncReport => "desync_report",
    /// `monitored_barrier` (Gloo): rank 0 names the ranks that never reached
    /// it, or a rank lost rank 0 while waiting (`role`: missing, coordinator).
    BarrierReport => "barrier_report",
    /// Gloo (PyTorch's CPU backend) set up on an unusable interface: the
    /// loopback fallback, an interface the host lacks, a connect to loopback.
    GlooInterface => "gloo_interface",
    /// A rank connecting to the c10d rendezvous store (MASTER_ADDR): a
    /// retry (`what` retry) or a timeout that failed it (`what` timeout).
    StoreConnect => "store_connect",
    /// A training framework saying its workers fell out of step (fairseq's
    /// `all_gather_list`), or doing what makes them (an OOM batch skipped).
    AppDesync => "app_desync",
    /// Horovod's stall inspector: its warning (`role` warning) and the
    /// ranks it lists as missing, with the tensors each has not submitted.
    HorovodStall => "horovod_stall",
    /// NCCL RAS (2.24+): dead peers, keep-alive and collective timeouts.
    RasEvent => "ras_event",
    /// NCCL 2.30.7+ `HINT:` lines after an error.
    NcclHint => "nccl_hint",
    /// A recognised ProcessGroupNCCL line with no diagnostic weight of its own
    /// (dump progress, stack-trace notes, wrapped fragments).
    TorchInfo => "torch_info",
    /// A Flight Recorder dump's view of one process group (synthesised from
    /// the dump file, cited as the whole file: line 0).
    FlightRecord => "flight_record",
    /// `Exception raised from <function> at <file>:<line>`: where a C++
    /// exception came from (checkTimeout, c10_cuda_check_implementation, …).
    CppExceptionOrigin => "cpp_exception_origin",
    /// A rank gave up waiting in the key-value store for the NCCL unique id
    /// its group's rank 0 publishes when it creates the communicator.
    UniqueIdWait => "unique_id_wait",
    /// A rank's wait for a key in the c10d store timed out: the rank that
    /// was to set it had not arrived.
    StoreWait => "store_wait",
    // launchers and process death
    WorkerFailed => "worker_failed",
    ClosingSignal => "closing_signal",
    ChildFailedRoot => "child_failed_root",
    ChildFailedField => "child_failed_field",
    TaskExited => "task_exited",
    ProcessSignaled => "process_signaled",
    PythonTraceback => "python_traceback",
    PythonException => "python_exception",
    /// An exception a Ray actor raised, as the caller re-raises it
    /// (`RayTaskError(OutOfMemoryError): ray::… (pid=N, ip=A, …)`): the
    /// worker process that raised it, by pid and node address.
    RayTaskError => "ray_task_error",
    /// NVIDIA Fabric Manager on an NVSwitch host failed to start (its
    /// version differs from the driver's): CUDA there is not ready.
    FabricManager => "fabric_manager",
    /// A node stopped answering (Slurm's `Not responding`, ssh's `No
    /// route to host`): its processes went silent with it.
    NodeUnreachable => "node_unreachable",
    /// A package and its version as a host's package list shows it
    /// (`pip list`, `pip freeze`, `conda list`): `torch`, `nvidia-nccl-cu12`.
    PackageVersion => "package_version",
    /// A traceback frame inside torch.distributed's collective API
    /// (`distributed_c10d.py`, in all_reduce): the op a rank was in.
    C10dCall => "c10d_call",
    /// A traceback frame in a helper that holds the other ranks at a barrier
    /// while the main process works alone (`main_process_first`).
    MainProcessWait => "main_process_wait",
    /// A traceback frame of contextlib's generator-based context manager
    /// (`__enter__` / `__exit__`): which side of a `with` block raised.
    /// Under `main_process_first`, `__exit__` is the main process's own
    /// barrier, releasing the others, not a rank waiting for it.
    ContextFrame => "context_frame",
    JobCancelled => "job_cancelled",
    JobCompleted => "job_completed",
    /// The training loop said it finished (Lightning, Hugging Face, own prints):
    /// a collective after it has no partner on ranks that already left.
    TrainingEnded => "training_ended",
    /// A rank started work that trainers do on the main process alone while
    /// the others wait in the next collective: saving a checkpoint or the
    /// model (`work = "save"`), evaluating a detection metric
    /// (`work = "evaluation"`).
    MainProcessWork => "main_process_work",
    /// A progress bar (tqdm and its look-alikes): the work a process was
    /// still doing, and for how long it had run.
    ProgressBar => "progress_bar",
    /// A training loop's step report with its loss (Megatron, Hugging
    /// Face, nanoGPT, torchtitan, DeepSpeed, fairseq, own prints): the job
    /// was still training when the line was written.
    TrainingStep => "training_step",
    /// A line of PyTorch's Flight Recorder analysis (`fr_trace`): a
    /// collective's block header or one of its fields.
    FrAnalysis => "fr_analysis",
    /// A stack dump's process header (py-spy `Process PID: CMD`).
    StackProcess => "stack_process",
    /// A stack dump's thread header (py-spy, faulthandler).
    StackThread => "stack_thread",
    /// One frame of a dumped thread, innermost first.
    StackFrame => "stack_frame",
    /// The torchrun agent's own state: rendezvous, exit barrier, restarts.
    ElasticAgent => "elastic_agent",
    /// How many nodes the job was launched to span: a launch command's
    /// `--nnodes`, torchrun's launch configs (`min_nodes`), its rendezvous
    /// result (`group_world_size`). Lines that name no host still tell a
    /// job of several hosts from one.
    LaunchNodes => "launch_nodes",
    /// A launcher's statement of every host's global ranks (DeepSpeed's
    /// `global_rank_mapping={'node1': [0, 1], …}`): where each rank ran,
    /// whatever the ranks themselves printed.
    RankLayout => "rank_layout",
    /// NCCL_* / TORCH_* settings as the launching shell shows them: an
    /// environment dump (`env | grep NCCL`, `export -p`, `set -x`), a
    /// command prefixed with assignments, mpirun's `-x NAME=value`.
    ShellEnv => "shell_env",
    // nccl-tests (all_reduce_perf and its siblings)
    /// `#  Rank  0 Group  0 Pid 4410 on node7 device  0 [0000:1a:00] …`:
    /// where each of the test's ranks runs.
    NcclTestsRank => "nccl_tests_rank",
    /// The test's result table (`what`: header, row with its `size`, done
    /// with the average bus bandwidth): how far a run got.
    NcclTestsTable => "nccl_tests_table",
    // host snapshots
    /// `lspci -vvv`'s `ACSCtl:` line of a PCIe bridge: whether Access
    /// Control Services redirect peer-to-peer traffic (`src_valid` `+`).
    PciAcs => "pci_acs",
    /// A host whose IOMMU translates device DMA rather than passing it
    /// through, as a library warned (RCCL's `Missing "iommu=pt" from kernel
    /// command line`): peer-to-peer DMA between its GPUs goes through it.
    IommuTranslating => "iommu_translating",
    /// The kernel's IOMMU default domain at boot (`iommu: Default domain
    /// type: Translated`): `mode` Translated or Passthrough.
    IommuMode => "iommu_mode",
    /// How big a host's /dev/shm is, as a tool reported it (`df`, Ray's
    /// start-up warning): `bytes`.
    ShmSize => "shm_size",
    /// An address a host's own tool lists for one of its interfaces
    /// (`ip addr`, `ip -br addr`, `ifconfig`): `ip`, its `scope`.
    HostAddress => "host_address",
    /// A native backtrace's frame in NCCL's own code (UCX's `==== backtrace`
    /// after a fatal signal): `func`.
    NcclNativeFrame => "nccl_native_frame",
    // kernel log (dmesg, journalctl -k, syslog)
    /// A kernel boot (the `Linux version` banner): uptime stamps restart.
    KernelBoot => "kernel_boot",
    /// A line tying a PCI address to a NIC name (mlx5_N, netdev) or a GPU.
    KernelDeviceMap => "kernel_device_map",
    /// mlx5 netdev `Link up` / `Link down`.
    KernelNicLink => "kernel_nic_link",
    /// ib_core `Port: N Link DOWN|ACTIVE|…`.
    KernelIbPortState => "kernel_ib_port_state",
    /// Transceiver (module) plugged, unplugged or in error.
    KernelNicModule => "kernel_nic_module",
    /// mlx5 firmware command failure or timeout.
    KernelNicCmdError => "kernel_nic_cmd_error",
    /// mlx5 health: fatal errors, health buffer, resets and recovery.
    KernelNicHealth => "kernel_nic_health",
    /// NETDEV WATCHDOG / mlx5e TX timeouts.
    KernelNicTxTimeout => "kernel_nic_tx_timeout",
    /// Completion-queue error syndromes.
    KernelCqeError => "kernel_cqe_error",
    /// PCIe Advanced Error Reporting.
    KernelPcieAer => "kernel_pcie_aer",
    /// The IOMMU refused a device's DMA (AMD-Vi IO_PAGE_FAULT, Intel DMAR).
    KernelIommuFault => "kernel_iommu_fault",
    /// NVIDIA `NVRM: Xid (PCI:…): N, …`.
    KernelGpuXid => "kernel_gpu_xid",
    /// A GPU fell off the bus or was lost without an Xid.
    KernelGpuLost => "kernel_gpu_lost",
    /// The OOM killer killed a process.
    KernelOomKill => "kernel_oom_kill",
    /// A process segfaulted (kernel `segfault at` line).
    KernelSegfault => "kernel_segfault",
    /// The host's firewall logged a packet it rejected or dropped
    /// (netfilter's LOG target): `src`, `dst`, `proto`, `dpt`.
    KernelFirewall => "kernel_firewall",
}

impl EventKind {
    pub fn from_name(name: &str) -> Option<EventKind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Kinds that every rank prints (its layout at start-up, the parts of
    /// its exit summary) and that rules read by their fields alone: their
    /// lines need not be kept in memory, the report reads the cited ones
    /// again.
    pub fn read_by_fields_alone(self) -> bool {
        matches!(
            self,
            EventKind::NcclCommInit
                | EventKind::NcclChannel
                | EventKind::NcclTrees
                | EventKind::NcclEnvSetting
                | EventKind::NcclNetIb
                | EventKind::NcclNetSocket
                | EventKind::NcclNetSelected
                | EventKind::NcclNetPlugin
                | EventKind::NcclBootstrapIface
                | EventKind::ChildFailedField
                | EventKind::CppExceptionOrigin
        )
    }
}

/// One interesting line, typed.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: EventKind,
    /// Id of the grammar pattern that matched (`nccl.ib_completion.v2_20`).
    pub pattern: &'static str,
    pub origin: Origin,
    pub who: Who,
    pub level: Level,
    pub time: RawTime,
    pub fields: Fields,
    /// The line as printed (lossily decoded, capped), for evidence.
    pub text: Box<str>,
}

impl Event {
    pub fn int(&self, name: &str) -> Option<i64> {
        self.fields.int(name)
    }

    pub fn text_field(&self, name: &str) -> Option<&str> {
        self.fields.text(name)
    }

    /// An event of `kind` with these fields at line 1 of file 0, for unit tests.
    #[cfg(test)]
    pub fn with_fields(kind: EventKind, fields: Fields) -> Event {
        Event {
            kind,
            pattern: "test",
            origin: Origin {
                file: FileId(0),
                line: 1,
            },
            who: Default::default(),
            level: Default::default(),
            time: Default::default(),
            fields,
            text: "".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_name(kind.name()), Some(*kind));
        }
    }
}
