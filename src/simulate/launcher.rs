//! Launcher output, from docs/log-formats.md §3: the torchrun agent's log
//! lines in each release's format, its SIGTERMs and ChildFailedError block,
//! its own death signal; the Slurm batch header, `srun --label` labels,
//! `srun: error:` lines and `slurmstepd` cancellations.

use std::fmt::Write as _;

use super::clock::{self, MS, Us};
use super::plan::{Host, Plan};
use super::rng::Rng;
use super::sched::{Exit, HostRun};
use super::stream::Stream;
use super::versions::Ver;

/// A worker failure as the agent reports it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub rank: u32,
    pub local: u32,
    pub pid: u32,
    pub exit: Exit,
    pub at: Us,
    /// The Python traceback from the worker's error file (`@record`).
    pub traceback: Option<String>,
    pub error_file: Option<String>,
}

pub struct Agent<'a> {
    pub plan: &'a Plan,
    pub host: &'a Host,
    pub v: Ver,
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "SIGUSR1",
    }
}

impl<'a> Agent<'a> {
    pub fn new(plan: &'a Plan, host: &'a Host) -> Agent<'a> {
        Agent {
            plan,
            host,
            v: plan.versions.torch,
        }
    }

    /// One agent logger line in this release's format.
    fn log(
        &self,
        s: &mut Stream,
        t: Us,
        level: &str,
        logger: &str,
        path_line: (&str, u32),
        msg: &str,
    ) {
        let c = clock::civil(t + self.host.skew);
        let line = if self.v.lt(2, 1, 0) {
            format!("{level}:{logger}:{msg}")
        } else if self.v.lt(2, 3, 0) {
            format!("[{}] {logger}: [{level}] {msg}", c.asctime())
        } else {
            let who = if self.v.lt(2, 4, 0) {
                139_646_045_393_920u64 + u64::from(self.host.agent_pid)
            } else {
                u64::from(self.host.agent_pid)
            };
            let letter = &level[..1];
            format!(
                "{letter}{} {who} {}:{}] {msg}",
                c.torch_logging(),
                path_line.0,
                path_line.1
            )
        };
        s.text(t, &line);
    }

    fn api_log(&self, s: &mut Stream, t: Us, level: &str, line: u32, msg: &str) {
        self.log(
            s,
            t,
            level,
            "torch.distributed.elastic.multiprocessing.api",
            ("torch/distributed/elastic/multiprocessing/api.py", line),
            msg,
        );
    }

    /// The OMP_NUM_THREADS banner at start-up.
    pub fn banner(&self, s: &mut Stream, t: Us) {
        let lines = [
            "",
            "*****************************************",
            "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
            "*****************************************",
        ];
        if self.v.lt(2, 1, 0) {
            s.text(t, "WARNING:torch.distributed.run:");
            for l in &lines[1..] {
                s.text(t, l);
            }
            return;
        }
        let line = if self.v.ge(2, 5, 0) { 793 } else { 757 };
        for l in lines {
            self.log(
                s,
                t,
                "WARNING",
                "torch.distributed.run",
                ("torch/distributed/run.py", line),
                l,
            );
        }
    }

    /// The agent's lines after its first worker failure.
    pub fn on_failure(&self, s: &mut Stream, run: &HostRun, failures: &[Failure]) {
        let Some(notice) = run.notice else { return };
        let mut t = notice;
        for (l, rr) in run.ranks.iter().enumerate() {
            if rr.terminated {
                let pid = self.plan.rank(self.host.first_rank + l as u32).pid;
                self.api_log(
                    s,
                    t,
                    "WARNING",
                    897,
                    &format!("Sending process {pid} closing signal SIGTERM"),
                );
                t += 2 * MS;
            }
        }
        let Some(root) = failures.first() else { return };
        t += 400 * MS;
        let python = "/usr/bin/python3";
        self.api_log(
            s,
            t,
            "ERROR",
            869,
            &format!(
                "failed (exitcode: {}) local_rank: {} (pid: {}) of binary: {python}",
                root.exit.code(),
                root.local,
                root.pid
            ),
        );
        if let Some(file) = &root.error_file {
            let msg =
                format!("no error file defined for parent, to copy child error file ({file})");
            self.log(
                s,
                t + 15 * MS,
                "ERROR",
                "torch.distributed.elastic.multiprocessing.errors.error_handler",
                (
                    "torch/distributed/elastic/multiprocessing/errors/error_handler.py",
                    141,
                ),
                &msg,
            );
        }
        s.lines(t + 20 * MS, &self.child_failed(failures));
    }

    fn agent_traceback(&self, tail: &[(&str, u32, &str, &str)]) -> String {
        let site = self.plan.site_packages();
        let mut out = String::from(
            "Traceback (most recent call last):\n  File \"/usr/local/bin/torchrun\", line 8, in <module>\n    sys.exit(main())\n",
        );
        let frames = [
            (
                "torch/distributed/elastic/multiprocessing/errors/__init__.py",
                346,
                "wrapper",
                "return f(*args, **kwargs)",
            ),
            ("torch/distributed/run.py", 806, "main", "run(args)"),
            ("torch/distributed/run.py", 797, "run", "elastic_launch("),
            (
                "torch/distributed/launcher/api.py",
                134,
                "__call__",
                "return launch_agent(self._config, self._entrypoint, list(args))",
            ),
        ];
        for (f, l, func, code) in frames.iter().chain(tail) {
            let _ = write!(
                out,
                "  File \"{site}/{f}\", line {l}, in {func}\n    {code}\n"
            );
        }
        out
    }

    /// The ChildFailedError block: other failures, then the root cause.
    pub fn child_failed(&self, failures: &[Failure]) -> String {
        let mut out = self.agent_traceback(&[(
            "torch/distributed/launcher/api.py",
            264,
            "launch_agent",
            "raise ChildFailedError(",
        )]);
        let block = |idx: usize, f: &Failure| -> String {
            let c = clock::civil(f.at + self.host.skew);
            let tb = match (&f.traceback, f.exit) {
                (Some(tb), _) => {
                    let mut t = String::new();
                    for (i, l) in tb.lines().enumerate() {
                        let _ = if i == 0 {
                            write!(t, "{l}")
                        } else {
                            write!(t, "\n  {l}")
                        };
                    }
                    t + "\n  "
                }
                (None, Exit::Signal(sig)) => format!(
                    "Signal {sig} ({}) received by PID {}",
                    signal_name(sig),
                    f.pid
                ),
                (None, Exit::Code(_)) => {
                    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
                        .into()
                }
            };
            format!(
                "[{idx}]:\n  time      : {}\n  host      : {}\n  rank      : {} (local_rank: {})\n  exitcode  : {} (pid: {})\n  error_file: {}\n  traceback : {tb}",
                c.underscore(),
                self.host.fqdn,
                f.rank,
                f.local,
                f.exit.code(),
                f.pid,
                f.error_file.as_deref().unwrap_or("<N/A>")
            )
        };
        let others: Vec<String> = failures
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, f)| block(i, f))
            .collect();
        let root = failures.first().map(|f| block(0, f)).unwrap_or_default();
        let body_width = others
            .iter()
            .chain(std::iter::once(&root))
            .flat_map(|b| b.lines())
            .map(str::len)
            .chain([format!("{} FAILED", self.plan.script).len()])
            .max()
            .unwrap_or(60)
            .min(60);
        let eq = "=".repeat(body_width);
        let dash = "-".repeat(body_width);
        let failures_text = if others.is_empty() {
            "  <NO_OTHER_FAILURES>".to_string()
        } else {
            others.join("\n")
        };
        let _ = write!(
            out,
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n{eq}\n{} FAILED\n{dash}\nFailures:\n{failures_text}\n{dash}\nRoot Cause (first observed failure):\n{root}\n{eq}",
            self.plan.script
        );
        out
    }

    /// The agent killed by the scheduler: death signal, SIGTERMs, exception.
    pub fn on_death_signal(&self, s: &mut Stream, t: Us, alive: &[u32]) {
        // `e.sigval` is a `signal.Signals` (an IntEnum): `%s` prints
        // `Signals.SIGTERM` up to Python 3.10 and `15` from 3.11.
        let py311 = Ver::parse(&self.plan.versions.python).is_some_and(|v| v.ge(3, 11, 0));
        let sig = if py311 { "15" } else { "Signals.SIGTERM" };
        self.log(
            s,
            t,
            "WARNING",
            "torch.distributed.elastic.agent.server.api",
            ("torch/distributed/elastic/agent/server/api.py", 704),
            &format!("Received {sig} death signal, shutting down workers"),
        );
        for &pid in alive {
            self.api_log(
                s,
                t + MS,
                "WARNING",
                897,
                &format!("Sending process {pid} closing signal SIGTERM"),
            );
        }
        let mut tb = self.agent_traceback(&[
            ("torch/distributed/launcher/api.py", 255, "launch_agent", "result = agent.run()"),
            ("torch/distributed/elastic/agent/server/api.py", 864, "_invoke_run", "time.sleep(monitor_interval)"),
            ("torch/distributed/elastic/multiprocessing/api.py", 84, "_terminate_process_handler", "raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)"),
        ]);
        let _ = write!(
            tb,
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process {} got signal: 15",
            self.host.agent_pid
        );
        s.lines(t + 300 * MS, &tb);
    }
}

