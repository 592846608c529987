//! The conformance harness: one trial per corpus case and backend.
//! `cargo test --test conformance` runs it; `-- --list` lists the trials and any text
//! argument filters them (e.g. `-- oracle::seeds/`, `-- "[cpu]"`).
//!
//! Trial kinds:
//! - `oracle::` — the case's hand-derived expectations against the exact interpreter;
//! - `kernels::` — the compiler's scheduled, lowered programs run by the kernel interpreter,
//!   against the oracle (pins a bug to scheduling/lowering rather than codegen);
//! - `cpu::` — the compiled C on CPU devices, against the oracle under the case's comparison
//!   mode and `manifests/allowances/cpu.json`, plus the case's schedule expectations.
//!
//! A case whose graph is undefined (it expects an error) is an oracle-only trial: the others
//! are listed as ignored. `manifests/xfail.json` lists known failures: a listed trial that
//! fails passes, and one that passes fails until its entry is removed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use uopkit_conformance::allowances::Allowances;
use uopkit_conformance::xfail::{self, Xfail};
use uopkit_conformance::{backend, corpus, load, run, stages};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Runs `f` on a thread with a large stack: the scheduler and lowering recurse along the
/// graph, and deep graphs need room.
fn on_big_stack(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> Result<(), String> {
    let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(f);
    match worker.map(|h| h.join()) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the trial panicked".into()),
        Err(e) => Err(format!("cannot start a worker thread: {e}")),
    }
}

fn trial_result(file: &Path, name: &str, kind: &str, allow: &Allowances) -> Result<(), String> {
    let case = load::read_case(file).map_err(|e| e.to_string())?;
    match kind {
        "oracle" => run::check_oracle(&case).map(|_| ()),
        "kernels" => on_big_stack(move || stages::check_kernels(&case)),
        _ => {
            let (name, allow) = (name.to_string(), allow.clone());
            on_big_stack(move || backend::check_cpu_with(&case, &name, &allow).map(|_| ()))
        }
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
    let names: Vec<String> = files.iter().map(|f| corpus::case_name(&dir, f)).collect();
    let xfail = match xfail::load(&xfail::default_path()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("manifests/xfail.json: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = xfail.check_names(
        |c| names.iter().any(|n| n == c),
        &["oracle", "kernels", "cpu"],
    ) {
        eprintln!("manifests/xfail.json: {e}");
        return ExitCode::from(2);
    }
    let allow = match backend::cpu_allowances() {
        Ok(a) => a.clone(),
        Err(e) => {
            eprintln!("manifests/allowances/cpu.json: {e}");
            return ExitCode::from(2);
        }
    };
    let (xfail, allow): (Arc<Xfail>, Arc<Allowances>) = (Arc::new(xfail), Arc::new(allow));
    let mut trials = vec![];
    for (file, name) in files.into_iter().zip(names) {
        // Whether a compiled backend may take the case is decided at list time, so that an
        // ignored trial shows as ignored under every runner (nextest too).
        let oracle_only = load::read_case(&file)
            .ok()
            .and_then(|c| backend::cpu_skip_reason(&c))
            .is_some();
        for kind in ["cpu", "kernels", "oracle"] {
            let (file, name, xfail, allow) =
                (file.clone(), name.clone(), xfail.clone(), allow.clone());
            let trial = Trial::test(format!("{kind}::{name}"), move || {
                let result = trial_result(&file, &name, kind, &allow);
                xfail.judge(&name, kind, result).map_err(Failed::from)
            });
            trials.push(
                trial
                    .with_kind(kind)
                    .with_ignored_flag(oracle_only && kind != "oracle"),
            );
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}
