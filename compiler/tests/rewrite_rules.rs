//! The rewrite engine and the `symbolic` rules.
//!
//! * Engine: fixed point, iteration and node limits, hit counts, determinism, orders,
//!   commutative matching, consistent captures, priorities.
//! * Each symbolic rule: fires on an example with the expected result (structure, which
//!   hash-consing reduces to node identity) and does not fire where it would be wrong.
//! * Exactness: expressions over loop variables (`RANGE`s with small ends) and random
//!   constants are evaluated before and after rewriting, for every assignment of the
//!   variables, with a small evaluator built on the oracle's `scalar::alu`/`scalar::cast`;
//!   results must be equal bit for bit (or both UB). Every rule is checked alone (so each
//!   firing is that rule's) and within the full set; value ranges are checked for soundness.

use std::collections::{BTreeMap, BTreeSet};

use uopkit_compiler::rewrite::{
    all_rules, rewrite, symbolic, Captures, Order, Pat, Ranges, RewriteOpts, RewriteResult, Rule,
    RuleSet, StopReason,
};
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::alu::alu;
use uopkit_interp::scalar::cast::{bitcast, cast, mask, to_i128, wrap_i128};
use uopkit_interp::scalar::Ub;

use DType::*;

// ------------------------------------------------------------------------------------------
// Builders

fn c(g: &mut Graph, dt: DType, v: i128) -> NodeId {
    g.add(Node {
        op: Op::CONST,
        dtype: dt,
        src: vec![],
        arg: Arg::Const(wrap_i128(dt, v)),
    })
}

fn cbits(g: &mut Graph, dt: DType, bits: u64) -> NodeId {
    g.add(Node {
        op: Op::CONST,
        dtype: dt,
        src: vec![],
        arg: Arg::Const(bits & mask(dt)),
    })
}

fn f32c(g: &mut Graph, x: f32) -> NodeId {
    cbits(g, Float32, x.to_bits() as u64)
}

/// A loop variable 0..end (int64).
fn var(g: &mut Graph, axis: usize, end: i128) -> NodeId {
    let e = c(g, Int64, end);
    g.add(Node {
        op: Op::RANGE,
        dtype: Int64,
        src: vec![e],
        arg: Arg::Index(axis),
    })
}

fn bin(g: &mut Graph, op: Op, a: NodeId, b: NodeId) -> NodeId {
    let dt = if op.is_comparison() {
        Bool
    } else {
        g.node(a).dtype
    };
    g.add(Node {
        op,
        dtype: dt,
        src: vec![a, b],
        arg: Arg::None,
    })
}

fn un(g: &mut Graph, op: Op, a: NodeId) -> NodeId {
    let dt = g.node(a).dtype;
    g.add(Node {
        op,
        dtype: dt,
        src: vec![a],
        arg: Arg::None,
    })
}

fn wher(g: &mut Graph, cond: NodeId, a: NodeId, b: NodeId) -> NodeId {
    let dt = g.node(a).dtype;
    g.add(Node {
        op: Op::WHERE,
        dtype: dt,
        src: vec![cond, a, b],
        arg: Arg::None,
    })
}

fn cast_to(g: &mut Graph, dt: DType, a: NodeId) -> NodeId {
    g.add(Node {
        op: Op::CAST,
        dtype: dt,
        src: vec![a],
        arg: Arg::None,
    })
}

fn bitcast_to(g: &mut Graph, dt: DType, a: NodeId) -> NodeId {
    g.add(Node {
        op: Op::BITCAST,
        dtype: dt,
        src: vec![a],
        arg: Arg::None,
    })
}

