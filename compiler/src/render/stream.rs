//! Streaming stores for large elementwise kernels in C: a kernel whose parallel loop writes
//! `out[i]` once per iteration `i` and nothing else writes far more than the caches hold, so
//! its stores are written past the caches (x86 `movntps`, 64 bytes at a time) instead of
//! first reading every line they overwrite (a write-allocate read: a third more traffic for
//! `y = f(x)`).
//!
//! The C renderer then runs the loop in blocks of one cache line of the output: each block's
//! values go to a local array `uk_t` in iteration order, and `uk_stream_put` writes the block
//! to `out` (a streaming store when the block is a whole aligned line and the target has AVX,
//! else `memcpy`). Each element's value is computed by the same instructions from the same
//! operands and copied bit for bit, so the result is the one the plain loop stores.
//! Computing a block before storing it moves the loads of later iterations in the block
//! before the stores of earlier ones, so the loop may read `out` only at the element it
//! stores (`out[i] = f(out[i])` reads out[i] before writing it; any other INDEX of `out` is
//! refused here), and a unit compiled for aliasing buffers (runtime::cpu's `NO_RESTRICT`,
//! where another param may be `out`) defines `UK_STREAMING` 0, which makes every block the
//! whole range and stores directly: the plain loop.
//!
//! Only loops writing [`STREAM_MIN_BYTES`] or more stream, far more than a conformance case
//! holds; [`with_stream_min_bytes`] lowers the threshold for what one closure renders, so a
//! backend variant (the conformance `cpu` backend's large-input variant) checks every
//! eligible loop streamed on small cases.

use std::cell::Cell;

use uopkit_interp::ir::Op;
use uopkit_interp::kernel::{InstId, Program};

use super::par::ParLoop;

/// The least the loop must write before its stores stream (the output is then far beyond
/// the 1–2 MiB of L2 per core, and usually beyond what the next kernel would find in L3).
pub const STREAM_MIN_BYTES: u64 = 16 << 20;

thread_local! {
    /// The threshold [`with_stream_min_bytes`] set for loops rendered on this thread.
    static FORCED_MIN: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `f` with every loop rendered on this thread streaming when it writes at least
/// `bytes` (0: every eligible loop), instead of [`STREAM_MIN_BYTES`]. The previous setting is
/// back when `f` returns or unwinds.
pub fn with_stream_min_bytes<R>(bytes: u64, f: impl FnOnce() -> R) -> R {
    crate::scoped::with_cell(&FORCED_MIN, Some(bytes), f)
}

/// The least a loop rendered now must write to stream: [`with_stream_min_bytes`]'s, else
/// [`STREAM_MIN_BYTES`].
pub fn stream_min_bytes() -> u64 {
    FORCED_MIN.with(Cell::get).unwrap_or(STREAM_MIN_BYTES)
}

/// The block: one 64-byte cache line of the output.
pub const LINE_BYTES: u64 = 64;

/// A parallel loop whose one store streams.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// The STORE instruction.
    pub store: usize,
    /// The PARAM instruction of the buffer it writes.
    pub param: InstId,
    /// The loop's END instruction.
    pub end: usize,
    /// Elements per block (a line of the stored dtype).
    pub block: u64,
}

/// Whether `pl`'s loop in `p` streams its stores: its body has no inner loop and one STORE,
/// unconditional, of a 4- or 8-byte value of the param's own dtype at `param + i` (`i` the
/// loop variable itself, the PARAM before the loop), no other INDEX of that param exists
/// (the store's own INDEX may be loaded: that reads out[i] before it is written), and the
/// loop writes at least [`stream_min_bytes`].
pub fn stream_store(p: &Program, pl: &ParLoop) -> Option<Stream> {
    let r = pl.inst;
    // With no RANGE before it, the first END after the loop's RANGE closes it.
    let end = (r + 1..p.insts.len()).find(|&i| matches!(p.insts[i].op, Op::END | Op::RANGE))?;
    if p.insts[end].op != Op::END {
        return None;
    }
    let body = r + 1..end;
    let stores: Vec<usize> = body
        .clone()
        .filter(|&i| p.insts[i].op == Op::STORE)
        .collect();
    let [store] = stores[..] else { return None };
    let st = &p.insts[store];
    let [at, value] = st.src[..] else { return None };
    let index = p.inst(at);
    if index.op != Op::INDEX {
        return None;
    }
    let [param, i] = index.src[..] else {
        return None;
    };
    // The PARAM is declared before the loop (the streaming put names it after the block).
    if p.inst(param).op != Op::PARAM || param.index() >= r || i.index() != r {
        return None;
    }
    let size = p.inst(value).dtype.itemsize() as u64;
    if !matches!(size, 4 | 8) || p.inst(param).dtype != p.inst(value).dtype {
        return None;
    }
    // The store's own INDEX is the only one of that slot's buffer in the program.
    let slot = &p.inst(param).arg;
    let of_slot = |id: InstId| p.inst(id).op == Op::PARAM && &p.inst(id).arg == slot;
    let other = p.insts.iter().enumerate().any(|(j, inst)| {
        inst.op == Op::INDEX && j != at.index() && inst.src.first().is_some_and(|&b| of_slot(b))
    });
    if other {
        return None;
    }
    let bytes = u64::try_from(pl.extent).ok()?.checked_mul(size)?;
    (bytes >= stream_min_bytes()).then_some(Stream {
        store,
        param,
        end,
        block: LINE_BYTES / size,
    })
}
