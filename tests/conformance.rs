//! The conformance harness: one trial per corpus case and backend, judged by the same
//! harness as `uopkit check` (`uopkit_conformance::harness`).
//!
//! `cargo test --test conformance` runs it; `-- --list` lists the trials and any text
//! argument filters them (e.g. `-- oracle::seeds/`). The environment chooses what runs:
//! `UOPKIT_BACKENDS` (default `harness::DEFAULT_BACKENDS`; `exec:CMD` for an external backend),
//! `UOPKIT_CORPUS`, `UOPKIT_MANIFESTS`, `UOPKIT_TIMEOUT`, `UOPKIT_WORKER_MEMORY`,
//! `UOPKIT_IN_PROCESS=1`, `UOPKIT_FAIL_FAST=1` (stop at the first failing trial, exit 101).
//!
//! Trial kinds: `oracle::` (the case's own expected values against the exact interpreter),
//! `kernels::` (the compiler's lowered programs in the kernel interpreter, against the
//! oracle), `cpu::` (the compiled C, in worker processes — this binary re-executed — against
//! the oracle under `manifests/allowances/cpu.json`, plus the case's schedule expectations).
//! A skipped trial shows as `ignored, <reason>`; an expected failure from
//! `manifests/xfail.json` as `ignored, xfail: <reason>`; a listed trial that passes fails.

use std::path::Path;
use std::process::ExitCode;

use uopkit_conformance::backends::registry::Registry;
use uopkit_conformance::harness;

fn main() -> ExitCode {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    harness::libtest_main(&Registry::builtin(), &corpus, harness::DEFAULT_BACKENDS)
}
