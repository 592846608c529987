//! The op table (`uopkit_interp::ir::table`) walked against the compiler's consumers: every
//! ALU op has a value-range rule that `rewrite::range` implements (exact on constants, the
//! full range where the rule is opaque), UB-freedom follows the table's UB set, pattern
//! commutativity follows its flag, constant folding covers every arity, and the C renderer
//! spells the op on every dtype the op's rule allows.

use uopkit_compiler::render::render_c;
use uopkit_compiler::rewrite::pattern::is_commutative;
use uopkit_compiler::rewrite::{simplify, ub_free, vrange, VRange};
use uopkit_interp::ir::table::{self, DTypeRule, Exactness, OpInfo, RangeRule};
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::kernel::{KArg, ParamDecl, Program};
use uopkit_interp::scalar::cast::{to_i128, wrap_i128};
use uopkit_interp::scalar::{alu, Ub};

fn konst(g: &mut Graph, dt: DType, bits: u64) -> NodeId {
    g.add(Node {
        op: Op::CONST,
        dtype: dt,
        src: vec![],
        arg: Arg::Const(bits),
    })
}

/// `op` over constants: `vals` (as integers) in `dt`; WHERE's condition is bool.
fn build(e: &OpInfo, dt: DType, vals: &[i128]) -> (Graph, NodeId, Vec<u64>) {
    let mut g = Graph::new();
    let mut bits = vec![];
    let mut src = vec![];
    for (k, &v) in vals.iter().enumerate().take(e.arity as usize) {
        let sdt = if e.dtype_rule == DTypeRule::Where && k == 0 {
            DType::Bool
        } else {
            dt
        };
        let b = wrap_i128(sdt, v);
        bits.push(b);
        src.push(konst(&mut g, sdt, b));
    }
    let n = g.add(Node {
        op: e.op,
        dtype: e.result_dtype(dt),
        src,
        arg: Arg::None,
    });
    (g, n, bits)
}

const INTS: &[DType] = &[
    DType::Int8,
    DType::UInt8,
    DType::Int32,
    DType::UInt32,
    DType::Int64,
];

#[test]
fn every_int_op_has_a_sound_range_rule() {
    for e in table::TABLE {
        for &dt in INTS {
            if !e.classes.allows(dt) {
                continue;
            }
            let rdt = e.result_dtype(dt);
            let full = VRange::full(rdt);
            let mut narrowed = false;
            for vals in [
                [7i128, 3, 5],
                [-9, 2, 1],
                [1, 1, 0],
                [100, 7, -3],
                [0, 1, 1],
            ] {
                let (g, n, bits) = build(e, dt, &vals);
                let r = vrange(&g, n);
                let Some(r) = r else {
                    panic!("{} {dt}: no range", e.op)
                };
                assert!(full.is_some_and(|f| r.within(f)), "{} {dt}", e.op);
                if let Ok(v) = alu(e.op, dt, &bits) {
                    let v = to_i128(rdt, v);
                    assert!(r.contains(v), "{} {dt} {vals:?}: {v} outside {r:?}", e.op);
                }
                narrowed |= Some(r) != full;
            }
            // A rule narrows the range of constants somewhere; an opaque op keeps it full.
            assert_eq!(
                narrowed,
                e.range != RangeRule::Opaque,
                "{} {dt}: range rule {:?} not implemented by rewrite::range",
                e.op,
                e.range
            );
        }
    }
}

