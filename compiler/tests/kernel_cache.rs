//! The kernel cache cannot hurt: damaged, swapped or empty entries are rebuilt (never
//! loaded), a compiler that writes nothing or hangs gives a typed error, `UOPKIT_CC`-style
//! command lines are split, and a library built with `-ffast-math` cannot leave
//! flush-to-zero switched on.
//!
//! Every test has its own cache directory and its own `CCompiler`; none reads or sets the
//! process environment. Compiler wrappers are shell scripts run as `/bin/sh script` (so the
//! script is never executed while another thread may hold it open for writing).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uopkit_compiler::render::c_unit;
use uopkit_compiler::runtime::cache::{self, CCompiler};
use uopkit_compiler::runtime::{fpenv, CpuDevice, Device, Error, Unit};
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::{KArg, ParamDecl, Program};

const CC: &str = "cc";

/// `out[i] = a[i] + k` over 4 int32 elements, as a unit whose text is unique to this run.
fn unit(tag: &str, k: u64) -> Unit {
    let p32 = |written| ParamDecl {
        dtype: DType::Int32,
        size: 4,
        written,
    };
    let mut p = Program::new(format!("add_{tag}"), vec![p32(false), p32(true)]);
    let a = p.push(Op::PARAM, DType::Int32, vec![], KArg::Param(0));
    let out = p.push(Op::PARAM, DType::Int32, vec![], KArg::Param(1));
    let end = p.push(Op::CONST, DType::Int64, vec![], KArg::Const(4));
    let r = p.push(Op::RANGE, DType::Int64, vec![end], KArg::Axis(0));
    let ai = p.push(Op::INDEX, DType::Int32, vec![a, r], KArg::None);
    let av = p.push(Op::LOAD, DType::Int32, vec![ai], KArg::None);
    let kc = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(k));
    let sum = p.push(Op::ADD, DType::Int32, vec![av, kc], KArg::None);
    let oi = p.push(Op::INDEX, DType::Int32, vec![out, r], KArg::None);
    p.push(Op::STORE, DType::Void, vec![oi, sum], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    let mut u = c_unit(&[p]);
    let nonce = format!(
        "/* {tag} {:?} {} */\n",
        std::time::SystemTime::now(),
        std::process::id()
    );
    u.source.insert_str(0, &nonce);
    u
}

