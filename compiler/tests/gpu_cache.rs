//! The GPU compile cache cannot hurt: a hit returns the compiler's own image for the same
//! inputs, a damaged, swapped or empty entry is rebuilt (never returned), a failed compile is
//! never kept, and every input of the key (source, options, compiler, its identity) keeps
//! units apart. Then the same through the real NVRTC and hiprtc, where they are present
//! (CI requires both: `UOPKIT_REQUIRE_BACKENDS=nvrtc,hiprtc`).
//!
//! Every test has its own cache directory and its own `GpuCache` (a fresh `GpuCache` on the
//! same directory is what a new process sees); none reads or sets the process environment.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use uopkit_compiler::runtime::cache::gpu::GpuCompiler;
use uopkit_compiler::runtime::cache::{self, GpuCache};
use uopkit_compiler::runtime::{cuda, hip, required, Error, Lang, Unit};

/// PTX-shaped text, NUL-terminated, unique to `tag` and this run.
fn image_of(tag: &str) -> Vec<u8> {
    format!(
        "//\n.version 8.0\n.target sm_90\n// {tag} {:?} {}\n\0",
        std::time::SystemTime::now(),
        std::process::id()
    )
    .into_bytes()
}

fn options(arch: &str) -> Vec<String> {
    vec!["--fmad=false".into(), format!("--gpu-architecture={arch}")]
}

const IDENTITY: &str = "FAKE 1.0\n/lib/libfake.so 123 1.000000000 7\n";

fn fake<'a>(opts: &'a [String]) -> GpuCompiler<'a> {
    GpuCompiler {
        name: "FAKE",
        identity: Some(IDENTITY),
        options: opts,
    }
}

/// Asks a fresh cache on `dir` (a new process) for `source`: the image, and how many times
/// the compiler ran (0 or 1).
fn ask(dir: &Path, c: &GpuCompiler, source: &str, image: &[u8]) -> (Vec<u8>, u32, GpuCache) {
    let cache = GpuCache::new(dir);
    let runs = Cell::new(0);
    let got = cache
        .image(c, source, || {
            runs.set(runs.get() + 1);
            Ok(image.to_vec())
        })
        .unwrap();
    (got, runs.get(), cache)
}

/// Builds `source`'s entry in `dir`; returns its path and the image.
fn build(dir: &Path, tag: &str) -> (PathBuf, Vec<u8>, String) {
    let opts = options("sm_90");
    let c = fake(&opts);
    let source = format!("__global__ void k_{tag}() {{}}");
    let image = image_of(tag);
    let (got, runs, cache) = ask(dir, &c, &source, &image);
    assert_eq!((got.as_slice(), runs), (image.as_slice(), 1));
    assert_eq!((cache.compiles(), cache.disk_hits()), (1, 0));
    let path = cache.entry_path(&c, &source).unwrap();
    assert!(path.is_file(), "{}", path.display());
    (path, image, source)
}

/// A fresh cache on a damaged entry: one rebuild, reported with the path and `reason`, the
/// right image; then the next fresh cache hits.
fn expect_rebuilt(dir: &Path, source: &str, image: &[u8], reason: &str) {
    let opts = options("sm_90");
    let c = fake(&opts);
    let (got, runs, cache) = ask(dir, &c, source, image);
    assert_eq!(got, image, "after {reason}");
    assert_eq!(runs, 1, "rebuilt once");
    let rebuilt = cache.rebuilt();
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    let path = cache.entry_path(&c, source).unwrap();
    assert!(
        rebuilt[0].contains(&path.display().to_string()) && rebuilt[0].contains(reason),
        "{rebuilt:?}"
    );
    let (again, runs, cache) = ask(dir, &c, source, b"not asked for");
    assert_eq!((again.as_slice(), runs), (image, 0));
    assert_eq!((cache.disk_hits(), cache.rebuilt().len()), (1, 0));
    assert_eq!(cache::stats(dir).unwrap().bad_entries, 0);
}

