//! The parallel loop of a C kernel: the outermost RANGE that the `cpu_threads` pass marked
//! ([`PARALLEL_AXIS`]). The C renderer gives such a kernel, besides `k_<name>(args)` (the
//! whole loop), an entry over part of it and the facts the CPU runtime needs to split it:
//!
//! ```c
//! void par_k_<name>(void **args, int64_t lo, int64_t hi);  /* iterations [lo, hi) */
//! const int64_t parinfo_k_<name>[2] = { extent, work };    /* work per iteration */
//! ```
//!
//! `work` is an estimate of the instructions one iteration runs (inner loops of constant
//! extent multiply, others count [`UNKNOWN_TRIPS`] times); the runtime keeps small kernels
//! on one thread with it.
//!
//! Both entries call one `static` body function, and a register (`BUFFER Reg(n)`) is an
//! automatic array declared inside that function (`float v7[1024];`, never `static`): every
//! thread running `par_k_<name>` has its own registers, as the `cpu_threads` proof requires
//! (each iteration resets a register before reading it, so a thread starting at `lo` with a
//! fresh, uninitialized copy reads what a single thread would).

use uopkit_interp::ir::Op;
use uopkit_interp::kernel::{KArg, Program};
use uopkit_interp::scalar::cast::to_i128;

pub use crate::optimize::threads::PARALLEL_AXIS;

/// The trip count assumed for an inner loop whose extent is not a constant.
pub const UNKNOWN_TRIPS: u64 = 64;

/// A kernel's parallel loop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ParLoop {
    /// The RANGE instruction.
    pub inst: usize,
    pub extent: i64,
    /// Instructions per iteration (an estimate, ≥ 1).
    pub work: u64,
}

fn const_of(p: &Program, i: usize) -> Option<i128> {
    let inst = p.insts.get(i)?;
    match (inst.op, &inst.arg) {
        (Op::CONST, KArg::Const(c)) if inst.dtype.is_int() => Some(to_i128(inst.dtype, *c)),
        _ => None,
    }
}

/// The parallel loop of `p`: the one RANGE with axis [`PARALLEL_AXIS`], when it is not
/// inside another loop and has a constant extent (None otherwise, also when there are two).
pub fn parallel_loop(p: &Program) -> Option<ParLoop> {
    let mut depth = 0usize;
    let mut found = None;
    for (i, inst) in p.insts.iter().enumerate() {
        match inst.op {
            Op::RANGE => {
                if inst.arg == KArg::Axis(PARALLEL_AXIS) {
                    if found.is_some() || depth != 0 {
                        return None;
                    }
                    found = Some(i);
                }
                depth += 1;
            }
            Op::END => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let inst = found?;
    let extent = const_of(p, p.insts[inst].src.first()?.index())?;
    let extent = i64::try_from(extent).ok().filter(|&e| e > 0)?;
    // The work of one iteration: instructions up to the matching END, inner loops times
    // their trip counts.
    let mut mult = vec![1u64];
    let mut work = 0u64;
    for inst in &p.insts[inst + 1..] {
        let m = *mult.last()?;
        match inst.op {
            Op::RANGE => {
                let trips = inst
                    .src
                    .first()
                    .and_then(|e| const_of(p, e.index()))
                    .and_then(|e| u64::try_from(e).ok())
                    .unwrap_or(UNKNOWN_TRIPS);
                mult.push(m.saturating_mul(trips));
            }
            Op::END => {
                mult.pop();
                if mult.is_empty() {
                    break;
                }
            }
            _ => {}
        }
        work = work.saturating_add(m);
    }
    Some(ParLoop {
        inst,
        extent,
        work: work.max(1),
    })
}

/// `p` with its parallel mark removed: every RANGE with axis [`PARALLEL_AXIS`] gets the
/// smallest axis no other RANGE of `p` uses. For programs that did not come from this
/// compiler's passes (a kernel-level request, a case file): their parallel loop has no
/// disjoint-write proof, so it must not run on several threads.
pub fn without_parallel_mark(p: &Program) -> Program {
    let used: std::collections::BTreeSet<u32> = p
        .insts
        .iter()
        .filter_map(|i| match (i.op, &i.arg) {
            (Op::RANGE, KArg::Axis(a)) => Some(*a),
            _ => None,
        })
        .collect();
    if !used.contains(&PARALLEL_AXIS) {
        return p.clone();
    }
    let free = (0..PARALLEL_AXIS).find(|a| !used.contains(a)).unwrap_or(0);
    let mut q = p.clone();
    for inst in &mut q.insts {
        if inst.op == Op::RANGE && inst.arg == KArg::Axis(PARALLEL_AXIS) {
            inst.arg = KArg::Axis(free);
        }
    }
    q
}
