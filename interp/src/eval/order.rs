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
//! * `{"chunks_of_split": [c, k]}` — c contiguous chunks of s = n/c elements (the verifier
//!   requires c to divide n); chunk j is the `split(k)` fold of x_{j·s} … x_{j·s+s−1} (its
//!   accumulators indexed by the position within the chunk), and the chunk results P_j fold
//!   sequentially from `e`: `((e ⊕ P₀) ⊕ P₁) ⊕ … ⊕ P_{c−1}`.

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

fn sequential(
    op: Op,
    dt: DType,
    lo: usize,
    hi: usize,
    get: &impl Fn(usize) -> Elem,
) -> Result<Elem, Ub> {
    let mut acc = Elem::Bits(reduce_identity(op, dt));
    for r in lo..hi {
        acc = apply(op, dt, acc, get(r))?;
    }
    Ok(acc)
}

/// `split(k)` over x_lo … x_{hi−1}: x_r goes to accumulator (r − lo) mod k.
fn split(
    op: Op,
    dt: DType,
    lo: usize,
    hi: usize,
    k: usize,
    get: &impl Fn(usize) -> Elem,
) -> Result<Elem, Ub> {
    let k = k.max(1);
    let mut accs = vec![Elem::Bits(reduce_identity(op, dt)); k];
    for r in lo..hi {
        let j = (r - lo) % k;
        accs[j] = apply(op, dt, accs[j], get(r))?;
    }
    combine(op, dt, &accs)
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
    fold_with(op, dt, xs.len(), |r| xs[r], order)
}

/// Folds the `n` elements `get(0)`, …, `get(n − 1)` with `op` in `order` (one output
/// element), without gathering them into a list.
pub fn fold_with(
    op: Op,
    dt: DType,
    n: usize,
    get: impl Fn(usize) -> Elem,
    order: &ReduceOrder,
) -> Result<Elem, Ub> {
    match *order {
        ReduceOrder::Sequential => sequential(op, dt, 0, n, &get),
        ReduceOrder::Split(k) => split(op, dt, 0, n, k, &get),
        ReduceOrder::Chunks(k) => {
            let k = k.max(1);
            let c = n.div_ceil(k).max(1);
            let parts = (0..k)
                .map(|j| {
                    let lo = (j * c).min(n);
                    let hi = ((j + 1) * c).min(n);
                    sequential(op, dt, lo, hi, &get)
                })
                .collect::<Result<Vec<_>, _>>()?;
            combine(op, dt, &parts)
        }
        ReduceOrder::Tree(leaf) => tree(op, dt, 0, n, leaf.max(1), &get),
        ReduceOrder::ChunksOfSplit(c, k) => {
            // c divides n in a verified graph; ⌈n/c⌉ keeps this total (every element in
            // exactly one chunk) for any other input.
            let c = c.max(1);
            let s = n.div_ceil(c);
            let mut acc = Elem::Bits(reduce_identity(op, dt));
            for j in 0..c {
                let lo = (j * s).min(n);
                let hi = ((j + 1) * s).min(n);
                let part = split(op, dt, lo, hi, k, &get)?;
                acc = apply(op, dt, acc, part)?;
            }
            Ok(acc)
        }
    }
}

fn tree(
    op: Op,
    dt: DType,
    lo: usize,
    hi: usize,
    leaf: usize,
    get: &impl Fn(usize) -> Elem,
) -> Result<Elem, Ub> {
    if hi - lo <= leaf {
        return sequential(op, dt, lo, hi, get);
    }
    let mid = lo + (hi - lo) / 2;
    let a = tree(op, dt, lo, mid, leaf, get)?;
    let b = tree(op, dt, mid, hi, leaf, get)?;
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
