//! `uopkit`: run conformance cases through the exact oracle.
//!
//! Exit codes: 0 = everything as expected, 1 = a case disagrees with its expectation,
//! 2 = bad input (unreadable or malformed case, a graph the verifier rejects).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use std::sync::Arc;

use uopkit_conformance::allowances::Allowances;
use uopkit_conformance::backends::registry::{self, OpenOpts, Registry};
use uopkit_conformance::backends::Backend;
use uopkit_conformance::harness::{self, Settings};
use uopkit_conformance::load::{self, read_case, LoadError};
use uopkit_conformance::report;
use uopkit_conformance::run::{self, RunError};
use uopkit_conformance::worker;

mod bench;
mod fuzz_rules;
mod kfuzz_cli;
mod ui;

#[derive(Parser)]
#[command(
    name = "uopkit",
    version,
    about = "Exact oracle and conformance kit for tinygrad-style UOp graphs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour in the summaries: auto (on a terminal, unless NO_COLOR is set;
    /// CLICOLOR_FORCE forces it), always or never.
    #[arg(long, global = true, value_enum, default_value_t = ui::ColorArg::Auto)]
    color: ui::ColorArg,
}

/// How backends run.
#[derive(clap::Args, Clone, Debug)]
struct RunArgs {
    /// Trials run in parallel (default: the number of cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Per-case time limit for a backend process, in seconds (env UOPKIT_TIMEOUT).
    #[arg(long)]
    timeout: Option<f64>,
    /// Address-space limit of each backend process, e.g. 8G (env UOPKIT_WORKER_MEMORY).
    #[arg(long)]
    worker_memory: Option<String>,
    /// Run compiled backends inside this process (debugging only: a crashing kernel then
    /// stops the run; the FP control state is still restored around every launch).
    #[arg(long)]
    in_process: bool,
}

