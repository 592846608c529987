//! Devices and multi-device tensors: COPY, shard, gather, and aligning the layouts of the
//! operands of an elementwise op.

use super::Tensor;
use crate::error::Result;
use crate::ir::{Arg, Device, DeviceSpec, Op};

impl Tensor {
    /// This tensor on one device. Same device: no node (as tinygrad). Single-device or
    /// device-less: COPY. Sharded: `COPY(UNSHARD(x, axis), device)` (a gather). Replicated:
    /// `COPY(MSELECT(x, 0), device)`.
    pub fn to(&self, device: Device) -> Result<Tensor> {
        match self.device() {
            Some(DeviceSpec::Single(d)) if d == device => Ok(self.clone()),
            Some(DeviceSpec::Multi(_)) => {
                let one = match self.axis {
                    Some(a) => self.unary_node(Op::UNSHARD, Arg::Axis(a), None)?,
                    None => self.unary_node(Op::MSELECT, Arg::Index(0), None)?,
                };
                one.unary_node(Op::COPY, Arg::Device(DeviceSpec::Single(device)), None)
            }
            _ => self.copy_to(device),
        }
    }

    /// Always a COPY node (also to the device the value is already on). Multi-device
    /// values need [`Tensor::to`] (gather) or [`Tensor::mselect`].
    pub fn copy_to(&self, device: Device) -> Result<Tensor> {
        if self.is_multi() {
            return Err(self.err(
                Op::COPY,
                "COPY of a multi-device tensor to one device: use to() (a gather) or mselect()",
            ));
        }
        self.unary_node(Op::COPY, Arg::Device(DeviceSpec::Single(device)), None)
    }

    /// Component `i` of a multi-device tensor (for a sharded tensor, shard `i`).
    pub fn mselect(&self, i: usize) -> Result<Tensor> {
        self.unary_node(Op::MSELECT, Arg::Index(i), None)
    }

    /// Spreads a single-device (or device-less) tensor over `devices`. `axis` None:
    /// replicated, `COPY(x, devices)`. `Some(axis)`: device i holds the i-th equal slice
    /// of that axis, `MSTACK(SHRINK(COPY(x, d_i), window_i)…)`; the axis must divide evenly.
    pub fn shard(&self, devices: &[Device], axis: Option<usize>) -> Result<Tensor> {
        if devices.is_empty() {
            return Err(self.err(Op::COPY, "shard over an empty device tuple"));
        }
        if self.is_multi() {
            return Err(self.err(
                Op::COPY,
                "tensor is already on several devices (gather it with to() first)",
            ));
        }
        let Some(a) = axis else {
            return self.unary_node(
                Op::COPY,
                Arg::Device(DeviceSpec::Multi(devices.to_vec())),
                None,
            );
        };
        let s = self.shape();
        let n = devices.len();
        let Some(&d) = s.get(a) else {
            return Err(self.err(
                Op::MSTACK,
                format!(
                    "cannot shard axis {a} of a {}-d tensor of shape {s:?}",
                    s.len()
                ),
            ));
        };
        if d % n != 0 {
            return Err(self.err(
                Op::MSTACK,
                format!("cannot shard axis {a} of size {d} evenly over {n} devices"),
            ));
        }
        let mut parts = vec![];
        for (i, &dev) in devices.iter().enumerate() {
            let c = self.unary_node(Op::COPY, Arg::Device(DeviceSpec::Single(dev)), None)?;
            let ranges: Vec<(usize, usize)> = s
                .iter()
                .enumerate()
                .map(|(j, &dj)| {
                    if j == a {
                        (i * d / n, (i + 1) * d / n)
                    } else {
                        (0, dj)
                    }
                })
                .collect();
            parts.push(c.shrink(&ranges)?.id);
        }
        self.emit(Op::MSTACK, self.dtype(), parts, Arg::None, Some(a))
    }

    /// A replicated multi-device tensor (or a device-less one, broadcast to `devices`) cut
    /// into shards on `axis` without moving data: `MSTACK(SHRINK(MSELECT(x, i))…)`.
    pub(super) fn shard_locally(&self, devices: &[Device], axis: usize) -> Result<Tensor> {
        let rep = if self.is_multi() {
            self.clone()
        } else {
            self.unary_node(
                Op::COPY,
                Arg::Device(DeviceSpec::Multi(devices.to_vec())),
                None,
            )?
        };
        let s = rep.shape();
        let n = devices.len();
        let d = s[axis];
        if d % n != 0 {
            return Err(self.err(
                Op::MSTACK,
                format!("cannot shard axis {axis} of size {d} evenly over {n} devices"),
            ));
        }
        let mut parts = vec![];
        for i in 0..n {
            let ranges: Vec<(usize, usize)> = s
                .iter()
                .enumerate()
                .map(|(j, &dj)| {
                    if j == axis {
                        (i * d / n, (i + 1) * d / n)
                    } else {
                        (0, dj)
                    }
                })
                .collect();
            parts.push(rep.mselect(i)?.shrink(&ranges)?.id);
        }
        self.emit(Op::MSTACK, self.dtype(), parts, Arg::None, Some(axis))
    }

    /// Makes operands of one logical shape agree on the layout: when one is sharded on
    /// axis a, replicated and device-less operands are cut into the same shards. 0-d
    /// operands broadcast as they are. Returns the common sharded axis.
    pub(super) fn align_layouts(op: Op, ts: &mut [Tensor]) -> Result<Option<usize>> {
        let mut sharded: Option<(usize, Vec<Device>)> = None;
        for t in ts.iter() {
            if let (Some(a), Some(ds)) = (t.axis, t.devices()) {
                match &sharded {
                    Some((b, _)) if *b != a => {
                        return Err(t.err(op, format!("operands are sharded on different axes ({b} and {a}); resharding is not supported")))
                    }
                    _ => sharded = Some((a, ds)),
                }
            }
        }
        let Some((a, ds)) = sharded else {
            return Ok(None);
        };
        for t in ts.iter_mut() {
            if t.axis.is_none() && t.ndim() > 0 {
                match t.device() {
                    Some(DeviceSpec::Single(d)) => {
                        return Err(t.err(
                            op,
                            format!("operand on {d} combined with a tensor sharded over {} (shard it first)", DeviceSpec::Multi(ds)),
                        ))
                    }
                    _ => *t = t.shard_locally(&ds, a)?,
                }
            }
        }
        Ok(Some(a))
    }
}
