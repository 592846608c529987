//! The kernel-level fuzzer (`uopkit_conformance::kfuzz`, `uopkit fuzz-kernels`):
//!
//! * a clean run over a fixed seed range finds nothing (and no generated kernel is invalid);
//! * with the compiler's test-only faults on — `fault_gpu_barrier_drop` (the GPU local
//!   reduction leaves out the barrier after the partial sums) and `fault_local_misindex`
//!   (a level of its tree reads the local buffer one element too low) — it finds the bug
//!   within a small seed budget, names the pass `gpu_local_reduce`, shrinks the kernel, and
//!   writes a kernel-level case that loads and that the oracle's trial reports as failing;
//! * the C variant runs in a worker process (`uopkit` as the `cpu` worker): compiled kernels
//!   that crash it (SIGSEGV) or hang past the time limit are `c` findings, the worker is
//!   replaced and the run goes on, in this (the oracle's) process.

use std::path::Path;
use std::time::Duration;

use uopkit_compiler::rewrite::faults;
use uopkit_conformance::backends::process::Spawn;
use uopkit_conformance::case::Case;
use uopkit_conformance::kernel_case;
use uopkit_conformance::kfuzz::{self, KFuzzOpts, KFuzzReport};
use uopkit_conformance::worker::WORKER_ENV;

mod common;

/// Seeds 0..120: among them 20, 93, 99 and 112, the kernels on which the fuzzer found the
/// lift bug (a barrier or store after a loop that only read a register buffer; see
/// `compiler/tests/kernel_graph.rs`).
const CLEAN_SEED: u64 = 0;
const CLEAN_PROGRAMS: u64 = 120;
/// The fault must be found within this many kernels.
const FAULT_BUDGET: u64 = 60;

/// The C variant's worker: the `uopkit` binary serving `cpu` (this test binary cannot serve).
fn worker(env: &[(&str, String)]) -> Spawn {
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    env.push((WORKER_ENV.to_string(), "cpu".to_string()));
    Spawn {
        program: env!("CARGO_BIN_EXE_uopkit").to_string(),
        args: vec![],
        env,
    }
}

fn opts(dir: Option<&Path>, seed: u64, programs: u64) -> KFuzzOpts {
    KFuzzOpts {
        seconds: 600,
        seed,
        max_programs: Some(programs),
        out_dir: dir.map(Path::to_path_buf),
        worker: Some(worker(&[])),
        ..KFuzzOpts::default()
    }
}

fn summary(r: &KFuzzReport) -> String {
    let mut s = format!(
        "{} kernels, {} checks, {} invalid, {} findings\n",
        r.programs,
        r.checks,
        r.invalid.len(),
        r.findings.len()
    );
    for (seed, why) in &r.invalid {
        s += &format!("invalid seed {seed}: {why}\n");
    }
    for f in &r.findings {
        s += &format!(
            "seed {} variant {} pass {}: {}\nrecipe {:?}\n",
            f.seed, f.variant, f.pass, f.detail, f.recipe
        );
        if let Some(p) = &f.program {
            s += &format!("{p}\n");
        }
    }
    s
}

