//! PyTorch output, from docs/log-formats.md §2: the c10 line prefix by
//! release (`[E ProcessGroupNCCL.cpp:N]`, `[rankN]:` from 2.2, timestamps
//! from 2.4), the process-group prefixes, each release's watchdog sequence
//! for timeouts and NCCL errors, the C++ frames and `terminate called`, and
//! Python tracebacks (with the `[rankN]: ` excepthook prefix from 2.3).

use std::fmt::Write as _;

use super::clock::{self, MS, Us};
use super::nccl::{error_string, explanation};
use super::plan::{Host, Plan};
use super::rng::Rng;
use super::story::Exc;
use super::stream::Stream;
use super::versions::{C10Lines, Ver, c10_lines};

/// What a timed-out or failed rank's watchdog knows about its group.
#[derive(Debug, Clone)]
pub struct Work {
    pub seq: u64,
    pub op: &'static str,
    pub numel_in: u64,
    pub numel_out: u64,
    pub enqueued: u64,
    pub completed: u64,
    pub timeout_ms: i64,
}

/// Where a c10 line comes from: severity letter, source file, line.
#[derive(Debug, Clone, Copy)]
pub struct Site<'a>(pub char, pub &'a str, pub u32);

pub struct Torch<'a> {
    pub plan: &'a Plan,
    pub host: &'a Host,
    pub rank: u32,
    pub local: u32,
    pub v: Ver,
    lines: C10Lines,
    rng: Rng,
}

impl<'a> Torch<'a> {
    pub fn new(plan: &'a Plan, rank: u32) -> Torch<'a> {
        let v = plan.versions.torch;
        Torch {
            plan,
            host: plan.host_of(rank),
            rank,
            local: plan.rank(rank).local,
            v,
            lines: c10_lines(v),
            rng: Rng::derive(plan.seed, "torch", &[u64::from(rank)]),
        }
    }

    fn csrc(&self) -> &'static str {
        if self.v.ge(2, 6, 0) {
            "/pytorch/torch/csrc"
        } else {
            "../torch/csrc"
        }
    }

    /// One c10 log line: `[rankN]:[E1129 12:34:56.789012345 FILE:LINE] msg`.
    pub fn c10(&mut self, s: &mut Stream, t: Us, site: Site<'_>, msg: &str, ranked: bool) {
        let Site(level, file, line) = site;
        let mut head = String::new();
        if ranked && self.v.ge(2, 2, 0) {
            let _ = write!(head, "[rank{}]:", self.rank);
        }
        if self.v.ge(2, 4, 0) {
            let c = clock::civil(t + self.host.skew);
            let extra = self.rng.below(1000) as u32;
            let _ = write!(head, "[{level}{} {file}:{line}] ", c.c10(extra));
        } else {
            let _ = write!(head, "[{level} {file}:{line}] ");
        }
        let mut first = true;
        for l in msg.lines() {
            if first {
                s.line(t, |b| {
                    b.extend_from_slice(head.as_bytes());
                    b.extend_from_slice(l.as_bytes());
                });
                first = false;
            } else {
                s.text(t, l);
            }
        }
    }

    fn e(&mut self, s: &mut Stream, t: Us, line: u32, msg: &str) {
        self.c10(s, t, Site('E', "ProcessGroupNCCL.cpp", line), msg, true);
    }

    /// The process-group prefix of 2.3+ messages.
    pub fn pg(&self) -> String {
        let (pg, r) = (&self.plan.hung.pg, self.rank);
        if self.v.ge(2, 5, 0) {
            format!("[PG ID {pg} PG GUID {pg}(default_pg) Rank {r}] ")
        } else if self.v.ge(2, 4, 0) {
            format!("[PG {pg} (default_pg) Rank {r}] ")
        } else {
            format!("[PG {pg} Rank {r}] ")
        }
    }

    pub fn work(&self, w: &Work) -> String {
        if self.v.lt(2, 1, 0) {
            format!(
                "WorkNCCL(SeqNum={}, OpType={}, Timeout(ms)={})",
                w.seq, w.op, w.timeout_ms
            )
        } else {
            format!(
                "WorkNCCL(SeqNum={}, OpType={}, NumelIn={}, NumelOut={}, Timeout(ms)={})",
                w.seq, w.op, w.numel_in, w.numel_out, w.timeout_ms
            )
        }
    }

