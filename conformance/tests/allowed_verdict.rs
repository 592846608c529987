//! A trial that passes only because an allowance let some elements differ from the oracle is
//! reported as `allowed`, naming the allowance and how many elements it covered — never as a
//! plain pass, and never when the bits are identical.

use std::path::Path;

use uopkit_conformance::allowances::Allowances;
use uopkit_conformance::backends::{kernels::Kernels, Backend, BackendError, Job, Ran};
use uopkit_conformance::harness::{self, Verdict};
use uopkit_conformance::load::read_case;
use uopkit_interp::eval::{Data, Elem};

/// The kernel interpreter (bit-exact), with `ulps` added to the bits of the first element of
/// every output.
struct Nudged {
    ulps: u64,
}

impl Backend for Nudged {
    fn name(&self) -> &str {
        "nudged"
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let mut ran = Kernels.run(job)?;
        for v in ran.outputs.iter_mut().flatten() {
            if let Data::Single(elems) = &mut v.data {
                if let Some(Elem::Bits(b)) = elems.first_mut() {
                    *b += self.ulps;
                }
            }
        }
        Ok(ran)
    }
}

const CASE: &str = "alu/add_float32";

fn manifest(ulp: u64) -> Allowances {
    Allowances::parse(&format!(
        r#"{{"format": "uopkit-allowances/1", "backend": "nudged",
            "description": "test", "reassociate_reductions": false,
            "reassociate_allreduce": false, "flush_subnormals": [], "contract_mul_add": false,
            "ulp": {{}},
            "overrides": [{{"case": "{CASE}", "compare": {{"ulp": {ulp}}},
                            "reason": "a test budget"}}]}}"#
    ))
    .expect("manifest")
}

fn judge(ulps: u64, allow: &Allowances) -> Verdict {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(format!("{CASE}.json"));
    let case = read_case(&path).expect("case");
    harness::judge(&case, CASE, &Nudged { ulps }, allow)
}

#[test]
fn a_deviation_inside_an_override_is_allowed_and_says_by_what() {
    let v = judge(2, &manifest(3));
    let Verdict::Allowed(by) = &v else {
        panic!("expected an allowed verdict, got {v:?}");
    };
    assert_eq!(v.label(), "allowed");
    assert!(!v.is_failure());
    assert!(by.contains("1 of"), "{by}");
    assert!(by.contains("allowed by ulp(3), worst 2 ULP"), "{by}");
    assert!(
        by.contains("nudged manifest override: a test budget"),
        "{by}"
    );
}

#[test]
fn identical_bits_are_a_plain_pass_even_under_an_allowance() {
    assert_eq!(judge(0, &manifest(3)), Verdict::Pass);
}

#[test]
fn a_deviation_past_the_allowance_fails() {
    let v = judge(4, &manifest(3));
    assert!(matches!(v, Verdict::Fail { .. }), "{v:?}");
    let strict = judge(1, &Allowances::strict("nudged"));
    assert!(matches!(strict, Verdict::Fail { .. }), "{strict:?}");
}

#[test]
fn tallies_count_allowed_trials_as_passed_and_say_how_many() {
    let mut t = harness::Tally::default();
    t.add(&judge(2, &manifest(3)));
    t.add(&Verdict::Pass);
    assert_eq!((t.passed, t.allowed), (2, 1));
    assert!(
        t.line().starts_with("2 passed (1 allowed), 0 failed"),
        "{}",
        t.line()
    );
}

#[test]
fn diff_does_not_call_an_allowed_rendered_stage_a_difference() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(format!("{CASE}.json"));
    let case = read_case(&path).expect("case");
    let allow = manifest(3);
    let nudged = Nudged { ulps: 2 };
    let report = harness::diff(&case, CASE, Some((&nudged, &allow))).expect("diff runs");
    let rendered = report.stages.last().expect("a rendered stage");
    assert_eq!(rendered.stage, "rendered: nudged");
    assert_eq!(rendered.difference, None);
    assert!(report.first.is_none(), "{:?}", report.first);
    // Past the allowance it is a difference.
    let far = Nudged { ulps: 4 };
    let report = harness::diff(&case, CASE, Some((&far, &allow))).expect("diff runs");
    assert!(report.first.is_some());
}
