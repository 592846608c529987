//! `cpu_tile`: register and cache tiling of a matmul-shaped reduction on the CPU target
//! (runs before `cpu_interchange`; where it fires, that pass finds no REDUCE left to move).
//!
//! The rule (`matmul_register_tile`, on an END) fires on
//!
//! ```text
//! END(END(STORE(at, v(R)), j), i)      R = REDUCE(x, k), the one REDUCE of the store
//! ```
//!
//! where i and j have constant extents M and N, k has a constant extent K, and x has a
//! LOAD `L` that does not depend on i and whose address moves by a constant s ≠ 0 when j
//! does (in the matmul `x = a[i,k]·b[k,j]`, `L = b[k,j]`, s = 1; in a 1-D convolution with
//! stride 4, `L = x[c, 4j + k]`, s = 4: the packing gathers it). The REDUCE may have several
//! reduced ranges k₀ … (a convolution's channel and tap): k below stands for their
//! row-major flat index (K their product), the fold keeps their loops, k₀ outermost, so each
//! element's order is still the REDUCE's. With V = one vector register of the dtype
//! ([`vector_bytes`]: 64 bytes, 16 float32, on a machine with AVX-512F, else 32 bytes, 8
//! float32; `UOPKIT_CPU_VECTOR_BYTES` or [`with_vector_bytes`] choose), a j-tile T = 2V (or
//! V), a block of B ∈ {4, 3, 2} rows and a row
//! panel of MB = B·R rows (R ≤ 16 blocks), it becomes
//!
//! ```text
//! for ib < M/MB:                                         (rows ib·MB …, an output axis)
//!   for jo < N/T:                                        (columns jo·T … jo·T+T−1)
//!     for k' < K: panel[k'·T + j'] = L[k := k', j := jo·T + j']   for j' < T (unrolled)
//!     for io < R:                                        (rows i₀ = ib·MB + io·B …)
//!       for q < B·T: acc[q] = identity
//!       for k < K: for l < V:                            (one statement per row and half)
//!         acc[r·T + h·V + l] = acc[r·T + h·V + l] ⊕ x[i := i₀ + r, j := jo·T + h·V + l,
//!                                                     L := panel[k·T + h·V + l]]
//!                                                        for r < B, h < T/V (unrolled)
//!       for r < B: for l < T: STORE(at, v(acc[r·T + l]))[i := i₀ + r, j := jo·T + l]
//! ```
//!
//! The inner loop over l has exactly V iterations and B·T/V independent statements: gcc
//! (`-O2 -march=native`) vectorizes it into one vector statement each, which leaves the
//! accumulators at constant addresses inside the k loop, and keeps them in B·T/V vector
//! registers. (One loop holding all the statements matters: B·T/V separate loops of V
//! each, tried in hand-written C, left the accumulators in memory once the panel was a
//! local array.) Each panel vector load is used for B rows, each broadcast element of the
//! other operand for T columns; the panel (K·T elements, at most [`MAX_PANEL_BYTES`]) is
//! contiguous, so the k loop streams it from L1/L2 instead of walking a column of b with
//! the row stride.
//!
//! Exactness: the fold of every output element is the sequential REDUCE's. Element (i, j)
//! has its own accumulator `acc[r·T + h·V + l]` (for one (ib, jo, io) iteration, i and j
//! determine r, h, l and vice versa), which starts at the reduce identity and receives, in
//! the k loop, `x(i, j, k)` for k = 0, 1, …, K−1 in that order, one ⊕ per k, each value
//! computed by the same ops on the same operands as in `x` (the panel holds copies of
//! L's bits, made before they are read; a copy does not change bits, NaN payloads
//! included). Nothing else touches that accumulator before its value is stored. So the
//! same operations run on the same values in the same order — what `expand_reduce`'s
//! single accumulator does — and the bits are the same (−0, ±inf, NaN, integer wrap):
//! the interleaving of *other* elements' folds between them is not observable, because
//! x reads nothing the kernel writes (no AFTER, register, STORE, nested REDUCE, and not
//! the stored parameter; the same check as `cpu_interchange`), and C never contracts the
//! `⊕` with the product (`-ffp-contract=off`). The same holds for a declared order that
//! is not sequential only where the op table says the fold does not depend on the order
//! (integer ADD/MUL/MAX, which wrap).
//!
//! The stores run in another order than row-major, so the rule also asks that they could
//! not observe it: the store address is `c·i + j + rest` with |c| ≥ N and no loaded value
//! (every (i, j) writes its own element), and the stored value and gate read nothing the
//! kernel writes (besides the REDUCE).
//!
//! Loop order: where the row operand is small (M·K elements of the accumulator's size
//! within [`COLUMNS_OUTER_MAX_BYTES`]) and there are at least [`MIN_ROW_PANELS`] column
//! tiles, there is no ib loop: jo is the outermost loop and io runs over all M/B blocks, so
//! each panel is packed once (a convolution's 64 output channels: the panel packing had
//! been a third of the time) and `cpu_threads` splits the column tiles (their stores
//! `out[c·(i₀ + r) + jo·T + l]` are disjoint by its mixed-radix rule). Otherwise R is capped
//! so that there are [`MIN_ROW_PANELS`] row panels where M has that many blocks.
//!
//! The panel row's T copies are T statements, not a loop of T: gcc turns them into vector
//! copies, or for a strided L into in-register transposes.
//!
//! Long reductions: T is the widest of 2V, V that divides N and whose panel fits
//! [`MAX_PANEL_BYTES`], either whole (K·T) or cut in k blocks of KB·T for the largest
//! divisor KB ≥ [`MIN_K_BLOCK`] of K that fits (the nest of `k_blocked`: each row panel's
//! accumulators live in a register `all` between blocks, copied into the block's `acc` and
//! back around each block's k loop, which is the loop above).
//!
//! Remainders: the rule fires only where the blocks divide (B | M, T | N) and a panel fits;
//! other shapes are left to `cpu_interchange`. k blocks only for one reduced range; only float32,
//! float64 and 32-bit integer accumulators and panels (what AVX2 computes in vectors).
//!
//! Checked in the object code (gcc 12, `-O2 -march=native -ffp-contract=off`, Zen 3, the
//! 1024² float32 kernel; `print_the_c_of_the_1024_matmul` in tests/cpu_tile.rs prints its
//! C): the k loop is 4 `vbroadcastss`, 8 `vmulps` of a broadcast by a panel vector and 8
//! `vaddps` into ymm3–ymm10, with no load or store of an accumulator inside it.
//!
//! Measured (`uopkit bench --workloads matmul`, 1024² float32, one thread, a shared and
//! loaded 2-vCPU Zen 3): two to three times the GFLOP/s of `cpu_interchange`'s row alone.
//! The bench's conv (x 64×4096, w 64×64×4, stride 4; 2-vCPU Zen 5): 8.3 GFLOP/s untiled
//! (two reduced ranges and a strided operand were refused), 63 tiled with packing per row
//! panel, 75–85 with the column tiles outermost, on threads, and the unrolled packing.

