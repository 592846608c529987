//! The kernel fuzzer names a finding's case file by the case's content without its
//! description (which names the seed that found it): the same counterexample found from two
//! seeds is one file; two different counterexamples are two.

use uopkit_conformance::kfuzz::case_file_name;
use uopkit_conformance::load::read_case;

#[test]
fn one_counterexample_one_file_name_whichever_seed_finds_it() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../corpus/imported/tinygrad/kernels/movement/tril.json"
    );
    let case = read_case(std::path::Path::new(path)).unwrap_or_else(|e| panic!("{e}"));
    let name = case_file_name(&case);
    assert!(
        name.starts_with("kfuzz_") && name.ends_with(".json") && name.len() == 23,
        "{name}"
    );
    let mut from_seed_7 = case.clone();
    from_seed_7.description = "kernel fuzz (seed 7): variant gpu, introduced by x: …".into();
    let mut from_seed_8 = case.clone();
    from_seed_8.description = "kernel fuzz (seed 8): variant gpu, introduced by x: …".into();
    assert_eq!(case_file_name(&from_seed_7), name);
    assert_eq!(case_file_name(&from_seed_8), name);
    let mut other = case.clone();
    other.tags.push("another-pass".into());
    assert_ne!(case_file_name(&other), name);
}
