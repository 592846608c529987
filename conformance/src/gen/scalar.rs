//! Generators of dtypes and scalar values (newtypes, since the types live in
//! `uopkit_interp`), for per-op algebraic laws against `uopkit_interp::scalar` (the tests
//! below check the laws the oracle must satisfy): each type is [`Drawn`] from a source of
//! random words ([`Draw`]), which is quickcheck's `Gen` (the [`Arbitrary`] impls, for users)
//! or a proptest tape of words ([`strategy`]: seeded, so every failure reproduces, and the
//! tape shrinks towards 0, the first and simplest alternatives).
//!
//! Values are raw bits of their dtype (the oracle's representation), drawn with a bias to
//! the values where laws break: 0, ±1, the dtype's extremes, ±0.0, ±inf, NaNs (canonical and
//! with payloads), subnormals; otherwise small values or random bits. Shrinking moves an
//! integer towards 0 and a float towards 0.0.

use proptest::collection::vec;
use proptest::prelude::{any, Strategy};
use quickcheck::{Arbitrary, Gen};
use uopkit_interp::ir::DType;
use uopkit_interp::scalar::cast::{mask, to_i128, wrap_i128};
use uopkit_interp::scalar::round::{from_f64, to_f64};

use DType::*;

/// Any storable dtype.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AnyDType(pub DType);

/// An integer dtype (signed or unsigned, 8 to 64 bits).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IntDType(pub DType);

/// A float dtype (fp8 to float64).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FloatDType(pub DType);

pub const INT_DTYPES: &[DType] = &[Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
pub const FLOAT_DTYPES: &[DType] = &[Fp8E4M3, Fp8E5M2, Float16, BFloat16, Float32, Float64];

/// A source of random words.
pub trait Draw {
    fn word(&mut self) -> u64;
}

impl Draw for Gen {
    fn word(&mut self) -> u64 {
        u64::arbitrary(self)
    }
}

/// Words read from a tape; past its end every word is 0 (the first alternative).
pub struct Tape<'a> {
    words: &'a [u64],
    pos: usize,
}

impl<'a> Tape<'a> {
    pub fn new(words: &'a [u64]) -> Self {
        Tape { words, pos: 0 }
    }
}

impl Draw for Tape<'_> {
    fn word(&mut self) -> u64 {
        let w = self.words.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        w
    }
}

/// A value made from random words.
pub trait Drawn: Sized {
    fn draw(d: &mut dyn Draw) -> Self;
}

/// A proptest strategy for a [`Drawn`] type: a tape of up to 8 words (shrinking the tape
/// shrinks the value towards the first alternatives: int8-like dtypes, 0, special values).
pub fn strategy<T: Drawn + std::fmt::Debug>() -> impl Strategy<Value = T> {
    vec(any::<u64>(), 0..=8).prop_map(|t| T::draw(&mut Tape::new(&t)))
}

/// An element of a non-empty list.
fn choose<T: Copy>(d: &mut dyn Draw, xs: &[T]) -> T {
    xs[(d.word() % xs.len().max(1) as u64) as usize]
}

/// A dtype "smaller" than `dt` to shrink towards (int32 for ints, float32 for floats).
fn simpler(dt: DType) -> Option<DType> {
    match dt {
        Int32 | Float32 | Bool => None,
        d if d.is_int() => Some(Int32),
        _ => Some(Float32),
    }
}

impl Drawn for AnyDType {
    fn draw(d: &mut dyn Draw) -> Self {
        AnyDType(choose(d, &DType::ALL))
    }
}

impl Arbitrary for AnyDType {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(simpler(self.0).map(AnyDType).into_iter())
    }
}

impl Drawn for IntDType {
    fn draw(d: &mut dyn Draw) -> Self {
        IntDType(choose(d, INT_DTYPES))
    }
}

impl Arbitrary for IntDType {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(simpler(self.0).map(IntDType).into_iter())
    }
}

impl Drawn for FloatDType {
    fn draw(d: &mut dyn Draw) -> Self {
        FloatDType(choose(d, FLOAT_DTYPES))
    }
}

impl Arbitrary for FloatDType {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(simpler(self.0).map(FloatDType).into_iter())
    }
}

