//! The machine's ceilings: STREAM-like copy, triad and read bandwidth and peak mul+add /
//! FMA throughput, measured by `probe.c`, compiled by the kernel runtime's own C compiler
//! (`CCompiler::load`: the same compiler, flags and cache as the kernels).
//!
//! Bandwidth counts bytes as STREAM does: copy 2 × 4 bytes per element, triad 3 × 4, read
//! 1 × 4 (write-allocate traffic is not counted). Copy and triad each run twice, with plain and
//! with streaming stores (x86 with AVX: `movntps`, which skip the write-allocate read, as the
//! kernels' large elementwise loops do, render/stream.rs), and the faster run counts: the
//! ceiling is the better way of writing memory this machine has. Arithmetic: 2 flops per lane, chain and
//! step (a MUL and an ADD, or one FMA), on the widest vectors the target has (16 lanes × 24
//! chains with AVX-512, else 8 × 12: `uopkit_probe_flops_per_step`), every chain in a register,
//! so the probe measures the issue rate of the vector pipes, not the latency of a chain.
//! It is the machine's peak: uopkit's CPU tiles are sized for the machine's vectors
//! (`cpu_tile`'s `vector_bytes`: 64 bytes with AVX-512F, else 32), but an exact kernel may not
//! fuse the multiply and the add, so the mul+add figure is its ceiling (reports before this
//! probe measured chain latency, a lower figure).

use std::sync::Arc;
use std::time::{Duration, Instant};

use libloading::Library;
use uopkit_compiler::runtime::CCompiler;

use super::BenchError;

const SOURCE: &str = include_str!("probe.c");

type CopyFn = unsafe extern "C" fn(*mut f32, *const f32, i64, i32, i32) -> f32;
type TriadFn = unsafe extern "C" fn(*mut f32, *const f32, *const f32, f32, i64, i32, i32) -> f32;
type ReadFn = unsafe extern "C" fn(*const f32, i64, i32) -> f32;
type FlopFn = unsafe extern "C" fn(i64, i32) -> f32;
type PerStepFn = unsafe extern "C" fn() -> i64;

/// One probe: what it measures and how to run it once.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeKind {
    Copy,
    Triad,
    Read,
    MulAdd,
    Fma,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 5] = [
        ProbeKind::Copy,
        ProbeKind::Triad,
        ProbeKind::Read,
        ProbeKind::MulAdd,
        ProbeKind::Fma,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Copy => "copy",
            ProbeKind::Triad => "triad",
            ProbeKind::Read => "read",
            ProbeKind::MulAdd => "mul+add",
            ProbeKind::Fma => "fma",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            ProbeKind::Copy | ProbeKind::Triad | ProbeKind::Read => "GB/s",
            ProbeKind::MulAdd | ProbeKind::Fma => "GFLOP/s",
        }
    }
}

/// The loaded probe library and its arrays.
pub struct Probes {
    _lib: Arc<Library>,
    copy: CopyFn,
    triad: TriadFn,
    read: ReadFn,
    muladd: FlopFn,
    fma: FlopFn,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    /// Steps per thread of the arithmetic probes.
    iters: i64,
    /// Flops one step of one thread does (lanes × chains × 2).
    flops_per_step: i64,
    pub threads: usize,
    /// Whether the target has FMA (the FMA probe returns -1 otherwise).
    pub has_fma: bool,
}

impl Probes {
    /// Compiles the probes and allocates three arrays of `n` float32 elements.
    pub fn new(
        compiler: &CCompiler,
        n: usize,
        iters: i64,
        threads: usize,
    ) -> Result<Probes, BenchError> {
        let (lib, path) = compiler
            .load(SOURCE)
            .map_err(|e| BenchError::Probe(format!("compiling probe.c: {e}")))?;
        fn sym<T: Copy>(
            lib: &Library,
            path: &std::path::Path,
            name: &str,
        ) -> Result<T, BenchError> {
            // SAFETY: every symbol looked up is a function of probe.c whose C signature is
            // the function-pointer type `T` it is read as (the aliases above).
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| BenchError::Probe(format!("{}: {name}: {e}", path.display())))
        }
        let copy = sym::<CopyFn>(&lib, &path, "uopkit_probe_copy")?;
        let triad = sym::<TriadFn>(&lib, &path, "uopkit_probe_triad")?;
        let read = sym::<ReadFn>(&lib, &path, "uopkit_probe_read")?;
        let muladd = sym::<FlopFn>(&lib, &path, "uopkit_probe_muladd")?;
        let fma = sym::<FlopFn>(&lib, &path, "uopkit_probe_fma")?;
        let per_step = sym::<PerStepFn>(&lib, &path, "uopkit_probe_flops_per_step")?;
        // SAFETY: returns a constant; touches no memory.
        let flops_per_step = unsafe { per_step() };
        let mut p = Probes {
            _lib: lib,
            copy,
            triad,
            read,
            muladd,
            fma,
            a: vec![0.0; n],
            b: (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect(),
            c: (0..n).map(|i| (i % 7) as f32).collect(),
            iters,
            flops_per_step,
            threads: threads.max(1),
            has_fma: true,
        };
        // SAFETY: no memory is touched (one step per thread).
        p.has_fma = unsafe { (p.fma)(1, 1) } != -1.0;
        Ok(p)
    }

    /// Runs `kind` once, with streaming stores if `nt` is 1 (copy and triad): the time.
    fn once(&mut self, kind: ProbeKind, nt: i32) -> Result<Duration, BenchError> {
        let n = self.a.len();
        let t = self.threads as i32;
        let start = Instant::now();
        // SAFETY: the arrays hold n elements each; the probes touch [0, n) of them.
        let r = unsafe {
            match kind {
                ProbeKind::Copy => {
                    (self.copy)(self.a.as_mut_ptr(), self.b.as_ptr(), n as i64, t, nt)
                }
                ProbeKind::Triad => (self.triad)(
                    self.a.as_mut_ptr(),
                    self.b.as_ptr(),
                    self.c.as_ptr(),
                    3.0,
                    n as i64,
                    t,
                    nt,
                ),
                ProbeKind::Read => (self.read)(self.b.as_ptr(), n as i64, t),
                ProbeKind::MulAdd => (self.muladd)(self.iters, t),
                ProbeKind::Fma => (self.fma)(self.iters, t),
            }
        };
        let elapsed = start.elapsed();
        std::hint::black_box(r);
        if r == -2.0 {
            return Err(BenchError::Probe(format!(
                "probe {}: a thread could not be started",
                kind.name()
            )));
        }
        Ok(elapsed)
    }

    /// Runs `kind` once: (elapsed time, the work it did in its unit's numerator: bytes or
    /// flops).
    pub fn run(&mut self, kind: ProbeKind) -> Result<(Duration, f64), BenchError> {
        let elapsed = match kind {
            // The faster of plain and streaming stores (see the module's docs).
            ProbeKind::Copy | ProbeKind::Triad => self.once(kind, 0)?.min(self.once(kind, 1)?),
            _ => self.once(kind, 0)?,
        };
        let n = self.a.len();
        let work = match kind {
            ProbeKind::Copy => 8.0 * n as f64,
            ProbeKind::Triad => 12.0 * n as f64,
            ProbeKind::Read => 4.0 * n as f64,
            ProbeKind::MulAdd | ProbeKind::Fma => {
                self.flops_per_step as f64 * self.iters as f64 * self.threads as f64
            }
        };
        Ok((elapsed, work))
    }
}
