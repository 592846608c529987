//! The one conformance harness: it lists trials (case × backend), runs them and judges them,
//! for `uopkit check`, `tests/conformance.rs` (libtest-mimic, [`libtest_main`]), `uopkit fuzz`
//! and `uopkit diff`, and for a backend crate's own `cargo test`.
//!
//! A trial's verdict ([`Verdict`]): the reference backend (the oracle) is judged against the
//! case's own expected values; every other backend against the oracle's values under the
//! case's comparison modes and the backend's allowance manifest, plus the case's schedule
//! expectations on the facts the backend reports. `manifests/xfail.json` then turns a
//! listed failure into `xfail` and a listed pass into `xpass` (a failure: the list cannot go
//! stale).

/// The trial kinds a run has unless told otherwise (`uopkit check`, `cargo test --test
/// conformance`): the oracle, the kernel interpreter on the CPU and GPU lowerings, the CPU
/// backend, the GPU compilers and the GPU runtimes (skipped, with the reason, where their
/// libraries or devices are absent).
pub const DEFAULT_BACKENDS: &str =
    "oracle,kernels,gpusim,cpu,nvrtc,hiprtc,cuda,cuda-cpu,hip,hip-cpu";

mod diff;
mod env;
mod judge;
mod libtest;
mod plan;
mod scoreboard;
mod suite;

pub use diff::diff;
pub use env::{apply_limits_env, parse_bytes, settings_from_env, split_backends};
pub use judge::{apply_xfail, judge, judge_each, judge_full, FailKind, Verdict};
pub use libtest::{libtest_main, libtest_run, TrialLabels};
pub use plan::{plan_suite, trial_name, Plan};
pub use scoreboard::{scoreboard, Cell, CellState, Row, Scoreboard};
pub use suite::{
    allowances_for, default_jobs, load_suite, load_suite_with, manifests_dir, on_big_stack,
    tallies, CaseEntry, Settings, SetupError, Slot, Suite, Tally, TrialResult,
};
