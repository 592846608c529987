//! Streaming stores (render/stream.rs): a parallel elementwise loop that writes more than
//! `STREAM_MIN_BYTES` stores a line of its output at a time past the caches. The values
//! must be the plain loop's, bit for bit: with the loop on one thread, in 3 chunks on threads
//! (chunk starts that are not on a line), and for an aliasing launch (the unit without
//! `restrict`, where the loop must store each element before the next iteration's loads).

use std::sync::Arc;

use uopkit_compiler::render::par::PARALLEL_AXIS;
use uopkit_compiler::render::stream::STREAM_MIN_BYTES;
use uopkit_compiler::render::{c_unit, render_c};
use uopkit_compiler::runtime::threads::with_forced_chunks;
use uopkit_compiler::runtime::{self, Device};
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::{InstId, KArg, ParamDecl, Program};

const F32: DType = DType::Float32;

/// Elements of the large kernels: just over the streaming threshold, and not a multiple of
/// a line (16 float32) nor of 3.
const N: usize = (STREAM_MIN_BYTES as usize) / 4 + 5;

fn cpu() -> Arc<dyn Device> {
    runtime::open("CPU:0").expect("CPU:0")
}

fn i64c(p: &mut Program, x: i64) -> InstId {
    p.push(Op::CONST, DType::Int64, vec![], KArg::Const(x as u64))
}

fn params(n: usize) -> Vec<ParamDecl> {
    [true, false]
        .map(|written| ParamDecl {
            dtype: F32,
            size: n,
            written,
        })
        .to_vec()
}

