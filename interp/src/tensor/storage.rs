//! Storage: contiguous, detach, clone, assign (the seed semantics of docs/ir.md and
//! tinygrad-notes §5).
//!
//! A `Tensor` handle is a value: `assign` replaces the handle's node by
//! `AFTER(target, STORE(view, value))`, and any other handle keeps the old node, so it reads
//! the contents from before the assign (write-after-read). The context remembers the newest
//! STORE into each storage: a new assign is ordered after it (program order, so stale
//! handles cannot make unordered stores), and [`Tensor::latest`] reads the storage after it.

use super::{Operand, Tensor};
use crate::error::Result;
use crate::ir::{Arg, DType, Device, DeviceSpec, Node, NodeId, Op};

impl Tensor {
    /// Whether this tensor is a view of storage (a BUFFER or an AFTER of one, under
    /// RESHAPE/PERMUTE/SHRINK/FLIP and DETACH): what a STORE can write through.
    pub fn is_storage_view(&self) -> bool {
        self.ctx.0.borrow().storage[self.id.index()].is_some()
    }

    /// The BUFFER node whose storage this tensor views, if it is a view of storage (what
    /// [`crate::verify::storage_identity`] says, without walking the graph).
    pub fn storage_identity(&self) -> Option<NodeId> {
        self.ctx.0.borrow().storage[self.id.index()].map(|s| s.buffer)
    }

    /// CONTIGUOUS: a layout/materialization request for the value. It owns no storage
    /// (use [`Tensor::clone_storage`] for that). Always a node (tinygrad skips it on a bare
    /// buffer).
    pub fn contiguous(&self) -> Result<Tensor> {
        self.unary_node(Op::CONTIGUOUS, Arg::None, self.axis)
    }

    /// DETACH: the same value sharing this tensor's storage; assigning through it writes
    /// the base storage.
    pub fn detach(&self) -> Result<Tensor> {
        self.unary_node(Op::DETACH, Arg::None, self.axis)
    }

    /// tinygrad's `clone`: fresh, independent storage (a new buffer slot) filled lazily
    /// with this tensor's current value: `AFTER(buf, STORE(buf, value))`. `device`: where
    /// the clone lives (default: this tensor's device; `CPU` for a device-less value); the
    /// value is COPYed there first when it lives elsewhere (a multi-device tensor is
    /// gathered). Without `device`, a multi-device tensor's clone has the same layout.
    pub fn clone_storage(&self, device: Option<Device>) -> Result<Tensor> {
        let (buf, value) = match (self.device(), device) {
            (Some(DeviceSpec::Multi(_)), None) => (self.empty_like()?, self.clone()),
            (Some(DeviceSpec::Multi(_)), Some(d)) => (
                Tensor::empty(&self.ctx, &self.shape(), self.dtype(), d)?,
                self.to(d)?,
            ),
            (Some(DeviceSpec::Single(s)), dev) => {
                let target = dev.unwrap_or(s);
                let value = if target != s {
                    self.copy_to(target)?
                } else {
                    self.clone()
                };
                (
                    Tensor::empty(&self.ctx, &self.shape(), self.dtype(), target)?,
                    value,
                )
            }
            (None, dev) => (
                Tensor::empty(
                    &self.ctx,
                    &self.shape(),
                    self.dtype(),
                    dev.unwrap_or(Device::CPU),
                )?,
                self.clone(),
            ),
        };
        let store = buf.store(Operand::Tensor(value))?;
        buf.after(store)
    }

    /// `AFTER(self, store)`, remembering `store` as the newest store into its storage.
    fn after(&self, store: NodeId) -> Result<Tensor> {
        let t = self.emit(
            Op::AFTER,
            self.dtype(),
            vec![self.id, store],
            Arg::None,
            self.axis,
        )?;
        if let Some(buf) = t.storage_identity() {
            self.ctx.0.borrow_mut().last_store.insert(buf, store);
        }
        Ok(t)
    }

    /// This tensor read after every assign made so far (through this context) to the
    /// storage it views: `AFTER(self, newest_store)` — what tinygrad's tensors sharing a
    /// buffer see once the assign is realized. A tensor that is not a view of storage, or
    /// already ordered after the newest store, is returned as it is.
    pub fn latest(&self) -> Result<Tensor> {
        let Some(view) = self.ctx.0.borrow().storage[self.id.index()] else {
            return Ok(self.clone());
        };
        let Some(store) = self.ctx.0.borrow().last_store.get(&view.buffer).copied() else {
            return Ok(self.clone());
        };
        if view.newest >= Some(store) {
            return Ok(self.clone());
        }
        self.emit(
            Op::AFTER,
            self.dtype(),
            vec![self.id, store],
            Arg::None,
            self.axis,
        )
    }

