//! Mutation testing of the loader, the verifier and the oracle: corpus files are mutated
//! (byte flips, truncation, numbers replaced by adversarial values, nodes deleted or
//! duplicated, source ids swapped) and each mutant goes through `parse_case` + `load`
//! (+ `run_oracle` when the verified graph is small). Any outcome but a panic (or an abort)
//! is fine: a mutant is either refused with an error value or evaluated.
//!
//! 10,000 mutants by default, from a fixed seed. Longer or different runs:
//! `PROPTEST_CASES=1000000 PROPTEST_RNG_SEED=7 cargo test -p uopkit-conformance --test
//! mutation --release -- --nocapture` (see docs/robustness.md).
//!
//! Also here: the hostile user's findings about sizes and messages, as case files.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::Value as Json;
use uopkit_conformance::corpus;
use uopkit_conformance::load::{self, parse_case, LoadError};
use uopkit_conformance::run::{run_oracle, RunError};

/// Mutants whose verified graph has at most this many elements (all values, every device's
/// component) are also evaluated by the oracle.
const ORACLE_ELEMENTS: usize = 1 << 16;

/// Numbers a hostile case file would use.
const ADVERSARIAL: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "268435456",
    "268435457",
    "4294967295",
    "4294967296",
    "1099511627776",
    "1099511627777",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e400",
    "-0",
    "0.5",
    "-9223372036854775809",
];

fn corpus_texts() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let files = corpus::case_files(&dir).expect("the corpus is listable");
    assert!(files.len() > 100, "found only {} corpus files", files.len());
    files
        .iter()
        .map(|f| {
            (
                corpus::case_name(&dir, f),
                std::fs::read_to_string(f).expect("corpus file reads"),
            )
        })
        // Tensor-graph cases only (kernel-level cases have their own loader tests).
        .filter(|(_, t)| !t.contains("\n  \"kernel\": {"))
        .collect()
}

/// One mutation; the numbers pick positions modulo whatever they index.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Truncate(usize),
    ReplaceNumber(usize, usize),
    DeleteNode(usize),
    DuplicateNode(usize, bool),
    SwapSrc(usize, usize),
    RetargetSrc(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::FlipBit(p, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::SetByte(p, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        3 => (any::<usize>(), 0..ADVERSARIAL.len()).prop_map(|(n, v)| Mutation::ReplaceNumber(n, v)),
        1 => any::<usize>().prop_map(Mutation::DeleteNode),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(n, fresh)| Mutation::DuplicateNode(n, fresh)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapSrc(a, b)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::RetargetSrc(a, b)),
    ]
}

/// How many numbers `v` holds.
fn count_numbers(v: &Json) -> usize {
    match v {
        Json::Number(_) => 1,
        Json::Array(a) => a.iter().map(count_numbers).sum(),
        Json::Object(o) => o.values().map(count_numbers).sum(),
        _ => 0,
    }
}

/// Replaces the `n`th number of `v` (depth first) with `new`; counts `n` down.
fn replace_number(v: &mut Json, n: &mut usize, new: &Json) -> bool {
    match v {
        Json::Number(_) if *n == 0 => {
            *v = new.clone();
            true
        }
        Json::Number(_) => {
            *n -= 1;
            false
        }
        Json::Array(a) => a.iter_mut().any(|x| replace_number(x, n, new)),
        Json::Object(o) => o.values_mut().any(|x| replace_number(x, n, new)),
        _ => false,
    }
}

fn nodes(j: &mut Json) -> Option<&mut Vec<Json>> {
    j.get_mut("graph")?.as_array_mut()
}

/// Applies `m` to the case text (structural mutations need the text to be JSON; on text
/// that no longer parses they do nothing).
fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let len = text.len().max(1);
    match *m {
        Mutation::FlipBit(p, b) => {
            if let Some(x) = text.get_mut(p % len) {
                *x ^= 1 << b;
            }
        }
        Mutation::SetByte(p, b) => {
            if let Some(x) = text.get_mut(p % len) {
                *x = b;
            }
        }
        Mutation::Truncate(p) => text.truncate(p % len),
        _ => {
            let Ok(mut j) = serde_json::from_slice::<Json>(text) else {
                return;
            };
            structural(&mut j, m);
            *text = serde_json::to_vec(&j).expect("a JSON value serializes");
        }
    }
}