    /// The deprecated-variable warning at start-up (2.2+, when the job
    /// still sets the old name).
    pub fn deprecated_env(&mut self, s: &mut Stream, t: Us) {
        if self.plan.legacy_async_env && self.v.ge(2, 2, 0) {
            let (line, func) = if self.v.ge(2, 4, 0) {
                (137, "operator()")
            } else {
                (133, "getCvarInt")
            };
            let msg = format!(
                "Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function {func})"
            );
            self.c10(s, t, Site('W', "Utils.hpp", line), &msg, false);
        }
    }

    /// The 2.4+ warning of a barrier without a device.
    pub fn barrier_warning(&mut self, s: &mut Stream, t: Us) {
        if self.v.lt(2, 4, 0) {
            return;
        }
        let pg = if self.v.ge(2, 5, 0) {
            format!("[PG ID 0 PG GUID 0 Rank {}] ", self.rank)
        } else {
            format!("[PG 0 Rank {}] ", self.rank)
        };
        let msg = format!(
            "{pg} using GPU {} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() with a device_id.",
            self.local
        );
        let line = self.lines.barrier_warning;
        self.c10(s, t, Site('W', "ProcessGroupNCCL.cpp", line), &msg, true);
    }

    fn status_line(&self, w: &Work) -> String {
        format!(
            "{}Exception (either an error or timeout) detected by watchdog at work: {}, last enqueued NCCL work: {}, last completed NCCL work: {}.",
            self.pg(),
            w.seq,
            w.enqueued,
            w.completed
        )
    }

    /// The lines between the first report and the exit line.
    fn detected(&mut self, s: &mut Stream, t: Us, w: &Work) {
        let l = self.lines;
        if self.v.ge(2, 8, 0) {
            let msg = format!(
                "{} failure detected by watchdog at work sequence id: {} PG status: last enqueued work: {}, last completed work: {}",
                self.pg(),
                w.seq,
                w.enqueued,
                w.completed
            );
            self.e(s, t, l.exception_detected, &msg);
            self.e(s, t + 1, l.exception_detected + 14, "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.");
        } else if self.v.ge(2, 4, 0) {
            let msg = self.status_line(w);
            self.e(s, t, l.exception_detected, &msg);
        }
    }

    fn dump_signal(&mut self, s: &mut Stream, t: Us, w: &Work) {
        if self.v.lt(2, 6, 0) {
            return;
        }
        let pg = self.pg();
        let l = self.lines.exception_detected;
        self.e(
            s,
            t,
            l + 30,
            &format!("{pg}First PG on this rank to signal dumping."),
        );
        let msg = format!(
            "{pg}Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: {}, last completed NCCL work: {}.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
            w.enqueued, w.completed
        );
        self.e(s, t + 2, l + 60, &msg);
    }

    fn take_down(&mut self, s: &mut Stream, t: Us) {
        let l = self.lines;
        let tag = if self.v.ge(2, 3, 0) {
            format!("[Rank {}] ", self.rank)
        } else {
            String::new()
        };
        self.e(s, t, l.some_failed, &format!("{tag}Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."));
        self.e(
            s,
            t,
            l.avoid,
            &format!("{tag}To avoid data inconsistency, we are taking the entire process down."),
        );
    }