#[test]
fn a_hit_is_the_compilers_image_without_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let (path, image, source) = build(dir.path(), "hit");
    let opts = options("sm_90");
    let c = fake(&opts);
    // A new process: from disk, checked, byte for byte.
    let (got, runs, cache) = ask(dir.path(), &c, &source, b"must not be used");
    assert_eq!((got.as_slice(), runs), (image.as_slice(), 0));
    assert_eq!((cache.compiles(), cache.disk_hits()), (0, 1));
    // The same process again: from memory (not even the disk).
    std::fs::remove_file(&path).unwrap();
    let again = cache.image(&c, &source, || panic!("compiled")).unwrap();
    assert_eq!((again, cache.disk_hits()), (image, 1));
    // The entry is counted as a GPU image, and `clean` removes it.
    let (path, _, _) = build(dir.path(), "hit2");
    let st = cache::stats(dir.path()).unwrap();
    assert_eq!(
        (st.entries, st.gpu_entries, st.bad_entries),
        (1, 1, 0),
        "{st:?}"
    );
    assert_eq!(cache::clean(dir.path()).unwrap(), 1);
    assert!(!path.exists());
}

#[test]
fn truncated_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, image, source) = build(dir.path(), "trunc");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(cache::stats(dir.path()).unwrap().bad_entries, 1);
    expect_rebuilt(dir.path(), &source, &image, "no checksum trailer");
}

#[test]
fn a_flipped_byte_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, image, source) = build(dir.path(), "flip");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    expect_rebuilt(dir.path(), &source, &image, "checksum");
}

#[test]
fn swapped_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, image_a, source_a) = build(dir.path(), "swap_a");
    let (pb, _, _) = build(dir.path(), "swap_b");
    assert_ne!(pa, pb);
    std::fs::copy(&pb, &pa).unwrap();
    assert_eq!(cache::stats(dir.path()).unwrap().bad_entries, 1);
    expect_rebuilt(dir.path(), &source_a, &image_a, "another unit");
}

#[test]
fn empty_and_foreign_entries_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, image, source) = build(dir.path(), "empty");
    std::fs::write(&path, b"").unwrap();
    expect_rebuilt(dir.path(), &source, &image, "empty");
    // A file of the right name and length but not written by uopkit.
    let n = std::fs::metadata(&path).unwrap().len() as usize;
    std::fs::write(&path, vec![0x41u8; n]).unwrap();
    expect_rebuilt(dir.path(), &source, &image, "no checksum trailer");
}

#[test]
fn a_failed_compile_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options("sm_90");
    let c = fake(&opts);
    let source = "__global__ void k_bad() { undefined_name; }";
    let cache = GpuCache::new(dir.path());
    let runs = Cell::new(0);
    for _ in 0..2 {
        let e = cache
            .image(&c, source, || {
                runs.set(runs.get() + 1);
                Err(Error::Unsupported("rejected: undefined_name".into()))
            })
            .unwrap_err();
        assert!(e.to_string().contains("undefined_name"), "{e}");
    }
    assert_eq!(runs.get(), 2, "the compiler runs again for a rejected unit");
    assert!(!cache.entry_path(&c, source).unwrap().exists());
    assert_eq!(cache::stats(dir.path()).unwrap().entries, 0);
    // An image the format check refuses is returned, and not written either.
    let odd = cache
        .image(&c, "odd", || Ok(b"no format".to_vec()))
        .unwrap();
    assert_eq!(odd, b"no format");
    assert!(!cache.entry_path(&c, "odd").unwrap().exists());
}