/// `"%*d: "` — the task id right-aligned to the widest id.
pub fn slurm_label(task: u32, world: u32) -> String {
    let width = world.saturating_sub(1).to_string().len();
    format!("{task:>width$}: ")
}

/// `0-2,5,7-9` from sorted ids.
pub fn id_ranges(ids: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Slurm's compressed host list for names that share a prefix.
pub fn node_list(plan: &Plan) -> String {
    let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
    let first = names.first().copied().unwrap_or("");
    let stem = first.trim_end_matches(|c: char| c.is_ascii_digit());
    let same = names
        .iter()
        .all(|n| n.starts_with(stem) && n[stem.len()..].chars().all(|c| c.is_ascii_digit()));
    if names.len() == 1 || !same {
        return names.join(",");
    }
    let last = names.last().copied().unwrap_or("");
    format!("{stem}[{}-{}]", &first[stem.len()..], &last[stem.len()..])
}

/// The batch script's own lines at the top of the Slurm output.
pub fn slurm_header(plan: &Plan, s: &mut Stream) {
    let t = plan.times.start;
    let c = clock::civil(t + plan.hosts[0].skew);
    let iface = &plan.hosts[0].iface;
    s.text(
        t,
        &format!(
            "==== job {} on {}, {} tasks, {} GPUs/node ====",
            plan.job_id,
            node_list(plan),
            plan.world,
            plan.gpus_per_host
        ),
    );
    s.text(t, &format!("start: {}", c.date_cmd()));
    s.text(
        t,
        &format!(
            "MASTER_ADDR={} MASTER_PORT=29500 WORLD_SIZE={}",
            plan.hosts[0].name, plan.world
        ),
    );
    s.text(
        t,
        &format!(
            "NCCL_DEBUG={} NCCL_SOCKET_IFNAME={iface}",
            if plan.nccl_info { "INFO" } else { "WARN" }
        ),
    );
    s.text(t, &format!("+ srun --label --unbuffered --kill-on-bad-exit=0 python -u {} --config configs/run.yaml", plan.script));
}

fn exit_text(e: Exit) -> String {
    match e {
        Exit::Code(c) => format!("Exited with exit code {c}"),
        Exit::Signal(6) => "Aborted (core dumped)".into(),
        Exit::Signal(9) => "Killed".into(),
        Exit::Signal(11) => "Segmentation fault (core dumped)".into(),
        Exit::Signal(15) => "Terminated".into(),
        Exit::Signal(s) => format!("Signal {s}"),
    }
}

/// `srun: error: host: tasks 0-2: Aborted (core dumped)`, one per host and
/// kind of exit, when the host's last such task ended.
pub fn srun_errors(plan: &Plan, runs: &[HostRun], first_host: usize, s: &mut Stream) {
    let mut lines: Vec<(Us, String)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let host = &plan.hosts[first_host + i];
        let mut groups: std::collections::BTreeMap<String, (Vec<u32>, Us)> =
            std::collections::BTreeMap::new();
        for (l, rr) in run.ranks.iter().enumerate() {
            if let Some((t, e)) = rr.end.filter(|e| e.1.failed()) {
                let g = groups.entry(exit_text(e)).or_insert((Vec::new(), t));
                g.0.push(host.first_rank + l as u32);
                g.1 = g.1.max(t);
            }
        }
        for (text, (ids, t)) in groups {
            let word = if ids.len() == 1 { "task" } else { "tasks" };
            lines.push((
                t + 500 * MS,
                format!(
                    "srun: error: {}: {word} {}: {text}",
                    host.name,
                    id_ranges(&ids)
                ),
            ));
        }
    }
    lines.sort();
    for (t, l) in lines {
        s.text(t, &l);
    }
}

