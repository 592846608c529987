//! Compile cost grows linearly with the graph (issue 13): long chains of views are
//! scheduled without keeping a chain per view. Not a timed test (speed lives in
//! `uopkit bench` and docs/oracle-memory.md's figures): a chain of `N` RESHAPEs of one buffer
//! must schedule at all (the quadratic scheduler held N²/2 movement steps: about 10 GB for
//! N = 20 000, and much longer than any test runs) and give the same kernel as one RESHAPE
//! to the chain's last shape.

use uopkit_compiler::pipeline::schedule_opts;
use uopkit_compiler::schedule::{ScheduleOpts, Step};
use uopkit_interp::ir::{Arg, DType, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::kernel::Program;
use uopkit_interp::verify::verify;

const SHAPES: [&[usize]; 5] = [&[4, 4], &[2, 8], &[16], &[8, 2], &[2, 2, 4]];

/// `x + 1` where x is `n` RESHAPEs of a 16-element float32 buffer (shapes cycling through
/// [`SHAPES`]); the kernel's program.
fn reshape_chain_kernel(n: usize) -> Program {
    let mut g = Graph::new();
    let mut x = g.add(Node {
        op: Op::BUFFER,
        dtype: DType::Float32,
        src: vec![],
        arg: Arg::Buffer {
            slot: 0,
            size: 16,
            device: DeviceSpec::Single(uopkit_interp::ir::Device::CPU),
        },
    });
    for i in 0..n {
        x = g.add(Node {
            op: Op::RESHAPE,
            dtype: DType::Float32,
            src: vec![x],
            arg: Arg::Shape(SHAPES[i % SHAPES.len()].to_vec()),
        });
    }
    let one = g.add(Node {
        op: Op::CONST,
        dtype: DType::Float32,
        src: vec![],
        arg: Arg::Const(0x3f80_0000),
    });
    let one = g.add(Node {
        op: Op::EXPAND,
        dtype: DType::Float32,
        src: vec![one],
        arg: Arg::Shape(SHAPES[(n - 1) % SHAPES.len()].to_vec()),
    });
    let y: NodeId = g.add(Node {
        op: Op::ADD,
        dtype: DType::Float32,
        src: vec![x, one],
        arg: Arg::None,
    });
    let ver = verify(&g).unwrap_or_else(|e| panic!("graph does not verify: {e}"));
    let s = schedule_opts(&g, &ver, &[y], &ScheduleOpts::default())
        .unwrap_or_else(|e| panic!("{n} reshapes: {e}"));
    let kernels: Vec<&Program> = s
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Kernel { program, .. } => Some(program),
            Step::Copy { .. } => None,
        })
        .collect();
    assert_eq!(kernels.len(), 1, "{n} reshapes: one kernel");
    kernels[0].clone()
}

#[test]
fn a_long_reshape_chain_schedules_as_one_reshape_does() {
    // 20 001 ≡ 1 (mod 5): the chain ends with SHAPES[0], as the one-reshape graph does.
    let long = reshape_chain_kernel(20_001);
    let short = reshape_chain_kernel(1);
    assert_eq!(long.insts, short.insts);
}

/// A rotation by 0.1 rad applied `steps` times to (in[i], 0.25), in float32, `out[i]` its first
/// coordinate: one long basic block of 6·steps float ops (4 MULs, a SUB and an ADD a step),
/// whose values stay near the unit circle and keep depending on the input.
fn rotation_chain(steps: usize) -> uopkit_interp::kernel::Program {
    use uopkit_interp::kernel::{KArg, ParamDecl};
    let decl = |written| ParamDecl {
        dtype: DType::Float32,
        size: 64,
        written,
    };
    let mut p = Program::new("chain", vec![decl(true), decl(false)]);
    let f32c = |p: &mut Program, x: f32| {
        p.push(
            Op::CONST,
            DType::Float32,
            vec![],
            KArg::Const(x.to_bits() as u64),
        )
    };
    let o = p.push(Op::PARAM, DType::Float32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, DType::Float32, vec![], KArg::Param(1));
    let (c, s) = (f32c(&mut p, COS), f32c(&mut p, SIN));
    let mut v = f32c(&mut p, 0.25);
    let n = p.push(Op::CONST, DType::Int64, vec![], KArg::Const(64));
    let r = p.push(Op::RANGE, DType::Int64, vec![n], KArg::Axis(0));
    let at = p.push(Op::INDEX, DType::Float32, vec![a, r], KArg::None);
    let mut u = p.push(Op::LOAD, DType::Float32, vec![at], KArg::None);
    let mul = |p: &mut Program, x, y| p.push(Op::MUL, DType::Float32, vec![x, y], KArg::None);
    for _ in 0..steps {
        let (uc, vs, us, vc) = (
            mul(&mut p, u, c),
            mul(&mut p, v, s),
            mul(&mut p, u, s),
            mul(&mut p, v, c),
        );
        u = p.push(Op::SUB, DType::Float32, vec![uc, vs], KArg::None);
        v = p.push(Op::ADD, DType::Float32, vec![us, vc], KArg::None);
    }
    let ot = p.push(Op::INDEX, DType::Float32, vec![o, r], KArg::None);
    p.push(Op::STORE, DType::Void, vec![ot, u], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

const COS: f32 = 0.995_004_2;
const SIN: f32 = 0.099_833_42;

/// A kernel of 12k float ops (a long fused chain) compiles with gcc's priority register
/// allocator (the default one's time grows faster than linearly in one basic block: a 200k-op
/// chain took over 300 s) and keeps every bit: each MUL, SUB and ADD rounded on its own, as
/// Rust's f32 arithmetic does (an FMA contraction of u·c − v·s, which the pragma must not
/// bring back, changes most of these 64 results).
#[test]
fn a_long_fused_chain_compiles_with_the_priority_allocator_and_stays_exact() {
    use uopkit_compiler::render::c::LARGE_KERNEL_INSTS;
    use uopkit_compiler::render::{c_unit, render_c};
    use uopkit_compiler::runtime;
    let steps = 2_000;
    let p = rotation_chain(steps);
    assert!(p.insts.len() >= LARGE_KERNEL_INSTS);
    assert!(render_c(std::slice::from_ref(&p))
        .contains("#pragma GCC optimize (\"ira-algorithm=priority\", \"fp-contract=off\")"));
    assert!(!render_c(&[rotation_chain(10)]).contains("#pragma GCC optimize"));
    let xs: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 32.0).collect();
    let want: Vec<u32> = xs
        .iter()
        .map(|&x0| {
            let (mut u, mut v) = (x0, 0.25f32);
            for _ in 0..steps {
                (u, v) = (u * COS - v * SIN, u * SIN + v * COS);
            }
            u.to_bits()
        })
        .collect();
    let dev = runtime::open("CPU:0").expect("CPU:0");
    let prog = dev.compile(&c_unit(&[p])).expect("the chain compiles");
    let (o, a) = (dev.alloc(256).unwrap(), dev.alloc(256).unwrap());
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    dev.copy_in(&a, &bytes).unwrap();
    dev.launch(&prog, "chain", &[&o, &a]).expect("runs");
    let got: Vec<u32> = dev
        .copy_out(&o)
        .unwrap()
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, want);
}
