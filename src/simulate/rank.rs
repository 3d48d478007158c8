//! One rank's output: what its Python prints, what its NCCL and c10 write,
//! from start-up through communicator init and training to its fate. The
//! output is split in two parts (before and after the failure) so a file
//! that mixes every rank can be written in bounded memory.

use super::clock::{MS, SEC, Us};
use super::nccl::Nccl;
use super::plan::{Layout, Plan};
use super::rng::Rng;
use super::sched::{self, HostRun};
use super::story::{Fate, Story};
use super::stream::Stream;
use super::topo::{Comm, CommKind, Topo};
use super::torch::{Torch, Work};

/// Which part of the rank's life to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    All,
    /// Start-up, init and training.
    Before,
    /// The fate and what follows it.
    After,
}

impl Part {
    fn before(self) -> bool {
        self != Part::After
    }
    fn after(self) -> bool {
        self != Part::Before
    }
}

/// A rank's streams and what its launcher learns from it.
#[derive(Debug)]
pub struct RankOut {
    pub stdout: Stream,
    pub stderr: Stream,
    /// `NCCL_DEBUG_FILE` (else NCCL writes to stdout).
    pub nccl: Option<Stream>,
    /// The Python traceback of an exception, for the agent's summary.
    pub traceback: Option<String>,
    /// The `@record` error file's content.
    pub error_json: Option<String>,
}

impl RankOut {
    fn nccl(&mut self) -> &mut Stream {
        match &mut self.nccl {
            Some(s) => s,
            None => &mut self.stdout,
        }
    }
}

struct Ctx<'a> {
    plan: &'a Plan,
    story: &'a Story,
    topo: &'a Topo<'a>,
    run: &'a HostRun,
    rank: u32,
    local: u32,
    nc: Nccl<'a>,
    tc: Torch<'a>,
    rng: Rng,
    comms: Vec<Comm>,
}

/// Renders `part` of `rank`'s output.
pub fn render(
    plan: &Plan,
    story: &Story,
    topo: &Topo<'_>,
    run: &HostRun,
    rank: u32,
    part: Part,
) -> RankOut {
    let local = plan.rank(rank).local;
    let cut = run.ranks[local as usize].cut;
    let mut out = RankOut {
        stdout: Stream::new(cut),
        stderr: Stream::new(cut),
        nccl: (plan.layout == Layout::NcclFiles).then(|| Stream::new(cut)),
        traceback: None,
        error_json: None,
    };
    let mut c = Ctx {
        plan,
        story,
        topo,
        run,
        rank,
        local,
        nc: Nccl::new(plan, story, rank),
        tc: Torch::new(plan, rank),
        rng: Rng::derive(plan.seed, "rank", &[u64::from(rank)]),
        comms: topo.comms(rank),
    };
    if part.before() {
        before(&mut c, &mut out);
    }
    if part.after() {
        after(&mut c, &mut out);
        siblings(&c, &mut out);
    }
    out
}

fn init_fails(fate: &Fate) -> bool {
    matches!(
        fate,
        Fate::InitError { .. } | Fate::InitBlocked | Fate::RootFailed { .. }
    )
}

fn before(c: &mut Ctx<'_>, out: &mut RankOut) {
    let p = c.plan;
    let t0 = p.times.start + c.rng.range(1_000, 9_000) * MS;
    let style = p.seed % 3;
    let (r, n, l, pid) = (c.rank, p.world, c.local, p.rank(c.rank).pid);
    let host = &p.host_of(c.rank).name;
    let hello = match style {
        0 => format!("rank {r}/{n} on {host}: local_rank {l} -> cuda:{l} (pid {pid})"),
        1 => format!("[rank {r}] host={host} local_rank={l} world_size={n} device=cuda:{l}"),
        _ => format!("| distributed init (rank {r}): env://, gpu {l}"),
    };
    out.stdout.text(t0, &hello);
    let t_init = p.times.init + c.rng.range(0, 400) * MS;
    c.tc.deprecated_env(&mut out.stderr, t_init - 900 * MS);
    let mut t = c.nc.preamble(out.nccl(), t_init - 600 * MS);
    t = c.nc.net_setup(out.nccl(), t.max(t_init));
    let fails = init_fails(c.story.fate(c.rank));
    let comms = std::mem::take(&mut c.comms);
    let mut printed_version = false;
    for (i, comm) in comms.iter().enumerate() {
        let start = t_init + i as i64 * c.rng.range(1_500, 3_000) * MS;
        let is_zero = comm.rank == 0;
        version(c, out, start, comm.rank, !printed_version);
        printed_version |= is_zero;
        t =
            c.nc.comm_init(out.nccl(), start.max(t) + 10 * MS, comm, c.topo, fails);
        if fails {
            break;
        }
        if comm.kind == CommKind::World && p.seed.is_multiple_of(2) {
            c.tc.barrier_warning(&mut out.stderr, t + 200 * MS);
        }
    }
    c.comms = comms;
    if !fails {
        python_warning(c, out);
        training(c, out);
    }
}