use std::collections::BTreeMap;

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op};

use crate::kgraph::{add, alu, const_int, i64c, konst, substitute, Ranges};
use crate::optimize::interchange::{
    after, per_element_in_order, reads_only_inputs, slope, store_into_param,
};
use crate::optimize::reduce::{end_all, pass_id};
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

/// Bytes in the vector register the inner loop is sized for where the machine has no wider
/// one: 32 (AVX2, and what every x86-64 machine uopkit's kernels run on fast has).
pub const VECTOR_BYTES: i128 = 32;

/// The widest vector width the tile is sized for: 64 bytes (AVX-512), on a machine whose
/// CPU has AVX-512F (gcc's `-march=native` then computes the V-long loop in zmm registers,
/// of which there are 32: B·T/V = 8 accumulators fit as with AVX2).
pub const WIDE_VECTOR_BYTES: i128 = 64;

/// The environment variable that sets the vector width the tile is sized for: `32` or `64`
/// (unset, empty or anything else: the machine's, [`host_vector_bytes`]).
pub const VECTOR_BYTES_ENV: &str = "UOPKIT_CPU_VECTOR_BYTES";

/// The vector width of this machine: [`WIDE_VECTOR_BYTES`] with AVX-512F, else
/// [`VECTOR_BYTES`]. The C kernels are compiled with `-march=native` on the machine that
/// runs them, and the kernel cache's key holds the CPU's flags.
pub fn host_vector_bytes() -> i128 {
    static HOST: std::sync::OnceLock<i128> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return WIDE_VECTOR_BYTES;
        }
        VECTOR_BYTES
    })
}

