//! `uopkit bench` (and `cargo bench`): the compiler's kernels timed against the machine's
//! ceilings, each result checked bit for bit, in one process, interleaved.
//!
//! * [`probe`]: STREAM-like copy / triad / read bandwidth and peak mul+add / FMA, in C
//!   compiled by the runtime's own C compiler, on every core (and on one).
//! * [`workloads`]: the tensor graphs (elementwise, sum, matmul, softmax, conv, f16
//!   elementwise), their work per run and their ceiling probe.
//! * [`runner`]: the normal compile path (schedule → render → CPU compile; a cold compile in
//!   a fresh cache directory, timed) and steady-state runs.
//! * [`exact`], [`reference`]: the bit-for-bit judgement (the oracle; for the full-size matmul a
//!   reference loop that is itself checked against the oracle on a smaller twin).
//! * [`peers`]: numpy / tinygrad figures from `benches/peers.py`, when a Python has them.
//! * [`report`]: the table and the JSON.
//!
//! Timing: one warm-up run of everything, then `rounds` rounds, each running every probe and
//! every workload once, in turn (so a noisy moment hits all of them); a figure is computed
//! from the best run, and the median run is reported beside it. The output checked is the
//! one the last timed run left.

pub mod exact;
pub mod peers;
pub mod probe;
pub mod reference;
pub mod report;
pub mod runner;
pub mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use uopkit_compiler::runtime::CCompiler;

use crate::progress::Progress;
use probe::{ProbeKind, Probes};
use report::{ProbeResult, Report, WorkloadResult};
use workloads::Check;

/// The test hook: the workload named here has one bit of its compiled output flipped before
/// it is judged (so that a test can see `exact: false` reported). Never set it otherwise.
pub const CORRUPT_ENV: &str = "UOPKIT_BENCH_CORRUPT";

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad options (an unknown workload, zero rounds): exit 2.
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Build(String),
    #[error("{0}")]
    Compile(String),
    #[error("run: {0}")]
    Run(String),
    #[error("probe: {0}")]
    Probe(String),
    #[error("oracle: {0}")]
    Oracle(String),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// Workload names (default: all of [`workloads::NAMES`]).
    pub workloads: Vec<String>,
    /// Timed rounds after the warm-up.
    pub rounds: usize,
    /// Tiny sizes (seconds in all; for tests: the figures mean nothing).
    pub quick: bool,
    /// The Python for the peers (None: none).
    pub python: Option<PathBuf>,
    /// [`CORRUPT_ENV`].
    pub corrupt: Option<String>,
    /// Threads of the probes (default: every core).
    pub threads: usize,
}