/// A harmless Python warning some jobs print on every rank (its words,
/// "freeze" and "slowness", are traps for naive keyword matching).
fn python_warning(c: &mut Ctx<'_>, out: &mut RankOut) {
    let site = c.plan.site_packages();
    let t = c.plan.times.train - c.rng.range(2_000, 9_000) * MS;
    match c.plan.seed % 4 {
        1 => {
            out.stderr.text(t, &format!("{site}/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary."));
            out.stderr.text(t, "  warnings.warn(_create_warning_msg(");
        }
        2 => {
            out.stderr.text(t, &format!("{site}/torch/nn/modules/transformer.py:282: UserWarning: enable_nested_tensor is True, but self.use_nested_tensor is False because encoder_layer.self_attn.batch_first was not True(use batch_first for better inference performance)"));
            out.stderr.text(t, "  warnings.warn(f\"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not_sparsity_fast_path}\")");
        }
        _ => {}
    }
}

fn version(c: &mut Ctx<'_>, out: &mut RankOut, t: Us, comm_rank: u32, first: bool) {
    let RankOut { stdout, nccl, .. } = out;
    match nccl {
        Some(n) => c.nc.version(stdout, n, t, comm_rank, first),
        None => {
            let mut tmp = Stream::new(None);
            c.nc.version(stdout, &mut tmp, t, comm_rank, first);
            for i in 0..tmp.len() {
                let (t, line) = tmp.get(i);
                stdout.line(t, |b| b.extend_from_slice(&line[..line.len() - 1]));
            }
        }
    }
}

/// Rank 0 prints progress; steps slow down before a congestion hang.
fn training(c: &mut Ctx<'_>, out: &mut RankOut) {
    if c.rank != 0 {
        return;
    }
    let p = c.plan;
    let (start, end) = (p.times.train, c.story.hang_at);
    if end <= start {
        return;
    }
    let steps = c.story.hung.step.max(1);
    let max_lines: u64 = if p.profile == super::plan::Profile::Full {
        400
    } else {
        60
    };
    let every = (steps / max_lines).max(1).next_multiple_of(10);
    let total = steps + c.rng.range(100, 5_000) as u64;
    let mut loss = 9.5 + c.rng.range(0, 100) as f64 / 100.0;
    let mut step = every;
    while step < steps {
        let frac = step as f64 / steps as f64;
        let t = start + ((end - start) as f64 * frac) as Us;
        let mut secs = p.times.step as f64 / SEC as f64;
        if c.story.slow_from.is_some_and(|s| t > s) {
            secs *= 3.0 + c.rng.range(0, 400) as f64 / 100.0;
        }
        loss = (loss * (0.995 + c.rng.range(0, 40) as f64 / 10_000.0)).max(1.2);
        let tput = (1_000_000.0 / secs) as u64 * u64::from(p.world) / 8 + c.rng.below(5_000);
        out.stdout.text(
            t,
            &format!(
                "step {step}/{total} | loss {loss:.4} | lr {:.2e} | {tput} tok/s | {secs:.2} s/it",
                3e-4 * (1.0 - frac * 0.5)
            ),
        );
        step += every;
    }
}

fn work(c: &mut Ctx<'_>, op: &'static str, numel_in: u64, numel_out: u64, enqueued: u64) -> Work {
    let h = &c.story.hung;
    let extra = c.rng.below(h.per_step);
    Work {
        seq: h.seq,
        op,
        numel_in,
        numel_out,
        enqueued: enqueued + extra,
        completed: h.seq.saturating_sub(1),
        timeout_ms: c.plan.times.timeout / MS,
    }
}

fn default_work(c: &mut Ctx<'_>) -> Work {
    let h = c.story.hung.clone();
    work(c, h.op, h.numel_in, h.numel_out, h.seq)
}

/// torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING: the watchdog aborts the
/// communicators before taking the process down.
fn aborts(c: &Ctx<'_>) -> bool {
    c.plan.layout.has_agent() || c.plan.legacy_async_env
}

fn abort_comms(c: &mut Ctx<'_>, out: &mut RankOut, t: Us) {
    if !aborts(c) {
        return;
    }
    let comms = std::mem::take(&mut c.comms);
    if let Some(w) = comms.first() {
        c.nc.teardown(out.nccl(), t, w, "Abort");
    }
    c.comms = comms;
}

/// The host's NIC async events, as every process on it prints them; a rank
/// whose own fate holds them (the culprit's) writes them with its fate.
fn host_async_events(c: &mut Ctx<'_>, out: &mut RankOut, fate: &Fate) {
    let own = matches!(fate, Fate::NcclError { warns, .. }
        if warns.iter().any(|(_, w)| matches!(w, super::story::Warn::IbAsync { .. })));
    let host = c.plan.rank(c.rank).host;
    let Some(hs) = c.story.hosts.get(&host).filter(|_| !own) else {
        return;
    };
    for (t, w) in &hs.ib_async {
        c.nc.write_warn(out.nccl(), *t, w);
    }
}

