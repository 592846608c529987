//! The differential fuzzer (`uopkit_conformance::fuzz`) in CI:
//!
//! * a short fixed-seed run: generated tensor programs through the CPU compiler and the
//!   oracle, no mismatch allowed;
//! * proof that it finds bugs: with the compiler's deliberately wrong rule `fault_mod_drop`
//!   switched on (for this test's thread; the fuzzer runs on the calling thread), it finds a
//!   counterexample within a bounded number of cases and shrinks it to a handful of nodes.
//!   The figures are printed (`cargo test --test fuzz_pipeline -- --nocapture`).
//!
//! Shrunk cases go to a temporary directory here, never to `corpus/regressions/`.

use std::path::Path;
use std::time::Instant;

use uopkit_compiler::rewrite::faults;
use uopkit_conformance::case::Case;
use uopkit_conformance::fuzz::{self, FailClass, FuzzOpts};
use uopkit_conformance::{backend, load, run};

/// Generated cases in the CI run (with the seed below it takes a few seconds).
const CI_CASES: u64 = 200;
const CI_SEED: u64 = 2026;

/// The fuzzer must find `fault_mod_drop` within this many cases …
const FAULT_MAX_CASES: u64 = 500;
/// … and shrink the counterexample to at most this many nodes.
const FAULT_MAX_NODES: usize = 8;

fn opts(dir: &Path, seed: u64, max_cases: u64) -> FuzzOpts {
    FuzzOpts {
        backend: "cpu".into(),
        seconds: 600,
        seed,
        max_cases: Some(max_cases),
        out_dir: dir.to_path_buf(),
        ..FuzzOpts::default()
    }
}

#[test]
fn fixed_seed_fuzz_finds_no_mismatch() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let t = Instant::now();
    // A valid graph the compiler refuses to schedule is a failure too.
    let report = fuzz::run(FuzzOpts {
        refusals_fail: true,
        ..opts(dir.path(), CI_SEED, CI_CASES)
    })
    .expect("the fuzzer runs");
    println!("{report}");
    println!("(took {:.1}s)", t.elapsed().as_secs_f64());
    assert!(
        report.ok(),
        "the CPU backend disagrees with the oracle:\n{report}"
    );
    assert_eq!(report.cases, CI_CASES);
    assert!(
        report.passed >= CI_CASES * 3 / 4,
        "too many generated cases were skipped (oracle UB or unsupported): {report}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "nothing written without a failure"
    );
}

#[test]
fn the_fuzzer_finds_and_shrinks_the_wrong_rule_fault_mod_drop() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let t = Instant::now();
    faults::set_active(&["fault_mod_drop"]);
    let report = fuzz::run(opts(dir.path(), 1, FAULT_MAX_CASES));
    faults::set_active(&[]);
    let report = report.expect("the fuzzer runs");
    println!("{report}");
    let f = report.failures.first().unwrap_or_else(|| {
        panic!("fault_mod_drop not found in {FAULT_MAX_CASES} cases:\n{report}")
    });
    println!(
        "fault_mod_drop: found at case #{} of seed 1, shrunk from {} to {} nodes with {} shrink checks, {:.1}s in all",
        f.case_number,
        f.nodes_before,
        f.nodes_after,
        f.shrink_checks,
        t.elapsed().as_secs_f64()
    );
    println!("original program:\n  {}", f.program.join("\n  "));
    println!("shrunk case:\n{}", f.case.to_canonical_string());
    assert_eq!(f.class, FailClass::Mismatch, "{}", f.message);
    assert!(f.case_number <= FAULT_MAX_CASES);
    assert!(
        f.nodes_after <= FAULT_MAX_NODES,
        "shrunk to {} nodes only:\n{}",
        f.nodes_after,
        f.case.to_canonical_string()
    );
    assert!(f.path.starts_with(dir.path()));
    // The written case: canonical, tagged, its expectations are the oracle's; the backend
    // disagrees with the fault on and agrees without it.
    let text = std::fs::read_to_string(&f.path).expect("written");
    let case: Case = load::parse_case(&text).expect("parses");
    assert_eq!(case.to_canonical_string(), text);
    assert!(case.tags.contains(&"regression".to_string()));
    assert!(case
        .description
        .contains("expected values from the oracle at discovery time"));
    assert!(run::check_oracle(&case).is_ok());
    faults::set_active(&["fault_mod_drop"]);
    let with_fault = backend::check_cpu(&case);
    faults::set_active(&[]);
    assert!(with_fault.is_err(), "the shrunk case no longer fails");
    assert!(
        backend::check_cpu(&case).is_ok(),
        "the shrunk case fails without the fault"
    );
    let allow = backend::cpu_allowances().expect("cpu manifest");
    assert_eq!(
        fuzz::first_divergence(&case, &uopkit_conformance::backends::cpu::Cpu, allow),
        None
    );
}

