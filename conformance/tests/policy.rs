//! The comparison policy has teeth: every mode rejects what it must and accepts what it may,
//! reports say why, manifests load and validate, and the expected-failure list cannot go stale.

use serde_json::json;
use uopkit_conformance::allowances::{self, Allowances};
use uopkit_conformance::case::{Case, Compare, NanPolicy, Output};
use uopkit_conformance::compare::{self, Limit};
use uopkit_conformance::run::{self, OracleRun};
use uopkit_conformance::xfail::{self, Outcome, Xfail};
use uopkit_interp::bounds::{Bound, ReduceOrder};
use uopkit_interp::eval::{Data, Elem, Value};
use uopkit_interp::ir::{DType, Op};

/// SplitMix64 (the case format's PRNG).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float32 with a random mantissa, sign and exponent in [-e, e].
    fn f32(&mut self, e: u64) -> f32 {
        let r = self.next();
        let mant = 1.0 + (r >> 40) as f64 / (1u64 << 24) as f64;
        let exp = ((r >> 8) % (2 * e + 1)) as i32 - e as i32;
        let v = (mant * 2f64.powi(exp)) as f32;
        if r & 1 == 1 {
            -v
        } else {
            v
        }
    }
}

fn case(v: serde_json::Value) -> Case {
    serde_json::from_value(v).expect("a valid case")
}

fn oracle(c: &Case) -> OracleRun {
    run::run_oracle(c).expect("the oracle runs")
}

fn out_value<'a>(c: &Case, r: &'a OracleRun, k: usize) -> &'a Value {
    run::output_values(c, r).expect("outputs")[k]
}

fn bits(v: &Value) -> Vec<u64> {
    v.data
        .components()
        .iter()
        .flatten()
        .map(|e| match e {
            Elem::Bits(b) => *b,
            Elem::Uninit { .. } => panic!("uninit"),
        })
        .collect()
}

/// `v` with element `i` (flat, single component) replaced.
fn with(v: &Value, edits: &[(usize, u64)]) -> Value {
    let mut b = bits(v);
    for &(i, x) in edits {
        b[i] = x;
    }
    Value {
        dtype: v.dtype,
        shape: v.shape.clone(),
        data: Data::Single(b.into_iter().map(Elem::Bits).collect()),
    }
}

fn hex32(x: f32) -> String {
    format!("0x{:08x}", x.to_bits())
}

/// Σ of `n` pseudo-random float32 values: a 10k-term sum whose order matters.
fn sum_case(n: usize, seed: u64, mode: &str) -> (Case, Vec<f32>) {
    let mut rng = Rng(seed);
    let xs: Vec<f32> = (0..n).map(|_| rng.f32(16)).collect();
    let data: Vec<String> = xs.iter().map(|&x| hex32(x)).collect();
    let c = case(json!({
        "format": "uopkit-case/1",
        "description": "a long float32 sum (policy test)",
        "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 0, "size": n, "device": "CPU"}},
            {"id": 1, "op": "REDUCE", "dtype": "float32", "src": [0], "arg": ["ADD", 1]}
        ],
        "inputs": {"0": {"data": data}},
        "outputs": [{"name": "sum", "node": 1, "shape": [], "expect": [0], "compare": mode}]
    }));
    (c, xs)
}

fn reassociating() -> Allowances {
    Allowances {
        reassociate_reductions: true,
        ..Allowances::strict("test")
    }
}

fn f32_value(x: f32) -> Value {
    Value {
        dtype: DType::Float32,
        shape: vec![],
        data: Data::Single(vec![Elem::Bits(x.to_bits() as u64)]),
    }
}

// ---- exact and ulp ----

