//! The workloads: uopkit tensor graphs (built with the oracle's `Tensor` builder, so they are
//! what a tinygrad front end would hand over), their sizes, what one run of them does
//! (bytes moved or flops), which probe is their ceiling, and how their result is judged.
//!
//! Every reduction carries its declared order explicitly (a REDUCE node with
//! `Arg::Reduce { order }`): the compiled kernel must reproduce that order bit for bit.

use uopkit_interp::ir::{Arg, DType, Device, Node, Op, ReduceOrder};
use uopkit_interp::scalar::round;
use uopkit_interp::tensor::{Ctx, Tensor};

use super::probe::ProbeKind;
use super::BenchError;

/// The workloads' names, in the order they run and print.
pub const NAMES: [&str; 6] = [
    "elementwise",
    "sum",
    "matmul",
    "softmax",
    "conv",
    "f16_elementwise",
];

/// The declared order of `sum`: 64 contiguous chunks (the CPU runtime runs them on its
/// threads), each folded in 32 interleaved accumulators (x_r goes to r mod 32 within its chunk:
/// vector lanes), the chunk results folded in order: fast without reassociating anything the
/// oracle does not replay. 64 divides both sizes the bench uses (4096 and 2^24).
pub const SUM_ORDER: ReduceOrder = ReduceOrder::ChunksOfSplit(64, 32);

/// How a workload's compiled result is judged.
pub enum Check {
    /// Bit for bit against the oracle's evaluation of the same graph on the same inputs.
    Oracle,
    /// Matmul too large for the oracle: bit for bit against [`super::reference::matmul`]
    /// (float32, k ascending, one rounding per MUL and per ADD from +0), which is itself
    /// checked bit for bit against the oracle on a `twin`³ matmul first.
    MatmulReference {
        m: usize,
        k: usize,
        n: usize,
        a: Vec<f32>,
        b: Vec<f32>,
        twin: usize,
    },
}

/// One workload, built.
pub struct Workload {
    pub name: &'static str,
    /// A one-line description of shape, dtype and order.
    pub size: String,
    pub ctx: Ctx,
    pub root: Tensor,
    /// Unit of `value` (`GB/s` or `GFLOP/s`) and the numerator per run (bytes or flops).
    pub unit: &'static str,
    pub work: f64,
    pub ceiling: ProbeKind,
    pub check: Check,
    /// What `benches/peers.py` needs to run the same workload (kind and sizes).
    pub peer: serde_json::Value,
}

/// Deterministic inputs: xorshift64*, floats uniform in [lo, hi) with full float32 mantissas.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 bits
                lo + (hi - lo) * (r as f32 / (1u32 << 24) as f32)
            })
            .collect()
    }
}

fn err(name: &str) -> impl Fn(uopkit_interp::error::Error) -> BenchError + '_ {
    move |e| BenchError::Build(format!("workload {name}: {e}"))
}

/// A `shape` buffer of `data` rounded to `dtype`, on CPU:0.
pub fn buffer(
    ctx: &Ctx,
    shape: &[usize],
    dtype: DType,
    data: &[f32],
) -> uopkit_interp::error::Result<Tensor> {
    let bits: Vec<u64> = data
        .iter()
        .map(|&f| round::from_f64(dtype, f as f64))
        .collect();
    Tensor::from_data(ctx, shape, dtype, Device::cpu(0), &bits)
}

/// REDUCE over the first `axes` axes of `x` with `order`.
pub fn reduce(
    x: &Tensor,
    op: Op,
    axes: usize,
    order: ReduceOrder,
) -> uopkit_interp::error::Result<Tensor> {
    x.ctx().raw(Node {
        op: Op::REDUCE,
        dtype: x.dtype(),
        src: vec![x.id()],
        arg: Arg::Reduce { op, axes, order },
    })
}

