//! Buffer versions, as the oracle defines them: a BUFFER node reads the initial contents,
//! a STORE makes a new version from the version its target names, and `AFTER(view, deps)`
//! reads the newest version among the stores in `deps`.

use std::collections::BTreeMap;

use uopkit_interp::ir::{Graph, NodeId, Op};
use uopkit_interp::verify::storage_view;

use super::ScheduleError;

/// A version of a buffer: the STORE that made it (None = the initial contents).
pub type Version = Option<NodeId>;

#[derive(Default, Debug)]
pub struct Versions {
    /// For each BUFFER/AFTER storage root: (buffer node, version, movement chain from the
    /// flat buffer to the root's view, innermost first).
    pub roots: BTreeMap<NodeId, (NodeId, Version, Vec<NodeId>)>,
    /// For each STORE: (buffer node, the version it starts from).
    pub stores: BTreeMap<NodeId, (NodeId, Version)>,
}

impl Versions {
    pub fn compute(g: &Graph, nodes: &[NodeId]) -> Result<Versions, ScheduleError> {
        let mut v = Versions::default();
        for &id in nodes {
            let n = g.node(id);
            match n.op {
                Op::BUFFER => {
                    v.roots.insert(id, (id, None, vec![]));
                }
                Op::AFTER => {
                    if let Some((root, chain)) = storage_view(g, n.src[0]) {
                        let (buf, base, inner) = v.root(root)?.clone();
                        let newest = v.newest(g, id, buf, base, &n.src[1..])?;
                        v.roots
                            .insert(id, (buf, newest, inner.into_iter().chain(chain).collect()));
                    }
                }
                Op::STORE => {
                    let (root, _) = storage_view(g, n.src[0]).ok_or_else(|| ScheduleError {
                        node: id,
                        reason: "STORE target is not storage".into(),
                    })?;
                    let (buf, base, _) = v.root(root)?.clone();
                    v.stores.insert(id, (buf, base));
                }
                _ => {}
            }
        }
        Ok(v)
    }

    pub fn root(&self, root: NodeId) -> Result<&(NodeId, Version, Vec<NodeId>), ScheduleError> {
        self.roots.get(&root).ok_or_else(|| ScheduleError {
            node: root,
            reason: "storage root is not a BUFFER or AFTER".into(),
        })
    }

    /// Whether version `old` is `new` or one of the versions `new` was made from.
    pub fn is_ancestor(&self, old: Version, new: Version) -> bool {
        let mut cur = new;
        loop {
            if cur == old {
                return true;
            }
            match cur.and_then(|c| self.stores.get(&c)) {
                Some((_, base)) => cur = *base,
                None => return false,
            }
        }
    }

    fn newest(
        &self,
        g: &Graph,
        at: NodeId,
        buf: NodeId,
        base: Version,
        deps: &[NodeId],
    ) -> Result<Version, ScheduleError> {
        let mut newest = base;
        for s in stores_in(g, deps) {
            let Some(&(b, _)) = self.stores.get(&s) else {
                continue;
            };
            if b != buf {
                continue;
            }
            if self.is_ancestor(newest, Some(s)) {
                newest = Some(s);
            } else if !self.is_ancestor(Some(s), newest) {
                return Err(ScheduleError {
                    node: at,
                    reason: format!("stores to buffer {buf} are not ordered"),
                });
            }
        }
        Ok(newest)
    }
}

pub use uopkit_interp::eval::storage::stores_in;
