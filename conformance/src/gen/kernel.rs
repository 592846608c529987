//! Random *valid* kernels, for the kernel-level fuzzer ([`crate::kfuzz`]).
//!
//! A [`KernelRecipe`] is drawn from a seed ([`recipe`], with [`SplitMix64`]) and built into a
//! kernel graph ([`build`]) with the compiler's [`Builder`], in program order, as the
//! lowering builds them: loop nests (`RANGE`/`END`) that store an expression of loads into
//! an output, top-level or in-loop `REDUCE`s (integer ADD/MUL/MAX, float ADD/MAX; declared
//! orders: sequential, `split(k)`, `chunks(k)`, `tree(leaf)`), gated loads whose gate masks
//! addresses past a limit (in bounds by construction: the gate is `idx < limit` with
//! `limit ≤ size`; ungated loads only reach addresses below the buffer's size), and
//! workgroup exchanges: `lidx0` work items each store a value into a local buffer, a
//! `BARRIER`, then each reads another item's element. Input buffers hold random and edge
//! values ([`inputs`]). The kernel IR has no vector dtypes, so there are none here.
//!
//! Nothing is undefined by construction: no division, no shift, indices in bounds, every
//! element read is written (inputs are filled; a local element is read only after the
//! barrier that follows its store). A recipe is plain data so that [`crate::kfuzz`] can
//! shrink it (drop statements, shrink loop extents, replace expressions by leaves).

use uopkit_compiler::kgraph::{Builder, KernelGraph, KernelGraphError};
use uopkit_interp::eval::Elem;
use uopkit_interp::ir::{DType, KArg, NodeId, Op, ReduceOrder};
use uopkit_interp::kernel::ParamDecl;

use crate::inputs::SplitMix64;

/// An expression over the loop variables of the statement it is in (`Var(d)`: the d-th).
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `input[buf][Σ coef_d · var_d + off]`; with `gate: Some(limit)`, a gated load that
    /// reads only where the index is below `min(limit, size)` and yields `alt` elsewhere.
    Load {
        buf: usize,
        coef: Vec<i64>,
        off: i64,
        gate: Option<(i64, i64)>,
    },
    /// A loop variable, cast to the statement's dtype.
    Var(usize),
    Const(i64),
    Bin(Op, Box<Expr>, Box<Expr>),
    /// `a < b ? c : d`.
    Select(Box<[Expr; 4]>),
}

/// One top-level statement of a kernel; each writes its own output parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `for r in ends: out[flat(r)] = e` (e over the loop variables).
    Map { ends: Vec<i64>, e: Expr },
    /// `for r in ends: out[flat(r)] = REDUCE(op, e, over the loops red)` (e over
    /// `r ++ red`).
    Reduce {
        ends: Vec<i64>,
        red: Vec<i64>,
        op: Op,
        order: ReduceOrder,
        e: Expr,
    },
    /// Work item l of the kernel's `lanes` items: `local[l] = e(l)`; BARRIER;
    /// `out[l] = local[(l + shift) mod lanes]`.
    Exchange { shift: i64, e: Expr },
}

/// A kernel: its dtype, its statements, the work items of its exchanges, the seed of the
/// input contents and the gate limits' and shapes' parameters (all in the statements).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRecipe {
    pub dtype: DType,
    /// How many input buffers (their sizes follow from the loads: [`input_sizes`]).
    pub inputs: usize,
    /// The work items per workgroup (`lidx0`) when the kernel has exchanges.
    pub lanes: i64,
    pub fill_seed: u64,
    pub stmts: Vec<Stmt>,
}

/// Limits of what [`recipe`] draws.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    pub max_stmts: usize,
    /// The largest loop extent (a reduction's loops may reach `2 × max_extent`).
    pub max_extent: i64,
    pub max_depth: usize,
    pub max_expr_depth: usize,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            max_stmts: 3,
            max_extent: 9,
            max_depth: 2,
            max_expr_depth: 2,
        }
    }
}

const DTYPES: [DType; 4] = [DType::Int32, DType::Float32, DType::Int64, DType::UInt8];

