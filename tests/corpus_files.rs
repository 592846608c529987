//! Properties of the corpus files themselves.

use std::path::Path;

use uopkit_conformance::{case::Case, corpus, load};

fn files() -> Vec<std::path::PathBuf> {
    corpus::case_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"))
        .expect("corpus is listable")
}

/// Reading a case and writing it back gives the same file.
#[test]
fn every_case_round_trips_byte_for_byte() {
    let mut bad = vec![];
    for f in files() {
        let text = std::fs::read_to_string(&f).expect("readable");
        let case: Case = load::parse_case(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if case.to_canonical_string() != text {
            bad.push(f.display().to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "not canonical (run `uopkit fmt` on them): {bad:?}"
    );
}

/// The issue asks for at least 80 hand-derived cases; each says where its values come from.
#[test]
fn corpus_is_large_enough_and_described() {
    let fs = files();
    assert!(fs.len() >= 80, "only {} cases", fs.len());
    for f in fs {
        let case = load::read_case(&f).expect("parses");
        assert!(
            case.description.len() >= 20,
            "{}: description too short",
            f.display()
        );
        assert!(
            !case.outputs.is_empty()
                || case.expect_error.is_some()
                || case.kernel.as_ref().is_some_and(|k| !k.expect.is_empty()),
            "{}: checks nothing",
            f.display()
        );
    }
}
