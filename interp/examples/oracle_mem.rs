//! Peak memory of the oracle through the compact API: x·2 + 1 and sum(x) over 2^n float32
//! elements, inputs moved in as columns, outputs read in compact form. Run under
//! `/usr/bin/time -v` (maximum resident set size) and divide by 2^n:
//! `cargo run --release -p uopkit-interp --example oracle_mem -- 24`.

use std::collections::BTreeMap;
use std::time::Instant;

use uopkit_interp::eval::{self, Column, Options, Words};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::verify::verify;

fn add(g: &mut Graph, op: Op, src: &[NodeId], arg: Arg) -> NodeId {
    g.add(Node {
        op,
        dtype: DType::Float32,
        src: src.to_vec(),
        arg,
    })
}

fn main() {
    let log2: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let n = 1usize << log2;
    let mut g = Graph::new();
    let x = add(
        &mut g,
        Op::BUFFER,
        &[],
        Arg::Buffer {
            slot: 0,
            size: n,
            device: DeviceSpec::Single(Device::cpu(0)),
        },
    );
    let two = add(
        &mut g,
        Op::CONST,
        &[],
        Arg::Const(u64::from(2f32.to_bits())),
    );
    let one = add(
        &mut g,
        Op::CONST,
        &[],
        Arg::Const(u64::from(1f32.to_bits())),
    );
    let m = add(&mut g, Op::MUL, &[x, two], Arg::None);
    let y = add(&mut g, Op::ADD, &[m, one], Arg::None);
    let sum = |g: &mut Graph, v| {
        add(
            g,
            Op::REDUCE,
            &[v],
            Arg::Reduce {
                op: Op::ADD,
                axes: 1,
                order: ReduceOrder::Sequential,
            },
        )
    };
    let s = sum(&mut g, x);
    let t = sum(&mut g, y);
    let ver = verify(&g).expect("verifies");
    let mut seed = 1u64;
    let bits: Vec<u32> = (0..n)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((seed >> 40) as f32) / (1u64 << 24) as f32 - 0.5).to_bits()
        })
        .collect();
    let inputs = BTreeMap::from([(x, vec![Column::from_u32(bits)])]);
    let t0 = Instant::now();
    let ev = eval::evaluate_columns(&g, &ver, inputs, &[y, s, t], &Options::default())
        .expect("evaluates");
    let t1 = Instant::now();
    let mut check = 0u64;
    for r in [y, s, t] {
        let v = ev.output_compact(&g, r).expect("defined");
        if let Words::W32(w) = v.comps[0].words() {
            for &b in w.iter() {
                check = check.wrapping_mul(31).wrapping_add(u64::from(b));
            }
        }
    }
    println!(
        "2^{log2} float32: evaluate {:.3}s, values held {} bytes ({:.2} per element), checksum {check:016x}",
        (t1 - t0).as_secs_f64(),
        [x, m, y, s, t]
            .iter()
            .map(|&id| ev.compact(id).map_or(0, |v| v.bytes()))
            .sum::<usize>(),
        [x, m, y, s, t]
            .iter()
            .map(|&id| ev.compact(id).map_or(0, |v| v.bytes()))
            .sum::<usize>() as f64
            / n as f64
    );
}
