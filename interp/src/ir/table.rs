//! The op table: one [`OpInfo`] per ALU op, the single place an ALU op's static facts are
//! spelled (arity, dtype rule, reduction identity, algebraic flags, undefined behaviour, the
//! value-range rule, the C spelling). The verifier, the kernel checker, the evaluator's
//! reductions, the bounds, the compiler's value ranges, pattern matching and renderer, and the
//! conformance generators read it; `interp/tests/op_table.rs` walks it against each of them and
//! `corpus/gen/ops.jsonl` is its dump for the Python generators.
//!
//! The *meaning* of an op (its exact value on bits) stays in `scalar::alu`; this table says only
//! what holds for every element. See "Adding an op" in ARCHITECTURE.md.

use std::fmt;

use super::{DType, Op};
use crate::scalar::Ub;

/// How an ALU op's operand dtypes relate to each other and to its result.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DTypeRule {
    /// Every operand has one dtype; the result has it too.
    Same,
    /// Every operand has one dtype; the result is bool.
    Comparison,
    /// `src[0]` is bool; the branches share one dtype; the result has it.
    Where,
}

/// The dtype classes an op's operands (for WHERE: its branches) may have.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Classes {
    pub bool: bool,
    pub int: bool,
    pub float: bool,
}

impl Classes {
    pub const ANY: Classes = Classes {
        bool: true,
        int: true,
        float: true,
    };
    pub const FLOAT: Classes = Classes {
        bool: false,
        int: false,
        float: true,
    };
    pub const INT: Classes = Classes {
        bool: false,
        int: true,
        float: false,
    };
    pub const INT_BOOL: Classes = Classes {
        bool: true,
        int: true,
        float: false,
    };
    pub const INT_FLOAT: Classes = Classes {
        bool: false,
        int: true,
        float: true,
    };

    /// True when a value of `dt` may be an operand (void never is).
    pub fn allows(self, dt: DType) -> bool {
        (self.bool && dt.is_bool()) || (self.int && dt.is_int()) || (self.float && dt.is_float())
    }
}

/// Where an algebraic law holds *bit-exactly* (on every operand, NaN payloads and −0 included).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exactness {
    Never,
    /// On bool and integer operands only (integers wrap, so the law is exact; float rounding or
    /// float MAX's operand-bits rule breaks it).
    IntOnly,
    /// On every dtype the op accepts.
    Always,
}

impl Exactness {
    pub fn holds_for(self, dt: DType) -> bool {
        match self {
            Exactness::Never => false,
            Exactness::IntOnly => !dt.is_float(),
            Exactness::Always => true,
        }
    }
}

/// The start value of a reduction over the op (what an empty reduction gives).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceIdentity {
    /// 0 (bits 0 in every dtype: +0.0 for floats).
    Zero,
    /// 1 (1.0 for floats).
    One,
    /// The dtype's lowest value: −inf, −448 for fp8e4m3 (no infinity), INT_MIN, 0 unsigned.
    Lowest,
}

/// The value-range rule of an op: how the interval of its result follows from its operands'.
/// The compiler's integer ranges (`compiler::rewrite::range`) and the oracle's float bounds
/// (`bounds`) each implement the rules that make sense for them and treat the rest as unknown.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RangeRule {
    Add,
    Sub,
    Mul,
    MulAcc,
    Neg,
    Max,
    /// Integers: the operand; floats: truncation of the interval.
    Trunc,
    /// C (truncating) integer division.
    TruncDiv,
    /// Python (floor) integer division.
    FloorDiv,
    TruncMod,
    FloorMod,
    Shl,
    Shr,
    And,
    Or,
    Xor,
    CmpLt,
    CmpNe,
    CmpEq,
    Where,
    /// Float division.
    FDiv,
    Reciprocal,
    Sqrt,
    Exp2,
    Log2,
    Sin,
    /// No rule: the result's range is unknown (the dtype's full range).
    Opaque,
}