struct Tape(SplitMix64);

impl Tape {
    fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.0.next_u64() % n
        }
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// The recipe of `seed` (deterministic).
pub fn recipe(seed: u64, cfg: &KernelConfig) -> KernelRecipe {
    let mut t = Tape(SplitMix64(seed));
    let dtype = DTYPES[t.below(DTYPES.len() as u64) as usize];
    let inputs = t.range(1, 2) as usize;
    let lanes = [2, 4, 8, 8][t.below(4) as usize];
    let n = t.range(1, cfg.max_stmts.max(1) as i64) as usize;
    let mut stmts = vec![];
    for _ in 0..n {
        let kind = t.below(10);
        let s = if kind < 3 {
            let ends = extents(&mut t, cfg, 1);
            let e = expr(&mut t, dtype, inputs, ends.len(), cfg.max_expr_depth);
            Stmt::Map { ends, e }
        } else if kind < 8 {
            let ends = if t.chance(1, 2) {
                vec![]
            } else {
                extents(&mut t, cfg, 1)
            };
            let mut red = extents(&mut t, cfg, 1);
            if t.chance(1, 2) {
                // Long reductions reach every level of the local tree.
                red[0] = t.range(cfg.max_extent, 2 * cfg.max_extent);
            }
            let ops: &[Op] = if dtype.is_float() {
                &[Op::ADD, Op::MAX]
            } else {
                &[Op::ADD, Op::MUL, Op::MAX, Op::ADD]
            };
            let op = ops[t.below(ops.len() as u64) as usize];
            let order = match t.below(6) {
                0 => ReduceOrder::Split(t.range(2, 4) as usize),
                1 => ReduceOrder::Chunks(t.range(2, 3) as usize),
                2 => ReduceOrder::Tree(t.range(1, 3) as usize),
                _ => ReduceOrder::Sequential,
            };
            let vars = ends.len() + red.len();
            let e = expr(&mut t, dtype, inputs, vars, cfg.max_expr_depth);
            Stmt::Reduce {
                ends,
                red,
                op,
                order,
                e,
            }
        } else {
            let shift = t.range(1, lanes - 1);
            let e = expr(&mut t, dtype, inputs, 1, cfg.max_expr_depth);
            Stmt::Exchange { shift, e }
        };
        stmts.push(s);
    }
    KernelRecipe {
        dtype,
        inputs,
        lanes,
        fill_seed: t.0.next_u64(),
        stmts,
    }
}

fn extents(t: &mut Tape, cfg: &KernelConfig, min_depth: usize) -> Vec<i64> {
    let d = t.range(min_depth as i64, cfg.max_depth.max(min_depth) as i64) as usize;
    (0..d).map(|_| t.range(1, cfg.max_extent.max(1))).collect()
}

fn expr(t: &mut Tape, dt: DType, inputs: usize, vars: usize, depth: usize) -> Expr {
    let leaf = depth == 0 || t.chance(1, 3);
    if leaf {
        return match t.below(8) {
            0 if vars > 0 => Expr::Var(t.below(vars as u64) as usize),
            1 => Expr::Const(edge_const(t, dt)),
            _ => {
                let coef = (0..vars).map(|_| t.range(0, 3)).collect();
                let off = t.range(0, 4);
                let gate = t.chance(1, 3).then(|| (t.range(0, 24), edge_const(t, dt)));
                Expr::Load {
                    buf: t.below(inputs as u64) as usize,
                    coef,
                    off,
                    gate,
                }
            }
        };
    }
    let ops: &[Op] = if dt.is_float() {
        &[Op::ADD, Op::MUL, Op::SUB, Op::MAX]
    } else {
        &[Op::ADD, Op::MUL, Op::SUB, Op::MAX, Op::XOR, Op::AND, Op::OR]
    };
    if t.chance(1, 6) {
        let mut sub = || expr(t, dt, inputs, vars, depth - 1);
        let four = [sub(), sub(), sub(), sub()];
        return Expr::Select(Box::new(four));
    }
    let op = ops[t.below(ops.len() as u64) as usize];
    let a = expr(t, dt, inputs, vars, depth - 1);
    let b = expr(t, dt, inputs, vars, depth - 1);
    Expr::Bin(op, Box::new(a), Box::new(b))
}

