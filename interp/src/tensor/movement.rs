//! Movement: reshape, expand (numpy-style broadcast), permute, pad, shrink, flip.
//!
//! Every method takes the logical shape. On a sharded tensor the op is applied to each
//! shard; an op that would move data across shards (changing, padding, shrinking or
//! flipping the sharded axis, or a reshape that splits or merges it) is an error.

use super::{check_axes, Tensor};
use crate::error::Result;
use crate::ir::{Arg, Op};
use crate::verify::movement_shape;

impl Tensor {
    fn ndev(&self) -> usize {
        self.devices().map_or(1, |d| d.len())
    }

    /// Same elements in a new shape (row-major). No node when the shape is unchanged.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if s == shape {
            return Ok(self.clone());
        }
        movement_shape(Op::RESHAPE, &Arg::Shape(shape.to_vec()), &s)
            .map_err(|r| self.err(Op::RESHAPE, r))?;
        let Some(a) = self.axis else {
            return self.unary_node(Op::RESHAPE, Arg::Shape(shape.to_vec()), None);
        };
        let pre: usize = s[..a].iter().product();
        let b = (0..shape.len()).find(|&b| shape[b] == s[a] && shape[..b].iter().product::<usize>() == pre).ok_or_else(|| {
            self.err(
                Op::RESHAPE,
                format!("reshape from {s:?} to {shape:?} would split or merge sharded axis {a} (only reshapes that keep it intact are supported)"),
            )
        })?;
        let mut local = shape.to_vec();
        local[b] /= self.ndev();
        self.unary_node(Op::RESHAPE, Arg::Shape(local), Some(b))
    }

    /// Broadcasts to `shape` like numpy: new leading axes and size-1 axes expand. EXPAND
    /// only prepends, so this is tinygrad's `_broadcast_to`: RESHAPE (drop the size-1 axes
    /// that expand), EXPAND (prepend them at their new sizes), PERMUTE (put them back).
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if s == shape {
            return Ok(self.clone());
        }
        let bad = || {
            self.err(Op::EXPAND, format!("cannot expand shape {s:?} to {shape:?} (only size-1 axes and new leading axes broadcast)"))
        };
        if s.len() > shape.len() {
            return Err(bad());
        }
        let lead = shape.len() - s.len();
        let padded: Vec<usize> = std::iter::repeat_n(1, lead)
            .chain(s.iter().copied())
            .collect();
        if padded.iter().zip(shape).any(|(&p, &t)| p != t && p != 1) {
            return Err(bad());
        }
        let axis = self.axis.map(|a| a + lead);
        let (mut lp, mut lt) = (padded.clone(), shape.to_vec());
        if let Some(a) = axis {
            if padded[a] != shape[a] {
                return Err(self.err(
                    Op::EXPAND,
                    format!("cannot broadcast sharded axis {} of shape {s:?}", a - lead),
                ));
            }
            lp[a] /= self.ndev();
            lt[a] /= self.ndev();
        }
        let grows = |i: usize| lp[i] == 1 && lt[i] != 1;
        let e: Vec<usize> = (0..lt.len()).filter(|&i| grows(i)).collect();
        let k: Vec<usize> = (0..lt.len()).filter(|&i| !grows(i)).collect();
        let pos_k = |i: usize| k.iter().position(|&x| x == i).expect("kept axis");
        let squeezed: Vec<usize> = k.iter().map(|&i| lp[i]).collect();
        let mut x = self.clone();
        if squeezed != self.local_shape() {
            x = x.unary_node(Op::RESHAPE, Arg::Shape(squeezed), axis.map(pos_k))?;
        }
        if !e.is_empty() {
            x = x.unary_node(
                Op::EXPAND,
                Arg::Shape(e.iter().map(|&i| lt[i]).collect()),
                axis.map(|a| e.len() + pos_k(a)),
            )?;
        }
        let perm: Vec<usize> = (0..lt.len())
            .map(|i| {
                e.iter()
                    .position(|&x| x == i)
                    .unwrap_or_else(|| e.len() + pos_k(i))
            })
            .collect();
        if perm.iter().enumerate().any(|(i, &p)| i != p) {
            x = x.unary_node(Op::PERMUTE, Arg::Perm(perm), axis)?;
        }
        Ok(x)
    }

    /// Output axis i is input axis `perm[i]`. No node for the identity.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        movement_shape(Op::PERMUTE, &Arg::Perm(perm.to_vec()), &s)
            .map_err(|r| self.err(Op::PERMUTE, r))?;
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(self.clone());
        }
        let axis = self
            .axis
            .map(|a| perm.iter().position(|&p| p == a).expect("a permutation"));
        self.unary_node(Op::PERMUTE, Arg::Perm(perm.to_vec()), axis)
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        check_axes(self, Op::PERMUTE, &[a])?;
        check_axes(self, Op::PERMUTE, &[b])?;
        let mut perm: Vec<usize> = (0..self.ndim()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Inserts a size-1 axis before axis `axis` (`axis == ndim` appends).
    pub fn unsqueeze(&self, axis: usize) -> Result<Tensor> {
        let mut s = self.shape();
        if axis > s.len() {
            return Err(self.err(
                Op::RESHAPE,
                format!("cannot insert an axis at {axis} in a {}-d tensor", s.len()),
            ));
        }
        s.insert(axis, 1);
        self.reshape(&s)
    }

    /// Reshapes to one axis.
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])
    }

    /// Pads axis i with `pads[i].0` zeros before and `pads[i].1` after: PAD with
    /// (offset = before, new size = before + size + after). No node when nothing is padded.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Result<Tensor> {
        let s = self.shape();
        if pads.len() != s.len() {
            return Err(self.err(
                Op::PAD,
                format!(
                    "{} (before, after) pairs for a {}-d tensor of shape {s:?}",
                    pads.len(),
                    s.len()
                ),
            ));
        }
        if pads.iter().all(|&p| p == (0, 0)) {
            return Ok(self.clone());
        }
        if let Some(a) = self.axis {
            if pads[a] != (0, 0) {
                return Err(self.err(Op::PAD, format!("cannot pad sharded axis {a}")));
            }
        }
        let local = self.local_shape();
        let mut sizes = vec![];
        for (i, (&(b, e), &d)) in pads.iter().zip(&local).enumerate() {
            sizes.push(
                d.checked_add(b)
                    .and_then(|x| x.checked_add(e))
                    .ok_or_else(|| self.err(Op::PAD, format!("padding axis {i} overflows")))?,
            );
        }
        let offsets = pads.iter().map(|p| p.0).collect();
        self.unary_node(Op::PAD, Arg::Window { offsets, sizes }, self.axis)
    }

    /// Keeps `ranges[i].0 .. ranges[i].1` of axis i: SHRINK with (offset = start,
    /// size = end - start). No node when nothing is cut.
    pub fn shrink(&self, ranges: &[(usize, usize)]) -> Result<Tensor> {
        let s = self.shape();
        if ranges.len() != s.len() {
            return Err(self.err(
                Op::SHRINK,
                format!(
                    "{} (start, end) pairs for a {}-d tensor of shape {s:?}",
                    ranges.len(),
                    s.len()
                ),
            ));
        }
        for (i, (&(b, e), &d)) in ranges.iter().zip(&s).enumerate() {
            if b > e || e > d {
                return Err(self.err(
                    Op::SHRINK,
                    format!("range {b}..{e} of axis {i} is outside 0..{d}"),
                ));
            }
        }
        if ranges.iter().zip(&s).all(|(&r, &d)| r == (0, d)) {
            return Ok(self.clone());
        }
        let mut offsets: Vec<usize> = ranges.iter().map(|r| r.0).collect();
        let mut sizes: Vec<usize> = ranges.iter().map(|r| r.1 - r.0).collect();
        if let Some(a) = self.axis {
            if ranges[a] != (0, s[a]) {
                return Err(self.err(Op::SHRINK, format!("cannot shrink sharded axis {a}")));
            }
            offsets[a] = 0;
            sizes[a] = self.local_shape()[a];
        }
        self.unary_node(Op::SHRINK, Arg::Window { offsets, sizes }, self.axis)
    }

    /// `shrink` of one axis (a slice `start..end`), the other axes whole.
    pub fn shrink_axis(&self, axis: usize, start: usize, end: usize) -> Result<Tensor> {
        check_axes(self, Op::SHRINK, &[axis])?;
        let mut ranges: Vec<(usize, usize)> = self.shape().iter().map(|&d| (0, d)).collect();
        ranges[axis] = (start, end);
        self.shrink(&ranges)
    }

    /// Reverses the given axes. No node when `axes` is empty.
    pub fn flip(&self, axes: &[usize]) -> Result<Tensor> {
        check_axes(self, Op::FLIP, axes)?;
        if axes.is_empty() {
            return Ok(self.clone());
        }
        if let Some(a) = self.axis {
            if axes.contains(&a) {
                return Err(self.err(Op::FLIP, format!("cannot flip sharded axis {a}")));
            }
        }
        let flags = (0..self.ndim()).map(|i| axes.contains(&i)).collect();
        self.unary_node(Op::FLIP, Arg::Flip(flags), self.axis)
    }
}