thread_local! {
    /// The width [`with_vector_bytes`] set for tiles made on this thread.
    static FORCED_WIDTH: std::cell::Cell<Option<i128>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every tile that `f` makes on this thread sized for `bytes`-wide vectors
/// (32 or 64; anything else is taken as 32), whatever the machine and the environment: tests
/// pin C text and tile shapes so. The previous setting is back when `f` returns or unwinds.
pub fn with_vector_bytes<R>(bytes: i128, f: impl FnOnce() -> R) -> R {
    let w = if bytes == WIDE_VECTOR_BYTES {
        WIDE_VECTOR_BYTES
    } else {
        VECTOR_BYTES
    };
    crate::scoped::with_cell(&FORCED_WIDTH, Some(w), f)
}

/// The vector width tiles are sized for now: [`with_vector_bytes`]'s, else
/// [`VECTOR_BYTES_ENV`]'s (`32` or `64`), else [`host_vector_bytes`].
pub fn vector_bytes() -> i128 {
    if let Some(w) = FORCED_WIDTH.with(std::cell::Cell::get) {
        return w;
    }
    match std::env::var(VECTOR_BYTES_ENV).as_deref() {
        Ok("32") => VECTOR_BYTES,
        Ok("64") => WIDE_VECTOR_BYTES,
        _ => host_vector_bytes(),
    }
}

/// The row blocks tried, largest first (B rows × T/V vectors of accumulators: at most 8
/// of the 16 AVX2 registers, or of AVX-512's 32, with room for the panel loads and the
/// broadcast; 64-byte tiles forced on an AVX2 machine use all 16, slower but as exact).
pub const ROW_BLOCKS: [i128; 3] = [4, 3, 2];

/// The most row blocks one panel of B is reused for (R; MB = B·R rows).
pub const MAX_BLOCKS_PER_PANEL: i128 = 16;

/// The fewest row panels (M/MB) a tile is cut into where M has that many row blocks: the
/// row-panel loop is the outermost, the one `cpu_threads` runs on threads.
pub const MIN_ROW_PANELS: i128 = 4;

/// The largest row operand (M·K elements of the accumulator's size) for which the column
/// tiles are the outermost loop (each panel packed once, the row operand re-read from cache
/// for every column tile).
pub const COLUMNS_OUTER_MAX_BYTES: i128 = 256 * 1024;

/// The largest packed panel (K·T elements, or KB·T in a k-blocked nest) the rule builds, in
/// bytes (a local array of each thread's stack).
pub const MAX_PANEL_BYTES: i128 = 128 * 1024;

/// The shortest k block a panel over [`MAX_PANEL_BYTES`] is cut into (a K with no divisor
/// between this and the largest block that fits is left to narrower tiles or to
/// `cpu_interchange`).
pub const MIN_K_BLOCK: i128 = 64;

pub fn tile() -> RuleSet {
    RuleSet::new(
        "cpu_tile",
        vec![Rule::new(
            "matmul_register_tile",
            Pat::node(Op::END),
            register_tile,
        )],
    )
}

/// A RANGE with its own tag (the nest has several loops of one extent: the tag keeps them
/// apart under hash-consing).
fn range(g: &mut Graph, extent: i128, axis: u32, tag: u32) -> NodeId {
    let e = i64c(g, extent);
    add(g, Op::RANGE, DType::Int64, vec![e], KArg::Axis(axis), tag)
}

/// `a·m + b` in int64 (`b` when a is absent; no MUL by 1, no ADD of 0).
fn affine(g: &mut Graph, a: Option<NodeId>, m: i128, b: Option<NodeId>) -> NodeId {
    let am = a.map(|a| {
        if m == 1 {
            a
        } else {
            let mc = i64c(g, m);
            alu(g, Op::MUL, DType::Int64, vec![a, mc])
        }
    });
    match (am, b) {
        (Some(x), Some(y)) => alu(g, Op::ADD, DType::Int64, vec![x, y]),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => i64c(g, 0),
    }
}

/// `base + c` for a constant c (`base` itself when c = 0).
fn plus(g: &mut Graph, base: NodeId, c: i128) -> NodeId {
    if c == 0 {
        return base;
    }
    let cc = i64c(g, c);
    alu(g, Op::ADD, DType::Int64, vec![base, cc])
}

/// The constant extent of a RANGE of int64.
fn extent_of(g: &Graph, r: NodeId) -> Option<i128> {
    let n = g.node(r);
    if n.op != Op::RANGE || n.dtype != DType::Int64 {
        return None;
    }
    const_int(g, *n.src.first()?)
}

/// Element size in bytes of the dtypes the tile is made for: float32, float64 and 32-bit
/// ints, which AVX2 multiplies and adds in vectors (64-bit integer products it has not).
fn vector_itemsize(dt: DType) -> Option<i128> {
    match dt {
        DType::Float32 | DType::Int32 | DType::UInt32 => Some(4),
        DType::Float64 => Some(8),
        _ => None,
    }
}

/// The nodes `roots` reach without passing through `stop` (nor `stop` itself).
fn reach_above(g: &Graph, roots: &[NodeId], stop: NodeId) -> Vec<NodeId> {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<NodeId> = roots.iter().copied().filter(|&r| r != stop).collect();
    while let Some(c) = stack.pop() {
        if seen.insert(c) {
            stack.extend(g.node(c).src.iter().copied().filter(|&s| s != stop));
        }
    }
    seen.into_iter().collect()
}

fn register_tile(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let outer_end = g.node(id).clone();
    let [inner, i] = outer_end.src[..] else {
        return None;
    };
    let m = extent_of(g, i)?;
    let inner_end = g.node(inner).clone();
    if inner_end.op != Op::END {
        return None;
    }
    let [body, j] = inner_end.src[..] else {
        return None;
    };
    let n = extent_of(g, j)?;
    let (st, base) = store_into_param(g, body)?;
    // The one REDUCE anywhere in the store (value, address, gate), inside loops i and j.
    let mut ranges = Ranges::default();
    let reds: Vec<NodeId> = g
        .reachable(&[body])
        .into_iter()
        .filter(|&r| g.node(r).op == Op::REDUCE)
        .collect();
    let [red] = reds[..] else {
        return None;
    };
    let open = ranges.of(g, red).clone();
    if !open.contains(&i) || !open.contains(&j) {
        return None;
    }
    let rn = g.node(red).clone();
    let Arg::Reduce { op, ref order, .. } = rn.arg else {
        return None;
    };
    let dt = rn.dtype;
    if !per_element_in_order(op, order, dt) {
        return None;
    }
    // One or more reduced ranges k₀ … k₋₁ (k₀ outermost: the fold's row-major order), each
    // of a constant extent; K is their product and the flat k their row-major index.
    let (&x, ks) = rn.src.split_first()?;
    let kext: Vec<i128> = ks
        .iter()
        .map(|&k| extent_of(g, k).filter(|&e| e >= 1))
        .collect::<Option<_>>()?;
    let kk = kext
        .iter()
        .try_fold(1i128, |p, &e| p.checked_mul(e))
        .filter(|_| !ks.is_empty())?;
    let reach_x = g.reachable(&[x]);
    if !reads_only_inputs(g, &reach_x, base) {
        return None;
    }
    // The stores go in another order than row-major: each (i, j) must store into its own
    // element (an address c·i + j + rest with |c| ≥ N, no loaded value in it), and the
    // stored value and gate may not read what the kernel writes (beyond the REDUCE).
    let addr = *g.node(st.src[0]).src.get(1)?;
    let row_stride = slope(g, addr, i)?;
    if slope(g, addr, j)? != 1
        || (m > 1 && row_stride.checked_abs()? < n)
        || g.reachable(&[addr])
            .iter()
            .any(|&c| g.node(c).op == Op::LOAD)
    {
        return None;
    }
    let reach_v = reach_above(g, &st.src[1..], red);
    if !reads_only_inputs(g, &reach_v, base) {
        return None;
    }
    // The store's buffer may wait (AFTER) only on effects outside loops i and j: an effect
    // inside them would be placed inside the tiled nest and run once per column tile, not
    // once per (i, j), after stores it used to precede.
    let buf = *g.node(st.src[0]).src.first()?;
    if g.reachable(&[buf]).into_iter().any(|e| {
        matches!(g.node(e).op, Op::STORE | Op::END | Op::GROUP | Op::BARRIER) && {
            let r = ranges.of(g, e);
            r.contains(&i) || r.contains(&j)
        }
    }) {
        return None;
    }
    // The panel load: independent of i, moving by a constant s ≠ 0 along j (contiguous,
    // s = 1, preferred; a strided one — a convolution's windows — is packed the same way).
    let j_slope = |g: &Graph, c: NodeId| -> Option<i128> {
        let cn = g.node(c);
        if cn.op != Op::LOAD || g.reachable(&[c]).contains(&i) {
            return None;
        }
        let an = g.node(*cn.src.first()?);
        if an.op != Op::INDEX {
            return None;
        }
        slope(g, *an.src.get(1)?, j).filter(|&s| s != 0)
    };
    let l = reach_x
        .iter()
        .copied()
        .find(|&c| j_slope(g, c) == Some(1))
        .or_else(|| reach_x.iter().copied().find(|&c| j_slope(g, c).is_some()))?;
    let ldt = g.node(l).dtype;
    // The shape of the tile.
    let vw = vector_bytes() / vector_itemsize(dt)?;
    let lsize = vector_itemsize(ldt)?;
    // The tile: the widest T that divides N whose panel, K·T elements or (k-blocked) KB·T
    // for a divisor KB ≥ MIN_K_BLOCK of K, fits MAX_PANEL_BYTES.
    if kk < 1 {
        return None;
    }
    let (t, kbl) = [2 * vw, vw]
        .into_iter()
        .filter(|&t| n % t == 0)
        .find_map(|t| {
            k_block(kk, t.checked_mul(lsize)?)
                // k blocks are cut from one reduced range only: with several, a narrower
                // tile whose whole panel fits is tried instead.
                .filter(|&kbl| ks.len() == 1 || kbl == kk)
                .map(|kbl| (t, kbl))
        })?;
    let b = ROW_BLOCKS.into_iter().find(|b| m % b == 0)?;
    let blocks = m / b;
    // R: the most blocks (≤ MAX_BLOCKS_PER_PANEL) that still leave MIN_ROW_PANELS row
    // panels where there are that many blocks (the row panels are what threads share).
    let most = MAX_BLOCKS_PER_PANEL.min((blocks / MIN_ROW_PANELS).max(1));
    let r = (1..=most).rev().find(|r| blocks % r == 0).unwrap_or(1);
    let mb = b * r;
    if kbl < kk {
        // k blocks are cut from one reduced range only.
        let [k] = ks[..] else {
            return None;
        };
        let nest = Nest {
            x,
            k,
            l,
            i,
            j,
            red,
            body,
            op,
            dt,
            ldt,
            vw,
        };
        let shape = Shape {
            m,
            n,
            kk,
            t,
            b,
            r,
            kbl,
        };
        let outer: Vec<NodeId> = ranges.of(g, id).iter().copied().collect();
        return k_blocked(g, id, &outer, &nest, shape);
    }
    let panel = kk.checked_mul(t)?;
    let outer: Vec<NodeId> = ranges.of(g, id).iter().copied().collect();
    // Columns outermost where the row operand is small (M·K elements within
    // COLUMNS_OUTER_MAX_BYTES, so it stays in cache across column tiles) and there are
    // MIN_ROW_PANELS column tiles: each panel is packed once, not once per row panel, and
    // the column tiles are what threads share. Otherwise row panels outermost.
    let columns_outer = m.checked_mul(kk)?.checked_mul(vector_itemsize(dt)?)?
        <= COLUMNS_OUTER_MAX_BYTES
        && n / t >= MIN_ROW_PANELS;
    let (r, mb) = if columns_outer { (blocks, m) } else { (r, mb) };

    let ax = |n: u32| pass_id(id, n);
    let ib = (!columns_outer).then(|| range(g, m / mb, ax(0), 1));
    let jo = range(g, n / t, ax(1), 2);
    let io = (r > 1).then(|| range(g, r, ax(2), 3));
    // Row i₀ of the block (ib·MB + io·B), column jo·T.
    let ibm = ib.map(|ib| affine(g, Some(ib), mb, None));
    let iob = io.map(|io| affine(g, Some(io), b, None));
    let i0 = match (ibm, iob) {
        (Some(x), Some(y)) => alu(g, Op::ADD, DType::Int64, vec![x, y]),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => i64c(g, 0),
    };
    let j0 = affine(g, Some(jo), t, None);

    // The panel: panel[k'·T + j'] = L[k := k', j := jo·T + j'].
    let pbuf = add(
        g,
        Op::BUFFER,
        ldt,
        vec![],
        KArg::Reg(usize::try_from(panel).ok()?),
        pass_id(id, 1),
    );
    // One packing loop per reduced range (tags 16, 17, …), the panel row their flat index.
    let kps: Vec<NodeId> = kext
        .iter()
        .zip(16u32..)
        .map(|(&e, tag)| range(g, e, ax(3), tag))
        .collect();
    let lsubs: BTreeMap<NodeId, NodeId> = ks.iter().copied().zip(kps.iter().copied()).collect();
    let mut pdeps = outer.clone();
    pdeps.extend(ib);
    pdeps.push(jo);
    let pa = after(g, pbuf, &pdeps);
    let kpf = flat(g, &kps, &kext);
    let prow = PanelRow { l, j, j0, t, ldt };
    let pe = prow.build(g, pa, lsubs, kpf);
    let packed = end_all(g, pe, &kps);

    // The accumulators of one row block: acc[q] = identity.
    let acc = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Reg(usize::try_from(b.checked_mul(t)?).ok()?),
        pass_id(id, 0),
    );
    let identity = konst(g, dt, reduce_identity(op, dt));
    let q = range(g, b * t, ax(3), 6);
    let mut adeps = pdeps.clone();
    adeps.extend(io);
    let a0 = after(g, acc, &adeps);
    let at0 = alu(g, Op::INDEX, dt, vec![a0, q]);
    let init = add(
        g,
        Op::STORE,
        DType::Void,
        vec![at0, identity],
        KArg::None,
        0,
    );
    let init = add(g, Op::END, DType::Void, vec![init, q], KArg::None, 0);

    // for k: for l < V: one statement per row r and half h.
    let lane = range(g, vw, ax(3), 7);
    let pview = after(g, pbuf, &[packed]);
    let mut a1deps = vec![init];
    a1deps.extend_from_slice(ks);
    a1deps.push(lane);
    let a1 = after(g, acc, &a1deps);
    let fold = Fold {
        x,
        l,
        i,
        j,
        op,
        dt,
        ldt,
        vw,
        b,
        t,
    };
    let kf = flat(g, ks, &kext);
    let folded = fold.build(g, pview, a1, (i0, j0), lane, (ks, kf, None));

    // for r < B: for l < T: STORE(at, v(acc[r·T + l])) at row i₀ + r, column jo·T + l.
    let rr = range(g, b, ax(3), 8);
    let ll = range(g, t, ax(3), 9);
    let done = after(g, acc, &[folded]);
    let slot = affine(g, Some(rr), t, Some(ll));
    let at = alu(g, Op::INDEX, dt, vec![done, slot]);
    let val = alu(g, Op::LOAD, dt, vec![at]);
    let ipos = alu(g, Op::ADD, DType::Int64, vec![i0, rr]);
    let jpos = alu(g, Op::ADD, DType::Int64, vec![j0, ll]);
    let stored = substitute(g, body, &BTreeMap::from([(red, val), (i, ipos), (j, jpos)]));
    let mut out = add(g, Op::END, DType::Void, vec![stored, ll], KArg::None, 0);
    out = add(g, Op::END, DType::Void, vec![out, rr], KArg::None, 0);
    if let Some(io) = io {
        out = add(g, Op::END, DType::Void, vec![out, io], KArg::None, 0);
    }
    out = add(g, Op::END, DType::Void, vec![out, jo], KArg::None, 0);
    Some(match ib {
        Some(ib) => add(g, Op::END, DType::Void, vec![out, ib], KArg::None, 0),
        None => out,
    })
}

