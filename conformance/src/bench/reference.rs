//! An independent reference for workloads the oracle is not asked to evaluate (the full-size
//! matmul: the oracle would keep its k×m×n product, 2^30 elements at 1024³, over its cap).
//!
//! What "exact" means for such a workload: the compiled output equals, bit for bit, this
//! straightforward float32 loop, which does what the graph declares — one rounding per MUL,
//! a sequential ADD fold over k ascending from the ADD identity +0.0 — and which is itself
//! checked bit for bit against the oracle on a smaller matmul of the same form ("the twin")
//! in the same run. Rust never contracts `acc + a * b` into an FMA.

use uopkit_interp::tensor::Ctx;

use super::workloads::{matmul_graph, Rng};
use super::BenchError;

/// C = A B, row-major, k ascending, float32 throughout.
pub fn matmul(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                acc += a[i * k + kk] * b[kk * n + j];
            }
            c[i * n + j] = acc;
        }
    }
    c
}

/// Checks [`matmul`] against the oracle on a `t`×`t`×`t` matmul with random inputs: the
/// first differing element, or Ok.
pub fn check_twin(t: usize) -> Result<(), BenchError> {
    let mut rng = Rng::new(4242);
    let a = rng.f32s(t * t, -1.0, 1.0);
    let b = rng.f32s(t * t, -1.0, 1.0);
    let ctx = Ctx::new();
    let root = matmul_graph(&ctx, t, t, t, &a, &b)
        .map_err(|e| BenchError::Build(format!("matmul twin: {e}")))?;
    let v = ctx
        .evaluate(&[&root])
        .map_err(|e| BenchError::Oracle(format!("matmul twin {t}³: {e}")))?;
    let want: Vec<u64> = matmul(t, t, t, &a, &b)
        .iter()
        .map(|&f| f.to_bits() as u64)
        .collect();
    match super::exact::first_difference(&v[0], &want) {
        None => Ok(()),
        Some(d) => Err(BenchError::Oracle(format!(
            "the matmul reference disagrees with the oracle on its {t}³ twin: {d}"
        ))),
    }
}

/// The reference's output as float32 bits (for [`super::exact::first_difference`]).
pub fn matmul_bits(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<u64> {
    matmul(m, k, n, a, b)
        .iter()
        .map(|&f| f.to_bits() as u64)
        .collect()
}
