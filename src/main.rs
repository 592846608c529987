//! `uopkit`: run conformance cases through the exact oracle.
//!
//! Exit codes: 0 = everything as expected, 1 = a case disagrees with its expectation,
//! 2 = bad input (unreadable or malformed case, a graph the verifier rejects).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use uopkit_conformance::case::Case;
use uopkit_conformance::corpus;
use uopkit_conformance::load::{self, read_case, LoadError};
use uopkit_conformance::run::{self, RunError};
use uopkit_interp::eval::{Data, Elem, Value};
use uopkit_interp::scalar::literal;

#[derive(Parser)]
#[command(
    name = "uopkit",
    version,
    about = "Exact oracle and conformance kit for tinygrad-style UOp graphs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// The exact interpreter against the cases' hand-derived expectations.
    Oracle,
    /// The compiler's CPU path (C via the system compiler), diffed against the oracle.
    Cpu,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Oracle => "oracle",
            Backend::Cpu => "cpu",
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run every case of the corpus through the oracle (and compiled backends) and print a summary.
    Check {
        /// The corpus directory.
        #[arg(long, default_value = "corpus")]
        corpus: PathBuf,
        /// Which backends to check against the case expectations / the oracle.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "oracle,cpu")]
        backend: Vec<Backend>,
        /// Only cases whose name contains this text.
        filter: Option<String>,
    },
    /// Run one case and print its outputs.
    Run { file: PathBuf },
    /// Compile one case for the CPU and print its schedule and kernels (and the C source).
    Compile {
        file: PathBuf,
        /// Also print the rendered C translation unit.
        #[arg(long)]
        c: bool,
    },
    /// Run one case through every stage of the compiler (lowered kernels, after each
    /// rewrite pass, rendered code) and report the first stage, pass, kernel and node whose
    /// values differ from the tensor-level oracle.
    Diff {
        file: PathBuf,
        /// The backend for the rendered stage (`none` stops after the interpreted kernels).
        #[arg(long, default_value = "cpu")]
        backend: String,
    },
    /// Differential fuzzing: generated graphs through the compiler and the oracle; a mismatch
    /// is shrunk and written to the regressions directory as a new case.
    Fuzz {
        #[arg(long, default_value = "cpu")]
        backend: String,
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
    },
    /// Print the JSON Schema of the case format.
    Schema,
    /// Rewrite case files in the canonical layout (or only check with --check).
    Fmt {
        #[arg(long)]
        check: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    // The compiler's passes recurse along the graph: run on a thread with room for deep
    // graphs rather than overflow the main thread's stack.
    let worker = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(real_main);
    match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => {
            eprintln!("error: uopkit crashed (a bug: please report it with the input)");
            ExitCode::from(101)
        }
        Err(e) => bad_input(format!("cannot start: {e}")),
    }
}

