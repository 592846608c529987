//! `cpu`: the compiler's CPU path — schedule, lower, render C, compile with the system C
//! compiler, run on `CPU:n` devices. It loads compiled code, so the harness runs it in a
//! worker process (`crate::worker`) unless asked for in-process mode (debugging), where the
//! runtime still saves and restores the FP control state around every load and launch.
//!
//! A schedule with a parallel loop (`cpu_threads`) also runs a second time the way a large
//! input runs: every parallel loop split into [`CHUNKS`] chunks on their own threads
//! (`runtime::threads::with_forced_chunks`, the `par_k_*` entries), and every loop that may
//! stream its stores streaming them (`render::stream::with_stream_min_bytes(0)`: blocks of
//! one cache line through a local array, partial lines at the chunks' ends; normally only
//! loops writing 16 MiB do). The corpus's cases are small, so their first run is one thread
//! through the whole-loop entry with plain stores. The second run is reported as a variant
//! ([`Ran::variants`]): the harness compares it with the oracle after the first run's
//! outputs, so a wrong disjointness or register-privacy proof, or a streamed loop that stores
//! other bits or elements than the plain one, shows on small cases, and a run that already
//! differs from the oracle is judged by that.
//!
//! At the kernel level ([`Backend::run_schedule`], a `run_schedule` request) it takes
//! uopkit's kernel programs as they are: rendered as one C unit, compiled, and run step by
//! step on `CPU:0` (the kernel fuzzer's C variant, `crate::kfuzz`).

use std::collections::BTreeMap;

use uopkit_compiler::exec;
use uopkit_compiler::render::c_unit;
use uopkit_compiler::render::par::parallel_loop;
use uopkit_compiler::render::stream::with_stream_min_bytes;
use uopkit_compiler::runtime::threads::with_forced_chunks;
use uopkit_compiler::runtime::{Buffer, CpuDevice};
use uopkit_compiler::schedule::{self, Schedule};
use uopkit_interp::eval::Elem;

use super::{schedule_facts, Backend, BackendError, Job, Ran, Variant};
use crate::case::KernelBody;
use crate::kernel_case::{self, Step};
use crate::protocol::{bits_of, BufferBits, InstArg, ScheduleRequest, StepJson};

pub struct Cpu;

/// The chunks the variant run splits every parallel loop into (uneven for most extents).
pub const CHUNKS: usize = 3;

/// Whether a kernel of `sched` has a parallel loop.
fn has_parallel_loop(sched: &Schedule) -> bool {
    sched.steps.iter().any(|st| match st {
        schedule::Step::Kernel { program, .. } => parallel_loop(program).is_some(),
        schedule::Step::Copy { .. } => false,
    })
}

impl Backend for Cpu {
    fn name(&self) -> &str {
        "cpu"
    }

    fn allowances(&self) -> Option<String> {
        Some("cpu".into())
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let sched = super::schedule_job(job)?;
        let outputs = exec::run(&sched, job.inputs).map_err(|e| {
            BackendError::Failed(format!(
                "{}\nschedule:\n{}",
                job.exec_error(e),
                job.schedule_text(&sched)
            ))
        })?;
        let mut variants = vec![];
        if has_parallel_loop(&sched) {
            let large = with_forced_chunks(CHUNKS, || {
                with_stream_min_bytes(0, || exec::run(&sched, job.inputs))
            });
            variants.push(Variant {
                label: format!(
                    "as a large input runs: parallel loops in {CHUNKS} chunks on threads, \
                     stores streamed at every size"
                ),
                outputs: large.map_err(|e| job.exec_error(e).to_string()),
            });
        }
        Ok(Ran {
            outputs,
            facts: Some(schedule_facts(&sched, job)),
            schedule: Some(sched),
            variants,
        })
    }

    fn kernel_cases(&self) -> bool {
        true
    }

    fn run_schedule(&self, req: &ScheduleRequest) -> Result<Vec<BufferBits>, BackendError> {
        run_kernels(req)
    }
}

fn is_cpu(device: &str) -> bool {
    device.split(':').next() == Some("CPU")
}