impl RunArgs {
    fn open_opts(&self) -> Result<OpenOpts, String> {
        let mut o = OpenOpts::default();
        harness::apply_limits_env(&mut o).map_err(|e| e.to_string())?;
        if let Some(t) = self.timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!(
                    "--timeout {t}: expected a positive number of seconds"
                ));
            }
            o.limits.timeout = std::time::Duration::from_secs_f64(t);
        }
        if let Some(m) = &self.worker_memory {
            o.limits.memory =
                Some(harness::parse_bytes(m).ok_or_else(|| {
                    format!("--worker-memory {m}: expected bytes (e.g. 8G, 512M)")
                })?);
        }
        if self.in_process {
            o.in_process = true;
        }
        Ok(o)
    }

    fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(harness::default_jobs).max(1)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run every case of the corpus through the oracle (and compiled backends) and print a summary.
    Check {
        /// The corpus directory.
        #[arg(long, default_value = "corpus")]
        corpus: PathBuf,
        /// Where xfail.json and allowances/ are (default: manifests/ beside the corpus,
        /// else the repository's).
        #[arg(long)]
        manifests: Option<PathBuf>,
        /// Backends, comma-separated: oracle, kernels, gpusim, cpu, nvrtc, hiprtc, cuda,
        /// cuda-cpu, hip, hip-cpu, exec:CMD (an external program speaking
        /// docs/backend-protocol.md; put it last). `uopkit backends` lists them.
        #[arg(long, default_value = uopkit_conformance::harness::DEFAULT_BACKENDS)]
        backend: String,
        #[command(flatten)]
        run: RunArgs,
        /// Also list every skipped and expected-failure trial with its reason.
        #[arg(long, short)]
        verbose: bool,
        /// Report format: text (the human summary), json (`uopkit schema --report`), junit,
        /// or html (one self-contained page: the failing trials with their graph and
        /// schedule drawn, the first diverging node in red, ULP histograms of the outputs).
        #[arg(long, default_value = "text")]
        format: report::Format,
        /// Write the report to FILE (atomically) instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Cases to run: case files or directories under the corpus, or text their names
        /// contain (default: all).
        select: Vec<String>,
    },
    /// Serve one backend over the external-backend protocol on stdin/stdout (what the
    /// harness's worker processes do; useful to try a backend by hand).
    Worker {
        #[arg(long)]
        backend: String,
    },
    /// List the backends this build knows.
    Backends,
    /// Show the kernel cache (directory, entries, size, damaged entries), or clean it.
    Cache {
        /// Remove uopkit's files from the cache directory.
        #[arg(long)]
        clean: bool,
    },
    /// Run one case and print its outputs.
    Run { file: PathBuf },
    /// Compile one case and print its schedule and kernels (and the rendered source).
    Compile {
        file: PathBuf,
        /// Also print the rendered C translation unit (the same as `--lang c`).
        #[arg(long)]
        c: bool,
        /// What the kernels are optimized for: cpu (loops), or gpu (launch indices,
        /// local-memory reductions, barriers: what the gpusim trials run).
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// Also print the unit rendered in this language: c, cuda or hip (cuda/hip print
        /// the gpu target's kernels).
        #[arg(long, value_enum)]
        lang: Option<LangArg>,
    },
    /// Run one case through every stage of the compiler (lowered kernels, after each
    /// rewrite pass and each CPU kernel pass, the GPU-style kernels after each GPU pass,
    /// rendered code) and report the first stage, pass, kernel and node whose values differ
    /// from the tensor-level oracle, then the rewrite trace of that pass in that kernel.
    Diff {
        file: PathBuf,
        /// The backend for the rendered stage (`none` stops after the interpreted kernels).
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// The rewrite trace of the differing pass: touching (the steps that built the
        /// diverging node, marked >>), all (every step of the pass in the kernel) or none.
        #[arg(long, default_value = "touching")]
        trace: uopkit_conformance::pass_trace::TraceMode,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Differential fuzzing: generated graphs through the compiler and the oracle; a mismatch
    /// is shrunk and written to the regressions directory as a new case.
    Fuzz {
        /// The backend under test (cpu, exec:CMD, …).
        #[arg(long, default_value = "cpu")]
        backend: String,
        #[command(flatten)]
        run: RunArgs,
        /// Stop after this many seconds.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Stop after this many generated cases.
        #[arg(long)]
        cases: Option<u64>,
        /// Where shrunk failing cases are written (never overwriting a file).
        #[arg(long, default_value = "corpus/regressions")]
        out: PathBuf,
        /// Count graphs the compiler refuses to schedule as skipped rather than failed.
        #[arg(long)]
        allow_refusals: bool,
        /// Report format: text (the human summary), json (`uopkit schema --report`) or junit.
        #[arg(long, default_value = "text")]
        format: report::Format,
        /// Write the report to FILE (atomically) instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Kernel-level differential fuzzing: random valid kernels through the optimization
    /// passes, the kernel interpreter before and after, and the C renderer on the CPU; a
    /// difference is shrunk and written as a kernel-level case naming the pass.
    FuzzKernels(kfuzz_cli::Args),
    /// Check a rewrite rule set (symbolic) or one rule by name: generated expressions, the
    /// oracle's result before and after the rewrite; a counterexample is shrunk, printed and
    /// written as a case (docs/rule-fuzzing.md).
    FuzzRules(fuzz_rules::FuzzRulesArgs),
    /// Draw a case as Graphviz DOT (or SVG): its tensor graph, uopkit's schedule for it, or
    /// one kernel's program.
    Dot {
        file: PathBuf,
        /// graph (one node per UOp), schedule (buffers, kernels, copies by device) or kernel.
        #[arg(long, default_value = "graph")]
        what: uopkit_conformance::dot::What,
        /// With --what kernel: the kernel's name (default: the first).
        #[arg(long)]
        kernel: Option<String>,
        /// A case-file node id to draw in red (what `uopkit diff` names).
        #[arg(long)]
        highlight: Option<u64>,
        /// dot (text, needs nothing) or svg (runs Graphviz's `dot -Tsvg`).
        #[arg(long, default_value = "dot")]
        format: uopkit_conformance::dot::Format,
        /// Write here (atomically) instead of to stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print the JSON Schema of the case format (or of the backend protocol).
    Schema {
        /// The external-backend protocol's messages instead (docs/backend-protocol.md).
        #[arg(long)]
        protocol: bool,
        /// The report documents of `check --format json` and `fuzz --format json` instead.
        #[arg(long, conflicts_with = "protocol")]
        report: bool,
    },
    /// Run the corpus like `check` and print the scoreboard: op × dtype × backend, each cell
    /// the worst verdict of the cases that compute that op at that dtype (fail, xfail, skip,
    /// pass) with counts; also as Markdown and HTML files.
    Report {
        #[arg(long, default_value = "corpus")]
        corpus: PathBuf,
        #[arg(long)]
        manifests: Option<PathBuf>,
        /// Backends, as for `check`.
        #[arg(long, default_value = uopkit_conformance::harness::DEFAULT_BACKENDS)]
        backend: String,
        #[command(flatten)]
        run: RunArgs,
        /// Also write the table as Markdown (reasons as numbered notes).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Also write the table as a standalone HTML page (cells coloured, reasons as tooltips).
        #[arg(long)]
        html: Option<PathBuf>,
        /// Cases to run, as for `check`.
        select: Vec<String>,
    },
    /// Time the compiler's kernels against the machine's ceilings (STREAM-like probes), each
    /// result checked bit for bit, with numpy/tinygrad figures when a Python has them.
    Bench(bench::BenchArgs),
    /// Rewrite case files in the canonical layout (or only check with --check).
    Fmt {
        #[arg(long)]
        check: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Whether a panic is Rust's print macros meeting a closed stdout (`uopkit compile x | head`):
/// not a crash, the reader just stopped reading. (SIGPIPE stays ignored, as Rust sets it: the
/// harness writes to worker processes that may die, and must not die with them.)
fn is_closed_stdout(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
}

fn main() -> ExitCode {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_closed_stdout(info.payload()) {
            default_hook(info)
        }
    }));
    // The compiler's passes recurse along the graph: run on a thread with room for deep
    // graphs rather than overflow the main thread's stack.
    let worker = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(real_main);
    match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        // What a shell reports for a writer whose reader went away (128 + SIGPIPE).
        Ok(Err(p)) if is_closed_stdout(p.as_ref()) => ExitCode::from(141),
        Ok(Err(_)) => {
            eprintln!("error: uopkit crashed (a bug: please report it with the input)");
            ExitCode::from(101)
        }
        Err(e) => bad_input(format!("cannot start: {e}")),
    }
}