impl BenchOpts {
    /// Defaults: every workload, 5 rounds (3 under `quick`), full sizes, the Python of
    /// [`peers::python`], [`CORRUPT_ENV`] from the environment, every core.
    pub fn new(quick: bool) -> BenchOpts {
        BenchOpts {
            workloads: workloads::NAMES.iter().map(|s| s.to_string()).collect(),
            rounds: if quick { 3 } else { 5 },
            quick,
            python: peers::python(None),
            corrupt: std::env::var(CORRUPT_ENV).ok().filter(|s| !s.is_empty()),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// Parses a comma-separated workload list (each must be one of [`workloads::NAMES`]).
    pub fn set_workloads(&mut self, list: &str) -> Result<(), BenchError> {
        let names: Vec<String> = list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if names.is_empty() {
            return Err(BenchError::Usage("--workloads: no workload named".into()));
        }
        for n in &names {
            if !workloads::NAMES.contains(&n.as_str()) {
                return Err(BenchError::Usage(format!(
                    "--workloads: unknown workload '{n}' (expected one of {})",
                    workloads::NAMES.join(", ")
                )));
            }
        }
        self.workloads = names;
        Ok(())
    }
}

/// Best and median of a list of durations.
fn best_median(ts: &mut [Duration]) -> (Duration, Duration) {
    ts.sort();
    (ts[0], ts[ts.len() / 2])
}

/// Runs the benchmark.
pub fn run(opts: &BenchOpts, progress: &dyn Progress) -> Result<Report, BenchError> {
    if opts.rounds == 0 {
        return Err(BenchError::Usage("--rounds must be at least 1".into()));
    }
    // A fresh cache directory: every compile is cold, and timed as such.
    let cache = tempfile::tempdir()
        .map_err(|e| BenchError::Compile(format!("a temporary kernel cache: {e}")))?;
    let line = std::env::var("UOPKIT_CC").unwrap_or_default();
    let compiler = Arc::new(
        CCompiler::with_command_line(&line, cache.path())
            .map_err(|e| BenchError::Compile(e.to_string()))?,
    );

    progress.phase("compiling the probes");
    let n = if opts.quick { 1 << 16 } else { 16 << 20 };
    let iters = if opts.quick { 10_000 } else { 10_000_000 };
    let mut probes = Probes::new(&compiler, n, iters, opts.threads)?;
    let mut probe_items: Vec<(ProbeKind, usize)> = vec![];
    for k in ProbeKind::ALL {
        if k == ProbeKind::Fma && !probes.has_fma {
            continue;
        }
        probe_items.push((k, opts.threads));
        if opts.threads > 1 {
            probe_items.push((k, 1));
        }
    }

    let mut built = vec![];
    let mut runners = vec![];
    for name in &opts.workloads {
        progress.phase(&format!("building and compiling {name}"));
        let w = workloads::build(name, opts.quick)?;
        runners.push(runner::Runner::new(&w, compiler.clone())?);
        built.push(w);
    }

    // Warm-up, then the interleaved rounds.
    let mut probe_times: Vec<Vec<Duration>> = vec![vec![]; probe_items.len()];
    let mut probe_work = vec![0.0; probe_items.len()];
    let mut times: Vec<Vec<Duration>> = vec![vec![]; runners.len()];
    for round in 0..=opts.rounds {
        progress.phase(&format!("round {round} of {} (0: warm-up)", opts.rounds));
        for (i, &(k, t)) in probe_items.iter().enumerate() {
            probes.threads = t;
            let (d, w) = probes.run(k)?;
            if round > 0 {
                probe_times[i].push(d);
            }
            probe_work[i] = w;
        }
        for (i, r) in runners.iter().enumerate() {
            let d = r.run()?;
            if round > 0 {
                times[i].push(d);
            }
        }
    }

    let mut probe_results = vec![];
    for (i, &(k, t)) in probe_items.iter().enumerate() {
        let (best, median) = best_median(&mut probe_times[i]);
        probe_results.push(ProbeResult {
            name: k.name(),
            kind: k,
            threads: t,
            unit: k.unit(),
            value: probe_work[i] / best.as_secs_f64() / 1e9,
            median_value: probe_work[i] / median.as_secs_f64() / 1e9,
        });
    }
    let ceiling_of = |k: ProbeKind| {
        probe_results
            .iter()
            .find(|p| p.kind == k && p.threads == opts.threads)
            .map(|p| p.value)
    };

    let peer_run = match &opts.python {
        Some(py) => {
            progress.phase("numpy and tinygrad (benches/peers.py)");
            let reqs: Vec<serde_json::Value> = built
                .iter()
                .map(|w| {
                    let mut p = w.peer.clone();
                    p["name"] = w.name.into();
                    p
                })
                .collect();
            peers::run(py, &reqs, opts.rounds).unwrap_or_else(|e| peers::PeerRun {
                notes: vec![format!("no numpy/tinygrad figures: {e}")],
                ..Default::default()
            })
        }
        None => peers::PeerRun {
            notes: vec![format!(
                "no numpy/tinygrad figures: no Python for them (benches/setup-venv.sh makes .venv; or --python, or {})",
                peers::ENV
            )],
            ..Default::default()
        },
    };
    let peer_figures = &peer_run.figures;

    let mut results = vec![];
    for (i, (w, r)) in built.iter().zip(&runners).enumerate() {
        progress.phase(&format!("checking {} bit for bit", w.name));
        let (best, median) = best_median(&mut times[i]);
        let mut got = r.output()?;
        if opts.corrupt.as_deref() == Some(w.name) {
            corrupt(&mut got);
        }
        let (exact, exact_by, mismatch) = judge(w, &got);
        let value = w.work / best.as_secs_f64() / 1e9;
        let ceiling = ceiling_of(w.ceiling);
        let peer = peer_figures.get(w.name).cloned().unwrap_or_default();
        results.push(WorkloadResult {
            name: w.name,
            size: w.size.clone(),
            unit: w.unit,
            value,
            median_value: w.work / median.as_secs_f64() / 1e9,
            best_ms: best.as_secs_f64() * 1e3,
            median_ms: median.as_secs_f64() * 1e3,
            ceiling_probe: w.ceiling.name(),
            ceiling,
            ratio_to_ceiling: ceiling.map(|c| value / c),
            exact,
            exact_by,
            mismatch,
            kernels: r.kernels,
            schedule_ms: r.schedule_time.as_secs_f64() * 1e3,
            cc_ms: r.cc_time.as_secs_f64() * 1e3,
            numpy: peer.numpy,
            tinygrad: peer.tinygrad,
            tinygrad_first_ms: peer.tinygrad_first_ms,
        });
    }
    Ok(Report {
        quick: opts.quick,
        rounds: opts.rounds,
        threads: opts.threads,
        cc: compiler.cc().to_string(),
        probes: probe_results,
        workloads: results,
        peer_notes: peer_run.notes,
    })
}

/// Flips the lowest bit of the first element ([`CORRUPT_ENV`]).
fn corrupt(v: &mut uopkit_interp::eval::Value) {
    use uopkit_interp::eval::{Data, Elem};
    let first = match &mut v.data {
        Data::Single(e) => e.first_mut(),
        Data::Multi(c) => c.first_mut().and_then(|e| e.first_mut()),
    };
    if let Some(Elem::Bits(b)) = first {
        *b ^= 1;
    }
}

/// (exact, how it was judged, the first difference or why it could not be judged).
fn judge(
    w: &workloads::Workload,
    got: &uopkit_interp::eval::Value,
) -> (bool, String, Option<String>) {
    match &w.check {
        Check::Oracle => {
            let by = "oracle".to_string();
            let want = match w.ctx.evaluate(&[&w.root]) {
                Ok(v) => v,
                Err(e) => return (false, by, Some(format!("not checked: the oracle: {e}"))),
            };
            let want = match exact::bits_of(&want[0]) {
                Ok(b) => b,
                Err(e) => {
                    return (
                        false,
                        by,
                        Some(format!("not checked: the oracle's value: {e}")),
                    )
                }
            };
            let d = exact::first_difference(got, &want);
            (d.is_none(), by, d)
        }
        Check::MatmulReference {
            m,
            k,
            n,
            a,
            b,
            twin,
        } => {
            let by = format!(
                "reference loop (k ascending), itself equal to the oracle on a {twin}³ twin"
            );
            if let Err(e) = reference::check_twin(*twin) {
                return (false, by, Some(format!("not checked: {e}")));
            }
            let want = reference::matmul_bits(*m, *k, *n, a, b);
            let d = exact::first_difference(got, &want);
            (d.is_none(), by, d)
        }
    }
}
