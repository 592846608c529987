//! The C renderer's text is pinned on every corpus case: each case's schedule (default passes,
//! the case's scheduler options) is rendered as one C unit and its hash compared with
//! `fixtures/c_render_hashes.txt`. Refactoring the renderer must keep the text byte for byte;
//! a deliberate change of the C text is re-blessed with `UOPKIT_BLESS=1 cargo test -p
//! uopkit-conformance --test render_identity` and reviewed as a diff of that file. The same
//! programs rendered as CUDA and HIP have no `#error` line (nothing the corpus needs is
//! outside those dialects; they are not compiled here: no nvcc/hipcc/NVRTC on this machine).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use uopkit_compiler::render::{renderer, Lang};
use uopkit_conformance::{backend, corpus, load};
use uopkit_interp::ir::NodeId;

/// FNV-1a, 64 bit: stable across platforms and Rust versions.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One line per corpus case: its name and the rendered C unit's length and hash, or why it
/// has no unit.
fn render_list(gpu: &mut usize, launched: &mut usize) -> (String, usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let files = corpus::case_files(&dir).expect("corpus is listable");
    let mut out = String::new();
    let mut rendered = 0;
    for f in &files {
        // Kernel-level cases hold no tensor graph to schedule and render.
        if load::read_case(f).is_ok_and(|c| c.kernel.is_some()) {
            continue;
        }
        let name = corpus::case_name(&dir, f);
        let line = (|| -> Result<String, String> {
            let case = load::read_case(f).map_err(|_| "unreadable".to_string())?;
            if case.expect_error.is_some() {
                return Err("expects an error".into());
            }
            let (loaded, ver) = load::load(&case).map_err(|_| "does not load".to_string())?;
            let roots: Vec<NodeId> = case
                .outputs
                .iter()
                .map(|o| loaded.arena(o.node))
                .collect::<Result<_, _>>()
                .map_err(|_| "unknown output node".to_string())?;
            let opts = backend::schedule_opts_for(&case).map_err(|e| e.to_string())?;
            let s = uopkit_compiler::pipeline::schedule_opts(&loaded.graph, &ver, &roots, &opts)
                .map_err(|_| "refused by the scheduler".to_string())?;
            let programs: Vec<_> = s.programs();
            let unit = renderer(Lang::C)
                .render(&programs)
                .map_err(|e| e.to_string())?;
            // The CUDA and HIP dialects express everything the corpus schedules.
            // CUDA and HIP print the GPU-style kernels (launch indices, local memory,
            // barriers) that the gpusim trials run in the kernel interpreter.
            let gpu_opts = uopkit_compiler::schedule::ScheduleOpts {
                target: uopkit_compiler::schedule::Target::Gpu,
                ..opts.clone()
            };
            let gs =
                uopkit_compiler::pipeline::schedule_opts(&loaded.graph, &ver, &roots, &gpu_opts)
                    .map_err(|_| "refused by the scheduler (GPU target)".to_string())?;
            let gpu_programs: Vec<_> = gs.programs();
            for lang in [Lang::Cuda, Lang::Hip] {
                let u = renderer(lang)
                    .render(&gpu_programs)
                    .map_err(|e| e.to_string())?;
                assert_eq!(u.lang, lang);
                assert!(
                    !u.source.contains("#error"),
                    "{name}: the {lang} text has an #error line:\n{}",
                    u.source
                );
                let sig = |k: &uopkit_compiler::render::KernelSig| {
                    (k.name.clone(), k.symbol.clone(), k.params.clone())
                };
                assert_eq!(
                    u.kernels.iter().map(sig).collect::<Vec<_>>(),
                    unit.kernels.iter().map(sig).collect::<Vec<_>>(),
                    "{name}"
                );
                if lang == Lang::Cuda && u.source.contains("blockIdx.x") {
                    *launched += 1;
                }
                *gpu += 1;
            }
            rendered += 1;
            Ok(format!(
                "{} bytes, fnv1a {:016x}",
                unit.source.len(),
                fnv1a(&unit.source)
            ))
        })();
        let _ = match line {
            Ok(l) => writeln!(out, "{name}: {l}"),
            Err(e) => writeln!(out, "{name}: none ({e})"),
        };
    }
    (out, rendered)
}

#[test]
fn c_text_is_unchanged_on_every_corpus_case() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/c_render_hashes.txt");
    let mut gpu = 0;
    let mut launched = 0;
    // The C text pins 32-byte vector tiles (`cpu_tile`), whatever vectors this machine has.
    let (got, rendered) = uopkit_compiler::optimize::tile::with_vector_bytes(32, || {
        render_list(&mut gpu, &mut launched)
    });
    // Most kernels have an outer loop that becomes a launch index.
    assert!(
        launched > rendered / 2,
        "only {launched} of {rendered} CUDA units use blockIdx"
    );
    assert!(rendered > 100, "only {rendered} corpus cases rendered");
    assert_eq!(
        gpu,
        2 * rendered,
        "every rendered case also as CUDA and HIP"
    );
    if std::env::var_os("UOPKIT_BLESS").is_some() {
        std::fs::write(&path, &got).expect("fixture is writable");
        return;
    }
    let want = std::fs::read_to_string(&path).expect("fixtures/c_render_hashes.txt exists");
    // Lines are "case: ...", one per case in corpus order: compare them by case name, so a new
    // or removed case shows as itself rather than shifting every later line.
    let by_name = |text: &str| -> BTreeMap<String, String> {
        text.lines()
            .map(|l| match l.split_once(": ") {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect()
    };
    let (want, got) = (by_name(&want), by_name(&got));
    let mut diff = vec![];
    for (name, w) in &want {
        match got.get(name) {
            None => diff.push(format!("removed {name}: {w}")),
            Some(g) if g != w => diff.push(format!("changed {name}:\n  want {w}\n   got {g}")),
            Some(_) => {}
        }
    }
    for (name, g) in &got {
        if !want.contains_key(name) {
            diff.push(format!("new {name}: {g}"));
        }
    }
    assert!(
        diff.is_empty(),
        "{} case(s) differ from tests/fixtures/c_render_hashes.txt (re-bless with UOPKIT_BLESS=1 \
         once the C change is intended):\n{}",
        diff.len(),
        diff.join("\n")
    );
}