#[test]
fn every_input_of_the_key_keeps_units_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (sm90, sm80) = (options("sm_90"), options("sm_80"));
    let base = fake(&sm90);
    let other_identity = GpuCompiler {
        identity: Some("FAKE 1.0\n/lib/libfake.so 124 1.000000000 7\n"),
        ..base.clone()
    };
    let other_name = GpuCompiler {
        name: "FAKE2",
        ..base.clone()
    };
    let variants = [
        (base.clone(), "k"),
        (base.clone(), "k2"),
        (fake(&sm80), "k"),
        (other_identity, "k"),
        (other_name, "k"),
    ];
    let mut paths: Vec<PathBuf> = variants
        .iter()
        .map(|(c, s)| GpuCache::new(dir.path()).entry_path(c, s).unwrap())
        .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), variants.len(), "{paths:?}");
    // Each compiles once, into its own entry, and reads back its own image.
    for (i, (c, s)) in variants.iter().enumerate() {
        let image = image_of(&format!("v{i}"));
        assert_eq!(ask(dir.path(), c, s, &image).1, 1);
    }
    for (c, s) in &variants {
        assert_eq!(ask(dir.path(), c, s, b"x").1, 0);
    }
    // No identity: nothing on disk; every fresh cache compiles.
    let unknown = GpuCompiler {
        identity: None,
        ..base
    };
    assert_eq!(ask(dir.path(), &unknown, "k", &image_of("u")).1, 1);
    assert_eq!(ask(dir.path(), &unknown, "k", &image_of("u")).1, 1);
    assert!(GpuCache::new(dir.path())
        .entry_path(&unknown, "k")
        .is_none());
}

#[test]
fn library_identity_names_the_files_and_changes_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libfake.so.1");
    std::fs::write(&lib, b"one").unwrap();
    std::fs::write(dir.path().join("libfake-builtins.so.1"), b"b").unwrap();
    std::fs::write(dir.path().join("unrelated.so"), b"u").unwrap();
    let id = cache::gpu::library_identity("FAKE 1.0", &lib, &["libfake-builtins"]).unwrap();
    assert!(id.starts_with("FAKE 1.0\n"), "{id}");
    assert!(
        id.contains("libfake.so.1 3 ") && id.contains("libfake-builtins.so.1 1 "),
        "{id}"
    );
    assert!(!id.contains("unrelated"), "{id}");
    std::fs::write(&lib, b"three").unwrap();
    let changed = cache::gpu::library_identity("FAKE 1.0", &lib, &["libfake-builtins"]).unwrap();
    assert_ne!(id, changed);
    assert!(cache::gpu::library_identity("FAKE", &dir.path().join("absent.so"), &[]).is_none());
}

fn here(name: &str, available: Result<(), String>) -> bool {
    match available {
        Ok(()) => true,
        Err(why) => {
            assert!(
                !required(name),
                "{name} is required here (UOPKIT_REQUIRE_BACKENDS) but unavailable: {why}"
            );
            eprintln!("skipped: {name} unavailable: {why}");
            false
        }
    }
}

fn unit(lang: Lang, source: String) -> Unit {
    Unit {
        lang,
        source,
        kernels: vec![],
    }
}

/// A unit whose text is unique to this run (so no earlier run's entry answers it).
fn nonce() -> String {
    format!(
        "/* {:?} {} */\n",
        std::time::SystemTime::now(),
        std::process::id()
    )
}

