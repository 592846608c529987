//! The GPU backends from the command line, on whatever this machine has: NVRTC compile
//! trials that pass, and fail with NVRTC's log when the unit cannot compile; GPU runtime
//! trials that are skipped with the reason where there is no device, and fail instead when
//! `UOPKIT_REQUIRE_BACKENDS` names them.

use std::path::Path;
use std::process::Command;

use uopkit_compiler::runtime::cuda;

fn uopkit(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(args)
        .env_remove("UOPKIT_REQUIRE_BACKENDS")
        .envs(env.iter().copied())
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("the uopkit binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// NVRTC here, or the reason to skip (a failure where CI requires it).
fn nvrtc() -> bool {
    match cuda::nvrtc_available() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                !uopkit_compiler::runtime::required("nvrtc"),
                "nvrtc is required here but unavailable: {why}"
            );
            eprintln!("skipped: {why}");
            false
        }
    }
}

#[test]
fn nvrtc_trials_pass_and_fail_with_the_compilers_log() {
    if !nvrtc() {
        return;
    }
    let case = "corpus/reduce/add_int32_declared_tree_2d.json";
    let (code, out) = uopkit(&["check", "--backend", "nvrtc", case], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nvrtc: 1 passed"), "{out}");
    // An architecture NVRTC does not know: every unit is rejected, with the log.
    let (code, out) = uopkit(
        &["check", "--backend", "nvrtc", case],
        &[("UOPKIT_CUDA_ARCH", "sm_1")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NVRTC failed to compile the unit"), "{out}");
    assert!(out.contains("--gpu-architecture=sm_1"), "{out}");
}

#[test]
fn runtime_trials_skip_without_a_device_and_fail_when_required() {
    let case = "corpus/alu/add_float32.json";
    let present = cuda::device_count().is_ok_and(|n| n > 0);
    let (code, out) = uopkit(&["check", "--backend", "cuda,cuda-cpu", "-v", case], &[]);
    assert_eq!(code, 0, "{out}");
    if present {
        assert!(
            out.contains("cuda: 1 passed") && out.contains("cuda-cpu: 1 passed"),
            "{out}"
        );
        return;
    }
    assert!(
        out.contains("cuda: 0 passed, 0 failed, 0 xfail, 0 xpass, 1 skipped"),
        "{out}"
    );
    assert!(out.contains("CUDA driver unavailable"), "{out}");
    let (code, out) = uopkit(
        &["check", "--backend", "cuda", case],
        &[("UOPKIT_REQUIRE_BACKENDS", "cuda")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cuda is required here"), "{out}");
}