/// How a C-like renderer spells the op (`compiler::render::c` reads it).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CSpelling {
    /// C's infix operator `a SYM b` (ints: computed in the unsigned type where it can
    /// overflow; comparisons give `uint8_t`).
    Infix(&'static str),
    /// A C math function on the float type, with an `f` suffix for float32 (`sqrt`, `fma`).
    CMath(&'static str),
    /// A prelude helper called on doubles and rounded to the dtype (`uk_exp2`, `uk_pow`).
    Libm(&'static str),
    /// Written specially by the renderer (NEG, MAX, WHERE, RECIPROCAL).
    Custom,
}

/// Everything static about one ALU op.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OpInfo {
    #[serde(rename = "name")]
    pub op: Op,
    /// Number of sources.
    pub arity: u8,
    pub dtype_rule: DTypeRule,
    /// The operand dtype classes allowed (for WHERE: the branches').
    pub classes: Classes,
    /// `Some` for the ops REDUCE and ALLREDUCE accept (tinygrad's `GroupOp.Reduce`).
    pub reduce: Option<ReduceIdentity>,
    pub commutative: Exactness,
    pub associative: Exactness,
    /// The undefined behaviour the op can raise (`scalar::alu` returns exactly these).
    pub ub: &'static [Ub],
    pub range: RangeRule,
    /// The op rounds a float result: a backend's ULP budget may name it (`allowances`).
    pub ulp_budget: bool,
    pub c: CSpelling,
    /// The name of the prelude's narrow-float helper `uk_sf_<name>` (fp8, float16, bfloat16).
    pub c_small_float: Option<&'static str>,
}

impl OpInfo {
    pub fn is_comparison(&self) -> bool {
        self.dtype_rule == DTypeRule::Comparison
    }

    /// The index of the first operand that carries the op's dtype (1 for WHERE).
    pub fn first_operand(&self) -> usize {
        (self.dtype_rule == DTypeRule::Where) as usize
    }

    /// The result dtype for operands of dtype `dt` (for WHERE: the branches').
    pub fn result_dtype(&self, dt: DType) -> DType {
        if self.is_comparison() {
            DType::Bool
        } else {
            dt
        }
    }

    pub fn can_raise(&self, ub: Ub) -> bool {
        self.ub.contains(&ub)
    }
}

const DIV_UB: &[Ub] = &[Ub::DivByZero, Ub::DivOverflow];
const SHIFT_UB: &[Ub] = &[Ub::ShiftOutOfRange];

/// A plain entry: `Same` dtypes, no reduction, no algebraic laws, no UB, custom spelling.
const fn base(op: Op, arity: u8, classes: Classes, range: RangeRule) -> OpInfo {
    OpInfo {
        op,
        arity,
        dtype_rule: DTypeRule::Same,
        classes,
        reduce: None,
        commutative: Exactness::Never,
        associative: Exactness::Never,
        ub: &[],
        range,
        ulp_budget: false,
        c: CSpelling::Custom,
        c_small_float: None,
    }
}

/// A float-only op that rounds its result.
const fn float_op(op: Op, arity: u8, range: RangeRule, c: CSpelling, sf: &'static str) -> OpInfo {
    OpInfo {
        ulp_budget: true,
        c,
        c_small_float: Some(sf),
        ..base(op, arity, Classes::FLOAT, range)
    }
}

const fn int_div(op: Op, range: RangeRule) -> OpInfo {
    OpInfo {
        ub: DIV_UB,
        ..base(op, 2, Classes::INT, range)
    }
}

const fn shift(op: Op, range: RangeRule) -> OpInfo {
    OpInfo {
        ub: SHIFT_UB,
        ..base(op, 2, Classes::INT, range)
    }
}

const fn bitwise(op: Op, range: RangeRule, sym: &'static str) -> OpInfo {
    OpInfo {
        commutative: Exactness::Always,
        associative: Exactness::Always,
        c: CSpelling::Infix(sym),
        ..base(op, 2, Classes::INT_BOOL, range)
    }
}

const fn comparison(op: Op, range: RangeRule, sym: &'static str, comm: Exactness) -> OpInfo {
    OpInfo {
        dtype_rule: DTypeRule::Comparison,
        commutative: comm,
        c: CSpelling::Infix(sym),
        ..base(op, 2, Classes::ANY, range)
    }
}

/// Every ALU op, in [`Op::ALL`] order.
pub static TABLE: &[OpInfo] = &[
    // ---- unary ----
    float_op(
        Op::EXP2,
        1,
        RangeRule::Exp2,
        CSpelling::Libm("uk_exp2"),
        "exp2",
    ),
    float_op(
        Op::LOG2,
        1,
        RangeRule::Log2,
        CSpelling::Libm("uk_log2"),
        "log2",
    ),
    float_op(Op::SIN, 1, RangeRule::Sin, CSpelling::Libm("uk_sin"), "sin"),
    float_op(
        Op::SQRT,
        1,
        RangeRule::Sqrt,
        CSpelling::CMath("sqrt"),
        "sqrt",
    ),
    float_op(
        Op::RECIPROCAL,
        1,
        RangeRule::Reciprocal,
        CSpelling::Custom,
        "recip",
    ),
    OpInfo {
        c_small_float: Some("neg"),
        ..base(Op::NEG, 1, Classes::ANY, RangeRule::Neg)
    },
    OpInfo {
        ulp_budget: true,
        c: CSpelling::CMath("trunc"),
        c_small_float: Some("trunc"),
        ..base(Op::TRUNC, 1, Classes::ANY, RangeRule::Trunc)
    },
    // ---- binary ----
    OpInfo {
        reduce: Some(ReduceIdentity::Zero),
        commutative: Exactness::Always,
        associative: Exactness::IntOnly,
        ulp_budget: true,
        c: CSpelling::Infix("+"),
        c_small_float: Some("add"),
        ..base(Op::ADD, 2, Classes::ANY, RangeRule::Add)
    },
    OpInfo {
        reduce: Some(ReduceIdentity::One),
        commutative: Exactness::Always,
        associative: Exactness::IntOnly,
        ulp_budget: true,
        c: CSpelling::Infix("*"),
        c_small_float: Some("mul"),
        ..base(Op::MUL, 2, Classes::ANY, RangeRule::Mul)
    },
    OpInfo {
        ulp_budget: true,
        c: CSpelling::Infix("-"),
        c_small_float: Some("sub"),
        ..base(Op::SUB, 2, Classes::ANY, RangeRule::Sub)
    },
    float_op(Op::FDIV, 2, RangeRule::FDiv, CSpelling::Infix("/"), "fdiv"),
    float_op(
        Op::POW,
        2,
        RangeRule::Opaque,
        CSpelling::Libm("uk_pow"),
        "pow",
    ),
    int_div(Op::CDIV, RangeRule::TruncDiv),
    int_div(Op::CMOD, RangeRule::TruncMod),
    int_div(Op::FLOORDIV, RangeRule::FloorDiv),
    int_div(Op::FLOORMOD, RangeRule::FloorMod),
    OpInfo {
        reduce: Some(ReduceIdentity::Lowest),
        // Float MAX returns an operand's bits (`a < b ? b : a`): max(+0, −0) is +0 but
        // max(−0, +0) is −0, so neither law is bit-exact on floats.
        commutative: Exactness::IntOnly,
        associative: Exactness::IntOnly,
        ..base(Op::MAX, 2, Classes::ANY, RangeRule::Max)
    },
    shift(Op::SHL, RangeRule::Shl),
    shift(Op::SHR, RangeRule::Shr),
    bitwise(Op::AND, RangeRule::And, "&"),
    bitwise(Op::OR, RangeRule::Or, "|"),
    bitwise(Op::XOR, RangeRule::Xor, "^"),
    comparison(Op::CMPLT, RangeRule::CmpLt, "<", Exactness::Never),
    comparison(Op::CMPNE, RangeRule::CmpNe, "!=", Exactness::Always),
    comparison(Op::CMPEQ, RangeRule::CmpEq, "==", Exactness::Always),
    // ---- ternary ----
    OpInfo {
        dtype_rule: DTypeRule::Where,
        ..base(Op::WHERE, 3, Classes::ANY, RangeRule::Where)
    },
    OpInfo {
        ulp_budget: true,
        c: CSpelling::CMath("fma"),
        c_small_float: Some("mulacc"),
        ..base(Op::MULACC, 3, Classes::INT_FLOAT, RangeRule::MulAcc)
    },
    // The test-only op of the "Adding an op" recipe: |a − b| on integers, wrapping.
    #[cfg(feature = "test-op")]
    OpInfo {
        commutative: Exactness::Always,
        ..base(Op::ABSDIFF, 2, Classes::INT, RangeRule::Opaque)
    },
];

const N_OPS: usize = Op::ALL.len();

const fn build_index() -> [u8; N_OPS] {
    let mut idx = [u8::MAX; N_OPS];
    let mut i = 0;
    while i < TABLE.len() {
        idx[TABLE[i].op as usize] = i as u8;
        i += 1;
    }
    idx
}

static INDEX: [u8; N_OPS] = build_index();

/// The table entry of `op` (`None` for ops that are not ALU ops).
pub fn info(op: Op) -> Option<&'static OpInfo> {
    match INDEX.get(op as usize) {
        Some(&i) if i != u8::MAX => TABLE.get(i as usize),
        _ => None,
    }
}

