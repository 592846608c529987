//! `uopkit fuzz-kernels`: the kernel-level differential fuzzer (`uopkit_conformance::kfuzz`)
//! with a text summary. Exit 0 when nothing was found, 1 with findings (each shrunk and
//! written as a kernel-level case), 2 on bad input or a write error.

use std::path::PathBuf;
use std::process::ExitCode;

use uopkit_conformance::kfuzz::{self, KFuzzOpts};

/// The subcommand's options.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The first kernel's seed (kernel k uses seed + k).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop after this many generated kernels.
    #[arg(long)]
    programs: Option<u64>,
    /// Where shrunk failing cases are written (never overwriting a file).
    #[arg(long, default_value = "corpus/regressions")]
    out: PathBuf,
    /// Skip the C renderer on the CPU runtime (no C compiler needed).
    #[arg(long)]
    no_c: bool,
    /// The C variant's time limit per kernel, in seconds: a compiled kernel with no answer
    /// in time is killed and is a finding (a hang).
    #[arg(long, default_value_t = 30.0)]
    c_timeout: f64,
}

pub fn main(a: &Args) -> ExitCode {
    let c_timeout = match std::time::Duration::try_from_secs_f64(a.c_timeout) {
        Ok(t) if !t.is_zero() => t,
        _ => {
            eprintln!(
                "error: --c-timeout {}: expected a positive number of seconds",
                a.c_timeout
            );
            return ExitCode::from(2);
        }
    };
    let opts = KFuzzOpts {
        seconds: a.seconds,
        seed: a.seed,
        max_programs: a.programs,
        out_dir: Some(a.out.clone()),
        c_backend: !a.no_c,
        c_timeout,
        ..Default::default()
    };
    let rep = match kfuzz::run(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "fuzz-kernels: {} kernels, {} checks, {} finding(s), {} invalid kernel(s) in {:.1}s (seed {})",
        rep.programs,
        rep.checks,
        rep.findings.len(),
        rep.invalid.len(),
        rep.elapsed.as_secs_f64(),
        a.seed
    );
    for (seed, why) in &rep.invalid {
        println!(
            "  invalid kernel (seed {seed}, a generator bug): {}",
            why.lines().next().unwrap_or("")
        );
    }
    for f in &rep.findings {
        println!(
            "  FAIL seed {}: variant {}, introduced by pass {}\n    {}",
            f.seed,
            f.variant,
            f.pass,
            f.detail.lines().next().unwrap_or("")
        );
        match &f.case_path {
            Some(p) => println!("    case: {}", p.display()),
            None => println!("    (no case written: no failing program to record)"),
        }
    }
    if rep.findings.is_empty() && rep.invalid.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
