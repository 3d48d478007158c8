//! Where the files go, as a real job leaves them: torchrun `--log-dir`
//! folders, one Slurm output for all ranks, or tee'd consoles beside
//! `NCCL_DEBUG_FILE`s; and per-host folders with the kernel log, counter
//! dumps before/after and port snapshots. Hosts are written in parallel,
//! each file through its own buffered writer; a file that mixes every rank
//! is written in batches so memory stays bounded.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::SimError;
use super::counters::{self, Style};
use super::kernel;
use super::launcher::{self, Agent, Failure};
use super::plan::{Fabric, Layout, Plan};
use super::rank::{self, Part, RankOut};
use super::rng::Rng;
use super::sched::{self, HostRun};
use super::snapshots;
use super::story::{End, Fate, Story};
use super::stream::{self, Stream};
use super::topo::Topo;

/// What was written.
#[derive(Debug, Default, Clone, Copy)]
pub struct Written {
    pub files: u64,
    pub bytes: u64,
}

impl Written {
    fn add(self, o: Written) -> Written {
        Written {
            files: self.files + o.files,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// A buffered file that counts what goes through it.
struct Out {
    path: PathBuf,
    w: BufWriter<File>,
    bytes: u64,
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.w.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SimError + '_ {
    move |source| SimError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn create(path: PathBuf) -> Result<Out, SimError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let f = File::create(&path).map_err(io_err(&path))?;
    Ok(Out {
        w: BufWriter::with_capacity(1 << 20, f),
        path,
        bytes: 0,
    })
}

/// Writes one file with `body`, returning its size.
fn write_file(
    path: PathBuf,
    body: impl FnOnce(&mut Out) -> io::Result<()>,
) -> Result<Written, SimError> {
    let mut out = create(path)?;
    body(&mut out)
        .and_then(|_| out.flush())
        .map_err(io_err(&out.path.clone()))?;
    Ok(Written {
        files: 1,
        bytes: out.bytes,
    })
}

/// Writes the whole job under `root`.
pub fn write_job(plan: &Plan, story: &Story, root: &Path) -> Result<Written, SimError> {
    let end = sched::job_end(plan, story);
    let runs: Vec<HostRun> = (0..plan.hosts.len())
        .map(|h| sched::host_run(plan, story, h, end))
        .collect();
    let topo = Topo::new(plan);
    let per_host: Vec<Result<Written, SimError>> = (0..plan.hosts.len())
        .into_par_iter()
        .map(|h| {
            let sys = write_sys(plan, story, h, root)?;
            let logs = match plan.layout {
                Layout::Slurm => Written::default(),
                _ => write_host_logs(plan, story, &topo, &runs[h], h, root)?,
            };
            Ok(sys.add(logs))
        })
        .collect();
    let mut total = Written::default();
    for w in per_host {
        total = total.add(w?);
    }
    if plan.layout == Layout::Slurm {
        total = total.add(write_slurm(plan, story, &topo, &runs, end, root)?);
    }
    Ok(total)
}

fn host_dir(plan: &Plan, root: &Path, h: usize) -> PathBuf {
    root.join(&plan.hosts[h].name)
}

fn render_host(
    plan: &Plan,
    story: &Story,
    topo: &Topo<'_>,
    run: &HostRun,
    h: usize,
) -> Vec<RankOut> {
    let host = &plan.hosts[h];
    (0..host.local_ranks)
        .map(|l| rank::render(plan, story, topo, run, host.first_rank + l, Part::All))
        .collect()
}

fn write_host_logs(
    plan: &Plan,
    story: &Story,
    topo: &Topo<'_>,
    run: &HostRun,
    h: usize,
    root: &Path,
) -> Result<Written, SimError> {
    let outs = render_host(plan, story, topo, run, h);
    let dir = host_dir(plan, root, h);
    let log_dir = launcher::log_dir_name(plan, h);
    let remote_root = format!("/shared/runs/{}/logs/{log_dir}", plan.job_id);
    let agent = agent_stream(plan, run, h, &outs, &remote_root);
    let mut total = Written::default();
    if plan.layout == Layout::Torchrun {
        for (l, o) in outs.iter().enumerate() {
            let wd = dir
                .join("logs")
                .join(&log_dir)
                .join("attempt_0")
                .join(l.to_string());
            total = total.add(write_file(wd.join("stdout.log"), |w| o.stdout.write_to(w))?);
            total = total.add(write_file(wd.join("stderr.log"), |w| o.stderr.write_to(w))?);
            if let Some(j) = &o.error_json {
                total = total.add(write_file(wd.join("error.json"), |w| {
                    w.write_all(j.as_bytes())
                })?);
            }
        }
        return Ok(total.add(write_file(dir.join("agent.log"), |w| agent.write_to(w))?));
    }
    let host = &plan.hosts[h];
    for (l, o) in outs.iter().enumerate() {
        let pid = plan.rank(host.first_rank + l as u32).pid;
        if let Some(n) = &o.nccl {
            total = total.add(write_file(
                dir.join(format!("nccl.{}.{pid}", host.name)),
                |w| n.write_to(w),
            )?);
        }
    }
    let prefixes: Vec<Vec<u8>> = (0..outs.len())
        .map(|l| format!("[default{l}]:").into_bytes())
        .collect();
    let mut streams: Vec<(&Stream, &[u8])> = vec![(&agent, b"")];
    for (o, p) in outs.iter().zip(&prefixes) {
        streams.push((&o.stdout, p));
        streams.push((&o.stderr, p));
    }
    Ok(total.add(write_file(dir.join("torchrun.log"), |w| {
        stream::merge(&streams, w)
    })?))
}

/// The torchrun agent's console for one host.
fn agent_stream(
    plan: &Plan,
    run: &HostRun,
    h: usize,
    outs: &[RankOut],
    remote_root: &str,
) -> Stream {
    let host = &plan.hosts[h];
    let agent = Agent::new(plan, host);
    let mut s = Stream::new(None);
    agent.banner(&mut s, plan.times.start);
    if let Some(notice) = run.notice {
        let mut failures: Vec<Failure> = run
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, rr)| !rr.terminated)
            .filter_map(|(l, rr)| {
                rr.end
                    .filter(|e| e.1.failed() && e.0 <= notice)
                    .map(|e| (l, e))
            })
            .map(|(l, (at, exit))| Failure {
                rank: host.first_rank + l as u32,
                local: l as u32,
                pid: plan.rank(host.first_rank + l as u32).pid,
                exit,
                at,
                traceback: outs[l].traceback.clone(),
                error_file: outs[l]
                    .error_json
                    .as_ref()
                    .map(|_| format!("{remote_root}/attempt_0/{l}/error.json")),
            })
            .collect();
        failures.sort_by_key(|f| (f.at / 1_000_000, f.local));
        if let Some(first) = failures.first().cloned() {
            let mut rest: Vec<Failure> = failures.into_iter().skip(1).collect();
            rest.sort_by_key(|f| f.local);
            let mut all = vec![first];
            all.extend(rest);
            agent.on_failure(&mut s, run, &all);
        }
    } else if let Some(t) = run.death_signal {
        let alive: Vec<u32> = run
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, rr)| rr.terminated)
            .map(|(l, _)| plan.rank(host.first_rank + l as u32).pid)
            .collect();
        if !alive.is_empty() {
            agent.on_death_signal(&mut s, t, &alive);
        }
    }
    s
}