/// Every ALU op, in [`Op::ALL`] order.
pub fn alu_ops() -> impl Iterator<Item = Op> {
    TABLE.iter().map(|i| i.op)
}

/// The ALU ops whose entry satisfies `pred`, in [`Op::ALL`] order.
pub fn ops_where(pred: impl Fn(&OpInfo) -> bool) -> Vec<Op> {
    TABLE.iter().filter(|i| pred(i)).map(|i| i.op).collect()
}

impl Op {
    /// The op's table entry (`None` for ops that are not ALU ops).
    pub fn info(self) -> Option<&'static OpInfo> {
        info(self)
    }
}

/// Why an ALU op's operand or result dtypes break its [`DTypeRule`] or [`Classes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DTypeError {
    /// Two operands (branches, for WHERE) differ; `index` is the operand's position among them.
    OperandsDiffer {
        first: DType,
        other: DType,
        index: usize,
    },
    WhereCondition(DType),
    Result {
        want: DType,
        got: DType,
    },
    /// The operand dtype's class is not allowed.
    Class {
        op: Op,
        classes: Classes,
        dt: DType,
    },
}

impl fmt::Display for DTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DTypeError::OperandsDiffer {
                first,
                other,
                index,
            } => write!(
                f,
                "operand dtypes differ: {first} and {other} (operand {index}); CAST first"
            ),
            DTypeError::WhereCondition(dt) => write!(f, "WHERE condition must be bool, got {dt}"),
            DTypeError::Result { want, got } => {
                write!(f, "result dtype must be {want}, got {got}")
            }
            DTypeError::Class { op, classes, dt } => match classes {
                Classes::FLOAT => write!(f, "{op} needs a float dtype, got {dt}"),
                Classes::INT => write!(f, "{op} needs an integer dtype, got {dt}"),
                Classes::INT_BOOL => write!(f, "{op} needs an integer or bool dtype, got {dt}"),
                _ => write!(f, "{op} on {dt}"),
            },
        }
    }
}

