//! Kernels as graphs: building, lifting, the passes and the linearizer.
//!
//! Every test runs the linear programs in the exact kernel interpreter and compares values
//! derived by hand (sums of small integer sequences), so a linearizer that misplaces a node
//! (an accumulator reset hoisted out of its loop, a read moved before its write) fails.

use std::collections::BTreeMap;

use uopkit_compiler::kgraph::{self, lift, KernelGraph, KernelGraphError};
use uopkit_compiler::linearize::linearize;
use uopkit_compiler::optimize::{self, Target};
use uopkit_interp::eval::Elem;
use uopkit_interp::ir::{DType, Op, ReduceOrder};
use uopkit_interp::kernel::interp::{run, RunOpts};
use uopkit_interp::kernel::{InstId, KArg, ParamDecl, Program};

const I32: DType = DType::Int32;
const I64: DType = DType::Int64;

fn c64(p: &mut Program, v: i64) -> InstId {
    p.push(Op::CONST, I64, vec![], KArg::Const(v as u64))
}

/// out: int32[rows] (written), in: int32[rows·cols].
fn matrix_params(rows: i64, cols: i64) -> Vec<ParamDecl> {
    matrix_params_of(I32, rows, cols)
}

fn matrix_params_of(dtype: DType, rows: i64, cols: i64) -> Vec<ParamDecl> {
    vec![
        ParamDecl {
            dtype,
            size: rows as usize,
            written: true,
        },
        ParamDecl {
            dtype,
            size: (rows * cols) as usize,
            written: false,
        },
    ]
}

/// out[i] = Σ_j in[i·cols + j] for a rows × cols int32 matrix, written the way the old
/// lowering wrote it: the accumulator's reset inside the outer loop, before the inner one.
fn row_sums(rows: i64, cols: i64) -> Program {
    let mut p = Program::new("row_sums", matrix_params(rows, cols));
    let out = p.push(Op::PARAM, I32, vec![], KArg::Param(0));
    let inp = p.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let nr = c64(&mut p, rows);
    let i = p.push(Op::RANGE, I64, vec![nr], KArg::Axis(0));
    let acc = p.push(Op::BUFFER, I32, vec![], KArg::Reg(1));
    let zero = c64(&mut p, 0);
    let z32 = p.push(Op::CONST, I32, vec![], KArg::Const(0));
    let a0 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    p.push(Op::STORE, DType::Void, vec![a0, z32], KArg::None);
    let nc = c64(&mut p, cols);
    let j = p.push(Op::RANGE, I64, vec![nc], KArg::Axis(1));
    let row = p.push(Op::MUL, I64, vec![i, nc], KArg::None);
    let flat = p.push(Op::ADD, I64, vec![row, j], KArg::None);
    let at = p.push(Op::INDEX, I32, vec![inp, flat], KArg::None);
    let x = p.push(Op::LOAD, I32, vec![at], KArg::None);
    let a1 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    let cur = p.push(Op::LOAD, I32, vec![a1], KArg::None);
    let next = p.push(Op::ADD, I32, vec![cur, x], KArg::None);
    p.push(Op::STORE, DType::Void, vec![a1, next], KArg::None);
    p.push(Op::END, DType::Void, vec![j], KArg::None);
    let a2 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    let total = p.push(Op::LOAD, I32, vec![a2], KArg::None);
    let o = p.push(Op::INDEX, I32, vec![out, i], KArg::None);
    p.push(Op::STORE, DType::Void, vec![o, total], KArg::None);
    p.push(Op::END, DType::Void, vec![i], KArg::None);
    p
}

/// Runs `p` on in = 0, 1, 2, … and returns out as integers.
fn run_on_iota(p: &Program, seed: u64) -> Result<Vec<i64>, String> {
    let mut bufs: Vec<Vec<Elem>> = p
        .params
        .iter()
        .enumerate()
        .map(|(k, d)| {
            (0..d.size)
                .map(|i| {
                    if k == 0 {
                        Elem::Uninit {
                            buffer: uopkit_interp::ir::NodeId(0),
                            index: i,
                        }
                    } else {
                        Elem::Bits(i as u64)
                    }
                })
                .collect()
        })
        .collect();
    let opts = RunOpts {
        seed,
        ..RunOpts::default()
    };
    run(p, &mut bufs, &opts).map_err(|e| e.to_string())?;
    bufs[0]
        .iter()
        .map(|e| match e {
            Elem::Bits(b) => Ok(*b as u32 as i32 as i64),
            Elem::Uninit { .. } => Err("an output element was not written".to_string()),
        })
        .collect()
}

/// Σ_j (i·cols + j) for each row, by hand: cols·i·cols + cols(cols−1)/2.
fn expected_row_sums(rows: i64, cols: i64) -> Vec<i64> {
    (0..rows)
        .map(|i| cols * i * cols + cols * (cols - 1) / 2)
        .collect()
}