/// Ranks per batch of the Slurm output's first part.
const BATCH: u32 = 64;

fn write_slurm(
    plan: &Plan,
    story: &Story,
    topo: &Topo<'_>,
    runs: &[HostRun],
    end: Option<i64>,
    root: &Path,
) -> Result<Written, SimError> {
    let path = root.join(format!("slurm-{}.out", plan.job_id));
    let mut out = create(path.clone())?;
    let labels: Vec<Vec<u8>> = (0..plan.world)
        .map(|r| launcher::slurm_label(r, plan.world).into_bytes())
        .collect();
    let mut header = Stream::new(None);
    launcher::slurm_header(plan, &mut header);
    header.write_to(&mut out).map_err(io_err(&path))?;
    let render = |r: u32, part: Part| {
        let h = plan.rank(r).host;
        rank::render(plan, story, topo, &runs[h], r, part)
    };
    let mut first = 0;
    while first < plan.world {
        let ranks: Vec<u32> = (first..(first + BATCH).min(plan.world)).collect();
        let outs: Vec<RankOut> = ranks.par_iter().map(|&r| render(r, Part::Before)).collect();
        merge_labelled(&ranks, &outs, &labels, &[], &mut out).map_err(io_err(&path))?;
        first += BATCH;
    }
    let ranks: Vec<u32> = (0..plan.world).collect();
    let outs: Vec<RankOut> = ranks.par_iter().map(|&r| render(r, Part::After)).collect();
    let tail = slurm_tail(plan, story, runs, end);
    merge_labelled(&ranks, &outs, &labels, &tail, &mut out).map_err(io_err(&path))?;
    out.flush().map_err(io_err(&path))?;
    Ok(Written {
        files: 1,
        bytes: out.bytes,
    })
}

