//! Multi-device scheduling on CPU devices: ALLREDUCE (naive and ring), MSELECT, MSTACK,
//! broadcast COPY, gather (UNSHARD → COPY), per-device kernels and stores.
//!
//! Every value is compared with the oracle bit for bit. Ring results are exact only on data
//! whose partial results are exact in any order (integers; dyadic floats of few bits), which
//! is what these tests use. Schedules are checked for their COPY counts and (dst, src) pairs
//! and for never copying from a device to itself. The N = 4 naive and ring schedules are
//! insta snapshots under `tests/snapshots/` (`cargo insta review` after a reviewed change).

use std::collections::{BTreeMap, BTreeSet};

use uopkit_compiler::exec;
use uopkit_compiler::pipeline::schedule_opts;
use uopkit_compiler::schedule::allreduce::chunk_sizes;
use uopkit_compiler::schedule::{AllreduceMode, Schedule, ScheduleOpts, Step};
use uopkit_interp::eval::{evaluate, BufferInit, Elem, Value};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::round::from_f64;
use uopkit_interp::verify::{verify, Verified};

use AllreduceMode::{Naive, Ring};

// ---------------------------------------------------------------------------------------
// Helpers: building graphs, data, running and comparing.

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// An integer in [lo, hi].
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

fn cpus(n: usize) -> Vec<Device> {
    (0..n as u32).map(Device::cpu).collect()
}

/// A graph under construction with the initial contents of its buffers.
#[derive(Default)]
struct G {
    g: Graph,
    inputs: BTreeMap<NodeId, BufferInit>,
    slot: u32,
}

impl G {
    fn add(&mut self, op: Op, dtype: DType, src: Vec<NodeId>, arg: Arg) -> NodeId {
        self.g.add(Node {
            op,
            dtype,
            src,
            arg,
        })
    }

    /// A buffer (one component per device of `device`) with initial contents `data`.
    fn buffer(&mut self, dtype: DType, device: DeviceSpec, data: Vec<Vec<u64>>) -> NodeId {
        let size = data[0].len();
        self.slot += 1;
        let id = self.add(
            Op::BUFFER,
            dtype,
            vec![],
            Arg::Buffer {
                slot: self.slot,
                size,
                device,
            },
        );
        self.inputs.insert(
            id,
            data.into_iter()
                .map(|c| c.into_iter().map(Some).collect())
                .collect(),
        );
        id
    }

    fn multi_buffer(&mut self, dtype: DType, devs: &[Device], data: Vec<Vec<u64>>) -> NodeId {
        self.buffer(dtype, DeviceSpec::Multi(devs.to_vec()), data)
    }

    fn allreduce(&mut self, op: Op, x: NodeId, devs: &[Device]) -> NodeId {
        let dt = self.g.node(x).dtype;
        self.add(
            Op::ALLREDUCE,
            dt,
            vec![x],
            Arg::AllReduce {
                op,
                devices: devs.to_vec(),
            },
        )
    }

    fn konst(&mut self, dtype: DType, bits: u64) -> NodeId {
        self.add(Op::CONST, dtype, vec![], Arg::Const(bits))
    }

    fn verified(&self) -> Verified {
        verify(&self.g).unwrap_or_else(|e| panic!("graph does not verify: {e}"))
    }
}

/// Per-device data for `op` on `dt` whose reduction is exact in every order.
fn exact_data(rng: &mut Rng, op: Op, dt: DType, ndev: usize, numel: usize) -> Vec<Vec<u64>> {
    (0..ndev)
        .map(|_| {
            (0..numel)
                .map(|_| match (dt.is_float(), op) {
                    // Quarters of integers: every partial sum is exact.
                    (true, Op::ADD) => from_f64(dt, rng.int(-400, 400) as f64 / 4.0),
                    // Signed powers of two: every partial product is exact.
                    (true, Op::MUL) => {
                        let sign = if rng.next() & 1 == 1 { -1.0 } else { 1.0 };
                        from_f64(dt, sign * 2f64.powi(rng.int(-2, 2) as i32))
                    }
                    // No zeros (max(-0, +0) depends on the order).
                    (true, _) => from_f64(dt, (rng.int(1, 2000) - 1001) as f64 / 8.0 + 1.0 / 16.0),
                    // Integers wrap: any value is exact in any order.
                    (false, _) => rng.next() & mask(dt),
                })
                .collect()
        })
        .collect()
}

