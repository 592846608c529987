//! Kernel-level differential fuzzing: random valid kernels (`gen::kernel`) through the
//! optimization passes, the kernel interpreter before and after, and the C renderer with the
//! CPU runtime. The tensor-level fuzzer ([`crate::fuzz`]) starts from tensor graphs; this one
//! starts from kernels, so loops, gated loads, local buffers, barriers and reductions the
//! lowering would rarely produce are exercised directly.
//!
//! For each kernel (a kernel graph, [`gen::kernel::build`]):
//!
//! * **reference**: the graph with only the finishing passes (`expand_reduce`), linearized,
//!   run by the exact kernel interpreter under every seed of [`GPU_SEEDS`] (a reference
//!   whose seeds disagree, or that stops with an error, is a generator bug: counted in
//!   [`KFuzzReport::invalid`], never a finding);
//! * each **variant** is compared with it, bit for bit and error for error (the kind of
//!   undefined behaviour, not the instruction, which passes renumber):
//!   - `lift`: the reference program lifted back to a graph and linearized again;
//!   - `symbolic`: the `symbolic` rules on the whole graph, then the finishing passes;
//!   - `gpu`: the GPU target's passes (`gpu_launch`, `gpu_local_reduce`, `gpu_threads`,
//!     `symbolic`), then the finishing ones, under every seed (a missing barrier shows as a
//!     difference under some interleaving); `lift+gpu`: the same on the lifted reference;
//!   - `cpu`: the CPU target's passes (`cpu_tile`, `cpu_interchange`, `cpu_split_lanes`, `cpu_threads`),
//!     then the finishing ones;
//!   - `c`: the `cpu` program rendered as C, compiled and run on the CPU runtime (kernels
//!     without launch indices) in a worker process (the `cpu` backend answering the
//!     protocol's `run_schedule` request, [`crate::worker`]), never in this one: a kernel
//!     that crashes the worker, hangs past [`KFuzzOpts::c_timeout`] or changes its FP
//!     control state is a `c` finding, the worker is replaced and the run goes on;
//!   - `cuda`, `hip`: the `gpu` program rendered (a render error or an `#error` line is a
//!     finding); nothing is compiled here (no GPU is assumed).
//!
//! A difference in a pass pipeline is bisected to the first pass whose prefix shows it
//! ([`Finding::pass`]); the recipe is shrunk (statements dropped, loop extents shrunk,
//! expressions replaced by their parts) while the same variant and pass still fail, and the
//! failing program is written to `out_dir` as a kernel-level case (`kfuzz_<hash>.json`,
//! atomically, never overwriting) whose expectations are the reference's outputs: for a pass
//! finding the program is the optimized one, so the oracle's trial of the case fails (a wrong
//! value, or poison read before a barrier); for a `c`/`cuda`/`hip` finding it is the reference
//! program the backend failed on (which the oracle passes). A machine without a C compiler is
//! [`KFuzzError::NoCompiler`]; a worker that cannot start is [`KFuzzError::Worker`].
//!
//! Everything but the C variant runs on the calling thread, so the compiler's thread-local
//! test-only faults apply. The same seed and options give the same findings.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use uopkit_compiler::kgraph::{lift, KernelGraph};
use uopkit_compiler::linearize::linearize;
use uopkit_compiler::optimize::{self, finishing, Pass, Target};
use uopkit_compiler::render::{CStyle, Renderer};
use uopkit_compiler::rewrite::engine::Order;
use uopkit_interp::eval::Elem;
use uopkit_interp::ir::Op;
use uopkit_interp::kernel::interp::{self, KernelError, RunOpts};
use uopkit_interp::kernel::Program;

use crate::backends::process::{Limits, ProcessBackend, Spawn};
use crate::backends::{Backend, BackendError};
use crate::case::{BufferExpect, Case, KernelBody, NanPolicy};
use crate::gen::kernel::{self, Expr, KernelConfig, KernelRecipe, Stmt};
use crate::protocol::{
    elem_bits, hex, parse_bits, program_json, BufferSpec, ScheduleRequest, StepJson,
};
use crate::stages::GPU_SEEDS;
use crate::worker::WORKER_ENV;

