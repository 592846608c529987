//! Elementwise ops. Operands broadcast like numpy (see [`Tensor::expand`]); a 0-d operand
//! (a literal becomes a bare CONST) is combined as it is, since ALU ops accept `[]`
//! operands. Operand dtypes must be equal (no promotion lattice: CAST explicitly); a
//! literal commits to its partner's dtype.

use super::{Operand, Scalar, Tensor};
use crate::error::Result;
use crate::ir::{Arg, DType, Op};

/// numpy's broadcast of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let n = a.len().max(b.len());
    let get = |s: &[usize], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(format!(
                "shapes {a:?} and {b:?} do not broadcast (axis {i}: {x} vs {y})"
            )),
        })
        .collect()
}

impl Tensor {
    /// An ALU node over `srcs` after broadcasting them to one shape and layout.
    fn alu(op: Op, mut srcs: Vec<Tensor>) -> Result<Tensor> {
        let first = srcs[0].clone();
        let mut target: Option<Vec<usize>> = None;
        for t in &srcs {
            if t.ndim() > 0 {
                target = Some(match target {
                    None => t.shape(),
                    Some(s) => broadcast_shape(&s, &t.shape()).map_err(|r| first.err(op, r))?,
                });
            }
        }
        if let Some(target) = &target {
            for t in srcs.iter_mut() {
                if t.ndim() > 0 {
                    *t = t.expand(target)?;
                }
            }
        }
        let axis = Tensor::align_layouts(op, &mut srcs)?;
        let dt = if op == Op::WHERE {
            srcs[1].dtype()
        } else {
            srcs[0].dtype()
        };
        let out = if op.is_comparison() { DType::Bool } else { dt };
        first.emit(
            op,
            out,
            srcs.iter().map(|t| t.id).collect(),
            Arg::None,
            axis,
        )
    }

