//! The backends a harness knows, by name, and how each is opened: in this process (the
//! oracle, the kernel interpreter, anything under `--in-process`) or in worker processes
//! (compiled backends), `exec:CMD` for an external program, and `tinygrad:DEV` for the tinygrad
//! bridge (`bridges/tinygrad/bridge.py DEV`, an `exec:` backend with a known command line).
//!
//! A backend crate outside this workspace registers its own backend and runs the whole
//! suite against it from its own `cargo test` (see `harness::libtest_main` and
//! `docs/backend-protocol.md`, "Rust plug-ins").

use std::collections::BTreeMap;
use std::sync::Arc;

use super::process::{Limits, ProcessBackend, Spawn};
use super::{cpu, gpu, gpusim, kernels, oracle, Backend};
use crate::worker::WORKER_ENV;

pub type Factory = Arc<dyn Fn() -> Result<Arc<dyn Backend>, String> + Send + Sync>;

#[derive(Clone)]
pub struct Entry {
    pub name: String,
    pub about: String,
    /// Runs compiled code: opened in worker processes unless in-process mode is asked for.
    pub compiled: bool,
    /// Drives a GPU (`cuda`, `hip`, …): its worker runs without the address-space limit (a
    /// GPU driver reserves host address space of several times the device's memory), and a
    /// worker that cannot start makes the backend unavailable — every trial skipped with the
    /// reason, or failed where `UOPKIT_REQUIRE_BACKENDS` names it — instead of stopping the run.
    pub gpu: bool,
    factory: Factory,
}

/// How to open backends.
#[derive(Clone, Debug, Default)]
pub struct OpenOpts {
    /// Run compiled backends in this process (debugging; the FP control state is still
    /// saved and restored around every kernel load and launch).
    pub in_process: bool,
    pub limits: Limits,
    /// How to start this program as a worker (default: the current executable; the worker
    /// is selected by the environment variable `UOPKIT_WORKER_BACKEND`).
    pub worker_program: Option<String>,
    pub worker_args: Vec<String>,
}