#[test]
fn lifting_and_linearizing_keeps_the_values() {
    let p = row_sums(3, 5);
    assert_eq!(run_on_iota(&p, 0).unwrap(), expected_row_sums(3, 5));
    let k = lift(&p).unwrap();
    let q = linearize(&k).unwrap();
    assert_eq!(run_on_iota(&q, 0).unwrap(), vec![10, 35, 60]);
    // The reset is still inside the row loop and before the column loop: the program has
    // two RANGEs, and the STORE of the identity lies between them.
    let ranges: Vec<usize> = q
        .insts
        .iter()
        .enumerate()
        .filter(|(_, i)| i.op == Op::RANGE)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(ranges.len(), 2);
    let reset = q
        .insts
        .iter()
        .position(|i| i.op == Op::STORE)
        .expect("a store");
    assert!(ranges[0] < reset && reset < ranges[1], "{q}");
}

#[test]
fn loop_invariant_values_are_hoisted() {
    let p = row_sums(2, 4);
    let q = linearize(&lift(&p).unwrap()).unwrap();
    let first_range = q.insts.iter().position(|i| i.op == Op::RANGE).unwrap();
    // Every CONST comes before the first loop.
    for (n, i) in q.insts.iter().enumerate() {
        if i.op == Op::CONST {
            assert!(n < first_range, "CONST v{n} inside a loop:\n{q}");
        }
    }
}

/// A kernel graph "bad" of one written int64 param: `value` builds the value stored into
/// out[0], and `effect(g, store)` the effect the SINK takes (the STORE itself, or one around it).
fn one_store_kernel(
    value: impl FnOnce(&mut uopkit_interp::ir::Graph) -> uopkit_interp::ir::NodeId,
    effect: impl FnOnce(
        &mut uopkit_interp::ir::Graph,
        uopkit_interp::ir::NodeId,
    ) -> uopkit_interp::ir::NodeId,
) -> KernelGraph {
    let params = vec![ParamDecl {
        dtype: I64,
        size: 1,
        written: true,
    }];
    let mut g = uopkit_interp::ir::Graph::new();
    let out = kgraph::add(&mut g, Op::PARAM, I64, vec![], KArg::Param(0), 0);
    let v = value(&mut g);
    let zero = kgraph::konst(&mut g, I64, 0);
    let at = kgraph::add(&mut g, Op::INDEX, I64, vec![out, zero], KArg::None, 0);
    let st = kgraph::add(&mut g, Op::STORE, DType::Void, vec![at, v], KArg::None, 0);
    let e = effect(&mut g, st);
    let sink = kgraph::add(&mut g, Op::SINK, DType::Void, vec![e], KArg::None, 0);
    KernelGraph {
        name: "bad".into(),
        params,
        graph: g,
        sink,
    }
}

#[test]
fn a_value_outside_its_loop_is_an_error() {
    // STORE(out[0], r + 1) at the top level while r is a loop variable that no END closes.
    let mut r = None;
    let k = one_store_kernel(
        |g| {
            let four = kgraph::konst(g, I64, 4);
            let range = kgraph::add(g, Op::RANGE, I64, vec![four], KArg::Axis(0), 0);
            r = Some(range);
            let one = kgraph::konst(g, I64, 1);
            kgraph::add(g, Op::ADD, I64, vec![range, one], KArg::None, 0)
        },
        |_, st| st,
    );
    match linearize(&k) {
        Err(KernelGraphError::OutOfScope { range, .. }) => assert_eq!(Some(range), r),
        other => panic!("expected OutOfScope, got {other:?}"),
    }
}