/// The scheduler ending the step: a user's scancel or the time limit.
pub fn slurm_cancel(plan: &Plan, s: &mut Stream, t: Us, time_limit: bool) {
    let host0 = &plan.hosts[0];
    let c = clock::civil(t + host0.skew);
    let why = if time_limit { " DUE TO TIME LIMIT" } else { "" };
    s.text(
        t,
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    );
    s.text(
        t,
        &format!(
            "slurmstepd: error: *** STEP {}.0 ON {} CANCELLED AT {}{why} ***",
            plan.job_id,
            host0.name,
            c.iso()
        ),
    );
    if time_limit {
        s.text(
            t + 2 * MS,
            &format!(
                "slurmstepd: error: *** JOB {} ON {} CANCELLED AT {}{why} ***",
                plan.job_id,
                host0.name,
                c.iso()
            ),
        );
    }
}

/// The Slurm OOM notice after the kernel killed a task.
pub fn slurm_oom(plan: &Plan, s: &mut Stream, t: Us) {
    s.text(t, &format!("slurmstepd: error: Detected 1 oom_kill event in StepId={}.0. Some of the step tasks have been OOM Killed.", plan.job_id));
}

/// The batch script's closing echo.
pub fn slurm_footer(plan: &Plan, s: &mut Stream, t: Us, code: i32) {
    let c = clock::civil(t + plan.hosts[0].skew);
    s.text(t, &format!("end: {} (exit {code})", c.date_cmd()));
}

/// torchrun's per-host `--log-dir` folder name: `<run_id>_<random>`.
pub fn log_dir_name(plan: &Plan, host: usize) -> String {
    let mut r = Rng::derive(plan.seed, "logdir", &[host as u64]);
    format!("{}_{}", plan.run_id, r.alnum(8))
}

/// The `@record` error file of a worker that raised.
pub fn error_json(message: &str, traceback: &str, at: Us) -> String {
    let msg = serde_json::json!({
        "message": {
            "message": message,
            "extraInfo": {"py_callstack": traceback, "timestamp": (at / 1_000_000).to_string()}
        }
    });
    msg.to_string()
}