fn mask(dt: DType) -> u64 {
    if dt.bits() >= 64 {
        u64::MAX
    } else {
        (1u64 << dt.bits()) - 1
    }
}

fn schedule(g: &G, roots: &[NodeId], mode: AllreduceMode) -> Schedule {
    let ver = g.verified();
    schedule_opts(
        &g.g,
        &ver,
        roots,
        &ScheduleOpts {
            allreduce: mode,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("schedule: {e}"))
}

/// Schedules `roots`, runs them on the CPU devices and compares every output with the
/// oracle, bit for bit. Returns the schedule.
fn run_and_compare(g: &G, roots: &[NodeId], mode: AllreduceMode) -> Schedule {
    let ver = g.verified();
    let sched = schedule(g, roots, mode);
    let oracle = evaluate(&g.g, &ver, &g.inputs, roots).unwrap_or_else(|e| panic!("oracle: {e}"));
    let got = exec::run(&sched, &g.inputs).unwrap_or_else(|e| panic!("exec: {e}\n{sched}"));
    for (&r, v) in roots.iter().zip(got) {
        let want = oracle
            .output(&g.g, r)
            .unwrap_or_else(|e| panic!("oracle output {r}: {e}"));
        let v = v.unwrap_or_else(|| panic!("output {r} has no value"));
        assert_same(r, want, &v, &sched);
    }
    assert_no_self_copies(&sched);
    sched
}

fn bits(v: &Value) -> Vec<Vec<u64>> {
    v.data
        .components()
        .iter()
        .map(|c| {
            c.iter()
                .map(|e| match e {
                    Elem::Bits(b) => *b,
                    Elem::Uninit { .. } => panic!("uninitialized element"),
                })
                .collect()
        })
        .collect()
}

fn assert_same(r: NodeId, want: &Value, got: &Value, sched: &Schedule) {
    assert_eq!(
        (want.dtype, &want.shape),
        (got.dtype, &got.shape),
        "output {r}: dtype/shape"
    );
    let (w, g) = (bits(want), bits(got));
    assert_eq!(w.len(), g.len(), "output {r}: device components");
    for (c, (wc, gc)) in w.iter().zip(&g).enumerate() {
        if let Some(i) = wc.iter().zip(gc).position(|(a, b)| a != b) {
            panic!(
                "output {r} ({}), device {c}, element {i}: oracle {:#x}, compiled {:#x}\n{sched}",
                want.dtype, wc[i], gc[i]
            );
        }
    }
}

fn assert_no_self_copies(s: &Schedule) {
    for (dst, src) in s.copy_pairs() {
        assert_ne!(dst, src, "a COPY from a device to itself\n{s}");
    }
}

fn pair_set(s: &Schedule) -> BTreeSet<(Device, Device)> {
    s.copy_pairs().into_iter().collect()
}

/// The sizes (elements) of the buffers every COPY step writes, in step order.
fn copy_sizes(s: &Schedule) -> Vec<usize> {
    s.steps
        .iter()
        .filter_map(|st| match st {
            Step::Copy { dst, .. } => Some(s.buffers[dst.0 as usize].size),
            _ => None,
        })
        .collect()
}

/// One ALLREDUCE of a multi-device BUFFER of `numel` elements per device.
fn one_allreduce(op: Op, dt: DType, ndev: usize, numel: usize, seed: u64) -> (G, NodeId) {
    let devs = cpus(ndev);
    let mut g = G::default();
    let data = exact_data(&mut Rng(seed), op, dt, ndev, numel);
    let b = g.multi_buffer(dt, &devs, data);
    let r = g.allreduce(op, b, &devs);
    (g, r)
}

const NDEVS: [usize; 4] = [2, 3, 4, 8];

// ---------------------------------------------------------------------------------------
// Copy counts and (dst, src) pairs.

#[test]
fn naive_copies_every_other_buffer_to_every_device() {
    for n in NDEVS {
        for numel in [400, 7] {
            let (g, r) = one_allreduce(Op::ADD, DType::Int32, n, numel, 1);
            let s = schedule(&g, &[r], Naive);
            assert_eq!(s.copies(), n * (n - 1), "N={n} numel={numel}\n{s}");
            let all: BTreeSet<(Device, Device)> = cpus(n)
                .into_iter()
                .flat_map(|d| {
                    cpus(n)
                        .into_iter()
                        .filter(move |&e| e != d)
                        .map(move |e| (d, e))
                })
                .collect();
            assert_eq!(pair_set(&s), all, "N={n}: every ordered pair once");
            assert_eq!(
                s.copy_pairs().len(),
                pair_set(&s).len(),
                "N={n}: no pair twice"
            );
            assert!(
                copy_sizes(&s).iter().all(|&z| z == numel),
                "naive copies whole buffers"
            );
            assert_no_self_copies(&s);
        }
    }
}

#[test]
fn ring_copies_form_a_ring() {
    for n in NDEVS {
        let (g, r) = one_allreduce(Op::ADD, DType::Int32, n, 400, 2);
        let s = schedule(&g, &[r], Ring);
        assert_eq!(s.copies(), 2 * n * (n - 1), "N={n}\n{s}");
        let devs = cpus(n);
        let ring: BTreeSet<(Device, Device)> =
            (0..n).map(|i| (devs[(i + 1) % n], devs[i])).collect();
        assert_eq!(ring.len(), n);
        assert_eq!(
            pair_set(&s),
            ring,
            "N={n}: exactly the N ring pairs (i+1, i)\n{s}"
        );
        assert_no_self_copies(&s);
    }
}

#[test]
fn ring_chunks_follow_tinygrad_sizes() {
    // 400 on 4 devices: 112/96/96/96; each chunk travels 2(N-1) times.
    let (g, r) = one_allreduce(Op::ADD, DType::Float32, 4, 400, 3);
    let s = schedule(&g, &[r], Ring);
    let mut sizes = copy_sizes(&s);
    sizes.sort();
    let mut want: Vec<usize> = [112, 96, 96, 96]
        .iter()
        .flat_map(|&z| std::iter::repeat_n(z, 6))
        .collect();
    want.sort();
    assert_eq!(sizes, want);
    // 7 on 4 devices: no factor of 2 divides 7, so chunks are 2/2/2/1.
    assert_eq!(chunk_sizes(7, 4), vec![2, 2, 2, 1]);
    let (g, r) = one_allreduce(Op::ADD, DType::Float32, 4, 7, 3);
    let mut sizes = copy_sizes(&schedule(&g, &[r], Ring));
    sizes.sort();
    assert_eq!(sizes, [vec![1; 6], vec![2; 18]].concat());
}

#[test]
fn ring_skips_empty_chunks() {
    // 7 elements on 8 devices: chunk 7 is empty and moves nothing; the other 7 chunks each
    // travel 2(N-1) = 14 times, still only between ring neighbours.
    let (g, r) = one_allreduce(Op::ADD, DType::Int32, 8, 7, 4);
    let s = schedule(&g, &[r], Ring);
    assert_eq!(s.copies(), 7 * 14);
    let devs = cpus(8);
    let ring: BTreeSet<(Device, Device)> = (0..8).map(|i| (devs[(i + 1) % 8], devs[i])).collect();
    assert_eq!(pair_set(&s), ring);
}

#[test]
fn auto_mode_follows_tinygrad_defaults() {
    let auto = |n: usize, numel: usize| {
        let devs = cpus(n);
        let mut g = G::default();
        // Schedule only: the contents never matter, so leave them out.
        let b = g.add(
            Op::BUFFER,
            DType::Float32,
            vec![],
            Arg::Buffer {
                slot: 1,
                size: numel,
                device: DeviceSpec::Multi(devs.clone()),
            },
        );
        let r = g.allreduce(Op::ADD, b, &devs);
        schedule(&g, &[r], AllreduceMode::Auto).copies()
    };
    assert_eq!(auto(4, 256_000), 12, "at the threshold: naive");
    assert_eq!(auto(4, 256_001), 24, "over the threshold: ring");
    assert_eq!(auto(2, 300_000), 2, "two devices: always naive");
    assert_eq!(
        auto(3, 300_000),
        12,
        "three devices over the threshold: ring"
    );
}

// ---------------------------------------------------------------------------------------
// Values: every op, dtype and size in one graph per (N, mode), so each compiles one C unit.

fn all_ops_graph(n: usize) -> (G, Vec<NodeId>) {
    let devs = cpus(n);
    let mut g = G::default();
    let mut rng = Rng(0x5EED + n as u64);
    let mut roots = vec![];
    for op in [Op::ADD, Op::MUL, Op::MAX] {
        for dt in [DType::Int32, DType::Float32, DType::UInt8] {
            for numel in [400, 7] {
                let data = exact_data(&mut rng, op, dt, n, numel);
                let b = g.multi_buffer(dt, &devs, data);
                roots.push(g.allreduce(op, b, &devs));
            }
        }
    }
    // Half precision sums of small integers are exact too.
    let data = (0..n)
        .map(|_| {
            (0..64)
                .map(|_| from_f64(DType::Float16, rng.int(-100, 100) as f64))
                .collect()
        })
        .collect();
    let b = g.multi_buffer(DType::Float16, &devs, data);
    roots.push(g.allreduce(Op::ADD, b, &devs));
    (g, roots)
}

fn values_match_oracle(n: usize, mode: AllreduceMode) {
    let (g, roots) = all_ops_graph(n);
    let s = run_and_compare(&g, &roots, mode);
    let per = match mode {
        Ring => {
            // Every non-empty chunk travels 2(N-1) times.
            let chunks = |numel: usize| chunk_sizes(numel, n).iter().filter(|&&z| z > 0).count();
            let per_size = chunks(400) + chunks(7);
            (9 * per_size + chunks(64)) * 2 * (n - 1)
        }
        _ => roots.len() * n * (n - 1),
    };
    assert_eq!(s.copies(), per, "N={n} {mode}");
}

#[test]
fn naive_values_match_oracle_2dev() {
    values_match_oracle(2, Naive);
}

#[test]
fn naive_values_match_oracle_3dev() {
    values_match_oracle(3, Naive);
}

#[test]
fn naive_values_match_oracle_4dev() {
    values_match_oracle(4, Naive);
}

#[test]
fn naive_values_match_oracle_8dev() {
    values_match_oracle(8, Naive);
}

#[test]
fn ring_values_match_oracle_2dev() {
    values_match_oracle(2, Ring);
}

#[test]
fn ring_values_match_oracle_3dev() {
    values_match_oracle(3, Ring);
}

#[test]
fn ring_values_match_oracle_4dev() {
    values_match_oracle(4, Ring);
}

#[test]
fn ring_values_match_oracle_8dev() {
    values_match_oracle(8, Ring);
}

#[test]
fn naive_is_bit_exact_on_inexact_floats() {
    // Random float32 values whose sums round: only the oracle's left fold in device order
    // reproduces them, and naive is that fold.
    let devs = cpus(4);
    let mut g = G::default();
    let mut rng = Rng(77);
    let data = (0..4)
        .map(|_| {
            (0..97)
                .map(|_| from_f64(DType::Float32, (rng.next() >> 11) as f64 / 3.0e12 - 1500.0))
                .collect()
        })
        .collect();
    let b = g.multi_buffer(DType::Float32, &devs, data);
    let r = g.allreduce(Op::ADD, b, &devs);
    run_and_compare(&g, &[r], Naive);
}

#[test]
fn ring_folds_each_chunk_in_rotated_order() {
    // Inexact float32 data: chunk i of the ring is ((x_i + x_{i+1}) + …) + x_{i-1}, rounded
    // at each step (tinygrad's order), which is not the oracle's left fold; computed here
    // with Rust's f32 arithmetic (IEEE, round to nearest even, as the C kernels).
    let (n, numel) = (4, 400);
    let devs = cpus(n);
    let mut g = G::default();
    let mut rng = Rng(1234);
    let xs: Vec<Vec<f32>> = (0..n)
        .map(|_| {
            (0..numel)
                .map(|_| ((rng.next() >> 11) as f64 / 7.0e12 - 600.0) as f32)
                .collect()
        })
        .collect();
    let b = g.multi_buffer(
        DType::Float32,
        &devs,
        xs.iter()
            .map(|c| c.iter().map(|x| x.to_bits() as u64).collect())
            .collect(),
    );
    let r = g.allreduce(Op::ADD, b, &devs);
    let sched = schedule(&g, &[r], Ring);
    let got = exec::run(&sched, &g.inputs).expect("exec");
    let got = bits(got[0].as_ref().expect("a value"));
    let sizes = chunk_sizes(numel, n);
    let mut want = vec![0u64; numel];
    let mut naive_differs = false;
    let mut off = 0;
    for (i, &len) in sizes.iter().enumerate() {
        for e in off..off + len {
            let mut acc = xs[i][e];
            for k in 1..n {
                acc += xs[(i + k) % n][e];
            }
            want[e] = acc.to_bits() as u64;
            naive_differs |= acc != ((xs[0][e] + xs[1][e]) + xs[2][e]) + xs[3][e];
        }
        off += len;
    }
    assert!(naive_differs, "the data should tell the orders apart");
    for c in got {
        assert_eq!(c, want);
    }
}

// ---------------------------------------------------------------------------------------
// Other multi-device ops.

#[test]
fn sharded_reduce_then_allreduce() {
    // arange(24).reshape(4, 6) sharded on axis 0 over 4 devices, summed over axis 0: a local
    // REDUCE of each [1, 6] row, then ALLREDUCE; plus MSELECT of one component.
    for mode in [Naive, Ring] {
        let devs = cpus(4);
        let mut g = G::default();
        let data = (0..4)
            .map(|d| (0..6).map(|i| (d * 6 + i) as u64).collect())
            .collect();
        let b = g.multi_buffer(DType::Int32, &devs, data);
        let rs = g.add(Op::RESHAPE, DType::Int32, vec![b], Arg::Shape(vec![1, 6]));
        let red = g.add(
            Op::REDUCE,
            DType::Int32,
            vec![rs],
            Arg::Reduce {
                op: Op::ADD,
                axes: 1,
                order: Default::default(),
            },
        );
        let ar = g.allreduce(Op::ADD, red, &devs);
        let one = g.add(Op::MSELECT, DType::Int32, vec![ar], Arg::Index(2));
        let s = run_and_compare(&g, &[ar, one], mode);
        assert!(s.copies() > 0);
    }
}

#[test]
fn elementwise_on_multi_runs_per_device() {
    // (x + 1) * x on a 3-device value, one kernel per device, and the components read back.
    let devs = cpus(3);
    let mut g = G::default();
    let data = (0..3)
        .map(|d| (0..5).map(|i| (d * 10 + i) as u64).collect())
        .collect();
    let b = g.multi_buffer(DType::Int32, &devs, data);
    let one = g.konst(DType::Int32, 1);
    let a = g.add(Op::ADD, DType::Int32, vec![b, one], Arg::None);
    let m = g.add(Op::MUL, DType::Int32, vec![a, b], Arg::None);
    let s = run_and_compare(&g, &[m], Naive);
    assert_eq!(s.copies(), 0);
    assert_eq!(s.kernels(), 3);
    let devices: BTreeSet<Device> = s
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Kernel { device, .. } => Some(*device),
            _ => None,
        })
        .collect();
    assert_eq!(devices, devs.into_iter().collect());
}

