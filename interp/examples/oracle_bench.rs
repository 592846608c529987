//! Timing and memory of the oracle on a few shapes of graph (uses only `eval::evaluate` and
//! `Evaluation::output`, the API every caller uses). Run with
//! `cargo run --release -p uopkit-interp --example oracle_bench -- <case> <n>` under
//! `/usr/bin/time -v` for the peak RSS. Cases:
//!
//! * `ew <log2 n>`      — x·2 + 1 and sum(x) over 2^n float32 elements (outputs: both)
//! * `ewsum <log2 n>`   — the same, only the sum is an output
//! * `addchain <n>`     — an n-node ADD chain on a 16-element float32 buffer
//! * `storechain <n>`   — n × (STORE, AFTER) on one 16-element buffer
//! * `viewchain <n>`    — n assigns through a PERMUTE view of the previous AFTER
//! * `nest <n>`         — n AFTERs, each depending on the store and the previous AFTER
//! * `matmul <n>`       — an n×n float32 matmul as tinygrad writes it (EXPAND, MUL, REDUCE)
//! * `elementwise <n>`  — x·y + x over n float32 elements

use std::collections::BTreeMap;
use std::time::Instant;

use uopkit_interp::eval;
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::verify::verify;

fn add(g: &mut Graph, op: Op, dtype: DType, src: &[NodeId], arg: Arg) -> NodeId {
    g.add(Node {
        op,
        dtype,
        src: src.to_vec(),
        arg,
    })
}

fn buffer(g: &mut Graph, slot: u32, size: usize) -> NodeId {
    add(
        g,
        Op::BUFFER,
        DType::Float32,
        &[],
        Arg::Buffer {
            slot,
            size,
            device: DeviceSpec::Single(Device::cpu(0)),
        },
    )
}

fn f32c(g: &mut Graph, x: f32) -> NodeId {
    add(
        g,
        Op::CONST,
        DType::Float32,
        &[],
        Arg::Const(u64::from(x.to_bits())),
    )
}

fn reduce(g: &mut Graph, x: NodeId, axes: usize) -> NodeId {
    add(
        g,
        Op::REDUCE,
        DType::Float32,
        &[x],
        Arg::Reduce {
            op: Op::ADD,
            axes,
            order: ReduceOrder::Sequential,
        },
    )
}