/// The fold of one row block: for l < V, one update per row r < B and vector h < T/V,
/// `acc[r·T + h·V + l] ⊕= x[L := panel[k·T + h·V + l], i := i₀ + r, j := j₀ + h·V + l]`,
/// inside the k loop `kl` (with `k := kv` substituted in x where the loop is a k block's).
struct Fold {
    x: NodeId,
    l: NodeId,
    i: NodeId,
    j: NodeId,
    op: Op,
    dt: DType,
    ldt: DType,
    vw: i128,
    b: i128,
    t: i128,
}

impl Fold {
    /// The END of the k loop around the updates.
    fn build(
        &self,
        g: &mut Graph,
        pview: NodeId,
        acc: NodeId,
        (i0, j0): (NodeId, NodeId),
        lane: NodeId,
        (kls, kflat, kv): (&[NodeId], NodeId, Option<(NodeId, NodeId)>),
    ) -> NodeId {
        let Fold {
            x,
            l,
            i,
            j,
            op,
            dt,
            ldt,
            vw,
            b,
            t,
        } = *self;
        let kt = affine(g, Some(kflat), t, None);
        let mut upds = vec![];
        for row in 0..b {
            let ipos = plus(g, i0, row);
            for h in 0..t / vw {
                let col = plus(g, lane, h * vw);
                let jpos = alu(g, Op::ADD, DType::Int64, vec![j0, col]);
                let paddr = alu(g, Op::ADD, DType::Int64, vec![kt, col]);
                let pat = alu(g, Op::INDEX, ldt, vec![pview, paddr]);
                let pval = alu(g, Op::LOAD, ldt, vec![pat]);
                let mut subs = BTreeMap::from([(l, pval), (i, ipos), (j, jpos)]);
                subs.extend(kv);
                let xq = substitute(g, x, &subs);
                let slot = plus(g, lane, row * t + h * vw);
                let cur = alu(g, Op::INDEX, dt, vec![acc, slot]);
                let old = alu(g, Op::LOAD, dt, vec![cur]);
                let next = alu(g, op, dt, vec![old, xq]);
                upds.push(add(
                    g,
                    Op::STORE,
                    DType::Void,
                    vec![cur, next],
                    KArg::None,
                    0,
                ));
            }
        }
        let group = add(g, Op::GROUP, DType::Void, upds, KArg::None, 0);
        let e = add(g, Op::END, DType::Void, vec![group, lane], KArg::None, 0);
        end_all(g, e, kls)
    }
}

