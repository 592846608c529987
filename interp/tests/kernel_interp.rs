//! The kernel interpreter on hand-built programs: results, poison, undefined behaviour,
//! the step budget, malformed programs and GPU-style launches with barriers.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use uopkit_interp::eval::Elem;
use uopkit_interp::ir::{DType, NodeId, Op};
use uopkit_interp::kernel::check::check;
use uopkit_interp::kernel::interp::{
    run, uninit_buffers, KernelError, Mem, PoisonUse, RunOpts, RunStats, UbMode, WorkItem,
};
use uopkit_interp::kernel::{Inst, InstId, KArg, ParamDecl, Program};
use uopkit_interp::scalar::cast::wrap_i128;
use uopkit_interp::scalar::Ub;

const I32: DType = DType::Int32;
const I64: DType = DType::Int64;
const F32: DType = DType::Float32;
const BOOL: DType = DType::Bool;

fn param(dtype: DType, size: usize, written: bool) -> ParamDecl {
    ParamDecl {
        dtype,
        size,
        written,
    }
}

fn opts(seed: u64) -> RunOpts {
    budget(10_000_000, seed)
}

fn budget(step_budget: u64, seed: u64) -> RunOpts {
    RunOpts {
        step_budget,
        seed,
        ub: UbMode::Immediate,
    }
}

fn k(p: &mut Program, dt: DType, v: i64) -> InstId {
    p.push(Op::CONST, dt, vec![], KArg::Const(wrap_i128(dt, v as i128)))
}

fn kf(p: &mut Program, v: f32) -> InstId {
    p.push(Op::CONST, F32, vec![], KArg::Const(v.to_bits() as u64))
}

fn op(p: &mut Program, op: Op, dt: DType, src: &[InstId]) -> InstId {
    p.push(op, dt, src.to_vec(), KArg::None)
}

fn par(p: &mut Program, slot: u32) -> InstId {
    let dt = p.params[slot as usize].dtype;
    p.push(Op::PARAM, dt, vec![], KArg::Param(slot))
}

fn range(p: &mut Program, end: InstId, axis: u32) -> InstId {
    let dt = p.inst(end).dtype;
    p.push(Op::RANGE, dt, vec![end], KArg::Axis(axis))
}

fn end(p: &mut Program, r: InstId) -> InstId {
    p.push(Op::END, DType::Void, vec![r], KArg::None)
}

fn index(p: &mut Program, buf: InstId, idx: InstId) -> InstId {
    let dt = p.inst(buf).dtype;
    p.push(Op::INDEX, dt, vec![buf, idx], KArg::None)
}

fn load(p: &mut Program, at: InstId) -> InstId {
    let dt = p.inst(at).dtype;
    p.push(Op::LOAD, dt, vec![at], KArg::None)
}

fn store(p: &mut Program, at: InstId, v: InstId) -> InstId {
    p.push(Op::STORE, DType::Void, vec![at, v], KArg::None)
}

fn special(p: &mut Program, name: &str, extent: i64) -> InstId {
    let e = k(p, I32, extent);
    p.push(Op::SPECIAL, I32, vec![e], KArg::Special(name.into()))
}

fn ints(dt: DType, v: &[i64]) -> Vec<Elem> {
    v.iter()
        .map(|&x| Elem::Bits(wrap_i128(dt, x as i128)))
        .collect()
}

fn floats(v: &[f32]) -> Vec<Elem> {
    v.iter().map(|x| Elem::Bits(x.to_bits() as u64)).collect()
}

/// Elements as signed 32-bit ints (panics on poison).
fn as_i32(v: &[Elem]) -> Vec<i32> {
    v.iter()
        .map(|e| match e {
            Elem::Bits(b) => *b as u32 as i32,
            p => panic!("poison {p:?}"),
        })
        .collect()
}

fn malformed_at(r: Result<RunStats, KernelError>) -> (InstId, Op, String) {
    match r {
        Err(KernelError::Malformed { inst, op, reason }) => (inst, op, reason),
        other => panic!("expected a malformed-program error, got {other:?}"),
    }
}

/// out[i] = in[i] for i in 0..n.
fn copy_kernel(dt: DType, n: i64) -> Program {
    let mut p = Program::new(
        "copy",
        vec![param(dt, n as usize, true), param(dt, n as usize, false)],
    );
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let n = k(&mut p, I64, n);
    let r = range(&mut p, n, 0);
    let at = index(&mut p, i, r);
    let x = load(&mut p, at);
    let to = index(&mut p, o, r);
    store(&mut p, to, x);
    end(&mut p, r);
    p
}

#[test]
fn copy_kernel_copies_and_counts_steps() {
    let p = copy_kernel(I32, 5);
    check(&p).unwrap();
    let mut bufs = vec![ints(I32, &[0; 5]), ints(I32, &[3, -1, 4, -1, 5])];
    let stats = run(&p, &mut bufs, &opts(0)).unwrap();
    assert_eq!(as_i32(&bufs[0]), vec![3, -1, 4, -1, 5]);
    assert_eq!(
        as_i32(&bufs[1]),
        vec![3, -1, 4, -1, 5],
        "the input is untouched"
    );
    // PARAM, PARAM, CONST, RANGE once; INDEX, LOAD, INDEX, STORE, END per iteration.
    assert_eq!(
        stats,
        RunStats {
            steps: 4 + 5 * 5,
            work_items: 1,
            workgroups: 1,
            barriers: 0
        }
    );
}

#[test]
fn copy_kernel_carries_poison_from_the_input() {
    let p = copy_kernel(I32, 3);
    let mut bufs = uninit_buffers(&p);
    bufs[1][0] = Elem::Bits(9);
    run(&p, &mut bufs, &opts(0)).unwrap();
    assert_eq!(bufs[0][0], Elem::Bits(9));
    assert_eq!(
        bufs[0][2],
        Elem::Uninit {
            buffer: NodeId(1),
            index: 2
        },
        "poison is copied, not reported"
    );
}

