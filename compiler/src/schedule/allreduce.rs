//! ALLREDUCE lowering: COPY steps between the devices of the tuple and kernels that fold.
//!
//! Every component is first realized as one whole flat buffer on its device. Then:
//!
//! - **naive**: every device copies every other device's buffer to itself (N·(N−1) COPYs)
//!   and one kernel per device folds left in device order, `((c0 op c1) op c2)…`: the
//!   oracle's order, so the result is bit-exact for every dtype.
//! - **ring** (tinygrad's `handle_allreduce`): the flat buffer is cut into N chunks whose
//!   sizes are multiples of `factor`, the largest of 32, 16, 8, 4, 2 dividing numel (the first
//!   `numel/factor mod N` chunks get one factor more: 400 on 4 devices is 112/96/96/96).
//!   Reduce-scatter: chunk i starts on device i and hops i→i+1→…, `acc = op(copy(acc),
//!   local)` at each hop, so after N−1 hops device i−1 holds chunk i reduced. All-gather: N−1
//!   more hops per chunk. Then every device copies each chunk into its window of the result
//!   (one small kernel per chunk: straight copy loops beat one branchy concatenation). That is
//!   2·N·(N−1) COPYs, all between ring neighbours (exactly N distinct (dst, src) pairs,
//!   (i+1, i)). Chunks of zero elements (numel < N) are skipped: they move nothing.
//!   Each chunk folds in a rotated order (chunk i: `((c_i op c_{i+1}) op …) op c_{i−1}`), so
//!   float ADD/MUL results may differ from the oracle's left fold unless the data makes
//!   every partial result exact (small integers, dyadic values).
//!
//! COPY steps copy whole buffers, so every chunk that travels is a buffer of its own.

use std::fmt;
use std::str::FromStr;

use uopkit_interp::ir::{Arg, DType, Device, NodeId, Op};

use super::realize::{err, reshape, Expr, Move, Planner, Src, Tag};
use super::{BufferKind, ScheduleError};

/// tinygrad's `RING_ALLREDUCE_THRESHOLD`: at most this many elements per device, the naive
/// allreduce is used.
pub const RING_THRESHOLD: usize = 256_000;

/// How ALLREDUCE is lowered.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum AllreduceMode {
    /// tinygrad's default: naive when there are at most 2 devices or at most
    /// [`RING_THRESHOLD`] elements per device, ring otherwise.
    #[default]
    Auto,
    Naive,
    Ring,
}

impl AllreduceMode {
    /// The lowering used for `ndev` devices of `numel` elements each (never `Auto`).
    pub fn resolve(self, ndev: usize, numel: usize) -> AllreduceMode {
        match self {
            AllreduceMode::Auto if ndev <= 2 || numel <= RING_THRESHOLD => AllreduceMode::Naive,
            AllreduceMode::Auto => AllreduceMode::Ring,
            m => m,
        }
    }
}

impl fmt::Display for AllreduceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AllreduceMode::Auto => "auto",
            AllreduceMode::Naive => "naive",
            AllreduceMode::Ring => "ring",
        })
    }
}

impl FromStr for AllreduceMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(AllreduceMode::Auto),
            "naive" => Ok(AllreduceMode::Naive),
            "ring" => Ok(AllreduceMode::Ring),
            other => Err(format!(
                "unknown allreduce mode '{other}' (expected naive, ring or auto)"
            )),
        }
    }
}

/// The ring's chunk sizes for `numel` elements on `ndev` devices (tinygrad's rule; they sum
/// to numel).
pub fn chunk_sizes(numel: usize, ndev: usize) -> Vec<usize> {
    let factor = [32, 16, 8, 4, 2]
        .into_iter()
        .find(|f| numel.is_multiple_of(*f))
        .unwrap_or(1);
    let units = numel / factor;
    let (base, left) = (units / ndev, units % ndev);
    (0..ndev)
        .map(|i| (base + usize::from(i < left)) * factor)
        .collect()
}

