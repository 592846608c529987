//! The ALU ops on one element: exact result, rounded once to the dtype; integers wrap.

use super::cast::{mask, to_i128, wrap_i128};
use super::round::{canonical_nan, from_f64, from_f64_pair, is_nan, sign_mask, to_f64};
use super::Ub;
use crate::ir::{DType, Op};

/// Apply the ALU op `op` to `srcs` (bits of `dt`; for WHERE `srcs[0]` is a bool and `dt` is
/// the branches' dtype). Comparisons return bool 0/1, everything else bits of `dt`.
///
/// Missing operands read as 0 and non-ALU ops return `srcs[0]`: the verifier rejects both
/// before anything runs, and this function must not panic on them.
pub fn alu(op: Op, dt: DType, srcs: &[u64]) -> Result<u64, Ub> {
    let m = mask(dt);
    let s = |i: usize| srcs.get(i).copied().unwrap_or(0) & m;
    if op == Op::WHERE {
        let cond = srcs.first().copied().unwrap_or(0) & 1 != 0;
        return Ok(if cond { s(1) } else { s(2) });
    }
    let (a, b, c) = (s(0), s(1), s(2));
    if dt.is_float() {
        Ok(float_alu(op, dt, a, b, c))
    } else if dt.is_bool() {
        bool_alu(op, a, b, c)
    } else {
        int_alu(op, dt, a, b, c)
    }
}

fn float_alu(op: Op, dt: DType, a: u64, b: u64, c: u64) -> u64 {
    let (x, y) = (to_f64(dt, a), to_f64(dt, b));
    let r = match op {
        // Sign-bit flip, NaN included (IEEE negate is a bit operation, not arithmetic).
        Op::NEG => return a ^ sign_mask(dt),
        // tinygrad's and C's lowering `a < b ? b : a`: returns an operand's bits untouched.
        Op::MAX => return if x < y { b } else { a },
        Op::CMPLT => return (x < y) as u64,
        Op::CMPNE => return (x != y) as u64,
        Op::CMPEQ => return (x == y) as u64,
        // The exact sum of two f64 is hi + lo (TwoSum inside from_f64_pair): one rounding.
        Op::ADD => from_f64_pair(dt, x, y),
        Op::SUB => from_f64_pair(dt, x, -y),
        Op::MUL => mul(dt, x, y),
        Op::MULACC => mulacc(dt, x, y, to_f64(dt, c)),
        Op::FDIV => div(dt, x, y),
        Op::RECIPROCAL => div(dt, 1.0, x),
        Op::SQRT => sqrt(dt, x),
        Op::TRUNC => from_f64(dt, x.trunc()),
        Op::EXP2 => libm_result(dt, x.exp2(), x.is_finite()),
        Op::LOG2 => from_f64(dt, x.log2()),
        Op::SIN => from_f64(dt, x.sin()),
        Op::POW => libm_result(dt, x.powf(y), x.is_finite() && x != 0.0 && y.is_finite()),
        // Int-only ops on floats (the verifier rejects them first) and non-ALU ops.
        _ => return a,
    };
    // Arithmetic NaN results are the canonical quiet NaN with the sign clear.
    if is_nan(dt, r) {
        canonical_nan(dt)
    } else {
        r
    }
}

fn mul(dt: DType, x: f64, y: f64) -> u64 {
    // For every dtype below float64 the significands have at most 24 bits, so the f64
    // product is exact (and within f64's range); IEEE rounds float64's product correctly.
    from_f64(dt, x * y)
}

fn mulacc(dt: DType, x: f64, y: f64, z: f64) -> u64 {
    if dt == DType::Float64 {
        return from_f64(dt, x.mul_add(y, z)); // fused: one rounding
    }
    // x·y is exact (see mul); the exact x·y + z is then rounded once.
    from_f64_pair(dt, x * y, z)
}

fn div(dt: DType, x: f64, y: f64) -> u64 {
    let q = x / y;
    if dt == DType::Float64 || !q.is_finite() || q == 0.0 || !x.is_finite() || !y.is_finite() {
        return from_f64(dt, q);
    }
    // x - q·y is exact in f64 (FMA remainder), so x/y = q + r/y and the sign of r/y tells
    // on which side of q the exact quotient lies: the result is rounded once from it.
    let r = (-q).mul_add(y, x);
    from_f64_pair(dt, q, r / y)
}

fn sqrt(dt: DType, x: f64) -> u64 {
    let q = x.sqrt(); // sqrt(-0) = -0, sqrt(x < 0) = NaN
    if dt == DType::Float64 || x.is_nan() || x <= 0.0 || x.is_infinite() {
        return from_f64(dt, q);
    }
    // x - q² is exact; sqrt(x) - q has its sign, and ≈ (x - q²)/(2q).
    let r = (-q).mul_add(q, x);
    from_f64_pair(dt, q, r / (2.0 * q))
}

/// Round a libm f64 result. When f64 itself overflowed but the exact value is finite (finite
/// operands, no pole), a dtype without infinities (fp8e4m3) saturates instead of turning the
/// f64 inf into NaN.
fn libm_result(dt: DType, r: f64, finite_inputs: bool) -> u64 {
    let saturates = dt.float_format().is_some_and(|ff| !ff.has_inf);
    if r.is_infinite() && finite_inputs && saturates {
        return from_f64(dt, f64::MAX.copysign(r));
    }
    from_f64(dt, r)
}