/// Bits of one element of `dt`, biased to edge values.
pub fn arbitrary_bits(g: &mut dyn Draw, dt: DType) -> u64 {
    let m = mask(dt);
    match g.word() % 8 {
        0 | 1 => special_bits(g, dt),
        2 | 3 => {
            // Small values.
            let v = (g.word() as i8 % 17) as i128;
            if dt.is_float() {
                from_f64(dt, v as f64 / 4.0)
            } else if dt.is_bool() {
                (v & 1) as u64
            } else {
                wrap_i128(dt, v)
            }
        }
        _ => g.word() & m,
    }
}

/// One of the values where laws tend to break.
pub fn special_bits(g: &mut dyn Draw, dt: DType) -> u64 {
    if let Some(f) = dt.float_format() {
        let sign = 1u64 << (dt.bits() - 1);
        let exp_all = ((1u64 << f.exp_bits) - 1) << f.man_bits;
        let cands = [
            0,
            sign,
            from_f64(dt, 1.0),
            from_f64(dt, -1.0),
            exp_all,                           // inf (E4M3: 256, a finite value)
            exp_all | sign,                    // -inf
            exp_all | (1 << (f.man_bits - 1)), // quiet NaN
            exp_all | 1,                       // NaN with a payload (E5M2..: signalling)
            1,                                 // smallest subnormal
            sign | 1,
            exp_all - 1, // largest finite (below inf)
            (exp_all - 1) | sign,
            from_f64(dt, 0.5),
            from_f64(dt, 3.0),
        ];
        return choose(g, &cands) & mask(dt);
    }
    let (lo, hi) = dt.int_range().unwrap_or((0, 1));
    let v = choose(g, &[0, 1, -1, lo, hi, lo + 1, hi - 1, 2, -2, 7, 64, hi / 2]);
    wrap_i128(dt, v.clamp(lo, hi.max(lo)))
}

/// Shrink candidates for bits of `dt`: towards 0.
pub fn shrink_bits(dt: DType, bits: u64) -> Vec<u64> {
    if bits == 0 {
        return vec![];
    }
    if dt.is_float() {
        let x = to_f64(dt, bits);
        let mut out = vec![0];
        if x.is_finite() && x.trunc() != x {
            out.push(from_f64(dt, x.trunc()));
        }
        if x.is_finite() && x.abs() >= 2.0 {
            out.push(from_f64(dt, (x / 2.0).trunc()));
        }
        out.retain(|&b| b != bits);
        return out;
    }
    let v = to_i128(dt, bits);
    let mut out = vec![0, wrap_i128(dt, v / 2)];
    if v < 0 {
        out.push(wrap_i128(dt, -v));
    }
    out.retain(|&b| b != bits);
    out.dedup();
    out
}

/// One value: its dtype and bits.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Value {
    pub dtype: DType,
    pub bits: u64,
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} ({:#x})",
            self.dtype,
            uopkit_interp::scalar::literal::display(self.dtype, self.bits),
            self.bits
        )
    }
}

impl Drawn for Value {
    fn draw(g: &mut dyn Draw) -> Self {
        let dtype = AnyDType::draw(g).0;
        Value {
            dtype,
            bits: arbitrary_bits(g, dtype),
        }
    }
}

impl Arbitrary for Value {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let dt = self.dtype;
        Box::new(
            shrink_bits(dt, self.bits)
                .into_iter()
                .map(move |bits| Value { dtype: dt, bits }),
        )
    }
}

/// Two values of one integer dtype.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IntPair {
    pub dtype: DType,
    pub a: u64,
    pub b: u64,
}

impl Drawn for IntPair {
    fn draw(g: &mut dyn Draw) -> Self {
        let dtype = IntDType::draw(g).0;
        IntPair {
            dtype,
            a: arbitrary_bits(g, dtype),
            b: arbitrary_bits(g, dtype),
        }
    }
}

impl Arbitrary for IntPair {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let p = *self;
        let a = shrink_bits(p.dtype, p.a)
            .into_iter()
            .map(move |a| IntPair { a, ..p });
        let b = shrink_bits(p.dtype, p.b)
            .into_iter()
            .map(move |b| IntPair { b, ..p });
        Box::new(a.chain(b))
    }
}

/// Two values of one dtype (any dtype, floats included).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub dtype: DType,
    pub a: u64,
    pub b: u64,
}