fn structural(j: &mut Json, m: &Mutation) {
    match *m {
        Mutation::ReplaceNumber(n, v) => {
            let all = count_numbers(j);
            if all > 0 {
                let new: Json = serde_json::from_str(ADVERSARIAL[v]).expect("adversarial number");
                replace_number(j, &mut (n % all), &new);
            }
        }
        Mutation::DeleteNode(n) => {
            if let Some(g) = nodes(j).filter(|g| !g.is_empty()) {
                let i = n % g.len();
                g.remove(i);
            }
        }
        Mutation::DuplicateNode(n, fresh) => {
            if let Some(g) = nodes(j).filter(|g| !g.is_empty()) {
                let mut copy = g[n % g.len()].clone();
                if fresh {
                    let next = g
                        .iter()
                        .filter_map(|x| x.get("id")?.as_u64())
                        .max()
                        .unwrap_or(0)
                        .saturating_add(1);
                    copy["id"] = next.into();
                }
                g.push(copy);
            }
        }
        Mutation::SwapSrc(a, b) => {
            if let Some(g) = nodes(j).filter(|g| !g.is_empty()) {
                let (a, b) = (a % g.len(), b % g.len());
                let sa = g[a].get("src").cloned();
                let sb = g[b].get("src").cloned();
                if let (Some(o), Some(s)) = (g[a].as_object_mut(), sb) {
                    o.insert("src".into(), s);
                }
                if let (Some(o), Some(s)) = (g[b].as_object_mut(), sa) {
                    o.insert("src".into(), s);
                }
            }
        }
        Mutation::RetargetSrc(a, b) => {
            if let Some(g) = nodes(j).filter(|g| !g.is_empty()) {
                let target = g[b % g.len()].get("id").cloned().unwrap_or(Json::from(0));
                let n = a % g.len();
                if let Some(src) = g[n].get_mut("src").and_then(|s| s.as_array_mut()) {
                    if !src.is_empty() {
                        let k = b % src.len();
                        src[k] = target;
                    }
                }
            }
        }
        _ => {}
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    NotACase,
    LoadError,
    VerifyError,
    TooBigForTheOracle,
    OracleError,
    OracleOk,
}

/// Everything a mutant goes through. Errors are fine; a panic is caught by the caller.
fn run_mutant(text: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(text) else {
        return Outcome::NotACase;
    };
    let Ok(case) = parse_case(text) else {
        return Outcome::NotACase;
    };
    let (loaded, verified) = match load::load(&case) {
        Err(LoadError::Case(_)) => return Outcome::LoadError,
        Err(LoadError::Verify(_)) => return Outcome::VerifyError,
        Ok(x) => x,
    };
    let total: usize = loaded
        .graph
        .ids()
        .map(|id| {
            let info = verified.info(id);
            let copies = info.device.as_ref().map_or(1, |d| d.devices().len());
            info.numel().saturating_mul(copies)
        })
        .fold(0usize, usize::saturating_add);
    if total > ORACLE_ELEMENTS {
        return Outcome::TooBigForTheOracle;
    }
    match run_oracle(&case) {
        Ok(_) => Outcome::OracleOk,
        Err(RunError::Load(_)) => panic!("load succeeded once and failed the second time"),
        Err(_) => Outcome::OracleError,
    }
}

fn config() -> Config {
    let mut c = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = 10_000;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x00c0_ffee);
    }
    c.failure_persistence = None;
    c.max_shrink_iters = 2_000;
    c
}

