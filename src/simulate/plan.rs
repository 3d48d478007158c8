//! The job plan: options, hosts, ranks, NICs, clocks and the job's
//! timeline, all drawn from the seed before a line is written.

use crate::model::CauseKind;

use super::clock::{self, DAY, HOUR, MIN, MS, SEC, Us};
use super::rng::Rng;
use super::versions::{PAIRS, Ver, Versions};

/// What the simulated job goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Trained to the end and exited cleanly.
    Healthy,
    /// Cancelled by its user while healthy.
    Cancelled,
    /// Failed with this cause.
    Fault(CauseKind),
}

impl Scenario {
    /// Every scenario the simulator can write: all cause kinds except
    /// `unknown` and `nccl_bug`, plus the two healthy endings.
    pub fn all() -> Vec<Scenario> {
        let mut out = vec![Scenario::Healthy, Scenario::Cancelled];
        out.extend(
            CauseKind::ALL
                .iter()
                .copied()
                .filter(|k| !matches!(k, CauseKind::Unknown | CauseKind::NcclBug))
                .map(Scenario::Fault),
        );
        out
    }

    pub fn parse(name: &str) -> Option<Scenario> {
        match name {
            "healthy" | "completed" => Some(Scenario::Healthy),
            "cancelled" | "canceled" => Some(Scenario::Cancelled),
            _ => CauseKind::from_name(name)
                .map(Scenario::Fault)
                .filter(|s| Scenario::all().contains(s)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::Cancelled => "cancelled",
            Scenario::Fault(k) => k.name(),
        }
    }

    pub fn is(self, kind: CauseKind) -> bool {
        self == Scenario::Fault(kind)
    }
}

/// How the job's output was collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// torchrun `--log-dir`: one folder per worker, agent console per host.
    Torchrun,
    /// One Slurm output file, `srun --label`, one task per GPU.
    Slurm,
    /// torchrun `--tee 3` console per host plus `NCCL_DEBUG_FILE=nccl.%h.%p`.
    NcclFiles,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::Torchrun, Layout::Slurm, Layout::NcclFiles];

    pub fn parse(name: &str) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Torchrun => "torchrun",
            Layout::Slurm => "slurm",
            Layout::NcclFiles => "nccl-files",
        }
    }

    /// The workers run under a torchrun agent (not straight under srun).
    pub fn has_agent(self) -> bool {
        self != Layout::Slurm
    }
}

/// How much NCCL INFO output each rank writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Two channels and three communicators: fast, for tests.
    Small,
    /// Many channels and communicators, as a real large job prints.
    Full,
}

impl Profile {
    pub fn parse(name: &str) -> Option<Profile> {
        match name {
            "small" => Some(Profile::Small),
            "full" => Some(Profile::Full),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    Ib,
    Roce,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub scenario: Scenario,
    pub ranks: u32,
    pub seed: u64,
    pub layout: Option<Layout>,
    pub nccl_version: Option<Ver>,
    pub torch_version: Option<Ver>,
    pub profile: Profile,
}

/// GPUs (and rail NICs) per host of jobs above 8 ranks; smaller jobs run
/// on two hosts with half each, so that every cause has a network to fail.
pub const GPUS_PER_HOST: u32 = 8;

/// GPUs per host for a job of `world` ranks.
pub fn gpus_per_host(world: u32) -> u32 {
    if world > GPUS_PER_HOST {
        GPUS_PER_HOST
    } else {
        (world / 2).max(1)
    }
}

/// The command line's words for a simulation, before validation.
#[derive(Debug, Clone, Default)]
pub struct SimNames<'a> {
    pub cause: &'a str,
    pub ranks: u32,
    pub seed: u64,
    pub layout: Option<&'a str>,
    pub nccl_version: Option<&'a str>,
    pub torch_version: Option<&'a str>,
    pub profile: &'a str,
}

impl SimOptions {
    /// Validated options from the command line's words.
    pub fn from_names(n: &SimNames<'_>) -> Result<SimOptions, String> {
        let scenario = Scenario::parse(n.cause).ok_or_else(|| {
            let names: Vec<&str> = Scenario::all().iter().map(|s| s.name()).collect();
            format!("--cause {}: one of {}", n.cause, names.join(", "))
        })?;
        let layout = n
            .layout
            .map(|l| {
                Layout::parse(l)
                    .ok_or_else(|| format!("--layout {l}: one of torchrun, slurm, nccl-files"))
            })
            .transpose()?;
        let version = |flag: &str, v: Option<&str>| {
            v.map(|v| {
                Ver::parse(v).ok_or_else(|| format!("{flag} {v}: expected MAJOR.MINOR.PATCH"))
            })
            .transpose()
        };
        let opts = SimOptions {
            scenario,
            ranks: n.ranks,
            seed: n.seed,
            layout,
            nccl_version: version("--nccl-version", n.nccl_version)?,
            torch_version: version("--torch-version", n.torch_version)?,
            profile: Profile::parse(n.profile)
                .ok_or_else(|| format!("--profile {}: small or full", n.profile))?,
        };
        opts.check()?;
        Ok(opts)
    }