fn bool_alu(op: Op, a: u64, b: u64, c: u64) -> Result<u64, Ub> {
    // Python's bool(x) of the integer result: + is OR, * is AND, - is XOR.
    Ok(match op {
        Op::ADD | Op::OR | Op::MAX => a | b,
        Op::MUL | Op::AND => a & b,
        Op::SUB | Op::XOR | Op::CMPNE => a ^ b,
        Op::CMPEQ => (a ^ b) ^ 1,
        Op::CMPLT => (a ^ 1) & b,
        // tinygrad's `-x` on bool is CMPNE(x, True): logical NOT.
        Op::NEG => a ^ 1,
        Op::MULACC => (a & b) | c,
        Op::CDIV | Op::FLOORDIV | Op::CMOD | Op::FLOORMOD if b == 0 => return Err(Ub::DivByZero),
        Op::CDIV | Op::FLOORDIV => a,
        Op::CMOD | Op::FLOORMOD => 0,
        // Width 1: only a count of 0 is in range.
        Op::SHL | Op::SHR if b != 0 => return Err(Ub::ShiftOutOfRange),
        _ => a,
    })
}

fn int_alu(op: Op, dt: DType, a: u64, b: u64, c: u64) -> Result<u64, Ub> {
    let m = mask(dt);
    let signed = dt.is_signed_int();
    let (x, y) = (to_i128(dt, a), to_i128(dt, b));
    Ok(match op {
        // Two's complement: wrapping in u64 and masking is wrapping modulo 2^bits.
        Op::ADD => a.wrapping_add(b) & m,
        Op::SUB => a.wrapping_sub(b) & m,
        Op::MUL => a.wrapping_mul(b) & m,
        Op::MULACC => a.wrapping_mul(b).wrapping_add(c) & m,
        Op::NEG => a.wrapping_neg() & m,
        Op::TRUNC => a,
        Op::MAX => {
            if x < y {
                b
            } else {
                a
            }
        }
        Op::CMPLT => (x < y) as u64,
        Op::CMPNE => (x != y) as u64,
        Op::CMPEQ => (x == y) as u64,
        Op::AND => a & b,
        Op::OR => a | b,
        Op::XOR => a ^ b,
        // The test-only op of the "Adding an op" recipe: |a − b|, wrapping like SUB.
        #[cfg(feature = "test-op")]
        Op::ABSDIFF => {
            if x < y {
                b.wrapping_sub(a) & m
            } else {
                a.wrapping_sub(b) & m
            }
        }
        Op::CDIV | Op::CMOD | Op::FLOORDIV | Op::FLOORMOD => {
            if y == 0 {
                return Err(Ub::DivByZero);
            }
            // C traps on INT_MIN / -1 and on INT_MIN % -1 alike (x86 idiv raises #DE).
            if signed && y == -1 && x == -(1i128 << (dt.bits() - 1)) {
                return Err(Ub::DivOverflow);
            }
            let (q, r) = (x / y, x % y); // i128: truncating, remainder has x's sign
            let floor_adjust = r != 0 && ((r < 0) != (y < 0));
            let v = match op {
                Op::CDIV => q,
                Op::CMOD => r,
                Op::FLOORDIV => q - floor_adjust as i128,
                _ => r + if floor_adjust { y } else { 0 },
            };
            wrap_i128(dt, v)
        }
        Op::SHL | Op::SHR => {
            // The count is read in the operand dtype (tinygrad keeps the left dtype).
            if y < 0 || y >= dt.bits() as i128 {
                return Err(Ub::ShiftOutOfRange);
            }
            let n = y as u32;
            if op == Op::SHL {
                (a << n) & m
            } else if signed {
                wrap_i128(dt, x >> n) // arithmetic
            } else {
                a >> n // logical
            }
        }
        // Float-only ops on ints (the verifier rejects them first) and non-ALU ops.
        _ => a,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::round::tests::Rng;
    use half::{bf16, f16};
    use DType::*;

    fn i(dt: DType, v: i128) -> u64 {
        wrap_i128(dt, v)
    }
    fn f32b(x: f32) -> u64 {
        x.to_bits() as u64
    }
    fn run(op: Op, dt: DType, srcs: &[u64]) -> u64 {
        alu(op, dt, srcs).unwrap_or_else(|e| panic!("{op} {dt} {srcs:x?}: {e}"))
    }
    const NAN32: u64 = 0x7fc0_0000;

    #[test]
    fn int_wrapping_tables() {
        // (op, dt, a, b, expected) with values as mathematical integers.
        let cases: &[(Op, DType, i128, i128, i128)] = &[
            (Op::ADD, Int8, 127, 1, -128),
            (Op::ADD, UInt8, 250, 10, 4),
            (Op::SUB, UInt8, 1, 2, 255),
            (Op::SUB, Int8, -128, 1, 127),
            (Op::MUL, Int8, -128, -1, -128),
            (Op::MUL, Int32, 65536, 65536, 0),
            (Op::MUL, Int32, 46341, 46341, -2147479015),
            (Op::MUL, UInt64, u64::MAX as i128, u64::MAX as i128, 1),
            (Op::ADD, UInt64, u64::MAX as i128, 1, 0),
            (Op::MAX, Int8, -1, 0, 0),
            (Op::MAX, UInt8, 255, 0, 255),
            (Op::MAX, Int32, -2147483648, 2147483647, 2147483647),
            (Op::AND, Int8, -1, 0x55, 0x55),
            (Op::OR, UInt8, 0xf0, 0x0f, 0xff),
            (Op::XOR, Int32, -1, 0, -1),
            (Op::CMPLT, Int8, -1, 0, 1),
            (Op::CMPLT, UInt8, 255, 0, 0),
            (Op::CMPLT, UInt64, 0, u64::MAX as i128, 1),
            (Op::CMPNE, Int32, 5, 5, 0),
            (Op::CMPEQ, Int32, -7, -7, 1),
            // C division and modulo with mixed signs (7, -7 by ±2).
            (Op::CDIV, Int32, 7, 2, 3),
            (Op::CDIV, Int32, 7, -2, -3),
            (Op::CDIV, Int32, -7, 2, -3),
            (Op::CDIV, Int32, -7, -2, 3),
            (Op::CMOD, Int32, 7, 2, 1),
            (Op::CMOD, Int32, 7, -2, 1),
            (Op::CMOD, Int32, -7, 2, -1),
            (Op::CMOD, Int32, -7, -2, -1),
            // Python floor division and modulo.
            (Op::FLOORDIV, Int32, 7, 2, 3),
            (Op::FLOORDIV, Int32, 7, -2, -4),
            (Op::FLOORDIV, Int32, -7, 2, -4),
            (Op::FLOORDIV, Int32, -7, -2, 3),
            (Op::FLOORMOD, Int32, 7, 2, 1),
            (Op::FLOORMOD, Int32, 7, -2, -1),
            (Op::FLOORMOD, Int32, -7, 2, 1),
            (Op::FLOORMOD, Int32, -7, -2, -1),
            (Op::FLOORMOD, Int32, -8, 2, 0),
            (Op::CDIV, Int8, -128, 2, -64),
            (Op::CMOD, Int8, -128, 127, -1),
            (Op::FLOORDIV, Int8, -128, 127, -2),
            (
                Op::CDIV,
                UInt64,
                u64::MAX as i128,
                2,
                (u64::MAX / 2) as i128,
            ),
            (Op::CDIV, UInt8, 255, 254, 1),
            // Shifts.
            (Op::SHL, Int8, 1, 7, -128),
            (Op::SHL, Int8, -1, 7, -128),
            (Op::SHL, Int8, -3, 1, -6),
            (Op::SHL, Int32, 0x40000000, 1, -2147483648),
            (Op::SHL, UInt8, 0xff, 4, 0xf0),
            (Op::SHL, UInt64, 1, 63, 1 << 63),
            (Op::SHR, Int8, -128, 7, -1),
            (Op::SHR, Int8, -8, 1, -4),
            (Op::SHR, UInt8, 0x80, 7, 1),
            (Op::SHR, Int32, -1, 31, -1),
            (Op::SHR, UInt64, u64::MAX as i128, 63, 1),
        ];
        for &(op, dt, a, b, want) in cases {
            assert_eq!(
                alu(op, dt, &[i(dt, a), i(dt, b)]),
                Ok(i(dt, want)),
                "{op} {dt} {a} {b}"
            );
        }
    }

    #[test]
    fn int_unary_and_ternary() {
        assert_eq!(run(Op::NEG, Int8, &[i(Int8, -128)]), i(Int8, -128));
        assert_eq!(run(Op::NEG, Int32, &[i(Int32, 5)]), i(Int32, -5));
        assert_eq!(run(Op::NEG, UInt8, &[1]), 255);
        assert_eq!(run(Op::NEG, UInt64, &[0]), 0);
        assert_eq!(run(Op::TRUNC, Int32, &[i(Int32, -3)]), i(Int32, -3));
        assert_eq!(run(Op::MULACC, Int8, &[16, 16, 1]), 1); // 257 wraps
        assert_eq!(run(Op::MULACC, UInt64, &[1 << 32, 1 << 32, 7]), 7);
        assert_eq!(run(Op::WHERE, Int32, &[1, 10, 20]), 10);
        assert_eq!(run(Op::WHERE, Int32, &[0, 10, 20]), 20);
        assert_eq!(run(Op::WHERE, UInt64, &[1, u64::MAX, 0]), u64::MAX);
    }

    #[test]
    fn int_ub() {
        for op in [Op::CDIV, Op::CMOD, Op::FLOORDIV, Op::FLOORMOD] {
            for dt in [Int8, UInt8, Int32, UInt64] {
                assert_eq!(alu(op, dt, &[i(dt, 5), 0]), Err(Ub::DivByZero), "{op} {dt}");
                assert_eq!(alu(op, dt, &[0, 0]), Err(Ub::DivByZero), "{op} {dt}");
            }
            assert_eq!(alu(op, Int8, &[0x80, 0xff]), Err(Ub::DivOverflow), "{op}");
            assert_eq!(
                alu(op, Int32, &[0x8000_0000, 0xffff_ffff]),
                Err(Ub::DivOverflow),
                "{op}"
            );
            assert_eq!(
                alu(op, Int64, &[1 << 63, u64::MAX]),
                Err(Ub::DivOverflow),
                "{op}"
            );
            // Unsigned 0x80 / 0xff is an ordinary division.
            assert!(alu(op, UInt8, &[0x80, 0xff]).is_ok());
            // -127 / -1 is fine.
            assert!(alu(op, Int8, &[0x81, 0xff]).is_ok());
        }
        for op in [Op::SHL, Op::SHR] {
            assert_eq!(alu(op, Int8, &[1, 8]), Err(Ub::ShiftOutOfRange));
            assert_eq!(alu(op, Int8, &[1, i(Int8, -1)]), Err(Ub::ShiftOutOfRange));
            assert_eq!(alu(op, UInt8, &[1, 255]), Err(Ub::ShiftOutOfRange));
            assert_eq!(alu(op, Int32, &[1, 32]), Err(Ub::ShiftOutOfRange));
            assert_eq!(alu(op, UInt64, &[1, 64]), Err(Ub::ShiftOutOfRange));
            assert_eq!(alu(op, UInt64, &[1, u64::MAX]), Err(Ub::ShiftOutOfRange));
            assert!(alu(op, UInt64, &[1, 63]).is_ok());
        }
    }

    /// Exhaustive int8/uint8 pairs against Rust's own integer ops.
    #[test]
    fn int8_uint8_exhaustive_vs_rust() {
        for a in 0..256u64 {
            for b in 0..256u64 {
                let (sa, sb) = (a as u8 as i8, b as u8 as i8);
                let s = |v: i8| v as u8 as u64;
                assert_eq!(run(Op::ADD, Int8, &[a, b]), s(sa.wrapping_add(sb)));
                assert_eq!(run(Op::SUB, Int8, &[a, b]), s(sa.wrapping_sub(sb)));
                assert_eq!(run(Op::MUL, Int8, &[a, b]), s(sa.wrapping_mul(sb)));
                assert_eq!(run(Op::MAX, Int8, &[a, b]), s(sa.max(sb)));
                assert_eq!(run(Op::CMPLT, Int8, &[a, b]), (sa < sb) as u64);
                let d = alu(Op::CDIV, Int8, &[a, b]);
                match sa.checked_div(sb) {
                    Some(q) => assert_eq!(d, Ok(s(q))),
                    None => assert!(d.is_err()),
                }
                if let Some(r) = sa.checked_rem(sb) {
                    assert_eq!(run(Op::CMOD, Int8, &[a, b]), s(r));
                    let fq = (sa as f64 / sb as f64).floor() as i8;
                    assert_eq!(run(Op::FLOORDIV, Int8, &[a, b]), s(fq), "{sa} // {sb}");
                    assert_eq!(
                        run(Op::FLOORMOD, Int8, &[a, b]),
                        s(sa.wrapping_sub(fq.wrapping_mul(sb)))
                    );
                }
                if (0..8).contains(&sb) {
                    assert_eq!(run(Op::SHR, Int8, &[a, b]), s(sa >> sb));
                    assert_eq!(run(Op::SHL, Int8, &[a, b]), s(sa.wrapping_shl(sb as u32)));
                }
                let (ua, ub) = (a as u8, b as u8);
                assert_eq!(run(Op::ADD, UInt8, &[a, b]), ua.wrapping_add(ub) as u64);
                assert_eq!(run(Op::MUL, UInt8, &[a, b]), ua.wrapping_mul(ub) as u64);
                assert_eq!(run(Op::CMPLT, UInt8, &[a, b]), (ua < ub) as u64);
                if let Some(q) = ua.checked_div(ub) {
                    assert_eq!(run(Op::CDIV, UInt8, &[a, b]), q as u64);
                    assert_eq!(run(Op::FLOORMOD, UInt8, &[a, b]), (ua % ub) as u64);
                }
                if ub < 8 {
                    assert_eq!(run(Op::SHR, UInt8, &[a, b]), (ua >> ub) as u64);
                }
            }
        }
    }

    #[test]
    fn bool_ops() {
        let t = |op: Op, a: u64, b: u64| run(op, Bool, &[a, b]);
        for (a, b) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            assert_eq!(t(Op::ADD, a, b), a | b);
            assert_eq!(t(Op::MUL, a, b), a & b);
            assert_eq!(t(Op::MAX, a, b), a | b);
            assert_eq!(t(Op::SUB, a, b), a ^ b);
            assert_eq!(t(Op::CMPLT, a, b), (a < b) as u64);
            assert_eq!(t(Op::CMPEQ, a, b), (a == b) as u64);
            assert_eq!(t(Op::CMPNE, a, b), (a != b) as u64);
            assert_eq!(t(Op::XOR, a, b), a ^ b);
        }
        assert_eq!(run(Op::NEG, Bool, &[1]), 0);
        assert_eq!(run(Op::NEG, Bool, &[0]), 1);
        assert_eq!(run(Op::MULACC, Bool, &[1, 1, 1]), 1);
        assert_eq!(run(Op::MULACC, Bool, &[0, 1, 0]), 0);
        assert_eq!(run(Op::WHERE, Bool, &[1, 0, 1]), 0);
        assert_eq!(alu(Op::CDIV, Bool, &[1, 0]), Err(Ub::DivByZero));
        assert_eq!(alu(Op::SHL, Bool, &[1, 1]), Err(Ub::ShiftOutOfRange));
        assert_eq!(t(Op::SHL, 1, 0), 1);
    }

    #[test]
    fn float32_special_values() {
        let f =
            |op: Op, s: &[f32]| run(op, Float32, &s.iter().map(|&x| f32b(x)).collect::<Vec<_>>());
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        assert_eq!(f(Op::ADD, &[inf, -inf]), NAN32);
        assert_eq!(f(Op::ADD, &[-0.0, -0.0]), f32b(-0.0));
        assert_eq!(f(Op::ADD, &[-0.0, 0.0]), 0);
        assert_eq!(f(Op::SUB, &[1.5, 1.5]), 0);
        assert_eq!(f(Op::SUB, &[-0.0, 0.0]), f32b(-0.0));
        assert_eq!(f(Op::ADD, &[f32::MAX, f32::MAX]), f32b(inf));
        assert_eq!(f(Op::MUL, &[0.0, inf]), NAN32);
        assert_eq!(f(Op::MUL, &[-0.0, 5.0]), f32b(-0.0));
        assert_eq!(f(Op::MUL, &[1e-45, 0.5]), 0); // subnormal tie to even: 0
        assert_eq!(f(Op::MUL, &[3e-45, 0.5]), f32b(3e-45 * 0.5)); // 1.5 ulp -> 2 ulp
        assert_eq!(f(Op::FDIV, &[1.0, 0.0]), f32b(inf));
        assert_eq!(f(Op::FDIV, &[-1.0, 0.0]), f32b(-inf));
        assert_eq!(f(Op::FDIV, &[0.0, 0.0]), NAN32);
        assert_eq!(f(Op::FDIV, &[10.0, 3.0]), f32b(10.0 / 3.0));
        assert_eq!(f(Op::RECIPROCAL, &[-0.0]), f32b(-inf));
        assert_eq!(f(Op::RECIPROCAL, &[0.0]), f32b(inf));
        assert_eq!(f(Op::RECIPROCAL, &[inf]), 0);
        assert_eq!(f(Op::RECIPROCAL, &[3.0]), f32b(1.0 / 3.0));
        assert_eq!(f(Op::SQRT, &[-0.0]), f32b(-0.0));
        assert_eq!(f(Op::SQRT, &[-1.0]), NAN32);
        assert_eq!(f(Op::SQRT, &[inf]), f32b(inf));
        assert_eq!(f(Op::SQRT, &[2.0]), f32b(2f32.sqrt()));
        assert_eq!(f(Op::LOG2, &[0.0]), f32b(-inf));
        assert_eq!(f(Op::LOG2, &[-0.0]), f32b(-inf));
        assert_eq!(f(Op::LOG2, &[-1.0]), NAN32);
        assert_eq!(f(Op::LOG2, &[8.0]), f32b(3.0));
        assert_eq!(f(Op::EXP2, &[-inf]), 0);
        assert_eq!(f(Op::EXP2, &[200.0]), f32b(inf));
        assert_eq!(f(Op::EXP2, &[-150.0]), 0); // 2^-150: tie with 0, even
        assert_eq!(f(Op::EXP2, &[-149.0]), 1);
        assert_eq!(f(Op::SIN, &[inf]), NAN32);
        assert_eq!(f(Op::SIN, &[-0.0]), f32b(-0.0));
        assert_eq!(f(Op::SIN, &[std::f32::consts::PI]), f32b(-8.742278e-8));
        assert_eq!(f(Op::POW, &[2.0, 10.0]), f32b(1024.0));
        assert_eq!(f(Op::POW, &[-8.0, 1.0 / 3.0]), NAN32);
        assert_eq!(f(Op::POW, &[nan, 0.0]), f32b(1.0));
        assert_eq!(f(Op::POW, &[1.0, nan]), f32b(1.0));
        assert_eq!(f(Op::POW, &[-0.0, -1.0]), f32b(-inf));
        assert_eq!(f(Op::POW, &[-2.0, 3.0]), f32b(-8.0));
        assert_eq!(f(Op::POW, &[f32::MAX, f32::MAX]), f32b(inf));
        let big = 1e300f64.to_bits();
        assert_eq!(
            run(Op::POW, Float64, &[big, 2f64.to_bits()]),
            f64::INFINITY.to_bits()
        );
        assert_eq!(
            run(Op::EXP2, Float64, &[2000f64.to_bits()]),
            f64::INFINITY.to_bits()
        );
        assert_eq!(f(Op::TRUNC, &[-0.3]), f32b(-0.0));
        assert_eq!(f(Op::TRUNC, &[2.7]), f32b(2.0));
        assert_eq!(f(Op::TRUNC, &[-inf]), f32b(-inf));
        assert_eq!(f(Op::TRUNC, &[16777215.0]), f32b(16777215.0));
        // NaN results are canonical with the sign clear, whatever the operand's payload.
        assert_eq!(run(Op::ADD, Float32, &[0xffc0_0001, f32b(1.0)]), NAN32);
        assert_eq!(run(Op::TRUNC, Float32, &[0xff80_0001]), NAN32);
    }

    #[test]
    fn float_neg_max_cmp_where_pass_bits() {
        let n1 = 0xffc0_0001u64; // a negative NaN with a payload
        assert_eq!(run(Op::NEG, Float32, &[n1]), 0x7fc0_0001);
        assert_eq!(run(Op::NEG, Float32, &[0]), 0x8000_0000);
        assert_eq!(run(Op::NEG, Float16, &[0x3c00]), 0xbc00);
        assert_eq!(run(Op::NEG, Fp8E4M3, &[0x7f]), 0xff);
        assert_eq!(run(Op::NEG, Float64, &[0]), 1 << 63);
        let one = f32b(1.0);
        assert_eq!(run(Op::MAX, Float32, &[one, n1]), one);
        assert_eq!(run(Op::MAX, Float32, &[n1, one]), n1);
        assert_eq!(run(Op::MAX, Float32, &[0x8000_0000, 0]), 0x8000_0000);
        assert_eq!(run(Op::MAX, Float32, &[0, 0x8000_0000]), 0);
        assert_eq!(
            run(Op::MAX, Float32, &[f32b(-1.0), f32b(f32::NEG_INFINITY)]),
            f32b(-1.0)
        );
        assert_eq!(run(Op::MAX, Float16, &[0x3c00, 0x4000]), 0x4000);
        assert_eq!(run(Op::CMPLT, Float32, &[NAN32, one]), 0);
        assert_eq!(run(Op::CMPLT, Float32, &[one, NAN32]), 0);
        assert_eq!(run(Op::CMPNE, Float32, &[NAN32, NAN32]), 1);
        assert_eq!(run(Op::CMPEQ, Float32, &[NAN32, NAN32]), 0);
        assert_eq!(run(Op::CMPEQ, Float32, &[0x8000_0000, 0]), 1);
        assert_eq!(run(Op::CMPLT, Float32, &[0x8000_0000, 0]), 0);
        assert_eq!(run(Op::CMPLT, Float16, &[0xfc00, 0x7c00]), 1);
        assert_eq!(run(Op::CMPLT, BFloat16, &[0x0001, 0x0002]), 1); // subnormals
        assert_eq!(run(Op::WHERE, Float32, &[1, n1, one]), n1);
        assert_eq!(run(Op::WHERE, Float32, &[0, n1, one]), one);
    }

    #[test]
    fn mulacc_fuses() {
        // a = 1 + 2^-23, a·a = 1 + 2^-22 + 2^-46; + (-1 - 2^-22) leaves exactly 2^-46.
        let a = f32b(1.0 + f32::EPSILON);
        let c = f32b(-1.0 - 2.0 * f32::EPSILON);
        assert_eq!(run(Op::MULACC, Float32, &[a, a, c]), f32b(2f32.powi(-46)));
        // Unfused it would be 0.
        assert_eq!(
            run(Op::ADD, Float32, &[run(Op::MUL, Float32, &[a, a]), c]),
            0
        );
        // float64: same shape with 2^-52.
        let a = (1.0 + f64::EPSILON).to_bits();
        let c = (-1.0 - 2.0 * f64::EPSILON).to_bits();
        assert_eq!(
            run(Op::MULACC, Float64, &[a, a, c]),
            2f64.powi(-104).to_bits()
        );
        // float16 (the tinygrad-notes example): a = 1 + 2^-10.
        let a = 0x3c01;
        let c = f16::from_f64(-1.0 - 2.0 * 2f64.powi(-10)).to_bits() as u64;
        assert_eq!(
            run(Op::MULACC, Float16, &[a, a, c]),
            f16::from_f64(2f64.powi(-20)).to_bits() as u64
        );
        // The exact a·b + c is a midpoint plus a tail: fused rounds up, unfused ties to even.
        // float32: a = b = 1 + 2^-23, c = 2^-24: 1 + 2^-22 + 2^-24 + 2^-46.
        let (a, c) = (f32b(1.0 + f32::EPSILON), f32b(2f32.powi(-24)));
        assert_eq!(run(Op::MULACC, Float32, &[a, a, c]), 0x3f80_0003);
        assert_eq!(
            run(Op::ADD, Float32, &[run(Op::MUL, Float32, &[a, a]), c]),
            0x3f80_0002
        );
        // float32, exact value beyond f64: a·b = -(2^-24 - 2^-70), c = 1 + 2^-23, so
        // a·b + c = 1 + 2^-24 + 2^-70. Rounding through f64 would land on the midpoint
        // 1 + 2^-24 and tie to even (1.0); rounded once it is 1 + 2^-23.
        let (a, b, c) = (0x3380_0001, 0xbf7f_fffe, 0x3f80_0001);
        assert_eq!(run(Op::MULACC, Float32, &[a, b, c]), 0x3f80_0001);
        let fma = |a: u64, b: u64, c: u64| {
            let f = |x: u64| f32::from_bits(x as u32);
            f32b(f(a).mul_add(f(b), f(c)))
        };
        assert_eq!(fma(a, b, c), 0x3f80_0001);
        let naive = (f32::from_bits(a as u32) as f64) * (f32::from_bits(b as u32) as f64)
            + 1.0
            + 2f64.powi(-23);
        assert_eq!(naive as f32, 1.0);
        // bfloat16: a = b = 1 + 2^-7, c = 2^-8: 1 + 2^-6 + 2^-8 + 2^-14.
        assert_eq!(run(Op::MULACC, BFloat16, &[0x3f81, 0x3f81, 0x3b80]), 0x3f83);
        assert_eq!(
            run(
                Op::ADD,
                BFloat16,
                &[run(Op::MUL, BFloat16, &[0x3f81, 0x3f81]), 0x3b80]
            ),
            0x3f82
        );
        // MULACC of inf · 0 + 1 is NaN; inf·1 + -inf is NaN.
        let inf = f32b(f32::INFINITY);
        assert_eq!(run(Op::MULACC, Float32, &[inf, 0, f32b(1.0)]), NAN32);
        assert_eq!(
            run(
                Op::MULACC,
                Float32,
                &[inf, f32b(1.0), f32b(f32::NEG_INFINITY)]
            ),
            NAN32
        );
    }

    #[test]
    fn add_far_apart_rounds_once() {
        // 2^24 + (1 + 2^-23): just above the midpoint 2^24 + 1, so up to 2^24 + 2.
        let r = run(
            Op::ADD,
            Float32,
            &[f32b(16777216.0), f32b(1.0 + f32::EPSILON)],
        );
        assert_eq!(r, f32b(16777218.0));
        // bfloat16: 1 + 2^-8·(1 + 2^-7) is above the midpoint 1 + 2^-8: up to 1 + 2^-7.
        let small = crate::scalar::round::from_f64(BFloat16, 2f64.powi(-8) * (1.0 + 2f64.powi(-7)));
        assert_eq!(run(Op::ADD, BFloat16, &[0x3f80, small]), 0x3f81);
        assert_eq!(run(Op::SUB, BFloat16, &[0x3f80, small ^ 0x8000]), 0x3f81);
        // Exponents 2^127 apart: the tiny operand only matters through the sticky bit.
        assert_eq!(run(Op::ADD, BFloat16, &[0x7f00, 0x0001]), 0x7f00);
        assert_eq!(run(Op::SUB, Float32, &[f32b(1.0), 1]), f32b(1.0));
        assert_eq!(
            run(
                Op::ADD,
                Float32,
                &[f32b(-2f32.powi(-149)), f32b(2f32.powi(-149))]
            ),
            0
        );
    }

    /// Random operands against IEEE hardware float32 arithmetic (and libm's fmaf).
    #[test]
    fn float32_random_vs_hardware() {
        let mut rng = Rng(11);
        let pick = |rng: &mut Rng| -> f32 {
            match rng.next() % 8 {
                0 => f32::from_bits(rng.next() as u32),
                1 => [
                    0.0,
                    -0.0,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NAN,
                    f32::MAX,
                    1e-45,
                    -1e-40,
                ][rng.next() as usize % 8],
                2 => rng.f64_in(-149, -120) as f32,
                _ => rng.f64_in(-30, 30) as f32,
            }
        };
        let check = |op: Op, got: u64, want: f32| {
            if want.is_nan() {
                assert_eq!(got, NAN32, "{op}");
            } else {
                assert_eq!(got, f32b(want), "{op}");
            }
        };
        for _ in 0..300_000 {
            let (x, y, z) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
            let (a, b, c) = (f32b(x), f32b(y), f32b(z));
            check(Op::ADD, run(Op::ADD, Float32, &[a, b]), x + y);
            check(Op::SUB, run(Op::SUB, Float32, &[a, b]), x - y);
            check(Op::MUL, run(Op::MUL, Float32, &[a, b]), x * y);
            check(Op::FDIV, run(Op::FDIV, Float32, &[a, b]), x / y);
            check(Op::SQRT, run(Op::SQRT, Float32, &[a]), x.sqrt());
            check(
                Op::MULACC,
                run(Op::MULACC, Float32, &[a, b, c]),
                x.mul_add(y, z),
            );
            check(Op::RECIPROCAL, run(Op::RECIPROCAL, Float32, &[a]), 1.0 / x);
            check(Op::TRUNC, run(Op::TRUNC, Float32, &[a]), x.trunc());
            assert_eq!(run(Op::CMPLT, Float32, &[a, b]), (x < y) as u64);
            assert_eq!(run(Op::CMPNE, Float32, &[a, b]), (x != y) as u64);
        }
    }

    #[test]
    fn float64_random_vs_hardware() {
        let mut rng = Rng(12);
        for _ in 0..300_000 {
            let pick = |rng: &mut Rng| {
                if rng.next() & 3 == 0 {
                    f64::from_bits(rng.next())
                } else {
                    rng.f64_in(-60, 60)
                }
            };
            let (x, y, z) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
            let (a, b, c) = (x.to_bits(), y.to_bits(), z.to_bits());
            // Compare NaN-ness first: building the canonical expectation with a select on
            // `v.is_nan()` was miscompiled (LLVM replaced the constant NaN by sqrt's own).
            let check = |op: Op, got: u64, want: f64| {
                if want.is_nan() {
                    assert_eq!(got, canonical_nan(Float64), "{op} {a:#x} {b:#x} {c:#x}");
                } else {
                    assert_eq!(got, want.to_bits(), "{op} {a:#x} {b:#x} {c:#x}");
                }
            };
            check(Op::ADD, run(Op::ADD, Float64, &[a, b]), x + y);
            check(Op::SUB, run(Op::SUB, Float64, &[a, b]), x - y);
            check(Op::MUL, run(Op::MUL, Float64, &[a, b]), x * y);
            check(Op::FDIV, run(Op::FDIV, Float64, &[a, b]), x / y);
            check(Op::SQRT, run(Op::SQRT, Float64, &[a]), x.sqrt());
            check(
                Op::MULACC,
                run(Op::MULACC, Float64, &[a, b, c]),
                x.mul_add(y, z),
            );
        }
    }

    /// float16 and bfloat16 against `half`'s operators, which compute in f32 and round once
    /// more: innocuous for + - × ÷ since 24 >= 2p + 2 for p = 11 and p = 8.
    #[test]
    fn float16_bfloat16_random_vs_half() {
        let mut rng = Rng(13);
        for _ in 0..300_000 {
            let (a, b) = (rng.next() & 0xffff, rng.next() & 0xffff);
            let (x, y) = (f16::from_bits(a as u16), f16::from_bits(b as u16));
            for (op, want) in [
                (Op::ADD, x + y),
                (Op::SUB, x - y),
                (Op::MUL, x * y),
                (Op::FDIV, x / y),
            ] {
                let got = run(op, Float16, &[a, b]);
                if want.is_nan() {
                    assert_eq!(got, 0x7e00, "{op} {a:#x} {b:#x}");
                } else {
                    assert_eq!(got, want.to_bits() as u64, "{op} {a:#x} {b:#x}");
                }
            }
            let (x, y) = (bf16::from_bits(a as u16), bf16::from_bits(b as u16));
            for (op, want) in [
                (Op::ADD, x + y),
                (Op::SUB, x - y),
                (Op::MUL, x * y),
                (Op::FDIV, x / y),
            ] {
                let got = run(op, BFloat16, &[a, b]);
                if want.is_nan() {
                    assert_eq!(got, 0x7fc0, "{op} {a:#x} {b:#x}");
                } else {
                    assert_eq!(got, want.to_bits() as u64, "{op} {a:#x} {b:#x}");
                }
            }
        }
    }

    #[test]
    fn small_float_hand_cases() {
        // float16 overflow, subnormals, and exact halfway sums.
        assert_eq!(run(Op::ADD, Float16, &[0x7bff, 0x5000]), 0x7c00); // 65504 + 32 = 2^16: inf
        assert_eq!(run(Op::ADD, Float16, &[0x7bff, 0x4c00]), 0x7c00); // 65504 + 16: tie, even is 2^16: inf
        assert_eq!(run(Op::ADD, Float16, &[0x7bff, 0x4800]), 0x7bff); // 65504 + 8 rounds down
        assert_eq!(run(Op::MUL, Float16, &[0x0001, 0x3800]), 0x0000); // 2^-24 · 0.5: tie to 0
        assert_eq!(run(Op::MUL, Float16, &[0x0003, 0x3800]), 0x0002); // 1.5 ulp: tie to even 2
        assert_eq!(run(Op::SQRT, Float16, &[0x4000]), 0x3da8); // sqrt(2)
        assert_eq!(run(Op::RECIPROCAL, Float16, &[0x4200]), 0x3555); // 1/3
        assert_eq!(run(Op::FDIV, BFloat16, &[0x3f80, 0x4040]), 0x3eab); // 1/3
                                                                        // fp8e4m3: saturating overflow, no inf.
        assert_eq!(run(Op::ADD, Fp8E4M3, &[0x7e, 0x7e]), 0x7e);
        assert_eq!(run(Op::MUL, Fp8E4M3, &[0xfe, 0x7e]), 0xfe);
        assert_eq!(run(Op::RECIPROCAL, Fp8E4M3, &[0x00]), 0x7f); // true inf -> NaN
        assert_eq!(run(Op::POW, Fp8E4M3, &[0x7e, 0x7e]), 0x7e); // 448^448: finite, saturates
        assert_eq!(run(Op::FDIV, Fp8E4M3, &[0x7f, 0x38]), 0x7f);
        // fp8e5m2 is IEEE-like: overflow to inf.
        assert_eq!(run(Op::ADD, Fp8E5M2, &[0x7b, 0x7b]), 0x7c);
        assert_eq!(run(Op::FDIV, Fp8E5M2, &[0x00, 0x00]), 0x7e);
        assert_eq!(run(Op::SUB, Fp8E5M2, &[0x7c, 0x7c]), 0x7e);
    }

    #[test]
    fn misuse_does_not_panic() {
        for &op in Op::ALL {
            for dt in DType::ALL.into_iter().chain([Void]) {
                let _ = alu(op, dt, &[]);
                let _ = alu(op, dt, &[u64::MAX, u64::MAX, u64::MAX]);
            }
        }
        // Int-only ops on floats return the first operand untouched.
        assert_eq!(run(Op::AND, Float32, &[f32b(1.5), 0]), f32b(1.5));
        assert_eq!(run(Op::SQRT, Int32, &[4]), 4);
    }
}