impl Drawn for Pair {
    fn draw(g: &mut dyn Draw) -> Self {
        let dtype = AnyDType::draw(g).0;
        Pair {
            dtype,
            a: arbitrary_bits(g, dtype),
            b: arbitrary_bits(g, dtype),
        }
    }
}

impl Arbitrary for Pair {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let p = *self;
        let a = shrink_bits(p.dtype, p.a)
            .into_iter()
            .map(move |a| Pair { a, ..p });
        let b = shrink_bits(p.dtype, p.b)
            .into_iter()
            .map(move |b| Pair { b, ..p });
        Box::new(a.chain(b))
    }
}

/// An integer value and a dtype at least as wide that holds every value of its dtype.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Widening {
    pub from: DType,
    pub wide: DType,
    pub bits: u64,
}

impl Drawn for Widening {
    fn draw(g: &mut dyn Draw) -> Self {
        let from = IntDType::draw(g).0;
        let (lo, hi) = from.int_range().unwrap_or((0, 1));
        let wider: Vec<DType> = INT_DTYPES
            .iter()
            .copied()
            .filter(|d| d.int_range().is_some_and(|(l, h)| l <= lo && hi <= h))
            .chain(FLOAT_DTYPES.iter().copied().filter(|d| {
                d.float_format()
                    .is_some_and(|f| f.man_bits + 1 >= from.bits())
            }))
            .collect();
        Widening {
            from,
            wide: choose(g, &wider),
            bits: arbitrary_bits(g, from),
        }
    }
}

impl Arbitrary for Widening {
    fn arbitrary(g: &mut Gen) -> Self {
        Self::draw(g)
    }
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let w = *self;
        Box::new(
            shrink_bits(w.from, w.bits)
                .into_iter()
                .map(move |bits| Widening { bits, ..w }),
        )
    }
}

#[cfg(test)]
mod laws {
    //! Algebraic laws of the oracle's scalar semantics (`uopkit_interp::scalar`).
    use super::*;
    use proptest::test_runner::TestCaseError;
    use uopkit_interp::ir::Op;
    use uopkit_interp::scalar::round::is_nan;
    use uopkit_interp::scalar::{alu, bitcast, cast, Ub};

    /// A law's verdict on one value (what quickcheck's `TestResult` was).
    enum TestResult {
        Passed,
        Discard,
        Error(String),
    }

    impl TestResult {
        fn passed() -> Self {
            TestResult::Passed
        }
        fn discard() -> Self {
            TestResult::Discard
        }
        fn error(m: impl Into<String>) -> Self {
            TestResult::Error(m.into())
        }
        fn from_bool(ok: bool) -> Self {
            if ok {
                TestResult::Passed
            } else {
                TestResult::error("the law does not hold")
            }
        }
    }

    impl From<bool> for TestResult {
        fn from(ok: bool) -> Self {
            TestResult::from_bool(ok)
        }
    }