fn add_case(compare: serde_json::Value, nan: &str) -> Case {
    case(json!({
        "format": "uopkit-case/1",
        "description": "a + b on float32 (policy test)",
        "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 0, "size": 4, "device": "CPU"}},
            {"id": 1, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 1, "size": 4, "device": "CPU"}},
            {"id": 2, "op": "ADD", "dtype": "float32", "src": [0, 1]}
        ],
        "inputs": {"0": {"data": [1, 2.5, "-0.0", "nan"]}, "1": {"data": ["0.1", 3, "-0.0", 1]}},
        "outputs": [{"name": "sum", "node": 2, "shape": [4], "expect": ["1.1", 5.5, "-0.0", "nan"], "compare": compare, "nan": nan}]
    }))
}

#[test]
fn exact_rejects_a_one_ulp_error() {
    let c = add_case(json!("exact"), "canonical");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let out = &c.outputs[0];
    assert!(
        compare::compare(out, v).unwrap().passed(),
        "the oracle matches the literals"
    );
    assert!(compare::compare_values(out, v, v).unwrap().passed());
    let b = bits(v);
    let bad = with(v, &[(0, b[0] + 1)]);
    let d = compare::compare_values(out, v, &bad).unwrap();
    assert!(!d.passed());
    assert_eq!(d.mismatches.len(), 1);
    assert_eq!(d.mismatches[0].ulp, Some(1));
    let rep = d.report(8);
    assert!(rep.contains("1 of 4 elements differ (25.00%)"), "{rep}");
    assert!(rep.contains("[0]: oracle 1.1 (0x3f8ccccd), got"), "{rep}");
    assert!(rep.contains(", 1 ulp"), "{rep}");
    // The same against the literals (oracle trial wording).
    let d = compare::compare(out, &bad).unwrap();
    assert!(
        d.report(8).contains("[0]: expected 1.1 (0x3f8ccccd)"),
        "{}",
        d.report(8)
    );
    // ulp(1) accepts it, ulp(0) does not.
    assert!(compare::compare_with(out, &Compare::Ulp(1), v, &bad, None)
        .unwrap()
        .passed());
    assert!(!compare::compare_with(out, &Compare::Ulp(0), v, &bad, None)
        .unwrap()
        .passed());
}

#[test]
fn signed_zeros_and_nans_per_mode() {
    let c = add_case(json!("exact"), "canonical");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let out = &c.outputs[0];
    let b = bits(v);
    assert_eq!(b[2], 0x8000_0000);
    let plus_zero = with(v, &[(2, 0)]);
    let d = compare::compare_values(out, v, &plus_zero).unwrap();
    assert!(!d.passed(), "exact: +0 and -0 differ");
    assert!(d.report(8).contains("[signed zero]"), "{}", d.report(8));
    assert!(
        compare::compare_with(out, &Compare::Ulp(0), v, &plus_zero, None)
            .unwrap()
            .passed(),
        "ulp: ±0 are 0 apart"
    );
    // A NaN with another payload: fails under `canonical`, passes under `any`; a NaN against a
    // number fails every mode.
    let payload = with(v, &[(3, 0x7fc0_0001)]);
    assert!(!compare::compare_values(out, v, &payload).unwrap().passed());
    assert!(
        !compare::compare_with(out, &Compare::Ulp(100), v, &payload, None)
            .unwrap()
            .passed()
    );
    let any = add_case(json!("exact"), "any");
    assert!(compare::compare_values(&any.outputs[0], v, &payload)
        .unwrap()
        .passed());
    let number = with(v, &[(3, 0x3f80_0000)]);
    let d =
        compare::compare_with(&any.outputs[0], &Compare::Ulp(1 << 40), v, &number, None).unwrap();
    assert!(!d.passed());
    assert_eq!(d.mismatches[0].ulp, None);
    assert!(d.report(8).contains("[NaN vs number]"));
}