/// Compiles `u` on a fresh device of `c` and runs it on [1, 2, 3, 4].
fn run(c: &Arc<CCompiler>, u: &Unit) -> Result<Vec<i32>, Error> {
    let dev = CpuDevice::new(0, c.clone());
    let prog = dev.compile(u)?;
    let a = dev.alloc(16)?;
    let o = dev.alloc(16)?;
    let input: Vec<u8> = [1i32, 2, 3, 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    dev.copy_in(&a, &input)?;
    dev.launch(&prog, &u.kernels[0].name, &[&a, &o])?;
    Ok(dev
        .copy_out(&o)?
        .chunks(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn compiler(dir: &Path) -> Arc<CCompiler> {
    Arc::new(CCompiler::new(CC, dir))
}

/// Builds `u` into `dir`'s cache once; returns its entry's path.
fn build(dir: &Path, u: &Unit, k: i32) -> PathBuf {
    let c = compiler(dir);
    assert_eq!(run(&c, u).unwrap(), vec![1 + k, 2 + k, 3 + k, 4 + k]);
    let path = c.object_path(&u.source).unwrap();
    assert!(path.is_file());
    path
}

/// A fresh compiler (as in a new process) on a damaged entry: one rebuild, right values.
fn expect_rebuilt(dir: &Path, u: &Unit, k: i32, reason: &str) {
    let c = compiler(dir);
    assert_eq!(
        run(&c, u).unwrap(),
        vec![1 + k, 2 + k, 3 + k, 4 + k],
        "after {reason}"
    );
    assert_eq!(c.spawns(), 1, "rebuilt once");
    let rebuilt = c.rebuilt();
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    let path = c.object_path(&u.source).unwrap();
    assert!(
        rebuilt[0].contains(&path.display().to_string()) && rebuilt[0].contains(reason),
        "{rebuilt:?}"
    );
    // The rebuilt entry is good: the next fresh compiler loads it without compiling.
    let again = compiler(dir);
    assert_eq!(run(&again, u).unwrap(), vec![1 + k, 2 + k, 3 + k, 4 + k]);
    assert_eq!((again.spawns(), again.rebuilt().len()), (0, 0));
    let st = cache::stats(dir).unwrap();
    assert_eq!(st.bad_entries, 0, "{st:?}");
}

#[test]
fn truncated_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let u = unit("trunc", 7);
    let path = build(dir.path(), &u, 7);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(cache::stats(dir.path()).unwrap().bad_entries, 1);
    expect_rebuilt(dir.path(), &u, 7, "no checksum trailer");
}

#[test]
fn garbage_after_a_valid_elf_header_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let u = unit("garbage", 3);
    let path = build(dir.path(), &u, 3);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    for (i, b) in bytes[64..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37) ^ 0x5a;
    }
    // Keep the length and even the trailer's magic: only the checksum can tell.
    bytes[n - 80..n - 72].copy_from_slice(b"UOPKSUM1");
    bytes[n - 72..n - 64].copy_from_slice(&((n - 80) as u64).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    expect_rebuilt(dir.path(), &u, 3, "checksum");
}

#[test]
fn swapped_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (ua, ub) = (unit("swap_a", 1), unit("swap_b", 100));
    let pa = build(dir.path(), &ua, 1);
    let pb = build(dir.path(), &ub, 100);
    assert_ne!(pa, pb);
    std::fs::copy(&pb, &pa).unwrap();
    assert_eq!(cache::stats(dir.path()).unwrap().bad_entries, 1);
    expect_rebuilt(dir.path(), &ua, 1, "another unit");
}

#[test]
fn empty_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let u = unit("empty", 5);
    let path = build(dir.path(), &u, 5);
    std::fs::write(&path, b"").unwrap();
    expect_rebuilt(dir.path(), &u, 5, "is empty");
}

/// A compiler wrapper script, run as `/bin/sh <script>`, that answers `--version` with the
/// real compiler's and runs `body` otherwise (`$OUT` is the `-o` argument).
fn wrapper(dir: &Path, name: &str, body: &str) -> String {
    let script = dir.join(name);
    let text = format!(
        "if [ \"$1\" = --version ]; then exec {CC} --version; fi\n\
         OUT=; prev=; for a in \"$@\"; do [ \"$prev\" = -o ] && OUT=$a; prev=$a; done\n\
         {body}\n"
    );
    std::fs::write(&script, text).unwrap();
    format!("/bin/sh '{}'", script.display())
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("k_") && n.ends_with(".so"))
        .collect()
}

#[test]
fn a_compiler_that_writes_nothing_is_a_compile_error() {
    let tools = tempfile::tempdir().unwrap();
    let cases = [
        (
            "nothing",
            "cat > /dev/null; rm -f \"$OUT\"; exit 0",
            "no object file",
        ),
        (
            "empty",
            "cat > /dev/null; : > \"$OUT\"; exit 0",
            "empty file",
        ),
        (
            "text",
            "cat > /dev/null; echo 'not an object' > \"$OUT\"; exit 0",
            "not a usable shared object",
        ),
    ];
    for (name, body, problem) in cases {
        let dir = tempfile::tempdir().unwrap();
        let line = wrapper(tools.path(), name, body);
        let u = unit(name, 2);
        for _ in 0..2 {
            let c = Arc::new(CCompiler::with_command_line(&line, dir.path()).unwrap());
            let e = run(&c, &u).unwrap_err();
            assert!(
                matches!(&e, Error::Compile { status, .. } if status.contains(problem)),
                "{name}: {e}"
            );
            assert_eq!(
                c.spawns(),
                1,
                "{name}: nothing was cached, so it compiles again"
            );
            assert!(entries(dir.path()).is_empty(), "{name}: no entry written");
        }
        // A working compiler then fills the same directory normally.
        assert_eq!(run(&compiler(dir.path()), &u).unwrap(), vec![3, 4, 5, 6]);
    }
}