/// Builds workload `name` (one of [`NAMES`]) at full size, or tiny under `quick`.
pub fn build(name: &str, quick: bool) -> Result<Workload, BenchError> {
    // Built for the compiler: the oracle's per-value cap would refuse the full-size
    // matmul's k×m×n product, which no kernel materializes (`Ctx::evaluate`, the oracle's
    // check, still verifies within the oracle's limits).
    let ctx = Ctx::with_limits(uopkit_interp::verify::Limits::COMPILE);
    let e = err(name);
    let mut rng = Rng::new(name.len() as u64 * 7919 + 13);
    let w = match name {
        "elementwise" | "f16_elementwise" => {
            // out = b + c * 3 (STREAM's triad), one rounding per op in the dtype.
            let n = if quick { 4096 } else { 16 << 20 };
            let dt = if name == "elementwise" {
                DType::Float32
            } else {
                DType::Float16
            };
            let b = buffer(&ctx, &[n], dt, &rng.f32s(n, -1.0, 1.0)).map_err(&e)?;
            let c = buffer(&ctx, &[n], dt, &rng.f32s(n, -1.0, 1.0)).map_err(&e)?;
            let root = b.add(c.mul(3.0).map_err(&e)?).map_err(&e)?;
            let item = dt.itemsize() as f64;
            Workload {
                name: if name == "elementwise" {
                    "elementwise"
                } else {
                    "f16_elementwise"
                },
                size: format!("{n} {dt}: b + c*3"),
                ctx,
                root,
                unit: "GB/s",
                work: 3.0 * item * n as f64,
                ceiling: ProbeKind::Triad,
                check: Check::Oracle,
                peer: serde_json::json!({"kind": "triad", "n": n, "dtype": dt.to_string()}),
            }
        }
        "sum" => {
            let n = if quick { 4096 } else { 16 << 20 };
            let x = buffer(&ctx, &[n], DType::Float32, &rng.f32s(n, -1.0, 1.0)).map_err(&e)?;
            let root = reduce(&x, Op::ADD, 1, SUM_ORDER).map_err(&e)?;
            Workload {
                name: "sum",
                size: format!("{n} float32, order {SUM_ORDER:?}"),
                ctx,
                root,
                unit: "GB/s",
                work: 4.0 * n as f64,
                ceiling: ProbeKind::Read,
                check: Check::Oracle,
                peer: serde_json::json!({"kind": "sum", "n": n}),
            }
        }
        "matmul" => {
            // C[i,j] = sum_k A[i,k] * B[k,j], k ascending (sequential), float32.
            // 1024³: the k×m×n product has 2^30 elements, over the oracle's per-value cap
            // (the context verifies with `Limits::COMPILE`; the compiler never
            // materializes the product), so it is checked against the reference loop.
            let (m, k, n) = if quick {
                (16, 16, 16)
            } else {
                (1024, 1024, 1024)
            };
            let a_data = rng.f32s(m * k, -1.0, 1.0);
            let b_data = rng.f32s(k * n, -1.0, 1.0);
            let root = matmul_graph(&ctx, m, k, n, &a_data, &b_data).map_err(&e)?;
            // The oracle keeps the k×m×n product: beyond 256³ elements it is the reference.
            let check = if m * k * n <= 1 << 24 {
                Check::Oracle
            } else {
                Check::MatmulReference {
                    m,
                    k,
                    n,
                    a: a_data,
                    b: b_data,
                    twin: 48,
                }
            };
            Workload {
                name: "matmul",
                size: format!("{m}x{k} @ {k}x{n} float32, k sequential"),
                ctx,
                root,
                unit: "GFLOP/s",
                work: 2.0 * (m * k * n) as f64,
                ceiling: ProbeKind::MulAdd,
                check,
                peer: serde_json::json!({"kind": "matmul", "m": m, "k": k, "n": n}),
            }
        }
        "softmax" => {
            // Per row: e = exp2(x - max(x)); out = e / sum(e) (FDIV), both reductions
            // sequential along the row.
            let (r, c) = if quick { (8, 64) } else { (4096, 1024) };
            let x =
                buffer(&ctx, &[r, c], DType::Float32, &rng.f32s(r * c, -4.0, 4.0)).map_err(&e)?;
            let xt = x.permute(&[1, 0]).map_err(&e)?;
            let m = reduce(&xt, Op::MAX, 1, ReduceOrder::Sequential).map_err(&e)?;
            let m = m
                .reshape(&[r, 1])
                .map_err(&e)?
                .expand(&[r, c])
                .map_err(&e)?;
            let ex = x.sub(&m).map_err(&e)?.exp2().map_err(&e)?;
            let s = reduce(
                &ex.permute(&[1, 0]).map_err(&e)?,
                Op::ADD,
                1,
                ReduceOrder::Sequential,
            )
            .map_err(&e)?;
            let s = s
                .reshape(&[r, 1])
                .map_err(&e)?
                .expand(&[r, c])
                .map_err(&e)?;
            let root = ex.fdiv(&s).map_err(&e)?;
            Workload {
                name: "softmax",
                size: format!("{r}x{c} float32, exp2(x-max)/sum per row, sequential"),
                ctx,
                root,
                unit: "GB/s",
                work: 8.0 * (r * c) as f64,
                ceiling: ProbeKind::Copy,
                check: Check::Oracle,
                peer: serde_json::json!({"kind": "softmax", "r": r, "c": c}),
            }
        }
        "conv" => {
            // 1-D convolution, stride = kernel width (windows from a reshape):
            // out[o, p] = sum_{c,k} x[c, p*K + k] * w[o, c, k], (c, k) row-major, sequential.
            let (ch, o, kw, l) = if quick {
                (4, 4, 4, 64)
            } else {
                (64, 64, 4, 4096)
            };
            let p = l / kw;
            let x =
                buffer(&ctx, &[ch, l], DType::Float32, &rng.f32s(ch * l, -1.0, 1.0)).map_err(&e)?;
            let w = buffer(
                &ctx,
                &[o, ch, kw],
                DType::Float32,
                &rng.f32s(o * ch * kw, -1.0, 1.0),
            )
            .map_err(&e)?;
            let xv = x
                .reshape(&[ch, p, kw])
                .and_then(|t| t.permute(&[0, 2, 1]))
                .and_then(|t| t.reshape(&[ch, kw, 1, p]))
                .and_then(|t| t.expand(&[ch, kw, o, p]))
                .map_err(&e)?;
            let wv = w
                .permute(&[1, 2, 0])
                .and_then(|t| t.reshape(&[ch, kw, o, 1]))
                .and_then(|t| t.expand(&[ch, kw, o, p]))
                .map_err(&e)?;
            let root = reduce(
                &xv.mul(&wv).map_err(&e)?,
                Op::ADD,
                2,
                ReduceOrder::Sequential,
            )
            .map_err(&e)?;
            Workload {
                name: "conv",
                size: format!("x {ch}x{l}, w {o}x{ch}x{kw}, stride {kw}, float32, sequential"),
                ctx,
                root,
                unit: "GFLOP/s",
                work: 2.0 * (ch * kw * o * p) as f64,
                ceiling: ProbeKind::MulAdd,
                check: Check::Oracle,
                peer: serde_json::json!({"kind": "conv", "c": ch, "o": o, "k": kw, "l": l}),
            }
        }
        other => {
            return Err(BenchError::Usage(format!(
                "unknown workload '{other}' (expected one of {})",
                NAMES.join(", ")
            )))
        }
    };
    Ok(w)
}

/// The matmul graph: A [m,k] and B [k,n] as buffers; the product laid out [k, m, n] and
/// REDUCE over k, sequential.
pub fn matmul_graph(
    ctx: &Ctx,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
) -> uopkit_interp::error::Result<Tensor> {
    let a = buffer(ctx, &[m, k], DType::Float32, a)?;
    let b = buffer(ctx, &[k, n], DType::Float32, b)?;
    let av = a
        .permute(&[1, 0])?
        .reshape(&[k, m, 1])?
        .expand(&[k, m, n])?;
    let bv = b.reshape(&[k, 1, n])?.expand(&[k, m, n])?;
    reduce(&av.mul(&bv)?, Op::ADD, 1, ReduceOrder::Sequential)
}