fn show(g: &Graph, id: NodeId) -> String {
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

// ------------------------------------------------------------------------------------------
// A tiny evaluator: every node reachable from the root, eagerly, as the oracle does.

type Env = BTreeMap<usize, i128>;

/// The values of every node (in `order`) under `env`, or the first UB.
fn eval_nodes(g: &Graph, order: &[NodeId], env: &Env) -> Result<Vec<u64>, Ub> {
    let mut vals: Vec<u64> = Vec::with_capacity(order.len());
    let pos = |id: NodeId| order.binary_search(&id).unwrap();
    for &id in order {
        let n = g.node(id);
        let s = |i: usize| vals[pos(n.src[i])];
        let v = match n.op {
            Op::CONST => match n.arg {
                Arg::Const(b) => b,
                _ => unreachable!(),
            },
            Op::RANGE => match n.arg {
                Arg::Index(a) => wrap_i128(Int64, env[&a]),
                _ => unreachable!(),
            },
            Op::CAST => cast(g.node(n.src[0]).dtype, n.dtype, s(0))?,
            Op::BITCAST => bitcast(g.node(n.src[0]).dtype, n.dtype, s(0)).unwrap(),
            op => {
                let odt = if op == Op::WHERE {
                    g.node(n.src[1]).dtype
                } else {
                    g.node(n.src[0]).dtype
                };
                let operands: Vec<u64> = (0..n.src.len()).map(s).collect();
                alu(op, odt, &operands)?
            }
        };
        vals.push(v);
    }
    Ok(vals)
}

/// Every assignment of the loop variables under `root` (axis → end taken from its CONST).
fn assignments(g: &Graph, root: NodeId) -> Vec<Env> {
    let mut axes = BTreeMap::new();
    for id in g.reachable(&[root]) {
        let n = g.node(id);
        if let (Op::RANGE, Arg::Index(a)) = (n.op, &n.arg) {
            let end = match g.node(n.src[0]).arg {
                Arg::Const(b) => to_i128(Int64, b),
                _ => panic!("test ranges have constant ends"),
            };
            axes.insert(*a, end.max(1));
        }
    }
    let mut envs = vec![Env::new()];
    for (&a, &end) in &axes {
        envs = envs
            .into_iter()
            .flat_map(|e| (0..end).map(move |v| with(&e, a, v)))
            .collect();
    }
    envs
}

fn with(e: &Env, a: usize, v: i128) -> Env {
    let mut e = e.clone();
    e.insert(a, v);
    e
}

/// `after` computes what `before` computes, for every assignment: equal bits, or both UB.
fn assert_equivalent(g: &Graph, before: NodeId, after: NodeId, what: &str) {
    assert_eq!(
        g.node(before).dtype,
        g.node(after).dtype,
        "{what}: dtype changed"
    );
    let (ob, oa) = (g.reachable(&[before]), g.reachable(&[after]));
    for env in assignments(g, before) {
        let x = eval_nodes(g, &ob, &env).map(|v| *v.last().unwrap());
        let y = eval_nodes(g, &oa, &env).map(|v| *v.last().unwrap());
        let same = match (x, y) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        assert!(
            same,
            "{what}: not exact at {env:?}: {x:?} vs {y:?}\n  before: {}\n  after:  {}",
            show(g, before),
            show(g, after)
        );
    }
}

/// Every int/bool node's value lies in its computed range, whenever it is defined.
fn assert_ranges_sound(g: &Graph, root: NodeId) {
    let order = g.reachable(&[root]);
    let mut ranges = Ranges::new(g);
    let rs: Vec<_> = order.iter().map(|&id| ranges.get(id)).collect();
    for env in assignments(g, root) {
        // Evaluate node by node, so nodes before the first UB are still checked.
        for (k, &id) in order.iter().enumerate() {
            let sub: Vec<NodeId> = g.reachable(&[id]);
            let Ok(vals) = eval_nodes(g, &sub, &env) else {
                continue;
            };
            if let Some(r) = rs[k] {
                let v = to_i128(g.node(id).dtype, *vals.last().unwrap());
                assert!(
                    r.contains(v),
                    "range {r:?} of {} misses {v} at {env:?}",
                    show(g, id)
                );
            }
        }
    }
}

fn run(g: &mut Graph, root: NodeId, rules: &RuleSet, order: Order) -> RewriteResult {
    let opts = RewriteOpts {
        order,
        ..RewriteOpts::default()
    }
    .max_iterations(64);
    rewrite(g, &[root], rules, opts)
}

fn simp(g: &mut Graph, root: NodeId) -> RewriteResult {
    run(g, root, &symbolic(), Order::BottomUp)
}

/// A rule set holding one symbolic rule.
fn only(rule: &str) -> RuleSet {
    let r = symbolic()
        .rules()
        .iter()
        .find(|r| r.name == rule)
        .unwrap_or_else(|| panic!("no rule {rule}"))
        .clone();
    RuleSet::new("only", vec![r])
}

// ------------------------------------------------------------------------------------------
// Engine

#[test]
fn fixed_point_is_reached_and_reported() {
    let mut g = Graph::new();
    let i = var(&mut g, 0, 8);
    let (one, two, three) = (
        c(&mut g, Int64, 1),
        c(&mut g, Int64, 2),
        c(&mut g, Int64, 3),
    );
    let e = bin(&mut g, Op::ADD, i, one);
    let e = bin(&mut g, Op::ADD, two, e); // commuted on purpose
    let e = bin(&mut g, Op::ADD, e, three);
    let r = simp(&mut g, e);
    let six = c(&mut g, Int64, 6);
    let want = bin(&mut g, Op::ADD, i, six);
    assert_eq!(r.roots, vec![want], "{}", show(&g, r.roots[0]));
    assert_eq!(r.stop, StopReason::FixedPoint);
    assert_eq!(r.hit("add_const_chain"), 2);
    assert_eq!(r.total_hits(), 2);
    assert_eq!(
        r.iterations, 2,
        "one pass rewrites both ADDs, the second finds nothing"
    );
    // Rewriting the normal form again: nothing to do, one pass.
    let again = simp(&mut g, want);
    assert_eq!(
        (
            again.roots[0],
            again.stop,
            again.iterations,
            again.total_hits()
        ),
        (want, StopReason::FixedPoint, 1, 0)
    );
    assert_eq!(again.nodes_added, 0);
}

fn flip_flop() -> RuleSet {
    RuleSet::new(
        "flip_flop",
        vec![
            Rule::new(
                "one_to_two",
                Pat::const_where("c", |dt, b| dt == Int32 && b == 1),
                |g, _, _| Some(c(g, Int32, 2)),
            ),
            Rule::new(
                "two_to_one",
                Pat::const_where("c", |dt, b| dt == Int32 && b == 2),
                |g, _, _| Some(c(g, Int32, 1)),
            ),
        ],
    )
}

#[test]
fn oscillating_rules_stop_at_the_iteration_limit() {
    for order in [Order::BottomUp, Order::TopDown] {
        let mut g = Graph::new();
        let one = c(&mut g, Int32, 1);
        let x = c(&mut g, Int32, 5);
        let e = bin(&mut g, Op::ADD, x, one);
        let r = rewrite(
            &mut g,
            &[e],
            &flip_flop(),
            RewriteOpts {
                order,
                ..RewriteOpts::default()
            }
            .max_iterations(7),
        );
        assert_eq!(r.stop, StopReason::IterationLimit);
        assert_eq!(r.iterations, 7);
        assert_eq!(
            r.hits,
            BTreeMap::from([("one_to_two", 4), ("two_to_one", 3)])
        );
        let two = c(&mut g, Int32, 2);
        assert_eq!(r.roots, vec![bin(&mut g, Op::ADD, x, two)]);
        // No iterations allowed: nothing happens.
        let r = rewrite(
            &mut g,
            &[e],
            &flip_flop(),
            RewriteOpts::default().max_iterations(0),
        );
        assert_eq!(
            (r.roots[0], r.stop, r.iterations),
            (e, StopReason::IterationLimit, 0)
        );
    }
}

#[test]
fn growing_rules_stop_at_the_node_limit() {
    let grow = RuleSet::new(
        "grow",
        vec![Rule::new(
            "neg_grows",
            Pat::op(Op::NEG, [Pat::var("x")]),
            |g, caps, _| {
                let one = c(g, Int32, 1);
                let a = bin(g, Op::ADD, caps["x"], one);
                Some(un(g, Op::NEG, a))
            },
        )],
    );
    let mut g = Graph::new();
    let x = c(&mut g, Int32, 5);
    let e = un(&mut g, Op::NEG, x);
    let r = rewrite(
        &mut g,
        &[e],
        &grow,
        RewriteOpts::default().max_nodes(10).max_iterations(1000),
    );
    assert_eq!(r.stop, StopReason::NodeLimit);
    assert!(
        r.nodes_added > 10 && r.nodes_added <= 13,
        "{}",
        r.nodes_added
    );
    assert_eq!(r.hit("neg_grows"), r.iterations);
}

#[test]
fn rule_priority_and_declining_rules() {
    let rules = RuleSet::new(
        "prio",
        vec![
            Rule::new(
                "declines",
                Pat::op(Op::ADD, [Pat::var("x"), Pat::var("y")]),
                |_, _, _| None,
            ),
            Rule::new(
                "first",
                Pat::op(Op::ADD, [Pat::var("x"), Pat::var("y")]),
                |_, c, _| Some(c["x"]),
            ),
            Rule::new(
                "second",
                Pat::op(Op::ADD, [Pat::var("x"), Pat::var("y")]),
                |_, c, _| Some(c["y"]),
            ),
        ],
    );
    let mut g = Graph::new();
    let (a, b) = (c(&mut g, Int32, 1), c(&mut g, Int32, 2));
    let e = bin(&mut g, Op::ADD, a, b);
    let r = rewrite(&mut g, &[e], &rules, RewriteOpts::default());
    assert_eq!(r.roots, vec![a]);
    assert_eq!(r.hits, BTreeMap::from([("first", 1)]));
    assert_eq!(rules.names(), vec!["declines", "first", "second"]);
}

#[test]
#[should_panic(expected = "duplicate rule name")]
fn rule_names_must_be_unique() {
    let r = Rule::new("same", Pat::any(), |_, _, _| None);
    let _ = RuleSet::new("dup", vec![r.clone(), r]);
}

#[test]
fn commutative_matching_and_consistent_captures() {
    let mut g = Graph::new();
    let i = var(&mut g, 0, 8);
    let j = var(&mut g, 1, 8);
    let zero = c(&mut g, Int64, 0);
    // 0 + i and i + 0 both match `x + 0` (commutative).
    for e in [bin(&mut g, Op::ADD, zero, i), bin(&mut g, Op::ADD, i, zero)] {
        let r = run(&mut g, e, &only("add_zero"), Order::BottomUp);
        assert_eq!(r.roots, vec![i]);
    }
    // SUB is not commutative: 0 - i stays.
    let e = bin(&mut g, Op::SUB, zero, i);
    assert_eq!(
        run(&mut g, e, &only("sub_zero"), Order::BottomUp).roots,
        vec![e]
    );
    // x - x needs equal operands.
    let same = bin(&mut g, Op::SUB, i, i);
    let diff = bin(&mut g, Op::SUB, i, j);
    assert_eq!(
        run(&mut g, same, &only("sub_self"), Order::BottomUp).roots,
        vec![zero]
    );
    assert_eq!(
        run(&mut g, diff, &only("sub_self"), Order::BottomUp).roots,
        vec![diff]
    );
    // Structurally equal operands built separately are one node (hash-consing), so they match.
    let k = c(&mut g, Int64, 3);
    let a1 = bin(&mut g, Op::MUL, i, k);
    let a2 = bin(&mut g, Op::MUL, i, k);
    let e = bin(&mut g, Op::XOR, a1, a2);
    assert_eq!(
        run(&mut g, e, &only("xor_self"), Order::BottomUp).roots,
        vec![zero]
    );
}

#[test]
fn bottom_up_and_top_down_orders() {
    // (i + 0) * 0: bottom-up removes the +0 first, top-down sees the *0 first.
    let mut g = Graph::new();
    let i = var(&mut g, 0, 8);
    let zero = c(&mut g, Int64, 0);
    let a = bin(&mut g, Op::ADD, i, zero);
    let e = bin(&mut g, Op::MUL, a, zero);
    let bu = run(&mut g, e, &symbolic(), Order::BottomUp);
    let td = run(&mut g, e, &symbolic(), Order::TopDown);
    assert_eq!(bu.roots, vec![zero]);
    assert_eq!(td.roots, vec![zero]);
    assert_eq!(
        bu.hits,
        BTreeMap::from([("add_zero", 1), ("mul_zero_int", 1)])
    );
    assert_eq!(td.hits, BTreeMap::from([("mul_zero_int", 1)]));
    assert_eq!(
        (bu.stop, td.stop),
        (StopReason::FixedPoint, StopReason::FixedPoint)
    );

    // Top-down rewrites the children of a replacement in the same pass.
    let one = c(&mut g, Int64, 1);
    let inner = bin(&mut g, Op::ADD, i, zero);
    let outer = bin(&mut g, Op::MUL, inner, one);
    let lt = bin(&mut g, Op::CMPLT, i, one);
    let w = wher(&mut g, lt, outer, inner);
    for order in [Order::BottomUp, Order::TopDown] {
        // where(i<1, (i+0)*1, i+0) → where(i<1, i, i) → i
        let r = run(&mut g, w, &symbolic(), order);
        assert_eq!(r.roots, vec![i], "{order:?}: {}", show(&g, r.roots[0]));
        assert_eq!(r.stop, StopReason::FixedPoint);
        assert_equivalent(&g, w, r.roots[0], "orders");
    }
}

#[test]
fn several_roots_share_one_rewrite() {
    let mut g = Graph::new();
    let i = var(&mut g, 0, 8);
    let zero = c(&mut g, Int64, 0);
    let a = bin(&mut g, Op::ADD, i, zero);
    let b = bin(&mut g, Op::MUL, a, a);
    let r = simp(&mut g, a);
    assert_eq!(r.roots, vec![i]);
    let r = rewrite(&mut g, &[a, b, i], &symbolic(), RewriteOpts::default());
    let ii = bin(&mut g, Op::MUL, i, i);
    assert_eq!(r.roots, vec![i, ii, i]);
    assert_eq!(
        r.hit("add_zero"),
        1,
        "the shared sub-expression is rewritten once"
    );
}

#[test]
fn rewriting_is_deterministic() {
    let build = || {
        let mut gen = Gen::new(12345);
        let roots: Vec<NodeId> = (0..200).map(|_| gen.root()).collect();
        let r = rewrite(&mut gen.g, &roots, &symbolic(), RewriteOpts::default());
        let shown: Vec<String> = r.roots.iter().map(|&x| show(&gen.g, x)).collect();
        (r, shown, gen.g.len())
    };
    let (a, sa, la) = build();
    let (b, sb, lb) = build();
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    assert_eq!(la, lb);
    assert!(a.total_hits() > 100);
}

#[test]
fn registry_lists_every_symbolic_rule_once() {
    let all = all_rules();
    let names: BTreeSet<_> = all.iter().collect();
    assert_eq!(names.len(), all.len(), "rule names are unique");
    assert_eq!(all.len(), symbolic().len());
    assert!(all.iter().all(|(set, _)| *set == "symbolic"));
    for rule in [
        "fold_const_binary",
        "add_zero",
        "mul_one",
        "mul_zero_int",
        "div_affine",
        "mod_affine",
    ] {
        assert!(all.contains(&("symbolic", rule)), "{rule}");
    }
}

// ------------------------------------------------------------------------------------------
// Each rule fires where it should, with the expected result

type Case = (&'static str, fn(&mut Graph) -> (NodeId, NodeId));

fn fire_cases() -> Vec<Case> {
    fn i8v(g: &mut Graph) -> NodeId {
        var(g, 0, 8)
    }
    fn j4(g: &mut Graph) -> NodeId {
        var(g, 1, 4)
    }
    fn fx(g: &mut Graph) -> NodeId {
        // A float that takes NaN payloads, -0.0 and ordinary values.
        let i = var(g, 0, 8);
        let i = cast_to(g, UInt32, i);
        let k = c(g, UInt32, 0x3fc0_0001);
        let m = bin(g, Op::MUL, i, k);
        bitcast_to(g, Float32, m)
    }
    vec![
        ("fold_const_unary", |g| {
            let x = c(g, Int32, 5);
            (un(g, Op::NEG, x), c(g, Int32, -5))
        }),
        ("fold_const_unary", |g| {
            let x = f32c(g, 4.0);
            (un(g, Op::SQRT, x), f32c(g, 2.0))
        }),
        ("fold_const_binary", |g| {
            let (a, b) = (c(g, Int32, -7), c(g, Int32, 2));
            (bin(g, Op::FLOORDIV, a, b), c(g, Int32, -4))
        }),
        ("fold_const_binary", |g| {
            let (a, b) = (c(g, UInt8, 3), c(g, UInt8, 200));
            (bin(g, Op::CMPLT, a, b), c(g, Bool, 1))
        }),
        ("fold_const_binary", |g| {
            let (a, b) = (c(g, Int8, 100), c(g, Int8, 100));
            (bin(g, Op::ADD, a, b), c(g, Int8, -56))
        }),
        ("fold_const_ternary", |g| {
            let (a, b, d) = (c(g, Int32, 2), c(g, Int32, 3), c(g, Int32, 4));
            let e = g.add(Node {
                op: Op::MULACC,
                dtype: Int32,
                src: vec![a, b, d],
                arg: Arg::None,
            });
            (e, c(g, Int32, 10))
        }),
        ("fold_cast_const", |g| {
            let x = c(g, Int32, 300);
            (cast_to(g, Int8, x), c(g, Int8, 44))
        }),
        ("fold_bitcast_const", |g| {
            let x = f32c(g, 1.0);
            (bitcast_to(g, Int32, x), c(g, Int32, 0x3f80_0000))
        }),
        ("add_zero", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::ADD, z, i), i)
        }),
        ("sub_zero", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::SUB, i, z), i)
        }),
        ("sub_self", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 3));
            let m = bin(g, Op::MUL, i, k);
            (bin(g, Op::SUB, m, m), c(g, Int64, 0))
        }),
        ("mul_one", |g| {
            let (i, one) = (i8v(g), c(g, Int64, 1));
            (bin(g, Op::MUL, one, i), i)
        }),
        ("mul_zero_int", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::MUL, i, z), z)
        }),
        ("neg_neg", |g| {
            let x = fx(g);
            let n = un(g, Op::NEG, x);
            (un(g, Op::NEG, n), x)
        }),
        ("div_one", |g| {
            let (i, one) = (i8v(g), c(g, Int64, 1));
            (bin(g, Op::CDIV, i, one), i)
        }),
        ("mod_one", |g| {
            let (i, one) = (i8v(g), c(g, Int64, 1));
            (bin(g, Op::FLOORMOD, i, one), c(g, Int64, 0))
        }),
        ("and_self", |g| {
            let i = i8v(g);
            (bin(g, Op::AND, i, i), i)
        }),
        ("or_self", |g| {
            let i = i8v(g);
            (bin(g, Op::OR, i, i), i)
        }),
        ("xor_self", |g| {
            let i = i8v(g);
            (bin(g, Op::XOR, i, i), c(g, Int64, 0))
        }),
        ("and_zero", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::AND, z, i), z)
        }),
        ("and_all_ones", |g| {
            let (i, m) = (i8v(g), c(g, Int64, -1));
            (bin(g, Op::AND, i, m), i)
        }),
        ("or_zero", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::OR, i, z), i)
        }),
        ("or_all_ones", |g| {
            let (i, m) = (i8v(g), c(g, Int64, -1));
            (bin(g, Op::OR, i, m), m)
        }),
        ("xor_zero", |g| {
            let (i, z) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::XOR, z, i), i)
        }),
        ("max_self", |g| {
            let x = fx(g);
            (bin(g, Op::MAX, x, x), x)
        }),
        ("add_const_chain", |g| {
            let (i, a, b) = (i8v(g), c(g, Int64, 1), c(g, Int64, 2));
            let e = bin(g, Op::ADD, a, i);
            let e = bin(g, Op::ADD, e, b);
            let three = c(g, Int64, 3);
            (e, bin(g, Op::ADD, i, three))
        }),
        ("add_const_chain", |g| {
            // Wrapping: (x + 100) + 100 in int8 is x + (-56).
            let i = i8v(g);
            let x = cast_to(g, Int8, i);
            let k = c(g, Int8, 100);
            let e = bin(g, Op::ADD, x, k);
            let e = bin(g, Op::ADD, e, k);
            let m = c(g, Int8, -56);
            (e, bin(g, Op::ADD, x, m))
        }),
        ("mul_const_chain", |g| {
            let (i, a, b) = (i8v(g), c(g, Int64, 2), c(g, Int64, 3));
            let e = bin(g, Op::MUL, i, a);
            let e = bin(g, Op::MUL, b, e);
            let six = c(g, Int64, 6);
            (e, bin(g, Op::MUL, i, six))
        }),
        ("div_of_small", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 8));
            (bin(g, Op::CDIV, i, k), c(g, Int64, 0))
        }),
        ("mod_of_small", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 8));
            (bin(g, Op::CMOD, i, k), i)
        }),
        ("div_mul_cancel", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 4));
            let m = bin(g, Op::MUL, k, i);
            (bin(g, Op::FLOORDIV, m, k), i)
        }),
        ("mod_mul_zero", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 4));
            let m = bin(g, Op::MUL, i, k);
            (bin(g, Op::CMOD, m, k), c(g, Int64, 0))
        }),
        ("div_affine", |g| {
            // (i*4 + j) // 4 → i + j//4 → i + 0 → i  (j < 4)
            let (i, j, k) = (i8v(g), j4(g), c(g, Int64, 4));
            let m = bin(g, Op::MUL, i, k);
            let s = bin(g, Op::ADD, j, m);
            (bin(g, Op::CDIV, s, k), i)
        }),
        ("div_affine", |g| {
            // Floor division allows a negative b: (i*4 + (j-2)) // 4 → i + (j-2)//4.
            let (i, j, k, two) = (i8v(g), j4(g), c(g, Int64, 4), c(g, Int64, 2));
            let b = bin(g, Op::SUB, j, two);
            let m = bin(g, Op::MUL, i, k);
            let s = bin(g, Op::ADD, m, b);
            let q = bin(g, Op::FLOORDIV, b, k);
            (bin(g, Op::FLOORDIV, s, k), bin(g, Op::ADD, i, q))
        }),
        ("mod_affine", |g| {
            let (i, j, k) = (i8v(g), j4(g), c(g, Int64, 4));
            let m = bin(g, Op::MUL, i, k);
            let s = bin(g, Op::ADD, m, j);
            (bin(g, Op::FLOORMOD, s, k), j)
        }),
        ("div_div", |g| {
            let i = var(g, 0, 64);
            let (a, b) = (c(g, Int64, 2), c(g, Int64, 3));
            let d = bin(g, Op::CDIV, i, a);
            let six = c(g, Int64, 6);
            (bin(g, Op::CDIV, d, b), bin(g, Op::CDIV, i, six))
        }),
        ("mod_mod", |g| {
            let i = var(g, 0, 64);
            let (a, b) = (c(g, Int64, 6), c(g, Int64, 3));
            let d = bin(g, Op::FLOORMOD, i, a);
            (bin(g, Op::FLOORMOD, d, b), bin(g, Op::FLOORMOD, i, b))
        }),
        ("cmplt_self", |g| {
            let x = fx(g);
            (bin(g, Op::CMPLT, x, x), c(g, Bool, 0))
        }),
        ("cmpne_self", |g| {
            let i = i8v(g);
            (bin(g, Op::CMPNE, i, i), c(g, Bool, 0))
        }),
        ("cmpeq_self", |g| {
            let i = i8v(g);
            (bin(g, Op::CMPEQ, i, i), c(g, Bool, 1))
        }),
        ("cmplt_range", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 8));
            (bin(g, Op::CMPLT, i, k), c(g, Bool, 1))
        }),
        ("cmplt_range", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 0));
            (bin(g, Op::CMPLT, i, k), c(g, Bool, 0))
        }),
        ("cmpne_range", |g| {
            let (i, k) = (i8v(g), c(g, Int64, 100));
            (bin(g, Op::CMPNE, k, i), c(g, Bool, 1))
        }),
        ("cmpeq_range", |g| {
            let (i, k) = (i8v(g), c(g, Int64, -1));
            (bin(g, Op::CMPEQ, i, k), c(g, Bool, 0))
        }),
        ("where_const_cond", |g| {
            let (i, j, t) = (i8v(g), j4(g), c(g, Bool, 1));
            (wher(g, t, i, j), i)
        }),
        ("where_const_cond", |g| {
            let (x, y, f) = (fx(g), f32c(g, 2.0), c(g, Bool, 0));
            (wher(g, f, x, y), y)
        }),
        ("where_same", |g| {
            let (i, j, x) = (i8v(g), j4(g), fx(g));
            let lt = bin(g, Op::CMPLT, i, j);
            (wher(g, lt, x, x), x)
        }),
        ("where_true_false", |g| {
            let (i, j, t, f) = (i8v(g), j4(g), c(g, Bool, 1), c(g, Bool, 0));
            let lt = bin(g, Op::CMPLT, i, j);
            (wher(g, lt, t, f), lt)
        }),
        ("max_range", |g| {
            let (i, j, k) = (i8v(g), j4(g), c(g, Int64, 10));
            let s = bin(g, Op::SUB, j, k);
            (bin(g, Op::MAX, s, i), i)
        }),
        ("cast_noop", |g| {
            let i = i8v(g);
            (cast_to(g, Int64, i), i)
        }),
        ("cast_widen_chain", |g| {
            let i = i8v(g);
            let x = cast_to(g, Int32, i);
            let w = cast_to(g, Int64, x);
            (cast_to(g, Int32, w), x)
        }),
        ("cast_widen_chain", |g| {
            // int64 → int8 → int32 → float32 is int64 → float32 when the values fit int8.
            let i = i8v(g);
            let x = cast_to(g, Int8, i);
            let w = cast_to(g, Int32, x);
            (cast_to(g, Float32, w), cast_to(g, Float32, i))
        }),
    ]
}