fn edge_const(t: &mut Tape, dt: DType) -> i64 {
    if dt == DType::UInt8 {
        return [0, 1, 255, 128, 7][t.below(5) as usize];
    }
    [0, 1, -1, 2, 3, -7, 100][t.below(7) as usize]
}

/// The bits of the integer `v` in `dt` (wrapping; floats: the nearest value, exact here).
fn const_bits(dt: DType, v: i64) -> u64 {
    if dt == DType::Float32 {
        u64::from((v as f32).to_bits())
    } else if dt == DType::Float64 {
        (v as f64).to_bits()
    } else {
        uopkit_interp::scalar::cast::wrap_i128(dt, i128::from(v))
    }
}

/// The size of every input buffer: one past the largest index an ungated load reaches (at
/// least 1), and at least 8 so that gated loads have something to read.
pub fn input_sizes(r: &KernelRecipe) -> Vec<usize> {
    let mut sizes = vec![8usize; r.inputs];
    for s in &r.stmts {
        let (ends, e): (Vec<i64>, &Expr) = match s {
            Stmt::Map { ends, e } => (ends.clone(), e),
            Stmt::Reduce { ends, red, e, .. } => (ends.iter().chain(red).copied().collect(), e),
            Stmt::Exchange { e, .. } => (vec![r.lanes], e),
        };
        loads(e, &mut |buf, coef, off, gated| {
            if gated || buf >= sizes.len() {
                return;
            }
            let max: i64 = coef
                .iter()
                .zip(&ends)
                .map(|(c, e)| c * (e - 1).max(0))
                .sum::<i64>()
                + off;
            sizes[buf] = sizes[buf].max(max as usize + 1);
        });
    }
    sizes
}

/// A visitor of loads: buffer, coefficients, offset, gated.
type LoadVisit<'a> = dyn FnMut(usize, &[i64], i64, bool) + 'a;

fn loads(e: &Expr, f: &mut LoadVisit<'_>) {
    match e {
        Expr::Load {
            buf,
            coef,
            off,
            gate,
        } => f(*buf, coef, *off, gate.is_some()),
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Bin(_, a, b) => {
            loads(a, f);
            loads(b, f);
        }
        Expr::Select(x) => x.iter().for_each(|s| loads(s, f)),
    }
}

/// The size of each statement's output.
fn output_size(r: &KernelRecipe, s: &Stmt) -> usize {
    match s {
        Stmt::Map { ends, .. } | Stmt::Reduce { ends, .. } => {
            ends.iter().map(|&e| e.max(1) as usize).product()
        }
        Stmt::Exchange { .. } => r.lanes as usize,
    }
}

/// The kernel's params: the inputs (read only), then one output per statement.
pub fn params(r: &KernelRecipe) -> Vec<ParamDecl> {
    let mut p: Vec<ParamDecl> = input_sizes(r)
        .into_iter()
        .map(|size| ParamDecl {
            dtype: r.dtype,
            size,
            written: false,
        })
        .collect();
    for s in &r.stmts {
        p.push(ParamDecl {
            dtype: r.dtype,
            size: output_size(r, s),
            written: true,
        });
    }
    p
}

/// The initial contents of every param: inputs random and edge values (from `fill_seed`),
/// outputs unwritten (poison).
pub fn inputs(r: &KernelRecipe) -> Vec<Vec<Elem>> {
    let mut rng = SplitMix64(r.fill_seed);
    params(r)
        .iter()
        .enumerate()
        .map(|(slot, p)| {
            (0..p.size)
                .map(|index| {
                    if p.written {
                        Elem::Uninit {
                            buffer: NodeId(slot as u32),
                            index,
                        }
                    } else {
                        Elem::Bits(value(r.dtype, &mut rng))
                    }
                })
                .collect()
        })
        .collect()
}