/// out[r] = sum_c in[r*cols + c], with a register accumulator (as the lowering emits it).
fn row_sum(rows: i64, cols: i64) -> Program {
    let mut p = Program::new(
        "row_sum",
        vec![
            param(F32, rows as usize, true),
            param(F32, (rows * cols) as usize, false),
        ],
    );
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let nr = k(&mut p, I64, rows);
    let r = range(&mut p, nr, 0);
    let acc = p.push(Op::BUFFER, F32, vec![], KArg::Reg(1));
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, acc, zero);
    let z = kf(&mut p, 0.0);
    store(&mut p, at, z);
    let nc = k(&mut p, I64, cols);
    let c = range(&mut p, nc, 1);
    let base = op(&mut p, Op::MUL, I64, &[r, nc]);
    let flat = op(&mut p, Op::ADD, I64, &[base, c]);
    let src = index(&mut p, i, flat);
    let x = load(&mut p, src);
    let cur = load(&mut p, at);
    let next = op(&mut p, Op::ADD, F32, &[cur, x]);
    store(&mut p, at, next);
    end(&mut p, c);
    let total = load(&mut p, at);
    let to = index(&mut p, o, r);
    store(&mut p, to, total);
    end(&mut p, r);
    p
}

#[test]
fn register_accumulator_reduction_is_the_sequential_float32_sum() {
    let data: Vec<f32> = vec![
        16777216.0, 1.0, 1.0, 1.0, // 2^24 + 1 rounds back to 2^24 every step
        0.1, 0.2, 0.3, 0.4, //
        1e8, 1.0, -1e8, 1.0, // the first 1.0 is absorbed
    ];
    let p = row_sum(3, 4);
    check(&p).unwrap();
    let mut bufs = vec![floats(&[0.0; 3]), floats(&data)];
    run(&p, &mut bufs, &opts(0)).unwrap();
    let mut want = vec![];
    for row in data.chunks(4) {
        let mut acc = 0.0f32;
        for &x in row {
            acc += x;
        }
        want.push(acc);
    }
    // The order matters: a float64 accumulator (or another order) gives other results.
    let wide: f32 = data[..4].iter().map(|&x| x as f64).sum::<f64>() as f32;
    assert_ne!(want[0].to_bits(), wide.to_bits());
    assert_eq!(want[0], 16777216.0);
    assert_eq!(want[2], 1.0);
    assert_eq!(bufs[0], floats(&want));
}

#[test]
fn register_buffers_are_fresh_every_execution() {
    // The accumulator is re-created (poison) per row; a row with no columns reads it
    // before any write… here every row first stores the identity, so nothing leaks.
    let p = row_sum(2, 0);
    let mut bufs = vec![floats(&[5.0, 5.0]), vec![]];
    run(&p, &mut bufs, &opts(0)).unwrap();
    assert_eq!(
        bufs[0],
        floats(&[0.0, 0.0]),
        "an empty reduction gives the identity"
    );
}

/// out[i] = gate(i) ? in[i - 1] : 7 for i in 0..4, in has 3 elements.
fn shifted_load(gate_always_true: bool) -> (Program, InstId) {
    let mut p = Program::new("shift", vec![param(I32, 4, true), param(I32, 3, false)]);
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let n = k(&mut p, I64, 4);
    let r = range(&mut p, n, 0);
    let m1 = k(&mut p, I64, -1);
    let idx = op(&mut p, Op::ADD, I64, &[r, m1]);
    let at = index(&mut p, i, idx);
    let gate = if gate_always_true {
        k(&mut p, BOOL, 1)
    } else {
        let zero = k(&mut p, I64, 0);
        op(&mut p, Op::CMPLT, BOOL, &[zero, r])
    };
    let alt = k(&mut p, I32, 7);
    let x = p.push(Op::LOAD, I32, vec![at, alt, gate], KArg::None);
    let to = index(&mut p, o, r);
    store(&mut p, to, x);
    end(&mut p, r);
    (p, x)
}

#[test]
fn gated_load_out_of_range_under_a_false_gate_is_fine() {
    let (p, _) = shifted_load(false);
    let mut bufs = vec![ints(I32, &[0; 4]), ints(I32, &[10, 20, 30])];
    run(&p, &mut bufs, &opts(0)).unwrap();
    assert_eq!(as_i32(&bufs[0]), vec![7, 10, 20, 30]);
}

#[test]
fn gated_load_out_of_range_under_a_true_gate_is_out_of_bounds() {
    let (p, ld) = shifted_load(true);
    let mut bufs = vec![ints(I32, &[0; 4]), ints(I32, &[10, 20, 30])];
    let e = run(&p, &mut bufs, &opts(0)).unwrap_err();
    assert_eq!(
        e,
        KernelError::Ub {
            inst: ld,
            op: Op::LOAD,
            kind: Ub::OutOfBounds,
            mem: Some(Mem::Param(1)),
            index: Some(-1),
            poison: None,
            observed: None,
            item: WorkItem::default(),
        }
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{ld} (LOAD): undefined behaviour: out-of-bounds access (element -1 of param slot 1)"
        )
    );
}

#[test]
fn store_out_of_bounds_is_reported_after_the_earlier_stores() {
    let mut p = Program::new("oob_store", vec![param(I32, 4, true)]);
    let o = par(&mut p, 0);
    let n = k(&mut p, I64, 5);
    let r = range(&mut p, n, 0);
    let v = p.push(Op::CAST, I32, vec![r], KArg::None);
    let at = index(&mut p, o, r);
    let st = store(&mut p, at, v);
    end(&mut p, r);
    let mut bufs = vec![ints(I32, &[-1; 4])];
    let e = run(&p, &mut bufs, &opts(0)).unwrap_err();
    assert!(
        matches!(e, KernelError::Ub { inst, kind: Ub::OutOfBounds, mem: Some(Mem::Param(0)), index: Some(4), .. } if inst == st),
        "{e:?}"
    );
    assert_eq!(e.inst(), Some(st));
    assert_eq!(as_i32(&bufs[0]), vec![0, 1, 2, 3]);
}