#[test]
fn nvrtc_images_are_cached_checked_and_rebuilt() {
    if !here("nvrtc", cuda::nvrtc_available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let u = unit(
        Lang::Cuda,
        format!(
            "{}extern \"C\" __global__ void k_c(float *p) {{ p[threadIdx.x] *= 2.0f; }}",
            nonce()
        ),
    );
    let cache = GpuCache::new(dir.path());
    let runs = cuda::nvrtc_compiles();
    let cubin = cuda::nvrtc_compile_in(&u, "sm_90", &cache).unwrap();
    assert_eq!(&cubin[..4], b"\x7fELF");
    assert_eq!(cuda::nvrtc_compiles(), runs + 1);
    // A new process: the same bytes, NVRTC not run.
    let fresh = GpuCache::new(dir.path());
    assert_eq!(cuda::nvrtc_compile_in(&u, "sm_90", &fresh).unwrap(), cubin);
    assert_eq!((cuda::nvrtc_compiles(), fresh.disk_hits()), (runs + 1, 1));
    // Another architecture is another entry.
    let ptx = cuda::nvrtc_compile_in(&u, "compute_90", &fresh).unwrap();
    assert!(String::from_utf8_lossy(&ptx).contains(".entry k_c"));
    assert_eq!(cuda::nvrtc_compiles(), runs + 2);
    assert_eq!(cache::stats(dir.path()).unwrap().gpu_entries, 2);
    // A damaged entry: NVRTC runs again, and gives what it gave before.
    let cubin_entry = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gpu"))
        .find(|p| std::fs::read(p).unwrap().starts_with(b"\x7fELF"))
        .unwrap();
    let mut bytes = std::fs::read(&cubin_entry).unwrap();
    bytes[100] ^= 0x80;
    std::fs::write(&cubin_entry, &bytes).unwrap();
    let third = GpuCache::new(dir.path());
    assert_eq!(cuda::nvrtc_compile_in(&u, "sm_90", &third).unwrap(), cubin);
    assert_eq!(cuda::nvrtc_compiles(), runs + 3);
    assert_eq!(third.rebuilt().len(), 1, "{:?}", third.rebuilt());
    // A rejected unit: NVRTC's log, every time, nothing kept.
    let bad = unit(
        Lang::Cuda,
        format!(
            "{}extern \"C\" __global__ void k_b(float *p) {{ p[0] = undefined_name; }}",
            nonce()
        ),
    );
    for _ in 0..2 {
        match cuda::nvrtc_compile_in(&bad, "sm_90", &third) {
            Err(Error::GpuCompile { log, .. }) => assert!(log.contains("undefined_name"), "{log}"),
            other => panic!("expected a compile error, got {other:?}"),
        }
    }
    assert_eq!(cuda::nvrtc_compiles(), runs + 5);
    assert_eq!(cache::stats(dir.path()).unwrap().gpu_entries, 2);
}

#[test]
fn hiprtc_code_objects_are_cached_checked_and_rebuilt() {
    if !here("hiprtc", hip::hiprtc_available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let u = unit(
        Lang::Hip,
        format!(
            "{}extern \"C\" __global__ void k_h(float *p) {{ p[threadIdx.x] *= 2.0f; }}",
            nonce()
        ),
    );
    let cache = GpuCache::new(dir.path());
    let runs = hip::hiprtc_compiles();
    let code = hip::hiprtc_compile_in(&u, "gfx90a", &cache).unwrap();
    assert!(code.starts_with(b"\x7fELF") || code.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
    assert_eq!(hip::hiprtc_compiles(), runs + 1);
    // The same process: from memory; a new process: from disk. hiprtc not run.
    assert_eq!(hip::hiprtc_compile_in(&u, "gfx90a", &cache).unwrap(), code);
    let fresh = GpuCache::new(dir.path());
    assert_eq!(hip::hiprtc_compile_in(&u, "gfx90a", &fresh).unwrap(), code);
    assert_eq!((hip::hiprtc_compiles(), fresh.disk_hits()), (runs + 1, 1));
    // A damaged entry is rebuilt by hiprtc, to the same code object.
    let entry = only_gpu_entry(dir.path());
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&entry, &bytes).unwrap();
    let third = GpuCache::new(dir.path());
    assert_eq!(hip::hiprtc_compile_in(&u, "gfx90a", &third).unwrap(), code);
    assert_eq!(hip::hiprtc_compiles(), runs + 2);
    assert_eq!(third.rebuilt().len(), 1, "{:?}", third.rebuilt());
    // Another architecture is another entry.
    hip::hiprtc_compile_in(&u, "gfx908", &third).unwrap();
    assert_eq!(hip::hiprtc_compiles(), runs + 3);
    assert_eq!(cache::stats(dir.path()).unwrap().gpu_entries, 2);
}

fn only_gpu_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gpu"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}
