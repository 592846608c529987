//! Fast paths of the evaluator. Each is bit-identical to the exact path ([`crate::scalar`]) on
//! every input, and `interp/tests/fast_paths.rs` checks that on random and edge inputs.
//!
//! Why the float32 paths are exact: the operands are float32, so they are exact in f64; for
//! `+ − × ÷ √` the f64 result is the exact result rounded once to 53 bits (IEEE), and rounding
//! that once more to 24 bits gives the exact result rounded once to 24 bits, because
//! 53 ≥ 2·24 + 2 (Figueroa, "When is double rounding innocuous?", 1995). No f64 result can
//! overflow or become subnormal (float32 magnitudes lie in [2^-149, 2^128), so results lie in
//! [2^-298, 2^277] or are 0/inf), so the f64 step is a plain 53-bit rounding, and the f32
//! subnormal range is rounded by the final conversion (Rust's `as f32` rounds to nearest, ties
//! to even, subnormals kept). NaN results become the canonical NaN, as in `scalar::alu`.
//!
//! These use the hardware's f64 arithmetic, so they assume the default floating-point
//! environment (round to nearest, no flush-to-zero / denormals-are-zero), which is what Rust
//! code may assume (`docs/oracle-memory.md`).

use super::reduce_identity;
use super::value::{Column, Words};
use crate::ir::{DType, Op, ReduceOrder};

const F32_NAN: u32 = 0x7fc0_0000;

#[inline(always)]
fn f(x: u32) -> f64 {
    f64::from(f32::from_bits(x))
}

#[inline(always)]
fn round(r: f64) -> u32 {
    let x = r as f32;
    if x.is_nan() {
        F32_NAN
    } else {
        x.to_bits()
    }
}

/// A float32 binary op (operands and result as raw bits).
fn f32_binary(op: Op) -> Option<fn(u32, u32) -> u32> {
    Some(match op {
        Op::ADD => |a, b| round(f(a) + f(b)),
        Op::SUB => |a, b| round(f(a) - f(b)),
        Op::MUL => |a, b| round(f(a) * f(b)),
        Op::FDIV => |a, b| round(f(a) / f(b)),
        Op::MAX => |a, b| if f(a) < f(b) { b } else { a },
        Op::CMPLT => |a, b| u32::from(f(a) < f(b)),
        Op::CMPNE => |a, b| u32::from(f(a) != f(b)),
        Op::CMPEQ => |a, b| u32::from(f(a) == f(b)),
        _ => return None,
    })
}

fn f32_unary(op: Op) -> Option<fn(u32) -> u32> {
    Some(match op {
        Op::NEG => |a| a ^ 0x8000_0000,
        Op::SQRT => |a| round(f(a).sqrt()),
        Op::RECIPROCAL => |a| round(1.0 / f(a)),
        _ => return None,
    })
}

/// A 32-bit integer binary op that cannot be undefined.
fn i32_binary(op: Op, signed: bool) -> Option<fn(u32, u32) -> u32> {
    Some(match (op, signed) {
        (Op::ADD, _) => |a: u32, b: u32| a.wrapping_add(b),
        (Op::SUB, _) => |a: u32, b: u32| a.wrapping_sub(b),
        (Op::MUL, _) => |a: u32, b: u32| a.wrapping_mul(b),
        (Op::AND, _) => |a, b| a & b,
        (Op::OR, _) => |a, b| a | b,
        (Op::XOR, _) => |a, b| a ^ b,
        (Op::CMPNE, _) => |a, b| u32::from(a != b),
        (Op::CMPEQ, _) => |a, b| u32::from(a == b),
        (Op::CMPLT, true) => |a, b| u32::from((a as i32) < (b as i32)),
        (Op::CMPLT, false) => |a, b| u32::from(a < b),
        (Op::MAX, true) => |a, b| if (a as i32) < (b as i32) { b } else { a },
        (Op::MAX, false) => |a, b| if a < b { b } else { a },
        _ => return None,
    })
}

