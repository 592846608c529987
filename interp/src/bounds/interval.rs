//! Sound interval transfer functions for one float op.
//!
//! An [`Iv`] is a closed interval of the extended reals (endpoints may be ±inf, never NaN)
//! that contains every value an element may legally take. Its endpoints are f64 reals, not
//! necessarily values of the dtype: a backend's value is a dtype value, so only the dtype
//! values inside count.
//!
//! Every transfer function relies on one fact: rounding to nearest (ties to even) into a
//! dtype, `RN`, is **monotone** (x ≤ y ⇒ RN(x) ≤ RN(y)). So for an op that is monotone in
//! each operand on a box (`+`, `−`, `×` and `÷` away from a zero divisor, `√`, exp2, log2,
//! trunc, casts), the set of rounded results over the box lies between RN of the exact result
//! at the box's extreme corners. Where the exact corner result is not an f64, it is bracketed
//! by f64 values rounded outward (`next_down` / `next_up`) before RN: `RN(lower) ≤ RN(exact)`.

use crate::ir::DType;
use crate::scalar::round::{from_f64, from_f64_pair, is_nan, to_f64};

use super::ulp;

/// Why no interval could be given.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Why {
    /// A NaN (or a NaN-producing combination such as inf − inf or 0 · inf) may occur.
    Nan,
    /// An operand or a partial result may be infinite or overflow.
    Overflow,
    /// A partial product may underflow (the relative error model fails there).
    Underflow,
    /// A divisor or a reduced factor may be zero.
    Zero,
    /// The op is not monotone over the operands' intervals (or is not handled on intervals).
    NotMonotone,
    /// An integer or bool result of bounded float operands, or a comparison that may flip.
    Discrete,
    /// Too many terms for the γ(n) bound (n·u ≥ 1).
    TooManyTerms,
    /// BITCAST of a bounded value.
    Bitcast,
    /// A source element is itself unbounded.
    Source,
}

impl Why {
    pub fn describe(self) -> &'static str {
        match self {
            Why::Nan => "a NaN may arise",
            Why::Overflow => "a value or partial result may overflow or be infinite",
            Why::Underflow => "a partial product may underflow",
            Why::Zero => "a divisor or factor may be zero",
            Why::NotMonotone => "the op is not bounded on intervals",
            Why::Discrete => "an integer/bool result of bounded operands may change",
            Why::TooManyTerms => "too many terms for the γ(n) bound",
            Why::Bitcast => "bitcast of a bounded value",
            Why::Source => "a source element is unbounded",
        }
    }
}

/// A closed interval [lo, hi] of the extended reals.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Iv {
    pub lo: f64,
    pub hi: f64,
}

pub type R<T> = Result<T, Why>;

impl Iv {
    pub fn point(x: f64) -> R<Iv> {
        if x.is_nan() {
            Err(Why::Nan)
        } else {
            Ok(Iv { lo: x, hi: x })
        }
    }

    pub fn new(lo: f64, hi: f64) -> R<Iv> {
        if lo.is_nan() || hi.is_nan() {
            return Err(Why::Nan);
        }
        Ok(Iv {
            lo: lo.min(hi),
            hi: hi.max(lo),
        })
    }