/// A manifest's `nan_bits: any` (a backend whose hardware makes its own NaNs, x86's default
/// NaN 0xffc00000) accepts any NaN where the oracle has one, counts it as deviating and names
/// the allowance; a number for a NaN still fails, and a strict manifest rejects the payload.
#[test]
fn manifest_nan_bits_any_widens_only_nans() {
    let c = add_case(json!("exact"), "canonical");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0).clone();
    let default_nan = with(&v, &[(3, 0xffc0_0000)]);
    let strict = Allowances::strict("test");
    let any: Allowances = Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "test", "nan_bits": "any"}"#,
    )
    .unwrap();
    assert!(!any.is_strict());
    assert!(any.summary().contains("nan_bits any"), "{}", any.summary());
    let judged = |a: &Allowances, x: &Value| {
        compare::judge_outputs(&c, "policy/add", &r, &[Some(x.clone())], a).unwrap()
    };
    let s = judged(&strict, &default_nan);
    assert!(
        !s[0].diff.as_ref().unwrap().passed(),
        "strict: NaN bits differ"
    );
    let a = judged(&any, &default_nan);
    let d = a[0].diff.as_ref().unwrap();
    assert!(d.passed(), "{}", d.report(8));
    assert_eq!(
        d.deviating, 1,
        "the other NaN is a deviation the manifest allows"
    );
    assert_eq!(d.nan_widened, 1);
    let said = d.allowance().expect("an allowed deviation is reported");
    assert!(
        said.ends_with(
            "1 of 4 elements differ from the oracle, allowed by nan_bits any (the test manifest)"
        ),
        "{said}"
    );
    assert!(
        d.allowances.is_empty(),
        "the bound is not widened: {:?}",
        d.allowances
    );
    let same = judged(&any, &v);
    assert_eq!(same[0].diff.as_ref().unwrap().deviating, 0);
    let number = with(&v, &[(3, 0x3f80_0000)]);
    let n = judged(&any, &number);
    assert!(
        !n[0].diff.as_ref().unwrap().passed(),
        "a number for a NaN still fails"
    );
    assert!(Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "test", "nan_bits": "some"}"#
    )
    .is_err());
}

/// `nan_bits: any` covers NaNs an operation makes, not stored bits: a BITCAST (moved or not)
/// must keep its NaN payload on every backend.
#[test]
fn manifest_nan_bits_any_keeps_bitcast_bits() {
    let c = case(json!({
        "format": "uopkit-case/1",
        "description": "BITCAST int32 -> float32 of a NaN payload (policy test)",
        "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 2, "device": "CPU"}},
            {"id": 1, "op": "BITCAST", "dtype": "float32", "src": [0]},
            {"id": 2, "op": "RESHAPE", "dtype": "float32", "src": [1], "arg": [2, 1]}
        ],
        "inputs": {"0": {"data": [2147483647, 1065353216]}},
        "outputs": [{"name": "y", "node": 2, "shape": [2, 1], "expect": ["0x7fffffff", "1.0"]}]
    }));
    let r = oracle(&c);
    let v = out_value(&c, &r, 0).clone();
    let other_nan = with(&v, &[(0, 0xffc0_0000)]);
    let any: Allowances = Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "test", "nan_bits": "any"}"#,
    )
    .unwrap();
    let j = compare::judge_outputs(&c, "policy/bitcast", &r, &[Some(other_nan)], &any).unwrap();
    assert!(
        !j[0].diff.as_ref().unwrap().passed(),
        "a bitcast's NaN payload is data"
    );
}

#[test]
fn ulp_reports_carry_a_histogram() {
    let c = add_case(json!({"ulp": 2}), "canonical");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let b = bits(v);
    let off = with(v, &[(0, b[0] + 2), (1, b[1] - 7)]);
    let d = compare::compare_values(&c.outputs[0], v, &off).unwrap();
    assert_eq!(d.mismatches.len(), 1, "2 ulp is allowed, 7 is not");
    assert_eq!(d.mismatches[0].limit, Limit::Ulp(2));
    let rep = d.report(8);
    assert!(rep.contains("ulp(2) vs the oracle"), "{rep}");
    assert!(
        rep.contains("ULP histogram (4 elements): 0: 2 | 2: 1 | 5–8: 1"),
        "{rep}"
    );
    assert!(rep.contains("[1]: oracle 5.5"), "{rep}");
}

// ---- bounded ----