    /// Whole hosts only: above 8 ranks a multiple of 8, else an even count.
    pub fn check(&self) -> Result<(), String> {
        let n = self.ranks;
        if n < 2 {
            return Err("--ranks must be at least 2".into());
        }
        if n > GPUS_PER_HOST && !n.is_multiple_of(GPUS_PER_HOST) {
            return Err(format!(
                "--ranks {n}: above 8 ranks use a multiple of 8 (whole hosts)"
            ));
        }
        if n <= GPUS_PER_HOST && !n.is_multiple_of(2) {
            return Err(format!(
                "--ranks {n}: up to 8 ranks use an even count (two hosts)"
            ));
        }
        Ok(())
    }
}

/// Where the GPUs and NICs of an 8-GPU host sit on PCIe.
pub const GPU_BDF: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];
pub const NIC_BDF: [&str; 8] = [
    "0000:1a:00.0",
    "0000:2c:00.0",
    "0000:3c:00.0",
    "0000:5f:00.0",
    "0000:9c:00.0",
    "0000:ad:00.0",
    "0000:bc:00.0",
    "0000:dd:00.0",
];

/// NCCL's `busId`: the PCI address as hex without separators or leading zeros.
pub fn nccl_bus_id(bdf: &str) -> String {
    let digits: String = bdf.chars().filter(char::is_ascii_hexdigit).collect();
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".into()
    } else {
        trimmed.to_string()
    }
}

#[derive(Debug, Clone)]
pub struct Nic {
    /// `mlx5_3`
    pub name: String,
    pub bdf: &'static str,
    /// The port's netdev (`ibp60s0` on IB, `enp60s0np0` on RoCE).
    pub netdev: String,
    /// The rail address of a RoCE port.
    pub ip: String,
    pub guid: u64,
    pub lid: u32,
}

#[derive(Debug, Clone)]
pub struct Host {
    pub index: usize,
    pub name: String,
    pub fqdn: String,
    /// The socket / OOB interface NCCL is told to use, and its address.
    pub iface: String,
    pub ip: String,
    /// This host's clock minus the true clock.
    pub skew: Us,
    /// When it booted, on the true clock (kernel uptime counts from here).
    pub boot: Us,
    pub agent_pid: u32,
    pub nics: Vec<Nic>,
    pub first_rank: u32,
    pub local_ranks: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct RankInfo {
    pub rank: u32,
    pub host: usize,
    pub local: u32,
    pub pid: u32,
}

/// The collective the job hangs in (or would have run next).
#[derive(Debug, Clone)]
pub struct Hung {
    pub pg: String,
    pub seq: u64,
    pub op: &'static str,
    pub numel_in: u64,
    pub numel_out: u64,
    pub step: u64,
    /// Collectives per training step on the default group.
    pub per_step: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct Times {
    pub start: Us,
    /// The default communicator's init.
    pub init: Us,
    pub train: Us,
    pub step: Us,
    /// When the hung collective was enqueued (the fault sits around here).
    pub hang: Us,
    pub timeout: Us,
}

/// Optional sources a job may lack.
#[derive(Debug, Clone, Copy)]
pub struct Sources {
    pub kernel: bool,
    pub counters: bool,
    pub snapshots: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelStyle {
    Raw,
    Ctime,
    Iso,
    Journal,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub scenario: Scenario,
    pub layout: Layout,
    pub profile: Profile,
    pub fabric: Fabric,
    pub versions: Versions,
    pub world: u32,
    pub gpus_per_host: u32,
    pub hosts: Vec<Host>,
    pub ranks: Vec<RankInfo>,
    pub times: Times,
    pub hung: Hung,
    pub job_id: u32,
    pub run_id: String,
    pub script: String,
    pub workdir: String,
    /// NCCL_DEBUG=INFO (else WARN).
    pub nccl_info: bool,
    /// NCCL_ASYNC_ERROR_HANDLING (the pre-2.2 name) is set in the environment.
    pub legacy_async_env: bool,
    pub kernel_style: KernelStyle,
    pub sources: Sources,
    /// The benign ACCESS_REG(0x805) flood on some hosts' kernel logs.
    pub access_reg_flood: bool,
}

impl Plan {
    pub fn build(opts: &SimOptions) -> Plan {
        let mut rng = Rng::derive(opts.seed, "plan", &[]);
        let scenario = opts.scenario;
        let versions = Versions::choose(
            rng.index(PAIRS.len()),
            opts.nccl_version,
            opts.torch_version,
        );
        let layout = opts.layout.unwrap_or(*rng.pick(&Layout::ALL));
        let fabric = choose_fabric(scenario, &mut rng);
        let world = opts.ranks.max(2);
        let gph = gpus_per_host(world);
        let times = make_times(&versions, &mut rng);
        let hosts = make_hosts(opts.seed, world, gph, fabric, times.start, &mut rng);
        let ranks = make_ranks(&hosts);
        let hung = make_hung(world, &times, &mut rng);
        let job_id = rng.range(100_000, 9_999_999) as u32;
        Plan {
            seed: opts.seed,
            scenario,
            layout,
            profile: opts.profile,
            fabric,
            world,
            gpus_per_host: gph,
            run_id: if rng.chance(0.5) {
                "none".into()
            } else {
                format!("j{job_id}")
            },
            script: rng
                .pick(&["train.py", "pretrain_gpt.py", "finetune.py"])
                .to_string(),
            workdir: rng
                .pick(&["/workspace/llm-train", "/home/mlops/run", "/opt/app"])
                .to_string(),
            nccl_info: opts.profile == Profile::Full || !rng.chance(0.08),
            legacy_async_env: rng.chance(0.6),
            kernel_style: *rng.pick(&[
                KernelStyle::Raw,
                KernelStyle::Ctime,
                KernelStyle::Iso,
                KernelStyle::Journal,
            ]),
            sources: Sources {
                kernel: !rng.chance(0.15),
                counters: !rng.chance(0.2),
                snapshots: !rng.chance(0.2),
            },
            access_reg_flood: rng.chance(0.25),
            versions,
            hosts,
            ranks,
            times,
            hung,
            job_id,
        }
    }