#[test]
fn unwritten_register_is_poison_that_reaches_the_output() {
    let mut p = Program::new("poison", vec![param(I32, 4, true)]);
    let o = par(&mut p, 0);
    let reg = p.push(Op::BUFFER, I32, vec![], KArg::Reg(2));
    let (i0, i1, i2, i3) = (
        k(&mut p, I64, 0),
        k(&mut p, I64, 1),
        k(&mut p, I64, 2),
        k(&mut p, I64, 3),
    );
    let five = k(&mut p, I32, 5);
    let r0 = index(&mut p, reg, i0);
    store(&mut p, r0, five);
    let r1 = index(&mut p, reg, i1);
    let bad = load(&mut p, r1);
    let one = k(&mut p, I32, 1);
    let bad_plus = op(&mut p, Op::ADD, I32, &[bad, one]);
    let (t, f) = (k(&mut p, BOOL, 1), k(&mut p, BOOL, 0));
    let picked_bad = op(&mut p, Op::WHERE, I32, &[t, bad, one]);
    let picked_good = op(&mut p, Op::WHERE, I32, &[f, bad, one]);
    for (i, v) in [(i0, bad_plus), (i1, picked_bad), (i2, picked_good)] {
        let at = index(&mut p, o, i);
        store(&mut p, at, v);
    }
    let good = load(&mut p, r0);
    let at = index(&mut p, o, i3);
    store(&mut p, at, good);
    let mut bufs = vec![ints(I32, &[0; 4])];
    run(&p, &mut bufs, &opts(0)).unwrap();
    let origin = Elem::Uninit {
        buffer: NodeId(reg.0),
        index: 1,
    };
    assert_eq!(bufs[0], vec![origin, origin, Elem::Bits(1), Elem::Bits(5)]);
}

/// Loads reg[0] (never written) of dtype `dt` and uses it as `what`.
fn poison_use(what: PoisonUse) -> (Program, InstId, InstId) {
    let mut p = Program::new("poison_use", vec![param(I32, 2, true)]);
    let o = par(&mut p, 0);
    let dt = if what == PoisonUse::Gate { BOOL } else { I64 };
    let reg = p.push(Op::BUFFER, dt, vec![], KArg::Reg(1));
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, reg, zero);
    let x = load(&mut p, at);
    let user = match what {
        PoisonUse::Index => {
            let bad_at = index(&mut p, o, x);
            load(&mut p, bad_at)
        }
        PoisonUse::Gate => {
            let to = index(&mut p, o, zero);
            let v = k(&mut p, I32, 1);
            p.push(Op::STORE, DType::Void, vec![to, v, x], KArg::None)
        }
        PoisonUse::LoopBound => {
            let r = range(&mut p, x, 0);
            end(&mut p, r);
            r
        }
    };
    (p, reg, user)
}

#[test]
fn poison_as_index_gate_or_loop_bound_is_an_error() {
    for what in [PoisonUse::Index, PoisonUse::Gate, PoisonUse::LoopBound] {
        let (p, reg, user) = poison_use(what);
        check(&p).unwrap();
        let mut bufs = vec![ints(I32, &[0, 0])];
        let e = run(&p, &mut bufs, &opts(0)).unwrap_err();
        let origin = Elem::Uninit {
            buffer: NodeId(reg.0),
            index: 0,
        };
        match &e {
            KernelError::Ub {
                inst,
                kind: Ub::UninitializedRead,
                poison: Some((u, o)),
                ..
            } => {
                assert_eq!((*inst, *u, *o), (user, what, origin), "{e}");
            }
            other => panic!("{what:?}: expected an uninitialized read, got {other:?}"),
        }
        assert!(
            e.to_string().contains("read of uninitialized memory"),
            "{e}"
        );
        assert!(e.to_string().contains("was never written"), "{e}");
    }
}

#[test]
fn poisoned_index_under_a_false_gate_is_fine() {
    let mut p = Program::new(
        "gated_poison",
        vec![param(I32, 1, true), param(I32, 1, true)],
    );
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let reg = p.push(Op::BUFFER, I64, vec![], KArg::Reg(1));
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, reg, zero);
    let x = load(&mut p, at);
    let src = index(&mut p, i, x);
    let (alt, f) = (k(&mut p, I32, 42), k(&mut p, BOOL, 0));
    let v = p.push(Op::LOAD, I32, vec![src, alt, f], KArg::None);
    let to = index(&mut p, o, zero);
    store(&mut p, to, v);
    // A STORE through the poisoned address under a false gate is skipped too.
    p.push(Op::STORE, DType::Void, vec![src, alt, f], KArg::None);
    let mut bufs = vec![ints(I32, &[0]), ints(I32, &[1])];
    run(&p, &mut bufs, &opts(0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(as_i32(&bufs[0]), vec![42]);
}

#[test]
fn huge_loops_stop_at_the_step_budget_quickly() {
    let mut p = Program::new("huge", vec![param(I64, 1, true)]);
    let o = par(&mut p, 0);
    let big = k(&mut p, I64, 1 << 40);
    let r1 = range(&mut p, big, 0);
    let r2 = range(&mut p, big, 1);
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, o, zero);
    store(&mut p, at, r2);
    end(&mut p, r2);
    end(&mut p, r1);
    let t = Instant::now();
    let e = run(&p, &mut [ints(I64, &[0])], &budget(200_000, 0)).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10));
    match e {
        KernelError::StepBudget { steps, .. } => assert_eq!(steps, 200_000),
        other => panic!("expected the step budget, got {other:?}"),
    }
    assert!(e_text_names_inst(
        &run(&p, &mut [ints(I64, &[0])], &budget(10, 0)).unwrap_err()
    ));
    // A budget that is just enough: a loop of 3 with the copy kernel needs 4 + 3*5 steps.
    let c = copy_kernel(I32, 3);
    let mut bufs = uninit_buffers(&c);
    assert!(run(&c, &mut bufs, &budget(19, 0)).is_ok());
    assert!(matches!(
        run(&c, &mut bufs, &budget(18, 0)),
        Err(KernelError::StepBudget { steps: 18, .. })
    ));
}

fn e_text_names_inst(e: &KernelError) -> bool {
    let s = e.to_string();
    s.starts_with('v') && s.contains(" (") && s.contains("step budget")
}

#[test]
fn zero_trip_and_nested_loops() {
    // out[0] = number of (i, j) pairs with i in 0..3, j in 0..i (= 3), counted in a register.
    let mut p = Program::new("tri", vec![param(I64, 1, true)]);
    let o = par(&mut p, 0);
    let acc = p.push(Op::BUFFER, I64, vec![], KArg::Reg(1));
    let zero = k(&mut p, I64, 0);
    let one = k(&mut p, I64, 1);
    let at = index(&mut p, acc, zero);
    store(&mut p, at, zero);
    let three = k(&mut p, I64, 3);
    let i = range(&mut p, three, 0);
    let j = range(&mut p, i, 1);
    let cur = load(&mut p, at);
    let next = op(&mut p, Op::ADD, I64, &[cur, one]);
    store(&mut p, at, next);
    end(&mut p, j);
    end(&mut p, i);
    let v = load(&mut p, at);
    let to = index(&mut p, o, zero);
    store(&mut p, to, v);
    let mut bufs = vec![ints(I64, &[-1])];
    run(&p, &mut bufs, &opts(0)).unwrap();
    assert_eq!(bufs[0], ints(I64, &[3]));
}