/// One row of the packed panel: `panel[row·T + j'] = L[subs, j := j₀ + j']` for j' < T, as
/// T statements rather than a loop of T. gcc (-O2) turns them into vector copies, or, where
/// L is strided along j (a convolution's windows), into in-register transposes; the same
/// copy as a loop of 16 stayed scalar, a third of a 1-D convolution's time.
struct PanelRow {
    l: NodeId,
    j: NodeId,
    j0: NodeId,
    t: i128,
    ldt: DType,
}

impl PanelRow {
    /// The GROUP of the T copies of panel row `row` (`pa`: the panel, after what it waits on).
    fn build(
        &self,
        g: &mut Graph,
        pa: NodeId,
        mut subs: BTreeMap<NodeId, NodeId>,
        row: NodeId,
    ) -> NodeId {
        let PanelRow { l, j, j0, t, ldt } = *self;
        let base = affine(g, Some(row), t, None);
        let copies: Vec<NodeId> = (0..t)
            .map(|c| {
                let jpos = plus(g, j0, c);
                subs.insert(j, jpos);
                let lp = substitute(g, l, &subs);
                let paddr = plus(g, base, c);
                let pat = alu(g, Op::INDEX, ldt, vec![pa, paddr]);
                add(g, Op::STORE, DType::Void, vec![pat, lp], KArg::None, 0)
            })
            .collect();
        add(g, Op::GROUP, DType::Void, copies, KArg::None, 0)
    }
}