/// `out[i] = in[i] * 2 + 1` over `n` elements, in a loop marked parallel.
fn axpb(n: usize) -> Program {
    let mut p = Program::new("axpb", params(n));
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, F32, vec![], KArg::Param(1));
    let two = p.push(Op::CONST, F32, vec![], KArg::Const(2f32.to_bits() as u64));
    let one = p.push(Op::CONST, F32, vec![], KArg::Const(1f32.to_bits() as u64));
    let e = i64c(&mut p, n as i64);
    let r = p.push(Op::RANGE, DType::Int64, vec![e], KArg::Axis(PARALLEL_AXIS));
    let at = p.push(Op::INDEX, F32, vec![a, r], KArg::None);
    let x = p.push(Op::LOAD, F32, vec![at], KArg::None);
    let m = p.push(Op::MUL, F32, vec![x, two], KArg::None);
    let y = p.push(Op::ADD, F32, vec![m, one], KArg::None);
    let ot = p.push(Op::INDEX, F32, vec![o, r], KArg::None);
    p.push(Op::STORE, DType::Void, vec![ot, y], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

/// `out[i] = in[max(i - 1, 0)]` over `n` elements, in a loop marked parallel.
fn shift(n: usize) -> Program {
    let mut p = Program::new("shift", params(n));
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, F32, vec![], KArg::Param(1));
    let e = i64c(&mut p, n as i64);
    let (z, one) = (i64c(&mut p, 0), i64c(&mut p, 1));
    let r = p.push(Op::RANGE, DType::Int64, vec![e], KArg::Axis(PARALLEL_AXIS));
    let back = p.push(Op::SUB, DType::Int64, vec![r, one], KArg::None);
    let j = p.push(Op::MAX, DType::Int64, vec![back, z], KArg::None);
    let at = p.push(Op::INDEX, F32, vec![a, j], KArg::None);
    let x = p.push(Op::LOAD, F32, vec![at], KArg::None);
    let ot = p.push(Op::INDEX, F32, vec![o, r], KArg::None);
    p.push(Op::STORE, DType::Void, vec![ot, x], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

fn to_bytes(xs: &[u32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn to_bits(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Input bits: a SplitMix-style scramble of the index (every exponent, NaN payloads, infinities,
/// subnormals, zeros of both signs).
fn input(n: usize) -> Vec<u32> {
    (0..n as u64)
        .map(|i| {
            let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (z ^ (z >> 27)) as u32
        })
        .collect()
}

/// x * 2 + 1 in IEEE single precision (each op rounded once; Rust does not contract), a NaN
/// result as the canonical quiet NaN.
fn axpb_ref(x: u32) -> u32 {
    let y = f32::from_bits(x) * 2.0 + 1.0;
    if y.is_nan() {
        0x7fc0_0000
    } else {
        y.to_bits()
    }
}

#[test]
fn only_large_elementwise_loops_stream() {
    assert!(render_c(&[axpb(N)]).contains("uk_stream_put(v0 + uk_b"));
    assert!(render_c(&[shift(N)]).contains("uk_stream_put(v0 + uk_b"));
    let small = render_c(&[axpb(1024)]);
    assert!(!small.contains("uk_stream_put(v0"), "{small}");
}

#[test]
fn streamed_stores_keep_every_bit_on_one_thread_and_in_chunks() {
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[axpb(N)])).expect("compiles");
    let x = input(N);
    let want: Vec<u32> = x.iter().map(|&b| axpb_ref(b)).collect();
    let (o, a) = (dev.alloc(N * 4).unwrap(), dev.alloc(N * 4).unwrap());
    dev.copy_in(&a, &to_bytes(&x)).unwrap();
    for chunks in [None, Some(3), Some(7)] {
        dev.copy_in(&o, &vec![0u8; N * 4]).unwrap();
        let launch = || dev.launch(&prog, "axpb", &[&o, &a]);
        match chunks {
            None => launch(),
            Some(k) => with_forced_chunks(k, launch),
        }
        .expect("runs");
        let got = to_bits(&dev.copy_out(&o).unwrap());
        let bad = (0..N).find(|&i| got[i] != want[i]);
        assert_eq!(bad, None, "chunks {chunks:?}: first differing element");
    }
}

#[test]
fn an_aliasing_launch_stores_each_element_before_the_next_reads() {
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[shift(N)])).expect("compiles");
    let x = input(N);
    // Distinct buffers: a shift by one.
    let (o, a) = (dev.alloc(N * 4).unwrap(), dev.alloc(N * 4).unwrap());
    dev.copy_in(&a, &to_bytes(&x)).unwrap();
    dev.launch(&prog, "shift", &[&o, &a]).expect("runs");
    let got = to_bits(&dev.copy_out(&o).unwrap());
    assert_eq!(got[0], x[0]);
    assert!((1..N).all(|i| got[i] == x[i - 1]), "a shift by one");
    // One buffer in both slots: in iteration order, element i reads element i - 1 after
    // iteration i - 1 wrote it, so every element becomes x[0]. (Computing a line of values
    // before storing it would read the old x[i - 1] inside each line.)
    dev.launch(&prog, "shift", &[&a, &a]).expect("runs");
    let got = to_bits(&dev.copy_out(&a).unwrap());
    let bad = (0..N).find(|&i| got[i] != x[0]);
    assert_eq!(bad, None, "first element that is not x[0]");
}

/// `x[i] = x[i] * 2 + 1` in place over `n` float64 elements (the store's own INDEX loaded: a
/// line of 8), in a loop marked parallel.
fn axpb_in_place_f64(n: usize) -> Program {
    let f64t = DType::Float64;
    let mut p = Program::new(
        "inplace",
        vec![ParamDecl {
            dtype: f64t,
            size: n,
            written: true,
        }],
    );
    let x = p.push(Op::PARAM, f64t, vec![], KArg::Param(0));
    let two = p.push(Op::CONST, f64t, vec![], KArg::Const(2f64.to_bits()));
    let one = p.push(Op::CONST, f64t, vec![], KArg::Const(1f64.to_bits()));
    let e = i64c(&mut p, n as i64);
    let r = p.push(Op::RANGE, DType::Int64, vec![e], KArg::Axis(PARALLEL_AXIS));
    let at = p.push(Op::INDEX, f64t, vec![x, r], KArg::None);
    let v = p.push(Op::LOAD, f64t, vec![at], KArg::None);
    let m = p.push(Op::MUL, f64t, vec![v, two], KArg::None);
    let y = p.push(Op::ADD, f64t, vec![m, one], KArg::None);
    p.push(Op::STORE, DType::Void, vec![at, y], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

#[test]
fn an_in_place_float64_loop_streams_lines_of_8_and_keeps_every_bit() {
    let n = (STREAM_MIN_BYTES as usize) / 8 + 3;
    let p = axpb_in_place_f64(n);
    assert!(render_c(std::slice::from_ref(&p)).contains("uk_line_end(uk_b, v4_hi, 8)"));
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[p])).expect("compiles");
    let x: Vec<u64> = input(n)
        .iter()
        .zip(input(n).iter().rev())
        .map(|(&h, &l)| (u64::from(h) << 32) | u64::from(l))
        .collect();
    let want: Vec<u64> = x
        .iter()
        .map(|&b| {
            let y = f64::from_bits(b) * 2.0 + 1.0;
            if y.is_nan() {
                0x7ff8_0000_0000_0000
            } else {
                y.to_bits()
            }
        })
        .collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let buf = dev.alloc(n * 8).unwrap();
    for chunks in [None, Some(3)] {
        dev.copy_in(&buf, &bytes).unwrap();
        let launch = || dev.launch(&prog, "inplace", &[&buf]);
        match chunks {
            None => launch(),
            Some(k) => with_forced_chunks(k, launch),
        }
        .expect("runs");
        let got: Vec<u64> = dev
            .copy_out(&buf)
            .unwrap()
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let bad = (0..n).find(|&i| got[i] != want[i]);
        assert_eq!(bad, None, "chunks {chunks:?}: first differing element");
    }
}