#[test]
fn every_rule_fires_on_its_example() {
    let cases = fire_cases();
    for (rule, build) in &cases {
        let mut g = Graph::new();
        let (e, want) = build(&mut g);
        let r = simp(&mut g, e);
        assert!(
            r.hit(rule) >= 1,
            "{rule} did not fire on {}: {:?}",
            show(&g, e),
            r.hits
        );
        assert_eq!(r.stop, StopReason::FixedPoint);
        assert_eq!(
            r.roots[0],
            want,
            "{rule}: {} became {}, expected {}",
            show(&g, e),
            show(&g, r.roots[0]),
            show(&g, want)
        );
        assert_equivalent(&g, e, r.roots[0], rule);
        // The rule alone: also exact.
        let alone = run(&mut g, e, &only(rule), Order::BottomUp);
        assert!(alone.hit(rule) >= 1, "{rule} alone");
        assert_equivalent(&g, e, alone.roots[0], rule);
    }
    let covered: BTreeSet<&str> = cases.iter().map(|(r, _)| *r).collect();
    let missing: Vec<_> = all_rules()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| !covered.contains(r))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a firing example: {missing:?}"
    );
}

// ------------------------------------------------------------------------------------------
// ... and not where it would be wrong

fn no_fire_cases() -> Vec<Case> {
    fn fx(g: &mut Graph) -> NodeId {
        let i = var(g, 0, 8);
        let i = cast_to(g, UInt32, i);
        let base = c(g, UInt32, 0x7fc0_0001); // a NaN with a payload, then others
        let k = c(g, UInt32, 0x0800_0000);
        let m = bin(g, Op::MUL, i, k);
        let s = bin(g, Op::ADD, m, base);
        bitcast_to(g, Float32, s)
    }
    fn maybe_ub(g: &mut Graph) -> NodeId {
        // 8 // j with j = 0 possible.
        let (j, k) = (var(g, 1, 5), c(g, Int64, 8));
        bin(g, Op::CDIV, k, j)
    }
    // The second element is unused (no expected result).
    vec![
        ("add_zero", |g| {
            let (x, z) = (fx(g), f32c(g, 0.0));
            (bin(g, Op::ADD, x, z), x)
        }),
        ("add_zero", |g| {
            let (x, z) = (fx(g), f32c(g, -0.0));
            (bin(g, Op::ADD, x, z), x)
        }),
        ("mul_one", |g| {
            let (x, one) = (fx(g), f32c(g, 1.0));
            (bin(g, Op::MUL, x, one), x)
        }),
        ("mul_zero_int", |g| {
            let (x, z) = (fx(g), f32c(g, 0.0));
            (bin(g, Op::MUL, x, z), x)
        }),
        ("mul_zero_int", |g| {
            let (x, z) = (maybe_ub(g), c(g, Int64, 0));
            (bin(g, Op::MUL, x, z), x)
        }),
        ("sub_self", |g| {
            let x = maybe_ub(g);
            (bin(g, Op::SUB, x, x), x)
        }),
        ("cmpne_self", |g| {
            let x = fx(g);
            (bin(g, Op::CMPNE, x, x), x)
        }),
        ("cmpeq_self", |g| {
            let x = fx(g);
            (bin(g, Op::CMPEQ, x, x), x)
        }),
        ("add_const_chain", |g| {
            let (x, a, b) = (fx(g), f32c(g, 1.0), f32c(g, 2.0));
            let e = bin(g, Op::ADD, x, a);
            (bin(g, Op::ADD, e, b), x)
        }),
        ("div_of_small", |g| {
            // floor((j-2)/8) is -1 for j < 2.
            let (j, two, k) = (var(g, 1, 5), c(g, Int64, 2), c(g, Int64, 8));
            let s = bin(g, Op::SUB, j, two);
            (bin(g, Op::FLOORDIV, s, k), s)
        }),
        ("div_of_small", |g| {
            let (x, k) = (maybe_ub(g), c(g, Int64, 100));
            (bin(g, Op::CDIV, x, k), x)
        }),
        ("mod_of_small", |g| {
            let (i, k) = (var(g, 0, 8), c(g, Int64, 5));
            (bin(g, Op::CMOD, i, k), i)
        }),
        ("div_affine", |g| {
            // Truncating division with b possibly negative: (1*4 + -2)/4 = 0, 1 + (-2/4) = 1.
            let (i, j, k, two) = (var(g, 0, 8), var(g, 1, 5), c(g, Int64, 4), c(g, Int64, 2));
            let b = bin(g, Op::SUB, j, two);
            let m = bin(g, Op::MUL, i, k);
            let s = bin(g, Op::ADD, m, b);
            (bin(g, Op::CDIV, s, k), s)
        }),
        ("div_affine", |g| {
            // int8: x*16 wraps for x >= 8.
            let (i, j) = (var(g, 0, 16), var(g, 1, 5));
            let (x, y, k) = (cast_to(g, Int8, i), cast_to(g, Int8, j), c(g, Int8, 16));
            let m = bin(g, Op::MUL, x, k);
            let s = bin(g, Op::ADD, m, y);
            (bin(g, Op::FLOORDIV, s, k), s)
        }),
        ("mod_affine", |g| {
            let (i, j, k, two) = (var(g, 0, 8), var(g, 1, 5), c(g, Int64, 4), c(g, Int64, 2));
            let b = bin(g, Op::SUB, j, two);
            let m = bin(g, Op::MUL, i, k);
            let s = bin(g, Op::ADD, m, b);
            (bin(g, Op::CMOD, s, k), s)
        }),
        ("mod_affine", |g| {
            // a may be UB: it would be dropped.
            let (x, j, k) = (maybe_ub(g), var(g, 1, 5), c(g, Int64, 4));
            let m = bin(g, Op::MUL, x, k);
            let s = bin(g, Op::ADD, m, j);
            (bin(g, Op::FLOORMOD, s, k), s)
        }),
        ("div_mul_cancel", |g| {
            // uint8: i*64 wraps.
            let i = var(g, 0, 8);
            let (x, k) = (cast_to(g, UInt8, i), c(g, UInt8, 64));
            let m = bin(g, Op::MUL, x, k);
            (bin(g, Op::CDIV, m, k), m)
        }),
        ("div_div", |g| {
            let (i, a, b) = (var(g, 0, 64), c(g, Int64, 2), c(g, Int64, 3));
            let d = bin(g, Op::CDIV, i, a);
            (bin(g, Op::FLOORDIV, d, b), d)
        }),
        ("div_div", |g| {
            // int8: 16*16 does not fit.
            let i = var(g, 0, 64);
            let (x, k) = (cast_to(g, Int8, i), c(g, Int8, 16));
            let d = bin(g, Op::FLOORDIV, x, k);
            (bin(g, Op::FLOORDIV, d, k), d)
        }),
        ("mod_mod", |g| {
            let (i, a, b) = (var(g, 0, 64), c(g, Int64, 6), c(g, Int64, 4));
            let d = bin(g, Op::CMOD, i, a);
            (bin(g, Op::CMOD, d, b), d)
        }),
        ("cmplt_range", |g| {
            let (i, k) = (var(g, 0, 8), c(g, Int64, 4));
            (bin(g, Op::CMPLT, i, k), i)
        }),
        ("cmplt_range", |g| {
            let (x, k) = (maybe_ub(g), c(g, Int64, 100));
            (bin(g, Op::CMPLT, x, k), x)
        }),
        ("where_const_cond", |g| {
            let (i, x, t) = (var(g, 0, 8), maybe_ub(g), c(g, Bool, 1));
            (wher(g, t, i, x), i)
        }),
        ("where_same", |g| {
            let (i, x, k) = (var(g, 0, 8), maybe_ub(g), c(g, Int64, 2));
            let lt = bin(g, Op::CMPLT, x, k);
            (wher(g, lt, i, i), i)
        }),
        ("max_range", |g| {
            let (i, j) = (var(g, 0, 8), var(g, 1, 5));
            (bin(g, Op::MAX, i, j), i)
        }),
        ("cast_widen_chain", |g| {
            let i = var(g, 0, 200);
            let x = cast_to(g, Int8, i);
            (cast_to(g, Int64, x), x)
        }),
        ("cast_widen_chain", |g| {
            // int16 → int8 → int16 loses values of x outside int8.
            let (i, k) = (var(g, 0, 200), c(g, Int16, 3));
            let x = cast_to(g, Int16, i);
            let x = bin(g, Op::MUL, x, k);
            let n = cast_to(g, Int8, x);
            (cast_to(g, Int16, n), x)
        }),
        ("fold_const_binary", |g| {
            let (a, z) = (c(g, Int32, 5), c(g, Int32, 0));
            (bin(g, Op::CDIV, a, z), a)
        }),
        ("fold_const_binary", |g| {
            let (a, m) = (c(g, Int8, -128), c(g, Int8, -1));
            (bin(g, Op::FLOORMOD, a, m), a)
        }),
        ("fold_const_binary", |g| {
            let (a, s) = (c(g, UInt8, 1), c(g, UInt8, 8));
            (bin(g, Op::SHL, a, s), a)
        }),
        ("fold_cast_const", |g| {
            let x = f32c(g, f32::NAN);
            (cast_to(g, Int32, x), x)
        }),
        ("fold_cast_const", |g| {
            let x = f32c(g, 3e9);
            (cast_to(g, Int32, x), x)
        }),
    ]
}