#[test]
fn integer_division_by_zero_names_the_instruction() {
    let mut p = Program::new(
        "div",
        vec![
            param(I32, 3, true),
            param(I32, 3, false),
            param(I32, 3, false),
        ],
    );
    let (o, a, b) = (par(&mut p, 0), par(&mut p, 1), par(&mut p, 2));
    let n = k(&mut p, I64, 3);
    let r = range(&mut p, n, 0);
    let (ia, ib) = (index(&mut p, a, r), index(&mut p, b, r));
    let (x, y) = (load(&mut p, ia), load(&mut p, ib));
    let q = op(&mut p, Op::CDIV, I32, &[x, y]);
    let to = index(&mut p, o, r);
    store(&mut p, to, q);
    end(&mut p, r);
    let mut bufs = vec![
        ints(I32, &[0; 3]),
        ints(I32, &[7, -7, 1]),
        ints(I32, &[2, 2, 0]),
    ];
    let e = run(&p, &mut bufs, &opts(0)).unwrap_err();
    assert!(
        matches!(e, KernelError::Ub { inst, op: Op::CDIV, kind: Ub::DivByZero, .. } if inst == q),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("{q} (CDIV): undefined behaviour: integer division or modulo by zero")
    );
    assert_eq!(as_i32(&bufs[0]), vec![3, -3, 0], "C division truncates");
}

/// out[i] = valid(i) ? a[i-1] // b[i-1] : 0 for i in 0..4 over 2 elements, the way the
/// lowering pads: gated loads give 0 on the padding, the division runs there too (0 // 0),
/// and a WHERE discards it.
fn padded_division() -> (Program, InstId, InstId) {
    let mut p = Program::new(
        "pad_div",
        vec![
            param(I32, 4, true),
            param(I32, 2, false),
            param(I32, 2, false),
        ],
    );
    let (o, a, b) = (par(&mut p, 0), par(&mut p, 1), par(&mut p, 2));
    let n = k(&mut p, I64, 4);
    let r = range(&mut p, n, 0);
    let m1 = k(&mut p, I64, -1);
    let idx = op(&mut p, Op::ADD, I64, &[r, m1]);
    let zero = k(&mut p, I64, 0);
    let three = k(&mut p, I64, 3);
    let lo = op(&mut p, Op::CMPLT, BOOL, &[zero, r]);
    let hi = op(&mut p, Op::CMPLT, BOOL, &[r, three]);
    let valid = op(&mut p, Op::AND, BOOL, &[lo, hi]);
    let z = k(&mut p, I32, 0);
    let (ia, ib) = (index(&mut p, a, idx), index(&mut p, b, idx));
    let x = p.push(Op::LOAD, I32, vec![ia, z, valid], KArg::None);
    let y = p.push(Op::LOAD, I32, vec![ib, z, valid], KArg::None);
    let q = op(&mut p, Op::FLOORDIV, I32, &[x, y]);
    let v = op(&mut p, Op::WHERE, I32, &[valid, q, z]);
    let to = index(&mut p, o, r);
    let st = store(&mut p, to, v);
    end(&mut p, r);
    (p, q, st)
}

#[test]
fn deferred_ub_lets_a_where_discard_an_undefined_division() {
    let (p, q, _) = padded_division();
    let fresh = || vec![ints(I32, &[9; 4]), ints(I32, &[7, -7]), ints(I32, &[2, 2])];
    // Literally, 0 // 0 on the padding is undefined…
    let e = run(&p, &mut fresh(), &opts(0)).unwrap_err();
    assert!(
        matches!(e, KernelError::Ub { inst, kind: Ub::DivByZero, observed: None, .. } if inst == q),
        "{e:?}"
    );
    // …but its result is never used: under deferred UB the run is fine.
    let mut bufs = fresh();
    run(
        &p,
        &mut bufs,
        &RunOpts {
            ub: UbMode::Deferred,
            ..opts(0)
        },
    )
    .unwrap();
    assert_eq!(as_i32(&bufs[0]), vec![0, 3, -4, 0]);
}

#[test]
fn deferred_ub_is_reported_where_the_result_is_used() {
    // A zero divisor inside the valid region: the division's result is stored.
    let (p, q, st) = padded_division();
    let mut bufs = vec![ints(I32, &[9; 4]), ints(I32, &[7, -7]), ints(I32, &[2, 0])];
    let e = run(
        &p,
        &mut bufs,
        &RunOpts {
            ub: UbMode::Deferred,
            ..opts(0)
        },
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::Ub {
            inst: q,
            op: Op::FLOORDIV,
            kind: Ub::DivByZero,
            mem: None,
            index: None,
            poison: None,
            observed: Some((st, Op::STORE)),
            item: WorkItem::default(),
        }
    );
    assert!(
        e.to_string()
            .contains(&format!("its result is used by {st} (STORE)")),
        "{e}"
    );
    assert_eq!(
        as_i32(&bufs[0]),
        vec![0, 3, 9, 9],
        "the elements before it were written"
    );
    // Used as an index or through arithmetic, the trap is reported too.
    let mut p = Program::new("trap_index", vec![param(I32, 2, true)]);
    let o = par(&mut p, 0);
    let (one, zero) = (k(&mut p, I64, 1), k(&mut p, I64, 0));
    let d = op(&mut p, Op::CDIV, I64, &[one, zero]);
    let d2 = op(&mut p, Op::ADD, I64, &[d, one]);
    let at = index(&mut p, o, d2);
    let ld = load(&mut p, at);
    let e = run(
        &p,
        &mut [ints(I32, &[0, 0])],
        &RunOpts {
            ub: UbMode::Deferred,
            ..opts(0)
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, KernelError::Ub { inst, kind: Ub::DivByZero, observed: Some((o, Op::LOAD)), .. } if inst == d && o == ld),
        "{e:?}"
    );
}

