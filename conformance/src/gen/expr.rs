//! Kernel-level expressions: element-level ALU and index arithmetic over loop variables, as
//! the compiler's lowering produces them (`RANGE` leaves `Node { op: RANGE, dtype: int64,
//! src: [CONST end], arg: Index(axis) }`, int ALU ops, casts, comparisons, WHERE), and their
//! exact meaning according to the oracle.
//!
//! * Strategies: [`expr`] (any well-typed expression of the config's dtypes), [`expr_of`]
//!   (one dtype), [`index_expr`] (what lowering a view makes: `Σ rᵢ·strideᵢ + offset`, then
//!   `/ d` and `% d` chains, flips and pad bounds). A value is an [`Expr`]: a graph and its
//!   root; `Debug` prints the expression. Generation interprets a tape of random words
//!   ([`Choices`]), so proptest shrinks a failing expression towards fewer and simpler nodes
//!   (a shorter tape and smaller words pick leaves, the first operand choices and small
//!   constants).
//! * Meaning: [`evaluate`] runs the expression through the oracle (`uopkit_interp::eval`)
//!   for every assignment of the loop variables at once: each `RANGE` becomes an int64
//!   BUFFER holding that variable's value per assignment, every other node is kept. Where
//!   the oracle reports undefined behaviour, the assignments are evaluated one by one, so
//!   each element's outcome (bits or UB) is known.
//!
//! The strategies need proptest: they exist with the crate's `testkit` feature only; the
//! builder and the meaning do not (`pass_trace` evaluates with them in every build).

use std::collections::BTreeMap;
use std::fmt;

#[cfg(feature = "testkit")]
use proptest::collection::vec;
#[cfg(feature = "testkit")]
use proptest::prelude::*;
use uopkit_interp::eval::{self, BufferInit, Elem};
use uopkit_interp::ir::table::{self, CSpelling, OpInfo};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::cast::{mask, to_i128, wrap_i128};
use uopkit_interp::scalar::Ub;
use uopkit_interp::verify;
use uopkit_interp::Error as OracleError;

use DType::*;

// ------------------------------------------------------------------------------------------
// The tape

/// Random choices read from a tape of words. A word past the end reads as 0, and 0 always
/// means the first (simplest) alternative, so a shorter tape or smaller words give a
/// simpler result: proptest's shrinking of the tape shrinks what is built from it.
pub struct Choices<'a> {
    tape: &'a [u32],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(tape: &'a [u32]) -> Self {
        Choices { tape, pos: 0 }
    }

    /// The next word (0 past the end of the tape).
    pub fn word(&mut self) -> u32 {
        let w = self.tape.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        w
    }

    /// A number in `0..n` (0 for n ≤ 1).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            self.pos += 1;
            return 0;
        }
        self.word() as usize % n
    }

    /// A number in `lo..=hi`, `lo` for the word 0.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1).max(1) as usize) as i64
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    /// True with `percent`% probability; the word 0 gives false.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.word() % 100 >= 100 - percent.min(100)
    }

    /// An index into `weights`, drawn in proportion to them; the word 0 gives the first
    /// index with a non-zero weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        if total == 0 {
            return 0;
        }
        let mut x = self.word() % total;
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

// ------------------------------------------------------------------------------------------
// Expressions

/// An expression: `root` in `graph` (which may hold other nodes too).
#[derive(Clone)]
pub struct Expr {
    pub graph: Graph,
    pub root: NodeId,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", show(&self.graph, self.root))
    }
}

impl Expr {
    /// The number of nodes the root reaches.
    pub fn size(&self) -> usize {
        self.graph.reachable(&[self.root]).len()
    }
}

/// The expression under `id`, one line: `ADD.int64(r0, int64:3)`; loop variables are `rA`
/// (axis A), constants `dtype:value` (floats as raw bits).
pub fn show(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    match (&n.op, &n.arg) {
        (Op::CONST, Arg::Const(b)) if n.dtype.is_float() => format!("{}:{:#x}", n.dtype, b),
        (Op::CONST, Arg::Const(b)) => format!("{}:{}", n.dtype, to_i128(n.dtype, *b)),
        (Op::RANGE, Arg::Index(a)) => format!("r{a}"),
        _ => {
            let s: Vec<String> = n.src.iter().map(|&s| show(g, s)).collect();
            format!("{}.{}({})", n.op, n.dtype, s.join(", "))
        }
    }
}

/// The integer dtypes expressions use.
pub const INTS: &[DType] = &[Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64];
const ARITH: &[Op] = &[Op::ADD, Op::SUB, Op::MUL, Op::MAX, Op::AND, Op::OR, Op::XOR];
const DIVMOD: &[Op] = &[Op::CDIV, Op::CMOD, Op::FLOORDIV, Op::FLOORMOD];
const CMPS: &[Op] = &[Op::CMPLT, Op::CMPNE, Op::CMPEQ];
const SHIFTS: &[Op] = &[Op::SHL, Op::SHR];
const FLOAT_UNARY: &[Op] = &[Op::SQRT, Op::NEG, Op::TRUNC, Op::RECIPROCAL];