#[derive(Clone, Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// uopkit's own backends: `oracle`, `kernels`, `gpusim`, `cpu`, and the GPU backends
    /// `nvrtc`, `hiprtc`, `cuda`, `cuda-cpu`, `hip`, `hip-cpu` ([`gpu`]).
    pub fn builtin() -> Self {
        let mut r = Registry::new();
        r.register(
            "oracle",
            "the exact interpreter, against the cases' own expected values",
            false,
            || Ok(Arc::new(oracle::Oracle)),
        );
        r.register(
            "kernels",
            "the compiler's lowered kernel programs in the exact kernel interpreter, against the oracle",
            false,
            || Ok(Arc::new(kernels::Kernels)),
        );
        r.register(
            "gpusim",
            "the compiler's GPU-style kernels (launch indices, local-memory reductions, barriers) in the exact kernel interpreter under 3 seeded interleavings, against the oracle",
            false,
            || Ok(Arc::new(gpusim::GpuSim)),
        );
        r.register(
            "cpu",
            "the compiler's C code on CPU devices (system C compiler), against the oracle",
            true,
            || {
                // An environment problem (no C compiler) is reported once, before any trial.
                uopkit_compiler::runtime::CCompiler::global()
                    .key("")
                    .map_err(|e| format!("{e} (set UOPKIT_CC to a C compiler)"))?;
                Ok(Arc::new(cpu::Cpu))
            },
        );
        for rt in [gpu::Runtime::Cuda, gpu::Runtime::Hip] {
            let compiler = gpu::GpuCompile::compiler_name(rt);
            r.register(
                compiler,
                &format!("compiles every case's GPU kernels with the real {compiler} (no GPU needed); fails on any compile error, with the log"),
                true,
                move || Ok(Arc::new(gpu::GpuCompile::new(rt))),
            );
            for placement in [gpu::Placement::Gpu, gpu::Placement::Mixed] {
                let b = gpu::GpuRun::new(rt, placement);
                let about = match placement {
                    gpu::Placement::Gpu => format!("the compiler's GPU kernels on {} devices (every CPU:n of the case becomes GPU n), against the oracle", rt.name()),
                    gpu::Placement::Mixed => format!("as {}, but only CPU:0 moves to the GPU: cross-runtime copies and assigns (tinygrad's (Device.DEFAULT, \"CPU\") pair)", rt.name()),
                };
                r.register(b.name().to_string().as_str(), &about, true, move || {
                    Ok(Arc::new(gpu::GpuRun::new(rt, placement)))
                });
                r.mark_gpu(b.name());
            }
        }
        r
    }

    /// Adds (or replaces) a backend.
    pub fn register(
        &mut self,
        name: &str,
        about: &str,
        compiled: bool,
        factory: impl Fn() -> Result<Arc<dyn Backend>, String> + Send + Sync + 'static,
    ) -> &mut Self {
        self.entries.insert(
            name.to_string(),
            Entry {
                name: name.to_string(),
                about: about.to_string(),
                compiled,
                gpu: false,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// Marks a registered backend as driving a GPU ([`Entry::gpu`]).
    pub fn mark_gpu(&mut self, name: &str) -> &mut Self {
        if let Some(e) = self.entries.get_mut(name) {
            e.gpu = true;
        }
        self
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    fn unknown(&self, name: &str) -> String {
        format!(
            "unknown backend '{name}' (known: {}, exec:CMD, tinygrad:DEV)",
            self.names().join(", ")
        )
    }

    /// The backend itself, in this process (what a worker serves).
    pub fn open_in_process(&self, name: &str) -> Result<Arc<dyn Backend>, String> {
        let e = self.entries.get(name).ok_or_else(|| self.unknown(name))?;
        (e.factory)()
    }

    /// Opens `spec` (`cpu`, `exec:CMD`, `tinygrad:DEV`, …) for a harness run.
    pub fn open(&self, spec: &str, opts: &OpenOpts) -> Result<Arc<dyn Backend>, String> {
        if let Some(dev) = spec.strip_prefix("tinygrad:") {
            let sp = tinygrad_spawn(dev)?;
            let what = format!("{} {}", sp.program, sp.args.join(" "));
            return match ProcessBackend::start(spec, sp, opts.limits.clone()) {
                Ok(pb) => {
                    let name = pb.hello().name.clone();
                    Ok(Arc::new(pb.renamed(name)))
                }
                // No interpreter, or one that dies before its handshake: skipped with the reason.
                Err(why) => Ok(Arc::new(Unavailable {
                    name: spec.to_string(),
                    reason: format!("the tinygrad bridge ({what}) did not start: {why}"),
                })),
            };
        }
        if let Some(cmd) = spec.strip_prefix("exec:") {
            let sp = Spawn::from_command_line(cmd)?;
            let pb = ProcessBackend::start(spec, sp, opts.limits.clone())?;
            let name = pb.hello().name.clone();
            return Ok(Arc::new(pb.renamed(name)));
        }
        let e = self.entries.get(spec).ok_or_else(|| self.unknown(spec))?;
        if !e.compiled || opts.in_process {
            return (e.factory)();
        }
        let program = match &opts.worker_program {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|err| format!("cannot find this program to start workers: {err}"))?
                .to_string_lossy()
                .into_owned(),
        };
        let sp = Spawn {
            program,
            args: opts.worker_args.clone(),
            env: vec![(WORKER_ENV.to_string(), spec.to_string())],
        };
        let mut limits = opts.limits.clone();
        if e.gpu {
            limits.memory = None;
        }
        match ProcessBackend::start(spec, sp, limits) {
            Ok(pb) => Ok(Arc::new(pb)),
            Err(why) if e.gpu => Ok(Arc::new(Unavailable {
                name: spec.to_string(),
                reason: format!("its worker did not start: {why}"),
            })),
            Err(why) => Err(why),
        }
    }
}

/// Backend specs that name an external program, started while planning to learn its name
/// from the handshake: `exec:CMD` and `tinygrad:DEV`.
pub fn is_program_spec(spec: &str) -> bool {
    spec.starts_with("exec:") || spec.starts_with("tinygrad:")
}

/// A backend name the registry can open without listing it (`tinygrad:DEV`): xfail entries
/// may name one whether or not this run selects it.
pub fn is_pattern_name(name: &str) -> bool {
    name.strip_prefix("tinygrad:")
        .is_some_and(valid_tinygrad_device)
}

fn valid_tinygrad_device(dev: &str) -> bool {
    !dev.is_empty()
        && dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The repository root (where `bridges/` and `.venv/` are).
fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// How `tinygrad:DEV` is run: `PYTHON BRIDGE DEV`, with PYTHON from `UOPKIT_TINYGRAD_PYTHON`,
/// else `<repo>/.venv/bin/python` if it exists, else `python3`, and BRIDGE from
/// `UOPKIT_TINYGRAD_BRIDGE` (a modified bridge, judged under the same backend name and
/// manifests), else `<repo>/bridges/tinygrad/bridge.py`.
pub fn tinygrad_spawn(dev: &str) -> Result<Spawn, String> {
    if !valid_tinygrad_device(dev) {
        return Err(format!(
            "tinygrad:{dev}: a tinygrad device name is letters, digits, '_' and ':' (tinygrad:PYTHON, tinygrad:CPU, tinygrad:CUDA)"
        ));
    }
    let root = repo_root();
    let venv = root.join(".venv").join("bin").join("python");
    let python = match std::env::var("UOPKIT_TINYGRAD_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ if venv.is_file() => venv.to_string_lossy().into_owned(),
        _ => "python3".to_string(),
    };
    let bridge = match std::env::var("UOPKIT_TINYGRAD_BRIDGE") {
        Ok(p) if !p.is_empty() => std::path::PathBuf::from(p),
        _ => root.join("bridges").join("tinygrad").join("bridge.py"),
    };
    Ok(Spawn {
        program: python,
        args: vec![bridge.to_string_lossy().into_owned(), dev.to_string()],
        env: vec![],
    })
}

/// A GPU backend whose worker could not start (a driver that crashes or hangs at
/// initialization): every trial is skipped with the reason, or fails where required.
struct Unavailable {
    name: String,
    reason: String,
}

impl Backend for Unavailable {
    fn name(&self) -> &str {
        &self.name
    }

    fn unavailable(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn run(&self, _job: &super::Job) -> Result<super::Ran, super::BackendError> {
        Err(super::BackendError::Unsupported(self.reason.clone()))
    }
}

/// Serves the backend named by `UOPKIT_WORKER_BACKEND`, if set: call first thing in `main`
/// of any program that runs the harness. Returns the exit code when this process is a worker.
pub fn serve_if_worker(reg: &Registry) -> Option<i32> {
    let name = std::env::var(WORKER_ENV).ok()?;
    let backend = match reg.open_in_process(&name) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("uopkit worker: {e}");
            return Some(2);
        }
    };
    // Deep graphs recurse in the compiler: serve on a thread with room for them.
    let served = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || crate::worker::serve(backend.as_ref()));
    Some(match served.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => 101,
        Err(e) => {
            eprintln!("uopkit worker: cannot start: {e}");
            2
        }
    })
}