#[test]
fn bounded_error_just_inside_passes_just_outside_fails() {
    let (c, _) = sum_case(10_000, 1, "bounded");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let allow = reassociating();
    let (b, roots) = compare::oracle_bounds(&c, &r, &allow.tolerances()).unwrap();
    let nb = b.get(roots[0]).unwrap();
    let Bound::Range(iv) = nb.comps[0][0] else {
        panic!("expected a range, got {:?}", nb.comps[0][0])
    };
    let inside_hi = uopkit_interp::bounds::ulp::round_down(DType::Float32, iv.hi) as f32;
    let inside_lo = uopkit_interp::bounds::ulp::round_up(DType::Float32, iv.lo) as f32;
    let outside_hi = f32::from_bits(inside_hi.to_bits().wrapping_add(if inside_hi > 0.0 {
        1
    } else {
        u32::MAX
    }));
    let outside_hi = if outside_hi < inside_hi {
        f32::from_bits(inside_hi.to_bits() - 1)
    } else {
        outside_hi
    };
    assert!(outside_hi as f64 > iv.hi && (inside_hi as f64) <= iv.hi);
    let out = &c.outputs[0];
    for x in [inside_hi, inside_lo] {
        let d = compare::compare_with(out, &Compare::Bounded, v, &f32_value(x), Some(nb)).unwrap();
        assert!(d.passed(), "{x:e} is inside {iv:?}:\n{}", d.report(8));
    }
    let d =
        compare::compare_with(out, &Compare::Bounded, v, &f32_value(outside_hi), Some(nb)).unwrap();
    assert!(!d.passed(), "{outside_hi:e} is outside {iv:?}");
    let rep = d.report(8);
    assert!(
        rep.contains("bound from: reassociate_reductions: REDUCE ADD of 10000 float32 terms"),
        "{rep}"
    );
    assert!(rep.contains("1 ulp beyond"), "{rep}");
    assert!(rep.contains("ULP histogram (1 elements)"), "{rep}");
    // The whole path through check_outputs gives the same verdicts.
    assert!(
        compare::check_outputs(&c, "policy/sum", &r, &[Some(f32_value(inside_hi))], &allow).is_ok()
    );
    let e = compare::check_outputs(&c, "policy/sum", &r, &[Some(f32_value(outside_hi))], &allow)
        .unwrap_err();
    assert!(e.contains("outside") || e.contains("ulp beyond"), "{e}");
}

#[test]
fn a_legal_reordering_of_a_long_sum_passes_bounded_and_fails_exact() {
    let (c, xs) = sum_case(10_000, 2, "bounded");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let allow = reassociating();
    let reverse: f32 = xs.iter().rev().fold(0.0, |a, &b| a + b);
    fn pairwise(s: &[f32]) -> f32 {
        if s.len() <= 8 {
            return s.iter().fold(0.0, |a, &b| a + b);
        }
        let m = s.len() / 2;
        pairwise(&s[..m]) + pairwise(&s[m..])
    }
    let tree = pairwise(&xs);
    let oracle_bits = bits(v)[0];
    for (name, x) in [("reverse", reverse), ("pairwise", tree)] {
        assert_ne!(
            x.to_bits() as u64,
            oracle_bits,
            "{name}: the reordering must change the bits for this test to mean anything"
        );
        let got = [Some(f32_value(x))];
        let ok = compare::check_outputs(&c, "policy/sum", &r, &got, &allow);
        assert!(ok.is_ok(), "{name} must pass bounded: {}", ok.unwrap_err());
        let mut exact = c.clone();
        exact.outputs[0].compare = Compare::Exact;
        let e = compare::check_outputs(&exact, "policy/sum", &r, &got, &allow).unwrap_err();
        assert!(e.contains("exact output: no allowance applies"), "{e}");
    }
    // The replay of a declared order is bit-exact with the same native order.
    let x = out_value(&c, &r, 0);
    assert_eq!(x.shape, Vec::<usize>::new());
    let input = Value {
        dtype: DType::Float32,
        shape: vec![xs.len()],
        data: Data::Single(xs.iter().map(|x| Elem::Bits(x.to_bits() as u64)).collect()),
    };
    let replay =
        uopkit_interp::bounds::reduce_with_order(Op::ADD, 1, &input, &ReduceOrder::Tree(8))
            .unwrap();
    assert_eq!(bits(&replay), vec![tree.to_bits() as u64]);
}