/// `listed`, then every op of the op table (`uopkit_interp::ir::table`) that `pred` accepts
/// and `listed` lacks. The targeted lists keep their order, so a tape still means the same
/// expression, and an op added to the table is generated without touching this file.
fn with_table_ops(listed: &[Op], pred: impl Fn(&OpInfo) -> bool) -> Vec<Op> {
    let extra = table::ops_where(|i| pred(i) && !listed.contains(&i.op));
    [listed, &extra].concat()
}

/// The comparisons generated (CMPS, then the table's other comparisons).
pub fn comparison_ops() -> Vec<Op> {
    with_table_ops(CMPS, |i| i.is_comparison())
}

/// The binary int ops the general strategies pick from (ARITH, DIVMOD and shifts, then the
/// table's other binary ops that take ints).
pub fn int_binary_ops() -> Vec<Op> {
    with_table_ops(&[ARITH, DIVMOD, SHIFTS].concat(), |i| {
        i.arity == 2 && i.classes.int && !i.is_comparison()
    })
}

/// The float unary ops applied to constants (libm-style transcendentals are left to the
/// tensor generator's `transcendental` programs).
pub fn float_unary_ops() -> Vec<Op> {
    with_table_ops(FLOAT_UNARY, |i| {
        i.arity == 1 && i.classes.float && !matches!(i.c, CSpelling::Libm(_))
    })
}

/// What [`expr`] builds.
#[derive(Clone, Debug)]
pub struct ExprConfig {
    /// The loop variables: `(axis, end)`, every end ≥ 1. Evaluation covers every
    /// assignment, so keep the product of the ends small.
    pub axes: Vec<(usize, i64)>,
    /// The deepest nesting of operations.
    pub depth: usize,
    /// Float sub-expressions (any float32 bits: NaN payloads, −0.0, infinities).
    pub floats: bool,
    /// Words on the tape (more words, larger expressions).
    pub tape_len: usize,
}

impl Default for ExprConfig {
    fn default() -> Self {
        ExprConfig {
            axes: vec![(0, 7), (1, 5), (2, 3)],
            depth: 3,
            floats: true,
            tape_len: 96,
        }
    }
}

/// Builds expressions in a graph from a tape of choices. The methods are the pieces the
/// strategies are made of; targeted strategies (see `gen::rules`) combine them.
pub struct ExprBuilder<'a> {
    pub c: Choices<'a>,
    pub g: Graph,
    /// Sub-expressions made so far, for reuse (`x - x`, `x & x`, …).
    pub pool: Vec<NodeId>,
    pub cfg: ExprConfig,
}

impl<'a> ExprBuilder<'a> {
    pub fn new(tape: &'a [u32], cfg: ExprConfig) -> Self {
        ExprBuilder {
            c: Choices::new(tape),
            g: Graph::new(),
            pool: vec![],
            cfg,
        }
    }

    pub fn finish(self, root: NodeId) -> Expr {
        Expr {
            graph: self.g,
            root,
        }
    }

    pub fn node(&mut self, op: Op, dtype: DType, src: Vec<NodeId>, arg: Arg) -> NodeId {
        self.g.add(Node {
            op,
            dtype,
            src,
            arg,
        })
    }

    /// An int/bool constant holding `v` (wrapped into `dt`).
    pub fn int(&mut self, dt: DType, v: i128) -> NodeId {
        self.node(Op::CONST, dt, vec![], Arg::Const(wrap_i128(dt, v)))
    }

    pub fn bits(&mut self, dt: DType, bits: u64) -> NodeId {
        self.node(Op::CONST, dt, vec![], Arg::Const(bits & mask(dt)))
    }

    /// The loop variable of axis `axis` running over `0..end` (int64).
    pub fn range(&mut self, axis: usize, end: i64) -> NodeId {
        let e = self.int(Int64, end as i128);
        self.node(Op::RANGE, Int64, vec![e], Arg::Index(axis))
    }

    /// One of the config's loop variables.
    pub fn var(&mut self) -> NodeId {
        let k = self.c.below(self.cfg.axes.len());
        let (axis, end) = self.cfg.axes.get(k).copied().unwrap_or((0, 1));
        self.range(axis, end)
    }

    pub fn bin(&mut self, op: Op, a: NodeId, b: NodeId) -> NodeId {
        let dt = if op.is_comparison() {
            Bool
        } else {
            self.g.node(a).dtype
        };
        self.node(op, dt, vec![a, b], Arg::None)
    }