fn real_main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check {
            corpus,
            filter,
            backend,
        } => check(&corpus, filter.as_deref(), &backend),
        Command::Run { file } => run_one(&file),
        Command::Compile { file, c } => compile(&file, c),
        Command::Diff { file, backend } => diff(&file, &backend),
        Command::Fuzz {
            backend,
            seconds,
            seed,
            cases,
            out,
            allow_refusals,
        } => {
            let opts = uopkit_conformance::fuzz::FuzzOpts {
                backend,
                seconds,
                seed,
                max_cases: cases,
                out_dir: out,
                refusals_fail: !allow_refusals,
                ..Default::default()
            };
            match uopkit_conformance::fuzz::run(opts) {
                Ok(report) => {
                    println!("{report}");
                    if report.ok() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => bad_input(e),
            }
        }
        Command::Schema => {
            println!(
                "{}",
                serde_json::to_string_pretty(&uopkit_conformance::case::json_schema())
                    .unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Command::Fmt { check, files } => fmt(check, &files),
    }
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// Tallies of one backend over the corpus.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

fn check(dir: &Path, filter: Option<&str>, backends: &[Backend]) -> ExitCode {
    let files = match corpus::case_files(dir) {
        Ok(f) => f,
        Err(e) => return bad_input(format!("{}: cannot list the corpus: {e}", dir.display())),
    };
    let mut tallies: Vec<Tally> = backends.iter().map(|_| Tally::default()).collect();
    let mut bad = 0;
    for file in &files {
        let name = corpus::case_name(dir, file);
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let case = match read_case(file) {
            Ok(c) => c,
            Err(e) => {
                println!("BAD   {name}: {e}");
                bad += 1;
                continue;
            }
        };
        for (b, t) in backends.iter().zip(tallies.iter_mut()) {
            if *b == Backend::Cpu && uopkit_conformance::backend::cpu_skip_reason(&case).is_some() {
                t.skipped += 1;
                continue;
            }
            // One case that crashes the kit (a bug) must not stop the others.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match b {
                Backend::Oracle => run::check_oracle(&case).map(|_| ()),
                Backend::Cpu => uopkit_conformance::backend::cpu_allowances()
                    .and_then(|allow| {
                        uopkit_conformance::backend::check_cpu_with(&case, &name, allow)
                    })
                    .map(|_| ()),
            }))
            .unwrap_or_else(|_| {
                Err("uopkit crashed on this case (a bug: please report it with the case)".into())
            });
            match result {
                Ok(()) => t.passed += 1,
                Err(report) => {
                    println!(
                        "FAIL  {}::{name}: {}",
                        b.name(),
                        report.trim_end().replace('\n', "\n      ")
                    );
                    t.failed += 1;
                }
            }
        }
    }
    for (b, t) in backends.iter().zip(&tallies) {
        println!(
            "{}: {} passed, {} failed, {} skipped",
            b.name(),
            t.passed,
            t.failed,
            t.skipped
        );
    }
    println!(
        "{} cases in {}, {bad} unreadable",
        files.len(),
        dir.display()
    );
    if bad > 0 {
        ExitCode::from(2)
    } else if tallies.iter().any(|t| t.failed > 0) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn run_one(file: &Path) -> ExitCode {
    let case = match read_case(file) {
        Ok(c) => c,
        Err(e) => return bad_input(e),
    };
    println!("{}: {}", file.display(), case.description);
    match run::run_oracle(&case) {
        Err(RunError::Load(e)) => {
            let e = match e {
                LoadError::Case(c) => c.in_file(file).to_string(),
                LoadError::Verify(v) => format!("{}: verifier: {v}", file.display()),
            };
            if case.expect_error.is_some() && run::check_oracle(&case).is_ok() {
                println!("rejected as the case expects: {e}");
                return ExitCode::SUCCESS;
            }
            bad_input(e)
        }
        Err(RunError::Output(e)) => bad_input(format!("{}: {e}", file.display())),
        Err(e) => {
            println!("oracle: {e}");
            verdict(&case)
        }
        Ok(oracle) => match run::output_values(&case, &oracle) {
            Ok(values) => {
                for (out, v) in case.outputs.iter().zip(values) {
                    print_value(&out.name, v);
                }
                verdict(&case)
            }
            Err(e) => {
                println!("oracle: {e}");
                verdict(&case)
            }
        },
    }
}

/// Says whether the oracle's result matches what the case expects.
fn verdict(case: &Case) -> ExitCode {
    match run::check_oracle(case) {
        Ok(_) => {
            println!("as expected");
            ExitCode::SUCCESS
        }
        Err(report) => {
            println!("NOT as expected:\n{report}");
            ExitCode::FAILURE
        }
    }
}

fn print_value(name: &str, v: &Value) {
    let show = |comp: &[Elem]| -> String {
        let items: Vec<String> = comp
            .iter()
            .map(|e| match e {
                Elem::Bits(b) => literal::display(v.dtype, *b),
                Elem::Uninit { .. } => "?".to_string(),
            })
            .collect();
        format!("[{}]", items.join(", "))
    };
    match &v.data {
        Data::Single(c) => println!("{name}: {} {:?} = {}", v.dtype, v.shape, show(c)),
        Data::Multi(cs) => {
            println!("{name}: {} {:?} on {} devices", v.dtype, v.shape, cs.len());
            for (i, c) in cs.iter().enumerate() {
                println!("  device {i}: {}", show(c));
            }
        }
    }
}

fn diff(file: &Path, backend: &str) -> ExitCode {
    let with_backend = match backend {
        "cpu" => true,
        "none" => false,
        other => return bad_input(format!("unknown backend '{other}' (cpu or none)")),
    };
    let case = match read_case(file) {
        Ok(c) => c,
        Err(e) => return bad_input(e),
    };
    match uopkit_conformance::stages::diff(&case, with_backend) {
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
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn compile(file: &Path, show_c: bool) -> ExitCode {
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
        Ok(o) => o,
        Err(e) => return bad_input(format!("{}: {e}", file.display())),
    };
    let sched =
        match uopkit_compiler::schedule::schedule_opts(&loaded.graph, &verified, &roots, &opts) {
            Ok(s) => s,
            Err(e) => return bad_input(format!("{}: {e}", file.display())),
        };
    print!("{sched}");
    let programs: Vec<_> = sched
        .steps
        .iter()
        .filter_map(|s| match s {
            uopkit_compiler::schedule::Step::Kernel { program, .. } => Some(program.clone()),
            _ => None,
        })
        .collect();
    for p in &programs {
        print!("{p}");
    }
    if show_c {
        print!("{}", uopkit_compiler::render::render_c(&programs));
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
        if let Err(e) = load::load(&case) {
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
            } else if let Err(e) = std::fs::write(file, canonical) {
                return bad_input(format!("{}: cannot write: {e}", file.display()));
            }
        }
    }
    if check_only && differ > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