#[test]
fn rules_do_not_fire_where_they_would_be_wrong() {
    for (rule, build) in no_fire_cases() {
        let mut g = Graph::new();
        let (e, _) = build(&mut g);
        let r = simp(&mut g, e);
        assert_eq!(
            r.hit(rule),
            0,
            "{rule} fired on {} giving {}",
            show(&g, e),
            show(&g, r.roots[0])
        );
        assert_equivalent(&g, e, r.roots[0], rule);
        let alone = run(&mut g, e, &only(rule), Order::BottomUp);
        assert_eq!(alone.hit(rule), 0, "{rule} alone fired on {}", show(&g, e));
    }
}

/// Why the float identities are not rules: the oracle canonicalizes arithmetic NaNs and
/// adds signed zeros, so `x*1.0`, `x+0.0` and `x+(-0.0)` change some bits.
#[test]
fn float_identities_are_not_exact_in_the_oracle() {
    let nan_payload = 0x7fc0_0001u64;
    assert_ne!(
        alu(Op::MUL, Float32, &[nan_payload, 1f32.to_bits() as u64]),
        Ok(nan_payload)
    );
    assert_ne!(
        alu(Op::ADD, Float32, &[(-0f32).to_bits() as u64, 0]),
        Ok((-0f32).to_bits() as u64)
    );
    assert_ne!(
        alu(Op::ADD, Float32, &[nan_payload, (-0f32).to_bits() as u64]),
        Ok(nan_payload)
    );
    // The bit operations the float rules rely on are exact.
    let neg = alu(Op::NEG, Float32, &[nan_payload]).unwrap();
    assert_eq!(alu(Op::NEG, Float32, &[neg]), Ok(nan_payload));
    assert_eq!(
        alu(Op::MAX, Float32, &[nan_payload, nan_payload]),
        Ok(nan_payload)
    );
    assert_eq!(alu(Op::CMPLT, Float32, &[nan_payload, nan_payload]), Ok(0));
}