    pub fn un(&mut self, op: Op, a: NodeId) -> NodeId {
        let dt = self.g.node(a).dtype;
        self.node(op, dt, vec![a], Arg::None)
    }

    pub fn wher(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> NodeId {
        let dt = self.g.node(a).dtype;
        self.node(Op::WHERE, dt, vec![cond, a, b], Arg::None)
    }

    pub fn mulacc(&mut self, a: NodeId, b: NodeId, c: NodeId) -> NodeId {
        let dt = self.g.node(a).dtype;
        self.node(Op::MULACC, dt, vec![a, b, c], Arg::None)
    }

    pub fn cast(&mut self, dt: DType, a: NodeId) -> NodeId {
        self.node(Op::CAST, dt, vec![a], Arg::None)
    }

    pub fn bitcast(&mut self, dt: DType, a: NodeId) -> NodeId {
        self.node(Op::BITCAST, dt, vec![a], Arg::None)
    }

    pub fn dtype(&self, id: NodeId) -> DType {
        self.g.node(id).dtype
    }

    /// An int dtype.
    pub fn int_dtype(&mut self) -> DType {
        // int64 first: index arithmetic is int64.
        self.c
            .pick(&[Int64, Int32, Int8, UInt8, Int16, UInt32, UInt64, UInt16])
    }

    /// Any dtype expressions use: mostly ints, some bool, some float32.
    pub fn any_dtype(&mut self) -> DType {
        match self.c.below(10) {
            0 => Bool,
            1 if self.cfg.floats => Float32,
            _ => self.int_dtype(),
        }
    }

    /// A value that rules care about: 0, ±1, the dtype's edges, small divisors, small ints.
    pub fn special(&mut self, dt: DType) -> i128 {
        let (lo, hi) = dt.int_range().unwrap_or((0, 1));
        match self.c.below(12) {
            0 => 0,
            1 => 1,
            2 => -1,
            3 => lo,
            4 => hi,
            5 => lo + 1,
            6 => hi - 1,
            7 => self.c.pick(&[2, 3, 4, 6, 8, 16, 64]),
            8 => -(self.c.pick(&[2, 3, 4]) as i128),
            _ => self.c.below(20) as i128,
        }
    }

    /// A constant of `dt`: a special int value, or float32 bits that matter (±0, NaN with a
    /// payload, −inf, ±1, small integers).
    pub fn konst(&mut self, dt: DType) -> NodeId {
        if dt.is_float() {
            let bits = match self.c.below(8) {
                0 => 0x3f80_0000,
                1 => 0x8000_0000,
                2 => 0x7fc0_0001,
                3 => 0xff80_0000,
                4 => 0,
                5 => 0xbf80_0000,
                _ => (1.0 + self.c.below(5) as f32).to_bits() as u64,
            };
            let b = uopkit_interp::scalar::cast(Float32, dt, bits).unwrap_or(0);
            return self.bits(dt, b);
        }
        let v = self.special(dt);
        self.int(dt, v)
    }

    /// A float32 leaf that takes many bit patterns as the loop variable runs (NaN payloads,
    /// −0.0, ordinary values).
    fn float_leaf(&mut self) -> NodeId {
        let v = self.var();
        let u = self.cast(UInt32, v);
        let kb = self.c.pick(&[0x3fc0_0001u64, 0x0800_0000, 0x8000_0000]);
        let k = self.bits(UInt32, kb);
        let bb = self.c.pick(&[0x7fc0_0001u64, 0x8000_0000, 0x3f00_0000, 0]);
        let base = self.bits(UInt32, bb);
        let m = self.bin(Op::MUL, u, k);
        let s = self.bin(Op::ADD, m, base);
        self.bitcast(Float32, s)
    }

    /// A leaf of `dt`: a loop variable (cast, sometimes shifted or scaled by a constant), a
    /// constant, or a sub-expression made before.
    pub fn leaf(&mut self, dt: DType) -> NodeId {
        match self.c.weighted(&[6, 3, 2]) {
            2 if !self.pool.is_empty() => {
                let x = self.pool[self.c.below(self.pool.len())];
                if self.dtype(x) == dt {
                    return x;
                }
            }
            1 => return self.konst(dt),
            _ => {}
        }
        if dt.is_float() {
            let f = self.float_leaf();
            return if dt == Float32 { f } else { self.cast(dt, f) };
        }
        let v = self.var();
        let x = if dt == Int64 { v } else { self.cast(dt, v) };
        if dt.is_int() && self.c.chance(25) {
            let k = self.konst(dt);
            let op = self.c.pick(&[Op::ADD, Op::SUB, Op::MUL]);
            return self.bin(op, x, k);
        }
        x
    }

    /// A random expression of `dt` at most `depth` deep (remembered for reuse).
    pub fn expr(&mut self, dt: DType, depth: usize) -> NodeId {
        let e = self.expr_inner(dt, depth);
        self.pool.push(e);
        e
    }

    fn expr_inner(&mut self, dt: DType, depth: usize) -> NodeId {
        if depth == 0 || !self.c.chance(85) {
            return self.leaf(dt);
        }
        let d = depth - 1;
        if dt == Bool {
            return self.bool_expr(d);
        }
        if dt.is_float() {
            return self.float_expr(dt, d);
        }
        self.int_expr(dt, d)
    }

    fn bool_expr(&mut self, d: usize) -> NodeId {
        match self.c.below(5) {
            0 | 1 => {
                let odt = if self.cfg.floats && self.c.chance(20) {
                    Float32
                } else {
                    self.int_dtype()
                };
                let op = self.c.pick(&comparison_ops());
                let a = self.expr(odt, d);
                let b = if self.c.chance(20) {
                    a
                } else if self.c.chance(40) {
                    self.konst(odt)
                } else {
                    self.expr(odt, d)
                };
                self.bin(op, a, b)
            }
            2 => {
                let op = self
                    .c
                    .pick(&[Op::AND, Op::OR, Op::XOR, Op::ADD, Op::MUL, Op::MAX]);
                let (a, b) = (self.expr(Bool, d), self.expr(Bool, d));
                self.bin(op, a, b)
            }
            3 => {
                let cnd = self.expr(Bool, d);
                let (t, f) = if self.c.chance(50) {
                    (self.int(Bool, 1), self.int(Bool, 0))
                } else {
                    (self.expr(Bool, d), self.expr(Bool, d))
                };
                self.wher(cnd, t, f)
            }
            _ => {
                let sdt = self.int_dtype();
                let a = self.expr(sdt, d);
                self.cast(Bool, a)
            }
        }
    }

    fn float_expr(&mut self, dt: DType, d: usize) -> NodeId {
        match self.c.below(6) {
            0 => {
                let op = self.c.pick(&[Op::ADD, Op::MUL, Op::MAX, Op::SUB]);
                let a = self.expr(dt, d);
                let b = if self.c.chance(30) { a } else { self.konst(dt) };
                self.bin(op, a, b)
            }
            1 => {
                let a = self.expr(dt, d);
                let n = self.un(Op::NEG, a);
                if self.c.chance(60) {
                    self.un(Op::NEG, n)
                } else {
                    n
                }
            }
            2 => {
                let cnd = self.expr(Bool, d);
                let a = self.expr(dt, d);
                let b = if self.c.chance(30) {
                    a
                } else {
                    self.expr(dt, d)
                };
                self.wher(cnd, a, b)
            }
            3 => {
                let sdt = self.int_dtype();
                let a = self.expr(sdt, d);
                let m = if self.c.chance(50) {
                    self.cast(Int32, a)
                } else {
                    a
                };
                self.cast(dt, m)
            }
            4 => {
                let op = self.c.pick(&float_unary_ops());
                let a = self.konst(dt);
                self.un(op, a)
            }
            _ => self.leaf(dt),
        }
    }

    fn int_expr(&mut self, dt: DType, d: usize) -> NodeId {
        match self.c.below(13) {
            0 => {
                let op = self.c.pick(ARITH);
                let (a, b) = (self.expr(dt, d), self.expr(dt, d));
                self.bin(op, a, b)
            }
            1 => {
                // An op with a special constant, in either order.
                let op = self.c.pick(&int_binary_ops());
                let a = self.expr(dt, d);
                let k = self.konst(dt);
                let swap = !DIVMOD.contains(&op) && op != Op::SHL && op != Op::SHR;
                if swap && self.c.chance(30) {
                    self.bin(op, k, a)
                } else {
                    self.bin(op, a, k)
                }
            }
            2 => {
                // The same operand twice.
                let op = self
                    .c
                    .pick(&[Op::SUB, Op::AND, Op::OR, Op::XOR, Op::MAX, Op::ADD]);
                let a = self.expr(dt, d);
                self.bin(op, a, a)
            }
            3 => {
                // (x % c1) % c2 with c2 dividing c1, and (x / c1) / c2.
                let c2 = self.c.pick(&[2i128, 3, 4, 2, 3, -2, -3]);
                let c1 = c2 * self.c.pick(&[1i128, 2, 3, 4, -1, -2]);
                let ops = if self.c.chance(50) {
                    [Op::CMOD, Op::FLOORMOD]
                } else {
                    [Op::CDIV, Op::FLOORDIV]
                };
                let (op1, op2) = (self.c.pick(&ops), self.c.pick(&ops));
                let a = self.expr(dt, d);
                let (k1, k2) = (self.int(dt, c1), self.int(dt, c2));
                let inner = self.bin(op1, a, k1);
                self.bin(op2, inner, k2)
            }
            4 => {
                // A chain of constants: (x op c1) op c2.
                let (op1, op2) = if self.c.chance(50) {
                    let op = self.c.pick(&[Op::ADD, Op::MUL]);
                    (op, op)
                } else {
                    (self.c.pick(DIVMOD), self.c.pick(DIVMOD))
                };
                let a = self.expr(dt, d);
                let (k1, k2) = (self.konst(dt), self.konst(dt));
                let inner = self.bin(op1, a, k1);
                self.bin(op2, inner, k2)
            }
            5 | 6 => self.affine(dt, d),
            7 => {
                let cnd = self.expr(Bool, d);
                let a = self.expr(dt, d);
                let b = if self.c.chance(25) {
                    a
                } else if self.c.chance(30) {
                    self.konst(dt)
                } else {
                    self.expr(dt, d)
                };
                self.wher(cnd, a, b)
            }
            8 => {
                let a = self.expr(dt, d);
                let n = self.un(Op::NEG, a);
                if self.c.chance(50) {
                    self.un(Op::NEG, n)
                } else {
                    n
                }
            }
            9 => {
                // Cast chains: CAST_dt(CAST_mid(x: sdt)).
                let sdt = if self.c.chance(15) {
                    Bool
                } else {
                    self.int_dtype()
                };
                let a = self.expr(sdt, d);
                let mid = if self.c.chance(20) {
                    sdt
                } else {
                    self.int_dtype()
                };
                let m = self.cast(mid, a);
                self.cast(dt, m)
            }
            10 => self.const_only(dt),
            11 => {
                // Division/modulo by a random expression (may be UB).
                let op = self.c.pick(DIVMOD);
                let (a, b) = (self.expr(dt, d), self.expr(dt, d));
                self.bin(op, a, b)
            }
            _ => {
                let op = self.c.pick(&[Op::MAX, Op::SHL, Op::SHR]);
                let a = self.expr(dt, d);
                let b = if op == Op::MAX {
                    self.expr(dt, d)
                } else {
                    self.konst(dt)
                };
                self.bin(op, a, b)
            }
        }
    }

    /// `(a*c + b) op c` or `(a*c) op c` with op a division or modulo.
    pub fn affine(&mut self, dt: DType, d: usize) -> NodeId {
        let op = self.c.pick(DIVMOD);
        let a = self.expr(dt, d);
        let cv = if self.c.chance(30) {
            self.special(dt)
        } else {
            self.c.pick(&[2i128, 3, 4, 8, 16])
        };
        let k = self.int(dt, cv);
        let m = if self.c.chance(50) {
            self.bin(Op::MUL, k, a)
        } else {
            self.bin(Op::MUL, a, k)
        };
        let top = if self.c.chance(25) {
            m
        } else {
            let b = self.expr(dt, d);
            if self.c.chance(50) {
                self.bin(Op::ADD, b, m)
            } else {
                self.bin(Op::ADD, m, b)
            }
        };
        self.bin(op, top, k)
    }

    /// Constants only: folding (UB included: x/0, INT_MIN/-1, shifts too far).
    pub fn const_only(&mut self, dt: DType) -> NodeId {
        let op = self.c.pick(&int_binary_ops());
        let (a, b) = (self.konst(dt), self.konst(dt));
        match self.c.below(10) {
            0 if dt.bits() == 32 => {
                let f = self.konst(Float32);
                self.bitcast(dt, f)
            }
            1 | 2 => self.un(Op::NEG, a),
            3 => {
                let k = self.konst(dt);
                self.mulacc(a, b, k)
            }
            _ => self.bin(op, a, b),
        }
    }

    /// Index arithmetic as lowering a view produces it: a flat offset over loop variables
    /// (some flipped), split again with `/` and `%` by the strides of another shape, plus
    /// pad bounds.
    pub fn index(&mut self) -> NodeId {
        // 1..3 loop variables with small ends, strides of a row-major shape.
        let n = 1 + self.c.below(3);
        let ends: Vec<i64> = (0..n).map(|_| self.c.range(1, 6)).collect();
        let mut flat = self.int(Int64, 0);
        let mut stride = 1i64;
        for (k, &end) in ends.iter().enumerate().rev() {
            let mut r = self.range(k, end);
            if self.c.chance(20) {
                // FLIP: (end-1) - r, as (end-1) + r*-1.
                let m1 = self.int(Int64, -1);
                let neg = self.bin(Op::MUL, r, m1);
                let top = self.int(Int64, (end - 1) as i128);
                r = self.bin(Op::ADD, top, neg);
            }
            let term = if stride == 1 {
                r
            } else {
                let s = self.int(Int64, stride as i128);
                self.bin(Op::MUL, r, s)
            };
            flat = if k + 1 == ends.len() {
                term
            } else {
                self.bin(Op::ADD, flat, term)
            };
            stride *= end;
        }
        if self.c.chance(30) {
            let ov = self.c.range(1, 5) as i128;
            let o = self.int(Int64, ov);
            flat = self.bin(Op::ADD, flat, o);
        }
        // Split by another shape's strides: (flat / st) % d, the first axis without %.
        let d1 = self.c.range(1, 4);
        let d2 = self.c.range(1, 4);
        let st = self.int(Int64, d1 as i128);
        let q = self.bin(Op::CDIV, flat, st);
        let dd = self.int(Int64, d2 as i128);
        let e = match self.c.below(5) {
            0 => self.bin(Op::CMOD, q, dd),
            1 => self.bin(Op::CMOD, flat, dd),
            2 => {
                let m = self.bin(Op::CMOD, flat, st);
                self.bin(Op::CDIV, m, dd)
            }
            3 => q,
            _ => {
                let op = self.c.pick(DIVMOD);
                self.bin(op, q, dd)
            }
        };
        if self.c.chance(20) {
            // A pad bound: where(lo < e, e, 0).
            let lv = self.c.range(-1, 2) as i128;
            let lo = self.int(Int64, lv);
            let c = self.bin(Op::CMPLT, lo, e);
            let z = self.int(Int64, 0);
            return self.wher(c, e, z);
        }
        e
    }
}

/// A tape of `len` words.
#[cfg(feature = "testkit")]
pub fn tape(len: usize) -> impl Strategy<Value = Vec<u32>> {
    vec(any::<u32>(), 0..=len)
}

/// Any well-typed expression (ints of every width, bool, float32 when `cfg.floats`).
#[cfg(feature = "testkit")]
pub fn expr(cfg: ExprConfig) -> impl Strategy<Value = Expr> {
    tape(cfg.tape_len).prop_map(move |t| {
        let mut b = ExprBuilder::new(&t, cfg.clone());
        let dt = b.any_dtype();
        let depth = b.cfg.depth;
        let root = b.expr(dt, depth);
        b.finish(root)
    })
}

/// An expression of dtype `dt`.
#[cfg(feature = "testkit")]
pub fn expr_of(dt: DType, cfg: ExprConfig) -> impl Strategy<Value = Expr> {
    tape(cfg.tape_len).prop_map(move |t| {
        let mut b = ExprBuilder::new(&t, cfg.clone());
        let depth = b.cfg.depth;
        let root = b.expr(dt, depth);
        b.finish(root)
    })
}

/// Index arithmetic as the lowering of views makes it (int64 over `RANGE`s).
#[cfg(feature = "testkit")]
pub fn index_expr() -> impl Strategy<Value = Expr> {
    tape(24).prop_map(|t| {
        let mut b = ExprBuilder::new(&t, ExprConfig::default());
        let root = b.index();
        b.finish(root)
    })
}

/// A strategy from a function that builds the root with an [`ExprBuilder`] (for targeted
/// strategies).
#[cfg(feature = "testkit")]
pub fn built_with(
    cfg: ExprConfig,
    f: fn(&mut ExprBuilder) -> NodeId,
) -> impl Strategy<Value = Expr> {
    tape(cfg.tape_len).prop_map(move |t| {
        let mut b = ExprBuilder::new(&t, cfg.clone());
        let root = f(&mut b);
        b.finish(root)
    })
}

// ------------------------------------------------------------------------------------------
// Meaning, by the oracle

/// The outcome of one element: its bits, or the undefined behaviour the oracle reports.
pub type Outcome = Result<u64, Ub>;

/// The loop variables `roots` reach: axis → end. An error when an end is not a constant or
/// one axis has two ends.
pub fn loop_vars(g: &Graph, roots: &[NodeId]) -> Result<BTreeMap<usize, i64>, String> {
    let mut vars = BTreeMap::new();
    for id in g.reachable(roots) {
        let n = g.node(id);
        if n.op != Op::RANGE {
            continue;
        }
        let Arg::Index(axis) = n.arg else {
            return Err(format!("RANGE {id} without an axis"));
        };
        let end = match n.src.first().map(|&s| g.node(s)) {
            Some(Node {
                op: Op::CONST,
                dtype,
                arg: Arg::Const(b),
                ..
            }) if dtype.is_int() => to_i128(*dtype, *b) as i64,
            _ => return Err(format!("RANGE {id}: the end is not an int constant")),
        };
        if end < 1 {
            return Err(format!(
                "RANGE {id}: end {end} (an empty loop is never observed)"
            ));
        }
        if let Some(old) = vars.insert(axis, end) {
            if old != end {
                return Err(format!("axis {axis} has two ends, {old} and {end}"));
            }
        }
    }
    Ok(vars)
}

/// The number of assignments of `vars` (the product of the ends).
pub fn assignments(vars: &BTreeMap<usize, i64>) -> usize {
    vars.values().map(|&e| e as usize).product()
}

/// The value of every variable in assignment `i` (row-major over the axes in order).
pub fn assignment(vars: &BTreeMap<usize, i64>, mut i: usize) -> BTreeMap<usize, i64> {
    let mut out = BTreeMap::new();
    for (&axis, &end) in vars.iter().rev() {
        out.insert(axis, (i % end as usize) as i64);
        i /= end as usize;
    }
    out
}

/// The oracle's outcome of `root` for every assignment of `vars` (see [`assignment`]).
/// `Err` when the expression is not something the oracle can evaluate (a malformed graph).
pub fn evaluate(
    g: &Graph,
    root: NodeId,
    vars: &BTreeMap<usize, i64>,
) -> Result<Vec<Outcome>, String> {
    let n = assignments(vars);
    if n > 1 << 16 {
        return Err(format!("{n} assignments is too many to evaluate"));
    }
    let all: Vec<usize> = (0..n).collect();
    match eval_at(g, root, vars, &all)? {
        Ok(bits) => Ok(bits.into_iter().map(Ok).collect()),
        Err(_) => (0..n)
            .map(|i| eval_at(g, root, vars, &[i]).map(|r| r.map(|b| b[0])))
            .collect(),
    }
}

/// [`with_buffers`]'s result: the graph with the variables as buffers, its roots, and the
/// buffers' contents.
pub type WithBuffers = (Graph, Vec<NodeId>, BTreeMap<NodeId, BufferInit>);

/// The expression under `roots` as a tensor-level graph: each loop variable (`RANGE` of
/// axis A) becomes a BUFFER of slot A (of the RANGE's dtype, int64 as a rule) holding that variable's value in each of the
/// assignments `which` (in order); every other node is kept. The roots' ids in the new
/// graph and the buffers' contents come with it. (A rule counterexample is written as a
/// case this way, `gen::rulecheck`.)
pub fn with_buffers(
    g: &Graph,
    roots: &[NodeId],
    vars: &BTreeMap<usize, i64>,
    which: &[usize],
) -> Result<WithBuffers, String> {
    let m = which.len();
    let mut t = Graph::new();
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    let mut inputs: BTreeMap<NodeId, BufferInit> = BTreeMap::new();
    for id in g.reachable(roots) {
        let n = g.node(id);
        let new = if n.op == Op::RANGE {
            let Arg::Index(axis) = n.arg else {
                return Err(format!("RANGE {id} without an axis"));
            };
            if !vars.contains_key(&axis) {
                return Err(format!("RANGE {id}: axis {axis} is not a loop variable"));
            }
            // The variable's own dtype (int64, or int32 for the tinygrad rule checker's
            // lowered index arithmetic); its values 0..end fit either.
            let buf = t.add(Node {
                op: Op::BUFFER,
                dtype: if n.dtype.is_int() { n.dtype } else { Int64 },
                src: vec![],
                arg: Arg::Buffer {
                    slot: axis as u32,
                    size: m,
                    device: DeviceSpec::Single(Device::CPU),
                },
            });
            let vals = which
                .iter()
                .map(|&i| Some(assignment(vars, i)[&axis] as u64))
                .collect();
            inputs.insert(buf, vec![vals]);
            buf
        } else {
            t.add(Node {
                src: n.src.iter().map(|s| map[s]).collect(),
                ..n.clone()
            })
        };
        map.insert(id, new);
    }
    Ok((t, roots.iter().map(|r| map[r]).collect(), inputs))
}

/// Evaluates `root` for the assignments `which` at once.
fn eval_at(
    g: &Graph,
    root: NodeId,
    vars: &BTreeMap<usize, i64>,
    which: &[usize],
) -> Result<Result<Vec<u64>, Ub>, String> {
    let m = which.len();
    let (t, roots, inputs) = with_buffers(g, &[root], vars, which)?;
    let r = roots[0];
    let ver = verify::verify(&t).map_err(|e| format!("the oracle rejects the expression: {e}"))?;
    let value = match eval::evaluate(&t, &ver, &inputs, &[r]) {
        Ok(ev) => ev.output(&t, r).cloned(),
        Err(e) => Err(e),
    };
    match value {
        Ok(v) => {
            let comp = &v.data.components()[0];
            let bits: Vec<u64> = comp
                .iter()
                .map(|e| match e {
                    Elem::Bits(b) => *b,
                    Elem::Uninit { .. } => 0,
                })
                .collect();
            Ok(Ok(if v.shape.is_empty() {
                vec![bits[0]; m]
            } else {
                bits
            }))
        }
        Err(OracleError::Ub { kind, .. }) => Ok(Err(kind)),
        Err(e) => Err(format!("the oracle cannot evaluate the expression: {e}")),
    }
}

/// Compares two expressions of one graph element by element over every assignment of the
/// variables either reaches: equal bits, or undefined behaviour on both sides. The error
/// names the first assignment that differs.
pub fn same_meaning(g: &Graph, a: NodeId, b: NodeId) -> Result<(), String> {
    let (da, db) = (g.node(a).dtype, g.node(b).dtype);
    if da != db {
        return Err(format!("dtype changed from {da} to {db}"));
    }
    let vars = loop_vars(g, &[a, b])?;
    let va = evaluate(g, a, &vars)?;
    let vb = evaluate(g, b, &vars)?;
    for (i, (x, y)) in va.iter().zip(&vb).enumerate() {
        let same = match (x, y) {
            (Ok(p), Ok(q)) => p == q,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            let show_o = |o: &Outcome| match o {
                Ok(bits) => format!(
                    "{} ({bits:#x})",
                    uopkit_interp::scalar::literal::display(da, *bits)
                ),
                Err(ub) => format!("UB: {ub}"),
            };
            return Err(format!(
                "not the same at {:?}: {} vs {}",
                assignment(&vars, i),
                show_o(x),
                show_o(y)
            ));
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "testkit"))]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