#[test]
fn mutants_of_the_corpus_never_panic() {
    let texts = corpus_texts();
    let counts: RefCell<BTreeMap<Outcome, usize>> = RefCell::default();
    let config = config();
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let strategy = (0..texts.len(), prop::collection::vec(mutation(), 1..=3));
    let result = runner.run(&strategy, |(file, muts)| {
        let mut text = texts[file].1.clone().into_bytes();
        for m in &muts {
            apply(&mut text, m);
        }
        match catch_unwind(AssertUnwindSafe(|| run_mutant(&text))) {
            Ok(o) => {
                *counts.borrow_mut().entry(o).or_default() += 1;
                Ok(())
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(TestCaseError::fail(format!(
                    "panic on a mutant of {} ({muts:?}): {msg}\nmutant: {}",
                    texts[file].0,
                    String::from_utf8_lossy(&text)
                )))
            }
        }
    });
    let counts = counts.into_inner();
    let total: usize = counts.values().sum();
    println!("{total} mutants ({cases} cases asked for, shrinking included): {counts:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(total >= cases as usize, "{total} < {cases}");
    // The mutations reach every stage.
    for o in [
        Outcome::NotACase,
        Outcome::LoadError,
        Outcome::VerifyError,
        Outcome::OracleOk,
    ] {
        assert!(
            counts.get(&o).copied().unwrap_or(0) > 0,
            "no {o:?} in {counts:?}"
        );
    }
}

// ---- The hostile user's findings, as case files ----

fn load_err(text: &str) -> String {
    let case = parse_case(text).expect("the case parses");
    match catch_unwind(AssertUnwindSafe(|| run_oracle(&case))) {
        Err(_) => panic!("panicked"),
        Ok(Ok(_)) => panic!("accepted"),
        Ok(Err(e)) => e.to_string(),
    }
}

/// Finding 1: a REDUCE whose output has 2^64 elements (wrapping to 0) was accepted and the
/// evaluator indexed out of bounds.
#[test]
fn finding_1_wrapping_reduce_output_is_a_verifier_error() {
    let e = load_err(
        r#"{"format":"uopkit-case/1","description":"x","graph":[{"id":0,"op":"BUFFER","dtype":"float32","arg":{"slot":0,"size":0,"device":"CPU"}},{"id":1,"op":"RESHAPE","dtype":"float32","src":[0],"arg":[0,4294967296,4294967296]},{"id":2,"op":"REDUCE","dtype":"float32","src":[1],"arg":["ADD",1]},{"id":3,"op":"SHRINK","dtype":"float32","src":[2],"arg":[[0,0],[1,1]]}],"outputs":[{"name":"o","node":3,"shape":[1,1],"expect":[0]}]}"#,
    );
    assert!(e.starts_with("verifier: node 1 (RESHAPE)"), "{e}");
    assert!(e.contains("overflows"), "{e}");
}

/// Finding 2: a zero-size REDUCE over a 2^40 axis aborted the process allocating 16 TiB.
#[test]
fn finding_2_huge_reduced_axis_is_a_verifier_error() {
    let e = load_err(
        r#"{"format":"uopkit-case/1","description":"x","graph":[{"id":0,"op":"BUFFER","dtype":"int32","arg":{"slot":0,"size":0,"device":"CPU"}},{"id":1,"op":"RESHAPE","dtype":"int32","src":[0],"arg":[1099511627776,0]},{"id":2,"op":"REDUCE","dtype":"int32","src":[1],"arg":["ADD",1]}],"outputs":[{"name":"o","node":2,"shape":[0],"expect":[]}]}"#,
    );
    assert!(e.starts_with("verifier: node 2 (REDUCE)"), "{e}");
    assert!(e.contains("reduces more than 268435456 elements"), "{e}");
}

fn buffer_case(size: &str) -> String {
    format!(
        r#"{{"format":"uopkit-case/1","description":"x","graph":[{{"id":7,"op":"BUFFER","dtype":"int32","arg":{{"slot":0,"size":{size},"device":"CPU"}}}}]}}"#
    )
}

/// Finding 6: a size too large for u64 said only "invalid number".
#[test]
fn finding_6_number_messages_name_the_field_and_the_reason() {
    for (size, want) in [
        (
            "18446744073709551616",
            "node 7: BUFFER: arg.size: 18446744073709551616 is too large for u64",
        ),
        (
            "1099511627776",
            "node 7: BUFFER: arg.size: element count 1099511627776 is over the limit of 268435456",
        ),
        ("-1", "node 7: BUFFER: arg.size: -1 is negative"),
        ("2.5", "node 7: BUFFER: arg.size: 2.5 is not an integer"),
        (
            "\"4\"",
            "node 7: BUFFER: arg.size: expected a non-negative integer, found \"4\"",
        ),
    ] {
        let e = load_err(&buffer_case(size));
        assert!(e.starts_with(want), "{e}");
    }
    let reshape = |dims: &str| {
        format!(
            r#"{{"format":"uopkit-case/1","description":"x","graph":[{{"id":0,"op":"BUFFER","dtype":"int32","arg":{{"slot":0,"size":0,"device":"CPU"}}}},{{"id":1,"op":"RESHAPE","dtype":"int32","src":[0],"arg":{dims}}}]}}"#
        )
    };
    let e = load_err(&reshape("[0, 18446744073709551616]"));
    assert_eq!(e, "node 1: RESHAPE: arg[1]: 18446744073709551616 is too large for u64 (expected a non-negative integer)");
    let e = load_err(&reshape("[0, 1099511627777]"));
    assert_eq!(
        e,
        "node 1: RESHAPE: arg[1]: dimension 1099511627777 is over the limit of 1099511627776"
    );
}