#[test]
fn an_end_must_close_a_range_of_one_extent() {
    // STORE(out[0], 7) inside END(…, X) for an X that is not a RANGE of one source: a CAST of
    // the extent (one source, not a RANGE) and a RANGE of two sources. Neither is a loop.
    for bad_range in [0, 1] {
        let mut end = None;
        let k = one_store_kernel(
            |g| kgraph::konst(g, I64, 7),
            |g, st| {
                let four = kgraph::konst(g, I64, 4);
                let not_a_loop = if bad_range == 0 {
                    kgraph::add(g, Op::CAST, I64, vec![four], KArg::None, 0)
                } else {
                    kgraph::add(g, Op::RANGE, I64, vec![four, four], KArg::Axis(0), 0)
                };
                let e = kgraph::add(g, Op::END, DType::Void, vec![st, not_a_loop], KArg::None, 0);
                end = Some(e);
                e
            },
        );
        match linearize(&k) {
            Err(KernelGraphError::Malformed { node, reason, .. }) => {
                assert_eq!(Some(node), end);
                assert!(reason.contains("must be a RANGE"), "{reason}");
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
    }
}

/// The same row sums as a kernel graph with a REDUCE node, as the lowering builds it.
fn reduce_graph(rows: i64, cols: i64) -> KernelGraph {
    reduce_graph_of(I32, rows, cols, ReduceOrder::Sequential)
}

/// [`reduce_graph`] of `dt` elements, folded in `order`.
fn reduce_graph_of(dt: DType, rows: i64, cols: i64, order: ReduceOrder) -> KernelGraph {
    let mut b = kgraph::Builder::new("reduce", matrix_params_of(dt, rows, cols));
    let out = b.push(Op::PARAM, dt, vec![], KArg::Param(0));
    let inp = b.push(Op::PARAM, dt, vec![], KArg::Param(1));
    let nr = b.push(Op::CONST, I64, vec![], KArg::Const(rows as u64));
    let i = b.push(Op::RANGE, I64, vec![nr], KArg::Axis(0));
    let nc = b.push(Op::CONST, I64, vec![], KArg::Const(cols as u64));
    let j = b.push(Op::RANGE, I64, vec![nc], KArg::Axis(1));
    let row = b.push(Op::MUL, I64, vec![i, nc], KArg::None);
    let flat = b.push(Op::ADD, I64, vec![row, j], KArg::None);
    let at = b.push(Op::INDEX, dt, vec![inp, flat], KArg::None);
    let x = b.push(Op::LOAD, dt, vec![at], KArg::None);
    b.push(Op::END, DType::Void, vec![j], KArg::None);
    let sum = b.reduce(Op::ADD, dt, x, &[j], order);
    let o = b.push(Op::INDEX, dt, vec![out, i], KArg::None);
    b.push(Op::STORE, DType::Void, vec![o, sum], KArg::None);
    b.push(Op::END, DType::Void, vec![i], KArg::None);
    b.finish().unwrap()
}

#[test]
fn a_kernel_graph_lists_its_nodes_in_topological_order_one_line_each() {
    let k = reduce_graph(2, 3);
    let nodes = k.nodes();
    assert_eq!(nodes.last(), Some(&k.sink));
    for (i, &n) in nodes.iter().enumerate() {
        for s in &k.node(n).src {
            let at = nodes.iter().position(|m| m == s);
            assert!(at.is_some_and(|a| a < i), "{s} comes before {n}");
        }
    }
    // The listing (`uopkit diff`'s kernel stages): a header, the params, then a line a node.
    let text = k.to_string();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" = ")).collect();
    assert_eq!(lines.len(), nodes.len(), "{text}");
    assert!(lines.iter().any(|l| l.contains("REDUCE")), "{text}");
}

#[test]
fn a_reduce_must_be_expanded_before_linearizing() {
    let k = reduce_graph(2, 3);
    assert!(matches!(
        linearize(&k),
        Err(KernelGraphError::Malformed { .. })
    ));
}

#[test]
fn cpu_passes_expand_the_reduce_into_an_accumulator() {
    let mut k = reduce_graph(4, 6);
    let applied = optimize::optimize_for(&mut k, Target::Cpu, None, &[]).unwrap();
    let names: Vec<&str> = applied.iter().map(|a| a.pass).collect();
    // The CPU passes run in order. On row sums of a 4×6 iota there is one output axis (no
    // tile), the reduced operand is not contiguous along an output axis (no interchange)
    // and the order is sequential (no lanes); each row writes its own element, so the row
    // loop is marked parallel; then expand_reduce makes the accumulator.
    assert_eq!(
        names,
        [
            "cpu_tile",
            "cpu_interchange",
            "cpu_split_lanes",
            "cpu_threads",
            "expand_reduce"
        ]
    );
    let fired: Vec<&str> = applied
        .iter()
        .filter(|a| !a.hits.is_empty())
        .map(|a| a.pass)
        .collect();
    assert_eq!(fired, ["cpu_threads", "expand_reduce"]);
    assert_eq!(applied[4].hits, BTreeMap::from([("reduce_to_acc", 1)]));
    let p = linearize(&k).unwrap();
    assert_eq!(run_on_iota(&p, 0).unwrap(), expected_row_sums(4, 6));
}

/// A float32 fold declared `chunks_of_split(c, k)` reaching the kernel passes (the scheduler
/// usually splits it into two REDUCEs first) is expanded in that order: each chunk's lanes,
/// then the chunks. run_on_iota's inputs are the bits 0, 1, 2, … (subnormals, whose sums
/// are exact), so every order gives the row sums' bits.
#[test]
fn a_float_fold_declared_chunks_of_split_is_expanded() {
    for (c, k) in [(2, 2), (4, 1), (1, 3)] {
        let mut k_graph = reduce_graph_of(DType::Float32, 3, 8, ReduceOrder::ChunksOfSplit(c, k));
        optimize::optimize_for(&mut k_graph, Target::Cpu, None, &[]).unwrap();
        let p = linearize(&k_graph).unwrap_or_else(|e| panic!("chunks_of_split({c}, {k}): {e}"));
        assert_eq!(run_on_iota(&p, 0).unwrap(), expected_row_sums(3, 8));
    }
}

