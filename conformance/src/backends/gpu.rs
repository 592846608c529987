//! The GPU backends: the compiler's GPU-target kernels on CUDA and HIP.
//!
//! * `cuda`, `hip` ([`GpuRun`], [`Placement::Gpu`]): every device of the case moves to the
//!   GPU runtime (`CPU:n` → `CUDA:n`), so multi-device schedules, both allreduce lowerings
//!   and the seeds' copy counts run between real devices; a case that needs more devices
//!   than the machine has is skipped with the count.
//! * `cuda-cpu`, `hip-cpu` ([`Placement::Mixed`]): only `CPU:0` moves (to `CUDA:0`); the
//!   other devices stay CPU devices. This is the seeds' `(Device.DEFAULT, "CPU")` pair: a
//!   cross-device assign from a CPU buffer into a GPU buffer is one COPY between two
//!   runtimes (staged through the host) and the target keeps its identity.
//! * `nvrtc`, `hiprtc` ([`GpuCompile`], compile-only): every case's GPU-target kernels
//!   rendered as one CUDA (HIP) unit and compiled by the real NVRTC (hiprtc) — for `sm_90`
//!   (`gfx90a`) unless `UOPKIT_CUDA_ARCH` (`UOPKIT_HIP_ARCH`) says otherwise — on any machine
//!   that has the library, GPU or not. A rejected unit fails the trial with the compiler's log.
//!
//! All of them load GPU libraries, so the harness runs them in worker processes. Where the
//! library or device is absent the backend says so once ([`Backend::unavailable`]) and every
//! trial is skipped with that reason — or fails, for a backend named in
//! `UOPKIT_REQUIRE_BACKENDS` (CI requires `nvrtc` and `hiprtc`).
//!
//! Schedule facts name devices as the case does: `CUDA:n` in a copy pair is reported as
//! the case's `CPU:n`, so a case's `copy_pairs` expectation holds on every placement.

use uopkit_compiler::exec;
use uopkit_compiler::render::{self, Lang};
use uopkit_compiler::runtime::{cuda, hip};
use uopkit_compiler::schedule::Target;
use uopkit_interp::eval::Value;
use uopkit_interp::ir::{Arg, Backend as DevKind, Device, DeviceSpec, Graph, Node};
use uopkit_interp::kernel::interp::RunOpts;
use uopkit_interp::verify;

use crate::stages::{interpret_schedule, Record};

use std::collections::BTreeMap;

use super::{facts_of, Backend, BackendError, Job, Ran, Role};

/// A GPU runtime.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    Cuda,
    Hip,
}

impl Runtime {
    /// `cuda`, `hip`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Cuda => "cuda",
            Runtime::Hip => "hip",
        }
    }

    fn kind(self) -> DevKind {
        match self {
            Runtime::Cuda => DevKind::Cuda,
            Runtime::Hip => DevKind::Hip,
        }
    }

    fn lang(self) -> Lang {
        match self {
            Runtime::Cuda => Lang::Cuda,
            Runtime::Hip => Lang::Hip,
        }
    }

    /// How many devices there are, or why none can be used.
    fn device_count(self) -> Result<usize, String> {
        let n = match self {
            Runtime::Cuda => cuda::device_count(),
            Runtime::Hip => hip::device_count(),
        }
        .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("no {} device on this machine", self.kind_name()));
        }
        Ok(n)
    }

    /// Whether the runtime's compiler (NVRTC, hiprtc) can be used, or why not.
    fn compiler_available(self) -> Result<(), String> {
        match self {
            Runtime::Cuda => cuda::nvrtc_available(),
            Runtime::Hip => hip::hiprtc_available(),
        }
    }

    fn kind_name(self) -> &'static str {
        match self {
            Runtime::Cuda => "CUDA",
            Runtime::Hip => "HIP",
        }
    }
}

/// Which of the case's devices move to the GPU.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every `CPU:n` becomes GPU `n`.
    Gpu,
    /// Only `CPU:0` becomes GPU 0; the others stay CPU devices.
    Mixed,
}

/// Runs cases on a GPU runtime's devices.
pub struct GpuRun {
    rt: Runtime,
    placement: Placement,
    name: String,
    /// Run the placed schedule in the exact kernel interpreter instead of on devices
    /// ([`GpuRun::simulated`]).
    simulate: bool,
}

impl GpuRun {
    pub fn new(rt: Runtime, placement: Placement) -> Self {
        let name = match placement {
            Placement::Gpu => rt.name().to_string(),
            Placement::Mixed => format!("{}-cpu", rt.name()),
        };
        GpuRun {
            rt,
            placement,
            name,
            simulate: false,
        }
    }