#[test]
fn a_clean_kernel_fuzz_run_finds_nothing() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let r = kfuzz::run(&KFuzzOpts {
        max_failures: u64::MAX,
        ..opts(Some(dir.path()), CLEAN_SEED, CLEAN_PROGRAMS)
    })
    .expect("runs");
    let text = summary(&r);
    assert_eq!(r.programs, CLEAN_PROGRAMS, "{text}");
    assert!(
        r.invalid.is_empty(),
        "generated kernels must be valid:\n{text}"
    );
    assert!(
        r.findings.is_empty(),
        "a clean compiler has no findings:\n{text}"
    );
    // lift, symbolic, gpu, lift+gpu on every kernel at least.
    assert!(r.checks >= 4 * CLEAN_PROGRAMS, "{text}");
    // No finding, no case written.
    assert_eq!(
        std::fs::read_dir(dir.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

/// Runs with `fault` on and checks what the fuzzer reports and writes.
fn finds(fault: &'static str) {
    let dir = tempfile::tempdir().expect("a temp dir");
    faults::set_active(&[fault]);
    let r = kfuzz::run(&opts(Some(dir.path()), 0, FAULT_BUDGET));
    faults::set_active(&[]);
    let r = r.expect("runs");
    let text = summary(&r);
    let f = r
        .findings
        .first()
        .unwrap_or_else(|| panic!("{fault} not found in {FAULT_BUDGET} kernels:\n{text}"));
    assert!(f.variant == "gpu" || f.variant == "lift+gpu", "{text}");
    assert_eq!(
        f.pass, "gpu_local_reduce",
        "the pass that introduced it:\n{text}"
    );
    // Shrunk: one statement, a single top-level reduction.
    assert_eq!(f.recipe.stmts.len(), 1, "{text}");
    let path = f.case_path.as_ref().expect("a case was written");
    let bytes = std::fs::read(path).expect("readable");
    let case: Case = serde_json::from_slice(&bytes).expect("a case file");
    let body = case.kernel.as_ref().expect("a kernel-level case");
    kernel_case::load(body).expect("a valid kernel-level case");
    let p = &body.programs[0];
    assert!(p.insts.iter().any(|i| i.op == "SPECIAL"), "{text}");
    let verdict = kernel_case::judge(&case, body);
    let why = verdict.expect_err("the oracle's trial of the written case fails");
    assert!(
        why.contains("differ from the case's expectations"),
        "a wrong value or poison read: {why}"
    );
    assert!(
        case.description.contains("gpu_local_reduce"),
        "{}",
        case.description
    );
}

#[test]
fn the_kernel_fuzzer_finds_a_dropped_barrier() {
    finds("fault_gpu_barrier_drop");
}

#[test]
fn the_kernel_fuzzer_finds_a_misindexed_local_buffer() {
    finds("fault_local_misindex");
}

#[test]
fn the_cli_runs_a_clean_kernel_fuzz() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().to_string_lossy().to_string();
    let o = common::uopkit(&[
        "fuzz-kernels",
        "--programs",
        "8",
        "--seed",
        "3",
        "--out",
        &out,
    ]);
    let all = o.all();
    assert_eq!(o.code, 0, "{all}");
    assert!(
        all.contains("fuzz-kernels: 8 kernels") && all.contains("0 finding(s)"),
        "{all}"
    );
}

/// A machine where the C variant cannot compile is a setup error (exit 2, nothing written),
/// not a finding; `--no-c` fuzzes without it.
#[test]
fn the_cli_without_a_c_compiler_is_a_setup_error() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("found");
    let out = out.to_string_lossy().to_string();
    let args = [
        "fuzz-kernels",
        "--programs",
        "4",
        "--seed",
        "3",
        "--out",
        &out,
    ];
    let o = common::uopkit_with(&args, &[("UOPKIT_CC", "/nonexistent/cc")], &[]);
    let all = o.all();
    assert_eq!(o.code, 2, "{all}");
    assert!(
        all.contains("the C variant cannot run here") && all.contains("--no-c"),
        "{all}"
    );
    assert!(
        !dir.path().join("found").exists(),
        "no case is written: {all}"
    );
    let mut no_c = args.to_vec();
    no_c.push("--no-c");
    let o = common::uopkit_with(&no_c, &[("UOPKIT_CC", "/nonexistent/cc")], &[]);
    assert_eq!(o.code, 0, "{}", o.all());
}

/// A C compiler wrapper for the worker: units that hold a kernel (named `kfuzz…`) get a
/// constructor with `fault` added, so loading the compiled kernel crashes or hangs the
/// process that loads it; the empty unit of the fuzzer's compiler check compiles as it is.
fn faulty_cc(dir: &Path, fault: &str) -> Vec<(&'static str, String)> {
    let script = dir.join("cc.sh");
    let text = format!(
        "#!/bin/sh\nsrc=$(cat)\ncase \"$src\" in\n  *kfuzz*) extra='{fault}' ;;\n  *) extra='' ;;\nesac\nprintf '%s\\n%s\\n' \"$src\" \"$extra\" | cc \"$@\"\n"
    );
    std::fs::write(&script, text).expect("write the wrapper");
    let cache = dir.join("cache");
    vec![
        ("UOPKIT_CC", format!("sh {}", script.display())),
        ("UOPKIT_CACHE_DIR", cache.to_string_lossy().into_owned()),
    ]
}