/// Runs a kernel-level request on `CPU:0`: the request is checked as a kernel-level case body
/// (`kernel_case::load`), all its programs are compiled as one C unit (with no programs, an
/// empty unit: a check that C compiles here), and the steps run in order.
fn run_kernels(req: &ScheduleRequest) -> Result<Vec<BufferBits>, BackendError> {
    let failed = |e: String| BackendError::Failed(format!("cpu: request {}: {e}", req.id));
    let devices = req.buffers.iter().map(|b| b.device.as_str());
    let step_devices = req.steps.iter().filter_map(|s| match s {
        StepJson::Kernel { device, .. } => Some(device.as_str()),
        StepJson::Copy { .. } => None,
    });
    if let Some(d) = devices.chain(step_devices).find(|d| !is_cpu(d)) {
        return Err(BackendError::Unsupported(format!(
            "device {d} is not a CPU device"
        )));
    }
    // GPU-only constructs (launch indices, barriers, local memory) have no C rendering.
    for p in &req.programs {
        let gpu = p.insts.iter().find(|i| {
            matches!(i.op.as_str(), "SPECIAL" | "BARRIER")
                || matches!(i.arg, Some(InstArg::Local(_)))
        });
        if let Some(i) = gpu {
            return Err(BackendError::Unsupported(format!(
                "program {} uses {} (a GPU kernel): not run on a CPU",
                p.name, i.op
            )));
        }
    }
    let body = KernelBody {
        buffers: req.buffers.clone(),
        programs: req.programs.clone(),
        steps: req.steps.clone(),
        expect: vec![],
    };
    let kc = kernel_case::load(&body).map_err(|e| failed(e.to_string()))?;
    let dev = CpuDevice::get(0);
    // A request's programs carry no disjoint-write proof: none runs on several threads. Their
    // names need not be distinct (tinygrad names two kernels of one shape alike), and one C
    // unit needs one symbol each: program i is `p<i>_<name>` (unique, as i is).
    let programs: Vec<_> = kc
        .programs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut q = uopkit_compiler::render::par::without_parallel_mark(p);
            q.name = format!("p{i}_{}", p.name);
            q
        })
        .collect();
    let compiled = dev
        .compile(&c_unit(&programs))
        .map_err(|e| failed(e.to_string()))?;
    let mut mem: BTreeMap<u32, Buffer> = BTreeMap::new();
    for (id, b) in &kc.buffers {
        let elems: Vec<Option<u64>> = b
            .init
            .iter()
            .map(|e| match e {
                Elem::Bits(v) => Some(*v),
                Elem::Uninit { .. } => None,
            })
            .collect();
        let bytes = exec::to_bytes(b.dtype, &elems);
        let buf = dev.alloc(bytes.len()).map_err(|e| failed(e.to_string()))?;
        dev.copy_in(&buf, &bytes)
            .map_err(|e| failed(e.to_string()))?;
        mem.insert(*id, buf);
    }
    // Ids were checked by the loader; a missing one is still an error, never a panic.
    let get = |id: &u32| mem.get(id).ok_or_else(|| failed(format!("no buffer {id}")));
    for (s, step) in kc.steps.iter().enumerate() {
        match step {
            Step::Copy { dst, src } => {
                let data = dev.copy_out(get(src)?).map_err(|e| failed(e.to_string()))?;
                dev.copy_in(get(dst)?, &data)
                    .map_err(|e| failed(e.to_string()))?;
            }
            Step::Kernel { program, args } => {
                let name = programs
                    .get(*program)
                    .map(|p| p.name.as_str())
                    .ok_or_else(|| failed(format!("step {s}: no program {program}")))?;
                let bufs = args.iter().map(get).collect::<Result<Vec<_>, _>>()?;
                dev.launch(&compiled, name, &bufs)
                    .map_err(|e| failed(format!("step {s} ({name}): {e}")))?;
            }
        }
    }
    dev.synchronize().map_err(|e| failed(e.to_string()))?;
    req.read
        .iter()
        .map(|id| {
            let dtype = kc
                .buffers
                .get(id)
                .map(|b| b.dtype)
                .ok_or_else(|| failed(format!("buffer {id} is read but not declared")))?;
            let bytes = dev.copy_out(get(id)?).map_err(|e| failed(e.to_string()))?;
            let bits: Vec<Option<u64>> = exec::from_bytes(dtype, &bytes)
                .into_iter()
                .map(Some)
                .collect();
            Ok(BufferBits {
                id: *id,
                data: bits_of(&bits),
            })
        })
        .collect()
}
