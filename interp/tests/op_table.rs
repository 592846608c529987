//! The op table (`ir::table`) walked against every consumer in the oracle: each ALU op has an
//! entry; the verifier and the kernel checker accept exactly the dtypes its rule allows (with
//! the same reasons); `scalar::alu` evaluates it on every allowed dtype and raises exactly the
//! UB the entry names; the algebraic flags and reduction identities hold bit-exactly on
//! witness values; and `corpus/gen/ops.jsonl` is the table's current dump.
//!
//! (The compiler's consumers are walked in `compiler/tests/op_table.rs`, the generators in
//! `conformance`'s `gen::tests::generators_produce_every_alu_op`.)

use std::path::PathBuf;

use uopkit_interp::eval::reduce_identity;
use uopkit_interp::ir::table::{self, DTypeRule, Exactness, OpInfo, ReduceIdentity};
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::kernel::{self, KArg, Program};
use uopkit_interp::scalar::cast::mask;
use uopkit_interp::scalar::round::from_f64;
use uopkit_interp::scalar::{alu, Ub};
use uopkit_interp::verify::verify;
use uopkit_interp::Error;

/// Every op that is *not* an ALU op. An op in neither this list nor the table fails
/// `every_op_is_classified`: a new ALU op must get a table entry.
const NOT_ALU: &[Op] = &[
    Op::BUFFER,
    Op::PARAM,
    Op::CONST,
    Op::COPY,
    Op::STORE,
    Op::AFTER,
    Op::CALL,
    Op::SINK,
    Op::GROUP,
    Op::CONTIGUOUS,
    Op::DETACH,
    Op::MSELECT,
    Op::MSTACK,
    Op::UNSHARD,
    Op::ALLREDUCE,
    Op::RESHAPE,
    Op::EXPAND,
    Op::PERMUTE,
    Op::PAD,
    Op::SHRINK,
    Op::FLIP,
    Op::REDUCE,
    Op::CAST,
    Op::BITCAST,
    Op::RANGE,
    Op::END,
    Op::INDEX,
    Op::LOAD,
    Op::SPECIAL,
    Op::BARRIER,
];

/// The ALU ops this test expects (an independent list: dropping a table entry fails here).
const ALU: &[&str] = &[
    "EXP2",
    "LOG2",
    "SIN",
    "SQRT",
    "RECIPROCAL",
    "NEG",
    "TRUNC",
    "ADD",
    "MUL",
    "SUB",
    "FDIV",
    "POW",
    "CDIV",
    "CMOD",
    "FLOORDIV",
    "FLOORMOD",
    "MAX",
    "SHL",
    "SHR",
    "AND",
    "OR",
    "XOR",
    "CMPLT",
    "CMPNE",
    "CMPEQ",
    "WHERE",
    "MULACC",
    #[cfg(feature = "test-op")]
    "ABSDIFF",
];

fn entries() -> impl Iterator<Item = &'static OpInfo> {
    table::TABLE.iter()
}

#[test]
fn every_op_is_classified() {
    for &op in Op::ALL {
        let in_table = op.info().is_some();
        let listed = NOT_ALU.contains(&op);
        assert!(
            in_table != listed,
            "{op}: in the op table: {in_table}, in NOT_ALU: {listed} (exactly one must hold)"
        );
        assert_eq!(op.is_alu(), in_table, "{op}");
        assert_eq!(
            in_table,
            ALU.contains(&op.name()),
            "{op}: op table and this test's ALU list disagree"
        );
    }
    for name in ALU {
        let op: Op = name.parse().expect("an op name");
        assert!(op.info().is_some(), "{op} has no op-table entry");
    }
}

