//! Helpers shared by the integration tests that run `uopkit` on a small corpus.

use std::path::{Path, PathBuf};

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A temporary corpus of the named cases with `manifests/xfail.json` = `xfail` beside it:
/// `good` (corpus/alu/add_float32), `bad` and `worse` (the same with a wrong first expected
/// value: the oracle trial fails), `ub` (the first case of corpus/ub: oracle-only).
pub fn small_corpus(cases: &[&str], xfail: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    let good = std::fs::read_to_string(repo().join("corpus/alu/add_float32.json")).expect("read");
    let mut bad: serde_json::Value = serde_json::from_str(&good).expect("json");
    bad["outputs"][0]["expect"][0] = serde_json::json!("0x12345678");
    for &name in cases {
        let path = corpus.join(format!("{name}.json"));
        match name {
            "good" => std::fs::write(path, &good).expect("write"),
            "bad" | "worse" => std::fs::write(path, bad.to_string()).expect("write"),
            "ub" => {
                let ub = std::fs::read_dir(repo().join("corpus/ub"))
                    .expect("ub dir")
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .min()
                    .expect("a ub case");
                std::fs::copy(ub, path).expect("copy");
            }
            other => panic!("no such small-corpus case: {other}"),
        }
    }
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(manifests.join("xfail.json"), xfail).expect("write");
    (dir, corpus)
}