fn after(c: &mut Ctx<'_>, out: &mut RankOut) {
    let fate = c.story.fate(c.rank).clone();
    let delay = sched::abort_delay(c.plan, c.rank);
    host_async_events(c, out, &fate);
    match fate {
        Fate::Finish => finish(c, out),
        Fate::Cancelled | Fate::Silent { .. } | Fate::Signal { .. } | Fate::InitBlocked => {}
        Fate::RootFailed { warns } => {
            for (t, w) in &warns {
                c.nc.write_warn(out.nccl(), *t, w);
            }
        }
        Fate::Timeout {
            op,
            numel_in,
            numel_out,
            enqueued,
        } => {
            let t = sched::watchdog_fires(c.plan, c.story, c.rank);
            let w = work(c, op, numel_in, numel_out, enqueued);
            let ran = (t - c.story.hang_at) / MS;
            c.tc.timeout(&mut out.stderr, t, &w, ran);
            abort_comms(c, out, t + 60 * MS);
        }
        Fate::NcclError { warns, result } => {
            let mut last = String::new();
            let mut t_last = 0;
            for (t, w) in &warns {
                last = c.nc.write_warn(out.nccl(), *t, w);
                t_last = *t;
            }
            let w = default_work(c);
            let v = c.nc.v;
            c.tc.nccl_error(&mut out.stderr, t_last + delay, &w, v, result, &last);
            abort_comms(c, out, t_last + delay + 30 * MS);
        }
        Fate::CudaError { at, msg } => {
            if c.rng.chance(0.5) {
                let w = super::story::Warn::Cuda { msg: msg.clone() };
                c.nc.write_warn(out.nccl(), at - 20 * MS, &w);
            }
            let w = default_work(c);
            c.tc.cuda_error(&mut out.stderr, at, &w, &msg);
        }
        Fate::Exception { at, exc } => {
            let tb = c.tc.exception(&mut out.stderr, at, &exc);
            record(c, out, tb, at);
        }
        Fate::InitError { warns, result } => {
            let mut last = String::new();
            let mut t_last = 0;
            for (t, w) in &warns {
                last = c.nc.write_warn(out.nccl(), *t, w);
                t_last = *t;
            }
            let v = c.nc.v;
            let tb =
                c.tc.init_error(&mut out.stderr, t_last + delay / 2, v, result, &last);
            record(c, out, tb, t_last);
        }
        Fate::Mismatch {
            at,
            mine,
            other_rank,
            other,
        } => {
            let seq = c.story.hung.seq;
            let tb =
                c.tc.mismatch(&mut out.stderr, at, seq, mine, other_rank, other);
            record(c, out, tb, at);
        }
    }
}

/// Keeps the traceback for the agent and, with `@record`, the error file.
fn record(c: &mut Ctx<'_>, out: &mut RankOut, tb: String, at: Us) {
    let recorded = c.plan.layout.has_agent() && !c.plan.seed.is_multiple_of(5);
    if recorded {
        let message = tb.lines().last().unwrap_or("").to_string();
        out.error_json = Some(super::launcher::error_json(&message, &tb, at));
        out.traceback = Some(tb);
    }
}

/// A healthy end: the last words, then the communicators go away.
fn finish(c: &mut Ctx<'_>, out: &mut RankOut) {
    let t = sched::finish_time(c.plan, c.story, c.rank) - 2 * SEC;
    if c.rank == 0 {
        let steps = c.story.hung.step;
        let secs = (c.story.hang_at - c.plan.times.train) / SEC;
        out.stdout.text(
            t - 10 * SEC,
            &format!(
                "eval after step {steps} | val_loss {:.4}",
                1.5 + c.rng.range(0, 50) as f64 / 100.0
            ),
        );
        out.stdout.text(t, &format!("training complete: {steps} steps in {secs} s, checkpoint saved to /ckpt/{}/final.pt", c.plan.job_id));
    }
    let what = if c.plan.versions.torch.ge(2, 6, 0) {
        Some("Destroy")
    } else if c.plan.versions.torch.ge(2, 4, 0) {
        Some("Abort")
    } else {
        None
    };
    let comms = std::mem::take(&mut c.comms);
    if let Some(what) = what {
        for (i, comm) in comms.iter().enumerate().rev() {
            c.nc.teardown(out.nccl(), t + SEC + i as i64 * 3 * MS, comm, what);
        }
    }
    c.comms = comms;
    out.stdout
        .text(t + 2 * SEC, &format!("[rank {}] done", c.rank));
}

/// `[Service thread] Connection closed by localRank L` when a sibling on
/// the same host goes away first.
fn siblings(c: &Ctx<'_>, out: &mut RankOut) {
    let me = c.run.ranks[c.local as usize];
    for (l, rr) in c.run.ranks.iter().enumerate() {
        let Some((t, _)) = rr.end else { continue };
        if l as u32 == c.local
            || me.end.is_some_and(|(mine, _)| mine <= t)
            || init_fails(c.story.fate(c.rank))
        {
            continue;
        }
        let mut r = Rng::derive(c.plan.seed, "closed", &[u64::from(c.rank), l as u64]);
        let at = t + r.range(5, 200) * MS;
        c.nc.closed_by_local(out.nccl(), at, l as u32);
    }
}
