//! Creation: buffers (uninitialized or with known contents), constants, arange.

use super::{const_node, Ctx, Scalar, Tensor};
use crate::error::{Error, Result};
use crate::ir::{Arg, DType, Device, DeviceSpec, Node, NodeId, Op};

/// An error about a node that does not exist yet (creation has no operand to name).
fn fresh_err(ctx: &Ctx, op: Op, reason: impl Into<String>) -> Error {
    Error::Verify {
        node: NodeId(ctx.len() as u32),
        op,
        reason: reason.into(),
    }
}

fn numel(ctx: &Ctx, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| fresh_err(ctx, Op::BUFFER, format!("shape {shape:?} overflows")))
}

impl Tensor {
    /// A fresh buffer (new slot) of `dtype`, RESHAPEd to `shape` (no RESHAPE for a 1-d
    /// shape). Its contents are never written: reading it before an assign is an
    /// uninitialized read.
    pub fn empty(ctx: &Ctx, shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        Self::buffer(ctx, shape, dtype, DeviceSpec::Single(device), None)
    }

    /// A fresh multi-device buffer holding a tensor of logical `shape`: replicated
    /// (`axis` None: every device holds the whole shape) or sharded on `axis` (each device
    /// holds an equal slice).
    pub fn empty_multi(
        ctx: &Ctx,
        shape: &[usize],
        dtype: DType,
        devices: &[Device],
        axis: Option<usize>,
    ) -> Result<Tensor> {
        if devices.is_empty() {
            return Err(fresh_err(ctx, Op::BUFFER, "empty device tuple"));
        }
        let mut local = shape.to_vec();
        if let Some(a) = axis {
            let Some(d) = local.get_mut(a) else {
                return Err(fresh_err(
                    ctx,
                    Op::BUFFER,
                    format!(
                        "cannot shard axis {a} of a {}-d shape {shape:?}",
                        shape.len()
                    ),
                ));
            };
            if *d % devices.len() != 0 {
                return Err(fresh_err(
                    ctx,
                    Op::BUFFER,
                    format!(
                        "cannot shard axis {a} of size {d} evenly over {} devices",
                        devices.len()
                    ),
                ));
            }
            *d /= devices.len();
        }
        Self::buffer(
            ctx,
            &local,
            dtype,
            DeviceSpec::Multi(devices.to_vec()),
            axis,
        )
    }

    /// A buffer like `self`: same logical shape, dtype and layout (a device-less value
    /// gets a `CPU` buffer).
    pub fn empty_like(&self) -> Result<Tensor> {
        match self.device() {
            Some(DeviceSpec::Multi(ds)) => {
                Self::empty_multi(&self.ctx, &self.shape(), self.dtype(), &ds, self.axis)
            }
            Some(DeviceSpec::Single(d)) => Self::empty(&self.ctx, &self.shape(), self.dtype(), d),
            None => Self::empty(&self.ctx, &self.shape(), self.dtype(), Device::CPU),
        }
    }

    /// BUFFER of the local shape's size, reshaped to it.
    fn buffer(
        ctx: &Ctx,
        local: &[usize],
        dtype: DType,
        device: DeviceSpec,
        axis: Option<usize>,
    ) -> Result<Tensor> {
        let size = numel(ctx, local)?;
        let slot = ctx.new_slot();
        let id = ctx.add_node(Node {
            op: Op::BUFFER,
            dtype,
            src: vec![],
            arg: Arg::Buffer { slot, size, device },
        })?;
        let buf = ctx.tensor(id, None);
        if local == [size] {
            return Ok(Tensor { axis, ..buf });
        }
        buf.emit(
            Op::RESHAPE,
            dtype,
            vec![id],
            Arg::Shape(local.to_vec()),
            axis,
        )
    }