fn data(n: usize, seed: u64) -> Vec<Option<u64>> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = ((s >> 40) as f32) / (1u64 << 24) as f32 - 0.5;
            Some(u64::from(x.to_bits()))
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let case = args.get(1).map(String::as_str).unwrap_or("ew");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut g = Graph::new();
    let mut inputs = BTreeMap::new();
    let roots: Vec<NodeId> = match case {
        "ew" | "ewsum" => {
            let len = 1usize << n;
            let x = buffer(&mut g, 0, len);
            inputs.insert(x, vec![data(len, 1)]);
            let two = f32c(&mut g, 2.0);
            let one = f32c(&mut g, 1.0);
            let m = add(&mut g, Op::MUL, DType::Float32, &[x, two], Arg::None);
            let y = add(&mut g, Op::ADD, DType::Float32, &[m, one], Arg::None);
            let s = reduce(&mut g, x, 1);
            if case == "ew" {
                vec![y, s]
            } else {
                let t = reduce(&mut g, y, 1);
                vec![s, t]
            }
        }
        "elementwise" => {
            let x = buffer(&mut g, 0, n);
            let y = buffer(&mut g, 1, n);
            inputs.insert(x, vec![data(n, 1)]);
            inputs.insert(y, vec![data(n, 2)]);
            let m = add(&mut g, Op::MUL, DType::Float32, &[x, y], Arg::None);
            vec![add(&mut g, Op::ADD, DType::Float32, &[m, x], Arg::None)]
        }
        "matmul" => {
            // C[i,j] = sum_k A[i,k] B[k,j]: A as [1,n,n] → expand [n(j),n(i),n(k)]... in
            // tinygrad's form: a = A.reshape(n,1,n) expanded over j, b = B.T.reshape(1,n,n)
            // expanded over i, product summed over k (moved first for REDUCE).
            let a = buffer(&mut g, 0, n * n);
            let b = buffer(&mut g, 1, n * n);
            inputs.insert(a, vec![data(n * n, 1)]);
            inputs.insert(b, vec![data(n * n, 2)]);
            let a2 = add(
                &mut g,
                Op::RESHAPE,
                DType::Float32,
                &[a],
                Arg::Shape(vec![n, n]),
            ); // [i,k]
            let ak = add(
                &mut g,
                Op::PERMUTE,
                DType::Float32,
                &[a2],
                Arg::Perm(vec![1, 0]),
            ); // [k,i]
            let ae = add(
                &mut g,
                Op::EXPAND,
                DType::Float32,
                &[ak],
                Arg::Shape(vec![n]),
            ); // [j,k,i]
            let ae = add(
                &mut g,
                Op::PERMUTE,
                DType::Float32,
                &[ae],
                Arg::Perm(vec![1, 2, 0]),
            ); // [k,i,j]
            let b2 = add(
                &mut g,
                Op::RESHAPE,
                DType::Float32,
                &[b],
                Arg::Shape(vec![n, n]),
            ); // [k,j]
            let be = add(
                &mut g,
                Op::EXPAND,
                DType::Float32,
                &[b2],
                Arg::Shape(vec![n]),
            ); // [i,k,j]
            let be = add(
                &mut g,
                Op::PERMUTE,
                DType::Float32,
                &[be],
                Arg::Perm(vec![1, 0, 2]),
            ); // [k,i,j]
            let p = add(&mut g, Op::MUL, DType::Float32, &[ae, be], Arg::None);
            vec![reduce(&mut g, p, 1)]
        }
        "addchain" => {
            let mut x = buffer(&mut g, 0, 16);
            inputs.insert(x, vec![data(16, 1)]);
            for i in 0..n {
                let c = f32c(&mut g, (i % 7) as f32);
                x = add(&mut g, Op::ADD, DType::Float32, &[x, c], Arg::None);
            }
            vec![x]
        }
        "storechain" | "viewchain" | "nest" => {
            let b = buffer(&mut g, 0, 16);
            inputs.insert(b, vec![data(16, 1)]);
            let mut cur = b;
            let mut prev_after: Option<NodeId> = None;
            for i in 0..n {
                let c = f32c(&mut g, i as f32);
                let (target, shape) = if case == "viewchain" {
                    let r = add(
                        &mut g,
                        Op::RESHAPE,
                        DType::Float32,
                        &[cur],
                        Arg::Shape(vec![4, 4]),
                    );
                    let p = add(
                        &mut g,
                        Op::PERMUTE,
                        DType::Float32,
                        &[r],
                        Arg::Perm(vec![1, 0]),
                    );
                    let f = add(
                        &mut g,
                        Op::RESHAPE,
                        DType::Float32,
                        &[p],
                        Arg::Shape(vec![16]),
                    );
                    (f, 16)
                } else {
                    (cur, 16)
                };
                let v = add(
                    &mut g,
                    Op::EXPAND,
                    DType::Float32,
                    &[c],
                    Arg::Shape(vec![shape]),
                );
                let s = add(&mut g, Op::STORE, DType::Void, &[target, v], Arg::None);
                let deps: Vec<NodeId> = match (case, prev_after) {
                    ("nest", Some(p)) => vec![target, s, p],
                    _ => vec![target, s],
                };
                let a = add(&mut g, Op::AFTER, DType::Float32, &deps, Arg::None);
                prev_after = Some(a);
                cur = a;
            }
            vec![cur]
        }
        other => {
            eprintln!("unknown case {other}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let ver = verify(&g).expect("verifies");
    let t1 = Instant::now();
    let ev = eval::evaluate(&g, &ver, &inputs, &roots).expect("evaluates");
    let t2 = Instant::now();
    let mut check = 0u64;
    for &r in &roots {
        let v = ev.output(&g, r).expect("defined");
        for c in v.data.components() {
            for e in c {
                if let eval::Elem::Bits(b) = e {
                    check = check.wrapping_mul(31).wrapping_add(*b);
                }
            }
        }
    }
    let t3 = Instant::now();
    println!(
        "{case} {n}: nodes {} verify {:.3}s evaluate {:.3}s outputs {:.3}s checksum {check:016x}",
        g.len(),
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t3 - t2).as_secs_f64()
    );
}