// ------------------------------------------------------------------------------------------
// Random expressions: every rule alone and the whole set are exact; ranges are sound

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const INTS: &[DType] = &[Int8, UInt8, Int16, Int32, Int64, UInt32, UInt64];
const ARITH: &[Op] = &[Op::ADD, Op::SUB, Op::MUL, Op::MAX, Op::AND, Op::OR, Op::XOR];
const DIVMOD: &[Op] = &[Op::CDIV, Op::CMOD, Op::FLOORDIV, Op::FLOORMOD];
const CMPS: &[Op] = &[Op::CMPLT, Op::CMPNE, Op::CMPEQ];

/// Random expressions over three loop variables (ends 7, 5, 3), shaped to meet the rules.
struct Gen {
    rng: Rng,
    g: Graph,
    /// Sub-expressions made so far, for reuse (x - x, x & x, …).
    pool: Vec<NodeId>,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng(seed),
            g: Graph::new(),
            pool: vec![],
        }
    }

    fn root(&mut self) -> NodeId {
        self.pool.clear();
        let dt = match self.rng.below(10) {
            0 => Bool,
            1 => Float32,
            _ => self.rng.pick(INTS),
        };
        self.expr(dt, 3)
    }

    fn special(&mut self, dt: DType) -> i128 {
        let (lo, hi) = dt.int_range().unwrap();
        match self.rng.below(12) {
            0 => 0,
            1 => 1,
            2 => -1,
            3 => lo,
            4 => hi,
            5 => lo + 1,
            6 => hi - 1,
            7 => self.rng.pick(&[2, 3, 4, 6, 8, 16, 64]),
            8 => -(self.rng.pick(&[2, 3, 4]) as i128),
            _ => (self.rng.next() % 20) as i128,
        }
    }

    fn konst(&mut self, dt: DType) -> NodeId {
        if dt.is_float() {
            let bits = match self.rng.below(8) {
                0 => 0,
                1 => 0x8000_0000,
                2 => 0x7fc0_0001,
                3 => 0xff80_0000,
                4 => 0x3f80_0000,
                5 => 0xbf80_0000,
                _ => (1.0 + (self.rng.next() % 5) as f32).to_bits() as u64,
            };
            return cbits(&mut self.g, dt, bits);
        }
        let v = self.special(dt);
        c(&mut self.g, dt, v)
    }

    fn leaf(&mut self, dt: DType) -> NodeId {
        if !self.pool.is_empty() && self.rng.chance(20) {
            let x = self.pool[self.rng.below(self.pool.len())];
            if self.g.node(x).dtype == dt {
                return x;
            }
        }
        if self.rng.chance(30) {
            return self.konst(dt);
        }
        let (axis, end) = self.rng.pick(&[(0, 7), (1, 5), (2, 3)]);
        let v = var(&mut self.g, axis, end);
        let x = match dt {
            Int64 => v,
            Float32 => {
                // Any float bits, NaN payloads and -0.0 included.
                let u = cast_to(&mut self.g, UInt32, v);
                let k = c(
                    &mut self.g,
                    UInt32,
                    self.rng.pick(&[0x3fc0_0001, 0x0800_0000, 0x8000_0000]),
                );
                let base = c(
                    &mut self.g,
                    UInt32,
                    self.rng.pick(&[0x7fc0_0001, 0x8000_0000, 0x3f00_0000, 0]),
                );
                let m = bin(&mut self.g, Op::MUL, u, k);
                let s = bin(&mut self.g, Op::ADD, m, base);
                bitcast_to(&mut self.g, Float32, s)
            }
            _ => cast_to(&mut self.g, dt, v),
        };
        // Shift and scale some variables so values reach the dtype's edges.
        if dt.is_int() && self.rng.chance(25) {
            let k = self.konst(dt);
            let op = self.rng.pick(&[Op::ADD, Op::SUB, Op::MUL]);
            return bin(&mut self.g, op, x, k);
        }
        x
    }

    fn expr(&mut self, dt: DType, depth: usize) -> NodeId {
        let e = self.expr_inner(dt, depth);
        self.pool.push(e);
        e
    }

    fn expr_inner(&mut self, dt: DType, depth: usize) -> NodeId {
        if depth == 0 || self.rng.chance(15) {
            return self.leaf(dt);
        }
        let d = depth - 1;
        if dt == Bool {
            return match self.rng.below(5) {
                0 | 1 => {
                    let odt = if self.rng.chance(20) {
                        Float32
                    } else {
                        self.rng.pick(INTS)
                    };
                    let op = self.rng.pick(CMPS);
                    let a = self.expr(odt, d);
                    let b = if self.rng.chance(20) {
                        a
                    } else if self.rng.chance(40) {
                        self.konst(odt)
                    } else {
                        self.expr(odt, d)
                    };
                    bin(&mut self.g, op, a, b)
                }
                2 => {
                    let op = self
                        .rng
                        .pick(&[Op::AND, Op::OR, Op::XOR, Op::ADD, Op::MUL, Op::MAX]);
                    let (a, b) = (self.expr(Bool, d), self.expr(Bool, d));
                    bin(&mut self.g, op, a, b)
                }
                3 => {
                    let cnd = self.expr(Bool, d);
                    let (t, f) = if self.rng.chance(50) {
                        (c(&mut self.g, Bool, 1), c(&mut self.g, Bool, 0))
                    } else {
                        (self.expr(Bool, d), self.expr(Bool, d))
                    };
                    wher(&mut self.g, cnd, t, f)
                }
                _ => {
                    let sdt = self.rng.pick(INTS);
                    let a = self.expr(sdt, d);
                    cast_to(&mut self.g, Bool, a)
                }
            };
        }
        if dt.is_float() {
            return match self.rng.below(6) {
                0 => {
                    let op = self.rng.pick(&[Op::ADD, Op::MUL, Op::MAX, Op::SUB]);
                    let a = self.expr(dt, d);
                    let b = if self.rng.chance(30) {
                        a
                    } else {
                        self.konst(dt)
                    };
                    bin(&mut self.g, op, a, b)
                }
                1 => {
                    let a = self.expr(dt, d);
                    let n = un(&mut self.g, Op::NEG, a);
                    if self.rng.chance(60) {
                        un(&mut self.g, Op::NEG, n)
                    } else {
                        n
                    }
                }
                2 => {
                    let cnd = self.expr(Bool, d);
                    let a = self.expr(dt, d);
                    let b = if self.rng.chance(30) {
                        a
                    } else {
                        self.expr(dt, d)
                    };
                    wher(&mut self.g, cnd, a, b)
                }
                3 => {
                    let sdt = self.rng.pick(INTS);
                    let a = self.expr(sdt, d);
                    let m = if self.rng.chance(50) {
                        cast_to(&mut self.g, Int32, a)
                    } else {
                        a
                    };
                    cast_to(&mut self.g, dt, m)
                }
                4 => {
                    let op = self
                        .rng
                        .pick(&[Op::SQRT, Op::NEG, Op::TRUNC, Op::RECIPROCAL]);
                    let a = self.konst(dt);
                    un(&mut self.g, op, a)
                }
                _ => self.leaf(dt),
            };
        }
        match self.rng.below(12) {
            0 => {
                let op = self.rng.pick(ARITH);
                let (a, b) = (self.expr(dt, d), self.expr(dt, d));
                bin(&mut self.g, op, a, b)
            }
            1 => {
                // An op with a special constant, in either order.
                let op = self
                    .rng
                    .pick(&[ARITH, DIVMOD, &[Op::SHL, Op::SHR]].concat());
                let a = self.expr(dt, d);
                let k = self.konst(dt);
                if self.rng.chance(30) && !DIVMOD.contains(&op) && op != Op::SHL && op != Op::SHR {
                    bin(&mut self.g, op, k, a)
                } else {
                    bin(&mut self.g, op, a, k)
                }
            }
            2 => {
                // The same operand twice.
                let op = self
                    .rng
                    .pick(&[Op::SUB, Op::AND, Op::OR, Op::XOR, Op::MAX, Op::ADD]);
                let a = self.expr(dt, d);
                bin(&mut self.g, op, a, a)
            }
            3 if self.rng.chance(30) => {
                // (x % c1) % c2 with c2 dividing c1, and (x / c1) / c2.
                let c2 = self.rng.pick(&[2, 3, 4, 2, 3, -2, -3]);
                let c1 = c2 * self.rng.pick(&[1, 2, 3, 4, -1, -2]);
                let ops = if self.rng.chance(50) {
                    [Op::CMOD, Op::FLOORMOD]
                } else {
                    [Op::CDIV, Op::FLOORDIV]
                };
                let (op1, op2) = (self.rng.pick(&ops), self.rng.pick(&ops));
                let a = self.expr(dt, d);
                let (k1, k2) = (c(&mut self.g, dt, c1), c(&mut self.g, dt, c2));
                let inner = bin(&mut self.g, op1, a, k1);
                bin(&mut self.g, op2, inner, k2)
            }
            3 => {
                // A chain of constants: (x op c1) op c2.
                let (op1, op2) = if self.rng.chance(50) {
                    let op = self.rng.pick(&[Op::ADD, Op::MUL]);
                    (op, op)
                } else {
                    (self.rng.pick(DIVMOD), self.rng.pick(DIVMOD))
                };
                let a = self.expr(dt, d);
                let (k1, k2) = (self.konst(dt), self.konst(dt));
                let inner = bin(&mut self.g, op1, a, k1);
                bin(&mut self.g, op2, inner, k2)
            }
            4 | 5 => {
                // (a*c + b) op c, and (a*c) op c.
                let op = self.rng.pick(DIVMOD);
                let a = self.expr(dt, d);
                let cv = if self.rng.chance(70) {
                    self.rng.pick(&[2, 3, 4, 8, 16])
                } else {
                    self.special(dt)
                };
                let k = c(&mut self.g, dt, cv);
                let m = if self.rng.chance(50) {
                    bin(&mut self.g, Op::MUL, a, k)
                } else {
                    bin(&mut self.g, Op::MUL, k, a)
                };
                let top = if self.rng.chance(25) {
                    m
                } else {
                    let b = self.expr(dt, d);
                    if self.rng.chance(50) {
                        bin(&mut self.g, Op::ADD, m, b)
                    } else {
                        bin(&mut self.g, Op::ADD, b, m)
                    }
                };
                bin(&mut self.g, op, top, k)
            }
            6 => {
                let cnd = self.expr(Bool, d);
                let a = self.expr(dt, d);
                let b = if self.rng.chance(25) {
                    a
                } else if self.rng.chance(30) {
                    self.konst(dt)
                } else {
                    self.expr(dt, d)
                };
                wher(&mut self.g, cnd, a, b)
            }
            7 => {
                let a = self.expr(dt, d);
                let n = un(&mut self.g, Op::NEG, a);
                if self.rng.chance(50) {
                    un(&mut self.g, Op::NEG, n)
                } else {
                    n
                }
            }
            8 => {
                // Cast chains: CAST_dt(CAST_mid(x: sdt)).
                let sdt = if self.rng.chance(15) {
                    Bool
                } else {
                    self.rng.pick(INTS)
                };
                let a = self.expr(sdt, d);
                let mid = if self.rng.chance(20) {
                    sdt
                } else {
                    self.rng.pick(INTS)
                };
                let m = cast_to(&mut self.g, mid, a);
                cast_to(&mut self.g, dt, m)
            }
            9 => {
                // Constants only: folding (UB included: x/0, INT_MIN/-1, shifts too far).
                let op = self
                    .rng
                    .pick(&[ARITH, DIVMOD, &[Op::SHL, Op::SHR]].concat());
                let (a, b) = (self.konst(dt), self.konst(dt));
                if self.rng.chance(10) && dt.bits() == 32 {
                    let f = self.konst(Float32);
                    bitcast_to(&mut self.g, dt, f)
                } else if self.rng.chance(20) {
                    un(&mut self.g, Op::NEG, a)
                } else if self.rng.chance(10) {
                    let k = self.konst(dt);
                    self.g.add(Node {
                        op: Op::MULACC,
                        dtype: dt,
                        src: vec![a, b, k],
                        arg: Arg::None,
                    })
                } else {
                    bin(&mut self.g, op, a, b)
                }
            }
            10 => {
                // Division/modulo by a random expression (may be UB).
                let op = self.rng.pick(DIVMOD);
                let (a, b) = (self.expr(dt, d), self.expr(dt, d));
                bin(&mut self.g, op, a, b)
            }
            _ => {
                let op = self.rng.pick(&[Op::MAX, Op::SHL, Op::SHR]);
                let a = self.expr(dt, d);
                let b = if op == Op::MAX {
                    self.expr(dt, d)
                } else {
                    self.konst(dt)
                };
                bin(&mut self.g, op, a, b)
            }
        }
    }
}

