//! The conformance harness: one trial per corpus case and backend.
//! `cargo test --test conformance` runs it; `-- --list` lists the trials and any text
//! argument filters them (e.g. `-- oracle::seeds/`).
//!
//! Trial kinds:
//! - `oracle::` — the case's hand-derived expectations against the exact interpreter;
//! - `kernels::` — the compiler's scheduled, lowered programs run by the kernel interpreter,
//!   against the oracle (pins a bug to scheduling/lowering rather than codegen);
//! - `cpu::` — the compiled C on CPU devices, against the oracle, plus the case's schedule
//!   expectations.
//! A case whose graph is undefined (it expects an error) is an oracle-only trial: the others
//! are listed as ignored.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};
use uopkit_conformance::{backend, corpus, load, run, stages};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn oracle_trial(file: PathBuf) -> Result<(), Failed> {
    let case = load::read_case(&file).map_err(|e| Failed::from(e.to_string()))?;
    run::check_oracle(&case).map(|_| ()).map_err(Failed::from)
}

fn cpu_trial(file: PathBuf) -> Result<(), Failed> {
    let case = load::read_case(&file).map_err(|e| Failed::from(e.to_string()))?;
    // The scheduler and lowering recurse along the graph; give deep graphs room.
    let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(move || backend::check_cpu(&case).map(|_| ()));
    match worker.map(|h| h.join()) {
        Ok(Ok(result)) => result.map_err(Failed::from),
        Ok(Err(_)) => Err(Failed::from("the CPU backend panicked")),
        Err(e) => Err(Failed::from(format!("cannot start a worker thread: {e}"))),
    }
}

fn kernels_trial(file: PathBuf) -> Result<(), Failed> {
    let case = load::read_case(&file).map_err(|e| Failed::from(e.to_string()))?;
    let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(move || stages::check_kernels(&case));
    match worker.map(|h| h.join()) {
        Ok(Ok(result)) => result.map_err(Failed::from),
        Ok(Err(_)) => Err(Failed::from("the kernel stage panicked")),
        Err(e) => Err(Failed::from(format!("cannot start a worker thread: {e}"))),
    }
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let dir = corpus_dir();
    let files = match corpus::case_files(&dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot list {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    let mut trials = vec![];
    for file in files {
        let name = corpus::case_name(&dir, &file);
        // Whether the CPU backend can take the case is decided at list time, so that an
        // ignored trial shows as ignored under every runner (nextest too).
        let skip = load::read_case(&file)
            .ok()
            .and_then(|c| backend::cpu_skip_reason(&c));
        let f = file.clone();
        trials.push(
            Trial::test(format!("cpu::{name}"), move || cpu_trial(f))
                .with_kind("cpu")
                .with_ignored_flag(skip.is_some()),
        );
        let f = file.clone();
        trials.push(
            Trial::test(format!("kernels::{name}"), move || kernels_trial(f))
                .with_kind("kernels")
                .with_ignored_flag(skip.is_some()),
        );
        trials.push(
            Trial::test(format!("oracle::{name}"), move || oracle_trial(file)).with_kind("oracle"),
        );
    }
    libtest_mimic::run(&args, trials).exit_code()
}