fn merge_labelled(
    ranks: &[u32],
    outs: &[RankOut],
    labels: &[Vec<u8>],
    tail: &[Stream],
    w: &mut impl Write,
) -> io::Result<()> {
    let mut streams: Vec<(&Stream, &[u8])> = Vec::with_capacity(outs.len() * 2 + tail.len());
    for (&r, o) in ranks.iter().zip(outs) {
        streams.push((&o.stdout, &labels[r as usize]));
        streams.push((&o.stderr, &labels[r as usize]));
    }
    streams.extend(tail.iter().map(|t| (t, &b""[..])));
    stream::merge(&streams, w)
}

/// srun's and slurmstepd's lines after the tasks end, one stream per
/// writer so the merge puts them in time order.
fn slurm_tail(plan: &Plan, story: &Story, runs: &[HostRun], end: Option<i64>) -> Vec<Stream> {
    let mut oom = Stream::new(None);
    for r in 0..plan.world {
        if let Fate::Signal { at, signal: 9 } = story.fate(r) {
            launcher::slurm_oom(plan, &mut oom, at + 1_500_000);
        }
    }
    let mut cancel = Stream::new(None);
    if let Some(t) = end {
        launcher::slurm_cancel(
            plan,
            &mut cancel,
            t,
            !matches!(story.end, End::Cancelled(_)),
        );
    }
    let mut errors = Vec::new();
    for h in 0..runs.len() {
        let mut s = Stream::new(None);
        launcher::srun_errors(plan, &runs[h..=h], h, &mut s);
        errors.push(s);
    }
    let mut footer = Stream::new(None);
    if end.is_none() {
        let last = runs
            .iter()
            .flat_map(|r| r.ranks.iter())
            .filter_map(|r| r.end)
            .max_by_key(|e| e.0);
        if let Some((t, _)) = last {
            let failed = runs
                .iter()
                .flat_map(|r| r.ranks.iter())
                .any(|r| r.end.is_some_and(|e| e.1.failed()));
            launcher::slurm_footer(plan, &mut footer, t + 3_000_000, i32::from(failed));
        }
    }
    let mut all = vec![oom, cancel];
    all.extend(errors);
    all.push(footer);
    all
}

/// Kernel log, counters before/after and port snapshots of one host.
fn write_sys(plan: &Plan, story: &Story, h: usize, root: &Path) -> Result<Written, SimError> {
    let host = &plan.hosts[h];
    let hs = story.host(h);
    let dir = host_dir(plan, root, h);
    let mut total = Written::default();
    if plan.sources.kernel {
        let name = kernel::file_name(plan.kernel_style);
        total = total.add(write_file(dir.join(name), |w| {
            kernel::write_log(plan, host, hs, w)
        })?);
    }
    if plan.sources.counters {
        for (phase, after) in [("before", false), ("after", true)] {
            let d = dir.join("counters").join(phase);
            total = total.add(write_counters(plan, h, hs, after, &d)?);
        }
    }
    if plan.sources.snapshots {
        total = total.add(write_snapshots(plan, story, h, &dir)?);
    }
    if packages_listed(plan) {
        total = total.add(write_file(dir.join("pip-list.txt"), |w| {
            write_packages(plan, w)
        })?);
    }
    Ok(total)
}