/// A shared corpus of random expressions (one graph each).
fn corpus(n: usize) -> Vec<(Graph, NodeId)> {
    (0..n as u64)
        .map(|k| {
            let mut gen = Gen::new(0x5eed_0000 + k);
            let root = gen.root();
            (gen.g, root)
        })
        .collect()
}

#[test]
fn each_rule_alone_is_exact_on_random_expressions() {
    let corpus = corpus(1500);
    let mut fired: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (_, rule) in all_rules() {
        let set = only(rule);
        for (k, (g, root)) in corpus.iter().enumerate() {
            let mut g = g.clone();
            let order = if k % 2 == 0 {
                Order::BottomUp
            } else {
                Order::TopDown
            };
            let r = run(&mut g, *root, &set, order);
            if r.total_hits() == 0 {
                continue;
            }
            *fired.entry(rule).or_insert(0) += 1;
            assert_eq!(r.stop, StopReason::FixedPoint, "{rule}");
            assert_equivalent(&g, *root, r.roots[0], rule);
        }
    }
    let thin: Vec<_> = all_rules()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| fired.get(r).copied().unwrap_or(0) < 3)
        .collect();
    assert!(
        thin.is_empty(),
        "rules the random corpus hardly reaches: {thin:?}\n{fired:?}"
    );
}