/// The dtype rule of ALU op `info` on `srcs` (every source's dtype, arity already checked,
/// none void) with result dtype `result`: the one check the tensor verifier and the kernel
/// checker share.
pub fn check_dtypes(info: &OpInfo, srcs: &[DType], result: DType) -> Result<(), DTypeError> {
    let operands = srcs.get(info.first_operand()..).unwrap_or(&[]);
    let Some(&dt) = operands.first() else {
        return Ok(());
    };
    if let Some((index, &other)) = operands.iter().enumerate().find(|(_, o)| **o != dt) {
        return Err(DTypeError::OperandsDiffer {
            first: dt,
            other,
            index,
        });
    }
    if info.dtype_rule == DTypeRule::Where {
        if let Some(&c) = srcs.first() {
            if c != DType::Bool {
                return Err(DTypeError::WhereCondition(c));
            }
        }
    }
    let want = info.result_dtype(dt);
    if result != want {
        return Err(DTypeError::Result { want, got: result });
    }
    if !info.classes.allows(dt) {
        return Err(DTypeError::Class {
            op: info.op,
            classes: info.classes,
            dt,
        });
    }
    Ok(())
}

/// The start value of a reduction with `op` in dtype `dt` (what an empty reduction gives);
/// an op without a [`ReduceIdentity`] gets the dtype's lowest value.
pub fn reduce_identity(op: Op, dt: DType) -> u64 {
    use crate::scalar::round::from_f64;
    match info(op).and_then(|i| i.reduce) {
        Some(ReduceIdentity::Zero) => 0,
        Some(ReduceIdentity::One) => {
            if dt.is_float() {
                from_f64(dt, 1.0)
            } else {
                1
            }
        }
        Some(ReduceIdentity::Lowest) | None => {
            if let Some(f) = dt.float_format() {
                if f.has_inf {
                    from_f64(dt, f64::NEG_INFINITY)
                } else {
                    // E4M3 has no infinity: its lowest value is -448.
                    from_f64(dt, -448.0)
                }
            } else if dt.is_signed_int() {
                1u64 << (dt.bits() - 1)
            } else {
                0
            }
        }
    }
}

/// The table as JSON Lines, one op per line (what `corpus/gen/ops.jsonl` holds; not `.json`,
/// which the corpus walk would take for a case): deterministic.
pub fn to_jsonl() -> String {
    let mut s = String::new();
    for info in TABLE {
        s.push_str(&serde_json::to_string(info).unwrap_or_default());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_op_order_and_indexed() {
        let order: Vec<Op> = Op::ALL
            .iter()
            .copied()
            .filter(|o| info(*o).is_some())
            .collect();
        assert_eq!(order, alu_ops().collect::<Vec<_>>());
        for e in TABLE {
            assert_eq!(info(e.op), Some(e));
            assert!((1..=3).contains(&e.arity), "{}", e.op);
        }
        assert!(info(Op::STORE).is_none() && info(Op::CAST).is_none());
    }
}