fn real_main() -> ExitCode {
    let registry = Registry::builtin();
    // This program is also the worker process of its compiled backends.
    if let Some(code) = registry::serve_if_worker(&registry) {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = Cli::parse();
    let colour = ui::colour(cli.color);
    match cli.command {
        Command::Check {
            corpus,
            manifests,
            backend,
            run,
            verbose,
            format,
            output,
            select,
        } => check(
            &registry,
            corpus,
            manifests,
            &backend,
            &run,
            select,
            &report::Emit {
                format,
                output,
                verbose,
                colour,
            },
        ),
        Command::Report {
            corpus,
            manifests,
            backend,
            run,
            markdown,
            html,
            select,
        } => report(
            &registry, corpus, manifests, &backend, &run, markdown, html, select,
        ),
        Command::Worker { backend } => match registry.open_in_process(&backend) {
            Ok(b) => ExitCode::from(worker::serve(b.as_ref()).clamp(0, 255) as u8),
            Err(e) => bad_input(e),
        },
        Command::Backends => {
            for e in registry.entries() {
                println!(
                    "{:<10} {}{}",
                    e.name,
                    e.about,
                    if e.compiled {
                        " [runs in worker processes]"
                    } else {
                        ""
                    }
                );
            }
            println!(
                "{:<10} an external program speaking docs/backend-protocol.md",
                "exec:CMD"
            );
            println!(
                "{:<10} tinygrad 0.14 on device DEV (PYTHON, CPU, CUDA, …) through bridges/tinygrad/bridge.py",
                "tinygrad:DEV"
            );
            ExitCode::SUCCESS
        }
        Command::Cache { clean } => cache(clean),
        Command::Run { file } => run_one(&file),
        Command::Compile {
            file,
            c,
            target,
            lang,
        } => compile(&file, if c { Some(LangArg::C) } else { lang }, target),
        Command::Diff {
            file,
            backend,
            trace,
            run,
        } => diff(&registry, &file, &backend, trace, &run),
        Command::Fuzz {
            backend,
            run,
            seconds,
            seed,
            cases,
            out,
            allow_refusals,
            format,
            output,
        } => {
            if format == report::Format::Html {
                return bad_input(report::ReportError::HtmlForFuzz);
            }
            let (b, allow) = match open_one(&registry, &backend, &run) {
                Ok(x) => x,
                Err(code) => return code,
            };
            let opts = uopkit_conformance::fuzz::FuzzOpts {
                backend: b.name().to_string(),
                seconds,
                seed,
                max_cases: cases,
                out_dir: out,
                refusals_fail: !allow_refusals,
                ..Default::default()
            };
            let bar = ui::FuzzBar::new(opts.seconds, opts.max_cases);
            let found = uopkit_conformance::fuzz::run_on_with(opts, b.as_ref(), &allow, &bar);
            bar.clear();
            match found {
                Ok(found) => {
                    if let Err(e) = report::emit_fuzz(
                        &found,
                        &report::Emit {
                            format,
                            output,
                            verbose: false,
                            colour,
                        },
                    ) {
                        return bad_input(e);
                    }
                    if found.ok() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => bad_input(e),
            }
        }
        Command::FuzzRules(args) => fuzz_rules::run(args),
        Command::Dot {
            file,
            what,
            kernel,
            highlight,
            format,
            output,
        } => {
            let opts = uopkit_conformance::dot::DotOpts {
                what,
                kernel,
                highlight,
            };
            match uopkit_conformance::dot::command(&file, &opts, format, output.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => bad_input(e),
            }
        }
        Command::Schema { protocol, report } => {
            let schema = if report {
                report::json_schema()
            } else if protocol {
                uopkit_conformance::protocol::json_schema()
            } else {
                uopkit_conformance::case::json_schema()
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Command::Fmt { check, files } => fmt(check, &files),
        Command::Bench(a) => bench::main(&a),
        Command::FuzzKernels(a) => kfuzz_cli::main(&a),
    }
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// Opens one backend with its allowance manifest (for `diff` and `fuzz`).
fn open_one(
    registry: &Registry,
    spec: &str,
    run: &RunArgs,
) -> Result<(Arc<dyn Backend>, Allowances), ExitCode> {
    let opts = run.open_opts().map_err(bad_input)?;
    let b = registry.open(spec, &opts).map_err(|e| {
        bad_input(format!(
            "backend {spec}: {e}\nhint: `--backend oracle` runs the oracle alone"
        ))
    })?;
    let mdir = harness::manifests_dir(Path::new("corpus"), None);
    let allow = harness::allowances_for(b.as_ref(), &mdir).map_err(bad_input)?;
    Ok((b, allow))
}

/// The suite `check` and `report` run: the corpus, manifests, backends and selection given;
/// a set-up problem is bad input (exit 2).
fn suite_for(
    registry: &Registry,
    corpus: PathBuf,
    manifests: Option<PathBuf>,
    backend: &str,
    run: &RunArgs,
    select: Vec<String>,
    progress: &ui::CheckProgress,
) -> Result<harness::Suite, ExitCode> {
    let failed = |e: String| {
        progress.clear();
        bad_input(e)
    };
    let open = run.open_opts().map_err(failed)?;
    let settings = Settings {
        corpus,
        manifests,
        backends: harness::split_backends(backend),
        filters: select,
        open,
    };
    harness::load_suite_with(&settings, registry, progress).map_err(|e| failed(e.to_string()))
}

#[allow(clippy::too_many_arguments)]
fn report(
    registry: &Registry,
    corpus: PathBuf,
    manifests: Option<PathBuf>,
    backend: &str,
    run: &RunArgs,
    markdown: Option<PathBuf>,
    html: Option<PathBuf>,
    select: Vec<String>,
) -> ExitCode {
    let progress = ui::CheckProgress::new();
    let suite = match suite_for(registry, corpus, manifests, backend, run, select, &progress) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let results = suite.run_all_with(run.jobs(), &progress);
    progress.clear();
    let board = harness::scoreboard(&suite, &results);
    print!("{}", board.text());
    for (path, text) in [(markdown, board.markdown()), (html, board.html())] {
        if let Some(p) = path {
            if let Err(e) = uopkit_conformance::atomic::write_atomic(&p, text.as_bytes()) {
                return bad_input(format!("{}: {e}", p.display()));
            }
        }
    }
    if results.iter().any(|r| r.verdict.is_failure()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn check(
    registry: &Registry,
    corpus: PathBuf,
    manifests: Option<PathBuf>,
    backend: &str,
    run: &RunArgs,
    select: Vec<String>,
    emit: &report::Emit,
) -> ExitCode {
    let progress = ui::CheckProgress::new();
    let suite = match suite_for(registry, corpus, manifests, backend, run, select, &progress) {
        Ok(s) => s,
        Err(code) => return code,
    };
    progress.suspend(|| {
        for w in &suite.warnings {
            eprintln!("warning: {w}");
        }
    });
    let results = suite.run_all_with(run.jobs(), &progress);
    progress.clear();
    if let Err(e) = report::emit_check(&suite, &results, emit) {
        return bad_input(e);
    }
    ExitCode::from(report::check_exit_code(&results))
}

fn cache(clean: bool) -> ExitCode {
    use uopkit_compiler::runtime::cache;
    let dir = match cache::cache_dir_from_env() {
        Ok(d) => d,
        Err(e) => return bad_input(e),
    };
    if clean {
        return match cache::clean(&dir) {
            Ok(n) => {
                println!("{}: removed {n} file(s)", dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => bad_input(format!("{}: {e}", dir.display())),
        };
    }
    match cache::stats(&dir) {
        Ok(s) => {
            println!("kernel cache: {}", s.dir.display());
            if !s.exists {
                println!("  (does not exist yet)");
            }
            println!("  entries: {} ({} bytes)", s.entries, s.bytes);
            println!("  damaged entries: {} (rebuilt on next use)", s.bad_entries);
            println!("  temporary files: {}", s.temp_files);
            println!("  other files: {}", s.other_files);
            ExitCode::SUCCESS
        }
        Err(e) => bad_input(format!("{}: {e}", dir.display())),
    }
}

fn run_one(file: &Path) -> ExitCode {
    let case = match read_case(file) {
        Ok(c) => c,
        Err(e) => return bad_input(e),
    };
    println!("{}: {}", file.display(), case.description);
    // The oracle runs once, on the compact path (inputs and values as raw bits, no per-element
    // objects); its result is printed and judged.
    let result = run::run_oracle_compact(&case);
    match &result {
        Err(RunError::Load(e)) => {
            let e = match e {
                LoadError::Case(c) => c.clone().in_file(file).to_string(),
                LoadError::Verify(v) => format!("{}: verifier: {v}", file.display()),
            };
            if case.expect_error.is_some() && run::judge_oracle(&case, &result).is_ok() {
                println!("rejected as the case expects: {e}");
                return ExitCode::SUCCESS;
            }
            return bad_input(e);
        }
        Err(RunError::Output(e)) => return bad_input(format!("{}: {e}", file.display())),
        Err(e) => println!("oracle: {e}"),
        Ok(oracle) => match run::output_compacts(&case, oracle) {
            Ok(values) => {
                use std::io::Write as _;
                let mut w = std::io::BufWriter::new(std::io::stdout().lock());
                let written = case
                    .outputs
                    .iter()
                    .zip(values)
                    .try_for_each(|(out, v)| run::write_output(&mut w, &out.name, v))
                    .and_then(|()| w.flush());
                if let Err(e) = written {
                    return bad_input(format!("cannot write the outputs: {e}"));
                }
            }
            Err(e) => println!("oracle: {e}"),
        },
    }
    match run::judge_oracle(&case, &result) {
        Ok(_) => {
            println!("as expected");
            ExitCode::SUCCESS
        }
        Err(report) => {
            println!("NOT as expected:\n{}", report.trim_end());
            ExitCode::FAILURE
        }
    }
}

fn diff(
    registry: &Registry,
    file: &Path,
    backend: &str,
    trace: uopkit_conformance::pass_trace::TraceMode,
    run: &RunArgs,
) -> ExitCode {
    let case = match read_case(file) {
        Ok(c) => c,
        Err(e) => return bad_input(e),
    };
    // Test builds only (the compiler's `fault-injection` feature): faults named in
    // UOPKIT_TEST_FAULTS are switched on for this thread; normal builds ignore it.
    let _ = uopkit_compiler::rewrite::faults::activate_from_env();
    let opened = if backend == "none" {
        None
    } else {
        match open_one(registry, backend, run) {
            Ok(x) => Some(x),
            Err(code) => return code,
        }
    };
    let name = file.with_extension("").to_string_lossy().into_owned();
    let b = opened.as_ref().map(|(b, a)| (b.as_ref(), a));
    match harness::diff(&case, &name, b) {
        Err(e) => bad_input(format!("{}: {e}", file.display())),
        Ok(report) => {
            for s in &report.stages {
                println!(
                    "{:<40} {}",
                    s.stage,
                    if s.difference.is_none() {
                        "agrees with the oracle"
                    } else {
                        "DIFFERS"
                    }
                );
            }
            match &report.first {
                None => {
                    println!("every stage agrees with the oracle");
                    ExitCode::SUCCESS
                }
                Some(first) => {
                    println!("{first}");
                    if let Some(section) = &report.trace {
                        let text = section.render(trace);
                        if !text.is_empty() {
                            print!("\n{text}");
                        }
                    }
                    ExitCode::FAILURE
                }
            }
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum TargetArg {
    Cpu,
    Gpu,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum LangArg {
    C,
    Cuda,
    Hip,
}

fn compile(file: &Path, lang: Option<LangArg>, target: TargetArg) -> ExitCode {
    use uopkit_compiler::render::{renderer, Lang};
    use uopkit_compiler::schedule::Target;
    let lang = lang.map(|l| match l {
        LangArg::C => Lang::C,
        LangArg::Cuda => Lang::Cuda,
        LangArg::Hip => Lang::Hip,
    });
    // CUDA and HIP print GPU-style kernels whatever --target says.
    let target = match (target, lang) {
        (TargetArg::Gpu, _) | (_, Some(Lang::Cuda | Lang::Hip)) => Target::Gpu,
        _ => Target::Cpu,
    };
    let case = match read_case(file) {
        Ok(c) => c,
        Err(e) => return bad_input(e),
    };
    let (loaded, verified) = match load::load(&case) {
        Ok(x) => x,
        Err(e) => return bad_input(format!("{}: {e}", file.display())),
    };
    let roots: Result<Vec<_>, _> = case.outputs.iter().map(|o| loaded.arena(o.node)).collect();
    let roots = match roots {
        Ok(r) => r,
        Err(e) => return bad_input(e.in_file(file)),
    };
    let opts = match uopkit_conformance::backend::schedule_opts_for(&case) {
        Ok(o) => uopkit_compiler::schedule::ScheduleOpts { target, ..o },
        Err(e) => return bad_input(format!("{}: {e}", file.display())),
    };
    let sched =
        match uopkit_compiler::pipeline::schedule_opts(&loaded.graph, &verified, &roots, &opts) {
            Ok(s) => s,
            Err(e) => {
                return bad_input(format!(
                    "{}: cannot schedule node {}: {}",
                    file.display(),
                    loaded.file_id_of(e.node),
                    e.reason
                ))
            }
        };
    // Graph nodes by their case-file ids, as every message names them.
    print!(
        "{}",
        sched.listing(&|n| format!("node {}", loaded.file_id_of(n)))
    );
    let programs: Vec<_> = sched.programs();
    for p in &programs {
        print!("{p}");
    }
    if let Some(lang) = lang {
        match renderer(lang).render(&programs) {
            Ok(unit) => print!("{}", unit.source),
            Err(e) => return bad_input(format!("{}: {e}", file.display())),
        }
    }
    ExitCode::SUCCESS
}

fn fmt(check_only: bool, files: &[PathBuf]) -> ExitCode {
    let mut differ = 0;
    for file in files {
        let case = match read_case(file) {
            Ok(c) => c,
            Err(e) => return bad_input(e),
        };
        // A case is checked before it is rewritten: a tensor-level case by the loader and
        // verifier, a kernel-level one by its own loader.
        let checked = match &case.kernel {
            Some(body) => uopkit_conformance::kernel_case::check_envelope(&case)
                .and_then(|()| uopkit_conformance::kernel_case::load(body).map(|_| ()))
                .map_err(|e| e.to_string()),
            None => load::load(&case).map(|_| ()).map_err(|e| e.to_string()),
        };
        if let Err(e) = checked {
            if case.expect_error.is_none() {
                return bad_input(format!("{}: {e}", file.display()));
            }
        }
        let canonical = case.to_canonical_string();
        let current = std::fs::read_to_string(file).unwrap_or_default();
        if canonical != current {
            differ += 1;
            if check_only {
                println!("not canonical: {}", file.display());
            } else if let Err(e) =
                uopkit_conformance::atomic::write_atomic(file, canonical.as_bytes())
            {
                return bad_input(format!(
                    "{}: cannot write ({e}); the file is unchanged",
                    file.display()
                ));
            }
        }
    }
    let same = files.len() - differ;
    if check_only {
        println!(
            "{} file(s): {same} canonical, {differ} not canonical",
            files.len()
        );
    } else {
        println!(
            "{} file(s): {differ} rewritten, {same} already canonical",
            files.len()
        );
    }
    if check_only && differ > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