#[test]
fn the_cpu_manifest_is_strict_on_reductions_so_bounded_is_exact_there() {
    let cpu = Allowances::load(&allowances::default_path("cpu")).unwrap();
    assert_eq!(cpu.backend, "cpu");
    // Only the ring allreduce reassociates; reductions, subnormals, contraction and
    // transcendentals are bit-exact.
    assert_eq!(
        cpu.summary(),
        "the cpu manifest allows: reassociate_allreduce"
    );
    assert!(Allowances::for_backend("cpu").is_ok());
    let (c, xs) = sum_case(2_000, 3, "bounded");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let reverse: f32 = xs.iter().rev().fold(0.0, |a, &b| a + b);
    assert_ne!(reverse.to_bits() as u64, bits(v)[0]);
    let e = compare::check_outputs(&c, "policy/sum", &r, &[Some(f32_value(reverse))], &cpu)
        .unwrap_err();
    assert!(
        e.contains(
            "no allowance widens this output (the cpu manifest allows: reassociate_allreduce)"
        ),
        "{e}"
    );
    assert!(compare::check_outputs(&c, "policy/sum", &r, &[Some(v.clone())], &cpu).is_ok());
}

#[test]
fn a_transcendental_budget_names_itself_when_exceeded() {
    let c = case(json!({
        "format": "uopkit-case/1",
        "description": "exp2 on float32 (policy test)",
        "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 0, "size": 3, "device": "CPU"}},
            {"id": 1, "op": "EXP2", "dtype": "float32", "src": [0]}
        ],
        "inputs": {"0": {"data": ["0.3", "-7.25", 10]}},
        "outputs": [{"name": "y", "node": 1, "shape": [3], "expect": [0, 0, 0], "compare": "bounded"}]
    }));
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let b = bits(v);
    let gpu = Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "gpu", "ulp": {"EXP2": {"float32": 2, "*": 1}, "SIN": {"*": 4}}}"#,
    )
    .unwrap();
    assert_eq!(gpu.tolerances().ulp_budget(Op::EXP2, DType::Float32), 2);
    assert_eq!(gpu.tolerances().ulp_budget(Op::EXP2, DType::Float16), 1);
    let ok = with(v, &[(0, b[0] + 2), (1, b[1] - 2)]);
    assert!(compare::check_outputs(&c, "policy/exp2", &r, &[Some(ok)], &gpu).is_ok());
    let bad = with(v, &[(0, b[0] + 3)]);
    let e = compare::check_outputs(&c, "policy/exp2", &r, &[Some(bad.clone())], &gpu).unwrap_err();
    assert!(
        e.contains("bound from: ulp: EXP2 float32 within 2 ulp"),
        "{e}"
    );
    assert!(e.contains("1 ulp beyond"), "{e}");
    // exp2(10) = 1024 exactly: the budget still applies to it (it is about the op, not the value).
    let near = with(v, &[(2, b[2] - 1)]);
    assert!(compare::check_outputs(&c, "policy/exp2", &r, &[Some(near)], &gpu).is_ok());
    // A strict backend gets nothing.
    assert!(compare::check_outputs(
        &c,
        "policy/exp2",
        &r,
        &[Some(bad)],
        &Allowances::strict("cpu")
    )
    .is_err());
}

// ---- either ----