    /// The same placement and schedule, run by the exact kernel interpreter (no device, in
    /// this process): what the tests use to check placements, schedules that span a GPU and
    /// a CPU device, and the facts' device names on machines without a GPU (`exec`'s own
    /// cross-runtime path is tested against stand-in drivers in compiler/tests).
    pub fn simulated(rt: Runtime, placement: Placement) -> Self {
        GpuRun {
            simulate: true,
            name: format!("{}-sim", GpuRun::new(rt, placement).name),
            ..GpuRun::new(rt, placement)
        }
    }

    fn place(&self, d: Device) -> Device {
        match (d.backend, self.placement) {
            (DevKind::Cpu, Placement::Gpu) => Device {
                backend: self.rt.kind(),
                index: d.index,
            },
            (DevKind::Cpu, Placement::Mixed) if d.index == 0 => Device {
                backend: self.rt.kind(),
                index: 0,
            },
            _ => d,
        }
    }
}

impl Backend for GpuRun {
    fn name(&self) -> &str {
        &self.name
    }

    fn allowances(&self) -> Option<String> {
        Some(self.rt.name().into())
    }

    fn unavailable(&self) -> Option<String> {
        if self.simulate {
            return None;
        }
        // A device is not enough: its kernels are compiled here, by NVRTC or hiprtc.
        self.rt
            .device_count()
            .err()
            .or_else(|| self.rt.compiler_available().err())
    }

    fn skip_reason(&self, job: &Job) -> Option<String> {
        if self.simulate {
            return None;
        }
        let have = self.rt.device_count().ok()?;
        let need = case_devices(job)
            .into_iter()
            .map(|d| self.place(d))
            .filter(|d| d.backend == self.rt.kind())
            .map(|d| d.index as usize + 1)
            .max()
            .unwrap_or(0);
        (need > have).then(|| {
            format!(
                "the case needs {need} {} devices; this machine has {have}",
                self.rt.kind_name()
            )
        })
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let (graph, verified) = placed(job, |d| self.place(d))?;
        let sched = uopkit_compiler::pipeline::schedule_with_opts(
            &graph,
            &verified,
            &job.roots(),
            &uopkit_compiler::pipeline::default_passes(),
            &job.opts,
        )
        .map_err(|e| {
            BackendError::Refused(format!("node {}: {}", job.file_id_of(e.node), e.reason))
        })?;
        let outputs: Vec<Option<Value>> = if self.simulate {
            let opts = RunOpts::from_env().map_err(BackendError::Failed)?;
            interpret_schedule(&sched, job.inputs, &opts, Record::Outputs)
                .map_err(|e| {
                    BackendError::Failed(format!(
                        "kernel interpreter: {e}\nschedule:\n{}",
                        job.schedule_text(&sched)
                    ))
                })?
                .outputs
        } else {
            exec::run(&sched, job.inputs).map_err(|e| {
                BackendError::Failed(format!(
                    "{}\nschedule:\n{}",
                    job.exec_error(e),
                    job.schedule_text(&sched)
                ))
            })?
        };
        let mut facts = facts_of(&sched, job.file_id);
        // Report devices by the case's names.
        let back: BTreeMap<String, String> = case_devices(job)
            .into_iter()
            .map(|d| (self.place(d).to_string(), d.to_string()))
            .collect();
        if let Some(pairs) = &mut facts.copy_pairs {
            for (a, b) in pairs.iter_mut() {
                for x in [a, b] {
                    if let Some(orig) = back.get(x.as_str()) {
                        *x = orig.clone();
                    }
                }
            }
        }
        Ok(Ran {
            outputs,
            facts: Some(facts),
            schedule: Some(sched),
            variants: vec![],
        })
    }
}

/// Compiles every case's GPU kernels with the runtime's compiler (no device needed).
pub struct GpuCompile {
    rt: Runtime,
}

impl GpuCompile {
    pub fn new(rt: Runtime) -> Self {
        GpuCompile { rt }
    }

    /// `nvrtc`, `hiprtc`.
    pub fn compiler_name(rt: Runtime) -> &'static str {
        match rt {
            Runtime::Cuda => "nvrtc",
            Runtime::Hip => "hiprtc",
        }
    }
}

impl Backend for GpuCompile {
    fn name(&self) -> &str {
        Self::compiler_name(self.rt)
    }

    fn role(&self) -> Role {
        Role::CompileOnly
    }

