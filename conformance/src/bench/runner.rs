//! A workload compiled by the normal path (`pipeline::schedule_opts` → `render` → the CPU
//! device's `compile`) and run in steady state: storages are allocated and filled once, the
//! unit is compiled once, then each run launches the schedule's steps, as `exec::run` does,
//! without its per-call input and output conversions. Outputs are read back through the
//! schedule's own views (`Schedule::output_values`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uopkit_compiler::exec;
use uopkit_compiler::pipeline;
use uopkit_compiler::render;
use uopkit_compiler::runtime::{Buffer, CCompiler, Compiled, CpuDevice, Device};
use uopkit_compiler::schedule::{BufferKind, Schedule, ScheduleOpts, Step};
use uopkit_interp::eval::{Elem, Value};
use uopkit_interp::verify;

use super::workloads::Workload;
use super::BenchError;

/// A compiled workload, ready to run.
pub struct Runner {
    dev: Arc<CpuDevice>,
    schedule: Schedule,
    storages: BTreeMap<u32, Buffer>,
    compiled: Compiled,
    /// Schedule (plan, lower, optimize, linearize) and render time.
    pub schedule_time: Duration,
    /// The C compiler's time (a cold compile: the compiler's cache directory is fresh).
    pub cc_time: Duration,
    pub kernels: usize,
    /// The rendered C unit.
    pub source: String,
}

impl Runner {
    /// Schedules, renders and compiles `w` with `compiler` on a CPU device of its own, and
    /// loads the inputs.
    pub fn new(w: &Workload, compiler: Arc<CCompiler>) -> Result<Runner, BenchError> {
        let fail = |stage: &str, e: &dyn std::fmt::Display| {
            BenchError::Compile(format!("workload {}: {stage}: {e}", w.name))
        };
        let g = w.ctx.graph();
        // Compiled, not evaluated: the oracle's caps on what it would keep do not apply (the
        // schedule bounds the buffers it allocates).
        let ver =
            verify::verify_with(&g, &verify::Limits::COMPILE).map_err(|e| fail("verify", &e))?;
        let t0 = Instant::now();
        let schedule = pipeline::schedule_opts(&g, &ver, &[w.root.id()], &ScheduleOpts::default())
            .map_err(|e| fail("schedule", &format!("node {}: {}", e.node, e.reason)))?;
        for st in &schedule.steps {
            if let Step::Kernel { device, .. } = st {
                if !device.to_string().starts_with("CPU") {
                    return Err(fail(
                        "schedule",
                        &format!("a kernel on {device}, not the CPU"),
                    ));
                }
            }
        }
        let unit = render::renderer(render::Lang::C)
            .render(&schedule.programs())
            .map_err(|e| fail("render", &e))?;
        let schedule_time = t0.elapsed();
        let dev = Arc::new(CpuDevice::new(0, compiler));
        let t1 = Instant::now();
        let compiled = dev.compile(&unit).map_err(|e| fail("compile", &e))?;
        let cc_time = t1.elapsed();

        let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
        for b in &schedule.buffers {
            let e = sizes.entry(b.storage).or_insert(0);
            *e = (*e).max(b.size * b.dtype.itemsize());
        }
        let mut storages = BTreeMap::new();
        for (&id, &bytes) in &sizes {
            let buf = dev.alloc(bytes).map_err(|e| fail("alloc", &e))?;
            dev.copy_in(&buf, &vec![exec::POISON; bytes])
                .map_err(|e| fail("alloc", &e))?;
            storages.insert(id, buf);
        }
        let inputs = w.ctx.inputs();
        for b in &schedule.buffers {
            if let BufferKind::Graph(node) = b.kind {
                if let Some(init) = inputs.get(&node) {
                    let bytes = exec::to_bytes(b.dtype, &init[0]);
                    dev.copy_in(&storages[&b.storage], &bytes)
                        .map_err(|e| fail("inputs", &e))?;
                }
            }
        }
        Ok(Runner {
            source: unit.source.clone(),
            kernels: schedule.kernels(),
            dev,
            schedule,
            storages,
            compiled,
            schedule_time,
            cc_time,
        })
    }

    /// Runs every step once; the wall time.
    pub fn run(&self) -> Result<Duration, BenchError> {
        self.run_on(None)
    }

    /// The most threads one of the kernels runs on, given at most `threads`.
    pub fn threads_used(&self, threads: usize) -> Result<usize, BenchError> {
        let mut most = 1;
        for st in &self.schedule.steps {
            if let Step::Kernel { program, .. } = st {
                let n = self
                    .dev
                    .threads_for(&self.compiled, &program.name, threads)
                    .map_err(|e| BenchError::Run(e.to_string()))?;
                most = most.max(n);
            }
        }
        Ok(most)
    }

    /// [`Runner::run`] with at most `threads` threads per kernel (None: the runtime's
    /// default, `UOPKIT_CPU_THREADS` or every core).
    pub fn run_on(&self, threads: Option<usize>) -> Result<Duration, BenchError> {
        let start = Instant::now();
        for st in &self.schedule.steps {
            match st {
                Step::Kernel { program, args, .. } => {
                    let bufs: Vec<&Buffer> = args
                        .iter()
                        .map(|a| &self.storages[&self.schedule.buffers[a.0 as usize].storage])
                        .collect();
                    match threads {
                        None => self.dev.launch(&self.compiled, &program.name, &bufs),
                        Some(n) => self
                            .dev
                            .launch_threads(&self.compiled, &program.name, &bufs, n),
                    }
                    .map_err(|e| BenchError::Run(e.to_string()))?;
                }
                Step::Copy { dst, src } => {
                    let (d, s) = (
                        &self.schedule.buffers[dst.0 as usize],
                        &self.schedule.buffers[src.0 as usize],
                    );
                    self.dev
                        .copy_to(
                            &self.storages[&s.storage],
                            self.dev.as_ref(),
                            &self.storages[&d.storage],
                        )
                        .map_err(|e| BenchError::Run(e.to_string()))?;
                }
            }
        }
        Ok(start.elapsed())
    }

    /// The root's value as the last run left it.
    pub fn output(&self) -> Result<Value, BenchError> {
        let outs = self.schedule.output_values(|b| {
            let b = &self.schedule.buffers[b.0 as usize];
            let bytes = self
                .dev
                .copy_out(&self.storages[&b.storage])
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(
                exec::from_bytes(b.dtype, &bytes[..b.size * b.dtype.itemsize()])
                    .into_iter()
                    .map(Elem::Bits)
                    .collect(),
            )
        });
        outs.map_err(BenchError::Run)?
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| BenchError::Run("the schedule has no output".into()))
    }
}