/// A view of `len` elements at `off` of a flat buffer.
fn shrink(off: usize, len: usize) -> Move {
    Move {
        op: Op::SHRINK,
        arg: Arg::Window {
            offsets: vec![off],
            sizes: vec![len],
        },
    }
}

/// A flat whole-buffer view of `s`.
fn flat(s: &Src) -> Src {
    Src {
        buffer: s.buffer,
        tag: s.tag,
        chain: vec![],
    }
}

fn load(s: Src) -> Expr {
    Expr::Load(s)
}

impl Planner<'_> {
    /// Plans ALLREDUCE node `n`; returns every device's result, in device order.
    pub(super) fn allreduce_components(&mut self, n: NodeId) -> Result<Vec<Src>, ScheduleError> {
        let node = self.g.node(n).clone();
        let Arg::AllReduce { op, devices } = node.arg.clone() else {
            return Err(err(n, "ALLREDUCE without an op"));
        };
        let x = node.src[0];
        let info = self.ver.info(n).clone();
        let ndev = devices.len();
        if self.ncomp(x) != ndev {
            return Err(err(
                n,
                format!(
                    "ALLREDUCE over {ndev} devices of a value with {} components",
                    self.ncomp(x)
                ),
            ));
        }
        let ins = (0..ndev)
            .map(|c| self.whole_buffer_c(x, c))
            .collect::<Result<Vec<_>, _>>()?;
        if ndev == 1 {
            return Ok(ins);
        }
        let numel = info.numel();
        let a = Allreduce {
            node: n,
            op,
            dtype: info.dtype,
            numel,
            shape: info.shape.clone(),
            devices,
        };
        Ok(match self.allreduce.resolve(ndev, numel) {
            AllreduceMode::Ring => self.ring(&a, &ins),
            _ => self.naive(&a, &ins),
        })
    }

    /// Every device copies every other device's buffer (all copies first, as tinygrad), then
    /// folds in device order.
    fn naive(&mut self, a: &Allreduce, ins: &[Src]) -> Vec<Src> {
        let mut operands: Vec<Vec<Src>> = vec![];
        for (d, &dev) in a.devices.iter().enumerate() {
            let row = ins
                .iter()
                .enumerate()
                .map(|(j, s)| {
                    if j == d {
                        flat(s)
                    } else {
                        flat(&self.copy_to(s, dev, a.dtype, a.numel, &[a.numel]))
                    }
                })
                .collect();
            operands.push(row);
        }
        let mut out = vec![];
        for (d, row) in operands.into_iter().enumerate() {
            // ((c0 op c1) op c2) …: the oracle's order.
            let mut it = row.into_iter().map(load);
            let first = it.next().expect("at least two devices");
            let expr = it.fold(first, |acc, x| a.alu(acc, x));
            out.push(self.fresh(a, a.devices[d], a.numel, expr, vec![reshape(&a.shape)]));
        }
        out
    }

    /// Reduce-scatter then all-gather around the ring of devices.
    fn ring(&mut self, a: &Allreduce, ins: &[Src]) -> Vec<Src> {
        let ndev = a.devices.len();
        let sizes = chunk_sizes(a.numel, ndev);
        let offsets: Vec<usize> = sizes
            .iter()
            .scan(0, |o, &s| Some(std::mem::replace(o, *o + s)))
            .collect();
        let chunks: Vec<usize> = (0..ndev).filter(|&i| sizes[i] > 0).collect();
        let local = |d: usize, i: usize| Src {
            buffer: ins[d].buffer,
            tag: ins[d].tag,
            chain: vec![shrink(offsets[i], sizes[i])],
        };
        // have[d][i]: chunk i on device d (as a whole buffer of sizes[i] elements).
        let mut have: Vec<Vec<Option<Src>>> = vec![vec![None; ndev]; ndev];
        // Chunk i starts on device i.
        for &i in &chunks {
            let s = self.fresh(a, a.devices[i], sizes[i], load(local(i, i)), vec![]);
            have[i][i] = Some(s);
        }
        // Reduce-scatter: hop `step` moves chunk i from device i+step to i+step+1 and folds in
        // that device's part.
        for step in 0..ndev - 1 {
            for &i in &chunks {
                let (src, dst) = ((i + step) % ndev, (i + step + 1) % ndev);
                let acc = have[src][i].clone().expect("chunk is on its source device");
                let moved = self.copy_to(&acc, a.devices[dst], a.dtype, sizes[i], &[sizes[i]]);
                let expr = a.alu(load(flat(&moved)), load(local(dst, i)));
                have[dst][i] = Some(self.fresh(a, a.devices[dst], sizes[i], expr, vec![]));
            }
        }
        // All-gather: chunk i is complete on device i−1; N−1 more hops around the ring.
        for step in 0..ndev - 1 {
            for &i in &chunks {
                let src = (i + ndev - 1 + step) % ndev;
                let dst = (src + 1) % ndev;
                let done = have[src][i]
                    .clone()
                    .expect("chunk is complete on its source device");
                have[dst][i] = Some(flat(&self.copy_to(
                    &done,
                    a.devices[dst],
                    a.dtype,
                    sizes[i],
                    &[sizes[i]],
                )));
            }
        }
        // Every device assembles its chunks: one copy kernel per chunk into its window.
        let mut out = vec![];
        for (d, row) in have.iter().enumerate() {
            let target = self.new_buffer(a.dtype, a.numel, a.devices[d], BufferKind::Intermediate);
            let mut tag = Tag::Initial;
            for &i in &chunks {
                let part = flat(row[i].as_ref().expect("every chunk reached every device"));
                tag = self.expr_kernel_over(
                    a.node,
                    a.devices[d],
                    target,
                    tag,
                    vec![shrink(offsets[i], sizes[i])],
                    load(part),
                );
            }
            out.push(Src {
                buffer: target,
                tag,
                chain: vec![reshape(&a.shape)],
            });
        }
        out
    }

    /// A kernel on `device` computing `expr` into a fresh flat buffer of `len` elements; the
    /// result is seen through `chain`.
    fn fresh(
        &mut self,
        a: &Allreduce,
        device: Device,
        len: usize,
        expr: Expr,
        chain: Vec<Move>,
    ) -> Src {
        let target = self.new_buffer(a.dtype, len, device, BufferKind::Intermediate);
        let tag = self.expr_kernel(a.node, device, target, vec![], expr);
        Src {
            buffer: target,
            tag,
            chain,
        }
    }
}