#[test]
fn broadcast_copies_to_every_other_device() {
    // A buffer on CPU:1 broadcast to (CPU:0, CPU:1, CPU:2): 2 copies, none to CPU:1 itself.
    let devs = cpus(3);
    let mut g = G::default();
    let b = g.buffer(
        DType::Int16,
        DeviceSpec::Single(Device::cpu(1)),
        vec![vec![1, 2, 3, 4]],
    );
    let bc = g.add(
        Op::COPY,
        DType::Int16,
        vec![b],
        Arg::Device(DeviceSpec::Multi(devs.clone())),
    );
    let two = g.konst(DType::Int16, 2);
    let m = g.add(Op::MUL, DType::Int16, vec![bc, two], Arg::None);
    let s = run_and_compare(&g, &[bc, m], Naive);
    assert_eq!(s.copies(), 2);
    let want: BTreeSet<(Device, Device)> = [(devs[0], devs[1]), (devs[2], devs[1])]
        .into_iter()
        .collect();
    assert_eq!(pair_set(&s), want);
}

#[test]
fn gather_concatenates_shards_on_one_device() {
    // Three [2, 3] shards stacked and unsharded on axis 1, gathered to CPU:2 (its own shard
    // is not copied) and to CPU:5 (outside the tuple).
    let devs = cpus(3);
    let mut g = G::default();
    let shards: Vec<NodeId> = (0..3)
        .map(|d| {
            let b = g.buffer(
                DType::Float32,
                DeviceSpec::Single(devs[d]),
                vec![(0..6)
                    .map(|i| from_f64(DType::Float32, (d * 100 + i) as f64))
                    .collect()],
            );
            g.add(Op::RESHAPE, DType::Float32, vec![b], Arg::Shape(vec![2, 3]))
        })
        .collect();
    let ms = g.add(Op::MSTACK, DType::Float32, shards, Arg::None);
    let u = g.add(Op::UNSHARD, DType::Float32, vec![ms], Arg::Axis(1));
    let to2 = g.add(
        Op::COPY,
        DType::Float32,
        vec![u],
        Arg::Device(DeviceSpec::Single(devs[2])),
    );
    let to5 = g.add(
        Op::COPY,
        DType::Float32,
        vec![u],
        Arg::Device(DeviceSpec::Single(Device::cpu(5))),
    );
    let s = run_and_compare(&g, &[to2, to5], Naive);
    assert_eq!(s.copies(), 2 + 3, "{s}");
}