#[test]
fn ub_freedom_follows_the_tabled_ub() {
    for e in table::TABLE {
        for &dt in INTS {
            if !e.classes.allows(dt) {
                continue;
            }
            // Operands that no op can trap on: 5, 3, 1 (a WHERE condition of 1).
            let (g, n, _) = build(e, dt, &[5, 3, 1]);
            assert!(ub_free(&g, n), "{} {dt} on 5, 3", e.op);
            if e.can_raise(Ub::DivByZero) {
                let (g, n, _) = build(e, dt, &[5, 0, 0]);
                assert!(!ub_free(&g, n), "{} {dt} by 0", e.op);
            }
            if e.can_raise(Ub::DivOverflow) && dt.is_signed_int() {
                let min = -(1i128 << (dt.bits() - 1));
                let (g, n, _) = build(e, dt, &[min, -1, 0]);
                assert!(!ub_free(&g, n), "{} {dt} INT_MIN / -1", e.op);
            }
            if e.can_raise(Ub::ShiftOutOfRange) {
                let (g, n, _) = build(e, dt, &[1, dt.bits() as i128, 0]);
                assert!(!ub_free(&g, n), "{} {dt} count = width", e.op);
            }
        }
    }
}

#[test]
fn commutative_patterns_follow_the_flag() {
    for e in table::TABLE {
        assert_eq!(
            is_commutative(e.op),
            e.arity == 2 && e.commutative != Exactness::Never,
            "{}",
            e.op
        );
    }
    assert!(!is_commutative(Op::SUB) && !is_commutative(Op::STORE));
}

#[test]
fn constant_folding_covers_every_op() {
    for e in table::TABLE {
        for dt in DType::ALL {
            if !e.classes.allows(dt) {
                continue;
            }
            let (mut g, n, bits) = build(e, dt, &[1, 1, 1]);
            let Ok(v) = alu(e.op, dt, &bits) else {
                continue;
            };
            let r = simplify(&mut g, n);
            let node = g.node(r);
            assert_eq!(node.op, Op::CONST, "{} {dt} not folded", e.op);
            assert_eq!(node.arg, Arg::Const(v), "{} {dt}", e.op);
        }
    }
}

/// A kernel computing `op` on loaded operands of `dt` and storing the result.
fn kernel(e: &OpInfo, dt: DType) -> Program {
    let decls: Vec<ParamDecl> = (0..e.arity as usize)
        .map(|k| ParamDecl {
            dtype: if e.dtype_rule == DTypeRule::Where && k == 0 {
                DType::Bool
            } else {
                dt
            },
            size: 4,
            written: false,
        })
        .chain([ParamDecl {
            dtype: e.result_dtype(dt),
            size: 4,
            written: true,
        }])
        .collect();
    let mut p = Program::new(format!("{}_{dt}", e.op), decls.clone());
    let params: Vec<_> = decls
        .iter()
        .enumerate()
        .map(|(k, d)| p.push(Op::PARAM, d.dtype, vec![], KArg::Param(k as u32)))
        .collect();
    let n = p.push(Op::CONST, DType::Int64, vec![], KArg::Const(4));
    let r = p.push(Op::RANGE, DType::Int64, vec![n], KArg::Axis(0));
    let mut loads = vec![];
    for (k, &prm) in params.iter().enumerate().take(e.arity as usize) {
        let i = p.push(Op::INDEX, decls[k].dtype, vec![prm, r], KArg::None);
        loads.push(p.push(Op::LOAD, decls[k].dtype, vec![i], KArg::None));
    }
    let v = p.push(e.op, e.result_dtype(dt), loads, KArg::None);
    let out = params[params.len() - 1];
    let io = p.push(Op::INDEX, e.result_dtype(dt), vec![out, r], KArg::None);
    p.push(Op::STORE, DType::Void, vec![io, v], KArg::None);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

#[test]
fn the_c_renderer_spells_every_allowed_op() {
    for e in table::TABLE {
        for dt in DType::ALL {
            if !e.classes.allows(dt) {
                continue;
            }
            let p = kernel(e, dt);
            uopkit_interp::kernel::check::check(&p)
                .unwrap_or_else(|err| panic!("{} {dt}: {err}", e.op));
            let src = render_c(&[p]);
            assert!(
                !src.contains("#error"),
                "{} on {dt} has no C spelling:\n{}",
                e.op,
                src.lines()
                    .filter(|l| l.contains("#error"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}