    fn runner() -> TestRunner {
        TestRunner::new_with_rng(
            crate::gen::rules::fixed_config(256, u32::MAX),
            TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
        )
    }

    #[test]
    fn the_empty_tape_is_a_loop_variable() {
        let mut b = ExprBuilder::new(&[], ExprConfig::default());
        let root = b.expr(Int64, 3);
        assert_eq!(show(&b.g, root), "r0");
    }

    #[test]
    fn generated_expressions_evaluate() {
        let mut r = runner();
        let s = expr(ExprConfig::default());
        let (mut ok, mut ub) = (0, 0);
        for _ in 0..300 {
            let e = s.new_tree(&mut r).unwrap().current();
            let vars = loop_vars(&e.graph, &[e.root]).unwrap();
            let v = evaluate(&e.graph, e.root, &vars).unwrap_or_else(|err| panic!("{e:?}: {err}"));
            assert_eq!(v.len(), assignments(&vars));
            ok += v.iter().filter(|o| o.is_ok()).count();
            ub += v.iter().filter(|o| o.is_err()).count();
        }
        assert!(ok > 1000 && ub > 0, "{ok} defined, {ub} undefined elements");
    }

    #[test]
    fn evaluation_matches_hand_values() {
        // (r0*5 + r1) % 3 over r0 in 0..2, r1 in 0..5.
        let mut b = ExprBuilder::new(&[], ExprConfig::default());
        let (i, j) = (b.range(0, 2), b.range(1, 5));
        let k5 = b.int(Int64, 5);
        let m = b.bin(Op::MUL, i, k5);
        let s = b.bin(Op::ADD, m, j);
        let k3 = b.int(Int64, 3);
        let e = b.bin(Op::CMOD, s, k3);
        let vars = loop_vars(&b.g, &[e]).unwrap();
        let got: Vec<u64> = evaluate(&b.g, e, &vars)
            .unwrap()
            .into_iter()
            .map(|o| o.unwrap())
            .collect();
        assert_eq!(got, (0..10u64).map(|v| v % 3).collect::<Vec<_>>());
        // Division by a variable that is 0 once: UB for that assignment only.
        let d = b.bin(Op::CDIV, k5, j);
        let got = evaluate(&b.g, d, &vars).unwrap();
        assert_eq!(got[0], Err(Ub::DivByZero));
        assert_eq!(got[1], Ok(5));
        assert_eq!(got[5], Err(Ub::DivByZero));
        // Comparing: x%3 vs x (differs from 3 on).
        let err = same_meaning(&b.g, e, s).unwrap_err();
        assert!(err.contains("{0: 0, 1: 3}"), "{err}");
        assert!(same_meaning(&b.g, e, e).is_ok());
    }

    #[test]
    fn index_expressions_reach_modulo_with_small_ranges() {
        let mut r = runner();
        let s = index_expr();
        let mut mods = 0;
        for _ in 0..200 {
            let e = s.new_tree(&mut r).unwrap().current();
            let g = &e.graph;
            mods += g
                .reachable(&[e.root])
                .iter()
                .filter(|&&n| g.node(n).op == Op::CMOD)
                .count();
            let vars = loop_vars(g, &[e.root]).unwrap();
            assert!(
                evaluate(g, e.root, &vars)
                    .unwrap()
                    .iter()
                    .all(|o| o.is_ok()),
                "{e:?}"
            );
        }
        assert!(mods > 50, "{mods}");
    }
}