    pub fn host_of(&self, rank: u32) -> &Host {
        &self.hosts[self.ranks[rank as usize].host]
    }

    pub fn rank(&self, rank: u32) -> &RankInfo {
        &self.ranks[rank as usize]
    }

    pub fn gpu_bdf(&self, rank: u32) -> &'static str {
        GPU_BDF[self.ranks[rank as usize].local as usize % GPU_BDF.len()]
    }

    pub fn link_layer(&self) -> &'static str {
        match self.fabric {
            Fabric::Ib => "IB",
            Fabric::Roce => "RoCE",
        }
    }

    /// The Python of the job (for traceback paths).
    pub fn site_packages(&self) -> String {
        self.versions.site_packages()
    }
}

/// RoCE for the causes that only exist there; otherwise either.
fn choose_fabric(scenario: Scenario, rng: &mut Rng) -> Fabric {
    let roce_only = [
        CauseKind::GidIndex,
        CauseKind::CrossRail,
        CauseKind::Congestion,
    ];
    if roce_only.iter().any(|k| scenario.is(*k)) || rng.chance(0.4) {
        Fabric::Roce
    } else {
        Fabric::Ib
    }
}

fn make_hosts(
    seed: u64,
    world: u32,
    gph: u32,
    fabric: Fabric,
    start: Us,
    rng: &mut Rng,
) -> Vec<Host> {
    let count = world.div_ceil(gph) as usize;
    let width = count.to_string().len().max(3);
    let style = rng.index(4);
    let first = rng.range(1, 40) as usize;
    let domain = *rng.pick(&["cluster.local", "hpc.internal", "ec2.internal"]);
    let iface = match fabric {
        Fabric::Ib => *rng.pick(&["ib0", "bond0", "eth0"]),
        Fabric::Roce => *rng.pick(&["bond0", "eth0", "enp170s0f0"]),
    };
    let net = rng.range(1, 200);
    (0..count)
        .map(|i| {
            let mut hr = Rng::derive(seed, "host", &[i as u64]);
            let n = first + i;
            let name = match style {
                0 => format!("node{n:0width$}"),
                1 => format!("gpu-{n:0width$}"),
                2 => format!("dgx{n:0width$}"),
                _ => format!("h100-r{:02}-n{:0width$}", n / 32, n),
            };
            let first_rank = i as u32 * gph;
            let local_ranks = (world - first_rank).min(gph);
            Host {
                index: i,
                fqdn: format!("{name}.{domain}"),
                iface: iface.to_string(),
                ip: format!("10.{net}.{}.{}", i / 250, i % 250 + 1),
                skew: hr.range(-30 * SEC, 30 * SEC),
                boot: start - hr.range(2 * HOUR, 60 * DAY),
                agent_pid: hr.range(1_500, 3_900_000) as u32,
                nics: make_nics(i, gph, fabric, &mut hr),
                name,
                first_rank,
                local_ranks,
            }
        })
        .collect()
}

fn make_nics(host: usize, gph: u32, fabric: Fabric, rng: &mut Rng) -> Vec<Nic> {
    (0..gph as usize)
        .map(|k| {
            let bus = u32::from_str_radix(&NIC_BDF[k][5..7], 16).unwrap_or(0);
            Nic {
                name: format!("mlx5_{k}"),
                bdf: NIC_BDF[k],
                netdev: match fabric {
                    Fabric::Ib => format!("ibp{bus}s0"),
                    Fabric::Roce => format!("enp{bus}s0np0"),
                },
                ip: format!("10.{}.{}.{}", 201 + k, host / 250, host % 250 + 1),
                guid: 0x946d_ae03_0000_0000 | (rng.next_u64() & 0xffff_ffff),
                lid: (host * 8 + k + 2) as u32,
            }
        })
        .collect()
}

fn make_ranks(hosts: &[Host]) -> Vec<RankInfo> {
    hosts
        .iter()
        .flat_map(|h| {
            (0..h.local_ranks).map(move |l| RankInfo {
                rank: h.first_rank + l,
                host: h.index,
                local: l,
                pid: h.agent_pid + 20 + l + l / 4,
            })
        })
        .collect()
}

fn make_times(versions: &Versions, rng: &mut Rng) -> Times {
    let day = clock::days_from_civil(2024, 1, 1) + rng.range(0, 660);
    let start =
        day * DAY + rng.range(0, 23) * HOUR + rng.range(0, 59) * MIN + rng.range(0, 59) * SEC;
    let init = start + rng.range(12, 45) * SEC + rng.range(0, 999) * MS;
    let train = init + rng.range(15, 120) * SEC;
    let step = rng.range(250, 3_000) * MS;
    let steps = rng.range(40, 4_000);
    let default_timeout = if versions.torch.lt(2, 2, 0) {
        30 * MIN
    } else {
        10 * MIN
    };
    Times {
        start,
        init,
        train,
        step,
        hang: train + steps * step + rng.range(0, 999) * MS,
        timeout: *rng.pick(&[default_timeout, default_timeout, 30 * MIN, 60 * MIN]),
    }
}

fn make_hung(world: u32, times: &Times, rng: &mut Rng) -> Hung {
    let per_step = *rng.pick(&[1u64, 2, 4, 6]);
    let step = ((times.hang - times.train) / times.step.max(1)).max(1) as u64;
    let seq = step * per_step + rng.range(1, 3) as u64;
    let (op, numel_in, numel_out) = match rng.index(5) {
        0..=2 => {
            let n = rng.range(1 << 20, 1 << 30) as u64;
            ("ALLREDUCE", n, n)
        }
        3 => {
            let n = rng.range(1 << 16, 1 << 24) as u64;
            ("_ALLGATHER_BASE", n, n * u64::from(world))
        }
        _ => {
            let n = rng.range(1 << 16, 1 << 24) as u64;
            ("_REDUCE_SCATTER_BASE", n * u64::from(world), n)
        }
    };
    Hung {
        pg: "0".into(),
        seq,
        op,
        numel_in,
        numel_out,
        step,
        per_step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(ranks: u32) -> SimOptions {
        SimOptions {
            scenario: Scenario::Healthy,
            ranks,
            seed: 3,
            layout: None,
            nccl_version: None,
            torch_version: None,
            profile: Profile::Small,
        }
    }

    #[test]
    fn bus_ids_as_nccl_prints_them() {
        assert_eq!(nccl_bus_id("0000:18:00.0"), "18000");
        assert_eq!(nccl_bus_id("0001:00:00.0"), "100000");
    }

    #[test]
    fn hosts_hold_eight_ranks_and_small_jobs_two_hosts() {
        let p = Plan::build(&opts(24));
        assert_eq!(p.hosts.len(), 3);
        assert_eq!(p.hosts[2].local_ranks, 8);
        assert_eq!(p.host_of(23).index, 2);
        let p = Plan::build(&opts(8));
        assert_eq!(p.hosts.len(), 2);
        assert_eq!(p.gpus_per_host, 4);
        assert!(opts(12).check().is_err());
        assert!(opts(7).check().is_err());
    }

    #[test]
    fn every_scenario_has_a_name_that_parses_back() {
        for s in Scenario::all() {
            assert_eq!(Scenario::parse(s.name()), Some(s));
        }
        assert_eq!(Scenario::parse("unknown"), None);
        assert_eq!(Scenario::parse("nccl_bug"), None);
    }
}
