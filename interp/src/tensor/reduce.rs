//! Reductions. REDUCE reduces the first n axes, so the reduced axes are permuted to the
//! front first (in increasing order: the fold runs in row-major order of the original
//! tensor); `keepdim` RESHAPEs the result back to the input's rank.

use super::{check_axes, Tensor};
use crate::error::Result;
use crate::ir::{Arg, DType, Op, ReduceOrder};

impl Tensor {
    /// Reduces `axes` with `op` (ADD, MUL or MAX). On a tensor sharded on one of `axes`:
    /// a local REDUCE on every device then `ALLREDUCE(op, devices)`; the result is
    /// replicated. Otherwise each shard is reduced and the sharded axis renumbered.
    /// Empty `axes`: no reduction (the tensor itself).
    pub fn reduce(&self, op: Op, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        if !op.is_reduce_op() {
            return Err(self.err(
                Op::REDUCE,
                format!("REDUCE op must be ADD, MUL or MAX, got {op}"),
            ));
        }
        check_axes(self, Op::REDUCE, axes)?;
        if axes.is_empty() {
            return Ok(self.clone());
        }
        let shape = self.shape();
        let mut red: Vec<usize> = axes.to_vec();
        red.sort_unstable();
        let perm: Vec<usize> = red
            .iter()
            .copied()
            .chain((0..shape.len()).filter(|i| !red.contains(i)))
            .collect();
        let x = self.permute(&perm)?;
        let k = red.len();
        let arg = Arg::Reduce {
            op,
            axes: k,
            order: ReduceOrder::Sequential,
        };
        let mut out = match (x.axis, x.devices()) {
            (Some(a), Some(devices)) if a < k => {
                let local = x.unary_node(Op::REDUCE, arg, None)?;
                local.unary_node(Op::ALLREDUCE, Arg::AllReduce { op, devices }, None)?
            }
            (a, _) => x.unary_node(Op::REDUCE, arg, a.map(|a| a - k))?,
        };
        if keepdim {
            let kept: Vec<usize> = shape
                .iter()
                .enumerate()
                .map(|(i, &d)| if red.contains(&i) { 1 } else { d })
                .collect();
            out = out.reshape(&kept)?;
        }
        Ok(out)
    }

    /// Sum over `axes` in the tensor's own dtype (no upcast; see [`Tensor::sum_acc`]).
    pub fn sum(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::ADD, axes, false)
    }

    pub fn sum_keepdim(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::ADD, axes, true)
    }

    /// Sum over every axis (shape `[]`).
    pub fn sum_all(&self) -> Result<Tensor> {
        self.sum(&(0..self.ndim()).collect::<Vec<_>>())
    }

    /// Sum accumulated in `acc` (CAST first). tinygrad's `sum` does this implicitly with
    /// `sum_acc_dtype` (at least int32/uint32/float32); this builder only does it here.
    pub fn sum_acc(&self, axes: &[usize], acc: DType) -> Result<Tensor> {
        self.cast(acc)?.sum(axes)
    }

    pub fn prod(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::MUL, axes, false)
    }

    pub fn prod_keepdim(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::MUL, axes, true)
    }

    pub fn max(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::MAX, axes, false)
    }

    pub fn max_keepdim(&self, axes: &[usize]) -> Result<Tensor> {
        self.reduce(Op::MAX, axes, true)
    }

    /// Minimum as tinygrad builds it: `-max(-x)` for floats, `~max(~x)` for ints and bool
    /// (so a sharded min is a MAX allreduce).
    pub fn min(&self, axes: &[usize]) -> Result<Tensor> {
        self.order_reverse()?.max(axes)?.order_reverse()
    }

    pub fn min_keepdim(&self, axes: &[usize]) -> Result<Tensor> {
        self.order_reverse()?.max_keepdim(axes)?.order_reverse()
    }
}
