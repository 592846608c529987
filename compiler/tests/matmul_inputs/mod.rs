//! Inputs shared by the CPU matmul pass tests (cpu_interchange.rs, cpu_tile.rs): a seeded
//! generator of float bits full of specials and the matmul graph the bench builds.

use uopkit_interp::ir::{Arg, DType, Device, Node, Op, ReduceOrder};
use uopkit_interp::tensor::{Ctx, Tensor};

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Float bits, about one in three special (NaN with payloads, ±inf, ±0, subnormal,
    /// huge), the rest in ±[0.5, 2).
    pub fn float(&mut self, dt: DType) -> u64 {
        let r = self.next();
        let v: f64 = match r % 12 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -0.0,
            4 => 1e-40, // subnormal in f32, normal in f64
            5 => 3e38,
            _ => {
                let m = (r >> 8) as f64 / (1u64 << 56) as f64;
                let s = if r & 0x80 != 0 { -1.0 } else { 1.0 };
                s * (0.5 + 1.5 * m)
            }
        };
        match dt {
            DType::Float32 => {
                let mut b = (v as f32).to_bits();
                if v.is_nan() {
                    b |= (r >> 40) as u32 & 0x003f_ffff; // a payload
                }
                b as u64
            }
            _ => {
                let mut b = v.to_bits();
                if v.is_nan() {
                    b |= (r >> 20) & 0x0007_ffff_ffff_ffff;
                }
                b
            }
        }
    }

    /// Bits of `dt` (float32 or float64) for dyadic numbers in ±[0, 64) with 10 fraction
    /// bits: products of two are exact in float32, their long sums round (cpu_tile.rs only:
    /// each test binary compiles this module for itself).
    #[allow(dead_code)]
    pub fn dyadic(&mut self, dt: DType, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let r = self.next();
                let v = ((r >> 40) % (1 << 16)) as f64 / 1024.0;
                let v = if r & 1 == 1 { -v } else { v };
                match dt {
                    DType::Float32 => (v as f32).to_bits() as u64,
                    _ => v.to_bits(),
                }
            })
            .collect()
    }

    pub fn data(&mut self, dt: DType, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| match dt {
                DType::Int32 => (self.next() as u32) as u64,
                _ => self.float(dt),
            })
            .collect()
    }
}

/// C[i,j] = REDUCE_ADD over k of A[i,k]·B[k,j] in `order`, laid out [k, m, n] as the bench
/// builds it.
pub fn matmul(
    ctx: &Ctx,
    (m, k, n): (usize, usize, usize),
    dt: DType,
    a: &[u64],
    b: &[u64],
    order: ReduceOrder,
) -> Tensor {
    let a = Tensor::from_data(ctx, &[m, k], dt, Device::cpu(0), a).expect("A");
    let b = Tensor::from_data(ctx, &[k, n], dt, Device::cpu(0), b).expect("B");
    let av = a
        .permute(&[1, 0])
        .and_then(|t| t.reshape(&[k, m, 1]))
        .and_then(|t| t.expand(&[k, m, n]))
        .expect("A view");
    let bv = b
        .reshape(&[k, 1, n])
        .and_then(|t| t.expand(&[k, m, n]))
        .expect("B view");
    let p = av.mul(&bv).expect("product");
    sum_leading(ctx, &p, 1, order)
}

/// REDUCE_ADD over the first `axes` axes of `p` in `order`.
fn sum_leading(ctx: &Ctx, p: &Tensor, axes: usize, order: ReduceOrder) -> Tensor {
    ctx.raw(Node {
        op: Op::REDUCE,
        dtype: p.dtype(),
        src: vec![p.id()],
        arg: Arg::Reduce {
            op: Op::ADD,
            axes,
            order,
        },
    })
    .expect("reduce")
}

/// A 1-D convolution with stride = kernel width, as the bench builds it: x [ch, l] read as
/// l/kw windows, w [o, ch, kw]; out[o, p] = REDUCE_ADD over (c, k) row-major of
/// x[c, p·kw + k]·w[o, c, k] in `order` (two reduced axes; the operand that does not depend
/// on o is strided by kw along p). cpu_tile.rs only.
#[allow(dead_code)]
pub fn conv(
    ctx: &Ctx,
    (ch, o, kw, l): (usize, usize, usize, usize),
    dt: DType,
    x: &[u64],
    w: &[u64],
    order: ReduceOrder,
) -> Tensor {
    let p = l / kw;
    let x = Tensor::from_data(ctx, &[ch, l], dt, Device::cpu(0), x).expect("x");
    let w = Tensor::from_data(ctx, &[o, ch, kw], dt, Device::cpu(0), w).expect("w");
    let xv = x
        .reshape(&[ch, p, kw])
        .and_then(|t| t.permute(&[0, 2, 1]))
        .and_then(|t| t.reshape(&[ch, kw, 1, p]))
        .and_then(|t| t.expand(&[ch, kw, o, p]))
        .expect("x windows");
    let wv = w
        .permute(&[1, 2, 0])
        .and_then(|t| t.reshape(&[ch, kw, o, 1]))
        .and_then(|t| t.expand(&[ch, kw, o, p]))
        .expect("w view");
    let prod = xv.mul(&wv).expect("product");
    sum_leading(ctx, &prod, 2, order)
}