#[test]
fn unshard_output_and_mselect() {
    // An UNSHARD value as an output (gathered on the tuple's first device) and MSELECTs.
    let devs = cpus(2);
    let mut g = G::default();
    let b = g.multi_buffer(DType::UInt8, &devs, vec![vec![1, 2, 3], vec![4, 5, 6]]);
    let u = g.add(Op::UNSHARD, DType::UInt8, vec![b], Arg::Axis(0));
    let m0 = g.add(Op::MSELECT, DType::UInt8, vec![b], Arg::Index(0));
    let m1 = g.add(Op::MSELECT, DType::UInt8, vec![b], Arg::Index(1));
    run_and_compare(&g, &[u, m0, m1, b], Naive);
}

#[test]
fn store_into_a_sharded_buffer_is_per_device() {
    // x.assign(allreduce(x) + x) on 3 devices, then a second assign into a SHRINK view;
    // the AFTERs read the new contents, a reader taken before sees the old.
    for mode in [Naive, Ring] {
        let devs = cpus(3);
        let mut g = G::default();
        let data = (0..3)
            .map(|d| (0..8).map(|i| (d * 8 + i) as u64).collect())
            .collect();
        let b = g.multi_buffer(DType::Int32, &devs, data);
        let ar = g.allreduce(Op::ADD, b, &devs);
        let v = g.add(Op::ADD, DType::Int32, vec![ar, b], Arg::None);
        let st = g.add(Op::STORE, DType::Void, vec![b, v], Arg::None);
        let after = g.add(Op::AFTER, DType::Int32, vec![b, st], Arg::None);
        let win = g.add(
            Op::SHRINK,
            DType::Int32,
            vec![after],
            Arg::Window {
                offsets: vec![2],
                sizes: vec![3],
            },
        );
        let k = g.konst(DType::Int32, 7);
        let e = g.add(Op::EXPAND, DType::Int32, vec![k], Arg::Shape(vec![3]));
        let st2 = g.add(Op::STORE, DType::Void, vec![win, e], Arg::None);
        let after2 = g.add(Op::AFTER, DType::Int32, vec![b, st2], Arg::None);
        let old = g.add(Op::MSELECT, DType::Int32, vec![b], Arg::Index(1));
        let s = run_and_compare(&g, &[after, after2, old], mode);
        assert_eq!(s.written_graph_buffers(), vec![b]);
    }
}