    /// `… watchdog thread terminated with exception: <exc>`, frames, abort.
    fn terminate(&mut self, s: &mut Stream, t: Us, exc: &str, raised_from: (&str, u32)) {
        let head = if self.v.ge(2, 3, 0) {
            format!(
                "{}Process group watchdog thread terminated with exception: ",
                self.pg()
            )
        } else {
            format!(
                "[Rank {}] NCCL watchdog thread terminated with exception: ",
                self.rank
            )
        };
        let full = format!("{head}{exc}");
        let l = self.lines.terminated;
        self.e(s, t, l, &full);
        if self.v.lt(2, 2, 0) {
            s.text(
                t + 10,
                "terminate called after throwing an instance of 'std::runtime_error'",
            );
            s.lines(t + 10, &format!("  what():  {full}"));
            return;
        }
        let frames = self.frames(raised_from);
        s.lines(t + 1, &frames);
        s.text(t + 1, "");
        s.text(
            t + 10,
            "terminate called after throwing an instance of 'c10::DistBackendError'",
        );
        s.lines(t + 10, &format!("  what():  {full}"));
        s.lines(t + 10, &frames);
        s.text(t + 10, "");
        let outer = self.frames(("ncclCommWatchdog", self.lines.comm_watchdog));
        s.lines(t + 10, &outer);
        s.text(t + 10, "");
    }

    fn frames(&mut self, (func, line): (&str, u32)) -> String {
        let lib = format!("{}/torch/lib", self.plan.site_packages());
        let csrc = self.csrc();
        let mut addr = || format!("0x7f{:010x}", self.rng.below(0xff_ffff_ffff));
        let path = if func == "c10_cuda_check_implementation" {
            format!(
                "{}/../c10/cuda/CUDAException.cpp",
                csrc.trim_end_matches("/torch/csrc")
            )
        } else {
            format!("{csrc}/distributed/c10d/ProcessGroupNCCL.cpp")
        };
        let mut out =
            format!("Exception raised from {func} at {path}:{line} (most recent call first):\n");
        let second = match func {
            "checkForNCCLErrorsInternal" => {
                "c10d::ProcessGroupNCCL::checkForNCCLErrorsInternal(std::shared_ptr<c10d::NCCLComm>&) + 0x2ac"
            }
            "c10_cuda_check_implementation" => {
                "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x3e6"
            }
            _ => {
                "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2"
            }
        };
        let second_lib = if func == "c10_cuda_check_implementation" {
            "libc10_cuda.so"
        } else {
            "libtorch_cuda.so"
        };
        let body = [
            (
                "c10::Error::Error(c10::SourceLocation, std::string) + 0x57",
                "libc10.so",
            ),
            (second, second_lib),
            (
                "c10d::ProcessGroupNCCL::watchdogHandler() + 0x1a0",
                "libtorch_cuda.so",
            ),
            (
                "c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c",
                "libtorch_cuda.so",
            ),
        ];
        let skip = if func == "ncclCommWatchdog" { 3 } else { 0 };
        let mut n = 0;
        for (sym, so) in body.iter().take(if skip > 0 { 1 } else { 4 }) {
            let _ = writeln!(out, "frame #{n}: {sym} ({} in {lib}/{so})", addr());
            n += 1;
        }
        if skip > 0 {
            let _ = writeln!(
                out,
                "frame #{n}: <unknown function> + 0xe32119 ({} in {lib}/libtorch_cuda.so)",
                addr()
            );
            n += 1;
        }
        for (sym, so) in [
            (
                "<unknown function> + 0xdc253",
                "/lib/x86_64-linux-gnu/libstdc++.so.6",
            ),
            (
                "<unknown function> + 0x94ac3",
                "/lib/x86_64-linux-gnu/libc.so.6",
            ),
            ("clone + 0x44", "/lib/x86_64-linux-gnu/libc.so.6"),
        ] {
            let _ = writeln!(out, "frame #{n}: {sym} ({} in {so})", addr());
            n += 1;
        }
        out
    }

    /// The whole timeout sequence of this release.
    pub fn timeout(&mut self, s: &mut Stream, t: Us, w: &Work, ran_ms: i64) {
        let l = self.lines;
        let first = format!(
            "[Rank {}] Watchdog caught collective operation timeout: {} ran for {ran_ms} milliseconds before timing out.",
            self.rank,
            self.work(w)
        );
        self.e(s, t, l.timeout, &first);
        self.detected(s, t + 1, w);
        self.dump_signal(s, t + 3 * MS, w);
        let mut t = t + self.rng.range(5, 400) * MS;
        if self.v.ge(2, 3, 0) {
            let msg = format!(
                "{}Timeout at NCCL work: {}, last enqueued NCCL work: {}, last completed NCCL work: {}.",
                self.pg(),
                w.seq,
                w.enqueued,
                w.completed
            );
            self.e(s, t, l.timeout_at, &msg);
            t += 1;
        }
        self.take_down(s, t);
        self.terminate(s, t + 1, &first, ("checkTimeout", l.check_timeout));
    }

