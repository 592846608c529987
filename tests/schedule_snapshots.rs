//! Pinned schedules of the seed cases: which steps run, on which devices, with which
//! buffers. A change in scheduling shows up here as a reviewed snapshot diff
//! (`cargo insta review`, or `INSTA_UPDATE=always cargo test --test schedule_snapshots`).

use std::path::Path;

use uopkit_conformance::{backend, corpus, load};

#[test]
fn seed_schedules() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let files = corpus::case_files(&dir.join("seeds")).expect("corpus/seeds is listable");
    assert!(!files.is_empty());
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for f in files {
            let case = load::read_case(&f).expect("seed case parses");
            if backend::cpu_skip_reason(&case).is_some() {
                continue;
            }
            let name = corpus::case_name(&dir, &f).replace('/', "__");
            let sched = backend::check_cpu(&case).unwrap_or_else(|e| panic!("{name}: {e}"));
            insta::assert_snapshot!(name, sched.to_string(), &case.description);
        }
    });
}