fn value(dt: DType, rng: &mut SplitMix64) -> u64 {
    let x = rng.next_u64();
    let pick = x % 8;
    let small = (x >> 8) as i64 % 17 - 8;
    match dt {
        DType::Float32 => {
            let edge = [
                0.0f32,
                -0.0,
                1.0,
                -1.5,
                f32::INFINITY,
                f32::MIN_POSITIVE / 4.0,
                3.0e38,
            ];
            let v = if pick < 2 {
                edge[(x >> 16) as usize % edge.len()]
            } else {
                small as f32 * 0.25
            };
            u64::from(v.to_bits())
        }
        DType::Int32 | DType::Int64 => {
            let (min, max) = if dt == DType::Int32 {
                (i128::from(i32::MIN), i128::from(i32::MAX))
            } else {
                (i128::from(i64::MIN), i128::from(i64::MAX))
            };
            let v = match pick {
                0 => min,
                1 => max,
                _ => i128::from(small),
            };
            uopkit_interp::scalar::cast::wrap_i128(dt, v)
        }
        _ => uopkit_interp::scalar::cast::wrap_i128(dt, i128::from((x >> 8) as u8)),
    }
}

/// The recipe as a kernel graph (named `name`).
pub fn build(r: &KernelRecipe, name: &str) -> Result<KernelGraph, KernelGraphError> {
    let params = params(r);
    let sizes: Vec<i64> = params.iter().map(|p| p.size as i64).collect();
    let mut k = K {
        b: Builder::new(name, params.clone()),
        dt: r.dtype,
        axis: 0,
        sizes,
        slots: vec![],
    };
    for slot in 0..params.len() {
        let p =
            k.b.push(Op::PARAM, r.dtype, vec![], KArg::Param(slot as u32));
        k.slots.push(p);
    }
    let lidx = if r.stmts.iter().any(|s| matches!(s, Stmt::Exchange { .. })) {
        let l = k.int(r.lanes);
        Some(k.b.push(
            Op::SPECIAL,
            DType::Int64,
            vec![l],
            KArg::Special("lidx0".into()),
        ))
    } else {
        None
    };
    for (i, s) in r.stmts.iter().enumerate() {
        let out = k.slots[r.inputs + i];
        match s {
            Stmt::Map { ends, e } => {
                let rs = k.open(ends);
                let v = k.expr(e, &rs);
                k.store_flat(out, &rs, ends, v);
                k.close(&rs);
            }
            Stmt::Reduce {
                ends,
                red,
                op,
                order,
                e,
            } => {
                let rs = k.open(ends);
                let reds = k.open(red);
                let vars: Vec<NodeId> = rs.iter().chain(&reds).copied().collect();
                let v = k.expr(e, &vars);
                k.close(&reds);
                let x = k.b.reduce(*op, r.dtype, v, &reds, order.clone());
                k.store_flat(out, &rs, ends, x);
                k.close(&rs);
            }
            Stmt::Exchange { shift, e } => {
                let Some(l) = lidx else { continue };
                let buf =
                    k.b.push(Op::BUFFER, r.dtype, vec![], KArg::Local(r.lanes as usize));
                let v = k.expr(e, &[l]);
                let at = k.b.push(Op::INDEX, r.dtype, vec![buf, l], KArg::None);
                k.b.push(Op::STORE, DType::Void, vec![at, v], KArg::None);
                k.b.push(Op::BARRIER, DType::Void, vec![], KArg::None);
                let sh = k.int(*shift);
                let lanes = k.int(r.lanes);
                let j = k.b.push(Op::ADD, DType::Int64, vec![l, sh], KArg::None);
                let j = k.b.push(Op::CMOD, DType::Int64, vec![j, lanes], KArg::None);
                let at = k.b.push(Op::INDEX, r.dtype, vec![buf, j], KArg::None);
                let x = k.b.push(Op::LOAD, r.dtype, vec![at], KArg::None);
                let o = k.b.push(Op::INDEX, r.dtype, vec![out, l], KArg::None);
                k.b.push(Op::STORE, DType::Void, vec![o, x], KArg::None);
            }
        }
    }
    k.b.finish()
}