fn max_case(compare: serde_json::Value) -> Case {
    case(json!({
        "format": "uopkit-case/1",
        "description": "MAX with NaN operands (policy test)",
        "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 0, "size": 3, "device": "CPU"}},
            {"id": 1, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 1, "size": 3, "device": "CPU"}},
            {"id": 2, "op": "MAX", "dtype": "float32", "src": [0, 1]}
        ],
        "inputs": {"0": {"data": [1, "nan", 2]}, "1": {"data": ["nan", 1, 3]}},
        "outputs": [{"name": "m", "node": 2, "shape": [3], "expect": [1, "nan", 3], "compare": compare}]
    }))
}

#[test]
fn either_accepts_the_listed_values_and_rejects_others() {
    let c = max_case(json!({"either": [["nan", 1, null]]}));
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let out = &c.outputs[0];
    assert!(
        compare::compare(out, v).unwrap().passed(),
        "the oracle gives the first choice"
    );
    // IEEE maxNum-style (1, 1, 3) and NaN-propagating (NaN, NaN, 3) per element: all allowed.
    let nan = 0x7fc0_0000u64;
    let one = 0x3f80_0000u64;
    for alt in [
        with(v, &[(1, one)]),
        with(v, &[(0, nan)]),
        with(v, &[(0, nan), (1, one)]),
    ] {
        let d = compare::compare_values(out, v, &alt).unwrap();
        assert!(d.passed(), "{}", d.report(8));
    }
    let d = compare::compare_values(out, v, &with(v, &[(2, 0x4000_0000)])).unwrap();
    assert!(!d.passed(), "element 2 has no alternative");
    assert_eq!(d.mismatches[0].limit, Limit::OneOf(0));
    let d = compare::compare_values(out, v, &with(v, &[(0, 0x4000_0000)])).unwrap();
    assert!(!d.passed(), "2.0 is not listed for element 0");
    assert!(
        d.report(8)
            .contains("allowed: the oracle value or 1 other(s)"),
        "{}",
        d.report(8)
    );
}

#[test]
fn either_output_takes_whole_alternatives_only() {
    let c = max_case(json!({"either_output": [["nan", 1, 3]]}));
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let out = &c.outputs[0];
    assert!(compare::compare(out, v).unwrap().passed());
    let (nan, one) = (0x7fc0_0000u64, 0x3f80_0000u64);
    assert!(
        compare::compare_values(out, v, &with(v, &[(0, nan), (1, one)]))
            .unwrap()
            .passed(),
        "the whole alternative"
    );
    let mixed = compare::compare_values(out, v, &with(v, &[(0, nan)])).unwrap();
    assert!(
        !mixed.passed(),
        "half of one and half of the other is not allowed"
    );
    assert!(
        mixed.report(8).contains("closest: alternative"),
        "{}",
        mixed.report(8)
    );
}

// ---- overrides and manifests ----

#[test]
fn a_manifest_override_changes_the_mode_and_says_so() {
    let c = add_case(json!("exact"), "canonical");
    let r = oracle(&c);
    let v = out_value(&c, &r, 0);
    let b = bits(v);
    let off = with(v, &[(1, b[1] + 1)]);
    let mut a = Allowances::strict("gpu");
    a.overrides.push(allowances::Override {
        case: "policy/add".into(),
        output: Some("sum".into()),
        compare: Compare::Ulp(1),
        reason: "test: fast math".into(),
    });
    a.validate().unwrap();
    assert_eq!(
        a.mode_for("policy/add", &c.outputs[0]).compare,
        Compare::Ulp(1)
    );
    assert_eq!(
        a.mode_for("policy/other", &c.outputs[0]).compare,
        Compare::Exact
    );
    assert!(compare::check_outputs(&c, "policy/add", &r, &[Some(off.clone())], &a).is_ok());
    let worse = with(v, &[(1, b[1] + 2)]);
    let e = compare::check_outputs(&c, "policy/add", &r, &[Some(worse)], &a).unwrap_err();
    assert!(
        e.contains("mode from gpu manifest override: test: fast math"),
        "{e}"
    );
    assert!(compare::check_outputs(&c, "policy/other", &r, &[Some(off)], &a).is_err());
    assert!(a
        .check_names(|n| (n == "policy/add").then(|| vec!["sum".to_string()]))
        .is_ok());
    assert!(a.check_names(|_| None).is_err());
}