    /// The watchdog raising an NCCL error (`result`), quoting `last_error`.
    pub fn nccl_error(
        &mut self,
        s: &mut Stream,
        t: Us,
        w: &Work,
        nccl: Ver,
        result: u8,
        last_error: &str,
    ) {
        self.detected(s, t, w);
        self.take_down(s, t + 1);
        let exc = format!(
            "NCCL error: {}, NCCL version {nccl}\n{}\nLast error:\n{last_error}",
            error_string(nccl, result),
            explanation(nccl, result)
        );
        let l = self.lines.check_errors;
        self.terminate(s, t + 2, &exc, ("checkForNCCLErrorsInternal", l));
    }

    /// The watchdog raising a CUDA error from a failing GPU.
    pub fn cuda_error(&mut self, s: &mut Stream, t: Us, w: &Work, msg: &str) {
        self.detected(s, t, w);
        self.take_down(s, t + 1);
        let exc = format!(
            "CUDA error: {msg}\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        );
        self.terminate(s, t + 2, &exc, ("c10_cuda_check_implementation", 43));
    }

    fn script(&self) -> String {
        format!("{}/{}", self.plan.workdir, self.plan.script)
    }

    /// A Python traceback: frames of the script, then `tail` frames, then
    /// the exception lines. Returns the traceback text (for error.json).
    pub fn traceback(
        &mut self,
        s: &mut Stream,
        t: Us,
        tail: &[(String, u32, &str, &str)],
        exc: &str,
    ) -> String {
        let script = self.script();
        let mut frames: Vec<(String, u32, &str, &str)> =
            vec![(script.clone(), 431, "<module>", "main()")];
        if self.plan.layout.has_agent() {
            frames.push((
                format!(
                    "{}/torch/distributed/elastic/multiprocessing/errors/__init__.py",
                    self.plan.site_packages()
                ),
                346,
                "wrapper",
                "return f(*args, **kwargs)",
            ));
        }
        frames.extend(tail.iter().cloned());
        let mut text = String::from("Traceback (most recent call last):\n");
        for (file, line, func, code) in &frames {
            let _ = writeln!(
                text,
                "  File \"{file}\", line {line}, in {func}\n    {code}"
            );
        }
        text.push_str(exc);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let prefix = if self.v.ge(2, 3, 0) {
            format!("[rank{}]: ", self.rank)
        } else {
            String::new()
        };
        for l in text.lines() {
            s.line(t, |b| {
                b.extend_from_slice(prefix.as_bytes());
                b.extend_from_slice(l.as_bytes());
            });
        }
        text
    }

    fn site(&self) -> String {
        self.plan.site_packages()
    }

    /// The rank's own exception in the training step.
    pub fn exception(&mut self, s: &mut Stream, t: Us, exc: &Exc) -> String {
        let script = self.script();
        let site = self.site();
        let (tail, text): (Vec<(String, u32, &str, &str)>, String) = match exc {
            Exc::OutOfMemory => (
                vec![
                    (
                        script.clone(),
                        388,
                        "main",
                        "loss = train_step(model, batch, optimizer, step)",
                    ),
                    (script.clone(), 251, "train_step", "loss.backward()"),
                    (
                        format!("{site}/torch/_tensor.py"),
                        492,
                        "backward",
                        "torch.autograd.backward(",
                    ),
                    (
                        format!("{site}/torch/autograd/__init__.py"),
                        251,
                        "backward",
                        "Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
                    ),
                ],
                self.oom_text(),
            ),
            Exc::Bug(line) => (
                vec![
                    (script.clone(), 377, "main", "batch = next(train_iter)"),
                    (
                        script.clone(),
                        164,
                        "collate",
                        "return {k: torch.stack([s[k] for s in samples]) for k in KEYS}",
                    ),
                ],
                line.clone(),
            ),
        };
        self.traceback(s, t, &tail, &text)
    }

    fn oom_text(&mut self) -> String {
        let g = self.local;
        let free = self.rng.range(20, 300) as f64 / 100.0;
        if self.v.lt(2, 0, 0) {
            return format!(
                "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU {g}; 79.35 GiB total capacity; 74.12 GiB already allocated; {free:.2} GiB free; 76.00 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
            );
        }
        if self.v.lt(2, 2, 0) {
            return format!(
                "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {g} has a total capacty of 79.11 GiB of which {free:.2} GiB is free. Including non-PyTorch memory, this process has 77.73 GiB memory in use. Of the allocated memory 74.85 GiB is allocated by PyTorch, and 1.36 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
            );
        }
        let class = if self.v.ge(2, 5, 0) {
            "torch.OutOfMemoryError"
        } else {
            "torch.cuda.OutOfMemoryError"
        };
        format!(
            "{class}: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {g} has a total capacity of 79.11 GiB of which {free:.2} GiB is free. Including non-PyTorch memory, this process has 77.73 GiB memory in use. Of the allocated memory 74.85 GiB is allocated by PyTorch, and 1.36 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
    }

    fn c10d_frames(
        &self,
        api: &'static str,
        code: &'static str,
        line: u32,
    ) -> Vec<(String, u32, &'static str, &'static str)> {
        let site = self.site();
        let mut v = Vec::new();
        if self.v.ge(2, 1, 0) {
            v.push((
                format!("{site}/torch/distributed/c10d_logger.py"),
                if self.v.ge(2, 3, 0) { 83 } else { 47 },
                "wrapper",
                "return func(*args, **kwargs)",
            ));
        }
        v.push((
            format!("{site}/torch/distributed/distributed_c10d.py"),
            line,
            api,
            code,
        ));
        v
    }

    /// NCCL failed in init: the first collective (a barrier) raises.
    pub fn init_error(
        &mut self,
        s: &mut Stream,
        t: Us,
        nccl: Ver,
        result: u8,
        last_error: &str,
    ) -> String {
        let script = self.script();
        let mut tail = vec![(script, 142, "main", "dist.barrier(device_ids=[local_rank])")];
        tail.extend(self.c10d_frames(
            "barrier",
            "work = default_pg.barrier(opts=opts)",
            3_696 + self.v.1 * 97,
        ));
        let class = if self.v.ge(2, 1, 0) {
            "torch.distributed.DistBackendError"
        } else {
            "RuntimeError"
        };
        let line = self.lines.nccl_error_in;
        let csrc = self.csrc();
        let exc = format!(
            "{class}: NCCL error in: {csrc}/distributed/c10d/ProcessGroupNCCL.cpp:{line}, {}, NCCL version {nccl}\n{}\nLast error:\n{last_error}",
            error_string(nccl, result),
            explanation(nccl, result)
        );
        self.traceback(s, t, &tail, &exc)
    }

    /// TORCH_DISTRIBUTED_DEBUG=DETAIL's collective check raising.
    pub fn mismatch(
        &mut self,
        s: &mut Stream,
        t: Us,
        seq: u64,
        mine: &str,
        other_rank: u32,
        other: &str,
    ) -> String {
        let script = self.script();
        let mut tail = vec![(script, 301, "train_step", "dist.all_reduce(grad_norm)")];
        tail.extend(self.c10d_frames(
            "all_reduce",
            "work = group.allreduce([tensor], opts)",
            2_050 + self.v.1 * 101,
        ));
        let fp = |op: &str| {
            format!(
                "CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[1], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))"
            )
        };
        let mut exc = format!(
            "RuntimeError: Detected mismatch between collectives on ranks. Rank {} is running collective: {}, but Rank {other_rank} is running collective: {}.",
            self.rank,
            fp(mine),
            fp(other)
        );
        if self.v.ge(2, 0, 0) {
            let _ = write!(
                exc,
                "Collectives differ in the following aspects: \t Op type: {mine}vs {other}"
            );
        }
        self.traceback(s, t, &tail, &exc)
    }
}
