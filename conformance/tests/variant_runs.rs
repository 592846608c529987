//! A backend may report other runs of a case besides its first (`Ran::variants`, the
//! protocol's `variants`: the cpu backend's run with every parallel loop in 3 chunks on
//! threads). The harness compares each with the oracle once the first run agrees: a variant
//! that differs fails the trial as a mismatch naming the variant, one that failed to run
//! fails it as a backend error, and a first run that differs is judged by itself.

use std::path::Path;

use uopkit_conformance::allowances::Allowances;
use uopkit_conformance::backends::{kernels::Kernels, Backend, BackendError, Job, Ran, Variant};
use uopkit_conformance::harness::{self, FailKind, Verdict};
use uopkit_conformance::load::read_case;
use uopkit_interp::eval::{Data, Elem, Value};

#[derive(Clone, Copy)]
enum Twist {
    /// The variant is the first run's outputs unchanged.
    Same,
    /// The variant's first element of each output has one bit flipped.
    VariantOff,
    /// The variant failed to run.
    VariantFails,
    /// The first run is off by one bit; the variant is right.
    FirstOff,
}

struct WithVariant(Twist);

fn flip_first(outputs: &mut [Option<Value>]) {
    for v in outputs.iter_mut().flatten() {
        if let Data::Single(elems) = &mut v.data {
            if let Some(Elem::Bits(b)) = elems.first_mut() {
                *b ^= 1;
            }
        }
    }
}

impl Backend for WithVariant {
    fn name(&self) -> &str {
        "with-variant"
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let mut ran = Kernels.run(job)?;
        let mut other = ran.outputs.clone();
        match self.0 {
            Twist::Same => {}
            Twist::VariantOff => flip_first(&mut other),
            Twist::FirstOff => flip_first(&mut ran.outputs),
            Twist::VariantFails => {}
        }
        ran.variants.push(Variant {
            label: "4 threads".into(),
            outputs: match self.0 {
                Twist::VariantFails => Err("thread 2 crashed".into()),
                _ => Ok(other),
            },
        });
        Ok(ran)
    }
}

const CASE: &str = "alu/add_float32";

fn judge(t: Twist) -> Verdict {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(format!("{CASE}.json"));
    let case = read_case(&path).expect("case");
    harness::judge(
        &case,
        CASE,
        &WithVariant(t),
        &Allowances::strict("with-variant"),
    )
}

/// The failure's kind and report (a panic if the trial did not fail).
fn failure(t: Twist) -> (FailKind, String) {
    match judge(t) {
        Verdict::Fail { kind, message } => (kind, message),
        v => panic!("expected a failure, got {v:?}"),
    }
}

#[test]
fn a_variant_with_the_oracle_s_bits_passes() {
    assert_eq!(judge(Twist::Same), Verdict::Pass);
}

#[test]
fn a_variant_that_differs_is_a_mismatch_naming_it() {
    let (kind, report) = failure(Twist::VariantOff);
    assert_eq!(kind, FailKind::Mismatch);
    assert!(
        report.contains("the first run agrees with the oracle, the run with 4 threads does not"),
        "{report}"
    );
}

#[test]
fn a_variant_that_failed_is_a_backend_failure_naming_it() {
    let (kind, report) = failure(Twist::VariantFails);
    assert_eq!(kind, FailKind::Backend);
    assert!(
        report.contains("the run with 4 threads failed: thread 2 crashed"),
        "{report}"
    );
}

#[test]
fn a_first_run_that_differs_is_judged_by_itself() {
    let (kind, report) = failure(Twist::FirstOff);
    assert_eq!(kind, FailKind::Mismatch);
    assert!(!report.contains("4 threads"), "{report}");
}