#[test]
fn manifests_validate() {
    let bad = [
        r#"{"format": "uopkit-allowances/2", "backend": "x"}"#,
        r#"{"format": "uopkit-allowances/1", "backend": "x", "ulp": {"CMPLT": {"float32": 1}}}"#,
        r#"{"format": "uopkit-allowances/1", "backend": "x", "ulp": {"EXP2": {"int32": 1}}}"#,
        r#"{"format": "uopkit-allowances/1", "backend": "x", "flush_subnormals": ["int8"]}"#,
        r#"{"format": "uopkit-allowances/1", "backend": "x", "reassociate": true}"#,
        r#"{"format": "uopkit-allowances/1", "backend": "x", "overrides": [{"case": "a", "compare": "exact", "reason": ""}]}"#,
    ];
    for b in bad {
        assert!(Allowances::parse(b).is_err(), "{b}");
    }
    let ok = Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "gpu", "reassociate_reductions": true, "flush_subnormals": ["float32"],
            "contract_mul_add": true, "ulp": {"SQRT": {"float32": 1}},
            "overrides": [{"case": "alu/sin_float32", "compare": {"ulp": 4}, "reason": "polynomial sin"}]}"#,
    )
    .unwrap();
    assert!(!ok.is_strict());
    assert!(ok.summary().contains("reassociate_reductions, flush_subnormals [float32], contract_mul_add, ulp SQRT float32 ≤ 1"));
    assert!(xfail::load(&xfail::default_path()).is_ok());
    assert!(xfail::parse(r#"{"format": "uopkit-xfail/1", "expected_failures": [{"case": "a", "backend": "cpu", "reason": " "}]}"#).is_err());
    let dup = r#"{"format": "uopkit-xfail/1", "expected_failures": [
        {"case": "a", "backend": "cpu", "reason": "r"}, {"case": "a", "backend": "cpu", "reason": "r"}]}"#;
    assert!(xfail::parse(dup).is_err());
    assert!(matches!(
        xfail::load(std::path::Path::new("/nonexistent/xfail.json")),
        Err(xfail::Error::Read { .. })
    ));
}

// ---- expected failures ----

#[test]
fn xfail_listed_failing_is_ok_and_listed_passing_is_an_error() {
    let x = xfail::parse(
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "reduce/a", "backend": "cpu", "reason": "issue 9: split reductions"},
            {"case": "reduce/b", "backend": "cpu", "reason": "issue 10", "contains": "elements differ"}]}"#,
    )
    .unwrap();
    // listed + failing → ok, with the reason kept
    assert_eq!(x.judge("reduce/a", "cpu", Err("boom".into())), Ok(()));
    assert_eq!(
        x.outcome("reduce/a", "cpu", Err("boom".into())),
        Ok(Outcome::ExpectedFailure {
            reason: "issue 9: split reductions".into(),
            failure: "boom".into()
        })
    );
    // listed + passing → error telling to remove the entry
    let e = x.judge("reduce/a", "cpu", Ok(())).unwrap_err();
    assert!(e.contains("listed as an expected failure (issue 9: split reductions) but passed; remove the entry"), "{e}");
    // not listed (other backend, other case) → unchanged
    assert_eq!(x.judge("reduce/a", "oracle", Ok(())), Ok(()));
    assert_eq!(
        x.judge("reduce/c", "cpu", Err("real".into())),
        Err("real".into())
    );
    // a listed case failing differently is not hidden
    assert!(x
        .judge(
            "reduce/b",
            "cpu",
            Err("output 'x': 1 of 4 elements differ".into())
        )
        .is_ok());
    assert!(x
        .judge("reduce/b", "cpu", Err("the oracle failed".into()))
        .unwrap_err()
        .contains("failed differently"));
    assert!(x
        .check_names(|c| c.starts_with("reduce/"), &["cpu", "oracle"])
        .is_ok());
    assert!(x.check_names(|c| c == "reduce/a", &["cpu"]).is_err());
    assert!(Xfail::empty().judge("any", "cpu", Ok(())).is_ok());
}