    fn same_dtype(&self, op: Op, other: &Tensor) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(self.err(
                op,
                format!(
                    "dtype mismatch: {} and {} (no implicit promotion: cast one side explicitly)",
                    self.dtype(),
                    other.dtype()
                ),
            ));
        }
        Ok(())
    }

    fn binop(&self, op: Op, other: Operand) -> Result<Tensor> {
        let o = self.operand(other, self.dtype())?;
        self.same_dtype(op, &o)?;
        Self::alu(op, vec![self.clone(), o])
    }

    /// `op(other, self)`: the operand order reversed.
    fn binop_rev(&self, op: Op, other: Operand) -> Result<Tensor> {
        let o = self.operand(other, self.dtype())?;
        self.same_dtype(op, &o)?;
        Self::alu(op, vec![o, self.clone()])
    }

    fn unop(&self, op: Op) -> Result<Tensor> {
        Self::alu(op, vec![self.clone()])
    }

    /// Int and bool become float32 (tinygrad's `least_upper_float` for ops that need a float).
    fn floatify(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            Ok(self.clone())
        } else {
            self.cast(DType::Float32)
        }
    }

    fn float_binop(&self, op: Op, other: Operand) -> Result<Tensor> {
        let a = self.floatify()?;
        let b = a.operand(other, a.dtype())?.floatify()?;
        a.same_dtype(op, &b)?;
        Self::alu(op, vec![a, b])
    }

    /// All ones of the dtype: bool true, int -1 (every bit set).
    fn all_ones(&self) -> Scalar {
        let b = self.dtype().bits();
        Scalar::Bits(if b >= 64 { u64::MAX } else { (1u64 << b) - 1 })
    }

    /// An order-reversing bijection: `-x` for floats, `~x` for ints and bool.
    pub(super) fn order_reverse(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.unop(Op::NEG)
        } else {
            self.binop(Op::XOR, self.all_ones().into())
        }
    }

    pub fn add(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::ADD, other.into())
    }

    /// SUB (tinygrad emits `a + b*-1`: the same value).
    pub fn sub(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::SUB, other.into())
    }

    pub fn mul(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::MUL, other.into())
    }

    /// True division as tinygrad lowers it: `MUL(a, RECIPROCAL(b))` (two roundings); ints
    /// and bool are cast to float32 first.
    pub fn div(&self, other: impl Into<Operand>) -> Result<Tensor> {
        let a = self.floatify()?;
        let b = a.operand(other.into(), a.dtype())?.floatify()?;
        a.same_dtype(Op::MUL, &b)?;
        a.mul(&b.reciprocal()?)
    }

    /// Correctly rounded division: one FDIV (ints and bool cast to float32 first).
    pub fn fdiv(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.float_binop(Op::FDIV, other.into())
    }

    /// POW (ints and bool cast to float32 first). tinygrad's `pow` is built from
    /// EXP2/LOG2 and special cases; this is the IR's exact op.
    pub fn pow(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.float_binop(Op::POW, other.into())
    }

    /// Elementwise MAX.
    pub fn maximum(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::MAX, other.into())
    }

    /// Elementwise minimum as tinygrad builds it: `-max(-a, -b)` (floats, with NEG),
    /// `~max(~a, ~b)` (ints and bool, with XOR of all ones).
    pub fn minimum(&self, other: impl Into<Operand>) -> Result<Tensor> {
        let o = self.operand(other.into(), self.dtype())?;
        self.same_dtype(Op::MAX, &o)?;
        self.order_reverse()?
            .maximum(&o.order_reverse()?)?
            .order_reverse()
    }

    /// `a < b` (CMPLT).
    pub fn lt(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::CMPLT, other.into())
    }

    pub fn cmplt(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.lt(other)
    }

    /// `a > b` as `CMPLT(b, a)`.
    pub fn gt(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop_rev(Op::CMPLT, other.into())
    }

    /// `a >= b` as tinygrad: `NOT(CMPLT(a, b))` (true when either side is NaN).
    pub fn ge(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.lt(other)?.not()
    }

    /// `a <= b` as `NOT(CMPLT(b, a))` (true when either side is NaN).
    pub fn le(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.gt(other)?.not()
    }

    /// CMPEQ (tinygrad emits `NOT(CMPNE)`: the same value, NaN included).
    pub fn eq(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::CMPEQ, other.into())
    }

    pub fn ne(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::CMPNE, other.into())
    }

    /// Floor division (FLOORDIV, ints only; Python's `//`).
    pub fn floordiv(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::FLOORDIV, other.into())
    }

    /// Alias of [`Tensor::floordiv`] (integer `//`).
    pub fn idiv(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.floordiv(other)
    }

    /// Floor modulo (FLOORMOD, ints only; Python's `%`).
    pub fn floormod(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::FLOORMOD, other.into())
    }

    /// Truncating division (CDIV, ints only; tinygrad's `div(rounding_mode="trunc")`).
    pub fn cdiv(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::CDIV, other.into())
    }

    /// C remainder (CMOD, ints only; tinygrad's `fmod`).
    pub fn cmod(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::CMOD, other.into())
    }

    pub fn shl(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::SHL, other.into())
    }

    pub fn shr(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::SHR, other.into())
    }

    pub fn and(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::AND, other.into())
    }

    pub fn or(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::OR, other.into())
    }

    pub fn xor(&self, other: impl Into<Operand>) -> Result<Tensor> {
        self.binop(Op::XOR, other.into())
    }

    /// `self * b + c` with one rounding (MULACC).
    pub fn mulacc(&self, b: impl Into<Operand>, c: impl Into<Operand>) -> Result<Tensor> {
        let b = self.operand(b.into(), self.dtype())?;
        let c = self.operand(c.into(), self.dtype())?;
        self.same_dtype(Op::MULACC, &b)?;
        self.same_dtype(Op::MULACC, &c)?;
        Self::alu(Op::MULACC, vec![self.clone(), b, c])
    }

    /// `self ? a : b` (WHERE; `self` must be bool). A literal branch takes the other
    /// branch's dtype (both literals: the first literal's default dtype).
    pub fn where_(&self, a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = (a.into(), b.into());
        let dt = match (&a, &b) {
            (Operand::Tensor(t), _) | (_, Operand::Tensor(t)) => t.dtype(),
            (Operand::Scalar(s), _) => s.default_dtype(),
        };
        let a = self.operand(a, dt)?;
        let b = self.operand(b, dt)?;
        a.same_dtype(Op::WHERE, &b)?;
        Self::alu(Op::WHERE, vec![self.clone(), a, b])
    }

    /// `-x`: NEG (tinygrad: `x * -1`, the same value); bool: `CMPNE(x, true)` (logical not).
    pub fn neg(&self) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            self.binop(Op::CMPNE, true.into())
        } else {
            self.unop(Op::NEG)
        }
    }

    /// Logical not of a bool (`CMPNE(x, true)`); bitwise not of an int (`XOR(x, -1)`).
    pub fn not(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::Bool => self.binop(Op::CMPNE, true.into()),
            dt if dt.is_int() => self.order_reverse(),
            dt => Err(self.err(
                Op::XOR,
                format!("not() needs a bool or int tensor, got {dt}"),
            )),
        }
    }

    pub fn exp2(&self) -> Result<Tensor> {
        self.floatify()?.unop(Op::EXP2)
    }

    pub fn log2(&self) -> Result<Tensor> {
        self.floatify()?.unop(Op::LOG2)
    }

    pub fn sin(&self) -> Result<Tensor> {
        self.floatify()?.unop(Op::SIN)
    }

    pub fn sqrt(&self) -> Result<Tensor> {
        self.floatify()?.unop(Op::SQRT)
    }

    pub fn reciprocal(&self) -> Result<Tensor> {
        self.floatify()?.unop(Op::RECIPROCAL)
    }

    /// TRUNC (round toward zero). Ints are already integral: no node.
    pub fn trunc(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.unop(Op::TRUNC)
        } else {
            Ok(self.clone())
        }
    }

    /// CAST to `dtype` (no node when the dtype is unchanged).
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.emit(Op::CAST, dtype, vec![self.id], Arg::None, self.axis)
    }

    /// BITCAST to a dtype of the same width (no node when the dtype is unchanged).
    pub fn bitcast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.emit(Op::BITCAST, dtype, vec![self.id], Arg::None, self.axis)
    }
}