/// What one ALLREDUCE computes.
struct Allreduce {
    node: NodeId,
    op: Op,
    dtype: DType,
    numel: usize,
    shape: Vec<usize>,
    devices: Vec<Device>,
}

impl Allreduce {
    fn alu(&self, a: Expr, b: Expr) -> Expr {
        Expr::Alu {
            op: self.op,
            dtype: self.dtype,
            src: vec![a, b],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_follow_tinygrad() {
        assert_eq!(chunk_sizes(400, 4), vec![112, 96, 96, 96]);
        assert_eq!(chunk_sizes(7, 4), vec![2, 2, 2, 1]);
        assert_eq!(chunk_sizes(1, 8), vec![1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(chunk_sizes(4096, 4), vec![1024; 4]);
        assert_eq!(chunk_sizes(300_000, 4).iter().sum::<usize>(), 300_000);
    }

    #[test]
    fn auto_follows_tinygrad_defaults() {
        assert_eq!(
            AllreduceMode::Auto.resolve(2, 1 << 20),
            AllreduceMode::Naive
        );
        assert_eq!(
            AllreduceMode::Auto.resolve(4, RING_THRESHOLD),
            AllreduceMode::Naive
        );
        assert_eq!(
            AllreduceMode::Auto.resolve(4, RING_THRESHOLD + 1),
            AllreduceMode::Ring
        );
        assert_eq!(AllreduceMode::Ring.resolve(2, 4), AllreduceMode::Ring);
        assert_eq!("RING".parse::<AllreduceMode>(), Ok(AllreduceMode::Ring));
        assert!("fast".parse::<AllreduceMode>().is_err());
    }
}