/// The row-major flat index of loops `rs` of extents `ext` (r₀ outermost):
/// `(…(r₀·e₁ + r₁)·e₂ + …) + rₙ₋₁`; r₀ itself for one loop.
fn flat(g: &mut Graph, rs: &[NodeId], ext: &[i128]) -> NodeId {
    let Some((&first, rest)) = rs.split_first() else {
        return i64c(g, 0);
    };
    rest.iter()
        .zip(ext.iter().skip(1))
        .fold(first, |f, (&r, &e)| affine(g, Some(f), e, Some(r)))
}

/// The k block of a panel of `row_bytes` per k (T elements): K itself when the K·T panel
/// fits [`MAX_PANEL_BYTES`], else the largest divisor of K at least [`MIN_K_BLOCK`] whose
/// panel fits; None when there is none.
fn k_block(kk: i128, row_bytes: i128) -> Option<i128> {
    let most = MAX_PANEL_BYTES / row_bytes.max(1);
    if kk <= most {
        return Some(kk);
    }
    (MIN_K_BLOCK..=most).rev().find(|d| kk % d == 0)
}

/// The matched matmul nest: the REDUCE's operand x over range k, the panel load l, the
/// output loops i and j, the store `body` holding REDUCE `red` (op, dtype dt), the panel's
/// dtype and the vector width in elements.
struct Nest {
    x: NodeId,
    k: NodeId,
    l: NodeId,
    i: NodeId,
    j: NodeId,
    red: NodeId,
    body: NodeId,
    op: Op,
    dt: DType,
    ldt: DType,
    vw: i128,
}

/// The tile of a k-blocked nest: M×N outputs, K reduced, T columns, B rows a block, R
/// blocks a row panel, KB the k block (a divisor of K below it).
#[derive(Clone, Copy)]
struct Shape {
    m: i128,
    n: i128,
    kk: i128,
    t: i128,
    b: i128,
    r: i128,
    kbl: i128,
}