#[test]
fn a_hanging_compiler_is_killed_after_the_timeout() {
    let tools = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = tools.path().join("sleep.pid");
    let line = wrapper(
        tools.path(),
        "hang",
        &format!("sleep 1000 &\necho $! > '{}'\nwait", pidfile.display()),
    );
    let c = Arc::new(
        CCompiler::with_command_line(&line, dir.path())
            .unwrap()
            .with_timeout(Duration::from_secs(2)),
    );
    let t = Instant::now();
    let e = run(&c, &unit("hang", 1)).unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(&e, Error::CompileTimeout { timeout, .. } if *timeout == Duration::from_secs(2)),
        "{e}"
    );
    assert!(e.to_string().contains("UOPKIT_CC_TIMEOUT"), "{e}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(entries(dir.path()).is_empty());
    // The compiler's child (same process group) was killed too.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = std::fs::read_to_string(&stat)
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false);
        if !alive {
            break;
        }
        assert!(Instant::now() < deadline, "sleep {} still runs", pid.trim());
        std::thread::sleep(Duration::from_millis(50));
    }
    // A compiler that hangs even on --version is stopped as well.
    let line = wrapper(tools.path(), "hang_version", "");
    std::fs::write(tools.path().join("hang_version"), "exec sleep 1000\n").unwrap();
    let c = Arc::new(
        CCompiler::with_command_line(&line, dir.path())
            .unwrap()
            .with_timeout(Duration::from_secs(1)),
    );
    let e = run(&c, &unit("hang_version", 1)).unwrap_err();
    assert!(
        matches!(&e, Error::CompileTimeout { cc, .. } if cc.contains("--version")),
        "{e}"
    );
}

#[test]
fn compiler_command_lines_are_split_and_their_flags_are_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let mut u = unit("flags", 4);
    u.source.insert_str(
        0,
        "#if UOPKIT_TEST_FLAG != 42\n#error the flag did not arrive\n#endif\n",
    );
    let c = Arc::new(
        CCompiler::with_command_line(&format!("{CC} '-DUOPKIT_TEST_FLAG=42'"), dir.path()).unwrap(),
    );
    assert_eq!(c.cc(), CC);
    assert_eq!(c.args(), ["-DUOPKIT_TEST_FLAG=42"]);
    assert_eq!(run(&c, &u).unwrap(), vec![5, 6, 7, 8]);
    // Without the flag: another key, and the source does not compile.
    let plain = compiler(dir.path());
    assert_ne!(
        plain.object_path(&u.source).unwrap(),
        c.object_path(&u.source).unwrap()
    );
    let e = run(&plain, &u).unwrap_err();
    assert!(
        matches!(&e, Error::Compile { stderr, .. } if stderr.contains("the flag did not arrive")),
        "{e}"
    );
    // Extra flags also change the key of a unit that does not need them.
    let v = unit("flags2", 1);
    let o3 = CCompiler::with_command_line(&format!("{CC} -O3"), dir.path()).unwrap();
    assert_ne!(
        o3.object_path(&v.source).unwrap(),
        plain.object_path(&v.source).unwrap()
    );
    // A line a shell could not split is a typed error.
    let e = CCompiler::with_command_line("cc 'unterminated", dir.path()).unwrap_err();
    assert!(matches!(e, Error::BadSetting { .. }), "{e}");
}