// ---- the case format ----

#[test]
fn modes_have_a_stable_json_spelling() {
    let base = || Output {
        name: "o".into(),
        node: 1,
        shape: vec![2],
        expect: json!([1, 2]),
        compare: Compare::Exact,
        nan: NanPolicy::Canonical,
    };
    let cases = [
        (Compare::Exact, json!("exact")),
        (Compare::Ulp(3), json!({"ulp": 3})),
        (Compare::Bounded, json!("bounded")),
        (
            Compare::Either(vec![json!([null, "nan"])]),
            json!({"either": [[null, "nan"]]}),
        ),
        (
            Compare::EitherOutput(vec![json!([2, 1])]),
            json!({"either_output": [[2, 1]]}),
        ),
    ];
    for (mode, spelled) in cases {
        let mut o = base();
        o.compare = mode.clone();
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["compare"], spelled);
        let back: Output = serde_json::from_value(v).unwrap();
        assert_eq!(back.compare, mode);
    }
    let old: Output =
        serde_json::from_value(json!({"name": "o", "node": 1, "shape": [2], "expect": [1, 2]}))
            .unwrap();
    assert_eq!(old.compare, Compare::Exact);
    assert!(serde_json::from_value::<Output>(
        json!({"name": "o", "node": 1, "shape": [2], "expect": [1, 2], "compare": "fuzzy"})
    )
    .is_err());
}

// ---- the bound pass over the real corpus ----

/// Every corpus case: strict tolerances give exact bounds on every output (so `bounded` is
/// `exact` for the CPU backend), and the most permissive tolerances run through every op,
/// storage and multi-device structure without error.
#[test]
fn bounds_cover_the_whole_corpus() {
    use uopkit_conformance::{corpus, load};
    use uopkit_interp::bounds::Tolerances;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let files = corpus::case_files(&dir).unwrap();
    assert!(files.len() > 100);
    let loose = Allowances::parse(
        r#"{"format": "uopkit-allowances/1", "backend": "loose", "reassociate_reductions": true, "reassociate_allreduce": true,
            "flush_subnormals": ["float16", "bfloat16", "float32", "float64", "fp8e4m3", "fp8e5m2"], "contract_mul_add": true,
            "ulp": {"EXP2": {"*": 2}, "LOG2": {"*": 2}, "SIN": {"*": 2}, "POW": {"*": 2}, "SQRT": {"*": 1}, "FDIV": {"*": 1}, "RECIPROCAL": {"*": 1}}}"#,
    )
    .unwrap()
    .tolerances();
    let (mut ran, mut widened) = (0, 0);
    for f in files {
        let c = load::read_case(&f).unwrap();
        if c.expect_error.is_some() || c.kernel.is_some() {
            continue;
        }
        let r = oracle(&c);
        let (strict, roots) = compare::oracle_bounds(&c, &r, &Tolerances::strict()).unwrap();
        for (o, id) in c.outputs.iter().zip(&roots) {
            let nb = strict.get(*id).unwrap();
            assert!(
                nb.all_exact(),
                "{}: output '{}' is not exact under strict tolerances",
                f.display(),
                o.name
            );
        }
        let (b, roots) = compare::oracle_bounds(&c, &r, &loose)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        widened += roots
            .iter()
            .filter(|id| !b.get(**id).unwrap().all_exact())
            .count();
        // the oracle's own values always pass their bounded comparison
        for (k, (o, id)) in c.outputs.iter().zip(&roots).enumerate() {
            let v = out_value(&c, &r, k);
            let d = compare::compare_with(o, &Compare::Bounded, v, v, b.get(*id)).unwrap();
            assert!(d.passed(), "{}: {}", f.display(), d.report(4));
        }
        ran += 1;
    }
    assert!(
        ran > 100 && widened > 20,
        "{ran} cases, {widened} widened outputs"
    );
}
