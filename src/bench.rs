//! `uopkit bench`: the command line of `uopkit_conformance::bench` (also run by `cargo bench`).
//!
//! Exit codes: 0 = every result exact, 1 = a result not exact or a workload that failed to
//! compile or run, 2 = bad arguments.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use uopkit_conformance::bench::{self, peers, BenchError, BenchOpts};

/// `--format`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchFormat {
    #[default]
    Table,
    Json,
}

#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Output: table (for people) or json (uopkit-bench/1).
    #[arg(long, value_enum, default_value_t = BenchFormat::Table)]
    format: BenchFormat,
    /// Workloads, comma-separated: elementwise, sum, matmul, softmax, conv, f16_elementwise
    /// (default: all).
    #[arg(long)]
    workloads: Option<String>,
    /// Timed rounds after the warm-up (default 5; 3 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Tiny sizes: a smoke test of the whole path, in seconds (the figures mean nothing).
    #[arg(long)]
    quick: bool,
    /// Python with numpy and tinygrad for their figures (default: UOPKIT_BENCH_PYTHON, empty
    /// for none, else .venv/bin/python if present; benches/setup-venv.sh makes one).
    #[arg(long)]
    python: Option<PathBuf>,
}

pub fn main(a: &BenchArgs) -> ExitCode {
    let mut opts = BenchOpts::new(a.quick);
    if let Some(r) = a.rounds {
        opts.rounds = r;
    }
    if a.python.is_some() {
        opts.python = peers::python(a.python.as_deref());
    }
    let usage = |e: BenchError| {
        eprintln!("uopkit bench: {e}");
        ExitCode::from(2)
    };
    if let Some(w) = &a.workloads {
        if let Err(e) = opts.set_workloads(w) {
            return usage(e);
        }
    }
    let progress = crate::ui::CheckProgress::new();
    let result = bench::run(&opts, &progress);
    progress.clear();
    let report = match result {
        Ok(r) => r,
        Err(e @ BenchError::Usage(_)) => return usage(e),
        Err(e) => {
            eprintln!("uopkit bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = match a.format {
        BenchFormat::Table => report.to_table(),
        BenchFormat::Json => format!("{:#}\n", report.to_json()),
    };
    let mut out = std::io::stdout().lock();
    if out
        .write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return ExitCode::from(141);
    }
    if report.all_exact() {
        ExitCode::SUCCESS
    } else {
        eprintln!("uopkit bench: a result is not exact (see `exact` and `mismatch`)");
        ExitCode::FAILURE
    }
}