/// The nest with the k loop cut in blocks of KB, for a K·T panel over
/// [`MAX_PANEL_BYTES`] (see the module docs for the unblocked nest):
///
/// ```text
/// for ib < M/MB: for jo < N/T:
///   for q < MB·T: all[q] = identity
///   for kb < K/KB:
///     for k' < KB: for j' < T: panel[k'·T + j'] = L[k := kb·KB + k', j := jo·T + j']
///     for io < R:
///       for q < B·T: acc[q] = all[io·B·T + q]
///       for k' < KB: for l < V: acc[r·T + h·V + l] ⊕= x[k := kb·KB + k', …]   (r, h unrolled)
///       for q < B·T: all[io·B·T + q] = acc[q]
///   for io < R: for r < B: for l < T: STORE(at, v(all[io·B·T + r·T + l]))
/// ```
///
/// Exact for the same reason as the unblocked nest: element (i, j) has its own slot of
/// `all`, which starts at the identity, and each k block copies it into its own slot of
/// `acc`, folds that block's k in ascending order, and copies it back (copies keep bits), so
/// the element receives x(i, j, 0), …, x(i, j, K−1) in that order, one ⊕ each, and nothing
/// else touches the slot before it is stored.
fn k_blocked(
    g: &mut Graph,
    id: NodeId,
    outer: &[NodeId],
    nest: &Nest,
    sh: Shape,
) -> Option<NodeId> {
    let &Nest {
        x,
        k,
        l,
        i,
        j,
        red,
        body,
        op,
        dt,
        ldt,
        vw,
    } = nest;
    let Shape {
        m,
        n,
        kk,
        t,
        b,
        r,
        kbl,
    } = sh;
    let mb = b * r;
    let bt = b.checked_mul(t)?;
    let ax = |n: u32| pass_id(id, n);
    let ib = range(g, m / mb, ax(0), 1);
    let jo = range(g, n / t, ax(1), 2);
    let kb = range(g, kk / kbl, ax(3), 10);
    let j0 = affine(g, Some(jo), t, None);
    let mut tile_deps = outer.to_vec();
    tile_deps.extend([ib, jo]);

    // all[q] = identity, for the MB·T outputs of the tile.
    let all = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Reg(usize::try_from(mb.checked_mul(t)?).ok()?),
        pass_id(id, 2),
    );
    let identity = konst(g, dt, reduce_identity(op, dt));
    let q0 = range(g, mb * t, ax(3), 11);
    let all0 = after(g, all, &tile_deps);
    let at = alu(g, Op::INDEX, dt, vec![all0, q0]);
    let st = add(g, Op::STORE, DType::Void, vec![at, identity], KArg::None, 0);
    let init_all = add(g, Op::END, DType::Void, vec![st, q0], KArg::None, 0);

    // The panel of this k block.
    let pbuf = add(
        g,
        Op::BUFFER,
        ldt,
        vec![],
        KArg::Reg(usize::try_from(kbl.checked_mul(t)?).ok()?),
        pass_id(id, 1),
    );
    let kp = range(g, kbl, ax(3), 4);
    let kbk = affine(g, Some(kb), kbl, None);
    let kpos = alu(g, Op::ADD, DType::Int64, vec![kbk, kp]);
    let mut pdeps = tile_deps.clone();
    pdeps.push(kb);
    let pa = after(g, pbuf, &pdeps);
    let prow = PanelRow { l, j, j0, t, ldt };
    let pe = prow.build(g, pa, BTreeMap::from([(k, kpos)]), kp);
    let packed = add(g, Op::END, DType::Void, vec![pe, kp], KArg::None, 0);

    // One row block: copy in, fold the block, copy back.
    let io = (r > 1).then(|| range(g, r, ax(2), 3));
    let ibm = affine(g, Some(ib), mb, None);
    let i0 = match io {
        Some(io) => {
            let iob = affine(g, Some(io), b, None);
            alu(g, Op::ADD, DType::Int64, vec![ibm, iob])
        }
        None => ibm,
    };
    let acc = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Reg(usize::try_from(bt).ok()?),
        pass_id(id, 0),
    );
    let mut adeps = pdeps.clone();
    adeps.extend(io);
    let q1 = range(g, bt, ax(3), 6);
    let a0 = after(g, acc, &adeps);
    let at_acc = alu(g, Op::INDEX, dt, vec![a0, q1]);
    let mut in_deps = vec![init_all, kb];
    in_deps.extend(io);
    let all_in = after(g, all, &in_deps);
    let slot_in = affine(g, io, bt, Some(q1));
    let at_all = alu(g, Op::INDEX, dt, vec![all_in, slot_in]);
    let v_in = alu(g, Op::LOAD, dt, vec![at_all]);
    let cin = add(g, Op::STORE, DType::Void, vec![at_acc, v_in], KArg::None, 0);
    let cin = add(g, Op::END, DType::Void, vec![cin, q1], KArg::None, 0);

    let kin = range(g, kbl, ax(3), 12);
    let lane = range(g, vw, ax(3), 7);
    let pview = after(g, pbuf, &[packed]);
    let a1 = after(g, acc, &[cin, kin, lane]);
    let kfull = alu(g, Op::ADD, DType::Int64, vec![kbk, kin]);
    let fold = Fold {
        x,
        l,
        i,
        j,
        op,
        dt,
        ldt,
        vw,
        b,
        t,
    };
    let folded = fold.build(
        g,
        pview,
        a1,
        (i0, j0),
        lane,
        (&[kin], kin, Some((k, kfull))),
    );

    let q2 = range(g, bt, ax(3), 13);
    let a2 = after(g, acc, &[folded]);
    let at_acc = alu(g, Op::INDEX, dt, vec![a2, q2]);
    let v_out = alu(g, Op::LOAD, dt, vec![at_acc]);
    let all_out = after(g, all, &[folded]);
    let slot_out = affine(g, io, bt, Some(q2));
    let at_all = alu(g, Op::INDEX, dt, vec![all_out, slot_out]);
    let cout = add(
        g,
        Op::STORE,
        DType::Void,
        vec![at_all, v_out],
        KArg::None,
        0,
    );
    let mut blk = add(g, Op::END, DType::Void, vec![cout, q2], KArg::None, 0);
    if let Some(io) = io {
        blk = add(g, Op::END, DType::Void, vec![blk, io], KArg::None, 0);
    }
    let kb_end = add(g, Op::END, DType::Void, vec![blk, kb], KArg::None, 0);

    // The stores: for io < R: for r < B: for l < T, from all[io·B·T + r·T + l].
    let io2 = (r > 1).then(|| range(g, r, ax(2), 14));
    let i0s = match io2 {
        Some(io2) => {
            let iob = affine(g, Some(io2), b, None);
            alu(g, Op::ADD, DType::Int64, vec![ibm, iob])
        }
        None => ibm,
    };
    let rr = range(g, b, ax(3), 8);
    let ll = range(g, t, ax(3), 9);
    let done = after(g, all, &[kb_end]);
    let row_slot = affine(g, Some(rr), t, Some(ll));
    let slot = affine(g, io2, bt, Some(row_slot));
    let at = alu(g, Op::INDEX, dt, vec![done, slot]);
    let val = alu(g, Op::LOAD, dt, vec![at]);
    let ipos = alu(g, Op::ADD, DType::Int64, vec![i0s, rr]);
    let jpos = alu(g, Op::ADD, DType::Int64, vec![j0, ll]);
    let stored = substitute(g, body, &BTreeMap::from([(red, val), (i, ipos), (j, jpos)]));
    let mut out = add(g, Op::END, DType::Void, vec![stored, ll], KArg::None, 0);
    out = add(g, Op::END, DType::Void, vec![out, rr], KArg::None, 0);
    if let Some(io2) = io2 {
        out = add(g, Op::END, DType::Void, vec![out, io2], KArg::None, 0);
    }
    out = add(g, Op::END, DType::Void, vec![out, jo], KArg::None, 0);
    Some(add(g, Op::END, DType::Void, vec![out, ib], KArg::None, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kgraph::reduce;
    use uopkit_interp::ir::ReduceOrder;

    /// `out[i·N + j] = Σ_k a[i·K + k]·b[k·N + j]` (M = 8, K = 3, N = 16, float32) as a
    /// kernel graph; with `effect_in_i`, the store's buffer waits on `out[i·N] = 1.0`, an
    /// effect inside loop i. Returns the graph and the outer END.
    fn matmul_kernel(effect_in_i: bool) -> (Graph, NodeId) {
        let mut g = Graph::default();
        let f = DType::Float32;
        let out = add(&mut g, Op::PARAM, f, vec![], KArg::Param(0), 0);
        let a = add(&mut g, Op::PARAM, f, vec![], KArg::Param(1), 0);
        let b = add(&mut g, Op::PARAM, f, vec![], KArg::Param(2), 0);
        let (em, ek, en) = (i64c(&mut g, 8), i64c(&mut g, 3), i64c(&mut g, 16));
        let i = add(&mut g, Op::RANGE, DType::Int64, vec![em], KArg::Axis(0), 0);
        let j = add(&mut g, Op::RANGE, DType::Int64, vec![en], KArg::Axis(1), 0);
        let k = add(&mut g, Op::RANGE, DType::Int64, vec![ek], KArg::Axis(2), 0);
        let ik = alu(&mut g, Op::MUL, DType::Int64, vec![i, ek]);
        let ia = alu(&mut g, Op::ADD, DType::Int64, vec![ik, k]);
        let kn = alu(&mut g, Op::MUL, DType::Int64, vec![k, en]);
        let ib = alu(&mut g, Op::ADD, DType::Int64, vec![kn, j]);
        let at_a = alu(&mut g, Op::INDEX, f, vec![a, ia]);
        let at_b = alu(&mut g, Op::INDEX, f, vec![b, ib]);
        let la = alu(&mut g, Op::LOAD, f, vec![at_a]);
        let lb = alu(&mut g, Op::LOAD, f, vec![at_b]);
        let p = alu(&mut g, Op::MUL, f, vec![la, lb]);
        let r = reduce(&mut g, Op::ADD, f, p, &[k], ReduceOrder::Sequential);
        let i_n = alu(&mut g, Op::MUL, DType::Int64, vec![i, en]);
        let io = alu(&mut g, Op::ADD, DType::Int64, vec![i_n, j]);
        let buf = if effect_in_i {
            let at0 = alu(&mut g, Op::INDEX, f, vec![out, i_n]);
            let one = konst(&mut g, f, 1f32.to_bits() as u64);
            let e = add(
                &mut g,
                Op::STORE,
                DType::Void,
                vec![at0, one],
                KArg::None,
                0,
            );
            after(&mut g, out, &[e])
        } else {
            out
        };
        let at = alu(&mut g, Op::INDEX, f, vec![buf, io]);
        let st = add(&mut g, Op::STORE, DType::Void, vec![at, r], KArg::None, 0);
        let ej = add(&mut g, Op::END, DType::Void, vec![st, j], KArg::None, 0);
        let ei = add(&mut g, Op::END, DType::Void, vec![ej, i], KArg::None, 0);
        (g, ei)
    }

    #[test]
    fn a_plain_matmul_nest_is_tiled() {
        let (mut g, e) = matmul_kernel(false);
        assert!(register_tile(&mut g, &Captures::default(), e).is_some());
    }

    #[test]
    fn a_store_whose_buffer_waits_on_an_effect_inside_the_nest_is_not_tiled() {
        // Tiled, the effect `out[i·N] = 1` would be placed inside the column-tile loop and
        // run again after element (i, 0) was stored, overwriting the reduced value.
        let (mut g, e) = matmul_kernel(true);
        assert!(register_tile(&mut g, &Captures::default(), e).is_none());
    }
}