    /// A STORE of `value` through this view (checked: dtype equal, shape equal after
    /// broadcasting `value`, devices). A value on another single device is stored directly
    /// when it is a view of storage (a STORE into another device's buffer is a COPY);
    /// a computed value is first materialized on its own device with CONTIGUOUS, as
    /// tinygrad does (SDMA copies read whole buffers).
    fn store(&self, value: Operand) -> Result<NodeId> {
        let v = self.operand(value, self.dtype())?;
        if v.dtype() != self.dtype() {
            return Err(self.err(
                Op::STORE,
                format!(
                    "assign of a {} value into a {} tensor (cast first)",
                    v.dtype(),
                    self.dtype()
                ),
            ));
        }
        let (ts, vs) = (self.shape(), v.shape());
        let mut v = if vs != ts {
            v.expand(&ts).map_err(|_| {
                self.err(
                    Op::STORE,
                    format!("assign of shape {vs:?} into a target of shape {ts:?}"),
                )
            })?
        } else {
            v
        };
        match (self.device(), v.device()) {
            (Some(DeviceSpec::Single(t)), Some(DeviceSpec::Single(s))) if t != s && !v.is_storage_view() => v = v.contiguous()?,
            (Some(DeviceSpec::Single(_)), Some(DeviceSpec::Multi(_))) => {
                return Err(self.err(Op::STORE, "assign of a multi-device value into single-device storage (gather it with to() first)"))
            }
            (Some(DeviceSpec::Multi(_)), Some(DeviceSpec::Single(d))) => {
                return Err(self.err(Op::STORE, format!("assign of a value on {d} into multi-device storage (shard it first)")))
            }
            (Some(DeviceSpec::Multi(ds)), _) => match (self.axis, v.axis) {
                (Some(a), None) => v = v.shard_locally(&ds, a)?,
                (None, Some(_)) => return Err(self.err(Op::STORE, "assign of a sharded value into replicated storage")),
                (Some(a), Some(b)) if a != b => {
                    return Err(self.err(Op::STORE, format!("assign of a value sharded on axis {b} into storage sharded on axis {a}")))
                }
                _ => {}
            },
            _ => {}
        }
        self.ctx.add_node(Node {
            op: Op::STORE,
            dtype: DType::Void,
            src: vec![self.id, v.id],
            arg: Arg::None,
        })
    }

    /// The storage an assign to `self` writes: `self` (ordered after the newest store to
    /// its storage) when it is a view of storage; otherwise fresh storage initialized with
    /// `self`'s value ("assigning into a computed value initializes new storage").
    fn assign_base(&self) -> Result<Tensor> {
        if self.is_storage_view() {
            return self.latest();
        }
        let buf = self.empty_like()?;
        let init = buf.store(Operand::Tensor(self.clone()))?;
        buf.after(init)
    }

    /// tinygrad's `assign`: writes `value` into this tensor's storage and makes this handle
    /// `AFTER(self, STORE(self, value))` (returned too). `value` may be a literal or
    /// broadcast to the shape; its dtype must match. Other handles on the old node keep
    /// reading the old contents. A computed (non-storage) tensor first gets fresh storage
    /// holding its value. Cross-device: see [`Tensor::clone_storage`] and the STORE rules
    /// (no explicit COPY; a computed source is made CONTIGUOUS on its own device).
    pub fn assign(&mut self, value: impl Into<Operand>) -> Result<Tensor> {
        self.assign_view(|t| Ok(t.clone()), value)
    }

    /// Assigns through a view of this tensor's storage: `view` gets the storage (this
    /// tensor, or its fresh storage) and returns a view of it built with
    /// reshape/permute/shrink/flip/detach; `STORE(view, value)` writes those elements and
    /// this handle becomes `AFTER(self, store)`, the whole storage after the write.
    pub fn assign_view(
        &mut self,
        view: impl FnOnce(&Tensor) -> Result<Tensor>,
        value: impl Into<Operand>,
    ) -> Result<Tensor> {
        let base = self.assign_base()?;
        let target = view(&base)?;
        let id = base.storage_identity();
        if id.is_none() || target.storage_identity() != id {
            return Err(target.err(
                Op::STORE,
                "the view to assign through is not a view of the target's storage (build it from the tensor passed in with reshape/permute/shrink/flip)",
            ));
        }
        let store = target.store(value.into())?;
        *self = base.after(store)?;
        Ok(self.clone())
    }

    /// `self[ranges] = value`: assigns through `shrink(ranges)` (per axis `start..end`).
    pub fn assign_slice(
        &mut self,
        ranges: &[(usize, usize)],
        value: impl Into<Operand>,
    ) -> Result<Tensor> {
        self.assign_view(|t| t.shrink(ranges), value)
    }
}
