//! The `ncclpm` command line. Parsing arguments and mapping results to exit
//! codes is all that happens here; the work is in the library.
//!
//! Exit codes: 0 the report was written (whatever the verdict); 1 only with
//! `--fail-on` when the verdict matches; 2 bad usage, unreadable input or
//! unwritable output.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use indicatif::{ProgressBar, ProgressStyle};
use ncclpm::analyze::{AnalyzeError, Engine};
use ncclpm::batch::BatchOptions;
use ncclpm::grammar::knowledge::Knowledge;
use ncclpm::grammar::{Grammar, read_user_grammars};
use ncclpm::ingest::discover;
use ncclpm::parse::lint::Linter;
use ncclpm::parse::selftest::check_samples;
use ncclpm::report::{ReportInput, terminal, write_reports};
use ncclpm::simulate::{self, SimNames, SimOptions};
use rayon::prelude::*;
use std::io::IsTerminal;

#[derive(Parser)]
#[command(
    name = "ncclpm",
    version,
    about = "Post-mortem analysis of distributed GPU training jobs that hung or died in NCCL collectives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse one job: a folder of logs or a single log file.
    Analyze(AnalyzeArgs),
    /// Analyse every job under a folder: per-job reports, summary.jsonl, an
    /// index and a fleet view of repeat offenders.
    Batch(BatchArgs),
    /// Join the outputs of `batch --shard K/N` runs into one.
    Merge(MergeArgs),
    /// List lines that look like NCCL / ProcessGroupNCCL / elastic messages
    /// but that no grammar pattern recognises (grammar coverage).
    LintLogs(LintArgs),
    /// Write a realistic job folder with a known cause, and its truth beside
    /// it (OUT_DIR.truth.json).
    Simulate(SimulateArgs),
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// A cause kind of the verdict (link_flap, packet_loss, …, rank_stalled),
    /// or healthy / cancelled.
    #[arg(long = "cause", value_name = "KIND")]
    cause: String,
    /// World size: an even number up to 8 (two hosts), else a multiple of 8.
    #[arg(long, default_value_t = 16)]
    ranks: u32,
    /// Same seed, same bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// torchrun, slurm or nccl-files (default: drawn from the seed).
    #[arg(long)]
    layout: Option<String>,
    /// NCCL release to write (default: drawn with the torch release).
    #[arg(long = "nccl-version", value_name = "V")]
    nccl_version: Option<String>,
    /// PyTorch release to write.
    #[arg(long = "torch-version", value_name = "V")]
    torch_version: Option<String>,
    /// small (few channels, for tests) or full (as much NCCL INFO as a real job).
    #[arg(long, default_value = "full")]
    profile: String,
    /// Print nothing on success.
    #[arg(short, long)]
    quiet: bool,
    /// The job folder to create (must not exist or be empty).
    out_dir: PathBuf,
}

#[derive(clap::Args)]
struct BatchArgs {
    /// Folder holding one job per entry (a folder or an archive).
    root: PathBuf,
    /// Output folder.
    #[arg(short, long)]
    out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long = "jobs", value_name = "N")]
    threads: Option<usize>,
    /// Analyse only shard K of N (1-based), a stable split of the jobs.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(u32, u32)>,
    /// Glob (relative to ROOT) that matches each job, instead of every child.
    #[arg(long, value_name = "GLOB")]
    job_glob: Option<String>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct MergeArgs {
    /// The shard output folders.
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// Output folder.
    #[arg(short, long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct LintArgs {
    /// A job folder or one log file.
    path: PathBuf,
    /// Extra grammar file(s), as for `analyze`.
    #[arg(long = "grammar", value_name = "FILE")]
    grammars: Vec<PathBuf>,
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// The job folder (or one log file).
    path: PathBuf,
    /// Where to write report.json and report.html.
    #[arg(short, long, default_value = "ncclpm-report")]
    out: PathBuf,
    /// Write only report.json.
    #[arg(long)]
    json_only: bool,
    /// Print nothing on success.
    #[arg(short, long)]
    quiet: bool,
    /// Also write the timeline as Chrome / Perfetto trace-event JSON.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Extra grammar file(s) with in-house message patterns (TOML, see grammars/).
    #[arg(long = "grammar", value_name = "FILE")]
    grammars: Vec<PathBuf>,
    /// Cap on the bytes one input may decompress to, archives included (e.g.
    /// `64G`, `512M`); a bigger one is read up to the cap and reported.
    #[arg(long, value_name = "SIZE", default_value = "64G", value_parser = parse_size)]
    max_decompressed: u64,
    /// Exit with 1 when the verdict status is one of these (comma list of
    /// hang, crash, init_failure, degraded, unknown; `any` = not healthy).
    #[arg(long, value_delimiter = ',', value_name = "STATUS")]
    fail_on: Vec<String>,
    /// Print how long each stage took to stderr (discover, parse, model,
    /// timeline, diagnose, report).
    #[arg(long)]
    timings: bool,
}

