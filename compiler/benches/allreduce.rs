//! ALLREDUCE on CPU devices: naive vs ring.
//!
//! `cargo bench -p uopkit-compiler --bench allreduce [-- NUMEL [NDEV [REPS]]]`
//! (defaults: 16M float32 elements per device, 4 devices, 5 timed runs after one warm-up).
//!
//! The schedule is made by the real scheduler (`schedule_opts` with the mode forced); the
//! runner here is `exec::run`'s step loop without its host-side input and output conversions
//! (which would dominate at this size): storages are allocated and filled once, the C unit is
//! compiled once, then the steps are timed. Reported: wall time (median and best), the time
//! spent in COPY steps and in kernels, the bytes the COPY steps move, copy bandwidth (bytes /
//! copy time) and bus bandwidth (bytes / wall time). The inputs are small integers, so naive
//! and ring give the same exact sums, which are checked after the last run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uopkit_compiler::pipeline::schedule_opts;
use uopkit_compiler::runtime::{self, Buffer, Compiled, Device as RtDevice, Unit};
use uopkit_compiler::schedule::{AllreduceMode, BufferKind, Schedule, ScheduleOpts, Step};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, Op};
use uopkit_interp::verify::verify;

fn main() {
    // `cargo bench` passes `--bench`; the numbers are ours. Without `--bench` (`cargo test
    // --all-targets` runs benches once as a smoke test) use a tiny size: timing is not a test.
    let benching = std::env::args().any(|a| a == "--bench");
    let nums: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse().ok())
        .collect();
    let numel = nums
        .first()
        .copied()
        .unwrap_or(if benching { 16 << 20 } else { 4096 });
    let ndev = nums.get(1).copied().unwrap_or(4);
    let reps = nums
        .get(2)
        .copied()
        .unwrap_or(if benching { 5 } else { 1 })
        .max(1);
    println!(
        "allreduce ADD float32: {ndev} CPU devices x {numel} elements ({:.1} MiB per device), {reps} timed run(s)",
        (numel * 4) as f64 / (1 << 20) as f64
    );

    let devs: Vec<Device> = (0..ndev as u32).map(Device::cpu).collect();
    let mut g = Graph::new();
    let b = g.add(Node {
        op: Op::BUFFER,
        dtype: DType::Float32,
        src: vec![],
        arg: Arg::Buffer {
            slot: 0,
            size: numel,
            device: DeviceSpec::Multi(devs.clone()),
        },
    });
    let r = g.add(Node {
        op: Op::ALLREDUCE,
        dtype: DType::Float32,
        src: vec![b],
        arg: Arg::AllReduce {
            op: Op::ADD,
            devices: devs.clone(),
        },
    });
    let ver = verify(&g).expect("the graph verifies");

    // Device d holds (i % 7) + d at element i: small integers, exact sums in any order.
    let input = |d: usize| -> Vec<u8> {
        (0..numel)
            .flat_map(|i| (((i % 7) + d) as f32).to_le_bytes())
            .collect()
    };
    let expected = |i: usize| -> f32 { (0..ndev).map(|d| ((i % 7) + d) as f32).sum() };

    for mode in [AllreduceMode::Naive, AllreduceMode::Ring] {
        let t = Instant::now();
        let s = schedule_opts(
            &g,
            &ver,
            &[r],
            &ScheduleOpts {
                allreduce: mode,
                ..Default::default()
            },
        )
        .expect("schedule");
        let sched_time = t.elapsed();
        let copied: usize = s
            .steps
            .iter()
            .map(|st| match st {
                Step::Copy { dst, .. } => {
                    s.buffers[dst.0 as usize].size * s.buffers[dst.0 as usize].dtype.itemsize()
                }
                _ => 0,
            })
            .sum();
        let mut runner = Runner::new(&s, &input);
        let _ = runner.run(); // warm-up (first touch of every page)
        let mut times = vec![];
        let (mut copy_t, mut kern_t) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..reps {
            let (total, c, k) = runner.run();
            times.push(total);
            copy_t += c;
            kern_t += k;
        }
        times.sort();
        let (median, best) = (times[times.len() / 2], times[0]);
        let (copy_t, kern_t) = (copy_t / reps as u32, kern_t / reps as u32);
        runner.check(&s, &expected);
        let gb = |bytes: usize, d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
        println!(
            "{mode:>5}: {:>3} copies, {:>3} kernels, {:>8.1} MiB copied | wall median {:>8.2} ms, best {:>8.2} ms | \
             copies {:>8.2} ms ({:>5.2} GB/s), kernels {:>8.2} ms | bus {:>5.2} GB/s | schedule+lower {:.1} ms",
            s.copies(),
            s.kernels(),
            copied as f64 / (1 << 20) as f64,
            ms(median),
            ms(best),
            ms(copy_t),
            gb(copied, copy_t),
            ms(kern_t),
            gb(copied, median),
            ms(sched_time),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A schedule's storages, allocated and filled once, and its compiled kernels.
struct Runner {
    devices: BTreeMap<String, Arc<dyn RtDevice>>,
    storages: BTreeMap<u32, Buffer>,
    compiled: BTreeMap<String, Compiled>,
    steps: Vec<Step>,
    buffers: Vec<(String, u32)>,
}

impl Runner {
    fn new(s: &Schedule, input: &dyn Fn(usize) -> Vec<u8>) -> Runner {
        let mut devices: BTreeMap<String, Arc<dyn RtDevice>> = BTreeMap::new();
        for b in &s.buffers {
            let name = b.device.to_string();
            if !devices.contains_key(&name) {
                devices.insert(name.clone(), runtime::open(&name).expect("open device"));
            }
        }
        let mut bytes: BTreeMap<u32, (String, usize)> = BTreeMap::new();
        for b in &s.buffers {
            let e = bytes.entry(b.storage).or_insert((b.device.to_string(), 0));
            e.1 = e.1.max(b.size * b.dtype.itemsize());
        }
        let storages: BTreeMap<u32, Buffer> = bytes
            .iter()
            .map(|(&id, (dev, n))| (id, devices[dev].alloc(*n).expect("alloc")))
            .collect();
        for b in &s.buffers {
            if let BufferKind::GraphComponent(_, c) = b.kind {
                devices[&b.device.to_string()]
                    .copy_in(&storages[&b.storage], &input(c))
                    .expect("copy in");
            }
        }
        let programs: Vec<_> = s.programs();
        let unit = Unit::c(&programs);
        let mut compiled = BTreeMap::new();
        for st in &s.steps {
            if let Step::Kernel { device, .. } = st {
                let name = device.to_string();
                if !compiled.contains_key(&name) {
                    compiled.insert(
                        name.clone(),
                        devices[&name].compile(&unit).expect("compile"),
                    );
                }
            }
        }
        let buffers = s
            .buffers
            .iter()
            .map(|b| (b.device.to_string(), b.storage))
            .collect();
        Runner {
            devices,
            storages,
            compiled,
            steps: s.steps.clone(),
            buffers,
        }
    }

    /// Runs every step once: (wall time, time in copies, time in kernels).
    fn run(&mut self) -> (Duration, Duration, Duration) {
        let (mut copy_t, mut kern_t) = (Duration::ZERO, Duration::ZERO);
        let start = Instant::now();
        for st in &self.steps {
            let t = Instant::now();
            match st {
                Step::Kernel {
                    device,
                    program,
                    args,
                    ..
                } => {
                    let name = device.to_string();
                    let bufs: Vec<&Buffer> = args
                        .iter()
                        .map(|a| &self.storages[&self.buffers[a.0 as usize].1])
                        .collect();
                    self.devices[&name]
                        .launch(&self.compiled[&name], &program.name, &bufs)
                        .expect("launch");
                    kern_t += t.elapsed();
                }
                Step::Copy { dst, src } => {
                    let (dd, ds) = (&self.buffers[dst.0 as usize], &self.buffers[src.0 as usize]);
                    self.devices[&ds.0]
                        .copy_to(
                            &self.storages[&ds.1],
                            self.devices[&dd.0].as_ref(),
                            &self.storages[&dd.1],
                        )
                        .expect("copy");
                    copy_t += t.elapsed();
                }
            }
        }
        for d in self.devices.values() {
            d.synchronize().expect("synchronize");
        }
        (start.elapsed(), copy_t, kern_t)
    }

    /// Checks every device's result.
    fn check(&self, s: &Schedule, expected: &dyn Fn(usize) -> f32) {
        let out = s.outputs[0].as_ref().expect("an output");
        for (b, _) in out.components.as_ref().expect("a multi-device output") {
            let (dev, storage) = &self.buffers[b.0 as usize];
            let bytes = self.devices[dev]
                .copy_out(&self.storages[storage])
                .expect("copy out");
            for (i, c) in bytes
                .chunks_exact(4)
                .take(s.buffers[b.0 as usize].size)
                .enumerate()
            {
                let got = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                assert_eq!(got, expected(i), "element {i} on {dev}");
            }
        }
    }
}
