//! Declared reduction orders: the oracle side of "reassociation that stays exact".
//!
//! When a compiler splits a reduction for speed, it can record the order it used; the oracle
//! then replays that exact order and the backend's result is compared **bit for bit** with the
//! replay (and, separately, within the reassociation bound of the canonical order). The planned
//! IR field is the optional third element of REDUCE's arg: `["ADD", 1, {"split": 4}]`
//! (`Arg::Reduce::order`). The tensor oracle's REDUCE folds with [`fold`]; [`reduce_with_order`]
//! evaluates one REDUCE on a value under any order.
//!
//! Orders, over the reduced elements x₀ … x_{n−1} (row-major over the reduced axes, as the
//! canonical fold sees them), with `⊕` the reduce op and `e` its identity:
//!
//! * `sequential` — `((e ⊕ x₀) ⊕ x₁) ⊕ …`: the canonical order (docs/ir.md).
//! * `{"split": k}` — k interleaved accumulators: `acc_j` folds x_r for r ≡ j (mod k) in
//!   increasing r, each from `e`; the result is `((acc₀ ⊕ acc₁) ⊕ …) ⊕ acc_{k−1}`.
//! * `{"chunks": k}` — k contiguous blocks of ⌈n/k⌉ elements (the last ones shorter or empty),
//!   each folded from `e`; block results combined left to right from block 0 (split-K).
//! * `{"tree": leaf}` — pairwise: `T(lo, hi)` is the sequential fold from `e` when
//!   `hi − lo ≤ leaf`, else `T(lo, mid) ⊕ T(mid, hi)` with `mid = lo + ⌊(hi − lo)/2⌋`.

use crate::eval::{reduce_identity, Data, Elem, Value};
pub use crate::ir::ReduceOrder;
use crate::ir::{DType, Op};
use crate::scalar::{self, Ub};

fn apply(op: Op, dt: DType, a: Elem, b: Elem) -> Result<Elem, Ub> {
    match (a, b) {
        (Elem::Bits(x), Elem::Bits(y)) => scalar::alu(op, dt, &[x, y]).map(Elem::Bits),
        (Elem::Bits(_), poison) | (poison, _) => Ok(poison),
    }
}

fn sequential(op: Op, dt: DType, xs: &[Elem]) -> Result<Elem, Ub> {
    let mut acc = Elem::Bits(reduce_identity(op, dt));
    for &x in xs {
        acc = apply(op, dt, acc, x)?;
    }
    Ok(acc)
}

fn combine(op: Op, dt: DType, parts: &[Elem]) -> Result<Elem, Ub> {
    let mut acc = parts[0];
    for &p in &parts[1..] {
        acc = apply(op, dt, acc, p)?;
    }
    Ok(acc)
}

/// Folds `xs` with `op` in `order` (one output element).
pub fn fold(op: Op, dt: DType, xs: &[Elem], order: &ReduceOrder) -> Result<Elem, Ub> {
    match *order {
        ReduceOrder::Sequential => sequential(op, dt, xs),
        ReduceOrder::Split(k) => {
            let k = k.max(1);
            let mut accs = vec![Elem::Bits(reduce_identity(op, dt)); k];
            for (r, &x) in xs.iter().enumerate() {
                accs[r % k] = apply(op, dt, accs[r % k], x)?;
            }
            combine(op, dt, &accs)
        }
        ReduceOrder::Chunks(k) => {
            let k = k.max(1);
            let c = xs.len().div_ceil(k).max(1);
            let parts = (0..k)
                .map(|j| {
                    let lo = (j * c).min(xs.len());
                    let hi = ((j + 1) * c).min(xs.len());
                    sequential(op, dt, &xs[lo..hi])
                })
                .collect::<Result<Vec<_>, _>>()?;
            combine(op, dt, &parts)
        }
        ReduceOrder::Tree(leaf) => tree(op, dt, xs, leaf.max(1)),
    }
}

fn tree(op: Op, dt: DType, xs: &[Elem], leaf: usize) -> Result<Elem, Ub> {
    if xs.len() <= leaf {
        return sequential(op, dt, xs);
    }
    let mid = xs.len() / 2;
    let a = tree(op, dt, &xs[..mid], leaf)?;
    let b = tree(op, dt, &xs[mid..], leaf)?;
    apply(op, dt, a, b)
}

/// REDUCE of the first `axes` axes of `x` with `op` in `order`: the value the oracle's REDUCE
/// gives when the order is `sequential`, and the replay of a declared split otherwise.
pub fn reduce_with_order(op: Op, axes: usize, x: &Value, order: &ReduceOrder) -> Result<Value, Ub> {
    let axes = axes.min(x.shape.len());
    let out_shape = x.shape[axes..].to_vec();
    let out_n: usize = out_shape.iter().product();
    let red_n: usize = x.shape[..axes].iter().product();
    let dt = x.dtype;
    let data = x.data.map(|comp| {
        let mut xs = Vec::with_capacity(red_n);
        (0..out_n)
            .map(|o| {
                xs.clear();
                xs.extend((0..red_n).map(|r| comp[r * out_n + o]));
                fold(op, dt, &xs, order)
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(Value {
        dtype: dt,
        shape: out_shape,
        data,
    })
}

/// A value's elements as one flat list per component (helper for callers building values).
pub fn single(dtype: DType, shape: Vec<usize>, bits: impl IntoIterator<Item = u64>) -> Value {
    Value {
        dtype,
        shape,
        data: Data::Single(bits.into_iter().map(Elem::Bits).collect()),
    }
}