#[test]
fn float_to_int_cast_out_of_range_is_ub() {
    let mut p = Program::new("cast", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let big = kf(&mut p, 3e9);
    let c = p.push(Op::CAST, I32, vec![big], KArg::None);
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, o, zero);
    store(&mut p, at, c);
    let e = run(&p, &mut [ints(I32, &[0])], &opts(0)).unwrap_err();
    assert!(
        matches!(e, KernelError::Ub { inst, kind: Ub::FloatToIntOutOfRange, .. } if inst == c),
        "{e:?}"
    );
}

#[test]
fn buffers_must_match_the_params() {
    let p = copy_kernel(I32, 2);
    assert!(matches!(
        run(&p, &mut [ints(I32, &[0, 0])], &opts(0)),
        Err(KernelError::Args(_))
    ));
    assert!(matches!(
        run(&p, &mut [ints(I32, &[0, 0]), ints(I32, &[1])], &opts(0)),
        Err(KernelError::Args(_))
    ));
}

// --- malformed programs ---------------------------------------------------------------

#[test]
fn end_without_range_is_malformed() {
    let mut p = Program::new("bad", vec![]);
    let c = k(&mut p, I64, 3);
    let e = end(&mut p, c);
    let (inst, op, reason) = malformed_at(run(&p, &mut [], &opts(0)));
    assert_eq!((inst, op), (e, Op::END), "{reason}");
    assert_eq!(check(&p).unwrap_err().inst(), Some(e));
}

#[test]
fn loop_local_value_used_after_its_end_is_malformed() {
    let mut p = Program::new("bad", vec![param(I64, 1, true)]);
    let o = par(&mut p, 0);
    let n = k(&mut p, I64, 3);
    let r = range(&mut p, n, 0);
    let twice = op(&mut p, Op::ADD, I64, &[r, r]);
    end(&mut p, r);
    let zero = k(&mut p, I64, 0);
    let at = index(&mut p, o, zero);
    let st = store(&mut p, at, twice);
    let (inst, _, reason) = malformed_at(run(&p, &mut [ints(I64, &[0])], &opts(0)));
    assert_eq!(inst, st, "{reason}");
    assert!(
        reason.contains(&twice.to_string()) && reason.contains("closed"),
        "{reason}"
    );
    // The loop variable itself is loop-local too.
    let mut q = Program::new("bad2", vec![]);
    let n = k(&mut q, I64, 3);
    let r = range(&mut q, n, 0);
    end(&mut q, r);
    let use_r = op(&mut q, Op::ADD, I64, &[r, n]);
    assert_eq!(check(&q).unwrap_err().inst(), Some(use_r));
}

#[test]
fn bad_param_slot_is_malformed() {
    let mut p = Program::new("bad", vec![param(I32, 1, true)]);
    let bad = p.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let (inst, op, reason) = malformed_at(run(&p, &mut [ints(I32, &[0])], &opts(0)));
    assert_eq!((inst, op), (bad, Op::PARAM));
    assert!(reason.contains("slot 1"), "{reason}");
    // A PARAM whose dtype is not the slot's.
    let mut q = Program::new("bad", vec![param(I32, 1, true)]);
    q.push(Op::PARAM, F32, vec![], KArg::Param(0));
    assert!(check(&q).is_err());
}