struct K {
    b: Builder,
    dt: DType,
    axis: u32,
    sizes: Vec<i64>,
    slots: Vec<NodeId>,
}

impl K {
    fn int(&mut self, v: i64) -> NodeId {
        self.b
            .push(Op::CONST, DType::Int64, vec![], KArg::Const(v as u64))
    }

    fn open(&mut self, ends: &[i64]) -> Vec<NodeId> {
        ends.iter()
            .map(|&e| {
                let c = self.int(e);
                self.axis += 1;
                self.b
                    .push(Op::RANGE, DType::Int64, vec![c], KArg::Axis(self.axis))
            })
            .collect()
    }

    fn close(&mut self, rs: &[NodeId]) {
        for &r in rs.iter().rev() {
            self.b.push(Op::END, DType::Void, vec![r], KArg::None);
        }
    }

    fn store_flat(&mut self, out: NodeId, rs: &[NodeId], ends: &[i64], v: NodeId) {
        let mut flat = self.int(0);
        let mut stride = 1;
        for (&r, &e) in rs.iter().zip(ends).rev() {
            let term = if stride == 1 {
                r
            } else {
                let s = self.int(stride);
                self.b.push(Op::MUL, DType::Int64, vec![r, s], KArg::None)
            };
            flat = self
                .b
                .push(Op::ADD, DType::Int64, vec![flat, term], KArg::None);
            stride *= e.max(1);
        }
        let at = self.b.push(Op::INDEX, self.dt, vec![out, flat], KArg::None);
        self.b.push(Op::STORE, DType::Void, vec![at, v], KArg::None);
    }

    fn expr(&mut self, e: &Expr, vars: &[NodeId]) -> NodeId {
        let dt = self.dt;
        match e {
            Expr::Const(v) => self
                .b
                .push(Op::CONST, dt, vec![], KArg::Const(const_bits(dt, *v))),
            Expr::Var(d) => match vars.get(*d) {
                Some(&v) => self.b.push(Op::CAST, dt, vec![v], KArg::None),
                None => self.b.push(Op::CONST, dt, vec![], KArg::Const(0)),
            },
            Expr::Load {
                buf,
                coef,
                off,
                gate,
            } => {
                let mut idx = self.int(*off);
                for (c, v) in coef.iter().zip(vars) {
                    if *c == 0 {
                        continue;
                    }
                    let cc = self.int(*c);
                    let t = self.b.push(Op::MUL, DType::Int64, vec![*v, cc], KArg::None);
                    idx = self.b.push(Op::ADD, DType::Int64, vec![idx, t], KArg::None);
                }
                let slot = (*buf).min(self.slots.len().saturating_sub(1));
                let p = self.slots[slot];
                let at = self.b.push(Op::INDEX, dt, vec![p, idx], KArg::None);
                match gate {
                    None => self.b.push(Op::LOAD, dt, vec![at], KArg::None),
                    Some((limit, alt)) => {
                        let lim = (*limit).clamp(0, self.sizes[slot]);
                        let lc = self.int(lim);
                        let g = self
                            .b
                            .push(Op::CMPLT, DType::Bool, vec![idx, lc], KArg::None);
                        let a =
                            self.b
                                .push(Op::CONST, dt, vec![], KArg::Const(const_bits(dt, *alt)));
                        self.b.push(Op::LOAD, dt, vec![at, a, g], KArg::None)
                    }
                }
            }
            Expr::Bin(op, a, b) => {
                let x = self.expr(a, vars);
                let y = self.expr(b, vars);
                self.b.push(*op, dt, vec![x, y], KArg::None)
            }
            Expr::Select(four) => {
                let [a, b, c, d] = &**four;
                let (a, b) = (self.expr(a, vars), self.expr(b, vars));
                let (c, d) = (self.expr(c, vars), self.expr(d, vars));
                let cond = self.b.push(Op::CMPLT, DType::Bool, vec![a, b], KArg::None);
                self.b.push(Op::WHERE, dt, vec![cond, c, d], KArg::None)
            }
        }
    }
}