    /// A fresh buffer whose initial contents are `bits` (each the low bits of one element of
    /// `dtype`, row-major in `shape`). The contents are registered in [`Ctx::inputs`].
    pub fn from_data(
        ctx: &Ctx,
        shape: &[usize],
        dtype: DType,
        device: Device,
        bits: &[u64],
    ) -> Result<Tensor> {
        let n = numel(ctx, shape)?;
        if bits.len() != n {
            return Err(fresh_err(
                ctx,
                Op::BUFFER,
                format!(
                    "{} elements of data for shape {shape:?} ({n} elements)",
                    bits.len()
                ),
            ));
        }
        if dtype == DType::Void {
            return Err(fresh_err(
                ctx,
                Op::BUFFER,
                "a buffer needs an element dtype",
            ));
        }
        if dtype.bits() < 64 {
            if let Some((i, b)) = bits
                .iter()
                .enumerate()
                .find(|(_, &b)| b >> dtype.bits() != 0)
            {
                return Err(fresh_err(
                    ctx,
                    Op::BUFFER,
                    format!("element {i}: bits {b:#x} do not fit {dtype}"),
                ));
            }
        }
        let t = Self::empty(ctx, shape, dtype, device)?;
        let buf = t.storage_identity().expect("a fresh buffer view");
        ctx.0
            .borrow_mut()
            .inputs
            .insert(buf, vec![bits.iter().map(|&b| Some(b)).collect()]);
        Ok(t)
    }

    /// [`Tensor::from_data`] from integers: an int dtype must hold every value (no
    /// wrapping), a bool dtype takes 0/1, a float dtype rounds once.
    pub fn from_i64s(
        ctx: &Ctx,
        shape: &[usize],
        dtype: DType,
        device: Device,
        data: &[i64],
    ) -> Result<Tensor> {
        let bits = data
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if let Some((lo, hi)) = dtype.int_range() {
                    if (v as i128) < lo || (v as i128) > hi {
                        return Err(fresh_err(
                            ctx,
                            Op::BUFFER,
                            format!("element {i}: {v} does not fit {dtype}"),
                        ));
                    }
                }
                Scalar::Int(v as i128)
                    .bits(dtype)
                    .map_err(|r| fresh_err(ctx, Op::BUFFER, format!("element {i}: {r}")))
            })
            .collect::<Result<Vec<u64>>>()?;
        Self::from_data(ctx, shape, dtype, device, &bits)
    }

    /// [`Tensor::from_data`] from f64: a float dtype rounds once (ties to even); an int or
    /// bool dtype needs integral values it can hold.
    pub fn from_f64s(
        ctx: &Ctx,
        shape: &[usize],
        dtype: DType,
        device: Device,
        data: &[f64],
    ) -> Result<Tensor> {
        if dtype.is_float() {
            let bits: Vec<u64> = data
                .iter()
                .map(|&f| crate::scalar::round::from_f64(dtype, f))
                .collect();
            return Self::from_data(ctx, shape, dtype, device, &bits);
        }
        let ints = data
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                if f.fract() != 0.0 || !f.is_finite() || f.abs() > 9.2e18 {
                    Err(fresh_err(
                        ctx,
                        Op::BUFFER,
                        format!("element {i}: {f} is not an integer a {dtype} can hold"),
                    ))
                } else {
                    Ok(f as i64)
                }
            })
            .collect::<Result<Vec<i64>>>()?;
        Self::from_i64s(ctx, shape, dtype, device, &ints)
    }

    /// `[0, 1, …, n-1]` in `dtype`. tinygrad builds arange from a cumsum of ones; here it
    /// is a buffer with known contents (the same value, no arithmetic to trust).
    pub fn arange(ctx: &Ctx, n: usize, dtype: DType, device: Device) -> Result<Tensor> {
        let data: Vec<i64> = (0..n as i64).collect();
        Self::from_i64s(ctx, &[n], dtype, device, &data)
    }

    /// A device-less scalar CONST (shape `[]`).
    pub fn scalar(ctx: &Ctx, dtype: DType, value: impl Into<Scalar>) -> Result<Tensor> {
        let bits = value
            .into()
            .bits(dtype)
            .map_err(|r| fresh_err(ctx, Op::CONST, r))?;
        const_node(ctx, dtype, bits)
    }

    /// `value` everywhere: a device-less CONST EXPANDed to `shape` (no storage, as in
    /// tinygrad, where `full` is a reshaped and expanded constant).
    pub fn full(
        ctx: &Ctx,
        shape: &[usize],
        dtype: DType,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let c = Self::scalar(ctx, dtype, value)?;
        if shape.is_empty() {
            return Ok(c);
        }
        c.unary_node(Op::EXPAND, Arg::Shape(shape.to_vec()), None)
    }

    pub fn zeros(ctx: &Ctx, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::full(ctx, shape, dtype, Scalar::Bits(0))
    }

    pub fn ones(ctx: &Ctx, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::full(ctx, shape, dtype, Scalar::Int(1))
    }

    /// `full` with `self`'s logical shape and dtype (device-less).
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        Self::full(&self.ctx, &self.shape(), self.dtype(), value)
    }
}