#[test]
fn predicates_come_from_the_table() {
    for e in entries() {
        let op = e.op;
        assert_eq!(op.is_unary_alu(), e.arity == 1, "{op}");
        assert_eq!(op.is_binary_alu(), e.arity == 2, "{op}");
        assert_eq!(op.is_ternary_alu(), e.arity == 3, "{op}");
        assert_eq!(op.is_comparison(), e.dtype_rule == DTypeRule::Comparison);
        assert_eq!(op.is_reduce_op(), e.reduce.is_some(), "{op}");
        assert!((1..=3).contains(&e.arity), "{op}");
        if e.dtype_rule == DTypeRule::Where {
            assert_eq!(e.arity, 3, "{op}");
        }
        if e.dtype_rule == DTypeRule::Comparison {
            assert_eq!(e.arity, 2, "{op}");
        }
        if e.commutative != Exactness::Never || e.associative != Exactness::Never {
            assert_eq!(e.arity, 2, "{op}: algebraic laws are for binary ops");
        }
    }
}

/// Operand dtypes of `e` whose operands (branches) have dtype `dt`.
fn operand_dtypes(e: &OpInfo, dt: DType) -> Vec<DType> {
    (0..e.arity as usize)
        .map(|k| {
            if e.dtype_rule == DTypeRule::Where && k == 0 {
                DType::Bool
            } else {
                dt
            }
        })
        .collect()
}

fn verify_alu(op: Op, srcs: &[DType], result: DType) -> Result<(), String> {
    let mut g = Graph::new();
    let ids: Vec<NodeId> = srcs
        .iter()
        .enumerate()
        .map(|(k, &dt)| {
            g.add(Node {
                op: Op::CONST,
                dtype: dt,
                src: vec![],
                arg: Arg::Const(k as u64 & mask(dt)),
            })
        })
        .collect();
    let n = g.add(Node {
        op,
        dtype: result,
        src: ids,
        arg: Arg::None,
    });
    match verify(&g) {
        Ok(_) => Ok(()),
        Err(Error::Verify { node, reason, .. }) => {
            assert_eq!(node, n, "{op}: rejected at another node: {reason}");
            Err(reason)
        }
        Err(other) => Err(other.to_string()),
    }
}

fn check_alu(op: Op, srcs: &[DType], result: DType) -> Result<(), String> {
    let mut p = Program::new("t", vec![]);
    let ids = srcs
        .iter()
        .enumerate()
        .map(|(k, &dt)| p.push(Op::CONST, dt, vec![], KArg::Const(k as u64 & mask(dt))))
        .collect();
    p.push(op, result, ids, KArg::None);
    kernel::check::check(&p).map_err(|e| e.to_string())
}

#[test]
fn verifier_and_kernel_checker_follow_the_dtype_rule() {
    for e in entries() {
        let op = e.op;
        for dt in DType::ALL {
            let srcs = operand_dtypes(e, dt);
            let result = e.result_dtype(dt);
            let v = verify_alu(op, &srcs, result);
            let k = check_alu(op, &srcs, result);
            let allowed = e.classes.allows(dt);
            assert_eq!(v.is_ok(), allowed, "verify {op} on {dt}: {v:?}");
            assert_eq!(k.is_ok(), allowed, "kernel check {op} on {dt}: {k:?}");
            if let (Err(v), Err(k)) = (&v, &k) {
                // One rule, one reason (the verifier adds a hint for float-only ops).
                let v = v.trim_end_matches(" (CAST first)");
                assert!(k.contains(v), "{op} {dt}: verifier '{v}' vs kernel '{k}'");
            }
            if !allowed {
                continue;
            }
            // A wrong result dtype, a wrong arity and mismatched operands are rejected.
            let wrong = [DType::Int8, DType::UInt8, DType::Int16]
                .into_iter()
                .find(|w| *w != dt && *w != result)
                .unwrap_or(DType::Int16);
            assert!(
                verify_alu(op, &srcs, wrong).is_err(),
                "{op} {dt} -> {wrong}"
            );
            assert!(check_alu(op, &srcs, wrong).is_err(), "{op} {dt} -> {wrong}");
            let short = &srcs[..srcs.len() - 1];
            assert!(verify_alu(op, short, result).is_err(), "{op} arity");
            assert!(check_alu(op, short, result).is_err(), "{op} arity");
            let mut mixed = srcs.clone();
            let last = mixed.len() - 1;
            mixed[last] = wrong;
            if e.first_operand() < last || e.arity == 1 {
                assert!(verify_alu(op, &mixed, result).is_err(), "{op} {mixed:?}");
                assert!(check_alu(op, &mixed, result).is_err(), "{op} {mixed:?}");
            }
        }
        if e.dtype_rule == DTypeRule::Where {
            let srcs = [DType::Int32, DType::Int32, DType::Int32];
            assert!(verify_alu(op, &srcs, DType::Int32).is_err());
            assert!(check_alu(op, &srcs, DType::Int32).is_err());
        }
    }
}