#[test]
fn gpu_passes_launch_the_rows_and_reduce_in_local_memory() {
    for (rows, cols) in [(3, 5), (2, 8), (1, 20), (4, 1)] {
        let mut k = reduce_graph(rows, cols);
        let applied = optimize::optimize_for(&mut k, Target::Gpu, None, &[]).unwrap();
        let hits: BTreeMap<&str, usize> = applied
            .iter()
            .flat_map(|a| a.hits.iter().map(|(k, v)| (*k, *v)))
            .collect();
        assert_eq!(hits.get("range_to_gidx"), Some(&1), "{rows}x{cols}");
        let p = linearize(&k).unwrap();
        let specials: Vec<String> = p
            .insts
            .iter()
            .filter_map(|i| match &i.arg {
                KArg::Special(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        assert!(specials.contains(&"gidx0".to_string()), "{p}");
        if cols >= 2 {
            // A split reduction: lidx0, local memory and a barrier per tree level (+1).
            assert_eq!(hits.get("reduce_to_local_tree"), Some(&1), "{p}");
            assert!(specials.contains(&"lidx0".to_string()), "{p}");
            let barriers = p.insts.iter().filter(|i| i.op == Op::BARRIER).count();
            assert_eq!(barriers, 4, "{p}");
        }
        for seed in [0, 1, 2, 3, 0xDEAD_BEEF] {
            assert_eq!(
                run_on_iota(&p, seed).unwrap(),
                expected_row_sums(rows, cols),
                "{rows}x{cols}, seed {seed}:\n{p}"
            );
        }
    }
}

#[test]
fn a_missing_barrier_is_caught_by_the_interleavings() {
    let mut k = reduce_graph(2, 16);
    optimize::optimize_for(&mut k, Target::Gpu, None, &[]).unwrap();
    let p = linearize(&k).unwrap();
    let first = p
        .insts
        .iter()
        .position(|i| i.op == Op::BARRIER)
        .expect("a barrier");
    // The barrier between the partial sums' stores and the tree's first level, replaced by
    // a CONST that nothing uses (the numbering stays the same).
    let mut broken = p.clone();
    broken.insts[first] = uopkit_interp::kernel::Inst {
        op: Op::CONST,
        dtype: I64,
        src: vec![],
        arg: KArg::Const(0),
    };
    let want = expected_row_sums(2, 16);
    let wrong = (0..16u64)
        .filter(|&seed| run_on_iota(&broken, seed).ok().as_ref() != Some(&want))
        .count();
    assert!(
        wrong > 0,
        "no interleaving exposed the missing barrier:\n{broken}"
    );
    for seed in 0..16u64 {
        assert_eq!(run_on_iota(&p, seed).unwrap(), want, "seed {seed}");
    }
}

/// A read of p0[0] before a store into it, used only by a later store elsewhere: the graph
/// must keep the read before the overwrite (write-after-read order), so p1[0] gets the old
/// value (3), not the new one (7).
#[test]
fn a_write_never_overtakes_an_earlier_read() {
    let params = vec![
        ParamDecl {
            dtype: I32,
            size: 1,
            written: true,
        },
        ParamDecl {
            dtype: I32,
            size: 1,
            written: true,
        },
    ];
    let mut p = Program::new("war", params);
    let p0 = p.push(Op::PARAM, I32, vec![], KArg::Param(0));
    let zero = c64(&mut p, 0);
    let a = p.push(Op::INDEX, I32, vec![p0, zero], KArg::None);
    let old = p.push(Op::LOAD, I32, vec![a], KArg::None);
    let seven = p.push(Op::CONST, I32, vec![], KArg::Const(7));
    p.push(Op::STORE, DType::Void, vec![a, seven], KArg::None);
    let p1 = p.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let b = p.push(Op::INDEX, I32, vec![p1, zero], KArg::None);
    p.push(Op::STORE, DType::Void, vec![b, old], KArg::None);
    let q = linearize(&lift(&p).unwrap()).unwrap();
    for prog in [&p, &q] {
        let mut bufs = vec![vec![Elem::Bits(3)], vec![Elem::Bits(0)]];
        run(prog, &mut bufs, &RunOpts::default()).unwrap();
        assert_eq!(
            bufs,
            vec![vec![Elem::Bits(7)], vec![Elem::Bits(3)]],
            "{prog}"
        );
    }
}

/// A float32 sum declared `split(4)` over 10 elements: on the GPU target item l of 4 is
/// the oracle's accumulator l (elements l, l+4, l+8), the partials go through local memory,
/// and the combine is left to right. Values chosen so that the order shows in the bits:
/// 1e8 and 1 do not commute under float32 rounding. Expected by hand from the split order:
/// acc0 = x0+x4+x8, acc1 = x1+x5+x9, acc2 = x2+x6, acc3 = x3+x7, then ((acc0+acc1)+acc2)+acc3.
#[test]
fn a_declared_split_runs_on_work_items_in_the_oracles_order() {
    let xs: [f32; 10] = [1e8, 1.0, -1e8, 1.0, 1.0, 0.5, 1.0, 3.0, -1.0, 0.25];
    let acc = [
        xs[0] + xs[4] + xs[8],
        xs[1] + xs[5] + xs[9],
        xs[2] + xs[6],
        xs[3] + xs[7],
    ];
    let want = ((acc[0] + acc[1]) + acc[2]) + acc[3];
    let f32t = DType::Float32;
    let params = vec![
        ParamDecl {
            dtype: f32t,
            size: 1,
            written: true,
        },
        ParamDecl {
            dtype: f32t,
            size: 10,
            written: false,
        },
    ];
    let mut b = kgraph::Builder::new("split", params);
    let out = b.push(Op::PARAM, f32t, vec![], KArg::Param(0));
    let inp = b.push(Op::PARAM, f32t, vec![], KArg::Param(1));
    let n = b.push(Op::CONST, I64, vec![], KArg::Const(10));
    let j = b.push(Op::RANGE, I64, vec![n], KArg::Axis(0));
    let at = b.push(Op::INDEX, f32t, vec![inp, j], KArg::None);
    let x = b.push(Op::LOAD, f32t, vec![at], KArg::None);
    b.push(Op::END, DType::Void, vec![j], KArg::None);
    let sum = b.reduce(
        Op::ADD,
        f32t,
        x,
        &[j],
        uopkit_interp::ir::ReduceOrder::Split(4),
    );
    let zero = b.push(Op::CONST, I64, vec![], KArg::Const(0));
    let o = b.push(Op::INDEX, f32t, vec![out, zero], KArg::None);
    b.push(Op::STORE, DType::Void, vec![o, sum], KArg::None);
    let cpu = b.finish().unwrap();
    let mut gpu = cpu.clone();
    let mut cpu = cpu;
    optimize::optimize_for(&mut cpu, Target::Cpu, None, &[]).unwrap();
    let applied = optimize::optimize_for(&mut gpu, Target::Gpu, None, &[]).unwrap();
    assert!(applied
        .iter()
        .any(|a| a.hits.get("reduce_to_local_tree") == Some(&1)));
    let pg = linearize(&gpu).unwrap();
    assert!(
        pg.insts
            .iter()
            .any(|i| i.arg == KArg::Special("lidx0".into()))
            && pg.insts.iter().any(|i| i.arg == KArg::Local(4))
            && pg.insts.iter().any(|i| i.op == Op::BARRIER),
        "{pg}"
    );
    for (p, seeds) in [(linearize(&cpu).unwrap(), 0..1u64), (pg, 0..8u64)] {
        for seed in seeds {
            let mut bufs = vec![
                vec![Elem::Bits(0)],
                xs.iter()
                    .map(|v| Elem::Bits(u64::from(v.to_bits())))
                    .collect(),
            ];
            let opts = RunOpts {
                seed,
                ..RunOpts::default()
            };
            run(&p, &mut bufs, &opts).unwrap();
            assert_eq!(
                bufs[0],
                vec![Elem::Bits(u64::from(want.to_bits()))],
                "seed {seed}:\n{p}"
            );
        }
    }
    // A sequential fold of the same values gives other bits: the order is what is tested.
    let seq = xs.iter().fold(0.0f32, |a, &x| a + x);
    assert_ne!(seq.to_bits(), want.to_bits());
}

/// A float32 sum over a rows × cols input (both axes reduced) in a declared order, as the
/// lowering builds it; run on `xs` on the CPU and GPU targets.
fn ordered_sum(
    xs: &[f32],
    rows: i64,
    cols: i64,
    order: uopkit_interp::ir::ReduceOrder,
) -> Vec<u32> {
    let f32t = DType::Float32;
    let params = vec![
        ParamDecl {
            dtype: f32t,
            size: 1,
            written: true,
        },
        ParamDecl {
            dtype: f32t,
            size: xs.len(),
            written: false,
        },
    ];
    let mut b = kgraph::Builder::new("ordered", params);
    let out = b.push(Op::PARAM, f32t, vec![], KArg::Param(0));
    let inp = b.push(Op::PARAM, f32t, vec![], KArg::Param(1));
    let nr = b.push(Op::CONST, I64, vec![], KArg::Const(rows as u64));
    let i = b.push(Op::RANGE, I64, vec![nr], KArg::Axis(0));
    let nc = b.push(Op::CONST, I64, vec![], KArg::Const(cols as u64));
    let j = b.push(Op::RANGE, I64, vec![nc], KArg::Axis(1));
    let row = b.push(Op::MUL, I64, vec![i, nc], KArg::None);
    let flat = b.push(Op::ADD, I64, vec![row, j], KArg::None);
    let at = b.push(Op::INDEX, f32t, vec![inp, flat], KArg::None);
    let x = b.push(Op::LOAD, f32t, vec![at], KArg::None);
    b.push(Op::END, DType::Void, vec![j], KArg::None);
    b.push(Op::END, DType::Void, vec![i], KArg::None);
    let sum = b.reduce(Op::ADD, f32t, x, &[i, j], order);
    let zero = b.push(Op::CONST, I64, vec![], KArg::Const(0));
    let o = b.push(Op::INDEX, f32t, vec![out, zero], KArg::None);
    b.push(Op::STORE, DType::Void, vec![o, sum], KArg::None);
    let k = b.finish().unwrap();
    let mut got = vec![];
    for target in [Target::Cpu, Target::Gpu] {
        let mut kt = k.clone();
        optimize::optimize_for(&mut kt, target, None, &[]).unwrap();
        let p = linearize(&kt).unwrap();
        for seed in 0..3u64 {
            let mut bufs = vec![
                vec![Elem::Bits(0)],
                xs.iter()
                    .map(|v| Elem::Bits(u64::from(v.to_bits())))
                    .collect(),
            ];
            let opts = RunOpts {
                seed,
                ..RunOpts::default()
            };
            run(&p, &mut bufs, &opts).unwrap();
            match bufs[0][0] {
                Elem::Bits(b) => got.push(b as u32),
                _ => panic!("not written:\n{p}"),
            }
        }
    }
    got
}

/// The oracle's split(k) / chunks(k) by hand: accumulators from +0.0, element f to
/// accumulator f mod k (split) or f / ⌈n/k⌉ (chunks), combined left to right from acc 0.
fn by_hand(xs: &[f32], k: usize, chunks: bool) -> u32 {
    let mut acc = vec![0.0f32; k];
    let c = xs.len().div_ceil(k).max(1);
    for (f, &x) in xs.iter().enumerate() {
        let slot = if chunks { f / c } else { f % k };
        acc[slot] += x;
    }
    acc[1..].iter().fold(acc[0], |a, &b| a + b).to_bits()
}

#[test]
fn split_and_chunks_orders_match_a_hand_fold_on_both_targets() {
    use uopkit_interp::ir::ReduceOrder::{Chunks, Split};
    let xs: Vec<f32> = (0..12)
        .map(|i| [1e8f32, 1.0, -1e8, 0.5, 3.0, -0.25][i % 6] * (1 + i / 6) as f32)
        .collect();
    // 3 × 4 elements: two reduced axes; k below, equal to and above n; a large k.
    for k in [2usize, 3, 5, 12, 13, 1000] {
        let split = ordered_sum(&xs, 3, 4, Split(k));
        assert!(
            split.iter().all(|&b| b == by_hand(&xs, k, false)),
            "split({k}): {split:?}"
        );
        let chunks = ordered_sum(&xs, 3, 4, Chunks(k));
        assert!(
            chunks.iter().all(|&b| b == by_hand(&xs, k, true)),
            "chunks({k}): {chunks:?}"
        );
    }
    // The values make the orders' bits differ, so a wrong order cannot pass.
    let distinct: std::collections::BTreeSet<u32> = [2usize, 3, 5, 12]
        .iter()
        .flat_map(|&k| [by_hand(&xs, k, false), by_hand(&xs, k, true)])
        .collect();
    assert!(distinct.len() >= 3, "{distinct:?}");
    // An empty reduction: every accumulator stays +0.0.
    for order in [Split(4), Chunks(4)] {
        assert!(
            ordered_sum(&[], 0, 4, order.clone())
                .iter()
                .all(|&b| b == 0),
            "{order:?}"
        );
    }
}

/// Kernels that no local reduction took get work items on their innermost grid dimension:
/// `gidx0·B + lidx0`, B the largest power of two ≤ 256 that divides the extent (none for an
/// odd extent); the same elements, the same values, in every interleaving.
#[test]
fn gpu_threads_split_the_innermost_grid_dimension() {
    for (rows, groups, items) in [(4, 1, 4), (1000, 125, 8), (512, 2, 256), (7, 7, 0)] {
        let mut k = reduce_graph(rows, 1);
        let applied = optimize::optimize_for(&mut k, Target::Gpu, None, &[]).unwrap();
        let hits: BTreeMap<&str, usize> = applied
            .iter()
            .flat_map(|a| a.hits.iter().map(|(k, v)| (*k, *v)))
            .collect();
        let p = linearize(&k).unwrap();
        let launch = uopkit_compiler::render::Launch::of(&p).unwrap();
        assert_eq!(launch.grid, [groups, 1, 1], "{rows}:\n{p}");
        assert_eq!(launch.block, [items.max(1), 1, 1], "{rows}:\n{p}");
        assert_eq!(
            hits.get("gidx_to_workgroups").copied(),
            (items > 0).then_some(1),
            "{rows}"
        );
        for seed in [0, 1, 0xDEAD_BEEF] {
            assert_eq!(
                run_on_iota(&p, seed).unwrap(),
                expected_row_sums(rows, 1),
                "{rows}, seed {seed}:\n{p}"
            );
        }
    }
}

/// acc[0] = 5; for i < 3 { out[i] = acc[0] + in[i] } — the loop reads the register buffer
/// and never writes it — then (after a BARRIER when `barrier`) acc[0] = 9; out[0] = acc[0].
/// The loop's read of acc is still pending when END closes the loop: the overwrite (and the
/// barrier) must come after the loop, not name the read inside it. Lifting used to make
/// them depend on the in-loop LOAD, and linearizing failed with "needs the loop of range …,
/// which is not open there" (the kernel fuzzer's seeds 20, 93, 99, 112: an expanded
/// `chunks(k)` reduction before an exchange's barrier).
fn read_only_loop_then_overwrite(barrier: bool) -> Program {
    let mut p = Program::new("read_loop", matrix_params(3, 1));
    let out = p.push(Op::PARAM, I32, vec![], KArg::Param(0));
    let inp = p.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let acc = p.push(Op::BUFFER, I32, vec![], KArg::Reg(1));
    let zero = c64(&mut p, 0);
    let five = p.push(Op::CONST, I32, vec![], KArg::Const(5));
    let a0 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    p.push(Op::STORE, DType::Void, vec![a0, five], KArg::None);
    let n = c64(&mut p, 3);
    let i = p.push(Op::RANGE, I64, vec![n], KArg::Axis(0));
    let a1 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    let v = p.push(Op::LOAD, I32, vec![a1], KArg::None);
    let at = p.push(Op::INDEX, I32, vec![inp, i], KArg::None);
    let x = p.push(Op::LOAD, I32, vec![at], KArg::None);
    let s = p.push(Op::ADD, I32, vec![v, x], KArg::None);
    let o = p.push(Op::INDEX, I32, vec![out, i], KArg::None);
    p.push(Op::STORE, DType::Void, vec![o, s], KArg::None);
    p.push(Op::END, DType::Void, vec![i], KArg::None);
    if barrier {
        p.push(Op::BARRIER, DType::Void, vec![], KArg::None);
    }
    let nine = p.push(Op::CONST, I32, vec![], KArg::Const(9));
    let a2 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    p.push(Op::STORE, DType::Void, vec![a2, nine], KArg::None);
    let a3 = p.push(Op::INDEX, I32, vec![acc, zero], KArg::None);
    let w = p.push(Op::LOAD, I32, vec![a3], KArg::None);
    let o0 = p.push(Op::INDEX, I32, vec![out, zero], KArg::None);
    p.push(Op::STORE, DType::Void, vec![o0, w], KArg::None);
    p
}

#[test]
fn an_effect_after_a_loop_that_only_read_its_buffer_stays_after_the_loop() {
    // By hand, in = 0, 1, 2: the loop writes 5+0, 5+1, 5+2, then out[0] = 9. Had the
    // overwrite gone before the loop, out would be [9, 10, 11].
    let want = vec![9, 6, 7];
    for barrier in [false, true] {
        let p = read_only_loop_then_overwrite(barrier);
        assert_eq!(run_on_iota(&p, 0).unwrap(), want, "{p}");
        let k = lift(&p).unwrap();
        let q = linearize(&k).unwrap_or_else(|e| panic!("barrier {barrier}: {e}\n{k}"));
        assert_eq!(run_on_iota(&q, 0).unwrap(), want, "barrier {barrier}:\n{q}");
        // The store of 9 (the second store into acc) lies after the loop's END.
        let end = q
            .insts
            .iter()
            .position(|i| i.op == Op::END)
            .expect("an END");
        let stores: Vec<usize> = q
            .insts
            .iter()
            .enumerate()
            .filter(|(_, i)| i.op == Op::STORE && i.src.len() == 2)
            .map(|(n, _)| n)
            .collect();
        let nine = stores
            .iter()
            .copied()
            .find(|&n| {
                let v = q.insts[n].src[1];
                q.insts[v.index()].op == Op::CONST && q.insts[v.index()].arg == KArg::Const(9)
            })
            .expect("the store of 9");
        assert!(end < nine, "barrier {barrier}:\n{q}");
        // The BARRIER survives lifting, between the loop and the overwrite (a GPU kernel's
        // work items would otherwise race past it).
        if barrier {
            let b = q
                .insts
                .iter()
                .position(|i| i.op == Op::BARRIER)
                .unwrap_or_else(|| panic!("the BARRIER is lost:\n{q}"));
            assert!(end < b && b < nine, "BARRIER at {b}:\n{q}");
        }
    }
}

/// p1[0] = Σ_i p0[i] as a REDUCE (made, as the lowering does, before its loop's scope is
/// closed), then p0[0] = 100 — an effect on the buffer the fold read that does not use the
/// fold. The overwrite must come after the fold's reads: by hand, p0 = 1, 2, 3 gives
/// p1[0] = 6 (105 had the overwrite gone first) and p0 = 100, 2, 3.
#[test]
fn an_effect_after_a_reduce_that_read_its_buffer_stays_after_the_fold() {
    let params = vec![
        ParamDecl {
            dtype: I32,
            size: 3,
            written: true,
        },
        ParamDecl {
            dtype: I32,
            size: 1,
            written: true,
        },
    ];
    let mut b = kgraph::Builder::new("fold_then_overwrite", params);
    let p0 = b.push(Op::PARAM, I32, vec![], KArg::Param(0));
    let p1 = b.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let n = b.push(Op::CONST, I64, vec![], KArg::Const(3));
    let i = b.push(Op::RANGE, I64, vec![n], KArg::Axis(0));
    let at = b.push(Op::INDEX, I32, vec![p0, i], KArg::None);
    let x = b.push(Op::LOAD, I32, vec![at], KArg::None);
    let sum = b.reduce(
        Op::ADD,
        I32,
        x,
        &[i],
        uopkit_interp::ir::ReduceOrder::Sequential,
    );
    b.push(Op::END, DType::Void, vec![i], KArg::None);
    let zero = b.push(Op::CONST, I64, vec![], KArg::Const(0));
    let hundred = b.push(Op::CONST, I32, vec![], KArg::Const(100));
    let a0 = b.push(Op::INDEX, I32, vec![p0, zero], KArg::None);
    b.push(Op::STORE, DType::Void, vec![a0, hundred], KArg::None);
    let o = b.push(Op::INDEX, I32, vec![p1, zero], KArg::None);
    b.push(Op::STORE, DType::Void, vec![o, sum], KArg::None);
    let mut k = b.finish().unwrap();
    optimize::optimize_for(&mut k, Target::Cpu, None, &[]).unwrap();
    let q = linearize(&k).unwrap_or_else(|e| panic!("{e}\n{k}"));
    let mut bufs = vec![
        vec![Elem::Bits(1), Elem::Bits(2), Elem::Bits(3)],
        vec![Elem::Bits(0)],
    ];
    run(&q, &mut bufs, &RunOpts::default()).unwrap();
    assert_eq!(
        bufs,
        vec![
            vec![Elem::Bits(100), Elem::Bits(2), Elem::Bits(3)],
            vec![Elem::Bits(6)]
        ],
        "{q}"
    );
}

/// Two register buffers of one dtype and size are two buffers: r1[0] = 1, r2[0] = 2, then
/// out = [r1[0], r2[0]]. Lifting tells the two BUFFER nodes apart by their tags (the graph
/// hash-conses nodes, and both are `BUFFER Reg(1)` of int32); merged, out would be [2, 2].
#[test]
fn two_registers_of_one_size_stay_two_buffers() {
    let mut p = Program::new("two_regs", matrix_params(2, 1));
    let out = p.push(Op::PARAM, I32, vec![], KArg::Param(0));
    p.push(Op::PARAM, I32, vec![], KArg::Param(1));
    let r1 = p.push(Op::BUFFER, I32, vec![], KArg::Reg(1));
    let r2 = p.push(Op::BUFFER, I32, vec![], KArg::Reg(1));
    let zero = c64(&mut p, 0);
    let one = c64(&mut p, 1);
    for (r, v) in [(r1, 1), (r2, 2)] {
        let k = p.push(Op::CONST, I32, vec![], KArg::Const(v));
        let at = p.push(Op::INDEX, I32, vec![r, zero], KArg::None);
        p.push(Op::STORE, DType::Void, vec![at, k], KArg::None);
    }
    for (r, slot) in [(r1, zero), (r2, one)] {
        let at = p.push(Op::INDEX, I32, vec![r, zero], KArg::None);
        let v = p.push(Op::LOAD, I32, vec![at], KArg::None);
        let o = p.push(Op::INDEX, I32, vec![out, slot], KArg::None);
        p.push(Op::STORE, DType::Void, vec![o, v], KArg::None);
    }
    assert_eq!(run_on_iota(&p, 0).unwrap(), vec![1, 2], "{p}");
    let k = lift(&p).unwrap();
    let q = linearize(&k).unwrap_or_else(|e| panic!("{e}\n{k}"));
    assert_eq!(run_on_iota(&q, 0).unwrap(), vec![1, 2], "{q}");
}
