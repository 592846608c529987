//! One kernel's linear program as DOT: one node per instruction (`vN = OP dtype arg`), edges
//! from its sources, each RANGE … END loop body a cluster.

use uopkit_interp::ir::Op;
use uopkit_interp::kernel::{KArg, Program};

use super::{line, node_attrs, quote, Class};

/// The DOT text of `program`.
pub fn kernel_dot(program: &Program) -> String {
    let mut out = String::new();
    line(&mut out, 0, "digraph kernel {");
    let params: Vec<String> = program
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                "p{i}: {}[{}]{}",
                p.dtype,
                p.size,
                if p.written { " (written)" } else { "" }
            )
        })
        .collect();
    line(
        &mut out,
        2,
        format!(
            "label={}; labelloc=t;",
            quote(&format!("kernel {}({})", program.name, params.join(", ")))
        ),
    );
    line(&mut out, 2, "node [fontname=\"monospace\", fontsize=10];");
    line(&mut out, 2, "edge [fontname=\"monospace\", fontsize=9];");
    let mut depth = 0usize;
    for (i, inst) in program.insts.iter().enumerate() {
        if inst.op == Op::RANGE {
            line(
                &mut out,
                2 + 2 * depth,
                format!("subgraph cluster_loop_v{i} {{"),
            );
            line(
                &mut out,
                4 + 2 * depth,
                format!("label=\"loop v{i}\"; style=\"rounded\"; color=\"gray50\";"),
            );
            depth += 1;
        }
        let arg = match &inst.arg {
            KArg::None => String::new(),
            KArg::Param(s) => format!(" slot={s}"),
            KArg::Reg(n) => format!(" reg[{n}]"),
            KArg::Const(b) => format!(
                " {}",
                uopkit_interp::scalar::literal::display(inst.dtype, *b)
            ),
            KArg::Axis(a) => format!(" axis={a}"),
            KArg::Special(name) => format!(" {name}"),
            KArg::Local(n) => format!(" local[{n}]"),
        };
        let label = format!("v{i} = {} {}{arg}", inst.op, inst.dtype);
        line(
            &mut out,
            2 + 2 * depth,
            format!(
                "v{i} [{}];",
                node_attrs(&label, "box", Class::of(inst.op).fill(), false)
            ),
        );
        if inst.op == Op::END && depth > 0 {
            depth -= 1;
            line(&mut out, 2 + 2 * depth, "}");
        }
    }
    // A malformed program (a RANGE without its END) still gives balanced braces.
    while depth > 0 {
        depth -= 1;
        line(&mut out, 2 + 2 * depth, "}");
    }
    for (i, inst) in program.insts.iter().enumerate() {
        for (k, s) in inst.src.iter().enumerate() {
            if inst.src.len() > 1 {
                line(&mut out, 2, format!("{s} -> v{i} [label=\"{k}\"];"));
            } else {
                line(&mut out, 2, format!("{s} -> v{i};"));
            }
        }
    }
    line(&mut out, 0, "}");
    out
}