fn binary_fn(op: Op, dt: DType) -> Option<fn(u32, u32) -> u32> {
    match dt {
        DType::Float32 => f32_binary(op),
        DType::Int32 => i32_binary(op, true),
        DType::UInt32 => i32_binary(op, false),
        _ => None,
    }
}

fn words32(c: &Column) -> Option<&[u32]> {
    match c.words() {
        Words::W32(v) if !c.has_poison() => Some(v),
        _ => None,
    }
}

fn binary(
    a: &[u32],
    sa: usize,
    b: &[u32],
    sb: usize,
    len: usize,
    op: fn(u32, u32) -> u32,
) -> Vec<u32> {
    match (sa, sb) {
        (1, 1) => a[..len]
            .iter()
            .zip(&b[..len])
            .map(|(&x, &y)| op(x, y))
            .collect(),
        (1, _) => {
            let y = b[0];
            a[..len].iter().map(|&x| op(x, y)).collect()
        }
        (_, 1) => {
            let x = a[0];
            b[..len].iter().map(|&y| op(x, y)).collect()
        }
        _ => vec![op(a[0], b[0]); len],
    }
}

/// An elementwise op on poison-free operands, when a fast path exists (None: use the exact
/// element-by-element path). `strides[k]` is 1, or 0 for a broadcast operand; `len` the
/// number of elements to compute.
pub(super) fn alu(
    op: Op,
    operand_dt: DType,
    out_dt: DType,
    cols: &[&Column],
    strides: &[usize],
    len: usize,
) -> Option<Column> {
    if len == 0 || out_dt.bits() > 32 {
        return None;
    }
    let w: Vec<&[u32]> = cols.iter().map(|c| words32(c)).collect::<Option<_>>()?;
    let out = match (op, w.len()) {
        (Op::WHERE, 3) => {
            let (c, a, b) = (w[0], w[1], w[2]);
            let (sc, sa, sb) = (strides[0], strides[1], strides[2]);
            (0..len)
                .map(|i| {
                    if c[i * sc] & 1 != 0 {
                        a[i * sa]
                    } else {
                        b[i * sb]
                    }
                })
                .collect()
        }
        (_, 2) => binary(
            w[0],
            strides[0],
            w[1],
            strides[1],
            len,
            binary_fn(op, operand_dt)?,
        ),
        (_, 1) if operand_dt == DType::Float32 => {
            let u = f32_unary(op)?;
            if strides[0] == 1 {
                w[0][..len].iter().map(|&x| u(x)).collect()
            } else {
                vec![u(w[0][0]); len]
            }
        }
        _ => return None,
    };
    Some(Column::from_u32(out))
}

/// A sequential reduction of a dense, poison-free 32-bit column, when a fast path exists.
/// Output `o` folds the elements `r·out_n + o` for r = 0, 1, … in that order, from the
/// identity, exactly as the exact path does (the loops are only interchanged).
pub(super) fn reduce(
    op: Op,
    dt: DType,
    comp: &Column,
    out_n: usize,
    red_n: usize,
    order: &ReduceOrder,
) -> Option<Column> {
    if *order != ReduceOrder::Sequential || comp.is_splat() || out_n == 0 {
        return None;
    }
    let f = match op {
        Op::ADD | Op::MUL | Op::MAX => binary_fn(op, dt)?,
        _ => return None,
    };
    let w = words32(comp)?;
    if w.len() != out_n * red_n {
        return None;
    }
    let mut acc = vec![reduce_identity(op, dt) as u32; out_n];
    if out_n == 1 {
        let mut a = acc[0];
        for &x in w {
            a = f(a, x);
        }
        acc[0] = a;
    } else {
        for row in w.chunks_exact(out_n) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a = f(*a, x);
            }
        }
    }
    Some(Column::from_u32(acc))
}