#[test]
fn other_malformed_programs_are_errors_not_panics() {
    // A source that is not earlier (built without `push`, which would debug-assert).
    let fwd = Program {
        name: "fwd".into(),
        params: vec![],
        insts: vec![
            Inst {
                op: Op::ADD,
                dtype: I64,
                src: vec![InstId(1), InstId(1)],
                arg: KArg::None,
            },
            Inst {
                op: Op::CONST,
                dtype: I64,
                src: vec![],
                arg: KArg::Const(1),
            },
        ],
    };
    assert_eq!(check(&fwd).unwrap_err().inst(), Some(InstId(0)));
    // An unclosed RANGE is reported at the RANGE.
    let mut p = Program::new("open", vec![]);
    let n = k(&mut p, I64, 2);
    let r = range(&mut p, n, 0);
    assert_eq!(check(&p).unwrap_err().inst(), Some(r));
    // END closing an outer loop while an inner one is open.
    let mut p = Program::new("cross", vec![]);
    let n = k(&mut p, I64, 2);
    let r0 = range(&mut p, n, 0);
    let _r1 = range(&mut p, n, 1);
    let e0 = end(&mut p, r0);
    assert_eq!(check(&p).unwrap_err().inst(), Some(e0));
    // Wrong arity, dtype mismatches, writes to a read-only param, over-wide constants.
    let mut p = Program::new("arity", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let z = k(&mut p, I64, 0);
    let at = index(&mut p, o, z);
    let bad = p.push(Op::LOAD, I32, vec![at, z], KArg::None);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("index_dtype", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let z = k(&mut p, I64, 0);
    let bad = p.push(Op::INDEX, F32, vec![o, z], KArg::None);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("float_index", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let z = kf(&mut p, 0.0);
    let bad = p.push(Op::INDEX, I32, vec![o, z], KArg::None);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("store_dtype", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let z = k(&mut p, I64, 0);
    let at = index(&mut p, o, z);
    let bad = store(&mut p, at, z);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("read_only", vec![param(I32, 1, false)]);
    let o = par(&mut p, 0);
    let z = k(&mut p, I64, 0);
    let v = k(&mut p, I32, 0);
    let at = index(&mut p, o, z);
    let bad = store(&mut p, at, v);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("wide_const", vec![]);
    let bad = p.push(Op::CONST, I32, vec![], KArg::Const(u64::MAX));
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("alu_dtypes", vec![]);
    let a = k(&mut p, I32, 1);
    let b = k(&mut p, I64, 1);
    let bad = op(&mut p, Op::ADD, I32, &[a, b]);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("buffer_as_value", vec![param(I32, 1, true)]);
    let o = par(&mut p, 0);
    let a = k(&mut p, I32, 1);
    let bad = op(&mut p, Op::ADD, I32, &[o, a]);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("tensor_op", vec![]);
    let bad = p.push(Op::REDUCE, I32, vec![], KArg::None);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("local_in_loop", vec![]);
    let n = k(&mut p, I64, 2);
    let r = range(&mut p, n, 0);
    let bad = p.push(Op::BUFFER, I32, vec![], KArg::Local(4));
    end(&mut p, r);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    // A negative loop bound is found at run time.
    let mut p = Program::new("negative", vec![]);
    let n = k(&mut p, I64, -1);
    let r = range(&mut p, n, 0);
    end(&mut p, r);
    check(&p).unwrap();
    let (inst, _, reason) = malformed_at(run(&p, &mut [], &opts(0)));
    assert_eq!(inst, r, "{reason}");
}

struct Rnd(u64);

impl Rnd {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.below(v.len() as u64) as usize])
    }
}

/// A random, mostly well-formed program: loops, register and local buffers, gated and
/// ungated loads and stores with arbitrary (often out-of-range) indices, ALU ops and casts
/// on whatever is in scope; sometimes one instruction is then mutated.
fn random_program(r: &mut Rnd) -> Program {
    let dts = [BOOL, I32, I64, F32];
    let mut p = Program::new(
        "random",
        vec![param(I32, 3, true), param(I64, 2, r.below(2) == 0)],
    );
    // Values in scope (id, dtype) and buffers in scope, per open loop level.
    let mut vals: Vec<Vec<(InstId, DType)>> = vec![vec![]];
    let mut bufs: Vec<Vec<InstId>> = vec![vec![par(&mut p, 0), par(&mut p, 1)]];
    let mut loops = vec![];
    if r.below(3) == 0 {
        let l = special(&mut p, "lidx0", 1 + r.below(3) as i64);
        vals[0].push((l, I32));
        let b = p.push(Op::BUFFER, I64, vec![], KArg::Local(r.below(4) as usize));
        bufs[0].push(b);
    }
    let n = 1 + r.below(30);
    for _ in 0..n {
        let all: Vec<(InstId, DType)> = vals.iter().flatten().copied().collect();
        let of =
            |dt: DType| -> Vec<InstId> { all.iter().filter(|v| v.1 == dt).map(|v| v.0).collect() };
        let ints: Vec<InstId> = all.iter().filter(|v| v.1.is_int()).map(|v| v.0).collect();
        let bools = of(BOOL);
        let scope = vals.len() - 1;
        match r.below(12) {
            0 | 1 => {
                let dt = r.pick(&dts).unwrap();
                let v = [0i64, 1, 2, -1, 3, 1 << 20][r.below(6) as usize];
                let c = if dt == F32 {
                    kf(&mut p, v as f32)
                } else {
                    k(&mut p, dt, v)
                };
                vals[scope].push((c, dt));
            }
            2 | 3 => {
                let Some(&(a, dt)) = all.get(r.below(all.len() as u64) as usize) else {
                    continue;
                };
                let same = of(dt);
                let b = r.pick(&same).unwrap();
                let o = r
                    .pick(&[
                        Op::ADD,
                        Op::SUB,
                        Op::MUL,
                        Op::MAX,
                        Op::CMPLT,
                        Op::CMPNE,
                        Op::CDIV,
                        Op::CMOD,
                        Op::SHL,
                        Op::AND,
                    ])
                    .unwrap();
                if (matches!(o, Op::CDIV | Op::CMOD | Op::SHL) && !dt.is_int())
                    || (o == Op::AND && dt.is_float())
                {
                    continue;
                }
                let res = if o.is_comparison() { BOOL } else { dt };
                let v = op(&mut p, o, res, &[a, b]);
                vals[scope].push((v, res));
            }
            4 => {
                let Some(&(a, _)) = all.get(r.below(all.len() as u64) as usize) else {
                    continue;
                };
                let Some(c) = r.pick(&bools) else { continue };
                let dt = p.inst(a).dtype;
                let b = r.pick(&of(dt)).unwrap();
                let v = op(&mut p, Op::WHERE, dt, &[c, a, b]);
                vals[scope].push((v, dt));
            }
            5 => {
                let Some(&(a, _)) = all.get(r.below(all.len() as u64) as usize) else {
                    continue;
                };
                let dt = r.pick(&dts).unwrap();
                let v = p.push(Op::CAST, dt, vec![a], KArg::None);
                vals[scope].push((v, dt));
            }
            6 => {
                let Some(e) = r.pick(&ints) else { continue };
                let rg = range(&mut p, e, loops.len() as u32);
                loops.push(rg);
                vals.push(vec![(rg, p.inst(rg).dtype)]);
                bufs.push(vec![]);
            }
            7 => {
                if let Some(rg) = loops.pop() {
                    end(&mut p, rg);
                    vals.pop();
                    bufs.pop();
                }
            }
            8..=10 => {
                let all_bufs: Vec<InstId> = bufs.iter().flatten().copied().collect();
                let (Some(b), Some(i)) = (r.pick(&all_bufs), r.pick(&ints)) else {
                    continue;
                };
                let at = index(&mut p, b, i);
                let dt = p.inst(b).dtype;
                let gate = if r.below(2) == 0 {
                    r.pick(&bools)
                } else {
                    None
                };
                let is_load = r.below(2) == 0;
                let written = p.inst(b).op != Op::PARAM || p.params[param_slot(&p, b)].written;
                if is_load || !written {
                    let v = match (gate, r.pick(&of(dt))) {
                        (Some(g), Some(alt)) => p.push(Op::LOAD, dt, vec![at, alt, g], KArg::None),
                        _ => load(&mut p, at),
                    };
                    vals[scope].push((v, dt));
                } else if let Some(v) = r.pick(&of(dt)) {
                    let mut src = vec![at, v];
                    src.extend(gate);
                    p.push(Op::STORE, DType::Void, src, KArg::None);
                }
            }
            _ => {
                if r.below(2) == 0 {
                    let b = p.push(
                        Op::BUFFER,
                        r.pick(&[I32, I64]).unwrap(),
                        vec![],
                        KArg::Reg(r.below(3) as usize),
                    );
                    bufs[scope].push(b);
                } else {
                    p.push(Op::BARRIER, DType::Void, vec![], KArg::None);
                }
            }
        }
    }
    while let Some(rg) = loops.pop() {
        end(&mut p, rg);
    }
    if r.below(4) == 0 && !p.insts.is_empty() {
        let len = p.insts.len() as u64;
        let inst = &mut p.insts[r.below(len) as usize];
        match r.below(4) {
            0 => {
                inst.dtype = r
                    .pick(&[DType::Void, BOOL, I32, I64, F32, DType::UInt8])
                    .unwrap()
            }
            1 => inst.src.push(InstId(r.below(len) as u32)),
            2 => {
                inst.src.pop();
            }
            _ => {
                inst.op = r
                    .pick(&[
                        Op::END,
                        Op::INDEX,
                        Op::LOAD,
                        Op::STORE,
                        Op::RANGE,
                        Op::SPECIAL,
                        Op::NEG,
                        Op::COPY,
                    ])
                    .unwrap()
            }
        }
    }
    p
}

fn param_slot(p: &Program, b: InstId) -> usize {
    match p.inst(b).arg {
        KArg::Param(s) => s as usize,
        _ => usize::MAX,
    }
}

/// Random programs: `check` and `run` may say anything, but never panic, and a run is
/// deterministic for a given seed.
#[test]
fn random_programs_never_panic() {
    let mut r = Rnd(0x5eed);
    let (mut checked, mut finished) = (0, 0);
    for _ in 0..3000 {
        let p = random_program(&mut r);
        if check(&p).is_err() {
            continue;
        }
        checked += 1;
        let seed = r.below(1000);
        let ub = if r.below(2) == 0 {
            UbMode::Immediate
        } else {
            UbMode::Deferred
        };
        let o = RunOpts {
            step_budget: 20_000,
            seed,
            ub,
        };
        let mut a = uninit_buffers(&p);
        let ra = run(&p, &mut a, &o);
        let mut b = uninit_buffers(&p);
        let rb = run(&p, &mut b, &o);
        assert_eq!((&ra, &a), (&rb, &b), "not deterministic:\n{p}");
        finished += ra.is_ok() as u32;
    }
    eprintln!("{checked} random programs passed the checks, {finished} ran to the end");
    assert!(
        checked > 1000 && finished > 300,
        "{checked} checked, {finished} finished"
    );
}

// ---- raw instruction soup: nothing in it needs to make sense.
#[test]
fn instruction_soup_never_panics() {
    let mut r = Rnd(0x1234_5678);
    let ops = [
        Op::PARAM,
        Op::BUFFER,
        Op::CONST,
        Op::RANGE,
        Op::END,
        Op::INDEX,
        Op::LOAD,
        Op::STORE,
        Op::ADD,
        Op::CDIV,
        Op::WHERE,
        Op::CMPLT,
        Op::CAST,
        Op::BITCAST,
        Op::SPECIAL,
        Op::BARRIER,
        Op::SHL,
    ];
    let dts = [DType::Void, BOOL, I32, I64, F32, DType::UInt8];
    for _ in 0..3000 {
        let params = vec![param(I32, 3, true), param(I64, 2, r.below(2) == 0)];
        let n = 1 + r.below(14) as usize;
        let mut insts = vec![];
        for i in 0..n {
            let op = r.pick(&ops).unwrap();
            let nsrc = r.below(4) as usize;
            let src = (0..nsrc)
                .map(|_| InstId(r.below(i as u64 + 1) as u32))
                .collect();
            let arg = match r.below(8) {
                0 => KArg::Param(r.below(3) as u32),
                1 => KArg::Reg(r.below(4) as usize),
                2 => KArg::Local(r.below(4) as usize),
                3 => KArg::Const(r.below(6)),
                4 => KArg::Axis(0),
                5 => KArg::Special(["lidx0", "gidx0", "idx1", "x"][r.below(4) as usize].into()),
                _ => KArg::None,
            };
            insts.push(Inst {
                op,
                dtype: r.pick(&dts).unwrap(),
                src,
                arg,
            });
        }
        let p = Program {
            name: "soup".into(),
            params,
            insts,
        };
        if check(&p).is_ok() {
            let mut bufs = uninit_buffers(&p);
            let _ = run(&p, &mut bufs, &budget(10_000, r.below(100)));
        }
    }
}

// --- launches, local memory and barriers ----------------------------------------------

/// Work item l of each workgroup g writes local[l] = in[g*2+l], then (after a barrier when
/// `barrier`) reads local[1-l] into out[g*2+l].
fn swap_pairs(groups: i64, barrier: bool) -> Program {
    let n = (groups * 2) as usize;
    let mut p = Program::new("swap", vec![param(I32, n, true), param(I32, n, false)]);
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let lidx = special(&mut p, "lidx0", 2);
    let g = if groups > 1 {
        Some(special(&mut p, "gidx0", groups))
    } else {
        None
    };
    let local = p.push(Op::BUFFER, I32, vec![], KArg::Local(2));
    let flat = match g {
        Some(g) => {
            let two = k(&mut p, I32, 2);
            let base = op(&mut p, Op::MUL, I32, &[g, two]);
            op(&mut p, Op::ADD, I32, &[base, lidx])
        }
        None => lidx,
    };
    let src = index(&mut p, i, flat);
    let x = load(&mut p, src);
    let mine = index(&mut p, local, lidx);
    let st = store(&mut p, mine, x);
    if barrier {
        p.push(Op::BARRIER, DType::Void, vec![st], KArg::None);
    }
    let one = k(&mut p, I32, 1);
    let other = op(&mut p, Op::SUB, I32, &[one, lidx]);
    let theirs = index(&mut p, local, other);
    let y = load(&mut p, theirs);
    let to = index(&mut p, o, flat);
    store(&mut p, to, y);
    p
}

#[test]
fn barrier_makes_local_memory_exchange_deterministic() {
    let p = swap_pairs(1, true);
    check(&p).unwrap();
    for seed in 0..16 {
        let mut bufs = vec![ints(I32, &[0, 0]), ints(I32, &[10, 20])];
        let stats = run(&p, &mut bufs, &opts(seed)).unwrap();
        assert_eq!(as_i32(&bufs[0]), vec![20, 10], "seed {seed}");
        assert_eq!(
            (stats.work_items, stats.workgroups, stats.barriers),
            (2, 1, 1)
        );
    }
}

#[test]
fn missing_barrier_shows_as_a_difference_between_seeds() {
    let p = swap_pairs(1, false);
    check(&p).unwrap();
    let mut results = BTreeSet::new();
    for seed in 0..16 {
        let mut bufs = vec![ints(I32, &[0, 0]), ints(I32, &[10, 20])];
        run(&p, &mut bufs, &opts(seed)).unwrap();
        // The item that runs first reads the other's slot before it is written: poison.
        let poisoned = bufs[0]
            .iter()
            .filter(|e| matches!(e, Elem::Uninit { .. }))
            .count();
        assert_eq!(poisoned, 1, "seed {seed}: {:?}", bufs[0]);
        results.insert(format!("{:?}", bufs[0]));
    }
    assert!(
        results.len() >= 2,
        "every seed gave the same result: {results:?}"
    );
}

#[test]
fn every_workgroup_has_its_own_local_memory() {
    let p = swap_pairs(3, true);
    for seed in 0..8 {
        let mut bufs = vec![ints(I32, &[0; 6]), ints(I32, &[1, 2, 3, 4, 5, 6])];
        let stats = run(&p, &mut bufs, &opts(seed)).unwrap();
        assert_eq!(as_i32(&bufs[0]), vec![2, 1, 4, 3, 6, 5], "seed {seed}");
        assert_eq!(
            (stats.work_items, stats.workgroups, stats.barriers),
            (6, 3, 3)
        );
    }
}

#[test]
fn global_launch_index_runs_every_item() {
    // out[idx0] = 2 * in[idx0], one work item per workgroup.
    let mut p = Program::new("double", vec![param(I32, 5, true), param(I32, 5, false)]);
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let g = special(&mut p, "idx0", 5);
    let at = index(&mut p, i, g);
    let x = load(&mut p, at);
    let y = op(&mut p, Op::ADD, I32, &[x, x]);
    let to = index(&mut p, o, g);
    store(&mut p, to, y);
    for seed in [0, 1, 99] {
        let mut bufs = vec![ints(I32, &[0; 5]), ints(I32, &[1, 2, 3, 4, -5])];
        let stats = run(&p, &mut bufs, &opts(seed)).unwrap();
        assert_eq!(as_i32(&bufs[0]), vec![2, 4, 6, 8, -10]);
        assert_eq!((stats.work_items, stats.workgroups), (5, 5));
    }
}

#[test]
fn ub_in_a_work_item_names_it() {
    // in[lidx0 * 2]: item 2 reads element 4 of 4.
    let mut p = Program::new("oob_item", vec![param(I32, 4, true), param(I32, 4, false)]);
    let (o, i) = (par(&mut p, 0), par(&mut p, 1));
    let l = special(&mut p, "lidx0", 3);
    let two = k(&mut p, I32, 2);
    let idx = op(&mut p, Op::MUL, I32, &[l, two]);
    let at = index(&mut p, i, idx);
    let x = load(&mut p, at);
    let to = index(&mut p, o, l);
    store(&mut p, to, x);
    let e = run(&p, &mut [ints(I32, &[0; 4]), ints(I32, &[0; 4])], &opts(3)).unwrap_err();
    match &e {
        KernelError::Ub {
            inst,
            kind: Ub::OutOfBounds,
            index: Some(4),
            item,
            ..
        } => {
            assert_eq!(*inst, x);
            assert_eq!(item, &WorkItem(vec![("lidx0".into(), 2)]));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string().starts_with(&format!(
            "{x} (LOAD) in work item lidx0=2: undefined behaviour"
        )),
        "{e}"
    );
}

#[test]
fn barrier_in_divergent_loop_is_an_error() {
    // for j in 0..lidx0+1 { BARRIER }: item 0 leaves the loop while item 1 waits again.
    let mut p = Program::new("diverge", vec![]);
    let l = special(&mut p, "lidx0", 2);
    let one = k(&mut p, I32, 1);
    let n = op(&mut p, Op::ADD, I32, &[l, one]);
    let r = range(&mut p, n, 0);
    let b = p.push(Op::BARRIER, DType::Void, vec![], KArg::None);
    end(&mut p, r);
    check(&p).unwrap();
    for seed in 0..4 {
        match run(&p, &mut [], &opts(seed)) {
            Err(KernelError::Barrier { inst, item, .. }) => {
                assert_eq!(inst, b);
                assert_eq!(item, WorkItem(vec![("lidx0".into(), 1)]));
            }
            other => panic!("seed {seed}: expected barrier divergence, got {other:?}"),
        }
    }
    // Items that meet the barrier in the same iteration are fine.
    let mut p = Program::new("uniform", vec![]);
    let _l = special(&mut p, "lidx0", 4);
    let n = k(&mut p, I32, 3);
    let r = range(&mut p, n, 0);
    p.push(Op::BARRIER, DType::Void, vec![], KArg::None);
    end(&mut p, r);
    let stats = run(&p, &mut [], &opts(7)).unwrap();
    assert_eq!(stats.barriers, 3);
}

#[test]
fn special_rules() {
    // A SPECIAL inside a loop, a non-CONST extent, an unknown name, disagreeing extents.
    let mut p = Program::new("s1", vec![]);
    let n = k(&mut p, I32, 2);
    let r = range(&mut p, n, 0);
    let bad = p.push(Op::SPECIAL, I32, vec![n], KArg::Special("lidx0".into()));
    end(&mut p, r);
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("s2", vec![]);
    let n = k(&mut p, I32, 2);
    let m = op(&mut p, Op::ADD, I32, &[n, n]);
    let bad = p.push(Op::SPECIAL, I32, vec![m], KArg::Special("lidx0".into()));
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("s3", vec![]);
    let n = k(&mut p, I32, 2);
    let bad = p.push(Op::SPECIAL, I32, vec![n], KArg::Special("blockIdx".into()));
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    let mut p = Program::new("s4", vec![]);
    special(&mut p, "gidx0", 2);
    let n = k(&mut p, I32, 3);
    let bad = p.push(Op::SPECIAL, I32, vec![n], KArg::Special("gidx0".into()));
    assert_eq!(check(&p).unwrap_err().inst(), Some(bad));
    // Zero work items: nothing runs (the OOB store would be UB otherwise).
    let mut q = Program::new("empty", vec![param(I32, 1, true)]);
    let o = par(&mut q, 0);
    let _ = special(&mut q, "gidx0", 0);
    let z = k(&mut q, I64, 5);
    let v = k(&mut q, I32, 5);
    let at = index(&mut q, o, z);
    store(&mut q, at, v);
    let stats = run(&q, &mut [ints(I32, &[0])], &opts(0)).unwrap();
    assert_eq!(stats.work_items, 0);
}
