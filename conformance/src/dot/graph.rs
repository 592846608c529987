//! The tensor graph as DOT: one node per UOp (its case-file id, op, dtype, shape and device),
//! edges from each source to its user in source order.

use std::collections::BTreeMap;

use uopkit_interp::ir::NodeId;
use uopkit_interp::verify::Verified;

use super::{line, node_attrs, Class};
use crate::load::Loaded;

/// The DOT text of `loaded`'s graph; `highlight` (an arena id) is drawn red and bold.
///
/// A node is named `n<arena index>` and labelled with its case-file id (every case-file id
/// that the hash-consing folded into it, `3 = 7`), op, `dtype [shape]` and device. An edge
/// is labelled with the source's index when the user has more than one source.
pub fn graph_dot(loaded: &Loaded, verified: &Verified, highlight: Option<NodeId>) -> String {
    let g = &loaded.graph;
    let mut file_ids: BTreeMap<NodeId, Vec<u64>> = BTreeMap::new();
    for (&f, &a) in &loaded.arena_id {
        file_ids.entry(a).or_default().push(f);
    }
    let mut out = String::new();
    line(&mut out, 0, "digraph tensor_graph {");
    line(&mut out, 2, "rankdir=TB;");
    line(&mut out, 2, "node [fontname=\"monospace\", fontsize=10];");
    line(&mut out, 2, "edge [fontname=\"monospace\", fontsize=9];");
    for id in g.ids() {
        let node = g.node(id);
        let info = verified.info(id);
        let ids = match file_ids.get(&id) {
            Some(fs) => fs
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(" = "),
            None => loaded
                .file_id
                .get(id.index())
                .map_or_else(|| id.to_string(), |f| f.to_string()),
        };
        let shape: Vec<String> = info.shape.iter().map(|d| d.to_string()).collect();
        let mut label = format!("{ids}: {}\n{} [{}]", node.op, info.dtype, shape.join(", "));
        if let Some(d) = &info.device {
            label.push_str(&format!("\n{d}"));
        }
        line(
            &mut out,
            2,
            format!(
                "n{} [{}];",
                id.0,
                node_attrs(
                    &label,
                    "box",
                    Class::of(node.op).fill(),
                    highlight == Some(id)
                )
            ),
        );
    }
    for id in g.ids() {
        let src = &g.node(id).src;
        for (i, s) in src.iter().enumerate() {
            if src.len() > 1 {
                line(
                    &mut out,
                    2,
                    format!("n{} -> n{} [label=\"{i}\"];", s.0, id.0),
                );
            } else {
                line(&mut out, 2, format!("n{} -> n{};", s.0, id.0));
            }
        }
    }
    line(&mut out, 0, "}");
    out
}
