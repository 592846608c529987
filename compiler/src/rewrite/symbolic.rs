//! `symbolic`: constant folding and integer/index simplification (tinygrad's `symbolic`).
//!
//! Every rule is *exact*: for every value of its inputs, the oracle's result of the rewritten
//! expression equals the original's, bit for bit, and undefined behaviour is neither added
//! nor removed (a rule that drops a sub-expression requires it to be [`ub_free`]). Where
//! exactness needs more than the pattern, the rule checks value ranges ([`super::range`]) and
//! declines. In particular:
//!
//! * Integers wrap, so a reassociation such as `(x+c1)+c2 → x+(c1+c2)` is exact, but the
//!   division/modulo rules only fire when the ranges prove no intermediate value wraps.
//! * Float rules are rare: the oracle canonicalizes arithmetic NaNs (any NaN result is the
//!   canonical quiet NaN), so even `x*1.0 → x` changes a non-canonical NaN's bits, and
//!   `x+0.0 → x` changes `-0.0`. Only bit operations are rewritten on floats (`neg_neg`,
//!   `max_self`, `where_*`, `cmplt_self`) besides constant folding, which uses the oracle's
//!   own `scalar::alu`/`scalar::cast` and never folds an evaluation that is UB.
//!
//! The rules work on element-level (scalar) expressions: kernel index arithmetic and
//! per-element ALU, where a CONST stands for a value like any other. They do not reason about
//! tensor shapes: a rule may replace a node by a CONST or by an operand, which at the tensor
//! level could have another shape than the node (`x*0 → 0`, `where(c, x, x) → x`).

use uopkit_interp::ir::table;
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::alu::alu;
use uopkit_interp::scalar::cast::{bitcast, cast, mask, to_i128, wrap_i128};

use super::engine::{rewrite, RewriteOpts, Rule, RuleSet};
use super::pattern::{Captures, Pat};
use super::range::{Ranges, VRange};

/// The symbolic rule set.
pub fn symbolic() -> RuleSet {
    // Faults (test builds only) come first so that they win over the right rules.
    let mut rules = super::faults::active_rules_for("symbolic");
    rules.extend(symbolic_rules());
    RuleSet::new("symbolic", rules)
}

/// Simplifies the expression `root` with [`symbolic`] (bottom-up, default limits).
pub fn simplify(g: &mut Graph, root: NodeId) -> NodeId {
    rewrite(g, &[root], &symbolic(), RewriteOpts::bottom_up()).roots[0]
}

fn int_like(dt: DType) -> bool {
    dt.is_int() || dt.is_bool()
}

fn is_int(dt: DType) -> bool {
    dt.is_int()
}

fn is_zero(dt: DType, bits: u64) -> bool {
    int_like(dt) && bits & mask(dt) == 0
}

fn is_one(dt: DType, bits: u64) -> bool {
    int_like(dt) && bits & mask(dt) == 1
}

fn is_all_ones(dt: DType, bits: u64) -> bool {
    int_like(dt) && bits & mask(dt) == mask(dt)
}

fn const_bits(g: &Graph, id: NodeId) -> Option<u64> {
    let n = g.node(id);
    match n.arg {
        Arg::Const(b) if n.op == Op::CONST => Some(b),
        _ => None,
    }
}

/// The integer value of an int/bool CONST.
fn const_int(g: &Graph, id: NodeId) -> Option<i128> {
    let dt = g.node(id).dtype;
    if !int_like(dt) {
        return None;
    }
    const_bits(g, id).map(|b| to_i128(dt, b))
}

fn konst(g: &mut Graph, dt: DType, bits: u64) -> NodeId {
    g.add(Node {
        op: Op::CONST,
        dtype: dt,
        src: vec![],
        arg: Arg::Const(bits & mask(dt)),
    })
}

fn int_const(g: &mut Graph, dt: DType, v: i128) -> NodeId {
    konst(g, dt, wrap_i128(dt, v))
}