#[test]
fn the_whole_set_is_exact_on_random_expressions() {
    let mut hits: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (k, (mut g, root)) in corpus(1500).into_iter().enumerate() {
        let order = if k % 2 == 0 {
            Order::BottomUp
        } else {
            Order::TopDown
        };
        let r = run(&mut g, root, &symbolic(), order);
        assert_eq!(r.stop, StopReason::FixedPoint, "{}", show(&g, root));
        for (name, n) in &r.hits {
            *hits.entry(name).or_insert(0) += n;
        }
        assert_equivalent(&g, root, r.roots[0], "symbolic");
        // Idempotent: the result is a fixed point.
        let again = run(&mut g, r.roots[0], &symbolic(), order);
        assert_eq!(
            again.total_hits(),
            0,
            "{} not a fixed point: {:?}",
            show(&g, r.roots[0]),
            again.hits
        );
    }
    assert!(hits.len() >= all_rules().len() - 5, "{hits:?}");
}

#[test]
fn ranges_are_sound_on_random_expressions() {
    for (g, root) in corpus(300) {
        assert_ranges_sound(&g, root);
    }
}

#[test]
fn exhaustive_small_affine_division() {
    // (a*c + b) op c over int8 and uint8 for every c in 1..=20 and offsets that cross zero and
    // the dtype's edges: each rewrite must be exact wherever the rules fire.
    let mut fired = 0;
    for dt in [Int8, UInt8] {
        for op in DIVMOD {
            for cv in 1..=20i128 {
                for off in [-130i128, -60, -8, -3, 0, 3, 60, 100] {
                    let mut g = Graph::new();
                    let (i, j) = (var(&mut g, 0, 9), var(&mut g, 1, 7));
                    let (a, b) = (cast_to(&mut g, dt, i), cast_to(&mut g, dt, j));
                    let o = c(&mut g, dt, off);
                    let b = bin(&mut g, Op::ADD, b, o);
                    let k = c(&mut g, dt, cv);
                    let m = bin(&mut g, Op::MUL, a, k);
                    let s = bin(&mut g, Op::ADD, m, b);
                    let e = bin(&mut g, *op, s, k);
                    let r = simp(&mut g, e);
                    fired += r.hit("div_affine") + r.hit("mod_affine");
                    assert_equivalent(&g, e, r.roots[0], &format!("{dt} {op} c={cv} off={off}"));
                }
            }
        }
    }
    assert!(fired > 100, "{fired}");
}