#[test]
fn stale_temp_files_are_cleaned_and_the_cache_can_be_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = d.join(".k_00000000000000000000000000000000.deadbeef.so.tmp");
    let fresh = d.join(".k_00000000000000000000000000000000.cafe.so.tmp");
    let foreign = d.join("notes.txt");
    for p in [&old, &fresh, &foreign] {
        std::fs::write(p, b"x").unwrap();
    }
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(2 * 3600))
        .unwrap();
    drop(f);
    let u = unit("stale", 1);
    build(d, &u, 1);
    assert!(!old.exists(), "a stale temporary file is removed on open");
    assert!(fresh.exists() && foreign.exists());
    // A failed compile keeps its source.
    let mut bad = unit("stale_bad", 1);
    bad.source.push_str("\nint oops(void) { return 1 +; }\n");
    assert!(matches!(
        run(&compiler(d), &bad),
        Err(Error::Compile { .. })
    ));
    let st = cache::stats(d).unwrap();
    assert_eq!(
        (
            st.exists,
            st.entries,
            st.bad_entries,
            st.temp_files,
            st.other_files
        ),
        (true, 1, 0, 1, 1),
        "{st:?}"
    );
    assert!(st.bytes > 1000, "{st:?}");
    assert_eq!(cache::clean(d).unwrap(), 3);
    assert!(foreign.exists(), "only uopkit's files are removed");
    let st = cache::stats(d).unwrap();
    assert_eq!(
        (st.entries, st.temp_files, st.other_files, st.bytes),
        (0, 0, 0, 0)
    );
    let missing = d.join("nope");
    assert_eq!(cache::clean(&missing).unwrap(), 0);
    assert!(!cache::stats(&missing).unwrap().exists);
}

#[test]
fn default_cache_dirs_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a").join("uopkit");
    cache::prepare_cache_dir(&d, true).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // An existing default directory that others may write is tightened.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    cache::prepare_cache_dir(&d, true).unwrap();
    let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // A directory of another user (root's /, when this is not root) is refused.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        let e = cache::prepare_cache_dir(Path::new("/"), true).unwrap_err();
        assert!(matches!(e, Error::CacheNotOwned { .. }), "{e}");
    }
}

/// The two tests that read the process-wide tampering record take turns.
static FP_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `gcc -ffast-math` links `crtfastmath.o`, whose constructor turns on FTZ/DAZ at dlopen.
/// The runtime restores the state and reports it.
#[test]
fn a_fast_math_library_cannot_change_the_fp_state() {
    let gcc_ok = std::process::Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !gcc_ok {
        eprintln!("skipped: no gcc");
        return;
    }
    // GCC 13 and later no longer link crtfastmath.o into shared objects: name it.
    let crt = std::process::Command::new("gcc")
        .arg("-print-file-name=crtfastmath.o")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| Path::new(p).is_absolute() && Path::new(p).is_file());
    let Some(crt) = crt else {
        eprintln!("skipped: gcc has no crtfastmath.o on this target");
        return;
    };
    let _turn = FP_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(
        CCompiler::with_command_line(&format!("gcc -ffast-math '{crt}'"), dir.path()).unwrap(),
    );
    let before = fpenv::current();
    let _ = fpenv::take_tampering();
    let u = unit("fastmath", 9);
    assert_eq!(run(&c, &u).unwrap(), vec![10, 11, 12, 13]);
    assert_eq!(fpenv::current(), before, "the FP control state is restored");
    if fpenv::FpState::FTZ_DAZ == 0 {
        return;
    }
    let msg = fpenv::take_tampering().expect("the change is reported");
    let entry = c.object_path(&u.source).unwrap();
    assert!(
        msg.contains("changed the FP control state")
            && msg.contains(&format!("during dlopen of {}", entry.display()))
            && msg.contains("restored"),
        "{msg}"
    );
    #[cfg(target_arch = "x86_64")]
    assert!(msg.contains("MXCSR 0x1f80 -> 0x9fc0"), "{msg}");
    // Loading it again from the cache (a new process's view) is caught the same way.
    let c2 = Arc::new(
        CCompiler::with_command_line(&format!("gcc -ffast-math '{crt}'"), dir.path()).unwrap(),
    );
    assert_eq!(run(&c2, &u).unwrap(), vec![10, 11, 12, 13]);
    assert_eq!(c2.spawns(), 0);
    assert_eq!(fpenv::current(), before);
    assert!(fpenv::take_tampering().is_some());
}