#[test]
fn findings_are_deduplicated_and_files_never_overwritten() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let parse = |description: &str| -> Case {
        load::parse_case(&format!(
            r#"{{"format": "uopkit-case/1", "description": "{description}", "graph": [{{"id": 0, "op": "CONST", "dtype": "int32", "arg": 3}}], "outputs": []}}"#
        ))
        .expect("parses")
    };
    let case = parse("found by seed 7");
    let id = fuzz::finding_id(&case);
    assert_eq!(id.len(), 16);
    let a = fuzz::write_new(dir.path(), "fuzz", &case).expect("written");
    assert_eq!(
        a.file_name().unwrap().to_string_lossy(),
        format!("fuzz_{id}.json")
    );
    // The same shrunk case again (another seed says so in its description): the same file,
    // left as it was.
    let b = fuzz::write_new(dir.path(), "fuzz", &parse("found by seed 8")).expect("written");
    assert_eq!(a, b);
    assert!(std::fs::read_to_string(&a).unwrap().contains("seed 7"));
    // A different file under the finding's name is never overwritten.
    std::fs::write(&a, "taken").expect("written");
    let c = fuzz::write_new(dir.path(), "fuzz", &case).expect("written");
    assert_eq!(
        c.file_name().unwrap().to_string_lossy(),
        format!("fuzz_{id}_2.json")
    );
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "taken");
    // Another case: another identity.
    let other = load::parse_case(
        r#"{"format": "uopkit-case/1", "description": "found by seed 7", "graph": [{"id": 0, "op": "CONST", "dtype": "int32", "arg": 4}], "outputs": []}"#,
    )
    .expect("parses");
    assert_ne!(fuzz::finding_id(&other), id);
    let only: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(only.len(), 2, "{only:?}");
}

#[test]
fn unknown_backends_are_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let o = FuzzOpts {
        backend: "tpu".into(),
        ..opts(dir.path(), 0, 1)
    };
    let e = fuzz::run(o).expect_err("no such backend");
    assert!(e.to_string().contains("unknown backend"), "{e}");
}

/// Multi-device generated cases in the CI run (each compiles a few small kernels).
const MULTI_CASES: u64 = 80;

/// The multi-device generator (`TensorConfig::multi_device`: sharding, ALLREDUCE, gathering
/// across CPU devices) in CI: a short fixed-seed run, no mismatch allowed, and the run must
/// really contain multi-device programs (counted by regenerating the seed's recipes).
#[test]
fn fixed_seed_multi_device_fuzz_finds_no_mismatch() {
    use proptest::strategy::{Strategy, ValueTree};
    use uopkit_conformance::gen::rules::seeded_runner;
    use uopkit_conformance::gen::tensor::{build, recipe, TensorConfig};
    use uopkit_interp::ir::Op;

    let gen = TensorConfig {
        multi_device: true,
        ..TensorConfig::default()
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let t = Instant::now();
    let report = fuzz::run(FuzzOpts {
        gen: gen.clone(),
        ..opts(dir.path(), CI_SEED, MULTI_CASES)
    })
    .expect("the fuzzer runs");
    println!("{report}");
    println!("(took {:.1}s)", t.elapsed().as_secs_f64());
    assert!(
        report.ok(),
        "the CPU backend disagrees with the oracle:\n{report}"
    );
    assert_eq!(report.cases, MULTI_CASES);
    assert!(
        report.passed >= MULTI_CASES / 2,
        "too many generated cases were skipped: {report}"
    );
    // The same recipes the fuzzer ran (its seeded runner, one tree per case).
    let strategy = recipe(&gen);
    let mut runner = seeded_runner(1, CI_SEED, 0);
    let multi = (0..MULTI_CASES)
        .filter(|_| {
            let r = strategy.new_tree(&mut runner).expect("a recipe").current();
            build(&r, &gen).case.graph.iter().any(|n| {
                matches!(n.op, Op::MSTACK | Op::ALLREDUCE) || (n.op == Op::COPY && n.arg.is_array())
            })
        })
        .count();
    assert!(
        multi >= 10,
        "only {multi} of {MULTI_CASES} programs were multi-device"
    );
}
