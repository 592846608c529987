//! Storage as versions. A BUFFER node reads the buffer's initial contents; every STORE makes
//! a new version of its buffer from the version its target names; `AFTER(view, deps…)` reads
//! the newest version among the stores in `deps`. Because versions are values, a reader
//! ordered before an assign sees the old contents by construction (write-after-read).

use std::collections::HashMap;
use std::rc::Rc;

use super::value::Elem;
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Op};

/// One version of a buffer: the elements of each device component (`C`: how the evaluator
/// holds them; the default is the public element lists).
#[derive(Debug)]
pub struct Version<C = Vec<Vec<Elem>>> {
    /// The BUFFER/PARAM node whose storage this is.
    pub buffer: NodeId,
    /// The STORE that made this version; None for the initial contents.
    pub made_by: Option<NodeId>,
    pub comps: Rc<C>,
}

impl<C> Clone for Version<C> {
    fn clone(&self) -> Self {
        Version {
            buffer: self.buffer,
            made_by: self.made_by,
            comps: self.comps.clone(),
        }
    }
}

pub struct Versions<C = Vec<Vec<Elem>>> {
    /// The version each STORE produced, and the version it started from.
    after_store: HashMap<NodeId, (Version<C>, Option<NodeId>)>,
}

impl<C> Default for Versions<C> {
    fn default() -> Self {
        Versions {
            after_store: HashMap::new(),
        }
    }
}

impl<C> Versions<C> {
    pub fn record_store(&mut self, store: NodeId, base: &Version<C>, comps: C) -> Version<C> {
        let v = Version {
            buffer: base.buffer,
            made_by: Some(store),
            comps: Rc::new(comps),
        };
        self.after_store.insert(store, (v.clone(), base.made_by));
        v
    }

    /// The newest version of `base.buffer` once the stores in `deps` have run.
    pub fn after(
        &self,
        g: &Graph,
        at: NodeId,
        base: Version<C>,
        deps: &[NodeId],
    ) -> Result<Version<C>> {
        let stores = stores_in(g, deps);
        let mut newest = base;
        for s in stores {
            let Some((v, _)) = self.after_store.get(&s) else {
                continue;
            };
            if v.buffer != newest.buffer {
                continue;
            }
            if self.is_ancestor(newest.made_by, Some(s)) {
                newest = v.clone();
            } else if !self.is_ancestor(Some(s), newest.made_by) {
                let other = newest
                    .made_by
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "its initial contents".into());
                return Err(Error::Eval {
                    node: at,
                    op: g.node(at).op,
                    reason: format!(
                        "stores {s} and {other} to buffer {} are not ordered (neither target is after the other)",
                        newest.buffer
                    ),
                });
            }
        }
        Ok(newest)
    }

    /// Whether version `old` is `new` or one of the versions `new` was built from.
    fn is_ancestor(&self, old: Option<NodeId>, new: Option<NodeId>) -> bool {
        let mut cur = new;
        loop {
            if cur == old {
                return true;
            }
            match cur.and_then(|c| self.after_store.get(&c)) {
                Some((_, base)) => cur = *base,
                None => return false,
            }
        }
    }
}

/// The STOREs that `deps` stand for, by id: STOREs themselves, and those inside GROUP/SINK
/// and the dependencies of AFTERs. (The compiler's scheduler uses the same rule.)
pub fn stores_in(g: &Graph, deps: &[NodeId]) -> Vec<NodeId> {
    let mut out = vec![];
    let mut stack: Vec<NodeId> = deps.to_vec();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let n = g.node(d);
        match n.op {
            Op::STORE => out.push(d),
            Op::GROUP | Op::SINK => stack.extend(n.src.iter().copied()),
            Op::AFTER => stack.extend(n.src[1..].iter().copied()),
            _ => {}
        }
    }
    out.sort();
    out
}