    fn unavailable(&self) -> Option<String> {
        self.rt.compiler_available().err()
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let mut opts = job.opts.clone();
        opts.target = Target::Gpu;
        let sched = super::schedule_with(job, &opts)?;
        let unit = render::renderer(self.rt.lang())
            .render(&sched.programs())
            .map_err(|e| BackendError::Failed(e.to_string()))?;
        let compiled = match self.rt {
            Runtime::Cuda => cuda::nvrtc_compile(&unit, &cuda::cuda_arch()).map(|_| ()),
            Runtime::Hip => hip::hiprtc_compile(&unit).map(|_| ()),
        };
        compiled.map_err(|e| BackendError::Failed(e.to_string()))?;
        Ok(Ran {
            outputs: vec![],
            facts: None,
            schedule: Some(sched),
            variants: vec![],
        })
    }
}

/// Every device the case's graph names (buffers, copy targets, allreduce members), sorted.
fn case_devices(job: &Job) -> Vec<Device> {
    let mut out: Vec<Device> = vec![];
    for id in job.graph.ids() {
        for_each_device(&job.graph.node(id).arg, |d| out.push(d));
    }
    out.sort();
    out.dedup();
    out
}

fn for_each_device(arg: &Arg, mut f: impl FnMut(Device)) {
    match arg {
        Arg::Buffer { device, .. } | Arg::Device(device) => {
            device.devices().iter().for_each(|d| f(*d))
        }
        Arg::AllReduce { devices, .. } => devices.iter().for_each(|d| f(*d)),
        _ => {}
    }
}

fn map_spec(spec: &DeviceSpec, f: &impl Fn(Device) -> Device) -> DeviceSpec {
    match spec {
        DeviceSpec::Single(d) => DeviceSpec::Single(f(*d)),
        DeviceSpec::Multi(ds) => DeviceSpec::Multi(ds.iter().map(|d| f(*d)).collect()),
    }
}