    /// Checks a law on 3000 values from a fixed seed (the same values on every run: a
    /// failure reproduces), shrunk on failure; discarded values do not count.
    fn check<T: Drawn + std::fmt::Debug + Clone, R: Into<TestResult>>(prop: fn(T) -> R) {
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let config = Config {
            max_global_rejects: 27_000,
            ..crate::gen::rules::fixed_config(3000, 4096)
        };
        let seed = [0x5c; 32];
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        let result = runner.run(&strategy::<T>(), |v| match prop(v).into() {
            TestResult::Passed => Ok(()),
            TestResult::Discard => Err(TestCaseError::reject("discarded")),
            TestResult::Error(m) => Err(TestCaseError::fail(m)),
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    }

    fn int(dt: DType, bits: u64) -> i128 {
        to_i128(dt, bits)
    }

    /// a == cdiv(a, b)*b + cmod(a, b) (wrapping), |cmod| < |b|, cmod has a's sign; the same
    /// with floor division and modulo (which has b's sign); UB exactly for b == 0 and for
    /// INT_MIN / -1.
    #[test]
    fn division_identities() {
        fn prop(p: IntPair) -> TestResult {
            let (dt, a, b) = (p.dtype, p.a, p.b);
            let (x, y) = (int(dt, a), int(dt, b));
            let ub = if y == 0 {
                Some(Ub::DivByZero)
            } else if dt.is_signed_int() && y == -1 && x == dt.int_range().unwrap().0 {
                Some(Ub::DivOverflow)
            } else {
                None
            };
            for (dop, mop) in [(Op::CDIV, Op::CMOD), (Op::FLOORDIV, Op::FLOORMOD)] {
                let (q, r) = (alu(dop, dt, &[a, b]), alu(mop, dt, &[a, b]));
                if let Some(u) = ub {
                    if q != Err(u) || r != Err(u) {
                        return TestResult::error(format!(
                            "{dop}/{mop}: expected {u:?}, got {q:?} {r:?}"
                        ));
                    }
                    continue;
                }
                let (q, r) = (q.unwrap(), r.unwrap());
                let back = alu(Op::ADD, dt, &[alu(Op::MUL, dt, &[q, b]).unwrap(), r]).unwrap();
                if back != a {
                    return TestResult::error(format!("{dop}: q*b + r = {back:#x} != a"));
                }
                let rv = int(dt, r);
                if rv.abs() >= y.abs() {
                    return TestResult::error(format!("{mop}: |r| = {} >= |b|", rv.abs()));
                }
                let sign_of = if dop == Op::CDIV { x } else { y };
                if rv != 0 && (rv < 0) != (sign_of < 0) {
                    return TestResult::error(format!("{mop}: r = {rv} has the wrong sign"));
                }
            }
            TestResult::passed()
        }
        check(prop as fn(IntPair) -> TestResult);
    }

    /// int → wider int (or a float whose significand holds it) → int is the identity.
    #[test]
    fn widening_casts_round_trip() {
        fn prop(w: Widening) -> bool {
            let up = cast(w.from, w.wide, w.bits).unwrap();
            cast(w.wide, w.from, up) == Ok(w.bits & mask(w.from))
        }
        check(prop as fn(Widening) -> bool);
    }

    /// A float → wider float → float round trip keeps the bits (NaNs: stay NaN, keep sign).
    #[test]
    fn widening_float_casts_round_trip() {
        fn prop(v: Value) -> TestResult {
            let Some(f) = v.dtype.float_format() else {
                return TestResult::discard();
            };
            let wide = if f.exp_bits <= 8 && f.man_bits <= 23 {
                Float32
            } else {
                Float64
            };
            let wide = if wide == v.dtype { Float64 } else { wide };
            let back = cast(wide, v.dtype, cast(v.dtype, wide, v.bits).unwrap()).unwrap();
            if is_nan(v.dtype, v.bits) {
                let sign = 1u64 << (v.dtype.bits() - 1);
                TestResult::from_bool(is_nan(v.dtype, back) && (back & sign) == (v.bits & sign))
            } else {
                TestResult::from_bool(back == v.bits)
            }
        }
        check(prop as fn(Value) -> TestResult);
    }

    /// Comparisons: a < b and b < a never both hold; for non-NaN values exactly one of
    /// a < b, b < a, a == b holds; CMPNE is the negation of CMPEQ (NaN included); all three
    /// are symmetric where they should be.
    #[test]
    fn comparisons_are_consistent() {
        fn prop(p: Pair) -> TestResult {
            let (dt, a, b) = (p.dtype, p.a, p.b);
            let c = |op, x, y| alu(op, dt, &[x, y]).unwrap();
            let (lt, gt, eq, ne) = (
                c(Op::CMPLT, a, b),
                c(Op::CMPLT, b, a),
                c(Op::CMPEQ, a, b),
                c(Op::CMPNE, a, b),
            );
            if lt == 1 && gt == 1 {
                return TestResult::error("a < b and b < a");
            }
            if eq == ne {
                return TestResult::error("CMPEQ == CMPNE");
            }
            if eq != c(Op::CMPEQ, b, a) {
                return TestResult::error("CMPEQ not symmetric");
            }
            let nan = is_nan(dt, a) || is_nan(dt, b);
            if !nan && lt + gt + eq != 1 {
                return TestResult::error(format!("trichotomy fails: lt={lt} gt={gt} eq={eq}"));
            }
            if nan && lt + gt + eq != 0 {
                return TestResult::error("NaN compares true");
            }
            TestResult::passed()
        }
        check(prop as fn(Pair) -> TestResult);
    }

    /// ADD and MUL are commutative bit for bit (floats too: NaN results are canonical); so
    /// are AND/OR/XOR on ints; NEG is an involution; x ^ x = 0; bitcast round-trips.
    #[test]
    fn commutativity_and_involutions() {
        fn prop(p: Pair) -> TestResult {
            let (dt, a, b) = (p.dtype, p.a, p.b);
            let c = |op, x, y| alu(op, dt, &[x, y]);
            for op in [Op::ADD, Op::MUL] {
                if dt.is_bool() && op == Op::ADD {
                    continue;
                }
                if c(op, a, b) != c(op, b, a) {
                    return TestResult::error(format!("{op} not commutative"));
                }
            }
            if dt.is_int() {
                for op in [Op::AND, Op::OR, Op::XOR] {
                    if c(op, a, b) != c(op, b, a) {
                        return TestResult::error(format!("{op} not commutative"));
                    }
                }
                if c(Op::XOR, a, a) != Ok(0) {
                    return TestResult::error("x ^ x != 0");
                }
                // a - b == a + (-b), wrapping.
                let nb = alu(Op::NEG, dt, &[b]).unwrap();
                if c(Op::SUB, a, b) != c(Op::ADD, a, nb) {
                    return TestResult::error("a - b != a + (-b)");
                }
            }
            if !dt.is_bool() {
                let n = alu(Op::NEG, dt, &[a]).unwrap();
                if alu(Op::NEG, dt, &[n]) != Ok(a & mask(dt)) {
                    return TestResult::error("NEG(NEG(x)) != x");
                }
                let same: Vec<DType> = DType::ALL
                    .iter()
                    .copied()
                    .filter(|d| d.bits() == dt.bits() && !d.is_bool())
                    .collect();
                for to in same {
                    if bitcast(to, dt, bitcast(dt, to, a).unwrap()) != Some(a & mask(dt)) {
                        return TestResult::error(format!("bitcast via {to} does not round-trip"));
                    }
                }
            }
            TestResult::passed()
        }
        check(prop as fn(Pair) -> TestResult);
    }

    /// Shifts: UB exactly for counts outside 0..bits; SHL by k is multiplication by 2^k
    /// (wrapping); an unsigned SHR by k is floor division by 2^k.
    #[test]
    fn shifts() {
        fn prop(p: IntPair) -> TestResult {
            let (dt, a) = (p.dtype, p.a);
            let k = int(dt, p.b);
            let (l, r) = (alu(Op::SHL, dt, &[a, p.b]), alu(Op::SHR, dt, &[a, p.b]));
            if k < 0 || k >= dt.bits() as i128 {
                return TestResult::from_bool(
                    l == Err(Ub::ShiftOutOfRange) && r == Err(Ub::ShiftOutOfRange),
                );
            }
            let pow = wrap_i128(dt, 1i128 << k);
            let mul = if k == dt.bits() as i128 - 1 && dt.bits() == 64 {
                // 2^63 does not fit i64's positive range, but wraps to the same bits.
                alu(Op::MUL, dt, &[a, 1u64 << 63])
            } else {
                alu(Op::MUL, dt, &[a, pow])
            };
            if l != mul {
                return TestResult::error(format!("SHL by {k}: {l:?} vs a*2^k {mul:?}"));
            }
            if dt.is_unsigned_int() && r != Ok(wrap_i128(dt, int(dt, a) >> k)) {
                return TestResult::error("unsigned SHR is not a division");
            }
            TestResult::passed()
        }
        check(prop as fn(IntPair) -> TestResult);
    }

    #[test]
    fn arbitrary_values_cover_the_edges() {
        let mut rng = crate::inputs::SplitMix64(0xed6e);
        let mut nan = 0;
        let mut extremes = 0;
        for _ in 0..2000 {
            let words: Vec<u64> = (0..8).map(|_| rng.next_u64()).collect();
            let v = Value::draw(&mut Tape::new(&words));
            assert_eq!(v.bits & !mask(v.dtype), 0, "{v:?}");
            nan += is_nan(v.dtype, v.bits) as u32;
            if let Some((lo, hi)) = v.dtype.int_range() {
                let x = int(v.dtype, v.bits);
                extremes += (x == lo || x == hi) as u32;
            }
        }
        assert!(
            nan > 20 && extremes > 20,
            "{nan} NaNs, {extremes} int extremes"
        );
        // Shrinking reaches 0.
        let v = Value {
            dtype: Int32,
            bits: wrap_i128(Int32, -1000),
        };
        assert!(v.shrink().any(|s| s.bits == 0));
    }
}