/// Edge values of `dt` as bits: 0, 1, −1/all ones, the sign bit, the largest value, small
/// counts, and for floats ±0, ±1, ±inf, NaN, the largest finite, a subnormal.
fn witnesses(dt: DType) -> Vec<u64> {
    let m = mask(dt);
    let mut w = vec![0, 1, 2, 3, m, 7 & m];
    if dt.bits() > 1 {
        let sign = 1u64 << (dt.bits() - 1);
        w.extend([sign, sign - 1, sign | 1]);
    }
    if dt.is_float() {
        for x in [
            1.0,
            -1.0,
            -0.0,
            0.5,
            3.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ] {
            w.push(from_f64(dt, x));
        }
    }
    let mut w: Vec<u64> = w.into_iter().map(|x| x & m).collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// Every operand tuple of `e` over the witnesses of `dt` (WHERE's condition is 0 or 1).
fn tuples(e: &OpInfo, dt: DType) -> Vec<Vec<u64>> {
    let w = witnesses(dt);
    let mut out: Vec<Vec<u64>> = vec![vec![]];
    for k in 0..e.arity as usize {
        let vals: Vec<u64> = if e.dtype_rule == DTypeRule::Where && k == 0 {
            vec![0, 1]
        } else {
            w.clone()
        };
        out = out
            .into_iter()
            .flat_map(|t| {
                vals.iter().map(move |&v| {
                    let mut t = t.clone();
                    t.push(v);
                    t
                })
            })
            .collect();
    }
    out
}

#[test]
fn scalar_alu_raises_exactly_the_tabled_ub() {
    for e in entries() {
        let op = e.op;
        let mut raised: Vec<Ub> = vec![];
        for dt in DType::ALL {
            if !e.classes.allows(dt) {
                continue;
            }
            let mut ok = 0;
            for t in tuples(e, dt) {
                match alu(op, dt, &t) {
                    Ok(bits) => {
                        ok += 1;
                        let rdt = e.result_dtype(dt);
                        assert_eq!(bits & !mask(rdt), 0, "{op} {dt} {t:x?}: bits outside {rdt}");
                    }
                    Err(ub) => {
                        assert!(
                            e.can_raise(ub),
                            "{op} {dt} {t:x?}: {ub:?} is not in the table"
                        );
                        if !raised.contains(&ub) {
                            raised.push(ub);
                        }
                    }
                }
            }
            assert!(ok > 0, "{op} never evaluates on {dt}");
        }
        // Every UB kind the table names is reachable on the witnesses.
        for ub in e.ub {
            assert!(
                raised.contains(ub),
                "{op}: the table names {ub:?}, never raised"
            );
        }
    }
    // The witnesses the brief names.
    assert_eq!(alu(Op::CDIV, DType::Int32, &[5, 0]), Err(Ub::DivByZero));
    assert!(Op::CDIV.info().unwrap().can_raise(Ub::DivByZero));
    assert_eq!(
        alu(Op::CDIV, DType::Int32, &[0x8000_0000, 0xffff_ffff]),
        Err(Ub::DivOverflow)
    );
    assert_eq!(
        alu(Op::SHL, DType::Int32, &[1, 32]),
        Err(Ub::ShiftOutOfRange)
    );
}

#[test]
fn algebraic_flags_hold_bit_exactly() {
    for e in entries() {
        let op = e.op;
        for dt in DType::ALL {
            if !e.classes.allows(dt) || e.arity != 2 {
                continue;
            }
            let w = witnesses(dt);
            let f = |a: u64, b: u64| alu(op, dt, &[a, b]);
            if e.commutative.holds_for(dt) {
                for &a in &w {
                    for &b in &w {
                        assert_eq!(f(a, b), f(b, a), "{op} {dt} {a:#x} {b:#x} commutes");
                    }
                }
            }
            if e.associative.holds_for(dt) {
                for &a in &w {
                    for &b in &w {
                        for &c in &w {
                            let l = f(a, b).and_then(|ab| f(ab, c));
                            let r = f(b, c).and_then(|bc| f(a, bc));
                            assert_eq!(l, r, "{op} {dt} {a:#x} {b:#x} {c:#x} associates");
                        }
                    }
                }
            }
        }
    }
    // Float MAX returns an operand's bits: not bit-commutative (so IntOnly in the table).
    let (pz, nz) = (0u64, 0x8000_0000u64);
    assert_ne!(
        alu(Op::MAX, DType::Float32, &[pz, nz]),
        alu(Op::MAX, DType::Float32, &[nz, pz])
    );
    assert_eq!(
        Op::MAX.info().map(|i| i.commutative),
        Some(Exactness::IntOnly)
    );
}

#[test]
fn reduction_identities_are_identities() {
    for e in entries() {
        let Some(id) = e.reduce else { continue };
        for dt in DType::ALL {
            if !e.classes.allows(dt) {
                continue;
            }
            let z = reduce_identity(e.op, dt);
            for x in witnesses(dt) {
                // Float ADD: +0 + −0 is +0 (IEEE), and NaN operands give the canonical NaN.
                if dt.is_float() {
                    let v = uopkit_interp::scalar::round::to_f64(dt, x);
                    if v.is_nan() || v == 0.0 {
                        continue;
                    }
                }
                assert_eq!(alu(e.op, dt, &[z, x]), Ok(x), "{} {dt} {id:?} {x:#x}", e.op);
            }
        }
    }
    assert_eq!(reduce_identity(Op::MAX, DType::Int8), 0x80);
    assert_eq!(reduce_identity(Op::MAX, DType::Fp8E4M3), 0xfe);
    assert_eq!(
        Op::ADD.info().and_then(|i| i.reduce),
        Some(ReduceIdentity::Zero)
    );
}

fn ops_json_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus/gen/ops.jsonl")
}