/// The job's graph with every device moved by `f` (one-to-one, so node ids are unchanged
/// and the job's inputs, outputs and file ids still apply), verified again.
fn placed(
    job: &Job,
    f: impl Fn(Device) -> Device,
) -> Result<(Graph, verify::Verified), BackendError> {
    let mut g = Graph::new();
    for id in job.graph.ids() {
        let n = job.graph.node(id);
        let arg = match &n.arg {
            Arg::Buffer { slot, size, device } => Arg::Buffer {
                slot: *slot,
                size: *size,
                device: map_spec(device, &f),
            },
            Arg::Device(d) => Arg::Device(map_spec(d, &f)),
            Arg::AllReduce { op, devices } => Arg::AllReduce {
                op: *op,
                devices: devices.iter().map(|d| f(*d)).collect(),
            },
            other => other.clone(),
        };
        let new = g.add(Node {
            op: n.op,
            dtype: n.dtype,
            src: n.src.clone(),
            arg,
        });
        if new != id {
            return Err(BackendError::Failed(format!(
                "moving the case's devices merged node {} into {}",
                job.file_id_of(id),
                job.file_id_of(new)
            )));
        }
    }
    let v = verify::verify(&g).map_err(|e| {
        BackendError::Refused(format!("the graph on the GPU devices does not verify: {e}"))
    })?;
    Ok((g, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allowances::Allowances;
    use crate::harness::{judge, Verdict};
    use uopkit_compiler::schedule::Step;

    fn corpus_cases() -> Vec<(String, crate::case::Case)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
        crate::corpus::case_files(&root)
            .unwrap()
            .iter()
            .map(|f| {
                (
                    crate::corpus::case_name(&root, f),
                    crate::load::read_case(f).unwrap(),
                )
            })
            // Kernel-level cases hold no tensor graph to place on a GPU.
            .filter(|(_, c)| c.kernel.is_none())
            .collect()
    }

    /// Every corpus case, placed on CUDA devices (all of them, or only CPU:0), scheduled and
    /// run in the kernel interpreter, agrees with the oracle and with its own schedule
    /// expectations (copy counts and pairs named by the case's devices).
    #[test]
    fn every_case_on_both_placements_agrees_with_the_oracle() {
        let allow = Allowances::strict("sim");
        let cases = corpus_cases();
        let defined = cases
            .iter()
            .filter(|(_, c)| c.expect_error.is_none())
            .count();
        for placement in [Placement::Gpu, Placement::Mixed] {
            let b = GpuRun::simulated(Runtime::Cuda, placement);
            let mut passed = 0;
            for (name, case) in &cases {
                match judge(case, name, &b, &allow) {
                    Verdict::Pass => passed += 1,
                    Verdict::Skip(why) if case.expect_error.is_some() => {
                        assert!(why.contains("oracle-only"))
                    }
                    other => panic!("{} {name}: {other:?}", b.name()),
                }
            }
            assert_eq!(passed, defined, "{}", b.name());
        }
    }

    fn run_case(name: &str, placement: Placement) -> Ran {
        let (_, case) = corpus_cases().into_iter().find(|(n, _)| n == name).unwrap();
        let o = crate::run::run_oracle(&case).unwrap();
        let outputs: Vec<(String, uopkit_interp::ir::NodeId)> = case
            .outputs
            .iter()
            .map(|x| (x.name.clone(), o.loaded.arena(x.node).unwrap()))
            .collect();
        let job = Job {
            case: name,
            graph: &o.loaded.graph,
            verified: &o.verified,
            inputs: &o.loaded.inputs,
            outputs: &outputs,
            file_id: &o.loaded.file_id,
            opts: Default::default(),
            allreduce: None,
        };
        GpuRun::simulated(Runtime::Cuda, placement)
            .run(&job)
            .unwrap()
    }

    fn pairs(p: &[(impl ToString, impl ToString)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// The seeds' (DEFAULT, CPU) pair: an assign from a CPU:1 buffer into a CPU:0 buffer that
    /// moved to CUDA:0 is one COPY (destination CUDA:0, source CPU:1: a cross-runtime copy),
    /// reported with the case's device names.
    #[test]
    fn mixed_placement_crosses_runtimes_with_one_copy() {
        let ran = run_case(
            "seeds/cross_device_assign_is_copy_CPU1_to_CPU0",
            Placement::Mixed,
        );
        let sched = ran.schedule.unwrap();
        assert_eq!(pairs(&sched.copy_pairs()), pairs(&[("CUDA:0", "CPU:1")]));
        assert_eq!(
            ran.facts.unwrap().copy_pairs.unwrap(),
            pairs(&[("CPU:0", "CPU:1")])
        );
    }

    /// Kernels on the GPU device are GPU kernels (launch indices), kernels left on a CPU
    /// device are loops, in one schedule.
    #[test]
    fn each_kernel_gets_its_devices_target() {
        let ran = run_case(
            "seeds/cross_device_assign_unrealized_CPU1_to_CPU0",
            Placement::Mixed,
        );
        let sched = ran.schedule.unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for st in &sched.steps {
            if let Step::Kernel {
                device, program, ..
            } = st
            {
                let gpu = program
                    .insts
                    .iter()
                    .any(|i| i.op == uopkit_interp::ir::Op::SPECIAL);
                assert_eq!(gpu, device.backend == DevKind::Cuda, "{device}: {program}");
                seen.insert(device.to_string());
            }
        }
        assert!(seen.contains("CPU:1"), "{sched}");
        assert!(!pairs(&sched.copy_pairs()).is_empty(), "{sched}");
    }

    /// What `exec` compiles for a mixed schedule: one unit per runtime, the C unit with the
    /// CPU device's loops only (no launch index, no `#error`), the CUDA unit with the GPU
    /// kernels only — on every multi-device case of the corpus.
    #[test]
    fn mixed_schedules_render_one_unit_per_runtime() {
        let mut both = 0;
        for (name, case) in corpus_cases() {
            if case.expect_error.is_some()
                || !name.starts_with("multi/")
                    && !name.starts_with("allreduce/")
                    && !name.starts_with("seeds/")
            {
                continue;
            }
            let ran = run_case(&name, Placement::Mixed);
            let sched = ran.schedule.unwrap();
            let units = exec::programs_by_runtime(&sched).unwrap();
            for (rt, progs) in &units {
                let gpu = progs.iter().all(|p| {
                    p.insts
                        .iter()
                        .any(|i| i.op == uopkit_interp::ir::Op::SPECIAL)
                });
                let cpu = progs.iter().all(|p| {
                    !p.insts
                        .iter()
                        .any(|i| i.op == uopkit_interp::ir::Op::SPECIAL)
                });
                match *rt {
                    "CPU" => {
                        assert!(cpu, "{name}");
                        let src = render::renderer(Lang::C).render(progs).unwrap().source;
                        assert!(!src.contains("#error"), "{name}:\n{src}");
                    }
                    "CUDA" => assert!(gpu, "{name}"),
                    other => panic!("{name}: runtime {other}"),
                }
            }
            both += usize::from(units.len() == 2);
        }
        assert!(both > 5, "only {both} cases had kernels on both runtimes");
    }
}