#[test]
fn exhaustive_int8_division_chains() {
    // (x op1 c1) op2 c2 for every int8/uint8 x, every pair of division/modulo ops and small
    // constants of both signs: div_div, mod_mod and the range rules must be exact.
    let mut fired = 0;
    for dt in [Int8, UInt8] {
        for op1 in DIVMOD {
            for op2 in DIVMOD {
                for c1 in (-6i128..=6).filter(|&v| v != 0) {
                    for c2 in (-6i128..=6).filter(|&v| v != 0) {
                        let mut g = Graph::new();
                        let i = var(&mut g, 0, 256);
                        let x = cast_to(&mut g, dt, i);
                        let (k1, k2) = (c(&mut g, dt, c1), c(&mut g, dt, c2));
                        let inner = bin(&mut g, *op1, x, k1);
                        let e = bin(&mut g, *op2, inner, k2);
                        let r = simp(&mut g, e);
                        fired += r.hit("div_div") + r.hit("mod_mod");
                        let what = format!("{dt} ({op1} {c1}) {op2} {c2}");
                        assert_equivalent(&g, e, r.roots[0], &what);
                    }
                }
            }
        }
    }
    assert!(fired > 50, "{fired}");
}

#[test]
fn captures_expose_bound_nodes() {
    let mut g = Graph::new();
    let i = var(&mut g, 0, 4);
    let k = c(&mut g, Int64, 7);
    let e = bin(&mut g, Op::MUL, k, i);
    let m: Vec<Captures> = Pat::comm(Op::MUL, [Pat::var("x"), Pat::cvar("c")]).matches(&g, e);
    assert_eq!(m.len(), 1);
    assert_eq!((m[0]["x"], m[0]["c"]), (i, k));
    assert_eq!(m[0].const_bits(&g, "c"), Some(7));
    assert_eq!(m[0].iter().collect::<Vec<_>>(), vec![("x", i), ("c", k)]);
}