/// `corpus/gen/ops.jsonl` is the table's dump; `UPDATE_EXPECT=1` rewrites it (atomically).
#[test]
fn ops_json_is_current() {
    // The feature-gated test op is not part of the checked-in table.
    if cfg!(feature = "test-op") {
        return;
    }
    let want = table::to_jsonl();
    let path = ops_json_path();
    if std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1") {
        let tmp = path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, &want).expect("write ops.jsonl.tmp");
        std::fs::rename(&tmp, &path).expect("rename ops.jsonl");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: rerun with UPDATE_EXPECT=1 (cargo test -p uopkit-interp --test op_table)",
        path.display()
    );
}

/// The recipe's test-only op: its entry, verifier rule and scalar semantics, end to end.
#[cfg(feature = "test-op")]
#[test]
fn the_test_op_follows_the_recipe() {
    let e = Op::ABSDIFF.info().expect("ABSDIFF has a table entry");
    assert_eq!((e.arity, e.commutative), (2, Exactness::Always));
    assert_eq!("ABSDIFF".parse::<Op>(), Ok(Op::ABSDIFF));
    assert_eq!(alu(Op::ABSDIFF, DType::Int8, &[0x80, 0x7f]), Ok(0xff)); // |-128 - 127| wraps
    assert_eq!(alu(Op::ABSDIFF, DType::UInt8, &[3, 250]), Ok(247));
    assert!(verify_alu(Op::ABSDIFF, &[DType::Float32; 2], DType::Float32).is_err());
    assert!(verify_alu(Op::ABSDIFF, &[DType::Int32; 2], DType::Int32).is_ok());
}