const SEGV: &str = "#include <signal.h>\n__attribute__((constructor)) static void uopkit_test_fault(void) { signal(SIGSEGV, SIG_DFL); raise(SIGSEGV); }";
const HANG: &str = "__attribute__((constructor)) static void uopkit_test_fault(void) { volatile int on = 1; while (on) {} }";

/// Runs `programs` kernels with the worker's C compiler wrapped to add `fault`.
fn run_with_faulty_c(
    fault: &str,
    programs: u64,
    timeout: Duration,
) -> (KFuzzReport, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let env = faulty_cc(dir.path(), fault);
    let out = dir.path().join("found");
    let r = kfuzz::run(&KFuzzOpts {
        max_failures: u64::MAX,
        shrink_steps: 0,
        c_timeout: timeout,
        worker: Some(worker(&env)),
        ..opts(Some(&out), CLEAN_SEED, programs)
    })
    .expect("runs");
    (r, dir)
}

/// Compiled kernels that kill the worker with SIGSEGV are `c` findings; the worker is
/// replaced after each and every kernel is still checked, here, where the oracle runs.
#[test]
fn a_crashing_compiled_kernel_is_a_c_finding_and_the_run_goes_on() {
    let programs = 6;
    let (r, _dir) = run_with_faulty_c(SEGV, programs, Duration::from_secs(60));
    let text = summary(&r);
    assert_eq!(r.programs, programs, "every kernel is checked:\n{text}");
    assert!(
        r.findings.len() >= 2,
        "each kernel the C variant runs crashes its worker (a fresh worker each time):\n{text}"
    );
    for f in &r.findings {
        assert_eq!(f.variant, "c", "{text}");
        assert!(
            f.detail.contains("the C worker failed") && f.detail.contains("SIGSEGV"),
            "{text}"
        );
        // The case holds the reference program the C backend failed on: the oracle passes it.
        let path = f.case_path.as_ref().expect("a case was written");
        let case: Case =
            serde_json::from_slice(&std::fs::read(path).expect("readable")).expect("a case file");
        let body = case.kernel.as_ref().expect("a kernel-level case");
        kernel_case::judge(&case, body).expect("the oracle's trial of the reference passes");
    }
}

/// A compiled kernel that hangs is killed at the time limit and is a `c` finding.
#[test]
fn a_hanging_compiled_kernel_is_a_c_finding() {
    let (r, _dir) = run_with_faulty_c(HANG, 3, Duration::from_secs(3));
    let text = summary(&r);
    assert_eq!(r.programs, 3, "{text}");
    let f = r
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding:\n{text}"));
    assert_eq!(f.variant, "c", "{text}");
    assert!(f.detail.contains("no answer within 3 s"), "{text}");
}

/// `uopkit fuzz-kernels --c-timeout S` is the C variant's limit per kernel: a compiled kernel
/// that hangs is killed after S seconds and is a finding that says so (exit 1); a limit that
/// is not a positive number of seconds is bad input (exit 2).
#[test]
fn the_cli_takes_the_c_time_limit() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let env = faulty_cc(dir.path(), HANG);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = dir.path().join("found");
    let out = out.to_string_lossy().to_string();
    let t0 = std::time::Instant::now();
    let o = common::uopkit_with(
        &[
            "fuzz-kernels",
            "--programs",
            "1",
            "--seed",
            "0",
            "--out",
            &out,
            "--c-timeout",
            "1",
        ],
        &env,
        &[],
    );
    let all = o.all();
    eprintln!("{all}\n({:.1} s)", t0.elapsed().as_secs_f64());
    assert_eq!(o.code, 1, "{all}");
    assert!(all.contains("1 finding(s)"), "{all}");
    assert!(all.contains("no answer within 1 s"), "{all}");
    for bad in ["0", "-2", "nan", "inf", "x"] {
        let o = common::uopkit(&["fuzz-kernels", "--programs", "1", "--c-timeout", bad]);
        assert_eq!(o.code, 2, "--c-timeout {bad}: {}", o.all());
    }
}
