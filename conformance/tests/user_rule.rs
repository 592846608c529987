//! The example of docs/rule-fuzzing.md (the text between the markers is quoted there, and
//! `the_docs_quote_this_example` keeps the two the same): a user's own rewrite rules, written
//! with the engine's public API, checked from the user's own `cargo test`.

// example: begin
use uopkit_compiler::rewrite::{Captures, Pat, Rule, RuleSet};
use uopkit_conformance::gen::expr::{ExprBuilder, ExprConfig};
use uopkit_conformance::gen::rulecheck::{
    check_rules, CheckConfig, CheckError, Generator, RuleUnderTest,
};
use uopkit_interp::ir::{Arg, Graph, Node, NodeId, Op};

/// `x * 2 → x + x` on ints (both wrap the same way): exact.
fn double_as_add(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    let x = c["x"];
    let dtype = g.node(x).dtype;
    (dtype.is_int() && c.const_bits(g, "c")? == 2).then(|| {
        g.add(Node {
            op: Op::ADD,
            dtype,
            src: vec![x, x],
            arg: Arg::None,
        })
    })
}

/// `x / 2 → x >> 1` (C division): WRONG for negative odd x (-3 / 2 = -1, -3 >> 1 = -2).
fn halve_as_shift(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
    let x = c["x"];
    let dtype = g.node(x).dtype;
    if !dtype.is_int() || c.const_bits(g, "c")? != 2 {
        return None;
    }
    let one = g.add(Node {
        op: Op::CONST,
        dtype,
        src: vec![],
        arg: Arg::Const(1),
    });
    Some(g.add(Node {
        op: Op::SHR,
        dtype,
        src: vec![x, one],
        arg: Arg::None,
    }))
}

/// Expressions the rules meet: `e * 2` and `e / 2` for a random int expression `e`.
fn times_or_over_two(b: &mut ExprBuilder) -> NodeId {
    let dt = b.int_dtype();
    let e = b.expr(dt, 2);
    let two = b.int(dt, 2);
    let op = b.c.pick(&[Op::MUL, Op::CDIV]);
    b.bin(op, e, two)
}

fn config() -> CheckConfig {
    CheckConfig {
        cases: 2000,
        generator: Generator::built(ExprConfig::default(), times_or_over_two),
        ..CheckConfig::default()
    }
}

#[test]
fn my_exact_rule_passes() {
    let rule = Rule::new(
        "double_as_add",
        Pat::comm(Op::MUL, [Pat::var("x"), Pat::cvar("c")]),
        double_as_add,
    );
    let rules = RuleUnderTest::rules(RuleSet::new("mine", vec![rule]));
    let report = check_rules(&rules, &config()).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.hit("double_as_add") > 100, "{report}");
}

#[test]
fn my_wrong_rule_is_caught() {
    let rule = Rule::new(
        "halve_as_shift",
        Pat::op(Op::CDIV, [Pat::var("x"), Pat::cvar("c")]),
        halve_as_shift,
    );
    let rules = RuleUnderTest::rules(RuleSet::new("mine", vec![rule]));
    match check_rules(&rules, &config()) {
        Err(CheckError::Counterexample(c)) => {
            println!("{c}"); // input, rewritten, the inputs, both results' bits, UB
            assert!(c.size() <= 8, "shrunk to a few nodes: {c}");
        }
        other => panic!("the wrong rule was not caught: {other:?}"),
    }
}
// example: end

#[test]
fn the_docs_quote_this_example() {
    let me = include_str!("user_rule.rs");
    let start = me.find("// example: begin\n").unwrap() + "// example: begin\n".len();
    let end = me.find("// example: end").unwrap();
    let docs = include_str!("../../docs/rule-fuzzing.md");
    assert!(
        docs.contains(&me[start..end]),
        "docs/rule-fuzzing.md must quote conformance/tests/user_rule.rs between the markers verbatim"
    );
}