// ---------------------------------------------------------------------------------------
// Snapshots of the N = 4 schedules.

/// An insta snapshot under `tests/snapshots/` (`cargo insta review`, or
/// `INSTA_UPDATE=always` to accept a reviewed change).
fn check_snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// The schedule's text, then the programs of the kernels on CPU:0 (the fold order).
fn snapshot_text(s: &Schedule) -> String {
    let mut text = s.to_string();
    text += "programs on CPU:0:\n";
    for st in &s.steps {
        if let Step::Kernel {
            device, program, ..
        } = st
        {
            if *device == Device::cpu(0) {
                text += &program.to_string();
            }
        }
    }
    text
}

#[test]
fn snapshot_naive_4dev() {
    let (g, r) = one_allreduce(Op::ADD, DType::Float32, 4, 400, 9);
    check_snapshot(
        "allreduce_naive_4dev",
        &snapshot_text(&schedule(&g, &[r], Naive)),
    );
}

#[test]
fn snapshot_ring_4dev() {
    let (g, r) = one_allreduce(Op::ADD, DType::Float32, 4, 400, 9);
    check_snapshot(
        "allreduce_ring_4dev",
        &snapshot_text(&schedule(&g, &[r], Ring)),
    );
}

#[test]
fn values_without_a_device_are_realized_where_they_are_read() {
    // CONTIGUOUS(EXPAND(5)) has no device: added to a 2-device value it is realized on each
    // device (not on CPU:0 for everyone), and likewise for a kernel on CPU:1 alone.
    let devs = cpus(2);
    let mut g = G::default();
    let b = g.multi_buffer(DType::Int32, &devs, vec![vec![1, 2, 3], vec![4, 5, 6]]);
    let k = g.konst(DType::Int32, 5);
    let e = g.add(Op::EXPAND, DType::Int32, vec![k], Arg::Shape(vec![3]));
    let c = g.add(Op::CONTIGUOUS, DType::Int32, vec![e], Arg::None);
    let a = g.add(Op::ADD, DType::Int32, vec![b, c], Arg::None);
    let single = g.buffer(
        DType::Int32,
        DeviceSpec::Single(Device::cpu(1)),
        vec![vec![10, 20, 30]],
    );
    let m = g.add(Op::MUL, DType::Int32, vec![single, c], Arg::None);
    let s = run_and_compare(&g, &[a, m, c], Naive);
    assert_eq!(s.copies(), 0, "{s}");
}

#[test]
fn exec_refuses_a_schedule_over_the_memory_limit_before_allocating() {
    let (g, r) = one_allreduce(Op::ADD, DType::Int32, 2, 1000, 4);
    let s = schedule(&g, &[r], Naive);
    // Storages of this schedule: at least the two 4000-byte inputs.
    let e = exec::run_with_limit(&s, &g.inputs, 4000).expect_err("over the limit");
    assert!(
        matches!(e, exec::ExecError::Memory { needed, limit: 4000, .. } if needed > 8000),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("over the memory limit of 4000 bytes"),
        "{e}"
    );
    assert!(e.to_string().contains("UOPKIT_MEMORY_LIMIT"), "{e}");
    // With room, the same schedule runs.
    exec::run_with_limit(&s, &g.inputs, 1 << 30).expect("fits");
}