fn alu_node(g: &mut Graph, op: Op, dt: DType, src: Vec<NodeId>) -> NodeId {
    g.add(Node {
        op,
        dtype: dt,
        src,
        arg: Arg::None,
    })
}

fn dtype(g: &Graph, id: NodeId) -> DType {
    g.node(id).dtype
}

fn alu_ops(arity: u8) -> Vec<Op> {
    table::ops_where(|i| i.arity == arity)
}

const DIVS: &[Op] = &[Op::CDIV, Op::FLOORDIV];
const MODS: &[Op] = &[Op::CMOD, Op::FLOORMOD];

/// The rules of [`symbolic`], in priority order.
pub fn symbolic_rules() -> Vec<Rule> {
    let x = || Pat::var("x");
    let zero = || Pat::const_where("zero", is_zero);
    let one = || Pat::const_where("one", is_one);
    vec![
        // ---- constant folding (the oracle's own scalar semantics; UB is left alone) ----
        Rule::new(
            "fold_const_unary",
            Pat::ops(&alu_ops(1), [Pat::cvar("a")]),
            fold_unary,
        ),
        Rule::new(
            "fold_const_binary",
            Pat::ops(&alu_ops(2), [Pat::cvar("a"), Pat::cvar("b")]),
            fold_binary,
        ),
        Rule::new(
            "fold_const_ternary",
            Pat::ops(
                &alu_ops(3),
                [Pat::cvar("a"), Pat::cvar("b"), Pat::cvar("c")],
            ),
            fold_ternary,
        ),
        Rule::new(
            "fold_cast_const",
            Pat::op(Op::CAST, [Pat::cvar("a")]),
            fold_cast,
        ),
        Rule::new(
            "fold_bitcast_const",
            Pat::op(Op::BITCAST, [Pat::cvar("a")]),
            fold_bitcast,
        ),
        // ---- identities ----
        Rule::new(
            "add_zero",
            Pat::comm(Op::ADD, [x(), zero()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "sub_zero",
            Pat::op(Op::SUB, [x(), zero()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "sub_self",
            Pat::op(Op::SUB, [x(), x()]).dtype_where(int_like),
            to_zero_if_x_ub_free,
        ),
        Rule::new(
            "mul_one",
            Pat::comm(Op::MUL, [x(), one()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "mul_zero_int",
            Pat::comm(Op::MUL, [x(), zero()]).dtype_where(int_like),
            to_zero_if_x_ub_free,
        ),
        Rule::new(
            "neg_neg",
            Pat::op(Op::NEG, [Pat::op(Op::NEG, [x()])]),
            keep_x,
        ),
        Rule::new(
            "div_one",
            Pat::ops(DIVS, [x(), one()]).dtype_where(is_int),
            keep_x,
        ),
        Rule::new(
            "mod_one",
            Pat::ops(MODS, [x(), one()]).dtype_where(is_int),
            to_zero_if_x_ub_free,
        ),
        Rule::new(
            "and_self",
            Pat::op(Op::AND, [x(), x()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "or_self",
            Pat::op(Op::OR, [x(), x()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "xor_self",
            Pat::op(Op::XOR, [x(), x()]).dtype_where(int_like),
            to_zero_if_x_ub_free,
        ),
        Rule::new(
            "and_zero",
            Pat::comm(Op::AND, [x(), zero()]).dtype_where(int_like),
            to_zero_if_x_ub_free,
        ),
        Rule::new(
            "and_all_ones",
            Pat::comm(Op::AND, [x(), Pat::const_where("ones", is_all_ones)]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "or_zero",
            Pat::comm(Op::OR, [x(), zero()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new(
            "or_all_ones",
            Pat::comm(Op::OR, [x(), Pat::const_where("ones", is_all_ones)]).dtype_where(int_like),
            or_all_ones,
        ),
        Rule::new(
            "xor_zero",
            Pat::comm(Op::XOR, [x(), zero()]).dtype_where(int_like),
            keep_x,
        ),
        Rule::new("max_self", Pat::op(Op::MAX, [x(), x()]), keep_x),
        // ---- constant chains (exact: wrapping + and * are associative) ----
        Rule::new(
            "add_const_chain",
            Pat::comm(
                Op::ADD,
                [Pat::comm(Op::ADD, [x(), Pat::cvar("c1")]), Pat::cvar("c2")],
            )
            .dtype_where(int_like),
            const_chain,
        ),
        Rule::new(
            "mul_const_chain",
            Pat::comm(
                Op::MUL,
                [Pat::comm(Op::MUL, [x(), Pat::cvar("c1")]), Pat::cvar("c2")],
            )
            .dtype_where(int_like),
            const_chain,
        ),
        // ---- division and modulo by constants (range-checked) ----
        Rule::new(
            "div_of_small",
            Pat::ops(DIVS, [x(), Pat::cvar("c")]).dtype_where(is_int),
            div_of_small,
        ),
        Rule::new(
            "mod_of_small",
            Pat::ops(MODS, [x(), Pat::cvar("c")]).dtype_where(is_int),
            mod_of_small,
        ),
        Rule::new(
            "div_mul_cancel",
            Pat::ops(
                DIVS,
                [
                    Pat::comm(Op::MUL, [Pat::var("a"), Pat::cvar("c")]),
                    Pat::var("c"),
                ],
            )
            .dtype_where(is_int),
            div_mul_cancel,
        ),
        Rule::new(
            "mod_mul_zero",
            Pat::ops(
                MODS,
                [
                    Pat::comm(Op::MUL, [Pat::var("a"), Pat::cvar("c")]),
                    Pat::var("c"),
                ],
            )
            .dtype_where(is_int),
            mod_mul_zero,
        ),
        Rule::new("div_affine", affine_pat(DIVS), div_affine),
        Rule::new("mod_affine", affine_pat(MODS), mod_affine),
        Rule::new(
            "div_div",
            Pat::ops(
                DIVS,
                [
                    Pat::ops(DIVS, [x(), Pat::cvar("c1")]).named("inner"),
                    Pat::cvar("c2"),
                ],
            )
            .dtype_where(is_int),
            div_div,
        ),
        Rule::new(
            "mod_mod",
            Pat::ops(
                MODS,
                [
                    Pat::ops(MODS, [x(), Pat::cvar("c1")]).named("inner"),
                    Pat::cvar("c2"),
                ],
            )
            .dtype_where(is_int),
            mod_mod,
        ),
        // ---- comparisons ----
        Rule::new("cmplt_self", Pat::op(Op::CMPLT, [x(), x()]), cmplt_self),
        Rule::new(
            "cmpne_self",
            Pat::op(Op::CMPNE, [x().dtype_where(int_like), x()]),
            cmpne_self,
        ),
        Rule::new(
            "cmpeq_self",
            Pat::op(Op::CMPEQ, [x().dtype_where(int_like), x()]),
            cmpeq_self,
        ),
        Rule::new(
            "cmplt_range",
            Pat::op(Op::CMPLT, [x(), Pat::var("y")]),
            cmp_range,
        ),
        Rule::new(
            "cmpne_range",
            Pat::op(Op::CMPNE, [x(), Pat::var("y")]),
            cmp_range,
        ),
        Rule::new(
            "cmpeq_range",
            Pat::op(Op::CMPEQ, [x(), Pat::var("y")]),
            cmp_range,
        ),
        // ---- where / max ----
        Rule::new(
            "where_const_cond",
            Pat::op(Op::WHERE, [Pat::cvar("c"), Pat::var("a"), Pat::var("b")]),
            where_const_cond,
        ),
        Rule::new(
            "where_same",
            Pat::op(Op::WHERE, [Pat::var("c"), x(), x()]),
            where_same,
        ),
        Rule::new(
            "where_true_false",
            Pat::op(
                Op::WHERE,
                [
                    Pat::var("c"),
                    Pat::const_where("t", |dt, b| dt.is_bool() && b & 1 == 1),
                    zero(),
                ],
            )
            .dtype(DType::Bool),
            where_true_false,
        ),
        Rule::new(
            "max_range",
            Pat::op(Op::MAX, [x(), Pat::var("y")]).dtype_where(int_like),
            max_range,
        ),
        // ---- casts ----
        Rule::new("cast_noop", Pat::op(Op::CAST, [x()]), cast_noop),
        Rule::new(
            "cast_widen_chain",
            Pat::op(Op::CAST, [Pat::op(Op::CAST, [x()]).named("mid")]),
            cast_widen_chain,
        ),
    ]
}

/// `(a*c + b) op c`, either operand order in the ADD and the MUL.
fn affine_pat(ops: &[Op]) -> Pat {
    let mul = Pat::comm(Op::MUL, [Pat::var("a"), Pat::cvar("c")]);
    Pat::ops(
        ops,
        [Pat::comm(Op::ADD, [mul, Pat::var("b")]), Pat::var("c")],
    )
    .dtype_where(is_int)
}

// ---------------------------------------------------------------- constant folding

fn fold_unary(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (op, dt) = (g.node(n).op, dtype(g, n));
    let a = const_bits(g, c["a"])?;
    let v = alu(op, dt, &[a]).ok()?;
    Some(konst(g, dt, v))
}

fn fold_binary(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (op, dt) = (g.node(n).op, dtype(g, n));
    // The operand dtype (comparisons return bool; shifts keep the left operand's dtype).
    let sdt = dtype(g, c["a"]);
    let v = alu(op, sdt, &[const_bits(g, c["a"])?, const_bits(g, c["b"])?]).ok()?;
    Some(konst(g, dt, v))
}

fn fold_ternary(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (op, dt) = (g.node(n).op, dtype(g, n));
    let v = alu(
        op,
        dt,
        &[
            const_bits(g, c["a"])?,
            const_bits(g, c["b"])?,
            const_bits(g, c["c"])?,
        ],
    )
    .ok()?;
    Some(konst(g, dt, v))
}

fn fold_cast(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (from, to) = (dtype(g, c["a"]), dtype(g, n));
    if from == DType::Void || to == DType::Void {
        return None;
    }
    let v = cast(from, to, const_bits(g, c["a"])?).ok()?;
    Some(konst(g, to, v))
}

fn fold_bitcast(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (from, to) = (dtype(g, c["a"]), dtype(g, n));
    let v = bitcast(from, to, const_bits(g, c["a"])?)?;
    Some(konst(g, to, v))
}

// ---------------------------------------------------------------- identities

fn keep_x(_: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    Some(c["x"])
}

fn to_zero_if_x_ub_free(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    if !Ranges::new(g).ub_free(c["x"]) {
        return None;
    }
    let dt = dtype(g, n);
    Some(konst(g, dt, 0))
}

fn or_all_ones(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    Ranges::new(g).ub_free(c["x"]).then(|| c["ones"])
}

fn const_chain(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (op, dt) = (g.node(n).op, dtype(g, n));
    let v = alu(op, dt, &[const_bits(g, c["c1"])?, const_bits(g, c["c2"])?]).ok()?;
    let k = konst(g, dt, v);
    Some(alu_node(g, op, dt, vec![c["x"], k]))
}

// ---------------------------------------------------------------- division and modulo

/// The divisor captured as `c` when it is a positive constant.
fn positive_divisor(g: &Graph, c: &Captures) -> Option<i128> {
    const_int(g, c["c"]).filter(|&v| v > 0)
}

fn div_of_small(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let d = positive_divisor(g, c)?;
    let mut r = Ranges::new(g);
    let x = r.get(c["x"])?;
    if !(x.min >= 0 && x.max < d && r.ub_free(c["x"])) {
        return None;
    }
    let dt = dtype(g, n);
    Some(konst(g, dt, 0))
}

fn mod_of_small(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    let d = positive_divisor(g, c)?;
    let x = Ranges::new(g).get(c["x"])?;
    (x.min >= 0 && x.max < d).then(|| c["x"])
}

/// The exact range of `a*c` when it does not wrap in `dt` (c > 0).
fn scaled(a: VRange, c: i128, dt: DType) -> Option<VRange> {
    let r = VRange::new(a.min.checked_mul(c)?, a.max.checked_mul(c)?);
    r.within(VRange::full(dt)?).then_some(r)
}

fn div_mul_cancel(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    // (a*c)/c = a exactly when a*c does not wrap; c > 0, so no UB either way.
    let d = positive_divisor(g, c)?;
    let a = Ranges::new(g).get(c["a"])?;
    scaled(a, d, dtype(g, n))?;
    Some(c["a"])
}

fn mod_mul_zero(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let d = positive_divisor(g, c)?;
    let mut r = Ranges::new(g);
    let a = r.get(c["a"])?;
    let dt = dtype(g, n);
    scaled(a, d, dt)?;
    if !r.ub_free(c["a"]) {
        return None;
    }
    Some(konst(g, dt, 0))
}

/// For `(a*c + b) op c` (c >= 2): true when neither `a*c` nor `a*c + b` wraps and, for the
/// truncating ops, `b` and `a*c + b` have the same sign (so truncation acts like flooring,
/// or like ceiling, on both).
fn affine_exact(g: &Graph, c: &Captures, op: Op, dt: DType) -> Option<i128> {
    let d = const_int(g, c["c"]).filter(|&v| v >= 2)?;
    let mut r = Ranges::new(g);
    let (a, b) = (r.get(c["a"])?, r.get(c["b"])?);
    let ac = scaled(a, d, dt)?;
    let sum = VRange::new(ac.min + b.min, ac.max + b.max);
    if !sum.within(VRange::full(dt)?) {
        return None;
    }
    let truncating = matches!(op, Op::CDIV | Op::CMOD);
    let same_sign = (b.min >= 0 && sum.min >= 0) || (b.max <= 0 && sum.max <= 0);
    (!truncating || same_sign).then_some(d)
}

fn div_affine(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    // floor((a*c + b)/c) = a + floor(b/c) for all integers; trunc likewise when b and the sum
    // share a sign. The result equals the original quotient, so the new ADD cannot wrap.
    let (op, dt) = (g.node(n).op, dtype(g, n));
    affine_exact(g, c, op, dt)?;
    let q = alu_node(g, op, dt, vec![c["b"], c["c"]]);
    Some(alu_node(g, Op::ADD, dt, vec![c["a"], q]))
}

fn mod_affine(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let (op, dt) = (g.node(n).op, dtype(g, n));
    affine_exact(g, c, op, dt)?;
    if !Ranges::new(g).ub_free(c["a"]) {
        return None;
    }
    Some(alu_node(g, op, dt, vec![c["b"], c["c"]]))
}

fn div_div(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    // (x/c1)/c2 = x/(c1*c2) for positive c1, c2, both for floor and truncating division.
    let (op, dt) = (g.node(n).op, dtype(g, n));
    if g.node(c["inner"]).op != op {
        return None;
    }
    let (c1, c2) = (const_int(g, c["c1"])?, const_int(g, c["c2"])?);
    if c1 <= 0 || c2 <= 0 {
        return None;
    }
    let prod = c1.checked_mul(c2)?;
    if !VRange::full(dt)?.contains(prod) {
        return None;
    }
    let k = int_const(g, dt, prod);
    Some(alu_node(g, op, dt, vec![c["x"], k]))
}

fn mod_mod(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    // (x % c1) % c2 = x % c2 when c2 divides c1 (positive), for floor and truncating modulo.
    let (op, dt) = (g.node(n).op, dtype(g, n));
    if g.node(c["inner"]).op != op {
        return None;
    }
    let (c1, c2) = (const_int(g, c["c1"])?, const_int(g, c["c2"])?);
    if c1 <= 0 || c2 <= 0 || c1 % c2 != 0 {
        return None;
    }
    Some(alu_node(g, op, dt, vec![c["x"], c["c2"]]))
}

// ---------------------------------------------------------------- comparisons

fn bool_const(g: &mut Graph, v: bool) -> NodeId {
    konst(g, DType::Bool, v as u64)
}

fn cmplt_self(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    // x < x is false for every value, NaN included.
    Ranges::new(g).ub_free(c["x"]).then(|| bool_const(g, false))
}

fn cmpne_self(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    Ranges::new(g).ub_free(c["x"]).then(|| bool_const(g, false))
}

fn cmpeq_self(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    Ranges::new(g).ub_free(c["x"]).then(|| bool_const(g, true))
}

fn cmp_range(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    let op = g.node(n).op;
    let mut r = Ranges::new(g);
    let (a, b) = (r.get(c["x"])?, r.get(c["y"])?);
    let disjoint = a.max < b.min || b.max < a.min;
    let same_point = a.as_point().is_some() && a == b;
    let v = match op {
        Op::CMPLT if a.max < b.min => true,
        Op::CMPLT if a.min >= b.max => false,
        Op::CMPNE if disjoint => true,
        Op::CMPNE if same_point => false,
        Op::CMPEQ if disjoint => false,
        Op::CMPEQ if same_point => true,
        _ => return None,
    };
    if !(r.ub_free(c["x"]) && r.ub_free(c["y"])) {
        return None;
    }
    Some(bool_const(g, v))
}

// ---------------------------------------------------------------- where, max

fn where_const_cond(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    let cond = const_bits(g, c["c"])? & 1 != 0;
    let (keep, drop) = if cond {
        (c["a"], c["b"])
    } else {
        (c["b"], c["a"])
    };
    Ranges::new(g).ub_free(drop).then_some(keep)
}

fn where_same(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    Ranges::new(g).ub_free(c["c"]).then(|| c["x"])
}

fn where_true_false(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    (dtype(g, c["c"]) == DType::Bool).then(|| c["c"])
}

fn max_range(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    // Int MAX returns an operand, and equal int values have equal bits.
    let mut r = Ranges::new(g);
    let (a, b) = (r.get(c["x"])?, r.get(c["y"])?);
    let (keep, drop) = if a.min >= b.max {
        (c["x"], c["y"])
    } else if a.max <= b.min {
        (c["y"], c["x"])
    } else {
        return None;
    };
    r.ub_free(drop).then_some(keep)
}

// ---------------------------------------------------------------- casts

fn cast_noop(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    (dtype(g, c["x"]) == dtype(g, n)).then(|| c["x"])
}

fn cast_widen_chain(g: &mut Graph, c: &Captures, n: NodeId) -> Option<NodeId> {
    // CAST_C(CAST_B(x: A)) = CAST_C(x) when every value of x survives A → B unchanged (A and
    // B int/bool, B not bool): both then convert the same integer value to C.
    let (a, b, cdt) = (dtype(g, c["x"]), dtype(g, c["mid"]), dtype(g, n));
    if !int_like(a) || !b.is_int() || cdt == DType::Void {
        return None;
    }
    let xr = Ranges::new(g).get(c["x"])?;
    if !xr.within(VRange::full(b)?) {
        return None;
    }
    if cdt == a {
        return Some(c["x"]);
    }
    Some(g.add(Node {
        op: Op::CAST,
        dtype: cdt,
        src: vec![c["x"]],
        arg: Arg::None,
    }))
}