/// What to fuzz and for how long.
#[derive(Clone, Debug)]
pub struct KFuzzOpts {
    /// Wall-clock budget for generating and checking kernels (shrinking may run past it).
    pub seconds: u64,
    pub seed: u64,
    /// Stop after this many kernels.
    pub max_programs: Option<u64>,
    /// Where shrunk failing cases are written (created when missing); None: not written.
    pub out_dir: Option<PathBuf>,
    /// Stop after this many findings.
    pub max_failures: u64,
    pub gen: KernelConfig,
    /// Run the C renderer's output on the CPU runtime (needs a C compiler).
    pub c_backend: bool,
    /// The most candidate recipes one shrink tries.
    pub shrink_steps: usize,
    /// How the C variant's worker is started; None: this program (`current_exe`) with
    /// `UOPKIT_WORKER_BACKEND=cpu` (a program that calls `registry::serve_if_worker` first).
    pub worker: Option<Spawn>,
    /// The C variant's limit per kernel: no answer in time is a `c` finding (a hang).
    pub c_timeout: Duration,
}

impl Default for KFuzzOpts {
    fn default() -> Self {
        KFuzzOpts {
            seconds: 60,
            seed: 0,
            max_programs: None,
            out_dir: None,
            max_failures: 1,
            gen: KernelConfig::default(),
            c_backend: true,
            shrink_steps: 2000,
            worker: None,
            c_timeout: Duration::from_secs(30),
        }
    }
}

/// The step budget of every interpreter run (generated kernels are small).
const STEPS: u64 = 20_000_000;

/// What one run of a program gave: the param buffers (None: poison) or the error's kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Buffers(Vec<Vec<Option<u64>>>),
    Error(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Error(e) => write!(f, "error: {e}"),
            Outcome::Buffers(b) => {
                let parts: Vec<String> = b
                    .iter()
                    .map(|buf| {
                        let els: Vec<String> = buf
                            .iter()
                            .take(16)
                            .map(|e| e.map_or("poison".into(), |b| format!("{b:#x}")))
                            .collect();
                        format!(
                            "[{}{}]",
                            els.join(" "),
                            if buf.len() > 16 { " …" } else { "" }
                        )
                    })
                    .collect();
                f.write_str(&parts.join(" "))
            }
        }
    }
}

fn error_kind(e: &KernelError) -> String {
    match e {
        KernelError::Ub { kind, .. } => format!("undefined behaviour {kind:?}"),
        KernelError::Barrier { .. } => "barrier divergence".into(),
        KernelError::StepBudget { .. } => "step budget exhausted".into(),
        KernelError::Malformed { reason, .. } => format!("malformed program: {reason}"),
        KernelError::Args(a) => format!("arguments: {a}"),
    }
}

/// Runs `p` on `init` under `seed`.
pub fn interpret(p: &Program, init: &[Vec<Elem>], seed: u64) -> Outcome {
    let mut bufs = init.to_vec();
    let opts = RunOpts {
        step_budget: STEPS,
        seed,
        ..RunOpts::default()
    };
    match interp::run(p, &mut bufs, &opts) {
        Ok(_) => Outcome::Buffers(
            bufs.iter()
                .map(|b| {
                    b.iter()
                        .map(|e| match e {
                            Elem::Bits(b) => Some(*b),
                            Elem::Uninit { .. } => None,
                        })
                        .collect()
                })
                .collect(),
        ),
        Err(e) => Outcome::Error(error_kind(&e)),
    }
}

/// A variant's disagreement with the reference.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The kernel's seed.
    pub seed: u64,
    /// `lift`, `symbolic`, `gpu`, `lift+gpu`, `cuda`, `hip`, `cpu`, `c`.
    pub variant: &'static str,
    /// The pass that introduced the difference (the first whose prefix shows it), or the
    /// stage (`linearize`, `C renderer`, …).
    pub pass: String,
    /// What differs (reference vs. variant, the interpreter seed).
    pub detail: String,
    /// The shrunk recipe and its failing program.
    pub recipe: KernelRecipe,
    pub program: Option<Program>,
    /// The kernel-level case written for it.
    pub case_path: Option<PathBuf>,
}

