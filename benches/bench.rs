//! `cargo bench --bench bench [-- --quick] [-- --json]`: the same run as `uopkit bench`
//! (`uopkit_conformance::bench::run`), printed as its table (or JSON with `--json`).
//! Without `--bench` (`cargo test --all-targets` runs benches once as a smoke test) it runs
//! in quick mode: timing is not a test.

use std::process::ExitCode;

use uopkit_conformance::bench::{self, BenchOpts};
use uopkit_conformance::progress::Quiet;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = !benching || args.iter().any(|a| a == "--quick");
    let mut opts = BenchOpts::new(quick);
    if !benching {
        opts.python = None; // a smoke test: no peers
    }
    match bench::run(&opts, &Quiet) {
        Ok(r) => {
            if args.iter().any(|a| a == "--json") {
                println!("{:#}", r.to_json());
            } else {
                print!("{}", r.to_table());
            }
            if r.all_exact() {
                ExitCode::SUCCESS
            } else {
                eprintln!("bench: a result is not exact");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}