    pub fn hull(self, o: Iv) -> Iv {
        Iv {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    pub fn contains(self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn is_finite(self) -> bool {
        self.lo.is_finite() && self.hi.is_finite()
    }

    /// The largest magnitude in the interval.
    pub fn mag(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }

    /// The smallest magnitude in the interval (0 when it contains 0).
    pub fn mig(self) -> f64 {
        if self.lo <= 0.0 && self.hi >= 0.0 {
            0.0
        } else {
            self.lo.abs().min(self.hi.abs())
        }
    }

    pub fn negated(self) -> Iv {
        Iv {
            lo: -self.hi,
            hi: -self.lo,
        }
    }
}

/// x rounded up by one f64 step (a sound upper bracket of an RN f64 result).
pub fn up(x: f64) -> f64 {
    if x.is_finite() {
        x.next_up()
    } else {
        x
    }
}

pub fn down(x: f64) -> f64 {
    if x.is_finite() {
        x.next_down()
    } else {
        x
    }
}

/// RN of the f64 `x` into `dt`, as an f64. Err for a result the dtype cannot hold as a number
/// (fp8e4m3 has no infinity: an infinite `x` is NaN there).
pub fn rn(dt: DType, x: f64) -> R<f64> {
    if x.is_nan() {
        return Err(Why::Nan);
    }
    let b = from_f64(dt, x);
    if is_nan(dt, b) {
        return Err(Why::Overflow);
    }
    Ok(to_f64(dt, b))
}

/// RN of the exact sum a + b into `dt`.
pub fn rn_add(dt: DType, a: f64, b: f64) -> R<f64> {
    if !a.is_finite() || !b.is_finite() {
        return rn(dt, a + b);
    }
    let r = to_f64(dt, from_f64_pair(dt, a, b));
    if r.is_nan() {
        return Err(Why::Overflow);
    }
    Ok(r)
}

const SAFE: f64 = 1.0e-270; // far above f64's underflow, far below every narrower dtype's range

/// Lower and upper brackets of RN(a · b) into `dt`.
pub fn rn_mul(dt: DType, a: f64, b: f64) -> R<(f64, f64)> {
    let p = a * b;
    if p.is_nan() {
        return Err(Why::Nan);
    }
    if !a.is_finite() || !b.is_finite() || dt == DType::Float64 {
        // IEEE multiplication is RN(exact) in f64; infinities are exact.
        let r = rn(dt, p)?;
        return Ok((r, r));
    }
    if a == 0.0 || b == 0.0 {
        let r = rn(dt, p)?;
        return Ok((r, r));
    }
    if p.is_finite() && p.abs() >= SAFE {
        // TwoProduct: a·b = p + e exactly (no underflow), rounded once.
        let e = a.mul_add(b, -p);
        let r = rn_add(dt, p, e)?;
        return Ok((r, r));
    }
    Ok((rn(dt, down(p))?, rn(dt, up(p))?))
}

/// Lower and upper brackets of RN(a / b) into `dt` (b ≠ 0).
pub fn rn_div(dt: DType, a: f64, b: f64) -> R<(f64, f64)> {
    let q = a / b;
    if q.is_nan() {
        return Err(Why::Nan);
    }
    if !a.is_finite() || !b.is_finite() || dt == DType::Float64 || a == 0.0 {
        let r = rn(dt, q)?;
        return Ok((r, r));
    }
    if q.is_finite() && q.abs() >= SAFE && a.abs() >= SAFE {
        // a − q·b is exact (FMA remainder): the exact quotient is q + r/b, on r's side of q,
        // within half an f64 ulp of q; rounding q + RN(r/b) once to a narrower dtype gives
        // RN(a/b) (the oracle's own FDIV argument, see scalar::alu).
        let r = (-q).mul_add(b, a);
        let v = rn_add(dt, q, r / b)?;
        return Ok((v, v));
    }
    Ok((rn(dt, down(q))?, rn(dt, up(q))?))
}

/// Lower and upper brackets of RN(√a) into `dt` (a ≥ 0).
pub fn rn_sqrt(dt: DType, a: f64) -> R<(f64, f64)> {
    if a < 0.0 || a.is_nan() {
        return Err(Why::Nan);
    }
    let q = a.sqrt();
    if dt == DType::Float64 || a == 0.0 || a.is_infinite() {
        let r = rn(dt, q)?;
        return Ok((r, r));
    }
    if q >= SAFE {
        let r = (-q).mul_add(q, a);
        let v = rn_add(dt, q, r / (2.0 * q))?;
        return Ok((v, v));
    }
    Ok((rn(dt, down(q))?, rn(dt, up(q))?))
}

/// Brackets of RN(f(x)) for a libm function f whose f64 result is within 1 ulp of the truth
/// (glibc's documented accuracy for exp2, log2, sin): widened by 4 f64 ulps each side (the
/// oracle's own value at any point of the interval is RN of a libm result, which may sit one
/// ulp on either side of the truth) before rounding outward.
pub fn libm_bracket(dt: DType, lo_val: f64, hi_val: f64) -> R<Iv> {
    let (mut l, mut h) = (lo_val, hi_val);
    for _ in 0..4 {
        l = down(l);
        h = up(h);
    }
    Iv::new(rn_saturating(dt, l)?, rn_saturating(dt, h)?)
}

/// RN for libm results: a dtype without infinities saturates an f64 overflow (as the oracle does
/// for finite operands).
fn rn_saturating(dt: DType, x: f64) -> R<f64> {
    match dt.float_format() {
        Some(ff) if !ff.has_inf && x.is_infinite() => Ok(ulp::max_finite(dt).copysign(x)),
        _ => rn(dt, x),
    }
}

/// Interval sum, each endpoint RN'd into `dt`.
pub fn add(dt: DType, a: Iv, b: Iv) -> R<Iv> {
    Iv::new(rn_add(dt, a.lo, b.lo)?, rn_add(dt, a.hi, b.hi)?)
}

pub fn sub(dt: DType, a: Iv, b: Iv) -> R<Iv> {
    add(dt, a, b.negated())
}

/// Interval product: the extreme corners, RN'd.
pub fn mul(dt: DType, a: Iv, b: Iv) -> R<Iv> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for x in [a.lo, a.hi] {
        for y in [b.lo, b.hi] {
            let (l, h) = rn_mul(dt, x, y)?;
            lo = lo.min(l);
            hi = hi.max(h);
        }
    }
    Iv::new(lo, hi)
}

/// The exact (unrounded) product interval, bracketed outward in f64: what a fused multiply-add
/// sees when a backend contracts `a·b + c`.
pub fn mul_exact(a: Iv, b: Iv) -> R<Iv> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for x in [a.lo, a.hi] {
        for y in [b.lo, b.hi] {
            let p = x * y;
            if p.is_nan() {
                return Err(Why::Nan);
            }
            let exact = x == 0.0
                || y == 0.0
                || !p.is_finite()
                || (p.abs() >= SAFE && x.mul_add(y, -p) == 0.0);
            let (l, h) = if exact { (p, p) } else { (down(p), up(p)) };
            lo = lo.min(l);
            hi = hi.max(h);
        }
    }
    Iv::new(lo, hi)
}

pub fn div(dt: DType, a: Iv, b: Iv) -> R<Iv> {
    if b.lo <= 0.0 && b.hi >= 0.0 {
        return Err(Why::Zero);
    }
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for x in [a.lo, a.hi] {
        for y in [b.lo, b.hi] {
            let (l, h) = rn_div(dt, x, y)?;
            lo = lo.min(l);
            hi = hi.max(h);
        }
    }
    Iv::new(lo, hi)
}

pub fn sqrt(dt: DType, a: Iv) -> R<Iv> {
    if a.lo < 0.0 {
        return Err(Why::Nan);
    }
    Iv::new(rn_sqrt(dt, a.lo)?.0, rn_sqrt(dt, a.hi)?.1)
}

/// a·b + c with one rounding.
pub fn mulacc(dt: DType, a: Iv, b: Iv, c: Iv) -> R<Iv> {
    let p = mul_exact(a, b)?;
    // p's endpoints bracket the exact product outward; RN(p.lo + c.lo) ≤ RN(exact + c).
    add(dt, p, c)
}

pub fn max(a: Iv, b: Iv) -> Iv {
    Iv {
        lo: a.lo.max(b.lo),
        hi: a.hi.max(b.hi),
    }
}

pub fn trunc(dt: DType, a: Iv) -> R<Iv> {
    Iv::new(rn(dt, a.lo.trunc())?, rn(dt, a.hi.trunc())?)
}

pub fn exp2(dt: DType, a: Iv) -> R<Iv> {
    if !a.is_finite() {
        return Err(Why::Overflow);
    }
    libm_bracket(dt, a.lo.exp2(), a.hi.exp2())
}

pub fn log2(dt: DType, a: Iv) -> R<Iv> {
    if a.lo < 0.0 {
        return Err(Why::Nan);
    }
    if !a.is_finite() || a.lo == 0.0 {
        // log2(0) = −inf, which fp8e4m3 turns into NaN; keep it simple: no interval.
        return Err(Why::Overflow);
    }
    libm_bracket(dt, a.lo.log2(), a.hi.log2())
}

/// sin is 1-Lipschitz: on [lo, hi] it stays within (hi − lo)/2 of sin at the midpoint.
pub fn sin(dt: DType, a: Iv) -> R<Iv> {
    if !a.is_finite() {
        return Err(Why::Nan);
    }
    let width = up(a.hi - a.lo);
    if width >= 6.0 {
        return Iv::new(rn(dt, -1.0)?, rn(dt, 1.0)?);
    }
    let mid = a.lo + (a.hi - a.lo) / 2.0;
    // every point is within max(mid − lo, hi − mid) ≤ width of mid (rounding of mid included)
    let r = width;
    let s = mid.sin();
    // libm's sin(mid) is within 1 ulp of the truth; 2^-50·|s| covers that generously.
    let slack = s.abs() * 2f64.powi(-50) + f64::from_bits(1);
    let lo = down(down(s - r) - slack).max(-1.0);
    let hi = up(up(s + r) + slack).min(1.0);
    libm_bracket(dt, lo, hi)
}

/// Float → float cast.
pub fn cast(to: DType, a: Iv) -> R<Iv> {
    Iv::new(rn(to, a.lo)?, rn(to, a.hi)?)
}

/// Widens an interval to include 0 when it holds a nonzero subnormal of `dt` (flush-to-zero and
/// denormals-are-zero: a flushed value is ±0, everything else is unchanged). Returns whether it
/// widened.
pub fn flush(dt: DType, a: &mut Iv) -> bool {
    let mn = ulp::min_normal(dt);
    let touches = (a.lo < mn && a.hi > -mn) && !(a.lo == 0.0 && a.hi == 0.0);
    let contains_zero = a.lo <= 0.0 && a.hi >= 0.0;
    if touches && !contains_zero {
        a.lo = a.lo.min(0.0);
        a.hi = a.hi.max(0.0);
        true
    } else {
        touches
    }
}

/// ±n steps on `dt`'s line around the interval (a declared ULP budget).
pub fn widen_ulps(dt: DType, a: Iv, n: u64) -> Iv {
    let n = n as i128;
    Iv {
        lo: ulp::step_real(dt, a.lo, -n),
        hi: ulp::step_real(dt, a.hi, n),
    }
}

/// γ(n) = n·u / (1 − n·u), rounded up; None when n·u ≥ 1.
pub fn gamma(n: usize, u: f64) -> Option<f64> {
    let nu = up(n as f64 * u);
    if nu >= 1.0 {
        return None;
    }
    Some(up(nu / down(1.0 - nu)))
}

/// f64 sum rounded down / up (for bound arithmetic, not for values).
pub fn sum_down(a: f64, b: f64) -> f64 {
    let s = a + b;
    if s.is_finite() {
        let (_, t) = crate::scalar::round::two_sum(a, b);
        if t < 0.0 {
            return s.next_down();
        }
    }
    s
}

pub fn sum_up(a: f64, b: f64) -> f64 {
    -sum_down(-a, -b)
}

pub fn mul_up(a: f64, b: f64) -> f64 {
    // a, b ≥ 0
    let p = a * b;
    if p == 0.0 && a != 0.0 && b != 0.0 {
        return f64::from_bits(1);
    }
    if p.is_finite() && p != 0.0 && (p < SAFE || a.mul_add(b, -p) > 0.0) {
        return p.next_up();
    }
    p
}

pub fn mul_down(a: f64, b: f64) -> f64 {
    // a, b ≥ 0
    let p = a * b;
    if p.is_finite() && p != 0.0 && (p < SAFE || a.mul_add(b, -p) < 0.0) {
        return p.next_down();
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_widens_to_zero() {
        let mut a = Iv { lo: 1e-40, hi: 1.0 };
        assert!(flush(DType::Float32, &mut a));
        assert_eq!(a.lo, 0.0);
        let mut b = Iv { lo: 1.0, hi: 2.0 };
        assert!(!flush(DType::Float32, &mut b));
    }

    #[test]
    fn rounding_helpers_bracket() {
        let (a, b) = (0.1f64, 0.7f64);
        assert!(sum_down(a, b) <= 0.8 && sum_up(a, b) >= 0.8);
        assert!(mul_down(a, b) <= mul_up(a, b));
        assert_eq!(
            gamma(2, 2f64.powi(-24)).map(|g| g > 2.0 * 2f64.powi(-24)),
            Some(true)
        );
        assert_eq!(gamma(1 << 24, 2f64.powi(-24)), None);
    }
}