/// What a fuzz run did.
#[derive(Clone, Debug, Default)]
pub struct KFuzzReport {
    pub programs: u64,
    /// Kernels whose reference run failed or depended on the seed (generator bugs).
    pub invalid: Vec<(u64, String)>,
    /// Variant checks that ran (per kernel, each variant that applies).
    pub checks: u64,
    pub findings: Vec<Finding>,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum KFuzzError {
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The C variant is on but this machine cannot compile C (no compiler, a broken
    /// `UOPKIT_CC`): a setup problem, not a finding (`--no-c` runs without it).
    #[error("the C variant cannot run here: {0} (pass --no-c to fuzz without it)")]
    NoCompiler(String),
    /// The C variant's worker process did not start or answer its first request.
    #[error("the C variant cannot run here: its worker did not start: {0} (pass --no-c to fuzz without it)")]
    Worker(String),
}

/// One kernel's failure before shrinking: variant, pass, detail, failing program.
#[derive(Clone, Debug)]
struct Fail {
    variant: &'static str,
    pass: String,
    detail: String,
    program: Option<Program>,
}

/// Runs the fuzzer.
pub fn run(opts: &KFuzzOpts) -> Result<KFuzzReport, KFuzzError> {
    let worker = if opts.c_backend {
        Some(start_worker(opts)?)
    } else {
        None
    };
    let c = worker.as_ref();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(opts.seconds);
    let mut report = KFuzzReport::default();
    let mut k: u64 = 0;
    while Instant::now() < deadline
        && opts.max_programs.is_none_or(|m| k < m)
        && (report.findings.len() as u64) < opts.max_failures
    {
        let seed = opts.seed.wrapping_add(k);
        k += 1;
        report.programs += 1;
        let r = kernel::recipe(seed, &opts.gen);
        let (checks, res) = check(&r, c);
        report.checks += checks;
        match res {
            Check::Ok => {}
            Check::Invalid(why) => report.invalid.push((seed, why)),
            Check::Fail(f) => {
                let (small, f) = shrink(&r, f, opts, c);
                let mut finding = Finding {
                    seed,
                    variant: f.variant,
                    pass: f.pass,
                    detail: f.detail,
                    recipe: small,
                    program: f.program,
                    case_path: None,
                };
                if let Some(dir) = &opts.out_dir {
                    finding.case_path = write_case(dir, &finding)?;
                }
                report.findings.push(finding);
            }
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

enum Check {
    Ok,
    Invalid(String),
    Fail(Fail),
}

fn graph(r: &KernelRecipe) -> Result<KernelGraph, String> {
    kernel::build(r, "kfuzz").map_err(|e| e.to_string())
}

/// `k` after `passes`, linearized.
pub(crate) fn lowered(k: &KernelGraph, passes: &[Pass]) -> Result<Program, String> {
    let mut k = k.clone();
    optimize::optimize(&mut k, passes).map_err(|e| e.to_string())?;
    linearize(&k).map_err(|e| e.to_string())
}

fn symbolic_pass() -> Pass {
    Pass {
        rules: uopkit_compiler::rewrite::symbolic(),
        order: Order::BottomUp,
    }
}

/// The first seed under which `p` differs from `want` (with the detail), if any.
pub(crate) fn differs(p: &Program, init: &[Vec<Elem>], want: &Outcome) -> Option<String> {
    for seed in GPU_SEEDS {
        let got = interpret(p, init, seed);
        if &got != want {
            return Some(format!(
                "interpreter seed {seed:#x}: reference {want}, variant {got}"
            ));
        }
    }
    None
}

/// Checks every variant of `r`; returns how many checks ran and the first failure.
fn check(r: &KernelRecipe, c: Option<&ProcessBackend>) -> (u64, Check) {
    let mut checks = 0;
    let k = match graph(r) {
        Ok(k) => k,
        Err(e) => return (0, Check::Invalid(format!("build: {e}"))),
    };
    let init = kernel::inputs(r);
    let p0 = match lowered(&k, &finishing()) {
        Ok(p) => p,
        Err(e) => return (0, Check::Invalid(format!("reference: {e}"))),
    };
    let want = interpret(&p0, &init, GPU_SEEDS[0]);
    if let Outcome::Error(e) = &want {
        return (0, Check::Invalid(format!("reference: {e}\n{p0}")));
    }
    if let Some(d) = differs(&p0, &init, &want) {
        return (
            0,
            Check::Invalid(format!("reference depends on the seed: {d}")),
        );
    }
    let fail = |variant, pass: String, detail: String, program| {
        Check::Fail(Fail {
            variant,
            pass,
            detail,
            program,
        })
    };
    // lift → linearize. A failure here is kept while the other variants run (they are
    // reported first: the lift variant's bug does not hide theirs).
    checks += 1;
    let mut lift_fail = None;
    match lift(&p0)
        .map_err(|e| e.to_string())
        .and_then(|g| lowered(&g, &[]))
    {
        Err(e) => {
            let d = format!("{e}\nthe reference program:\n{p0}");
            lift_fail = Some(fail("lift", "lift/linearize".into(), d, None));
        }
        Ok(p) => {
            if let Some(d) = differs(&p, &init, &want) {
                lift_fail = Some(fail("lift", "lift/linearize".into(), d, Some(p)));
            }
        }
    }
    // symbolic on the whole graph
    checks += 1;
    let mut sym = vec![symbolic_pass()];
    sym.extend(finishing());
    match lowered(&k, &sym) {
        Err(e) => return (checks, fail("symbolic", "symbolic".into(), e, None)),
        Ok(p) => {
            if let Some(d) = differs(&p, &init, &want) {
                return (checks, fail("symbolic", "symbolic".into(), d, Some(p)));
            }
        }
    }
    // The GPU target's passes, on the graph and on the lifted reference.
    let mut gpu_prog = None;
    // (The lifted reference only when lifting and linearizing it works.)
    let lifted = lift_fail.is_none().then(|| lift(&p0).ok()).flatten();
    for (variant, start) in [("gpu", Some(k.clone())), ("lift+gpu", lifted)] {
        let Some(start) = start else { continue };
        checks += 1;
        if let Some(f) = gpu_check(variant, &start, &init, &want) {
            return (checks, Check::Fail(f));
        }
        if gpu_prog.is_none() {
            gpu_prog = gpu_program(&start, None).ok();
        }
    }
    // The CUDA and HIP renderers: render only.
    if let Some(p) = &gpu_prog {
        for (variant, style) in [("cuda", CStyle::CUDA), ("hip", CStyle::HIP)] {
            checks += 1;
            let msg = match style.render(std::slice::from_ref(p)) {
                Err(e) => Some(e.to_string()),
                Ok(u) => u
                    .source
                    .lines()
                    .find(|l| l.trim_start().starts_with("#error"))
                    .map(|l| format!("the rendered source has {l}")),
            };
            if let Some(m) = msg {
                let pass = format!("{} renderer", style.lang());
                return (checks, fail(variant, pass, m, Some(p.clone())));
            }
        }
    }
    // The CPU target's passes (interchange, split lanes, threads), interpreted; the C check below runs
    // this program (what the cpu backend compiles).
    checks += 1;
    let cpu_prog = match cpu_program(&k) {
        Err(e) => return (checks, fail("cpu", "cpu passes".into(), e, None)),
        Ok(p) => {
            if let Some(d) = differs(&p, &init, &want) {
                return (checks, fail("cpu", "cpu passes".into(), d, Some(p)));
            }
            p
        }
    };
    // The C renderer and the CPU runtime, for kernels without launch indices.
    if let Some(worker) = c.filter(|_| !cpu_prog.insts.iter().any(|i| i.op == Op::SPECIAL)) {
        checks += 1;
        let p0 = cpu_prog;
        match run_c(worker, &p0, &init) {
            Err(e) => {
                return (
                    checks,
                    fail("c", "C renderer/CPU runtime".into(), e, Some(p0)),
                )
            }
            Ok(got) => {
                let Outcome::Buffers(w) = &want else {
                    return (checks, lift_fail.unwrap_or(Check::Ok));
                };
                for (slot, decl) in p0.params.iter().enumerate() {
                    if decl.written && w[slot] != got[slot] {
                        let d = format!(
                            "param slot {slot}: reference {}, C on CPU {}",
                            Outcome::Buffers(vec![w[slot].clone()]),
                            Outcome::Buffers(vec![got[slot].clone()])
                        );
                        return (
                            checks,
                            fail("c", "C renderer/CPU runtime".into(), d, Some(p0)),
                        );
                    }
                }
            }
        }
    }
    (checks, lift_fail.unwrap_or(Check::Ok))
}

/// `k` after the CPU target's passes and the finishing ones, linearized.
fn cpu_program(k: &KernelGraph) -> Result<Program, String> {
    let mut k = k.clone();
    optimize::optimize_for(&mut k, Target::Cpu, None, &[]).map_err(|e| e.to_string())?;
    linearize(&k).map_err(|e| e.to_string())
}

/// `k` after the first `limit` (all: None) GPU passes and the finishing ones, linearized.
fn gpu_program(k: &KernelGraph, limit: Option<usize>) -> Result<Program, String> {
    let mut k = k.clone();
    optimize::optimize_for(&mut k, Target::Gpu, limit, &[]).map_err(|e| e.to_string())?;
    linearize(&k).map_err(|e| e.to_string())
}

/// The GPU pipeline on `k`; on a difference, the first pass whose prefix shows it.
fn gpu_check(
    variant: &'static str,
    k: &KernelGraph,
    init: &[Vec<Elem>],
    want: &Outcome,
) -> Option<Fail> {
    let bad = |p: &Result<Program, String>| match p {
        Err(e) => Some(e.clone()),
        Ok(p) => differs(p, init, want),
    };
    let full = gpu_program(k, None);
    let detail = bad(&full)?;
    let names: Vec<&'static str> = optimize::passes(Target::Gpu)
        .iter()
        .map(|p| p.name())
        .collect();
    // Prefix n = the first n passes (then the finishing ones).
    let mut pass = format!("{} (after the GPU passes)", finishing_names());
    let mut program = full.ok();
    for n in 0..=names.len() {
        let p = gpu_program(k, Some(n));
        if let Some(d) = bad(&p) {
            pass = match n {
                0 => finishing_names(),
                n => names[n - 1].to_string(),
            };
            program = p.ok().or(program);
            return Some(Fail {
                variant,
                pass,
                detail: d,
                program,
            });
        }
    }
    Some(Fail {
        variant,
        pass,
        detail,
        program,
    })
}

fn finishing_names() -> String {
    let n: Vec<&str> = finishing().iter().map(|p| p.name()).collect();
    n.join("+")
}

/// Starts the C variant's worker (the `cpu` backend in another process) and checks that C
/// compiles there (an empty request compiles an empty unit).
fn start_worker(opts: &KFuzzOpts) -> Result<ProcessBackend, KFuzzError> {
    let spawn = match &opts.worker {
        Some(sp) => sp.clone(),
        // This program was started as a worker yet is fuzzing: it does not serve workers
        // (no `serve_if_worker` first), so starting itself again would recurse.
        None if std::env::var_os(WORKER_ENV).is_some() => {
            return Err(KFuzzError::Worker(format!(
                "this program runs with {WORKER_ENV} set but fuzzes instead of serving: \
                 it cannot be its own C worker (set KFuzzOpts::worker)"
            )))
        }
        None => Spawn {
            program: std::env::current_exe()
                .map_err(|e| KFuzzError::Worker(format!("cannot find this program: {e}")))?
                .to_string_lossy()
                .into_owned(),
            args: vec![],
            env: vec![(WORKER_ENV.to_string(), "cpu".to_string())],
        },
    };
    let limits = Limits {
        timeout: opts.c_timeout,
        ..Limits::default()
    };
    let worker = ProcessBackend::start("c", spawn, limits).map_err(KFuzzError::Worker)?;
    let probe = ScheduleRequest {
        id: 0,
        case: "kfuzz C compiler check".into(),
        buffers: vec![],
        programs: vec![],
        steps: vec![],
        read: vec![],
    };
    match worker.run_schedule(&probe) {
        Ok(_) => Ok(worker),
        Err(BackendError::Failed(e)) => Err(KFuzzError::NoCompiler(e)),
        Err(e) => Err(KFuzzError::Worker(e.to_string())),
    }
}

/// `p`'s param buffers as kernel-level buffers `0..` on `CPU`, with `init`'s contents (only
/// for the params `p` does not write when `inputs_only`).
fn param_buffers(p: &Program, init: &[Vec<Elem>], inputs_only: bool) -> Vec<BufferSpec> {
    p.params
        .iter()
        .zip(init)
        .enumerate()
        .map(|(slot, (decl, data))| BufferSpec {
            id: slot as u32,
            dtype: decl.dtype.to_string(),
            size: decl.size,
            device: "CPU".into(),
            storage: slot as u32,
            init: (!(inputs_only && decl.written)).then(|| data.iter().map(elem_bits).collect()),
        })
        .collect()
}

/// The one step that runs `p` on its param buffers `0..`.
fn param_step(p: &Program) -> StepJson {
    StepJson::Kernel {
        program: 0,
        device: "CPU".into(),
        args: (0..p.params.len() as u32).collect(),
    }
}

/// Renders `p` as C, compiles it and runs it on `CPU:0` in the worker; the param buffers
/// after, or why not (a crash, a hang or an FP-state change of the worker included).
fn run_c(
    worker: &ProcessBackend,
    p: &Program,
    init: &[Vec<Elem>],
) -> Result<Vec<Vec<Option<u64>>>, String> {
    let req = ScheduleRequest {
        id: 0,
        case: format!("kfuzz {}", p.name),
        buffers: param_buffers(p, init, false),
        programs: vec![program_json(p)],
        steps: vec![param_step(p)],
        read: (0..p.params.len() as u32).collect(),
    };
    let got = worker.run_schedule(&req).map_err(|e| match e {
        BackendError::Died(why) => format!("the C worker failed: {why}"),
        e => e.to_string(),
    })?;
    if got.len() != p.params.len() {
        return Err(format!(
            "the C worker answered {} buffer(s) for {} params",
            got.len(),
            p.params.len()
        ));
    }
    p.params
        .iter()
        .zip(&got)
        .enumerate()
        .map(|(slot, (decl, b))| {
            if b.id != slot as u32 || b.data.len() != decl.size {
                return Err(format!(
                    "the C worker answered buffer {} with {} element(s) for param slot {slot} ({} elements)",
                    b.id,
                    b.data.len(),
                    decl.size
                ));
            }
            b.data
                .iter()
                .map(|e| parse_bits(decl.dtype, e))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the C worker's buffer {slot}: {e}"))
        })
        .collect()
}

/// Shrinks `r` while the same variant and pass fail; the smallest recipe and its failure.
fn shrink(
    r: &KernelRecipe,
    f: Fail,
    opts: &KFuzzOpts,
    c: Option<&ProcessBackend>,
) -> (KernelRecipe, Fail) {
    let mut best = r.clone();
    let mut best_fail = f;
    let mut tried = 0;
    'outer: loop {
        for cand in candidates(&best) {
            if tried >= opts.shrink_steps {
                break 'outer;
            }
            tried += 1;
            if let (_, Check::Fail(f2)) = check(&cand, c) {
                if f2.variant == best_fail.variant && f2.pass == best_fail.pass {
                    best = cand;
                    best_fail = f2;
                    continue 'outer;
                }
            }
        }
        break;
    }
    (best, best_fail)
}

/// Smaller recipes than `r`, the biggest steps first.
pub(crate) fn candidates(r: &KernelRecipe) -> Vec<KernelRecipe> {
    let mut out = vec![];
    if r.stmts.len() > 1 {
        for i in 0..r.stmts.len() {
            let mut c = r.clone();
            c.stmts.remove(i);
            out.push(c);
        }
    }
    for lanes in [2, 4] {
        if lanes < r.lanes {
            out.push(KernelRecipe { lanes, ..r.clone() });
        }
    }
    for i in 0..r.stmts.len() {
        let s = &r.stmts[i];
        let mut with = |s2: Stmt| {
            let mut c = r.clone();
            c.stmts[i] = s2;
            out.push(c);
        };
        match s {
            Stmt::Map { ends, e } => {
                for (ends2, _) in smaller_extents(ends) {
                    with(Stmt::Map {
                        ends: ends2,
                        e: e.clone(),
                    });
                }
                for e2 in smaller_exprs(e) {
                    with(Stmt::Map {
                        ends: ends.clone(),
                        e: e2,
                    });
                }
            }
            Stmt::Reduce {
                ends,
                red,
                op,
                order,
                e,
            } => {
                let mk = |ends: Vec<i64>, red: Vec<i64>, order, e| Stmt::Reduce {
                    ends,
                    red,
                    op: *op,
                    order,
                    e,
                };
                if !ends.is_empty() {
                    // Dropping an outer loop renumbers the variables: keep the expression's
                    // meaning for the rest by substituting zero for the dropped one.
                    let e2 = drop_var(e, 0);
                    with(mk(ends[1..].to_vec(), red.clone(), order.clone(), e2));
                }
                for (ends2, _) in smaller_extents(ends) {
                    with(mk(ends2, red.clone(), order.clone(), e.clone()));
                }
                for (red2, _) in smaller_extents(red) {
                    with(mk(ends.clone(), red2, order.clone(), e.clone()));
                }
                if *order != uopkit_interp::ir::ReduceOrder::Sequential {
                    with(mk(
                        ends.clone(),
                        red.clone(),
                        uopkit_interp::ir::ReduceOrder::Sequential,
                        e.clone(),
                    ));
                }
                for e2 in smaller_exprs(e) {
                    with(mk(ends.clone(), red.clone(), order.clone(), e2));
                }
            }
            Stmt::Exchange { shift, e } => {
                for e2 in smaller_exprs(e) {
                    with(Stmt::Exchange {
                        shift: *shift,
                        e: e2,
                    });
                }
            }
        }
    }
    out
}

/// Each extent set to 1, halved, and decremented (where smaller).
fn smaller_extents(ends: &[i64]) -> Vec<(Vec<i64>, usize)> {
    let mut out = vec![];
    for (d, &e) in ends.iter().enumerate() {
        let mut seen = vec![];
        for v in [1, e / 2, e - 1] {
            if v >= 1 && v < e && !seen.contains(&v) {
                seen.push(v);
                let mut c = ends.to_vec();
                c[d] = v;
                out.push((c, d));
            }
        }
    }
    out
}

/// `e` with variable `d` replaced by 0 and the later ones renumbered.
fn drop_var(e: &Expr, d: usize) -> Expr {
    match e {
        Expr::Var(v) if *v == d => Expr::Const(0),
        Expr::Var(v) if *v > d => Expr::Var(v - 1),
        Expr::Var(_) | Expr::Const(_) => e.clone(),
        Expr::Load {
            buf,
            coef,
            off,
            gate,
        } => {
            let mut c = coef.clone();
            if d < c.len() {
                c.remove(d);
            }
            Expr::Load {
                buf: *buf,
                coef: c,
                off: *off,
                gate: *gate,
            }
        }
        Expr::Bin(op, a, b) => Expr::Bin(*op, Box::new(drop_var(a, d)), Box::new(drop_var(b, d))),
        Expr::Select(x) => {
            let [a, b, c, dd] = &**x;
            Expr::Select(Box::new([
                drop_var(a, d),
                drop_var(b, d),
                drop_var(c, d),
                drop_var(dd, d),
            ]))
        }
    }
}

/// Simpler expressions: a constant, the operands, an ungated load, zero coefficients.
fn smaller_exprs(e: &Expr) -> Vec<Expr> {
    let mut out = vec![];
    match e {
        Expr::Const(c) if *c != 1 => out.push(Expr::Const(1)),
        Expr::Const(_) => {}
        Expr::Var(_) => out.push(Expr::Const(1)),
        Expr::Load {
            buf,
            coef,
            off,
            gate,
        } => {
            out.push(Expr::Const(1));
            if gate.is_some() {
                out.push(Expr::Load {
                    buf: *buf,
                    coef: coef.clone(),
                    off: *off,
                    gate: None,
                });
            }
            if *off > 0 {
                out.push(Expr::Load {
                    buf: *buf,
                    coef: coef.clone(),
                    off: 0,
                    gate: *gate,
                });
            }
            for d in 0..coef.len() {
                if coef[d] != 0 {
                    let mut c = coef.clone();
                    c[d] = if coef[d] > 1 { 1 } else { 0 };
                    out.push(Expr::Load {
                        buf: *buf,
                        coef: c,
                        off: *off,
                        gate: *gate,
                    });
                }
            }
        }
        Expr::Bin(op, a, b) => {
            out.push((**a).clone());
            out.push((**b).clone());
            for a2 in smaller_exprs(a) {
                out.push(Expr::Bin(*op, Box::new(a2), b.clone()));
            }
            for b2 in smaller_exprs(b) {
                out.push(Expr::Bin(*op, a.clone(), Box::new(b2)));
            }
        }
        Expr::Select(x) => {
            out.push(x[2].clone());
            out.push(x[3].clone());
        }
    }
    out
}

/// The finding as a kernel-level case: its failing program, the inputs, and the reference's
/// outputs as expectations. None when there is no failing program (a pass stopped with an
/// error) or the reference left an output element unwritten.
pub fn finding_case(f: &Finding) -> Option<Case> {
    let description = format!(
        "kernel fuzz (seed {}): variant {}, introduced by {}: {}",
        f.seed,
        f.variant,
        f.pass,
        f.detail.lines().next().unwrap_or("")
    );
    let tags = vec!["kernel".into(), "kfuzz".into(), f.pass.clone()];
    program_case(f.program.as_ref()?, &f.recipe, description, tags)
}

/// `p` (a program over `recipe`'s params) as a kernel-level case: the recipe's inputs, and
/// the outputs of the recipe's reference program (the kernel interpreter's) as expectations.
/// None when the recipe does not build or its reference leaves an output element unwritten.
pub(crate) fn program_case(
    p: &Program,
    recipe: &KernelRecipe,
    description: String,
    tags: Vec<String>,
) -> Option<Case> {
    let init = kernel::inputs(recipe);
    let k = graph(recipe).ok()?;
    let p0 = lowered(&k, &finishing()).ok()?;
    let Outcome::Buffers(want) = interpret(&p0, &init, GPU_SEEDS[0]) else {
        return None;
    };
    let mut expect = vec![];
    for (slot, decl) in p.params.iter().enumerate() {
        if decl.written {
            let bits = want.get(slot)?;
            let lits = bits
                .iter()
                .map(|b| b.map(|b| serde_json::Value::String(hex(b))))
                .collect::<Option<Vec<_>>>()?;
            expect.push(BufferExpect {
                name: format!("out{slot}"),
                buffer: slot as u32,
                expect: lits,
                nan: NanPolicy::default(),
            });
        }
    }
    Some(Case {
        format: "uopkit-case/1".into(),
        description,
        tags,
        graph: vec![],
        kernel: Some(KernelBody {
            buffers: param_buffers(p, &init, true),
            programs: vec![program_json(p)],
            steps: vec![param_step(p)],
            expect,
        }),
        inputs: Default::default(),
        outputs: vec![],
        expect_error: None,
        schedule: None,
    })
}

/// The name of a finding's case file: `kfuzz_<hash>.json`, the hash of the case without its
/// description (which names the seed that found it), so one counterexample has one file
/// whichever seed finds it, and two different ones have two.
pub fn case_file_name(case: &Case) -> String {
    let content = Case {
        description: String::new(),
        ..case.clone()
    };
    let text = serde_json::to_string(&content).unwrap_or_default();
    let hash = Sha256::digest(text.as_bytes());
    let name: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("kfuzz_{name}.json")
}

/// Writes the finding's case as [`case_file_name`] in `dir` (atomically; an existing file
/// of that name is the same counterexample and is left alone).
fn write_case(dir: &Path, f: &Finding) -> Result<Option<PathBuf>, KFuzzError> {
    let Some(case) = finding_case(f) else {
        return Ok(None);
    };
    let text = serde_json::to_string_pretty(&case).unwrap_or_default() + "\n";
    let path = dir.join(case_file_name(&case));
    let io = |source| KFuzzError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    if !path.exists() {
        crate::atomic::write_atomic(&path, text.as_bytes()).map_err(io)?;
    }
    Ok(Some(path))
}