const FAIL_ON_STATUSES: &[&str] = &[
    "any",
    "hang",
    "crash",
    "init_failure",
    "degraded",
    "unknown",
];

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze(args),
        Command::LintLogs(args) => lint_logs(args),
        Command::Batch(args) => batch(args),
        Command::Merge(args) => merge(args),
        Command::Simulate(args) => simulate(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("ncclpm: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode> {
    if let Some(bad) = args
        .fail_on
        .iter()
        .find(|s| !FAIL_ON_STATUSES.contains(&s.as_str()))
    {
        anyhow::bail!(
            "--fail-on: unknown status `{bad}` (one of {})",
            FAIL_ON_STATUSES.join(", ")
        );
    }
    let mut engine = engine(&args.grammars)?;
    engine.limits.max_decompressed = args.max_decompressed;
    let analysis = match engine.analyze(&args.path) {
        Ok(a) => a,
        Err(e @ AnalyzeError::NoReadableInput { .. }) => return Err(e.into()),
        Err(e) => {
            return Err(
                anyhow::Error::new(e).context(format!("cannot analyse {}", args.path.display()))
            );
        }
    };
    let input = ReportInput {
        job: &analysis.job,
        timeline: &analysis.timeline,
        diagnosis: &analysis.diagnosis,
    };
    let report_clock = std::time::Instant::now();
    let written = write_reports(&args.out, &input, args.json_only)?;
    if let Some(path) = &args.trace {
        std::fs::write(path, ncclpm::report::trace::trace_json(&input))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.timings {
        let report = ("report", report_clock.elapsed());
        for (stage, took) in analysis.timings.iter().chain([&report]) {
            eprintln!("{stage:>9} {:8.3} s", took.as_secs_f64());
        }
    }
    if !args.quiet {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", terminal::summary(&input))?;
        let html = written
            .html
            .as_ref()
            .map(|p| format!(" and {}", p.display()))
            .unwrap_or_default();
        writeln!(out, "report: {}{html}", written.json.display())?;
    }
    let status = analysis.diagnosis.verdict.status.name();
    let fail = args
        .fail_on
        .iter()
        .any(|s| s == status || (s == "any" && status != "healthy"));
    // The process ends here: freeing a large job's million events one by
    // one took a third of a second that the operating system does at once.
    std::mem::forget(analysis);
    Ok(if fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn batch(args: BatchArgs) -> Result<ExitCode> {
    let engine = engine(&[])?;
    let opts = BatchOptions {
        root: args.root,
        out: args.out,
        threads: args.threads,
        shard: args.shard,
        job_glob: args.job_glob,
    };
    let total = ncclpm::batch::planned_jobs(&opts)?.len() as u64;
    let bar = progress_bar(total, args.quiet);
    let outcome = ncclpm::batch::run(&engine, &opts, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if !args.quiet {
        println!(
            "{} job(s): {} analysed, {} unchanged, {} failed; index: {}",
            outcome.rows.len(),
            outcome.analyzed,
            outcome.reused,
            outcome.failed,
            opts.out.join("index.html").display()
        );
    }
    Ok(if outcome.failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A progress bar with rate and ETA on a terminal; hidden otherwise.
fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{bar:40} {pos}/{len} jobs · {per_sec} · ETA {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn merge(args: MergeArgs) -> Result<ExitCode> {
    let knowledge = Knowledge::builtin().context("cannot load the knowledge base")?;
    let rows = ncclpm::batch::merge(&args.shards, &args.out, &knowledge)?;
    println!(
        "{} job(s) merged into {}",
        rows.len(),
        args.out.join("index.html").display()
    );
    Ok(ExitCode::SUCCESS)
}

fn parse_shard(text: &str) -> Result<(u32, u32), String> {
    let (k, n) = text.split_once('/').ok_or("expected K/N, e.g. 2/8")?;
    let (k, n): (u32, u32) = (
        k.trim().parse().map_err(|_| "K is not a number")?,
        n.trim().parse().map_err(|_| "N is not a number")?,
    );
    if n == 0 || k == 0 || k > n {
        return Err(format!("shard {k}/{n}: need 1 <= K <= N"));
    }
    Ok((k, n))
}

fn lint_logs(args: LintArgs) -> Result<ExitCode> {
    let engine = engine(&args.grammars)?;
    let linter = Linter::new(
        &engine.grammar,
        &engine.knowledge.lint_markers,
        &engine.knowledge.lint_ignore_prefixes,
    );
    let found =
        discover(&args.path).with_context(|| format!("cannot read {}", args.path.display()))?;
    let results: Vec<_> = found
        .files
        .par_iter()
        .map(|f| (f, linter.lint_file(f)))
        .collect();
    let mut out = std::io::stdout().lock();
    let (mut gaps, mut files) = (0usize, 0usize);
    for (file, result) in results {
        match result {
            Ok(found) => {
                files += usize::from(!found.is_empty());
                gaps += found.len();
                for g in found {
                    writeln!(out, "{}:{}: {}", file.display, g.line, g.text)?;
                }
            }
            Err(e) => eprintln!("ncclpm: skipped {}: {e}", file.display),
        }
    }
    writeln!(out, "{gaps} unrecognised line(s) in {files} file(s)")?;
    Ok(ExitCode::SUCCESS)
}

fn simulate(args: SimulateArgs) -> Result<ExitCode> {
    let opts = SimOptions::from_names(&SimNames {
        cause: &args.cause,
        ranks: args.ranks,
        seed: args.seed,
        layout: args.layout.as_deref(),
        nccl_version: args.nccl_version.as_deref(),
        torch_version: args.torch_version.as_deref(),
        profile: &args.profile,
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    let done = simulate::simulate(&opts, &args.out_dir)?;
    if !args.quiet {
        let t = &done.truth;
        writeln!(
            std::io::stdout().lock(),
            "wrote {} ({} files, {:.1} MB): {} ranks on {} hosts, {} layout, NCCL {}, torch {}\ntruth: {} (status {}, stuck ranks {:?})",
            args.out_dir.display(),
            done.written.files,
            done.written.bytes as f64 / 1e6,
            t.ranks,
            t.hosts,
            t.layout,
            t.nccl_version,
            t.torch_version,
            done.truth_path.display(),
            t.truth.status,
            t.truth.stuck_ranks
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn engine(user_grammars: &[PathBuf]) -> Result<Engine> {
    let extra = read_user_grammars(user_grammars)?;
    let grammar = Grammar::with_extra(&extra).context("cannot load grammars")?;
    if !extra.is_empty() {
        let failures = check_samples(&grammar);
        if !failures.is_empty() {
            anyhow::bail!("grammar samples do not match:\n{}", failures.join("\n"));
        }
    }
    let knowledge = Knowledge::builtin().context("cannot load the knowledge base")?;
    Ok(Engine::new(grammar, knowledge))
}

/// `64G`, `512M`, `100K` or plain bytes.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("not a size: `{text}` (e.g. 64G, 512M)"))?;
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size too large: `{text}`"))
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