/// A kernel launch that changes the state is restored and reported too (the guard around
/// every launch). The kernel's C sets MXCSR.FZ itself.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_kernel_that_sets_ftz_is_restored() {
    let _turn = FP_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut u = unit("setftz", 2);
    // Rename the rendered kernel and wrap it in one that sets FTZ first.
    let sym = u.kernels[0].symbol.clone();
    u.source = u.source.replace(
        &format!("void {sym}(void **args)"),
        &format!("static void inner_{sym}(void **args)"),
    );
    u.source.push_str(&format!(
        "\nvoid {sym}(void **args) {{\n  unsigned m;\n  __asm__ volatile(\"stmxcsr %0\" : \"=m\"(m));\n  m |= 0x8000u;\n  __asm__ volatile(\"ldmxcsr %0\" : : \"m\"(m));\n  inner_{sym}(args);\n}}\n"
    ));
    let before = fpenv::current();
    let c = compiler(dir.path());
    assert_eq!(run(&c, &u).unwrap(), vec![3, 4, 5, 6]);
    assert_eq!(fpenv::current(), before);
    let msg = fpenv::take_tampering().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "during launch of kernel '{}' on CPU:0",
            u.kernels[0].name
        )),
        "{msg}"
    );
}

/// The environment's settings, read in a child process (this process's environment is
/// never changed): a bad `UOPKIT_CC_TIMEOUT` is a typed error naming it, `UOPKIT_CC` is
/// split, and the default directory follows `XDG_CACHE_HOME`.
#[test]
fn settings_from_the_environment() {
    if let Some(mode) = std::env::var_os("UOPKIT_TEST_CHILD_MODE") {
        match mode.to_str() {
            Some("bad-timeout") => {
                let e = CCompiler::from_env().unwrap_err();
                assert!(
                    matches!(&e, Error::BadSetting { name, .. } if name == "UOPKIT_CC_TIMEOUT"),
                    "{e}"
                );
                // The process-wide compiler exists anyway and reports it on use.
                let e = CpuDevice::get(0).compile(&unit("env", 1)).unwrap_err();
                println!("CHILD-ERROR: {e}");
            }
            Some("good") => {
                let c = CCompiler::from_env().unwrap();
                assert_eq!((c.cc(), c.args()), ("cc", &["-O1".to_string()][..]));
                assert_eq!(c.timeout(), Duration::from_millis(7500));
                let xdg = std::env::var_os("XDG_CACHE_HOME").unwrap();
                let want = Path::new(&xdg).join("uopkit");
                assert_eq!(c.cache_dir(), want);
                assert_eq!(cache::cache_dir_from_env().unwrap(), want);
                assert_eq!(
                    run(&Arc::new(c), &unit("env", 1)).unwrap(),
                    vec![2, 3, 4, 5]
                );
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&want).unwrap().permissions().mode();
                println!("CHILD-OK mode {:o}", mode & 0o777);
            }
            _ => unreachable!(),
        }
        return;
    }
    let xdg = tempfile::tempdir().unwrap();
    let child = |mode: &str, vars: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "settings_from_the_environment",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UOPKIT_TEST_CHILD_MODE", mode)
        .env_remove("UOPKIT_CACHE_DIR")
        .env_remove("UOPKIT_CC")
        .env_remove("UOPKIT_CC_TIMEOUT")
        .env("XDG_CACHE_HOME", xdg.path());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = child("bad-timeout", &[("UOPKIT_CC_TIMEOUT", "soon")]);
    assert!(
        text.contains("CHILD-ERROR: UOPKIT_CC_TIMEOUT=\"soon\": expected a positive number"),
        "{text}"
    );
    let text = child(
        "good",
        &[("UOPKIT_CC", "cc -O1"), ("UOPKIT_CC_TIMEOUT", "7.5")],
    );
    assert!(text.contains("CHILD-OK mode 700"), "{text}");
}
