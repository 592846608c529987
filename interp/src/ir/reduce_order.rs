//! The order a REDUCE folds in. The canonical order is sequential; a compiler that splits a
//! reduction for speed records the order it used, so the oracle can replay it bit for bit
//! (`eval::order` evaluates every order; `docs/ir.md` spells them).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceOrder {
    /// `((e ⊕ x₀) ⊕ x₁) ⊕ …` in row-major order of the reduced elements.
    #[default]
    Sequential,
    /// k interleaved accumulators (x_r goes to r mod k), combined left to right.
    Split(usize),
    /// k contiguous blocks of ⌈n/k⌉ elements, each folded from the identity, combined left to right.
    Chunks(usize),
    /// Pairwise halves down to sequential leaves of at most this many elements.
    Tree(usize),
    /// `(c, k)`: c contiguous chunks of n/c elements (c divides n; the verifier checks), each
    /// folded in the `split(k)` order of its own elements, and the c chunk results folded
    /// sequentially from the identity, `((e ⊕ P₀) ⊕ P₁) ⊕ …`. It is exactly a sequential
    /// REDUCE over c partials of a `split(k)` REDUCE per chunk, which is how a compiler can run
    /// the chunks on threads and the lanes of each as vector lanes.
    ChunksOfSplit(usize, usize),
}
