//! Inlining CALLs: a `CALL(body, args…)` becomes its body with every `PARAM(slot i)`
//! replaced by `args[i]`. The oracle evaluates the inlined graph, so a CALL means exactly
//! what its body means on its arguments.

use std::collections::BTreeMap;

use super::{Arg, Graph, NodeId, Op};
use crate::error::{Error, Result};

/// The graph after inlining, and for every node of it the node of the input graph it comes
/// from (for error messages in the caller's terms).
pub struct Inlined {
    pub graph: Graph,
    /// `remap[old]` = the node that stands for input node `old`.
    pub remap: Vec<NodeId>,
    /// `origin[new]` = the input node that `new` was made from.
    pub origin: Vec<NodeId>,
}

/// The largest graph inlining may produce: nested CALLs can double it at every level.
pub const MAX_INLINED_NODES: usize = 1 << 21;

/// Per node of the graph being built: the number of elements of a buffer-like node
/// (BUFFER/PARAM, or AFTER/DETACH of one), when it can be read off the graph without
/// verifying it. Kept up to date as nodes are added (each in O(1) from its first source),
/// so that an argument at the end of a long chain of assigns is not walked per CALL.
#[derive(Default)]
struct Numel(Vec<Option<usize>>);

impl Numel {
    fn sync(&mut self, g: &Graph) {
        for i in self.0.len()..g.len() {
            let node = g.node(NodeId(i as u32));
            let n = match (&node.op, &node.arg) {
                (Op::BUFFER | Op::PARAM, Arg::Buffer { size, .. }) => Some(*size),
                (Op::AFTER | Op::DETACH, _) => node
                    .src
                    .first()
                    .and_then(|s| self.0.get(s.index()).copied().flatten()),
                _ => None,
            };
            self.0.push(n);
        }
    }

    fn of(&self, n: NodeId) -> Option<usize> {
        self.0.get(n.index()).copied().flatten()
    }
}

/// The nodes reachable from `root`, in topological order, in time proportional to their
/// number (not to the graph's size: inlining asks this once per CALL).
fn reachable_from(g: &Graph, root: NodeId) -> Vec<NodeId> {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if seen.insert(id) {
            stack.extend(g.node(id).src.iter().copied());
        }
    }
    let mut out: Vec<NodeId> = seen.into_iter().collect();
    out.sort_unstable();
    out
}

pub fn inline_calls(g: &Graph) -> Result<Inlined> {
    let mut out = Graph::new();
    let mut origin: Vec<NodeId> = vec![];
    let mut remap: Vec<NodeId> = Vec::with_capacity(g.len());
    let mut numel = Numel::default();
    let add = |out: &mut Graph, origin: &mut Vec<NodeId>, node, from: NodeId| {
        let id = out.add(node);
        if id.index() == origin.len() {
            origin.push(from);
        }
        id
    };
    for id in g.ids() {
        let mut node = g.node(id).clone();
        for s in node.src.iter_mut() {
            *s = remap[s.index()];
        }
        if node.op != Op::CALL {
            remap.push(add(&mut out, &mut origin, node, id));
            continue;
        }
        let (body, args) = (node.src[0], node.src[1..].to_vec());
        // Substitute inside the (already rebuilt) body: PARAM(slot) → args[slot].
        let mut sub: BTreeMap<NodeId, NodeId> = BTreeMap::new();
        numel.sync(&out);
        for b in reachable_from(&out, body) {
            let mut bn = out.node(b).clone();
            if bn.op == Op::PARAM {
                let Arg::Buffer { slot, .. } = bn.arg else {
                    continue;
                };
                let arg = *args.get(slot as usize).ok_or_else(|| Error::Verify {
                    node: id,
                    op: Op::CALL,
                    reason: format!(
                        "body uses PARAM slot {slot} but the CALL passes {} argument(s)",
                        args.len()
                    ),
                })?;
                if let (Arg::Buffer { size, .. }, Some(arg_size)) = (&bn.arg, numel.of(arg)) {
                    if *size != arg_size {
                        return Err(Error::Verify {
                            node: id,
                            op: Op::CALL,
                            reason: format!("PARAM slot {slot} has {size} elements but argument {slot} has {arg_size}"),
                        });
                    }
                }
                if out.node(arg).dtype != bn.dtype {
                    return Err(Error::Verify {
                        node: id,
                        op: Op::CALL,
                        reason: format!(
                            "PARAM slot {slot} is {} but argument {slot} is {}",
                            bn.dtype,
                            out.node(arg).dtype
                        ),
                    });
                }
                sub.insert(b, arg);
                continue;
            }
            let before = bn.src.clone();
            for s in bn.src.iter_mut() {
                *s = sub.get(s).copied().unwrap_or(*s);
            }
            if bn.src != before {
                let from = origin[b.index()];
                sub.insert(b, add(&mut out, &mut origin, bn, from));
            }
        }
        remap.push(sub.get(&body).copied().unwrap_or(body));
        if out.len() > MAX_INLINED_NODES {
            return Err(Error::Verify {
                node: id,
                op: Op::CALL,
                reason: format!("inlining the CALLs makes more than {MAX_INLINED_NODES} nodes (nested CALLs double the graph at every level)"),
            });
        }
    }
    Ok(Inlined {
        graph: out,
        remap,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Device, DeviceSpec, Node};

    #[test]
    fn call_becomes_its_body_on_the_arguments() {
        let mut g = Graph::new();
        let buf = |slot| Arg::Buffer {
            slot,
            size: 2,
            device: DeviceSpec::Single(Device::CPU),
        };
        let p = g.add(Node {
            op: Op::PARAM,
            dtype: DType::Int32,
            src: vec![],
            arg: buf(0),
        });
        let one = g.add(Node {
            op: Op::CONST,
            dtype: DType::Int32,
            src: vec![],
            arg: Arg::Const(1),
        });
        let add = g.add(Node {
            op: Op::ADD,
            dtype: DType::Int32,
            src: vec![p, one],
            arg: Arg::None,
        });
        let st = g.add(Node {
            op: Op::STORE,
            dtype: DType::Void,
            src: vec![p, add],
            arg: Arg::None,
        });
        let body = g.add(Node {
            op: Op::SINK,
            dtype: DType::Void,
            src: vec![st],
            arg: Arg::None,
        });
        let b = g.add(Node {
            op: Op::BUFFER,
            dtype: DType::Int32,
            src: vec![],
            arg: buf(7),
        });
        let call = g.add(Node {
            op: Op::CALL,
            dtype: DType::Void,
            src: vec![body, b],
            arg: Arg::None,
        });
        let inl = inline_calls(&g).unwrap();
        let new_call = inl.graph.node(inl.remap[call.index()]);
        assert_eq!(new_call.op, Op::SINK);
        let store = inl.graph.node(new_call.src[0]);
        assert_eq!(
            store.src[0],
            inl.remap[b.index()],
            "the store writes the argument buffer"
        );
        assert_eq!(inl.origin[inl.remap[call.index()].index()], body);
    }
}