/// Whether the collection listed each host's Python packages: often, and
/// always where a release split is the story (its reference is the NCCL
/// the job's PyTorch wheel pins). Drawn apart from the plan's own draws.
fn packages_listed(plan: &Plan) -> bool {
    plan.scenario.is(crate::model::CauseKind::ConfigMismatch)
        || Rng::derive(plan.seed, "packages", &[]).chance(0.3)
}

/// `pip list | grep -E '^(torch|nvidia-nccl)'`: the job's PyTorch and the
/// NCCL wheel it pins, alike on every host (a host that runs another NCCL
/// loaded another libnccl, its wheel unchanged).
fn write_packages(plan: &Plan, w: &mut Out) -> io::Result<()> {
    let v = &plan.versions;
    let cuda = if v.torch < super::Ver(2, 1, 0) {
        "cu11"
    } else {
        "cu12"
    };
    writeln!(w, "$ pip list 2>/dev/null | grep -E '^(torch|nvidia-nccl)'")?;
    writeln!(w, "{:<34}{}", format!("nvidia-nccl-{cuda}"), v.nccl)?;
    writeln!(w, "{:<34}{}", "torch", v.torch)
}

fn write_counters(
    plan: &Plan,
    h: usize,
    hs: Option<&super::story::HostStory>,
    after: bool,
    d: &Path,
) -> Result<Written, SimError> {
    let host = &plan.hosts[h];
    let mut total = Written::default();
    match (counters::style(plan), plan.fabric) {
        (Style::Sysfs, _) => {
            total = total.add(write_file(d.join("sysfs-counters.txt"), |w| {
                counters::write_sysfs(plan, host, hs, after, w)
            })?);
        }
        (Style::Tools, Fabric::Ib) => {
            total = total.add(write_file(d.join("perfquery.txt"), |w| {
                counters::write_perfquery(plan, host, hs, after, w)
            })?);
            total = total.add(write_file(d.join("rdma-statistic.txt"), |w| {
                counters::write_rdma_statistic(plan, host, hs, after, w)
            })?);
        }
        (Style::Tools, Fabric::Roce) => {
            total = total.add(write_file(d.join("rdma-statistic.txt"), |w| {
                counters::write_rdma_statistic(plan, host, hs, after, w)
            })?);
        }
    }
    if plan.fabric == Fabric::Roce {
        for (k, nic) in host.nics.iter().enumerate() {
            let p = d.join(format!("ethtool-S-{}.txt", nic.netdev));
            total = total.add(write_file(p, |w| {
                counters::write_ethtool(plan, host, k as u32, hs, after, w)
            })?);
        }
    }
    Ok(total)
}

fn write_snapshots(plan: &Plan, story: &Story, h: usize, dir: &Path) -> Result<Written, SimError> {
    let host = &plan.hosts[h];
    let hs = story.host(h);
    let mut r = Rng::derive(plan.seed, "snapshots", &[]);
    let scen = plan.scenario;
    let devinfo = r.chance(0.7) || scen.is(crate::model::CauseKind::MtuMismatch);
    let ibstatus = r.chance(0.4);
    let gids = plan.fabric == Fabric::Roce
        && (r.chance(0.8) || scen.is(crate::model::CauseKind::GidIndex));
    // Drawn last so that the draws above keep their seeds' outcomes.
    let lldp = plan.fabric == Fabric::Roce
        && (r.chance(0.5) || scen.is(crate::model::CauseKind::CrossRail));
    let mut total = write_file(dir.join("ibstat.txt"), |w| {
        snapshots::write_ibstat(plan, host, hs, w)
    })?;
    if devinfo {
        total = total.add(write_file(dir.join("ibv_devinfo.txt"), |w| {
            snapshots::write_ibv_devinfo(plan, host, hs, w)
        })?);
    }
    if ibstatus {
        total = total.add(write_file(dir.join("ibstatus.txt"), |w| {
            snapshots::write_ibstatus(plan, host, hs, w)
        })?);
    }
    if gids {
        total = total.add(write_file(dir.join("show_gids.txt"), |w| {
            snapshots::write_show_gids(plan, host, hs, w)
        })?);
    }
    if lldp {
        total = total.add(write_file(dir.join("lldpctl.txt"), |w| {
            super::lldp::write_lldp(plan, host, hs, w)
        })?);
    }
    Ok(total)
}
