//! The knowledge base (`grammars/knowledge.toml`): the cause catalogue with
//! summary and remedy templates, the rules telling victims from culprits, and
//! the code tables (ibv_wc_status, ncclResult, NVIDIA Xid) used to explain lines.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::GrammarError;
use super::counters::CounterKnowledge;
use super::nccl_cuda::NcclCudaFailure;
use super::sockets::{LocalOnly, SocketsSpec};
use crate::model::CauseKind;
use crate::model::build::ConsequenceRules;

const KNOWLEDGE: &str = include_str!("../../grammars/knowledge.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeFile {
    cause: Vec<CauseSpec>,
    lint: LintSpec,
    consequences: ConsequenceSpec,
    host_setup: HostSetupSpec,
    gone_hosts: GoneHostsSpec,
    #[serde(default)]
    explains: Vec<ExplainsSpec>,
    gpu_error: Vec<GpuErrorSpec>,
    #[serde(default)]
    gpu_health: Vec<GpuHealth>,
    ibv_wc_status: Vec<CodeSpec>,
    nccl_result: Vec<CodeSpec>,
    #[serde(default)]
    xid_class: Vec<XidClassSpec>,
    #[serde(default)]
    xid: Vec<XidSpec>,
    #[serde(default)]
    mlx5: Mlx5Spec,
    #[serde(default)]
    torch_api: TorchApiSpec,
    #[serde(default)]
    nccl_calls: NcclCalls,
    #[serde(default)]
    sockets: SocketsSpec,
    /// Signal name → what a process dying of it most often means.
    #[serde(default)]
    signal_hints: BTreeMap<String, String>,
    #[serde(default)]
    nccl_cuda_failure: Vec<NcclCudaFailure>,
    #[serde(default)]
    store: StoreSpec,
    #[serde(default)]
    efa: EfaSpec,
    #[serde(default)]
    horovod: HorovodSpec,
    #[serde(default)]
    scheduler: SchedulerSpec,
    #[serde(default)]
    data_loader: DataLoaderSpec,
    #[serde(default)]
    fr_trace: FrTraceSpec,
    #[serde(default)]
    nccl_tests: NcclTestsSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NcclTestsSpec {
    #[serde(default)]
    failure_exit_codes: Vec<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrTraceSpec {
    #[serde(default)]
    mismatch_types: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EfaSpec {
    #[serde(default)]
    peer_gone: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DataLoaderSpec {
    #[serde(default)]
    file: String,
    #[serde(default)]
    fetch_functions: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HorovodSpec {
    #[serde(default)]
    shut_down: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchedulerSpec {
    #[serde(default)]
    ended_while_working: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSpec {
    #[serde(default)]
    connection_lost: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct XidClassSpec {
    name: String,
    weight: f64,
    meaning: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct XidSpec {
    code: i64,
    name: String,
    class: String,
    severity: String,
    hardware: bool,
    action: String,
    #[serde(default)]
    unit_word_decides: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TorchApiSpec {
    #[serde(default)]
    ops: BTreeMap<String, String>,
    #[serde(default)]
    same_size_ops: Vec<String>,
    #[serde(default)]
    point_to_point_ops: Vec<String>,
    #[serde(default)]
    same_on_the_wire: BTreeMap<String, String>,
    #[serde(default)]
    any_op: Vec<String>,
}

/// How the members of a communicator must agree on a call, by NCCL op
/// name (the COLL trace's `AllReduce: opCount …`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NcclCalls {
    /// Ops every member calls with one count and datatype at one launch.
    #[serde(default)]
    agreeing_ops: Vec<String>,
    /// Of those, the ones whose root must agree too.
    #[serde(default)]
    rooted_ops: Vec<String>,
    /// Of those, the ones whose reduction must agree too.
    #[serde(default)]
    reducing_ops: Vec<String>,
    /// `ncclDataType_t` names by value.
    #[serde(default)]
    datatypes: Vec<String>,
    /// NCCL op name → the OpType PyTorch names the same collective by.
    #[serde(default)]
    op_types: BTreeMap<String, String>,
}

impl NcclCalls {
    /// Whether every member calls `op` alike (not a point-to-point op).
    pub fn agreeing(&self, op: &str) -> bool {
        self.agreeing_ops.iter().any(|o| o == op)
    }

    pub fn rooted(&self, op: &str) -> bool {
        self.rooted_ops.iter().any(|o| o == op)
    }

    pub fn reducing(&self, op: &str) -> bool {
        self.reducing_ops.iter().any(|o| o == op)
    }

    /// `6` → `float16`.
    pub fn datatype(&self, value: i64) -> Option<&str> {
        let i = usize::try_from(value).ok()?;
        self.datatypes.get(i).map(String::as_str)
    }

    /// `AllReduce` → `ALLREDUCE`.
    pub fn op_type(&self, op: &str) -> Option<&str> {
        self.op_types.get(op).map(String::as_str)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mlx5Spec {
    #[serde(default)]
    wedged_command_timeouts: Vec<String>,
}

/// What a cause's peer host is to the fault.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerRole {
    /// The host that saw the failure (dialled the blocked host, lost its
    /// peer): any host can be it, the fault is the culprit's alone.
    #[default]
    Witness,
    /// The other end of the faulty path: the pair is the suspect.
    Path,
}

/// Whose fault a cause is: a machine's (a host, a NIC, a GPU, a link) or
/// the software's (the program, the library), which no host answers for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultOf {
    #[default]
    Machine,
    Software,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CauseSpec {
    kind: String,
    title: String,
    summary: String,
    remedy: String,
    #[serde(default)]
    peer: PeerRole,
    #[serde(default)]
    fault: FaultOf,
    /// The same cause where it shows differently (a security group on EFA
    /// rather than a host's firewall): a rule names the variant it found.
    #[serde(default)]
    variants: BTreeMap<String, VariantSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantSpec {
    summary: String,
    remedy: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LintSpec {
    markers: Vec<String>,
    ignore_prefixes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExplainsSpec {
    cause: String,
    explains: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsequenceSpec {
    exception_types: Vec<String>,
    message_markers: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GoneHostsSpec {
    unreachable_detail: String,
    stopped_reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSetupSpec {
    startup_errors: Vec<String>,
    fabric_not_ready: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuErrorSpec {
    text: String,
    weight: f64,
    /// The cause text variant this error is told in (`nvswitch`).
    #[serde(default)]
    variant: Option<String>,
    /// What the error says about the GPUs, where not a hardware failure.
    #[serde(default)]
    meaning: Option<String>,
}

/// What an `nvidia-smi` field showing a fault means (`[[gpu_health]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuHealth {
    /// The finding's name, as the `nvidia-smi` parser gives it.
    pub finding: String,
    /// How strongly it alone points at the GPU as the job's cause.
    pub weight: f64,
    pub meaning: String,
    /// The cause text variant it is told in (`nvswitch`).
    #[serde(default)]
    pub variant: Option<String>,
}

/// A CUDA error text that means a GPU-side fault.
#[derive(Debug, Clone)]
pub struct GpuError {
    text: String,
    pub weight: f64,
    pub variant: Option<String>,
    pub meaning: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CodeSpec {
    code: i64,
    name: String,
    meaning: String,
    #[serde(default)]
    own: bool,
}

/// What an NVIDIA Xid means and how much it says about the GPU.
#[derive(Debug, Clone)]
pub struct XidInfo {
    pub code: i64,
    pub name: String,
    /// The class (`app`, `hardware`, `node`, …) whose weight it carries.
    pub class: String,
    pub severity: String,
    /// The Xid implicates the GPU hardware, not the program.
    pub hardware: bool,
    pub action: String,
    /// `Nonfatal` / `Fatal` after the unit name decides (NVLink5).
    pub unit_word_decides: bool,
}

/// One Xid class: how strongly it points at the GPU, and what it means.
#[derive(Debug, Clone)]
pub struct XidClass {
    pub weight: f64,
    pub meaning: String,
}

/// One cause's text.
#[derive(Debug, Clone)]
pub struct CauseText {
    pub title: String,
    pub summary: String,
    pub remedy: String,
    pub peer: PeerRole,
    pub fault: FaultOf,
    /// Texts of the cause's variants, by name (their own variants empty).
    pub variants: BTreeMap<String, CauseText>,
}

/// A code's name and what it means.
#[derive(Debug, Clone)]
pub struct CodeText {
    pub name: String,
    pub meaning: String,
    /// An NCCL result that reports the calling rank's own failure (its CUDA
    /// calls, its arguments), not a peer that went away.
    pub own: bool,
}

#[derive(Debug)]
pub struct Knowledge {
    causes: BTreeMap<CauseKind, CauseText>,
    pub consequences: ConsequenceRules,
    /// Start-up errors (lower-case) that say a worker's host is set up
    /// unlike the job needs (`[host_setup]`).
    pub host_setup_errors: Vec<String>,
    /// Start-up errors (lower-case) that are the host's set-up only where
    /// its fabric service failed or all its workers died of them.
    pub fabric_not_ready_errors: Vec<String>,
    /// What an undecided verdict says of a node that stopped answering
    /// (a template of `{host}` and `{what}`).
    pub unreachable_detail: String,
    /// Why the workers of a host stopped under the job died.
    pub stopped_reason: String,
    /// (explaining cause, the causes whose symptoms it explains), in order.
    pub explains: Vec<(CauseKind, Vec<CauseKind>)>,
    /// Substrings that make a line worth a grammar pattern (`lint-logs`).
    pub lint_markers: Vec<String>,
    /// Message starts that `lint-logs` does not count (stack frames).
    pub lint_ignore_prefixes: Vec<String>,
    /// CUDA error texts that mean a GPU-side fault, with their weight.
    gpu_errors: Vec<GpuError>,
    gpu_health: Vec<GpuHealth>,
    ibv_wc_status: BTreeMap<i64, CodeText>,
    nccl_result: BTreeMap<i64, CodeText>,
    /// What NIC and IB counters mean (`grammars/counters.toml`).
    pub counters: CounterKnowledge,
    xids: BTreeMap<i64, XidInfo>,
    xid_classes: BTreeMap<String, XidClass>,
    /// mlx5 firmware commands whose timeout means the firmware is wedged.
    wedged_commands: Vec<String>,
    /// torch.distributed function name → the OpType its work carries.
    torch_api_ops: BTreeMap<String, String>,
    /// OpTypes whose input has the same size on every rank of the group.
    same_size_ops: Vec<String>,
    /// OpTypes that pair with another op on the peer (a send with a recv).
    point_to_point_ops: Vec<String>,
    /// OpType → the one NCCL runs for it (`BARRIER` → `ALLREDUCE`).
    same_on_the_wire: BTreeMap<String, String>,
    /// OpTypes that stand for any collective (coalesced work).
    any_op: Vec<String>,
    /// Signal name → what a process dying of it most often means.
    signal_hints: BTreeMap<String, String>,
    /// NCCL's own CUDA failures that say the install does not fit.
    pub nccl_cuda_failures: Vec<NcclCudaFailure>,
    /// Store errors (lower case) that mean the store's server went away.
    store_connection_lost: Vec<String>,
    /// EFA completion errors (lower case) that mean the peer's process is gone.
    efa_peer_gone: Vec<String>,
    /// Horovod's words (lower case) for its own shutdown, as an exception's
    /// message carries them.
    horovod_shut_down: Vec<String>,
    /// Reasons a scheduler gives for a cancel (`DUE TO …`) that end a job
    /// however well it ran: a time limit, a preemption.
    ended_while_working: Vec<String>,
    /// The DataLoader's source file (its path's end) and the functions in
    /// which a main thread waits for its workers' data.
    data_loader_file: String,
    data_loader_fetch: Vec<String>,
    /// fr_trace error types that mean the culprit ran another collective.
    fr_mismatch_types: Vec<String>,
    /// Exit statuses with which nccl-tests reports a failed CUDA or NCCL call.
    test_failure_exit_codes: Vec<i64>,
    /// Socket interfaces and networks that stay on their host.
    pub local_only: LocalOnly,
    /// What members of a communicator agree on, per NCCL op.
    pub nccl_calls: NcclCalls,
}

impl Knowledge {
    pub fn builtin() -> Result<Knowledge, GrammarError> {
        let mut k = Knowledge::parse("knowledge.toml", KNOWLEDGE)?;
        k.counters = CounterKnowledge::builtin()?;
        Ok(k)
    }

    pub fn parse(file: &str, text: &str) -> Result<Knowledge, GrammarError> {
        let raw: KnowledgeFile = super::read_toml(file, text)?;
        let mut causes = BTreeMap::new();
        for c in raw.cause {
            let kind = CauseKind::from_name(&c.kind).ok_or_else(|| GrammarError::Pattern {
                file: file.into(),
                id: c.kind.clone(),
                reason: "not a cause kind of docs/verdict.md".into(),
            })?;
            causes.insert(
                kind,
                CauseText {
                    variants: c
                        .variants
                        .into_iter()
                        .map(|(name, v)| {
                            let text = CauseText {
                                title: c.title.clone(),
                                summary: v.summary,
                                remedy: v.remedy,
                                peer: c.peer,
                                fault: c.fault,
                                variants: BTreeMap::new(),
                            };
                            (name, text)
                        })
                        .collect(),
                    title: c.title,
                    summary: c.summary,
                    remedy: c.remedy,
                    peer: c.peer,
                    fault: c.fault,
                },
            );
        }
        if let Some(missing) = CauseKind::ALL.iter().find(|k| !causes.contains_key(k)) {
            return Err(GrammarError::Pattern {
                file: file.into(),
                id: missing.name().into(),
                reason: "cause kind has no entry".into(),
            });
        }
        let config_variants = &causes[&CauseKind::ConfigMismatch].variants;
        if let Some(f) = raw
            .nccl_cuda_failure
            .iter()
            .find(|f| !config_variants.contains_key(&f.variant))
        {
            return Err(GrammarError::Pattern {
                file: file.into(),
                id: f.variant.clone(),
                reason: "nccl_cuda_failure names no config_mismatch variant".into(),
            });
        }
        let table = |v: Vec<CodeSpec>| {
            v.into_iter()
                .map(|c| {
                    (
                        c.code,
                        CodeText {
                            name: c.name,
                            meaning: c.meaning,
                            own: c.own,
                        },
                    )
                })
                .collect()
        };
        let (xid_classes, xids) = xid_tables(file, raw.xid_class, raw.xid)?;
        let explains = raw
            .explains
            .iter()
            .map(|e| {
                let kind = |n: &str| {
                    CauseKind::from_name(n).ok_or_else(|| GrammarError::Pattern {
                        file: file.into(),
                        id: n.into(),
                        reason: "not a cause kind of docs/verdict.md".into(),
                    })
                };
                Ok((
                    kind(&e.cause)?,
                    e.explains
                        .iter()
                        .map(|n| kind(n))
                        .collect::<Result<Vec<_>, _>>()?,
                ))
            })
            .collect::<Result<Vec<_>, GrammarError>>()?;
        Ok(Knowledge {
            explains,
            xids,
            xid_classes,
            wedged_commands: raw.mlx5.wedged_command_timeouts,
            torch_api_ops: raw.torch_api.ops,
            same_size_ops: raw.torch_api.same_size_ops,
            point_to_point_ops: raw.torch_api.point_to_point_ops,
            same_on_the_wire: raw.torch_api.same_on_the_wire,
            any_op: raw.torch_api.any_op,
            signal_hints: raw.signal_hints,
            nccl_cuda_failures: raw
                .nccl_cuda_failure
                .into_iter()
                .map(NcclCudaFailure::lower_errors)
                .collect(),
            store_connection_lost: raw
                .store
                .connection_lost
                .iter()
                .map(|m| m.to_ascii_lowercase())
                .collect(),
            fr_mismatch_types: raw.fr_trace.mismatch_types,
            test_failure_exit_codes: raw.nccl_tests.failure_exit_codes,
            efa_peer_gone: raw
                .efa
                .peer_gone
                .iter()
                .map(|m| m.to_ascii_lowercase())
                .collect(),
            data_loader_file: raw.data_loader.file,
            data_loader_fetch: raw.data_loader.fetch_functions,
            horovod_shut_down: raw
                .horovod
                .shut_down
                .iter()
                .map(|m| m.to_ascii_lowercase())
                .collect(),
            ended_while_working: raw.scheduler.ended_while_working,
            local_only: LocalOnly::from_spec(file, raw.sockets)?,
            nccl_calls: raw.nccl_calls,
            causes,
            consequences: ConsequenceRules {
                exception_types: raw.consequences.exception_types,
                message_markers: raw.consequences.message_markers,
            },
            host_setup_errors: lower_all(&raw.host_setup.startup_errors),
            fabric_not_ready_errors: lower_all(&raw.host_setup.fabric_not_ready),
            unreachable_detail: raw.gone_hosts.unreachable_detail,
            stopped_reason: raw.gone_hosts.stopped_reason,
            lint_markers: raw.lint.markers,
            lint_ignore_prefixes: raw.lint.ignore_prefixes,
            gpu_errors: raw
                .gpu_error
                .into_iter()
                .map(|g| GpuError {
                    text: g.text.to_ascii_lowercase(),
                    weight: g.weight,
                    variant: g.variant,
                    meaning: g.meaning,
                })
                .collect(),
            gpu_health: raw.gpu_health,
            ibv_wc_status: table(raw.ibv_wc_status),
            nccl_result: table(raw.nccl_result),
            counters: CounterKnowledge::default(),
        })
    }

    /// The OpType of a torch.distributed function (`all_reduce` → `ALLREDUCE`).
    pub fn torch_api_op(&self, function: &str) -> Option<&str> {
        self.torch_api_ops.get(function).map(String::as_str)
    }

    /// Whether an nccl-tests process exiting with `code` reported a failed
    /// CUDA or NCCL call (rather than dying of its own).
    pub fn is_test_failure_exit(&self, code: i64) -> bool {
        self.test_failure_exit_codes.contains(&code)
    }

    /// What dying of `signal` (`SIGBUS`) most often means, where known.
    pub fn signal_hint(&self, signal: &str) -> Option<&str> {
        self.signal_hints.get(signal).map(String::as_str)
    }

    /// Whether an error type of PyTorch's Flight Recorder analysis says the
    /// culprit ran another collective (op, size or dtype), not just a later one.
    pub fn fr_type_is_mismatch(&self, error_type: &str) -> bool {
        self.fr_mismatch_types.iter().any(|t| t == error_type)
    }

    /// Whether a key-value store error says the store's server went away
    /// (rather than a wait that timed out).
    pub fn store_connection_lost(&self, error: &str) -> bool {
        let error = error.to_ascii_lowercase();
        self.store_connection_lost
            .iter()
            .any(|m| error.contains(m.as_str()))
    }

    /// Whether a stack frame is the DataLoader fetching its workers' data.
    pub fn data_loader_fetch(&self, file: &str, function: &str) -> bool {
        !self.data_loader_file.is_empty()
            && file.ends_with(self.data_loader_file.as_str())
            && self.data_loader_fetch.iter().any(|f| f == function)
    }

    /// Whether a scheduler's cancel reason ends a job however well it ran.
    pub fn ends_a_working_job(&self, reason: &str) -> bool {
        self.ended_while_working.iter().any(|r| r == reason)
    }

    /// Whether an exception's message is Horovod's own shutdown.
    pub fn horovod_shut_down(&self, text: &str) -> bool {
        let text = text.to_ascii_lowercase();
        self.horovod_shut_down
            .iter()
            .any(|m| text.contains(m.as_str()))
    }

    /// Whether an EFA request's error says the peer's process is gone
    /// (its queue pair no longer exists) rather than unreachable.
    pub fn efa_peer_gone(&self, text: &str) -> bool {
        let text = text.to_ascii_lowercase();
        self.efa_peer_gone.iter().any(|m| text.contains(m.as_str()))
    }

    /// Whether every rank passes the same input size to `op` (an all-reduce
    /// does; an all-to-all with uneven splits or a gather's root does not).
    /// Whether the OpType pairs with another op on the peer (send, recv).
    pub fn point_to_point_op(&self, op: &str) -> bool {
        self.point_to_point_ops.iter().any(|o| o == op)
    }

    /// The collective NCCL runs for an OpType, to compare two ranks' ops;
    /// `None` for work that may be any op.
    pub fn op_on_the_wire<'a>(&'a self, op: &'a str) -> Option<&'a str> {
        if self.any_op.iter().any(|o| o == op) {
            return None;
        }
        Some(self.same_on_the_wire.get(op).map_or(op, String::as_str))
    }

    pub fn same_size_op(&self, op: &str) -> bool {
        self.same_size_ops.iter().any(|o| o == op)
    }

    pub fn cause(&self, kind: CauseKind) -> &CauseText {
        &self.causes[&kind]
    }

    /// The cause's texts for `variant`, where the data has that variant.
    pub fn cause_as(&self, kind: CauseKind, variant: Option<&str>) -> &CauseText {
        let base = self.cause(kind);
        variant.and_then(|v| base.variants.get(v)).unwrap_or(base)
    }

    /// How strongly a CUDA error text points at the GPU hardware (0 = not at all).
    pub fn gpu_error_weight(&self, text: &str) -> f64 {
        self.gpu_error(text).map_or(0.0, |g| g.weight)
    }

    /// The strongest GPU-side fault a CUDA error text names, if any.
    pub fn gpu_error(&self, text: &str) -> Option<&GpuError> {
        let lower = text.to_ascii_lowercase();
        self.gpu_errors
            .iter()
            .filter(|g| lower.contains(&g.text))
            .max_by(|a, b| a.weight.total_cmp(&b.weight))
    }

    /// What an `nvidia-smi` finding means, if the knowledge base knows it.
    pub fn gpu_health(&self, finding: &str) -> Option<&GpuHealth> {
        self.gpu_health.iter().find(|g| g.finding == finding)
    }

    pub fn wc_status(&self, code: i64) -> Option<&CodeText> {
        self.ibv_wc_status.get(&code)
    }

    pub fn nccl_result(&self, code: i64) -> Option<&CodeText> {
        self.nccl_result.get(&code)
    }

    /// Whether an NCCL error text PyTorch raised (`unhandled cuda error (run
    /// with …)`) names a result of the rank's own failing.
    pub fn nccl_error_is_own(&self, error: &str) -> bool {
        let error = error.trim_start().to_ascii_lowercase();
        self.nccl_result
            .values()
            .any(|r| r.own && error.starts_with(&r.meaning.to_ascii_lowercase()))
    }

    pub fn xid(&self, code: i64) -> Option<&XidInfo> {
        self.xids.get(&code)
    }

    pub fn xid_class(&self, name: &str) -> Option<&XidClass> {
        self.xid_classes.get(name)
    }

    /// A timeout of this mlx5 firmware command means the firmware is wedged.
    pub fn is_wedged_command(&self, command: &str) -> bool {
        self.wedged_commands.iter().any(|c| c == command)
    }
}

type XidTables = (BTreeMap<String, XidClass>, BTreeMap<i64, XidInfo>);

/// The Xid classes and entries; every entry's class must exist.
fn lower_all(texts: &[String]) -> Vec<String> {
    texts.iter().map(|t| t.to_ascii_lowercase()).collect()
}

fn xid_tables(
    file: &str,
    classes: Vec<XidClassSpec>,
    xids: Vec<XidSpec>,
) -> Result<XidTables, GrammarError> {
    let classes: BTreeMap<String, XidClass> = classes
        .into_iter()
        .map(|c| {
            (
                c.name,
                XidClass {
                    weight: c.weight.clamp(0.0, 1.0),
                    meaning: c.meaning,
                },
            )
        })
        .collect();
    let mut out = BTreeMap::new();
    for x in xids {
        if !classes.contains_key(&x.class) {
            return Err(GrammarError::Pattern {
                file: file.into(),
                id: format!("xid {}", x.code),
                reason: format!("unknown xid class `{}`", x.class),
            });
        }
        out.insert(
            x.code,
            XidInfo {
                code: x.code,
                name: x.name,
                class: x.class,
                severity: x.severity,
                hardware: x.hardware,
                action: x.action,
                unit_word_decides: x.unit_word_decides,
            },
        );
    }
    Ok((classes, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_knowledge_covers_every_cause_kind() {
        let k = Knowledge::builtin().unwrap();
        for kind in CauseKind::ALL {
            assert!(!k.cause(*kind).remedy.is_empty(), "{kind}");
        }
        assert_eq!(k.wc_status(12).unwrap().name, "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(k.nccl_result(6).unwrap().name, "ncclRemoteError");
    }

    #[test]
    fn ops_compare_as_nccl_runs_them() {
        let k = Knowledge::builtin().unwrap();
        assert_eq!(k.op_on_the_wire("BARRIER"), k.op_on_the_wire("ALLREDUCE"));
        assert_eq!(k.op_on_the_wire("_ALLGATHER_BASE"), Some("ALLGATHER"));
        assert_ne!(k.op_on_the_wire("BROADCAST"), k.op_on_the_wire("ALLGATHER"));
        assert_eq!(k.op_on_the_wire("COALESCED"), None);
    }

    #[test]
    fn xid_table_covers_the_catalogue_and_classes_weigh_in_order() {
        let k = Knowledge::builtin().unwrap();
        let listed = [
            8, 13, 31, 32, 38, 43, 44, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
            110, 119, 120, 121, 136, 137, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155,
            156, 157, 158, 171, 172,
        ];
        for code in listed {
            let x = k.xid(code).unwrap_or_else(|| panic!("xid {code} missing"));
            assert!(!x.action.is_empty() && k.xid_class(&x.class).is_some());
        }
        let w = |code| k.xid_class(&k.xid(code).unwrap().class).unwrap().weight;
        assert!(w(13) < w(63) && w(63) < w(48) && w(48) < w(79));
        assert!(k.xid(79).unwrap().hardware && !k.xid(13).unwrap().hardware);
        assert!(k.xid(149).unwrap().unit_word_decides);
        assert!(k.is_wedged_command("MANAGE_PAGES") && !k.is_wedged_command("ACCESS_REG"));
    }

    #[test]
    fn an_xid_with_an_unknown_class_is_rejected() {
        let text = KNOWLEDGE.replace("class = \"node\"", "class = \"nodes\"");
        assert!(Knowledge::parse("k.toml", &text).is_err());
    }

    #[test]
    fn an_nccl_cuda_failure_must_name_a_config_mismatch_variant() {
        let text = KNOWLEDGE.replace("variant = \"mem_pool\"", "variant = \"mem_pools\"");
        assert_ne!(text, KNOWLEDGE);
        assert!(Knowledge::parse("k.toml", &text).is_err());
        assert!(Knowledge::parse("k.toml", KNOWLEDGE).is_ok());
    }

    #[test]
    fn every_cause_text_uses_known_names_in_closed_parts() {
        let names = [
            "host",
            "device",
            "port",
            "peer_host",
            "rank",
            "ranks",
            "gpu",
            "op",
            "seq",
            "pg",
            "status",
            "reason",
            "detail",
            "who",
            "remedy",
            "pid",
        ];
        let all: BTreeMap<&str, String> = names.iter().map(|n| (*n, "X".to_string())).collect();
        let k = Knowledge::builtin().unwrap();
        let texts = CauseKind::ALL.iter().flat_map(|kind| {
            let text = k.cause(*kind);
            std::iter::once((kind, text)).chain(text.variants.values().map(move |v| (kind, v)))
        });
        for (kind, text) in texts {
            for template in [&text.summary, &text.remedy] {
                let filled = crate::grammar::template::fill_template(template, &all);
                assert!(
                    !filled.contains('{') && !filled.contains('?'),
                    "{kind}: {filled}"
                );
            }
        }
    }
}
