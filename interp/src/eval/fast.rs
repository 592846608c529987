//! Fast paths of the evaluator, each provably bit-identical to the exact path.

use super::value::Column;
use crate::ir::{DType, Op, ReduceOrder};

/// An elementwise op on poison-free operands, when a fast path exists.
pub(super) fn alu(
    _op: Op,
    _operand_dt: DType,
    _out_dt: DType,
    _cols: &[&Column],
    _strides: &[usize],
    _len: usize,
) -> Option<Column> {
    None
}

/// A reduction, when a fast path exists.
pub(super) fn reduce(
    _op: Op,
    _dt: DType,
    _comp: &Column,
    _out_n: usize,
    _red_n: usize,
    _order: &ReduceOrder,
) -> Option<Column> {
    None
}
