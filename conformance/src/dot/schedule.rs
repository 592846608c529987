//! uopkit's schedule for a case as DOT: buffers as nodes, kernels and COPY steps as boxes in
//! step order, edges buffer → kernel for reads, kernel → buffer for writes and src → COPY →
//! dst for copies; everything on one device in `subgraph cluster_<device>`.

use std::collections::BTreeMap;

use uopkit_compiler::schedule::{Schedule, Step};
use uopkit_compiler::spec::BufferKind;
use uopkit_interp::ir::{Device, NodeId, Op};

use super::{ident, line, node_attrs, Class};

/// The DOT text of `sched`. `file_id` maps arena ids to case-file ids (buffers and kernels
/// name graph nodes by their case-file id); `highlight` (an arena id) draws its graph buffer
/// and the kernel that computes it red and bold.
///
/// Buffers are `b<i>`, steps `s<i>`; consecutive steps are joined by dotted grey edges (the
/// order they run in). A COPY step sits in its destination's device cluster.
pub fn schedule_dot(sched: &Schedule, file_id: &[u64], highlight: Option<NodeId>) -> String {
    let fid = |n: NodeId| crate::load::file_id_in(file_id, n);
    let buf_device = |b: u32| sched.buffers.get(b as usize).map(|d| d.device);
    // Device → the lines of its cluster, in buffer then step order.
    let mut clusters: BTreeMap<Device, Vec<String>> = BTreeMap::new();
    let mut loose: Vec<String> = vec![];
    for (i, b) in sched.buffers.iter().enumerate() {
        let (kind, node) = match b.kind {
            BufferKind::Graph(n) => (format!("graph node {}", fid(n)), Some(n)),
            BufferKind::GraphComponent(n, c) => {
                (format!("graph node {} component {c}", fid(n)), Some(n))
            }
            BufferKind::Intermediate => ("intermediate".to_string(), None),
        };
        let label = format!(
            "b{i}\n{}[{}]\n{}\n{kind}\nstorage s{}",
            b.dtype, b.size, b.device, b.storage
        );
        let hl = node.is_some() && node == highlight;
        clusters.entry(b.device).or_default().push(format!(
            "b{i} [{}];",
            node_attrs(&label, "ellipse", Class::Storage.fill(), hl)
        ));
    }
    let mut edges: Vec<String> = vec![];
    for (i, s) in sched.steps.iter().enumerate() {
        match s {
            Step::Kernel {
                device,
                program,
                args,
                value,
            } => {
                let computes = value
                    .map(|v| format!("\ncomputes node {}", fid(v)))
                    .unwrap_or_default();
                let label = format!("step {i}: kernel {}{computes}", program.name);
                let hl = value.is_some() && *value == highlight;
                clusters.entry(*device).or_default().push(format!(
                    "s{i} [{}];",
                    node_attrs(&label, "box", Class::Alu.fill(), hl)
                ));
                for (slot, (b, p)) in args.iter().zip(&program.params).enumerate() {
                    if p.written {
                        edges.push(format!("s{i} -> {b} [label=\"p{slot} (w)\"];"));
                    } else {
                        edges.push(format!("{b} -> s{i} [label=\"p{slot}\"];"));
                    }
                }
            }
            Step::Copy { dst, src } => {
                let label = format!("step {i}: COPY");
                let attrs = node_attrs(&label, "box", Class::of(Op::COPY).fill(), false);
                match buf_device(dst.0) {
                    Some(d) => clusters
                        .entry(d)
                        .or_default()
                        .push(format!("s{i} [{attrs}];")),
                    None => loose.push(format!("s{i} [{attrs}];")),
                }
                edges.push(format!("{src} -> s{i};"));
                edges.push(format!("s{i} -> {dst};"));
            }
        }
        if i > 0 {
            edges.push(format!(
                "s{} -> s{i} [style=dotted, color=\"gray50\", arrowhead=none];",
                i - 1
            ));
        }
    }
    let mut out = String::new();
    line(&mut out, 0, "digraph schedule {");
    line(&mut out, 2, "rankdir=TB;");
    line(&mut out, 2, "node [fontname=\"monospace\", fontsize=10];");
    line(&mut out, 2, "edge [fontname=\"monospace\", fontsize=9];");
    for (device, lines) in &clusters {
        line(
            &mut out,
            2,
            format!("subgraph cluster_{} {{", ident(&device.to_string())),
        );
        line(
            &mut out,
            4,
            format!("label=\"{device}\"; style=\"rounded\"; color=\"gray40\";"),
        );
        for l in lines {
            line(&mut out, 4, l);
        }
        line(&mut out, 2, "}");
    }
    for l in loose.iter().chain(&edges) {
        line(&mut out, 2, l);
    }
    line(&mut out, 0, "}");
    out
}
