//! The tensor builder: graphs built with the tinygrad-shaped API, evaluated by the oracle
//! and compared with hand-derived values.

use uopkit_interp::ir::{DType, Device, DeviceSpec, Op};
use uopkit_interp::tensor::{Ctx, Sharding, Tensor};
use uopkit_interp::{verify, Error};

const CPU: Device = Device::CPU;

fn cpu(i: u32) -> Device {
    Device::cpu(i)
}

fn ints(ctx: &Ctx, shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::from_i64s(ctx, shape, DType::Int32, CPU, data).unwrap()
}

/// The single-device value of `t` as integers.
fn val(t: &Tensor) -> Vec<i128> {
    let mut comps = t.ctx().eval_ints(t).unwrap();
    assert_eq!(comps.len(), 1, "expected a single-device value");
    comps.remove(0)
}

/// The per-device values of a multi-device `t`.
fn comps(t: &Tensor) -> Vec<Vec<i128>> {
    t.ctx().eval_ints(t).unwrap()
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.ctx().eval_floats(t).unwrap().remove(0)
}

fn count(ctx: &Ctx, op: Op) -> usize {
    ctx.with_graph(|g| g.ids().filter(|&id| g.node(id).op == op).count())
}

/// The builder's cached storage identity of every node agrees with the verifier's, and the
/// whole graph verifies.
fn check_graph(ctx: &Ctx) {
    let g = ctx.graph();
    verify::verify(&g).unwrap();
    for id in g.ids() {
        let t = ctx.tensor_of(id, None).unwrap();
        assert_eq!(
            t.storage_identity(),
            verify::storage_identity(&g, id),
            "node {id}"
        );
        assert_eq!(
            t.is_storage_view(),
            verify::storage_view(&g, id).is_some(),
            "node {id}"
        );
    }
}

fn reason(e: Error) -> String {
    match e {
        Error::Verify { reason, .. } => reason,
        other => panic!("expected a verify error, got {other}"),
    }
}

#[test]
fn add_then_mul_int32() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[3], &[1, 2, 3]);
    let b = ints(&ctx, &[3], &[10, 20, 30]);
    let c = a.add(&b).unwrap().mul(2).unwrap();
    assert_eq!(c.shape(), vec![3]);
    assert_eq!(c.dtype(), DType::Int32);
    assert_eq!(c.device(), Some(DeviceSpec::Single(CPU)));
    assert_eq!(val(&c), vec![22, 44, 66]);
    // The whole graph verifies, and both inputs are registered.
    verify::verify(&ctx.graph()).unwrap();
    assert_eq!(ctx.inputs().len(), 2);
}

#[test]
fn literal_commits_to_partner_dtype() {
    let ctx = Ctx::new();
    let a = Tensor::from_i64s(&ctx, &[2], DType::UInt8, CPU, &[1, 200]).unwrap();
    // uint8 + 300 holds 44 (tinygrad's weak literals).
    assert_eq!(val(&a.add(300).unwrap()), vec![45, 244]);
    assert!(reason(a.add(1.5).unwrap_err()).contains("no implicit promotion"));
}

#[test]
fn broadcast_column_plus_row() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[2, 1], &[1, 2]);
    let b = ints(&ctx, &[3], &[10, 20, 30]);
    let c = a.add(&b).unwrap();
    assert_eq!(c.shape(), vec![2, 3]);
    assert_eq!(val(&c), vec![11, 21, 31, 12, 22, 32]);
    let d = b.add(&a).unwrap();
    assert_eq!(val(&d), vec![11, 21, 31, 12, 22, 32]);
}

#[test]
fn expand_middle_axis_uses_reshape_expand_permute() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[3, 1], &[1, 2, 3]);
    let e = a.expand(&[2, 3, 4]).unwrap();
    assert_eq!(e.shape(), vec![2, 3, 4]);
    let want: Vec<i128> = (0..2).flat_map(|_| (1..=3).flat_map(|v| [v; 4])).collect();
    assert_eq!(val(&e), want);
    assert_eq!(e.op(), Op::PERMUTE);
    assert!(a.expand(&[3, 2]).is_ok());
    assert!(reason(a.expand(&[2, 4]).unwrap_err()).contains("cannot expand"));
}

#[test]
fn sum_over_axes_of_arange() {
    let ctx = Ctx::new();
    let a = Tensor::arange(&ctx, 6, DType::Int32, CPU)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    assert_eq!(val(&a.sum(&[1]).unwrap()), vec![3, 12]);
    assert_eq!(val(&a.sum(&[0]).unwrap()), vec![3, 5, 7]);
    let k = a.sum_keepdim(&[1]).unwrap();
    assert_eq!(k.shape(), vec![2, 1]);
    assert_eq!(val(&k), vec![3, 12]);
    let all = a.sum_all().unwrap();
    assert_eq!(all.shape(), Vec::<usize>::new());
    assert_eq!(val(&all), vec![15]);
    // Reducing axis 1 permutes it to the front (REDUCE reduces the first n axes).
    assert_eq!(count(&ctx, Op::PERMUTE), 1);
}

#[test]
fn sum_acc_casts_first() {
    let ctx = Ctx::new();
    let a = Tensor::from_i64s(&ctx, &[3], DType::Int8, CPU, &[100, 100, 100]).unwrap();
    assert_eq!(val(&a.sum(&[0]).unwrap()), vec![44]); // wraps in int8: 300 - 256
    let s = a.sum_acc(&[0], DType::Int32).unwrap();
    assert_eq!(s.dtype(), DType::Int32);
    assert_eq!(val(&s), vec![300]);
}

#[test]
fn max_min_prod() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[2, 3], &[3, -1, 4, 1, -5, 9]);
    assert_eq!(val(&a.max(&[1]).unwrap()), vec![4, 9]);
    assert_eq!(val(&a.min(&[1]).unwrap()), vec![-1, -5]);
    assert_eq!(val(&a.min(&[0]).unwrap()), vec![1, -5, 4]);
    assert_eq!(val(&a.prod(&[1]).unwrap()), vec![-12, -45]);
    assert_eq!(val(&a.max(&[0, 1]).unwrap()), vec![9]);
    let m = a.min_keepdim(&[0]).unwrap();
    assert_eq!(m.shape(), vec![1, 3]);
    let f = Tensor::from_f64s(&ctx, &[4], DType::Float32, CPU, &[2.5, -1.5, 8.0, 0.25]).unwrap();
    assert_eq!(floats(&f.max(&[0]).unwrap()), vec![8.0]);
    assert_eq!(floats(&f.min(&[0]).unwrap()), vec![-1.5]);
    assert_eq!(floats(&f.prod(&[0]).unwrap()), vec![-7.5]);
    let u = Tensor::from_i64s(&ctx, &[3], DType::UInt8, CPU, &[7, 255, 3]).unwrap();
    assert_eq!(val(&u.min(&[0]).unwrap()), vec![3]);
    assert_eq!(val(&u.max(&[0]).unwrap()), vec![255]);
}

#[test]
fn elementwise_minimum_maximum_and_compares() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[4], &[1, -7, 5, 0]);
    let b = ints(&ctx, &[4], &[2, -8, 5, -1]);
    assert_eq!(val(&a.maximum(&b).unwrap()), vec![2, -7, 5, 0]);
    assert_eq!(val(&a.minimum(&b).unwrap()), vec![1, -8, 5, -1]);
    assert_eq!(val(&a.lt(&b).unwrap()), vec![1, 0, 0, 0]);
    assert_eq!(val(&a.gt(&b).unwrap()), vec![0, 1, 0, 1]);
    assert_eq!(val(&a.le(&b).unwrap()), vec![1, 0, 1, 0]);
    assert_eq!(val(&a.ge(&b).unwrap()), vec![0, 1, 1, 1]);
    assert_eq!(val(&a.eq(&b).unwrap()), vec![0, 0, 1, 0]);
    assert_eq!(val(&a.ne(&b).unwrap()), vec![1, 1, 0, 1]);
    let c = a.lt(0).unwrap();
    assert_eq!(c.dtype(), DType::Bool);
    assert_eq!(
        val(&c.where_(a.neg().unwrap(), &a).unwrap()),
        vec![1, 7, 5, 0]
    );
    assert_eq!(val(&c.neg().unwrap()), vec![1, 0, 1, 1]);
    assert_eq!(val(&c.where_(1, 0).unwrap()), vec![0, 1, 0, 0]);
    let f = Tensor::from_f64s(&ctx, &[3], DType::Float32, CPU, &[1.5, -2.0, 0.0]).unwrap();
    let g = Tensor::from_f64s(&ctx, &[3], DType::Float32, CPU, &[1.0, -3.0, 4.0]).unwrap();
    assert_eq!(floats(&f.minimum(&g).unwrap()), vec![1.0, -3.0, 0.0]);
    assert_eq!(floats(&f.maximum(&g).unwrap()), vec![1.5, -2.0, 4.0]);
}

#[test]
fn integer_division_family() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[4], &[7, -7, 7, -7]);
    let b = ints(&ctx, &[4], &[2, 2, -2, -2]);
    assert_eq!(val(&a.floordiv(&b).unwrap()), vec![3, -4, -4, 3]);
    assert_eq!(val(&a.idiv(&b).unwrap()), vec![3, -4, -4, 3]);
    assert_eq!(val(&a.floormod(&b).unwrap()), vec![1, 1, -1, -1]);
    assert_eq!(val(&a.cdiv(&b).unwrap()), vec![3, -3, -3, 3]);
    assert_eq!(val(&a.cmod(&b).unwrap()), vec![1, -1, 1, -1]);
    assert_eq!(val(&a.shl(1).unwrap()), vec![14, -14, 14, -14]);
    assert_eq!(val(&a.shr(1).unwrap()), vec![3, -4, 3, -4]);
    assert_eq!(val(&a.and(3).unwrap()), vec![3, 1, 3, 1]);
    assert_eq!(val(&a.or(8).unwrap()), vec![15, -7, 15, -7]);
    assert_eq!(val(&a.xor(-1).unwrap()), vec![-8, 6, -8, 6]);
    assert_eq!(val(&a.not().unwrap()), vec![-8, 6, -8, 6]);
    assert_eq!(val(&a.mulacc(&b, 1).unwrap()), vec![15, -13, -13, 15]);
    assert_eq!(val(&a.sub(&b).unwrap()), vec![5, -9, 9, -5]);
    // Float-only ops on ints cast to float32 first.
    let d = a.div(&b).unwrap();
    assert_eq!(d.dtype(), DType::Float32);
    assert_eq!(floats(&d), vec![3.5, -3.5, -3.5, 3.5]);
}

#[test]
fn div_double_rounds_fdiv_does_not() {
    let ctx = Ctx::new();
    let x = Tensor::from_f64s(&ctx, &[2], DType::Float32, CPU, &[10.0, 7.0]).unwrap();
    let r32 = |v: f64| v as f32 as f64;
    let div = floats(&x.div(3.0).unwrap());
    let fdiv = floats(&x.fdiv(3.0).unwrap());
    assert_eq!(fdiv, vec![r32(10.0 / 3.0), r32(7.0 / 3.0)]);
    let recip = r32(1.0 / 3.0);
    assert_eq!(div, vec![r32(10.0 * recip), r32(7.0 * recip)]);
    assert_ne!(div, fdiv);
    let c = x.cast(DType::Int32).unwrap();
    assert_eq!(val(&c), vec![10, 7]);
    let bits = x.bitcast(DType::UInt32).unwrap();
    assert_eq!(
        val(&bits),
        vec![10f32.to_bits() as i128, 7f32.to_bits() as i128]
    );
    let r = Tensor::from_f64s(&ctx, &[3], DType::Float32, CPU, &[16.0, 2.25, -2.75]).unwrap();
    assert_eq!(
        floats(&r.shrink_axis(0, 0, 2).unwrap().sqrt().unwrap()),
        vec![4.0, 1.5]
    );
    assert_eq!(floats(&r.trunc().unwrap()), vec![16.0, 2.0, -2.0]);
    assert_eq!(
        floats(
            &r.neg()
                .unwrap()
                .reciprocal()
                .unwrap()
                .shrink_axis(0, 0, 1)
                .unwrap()
        ),
        vec![-0.0625]
    );
    assert_eq!(
        floats(
            &Tensor::full(&ctx, &[2], DType::Float32, 8.0)
                .unwrap()
                .log2()
                .unwrap()
        ),
        vec![3.0, 3.0]
    );
    assert_eq!(floats(&x.pow(2.0).unwrap()), vec![100.0, 49.0]);
}

#[test]
fn pad_shrink_flip() {
    let ctx = Ctx::new();
    let a = Tensor::arange(&ctx, 6, DType::Int32, CPU)
        .unwrap()
        .add(1)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let p = a.pad(&[(1, 0), (0, 2)]).unwrap();
    assert_eq!(p.shape(), vec![3, 5]);
    assert_eq!(val(&p), vec![0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0]);
    let s = a.shrink(&[(0, 2), (1, 3)]).unwrap();
    assert_eq!(val(&s), vec![2, 3, 5, 6]);
    assert_eq!(val(&a.shrink_axis(0, 1, 2).unwrap()), vec![4, 5, 6]);
    assert_eq!(val(&a.flip(&[1]).unwrap()), vec![3, 2, 1, 6, 5, 4]);
    assert_eq!(val(&a.flip(&[0, 1]).unwrap()), vec![6, 5, 4, 3, 2, 1]);
    assert_eq!(val(&a.permute(&[1, 0]).unwrap()), vec![1, 4, 2, 5, 3, 6]);
    assert_eq!(
        val(&a
            .transpose(0, 1)
            .unwrap()
            .unsqueeze(0)
            .unwrap()
            .flatten()
            .unwrap()),
        vec![1, 4, 2, 5, 3, 6]
    );
    // No-op movement adds no node.
    let n = ctx.len();
    a.pad(&[(0, 0), (0, 0)]).unwrap();
    a.shrink(&[(0, 2), (0, 3)]).unwrap();
    a.flip(&[]).unwrap();
    a.permute(&[0, 1]).unwrap();
    a.reshape(&[2, 3]).unwrap();
    assert_eq!(ctx.len(), n);
    assert!(reason(a.shrink(&[(0, 3), (0, 3)]).unwrap_err()).contains("outside"));
}

#[test]
fn clone_persists_when_the_source_is_assigned_later() {
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[3], &[1, 2, 3]);
    let c = a.clone_storage(None).unwrap();
    assert_ne!(c.storage_identity(), a.storage_identity());
    a.assign(ints(&ctx, &[3], &[7, 8, 9])).unwrap();
    // Read after the assign, in the same evaluation: the clone keeps the old values.
    let later = c.latest().unwrap().add(0).unwrap();
    let vs = ctx.evaluate(&[&a, &c, &later]).unwrap();
    let ints_of = |v: &uopkit_interp::eval::Value| uopkit_interp::tensor::value_ints(v).remove(0);
    assert_eq!(ints_of(&vs[0]), vec![7, 8, 9]);
    assert_eq!(ints_of(&vs[1]), vec![1, 2, 3]);
    assert_eq!(ints_of(&vs[2]), vec![1, 2, 3]);
    // Its shape is AFTER(buf, STORE(buf, value)).
    assert_eq!(c.op(), Op::AFTER);
    // A clone onto another device copies the value there first.
    let d = a.clone_storage(Some(cpu(1))).unwrap();
    assert_eq!(d.device(), Some(DeviceSpec::Single(cpu(1))));
    assert_eq!(val(&d), vec![7, 8, 9]);
    assert_eq!(count(&ctx, Op::COPY), 1);
    check_graph(&ctx);
}

#[test]
fn war_handle_taken_before_assign_reads_old_value() {
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[3], &[1, 2, 3]);
    let old = a.clone();
    let r = old.add(1).unwrap();
    a.assign(5).unwrap();
    let vs: Vec<Vec<i128>> = ctx
        .evaluate(&[&old, &r, &a])
        .unwrap()
        .iter()
        .map(|v| uopkit_interp::tensor::value_ints(v).remove(0))
        .collect();
    assert_eq!(vs, vec![vec![1, 2, 3], vec![2, 3, 4], vec![5, 5, 5]]);
    // The stale handle sees the write once asked for the latest contents.
    assert_eq!(val(&old.latest().unwrap()), vec![5, 5, 5]);
    check_graph(&ctx);
}

#[test]
fn assigns_through_stale_handles_follow_program_order() {
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[4], &[1, 2, 3, 4]);
    let mut b = a.clone();
    a.assign_slice(&[(0, 2)], 9).unwrap();
    b.assign_slice(&[(2, 4)], 7).unwrap();
    assert_eq!(val(&b), vec![9, 9, 7, 7]);
    assert_eq!(val(&a.latest().unwrap()), vec![9, 9, 7, 7]);
    assert_eq!(val(&a), vec![9, 9, 3, 4]);
    check_graph(&ctx);
}

#[test]
fn assign_to_a_view_of_a_zero_buffer() {
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[8], &[0; 8]);
    let buf = a.storage_identity().unwrap();
    let v = ints(&ctx, &[4], &[0, 1, 2, 3]);
    a.assign_slice(&[(2, 6)], &v).unwrap();
    assert_eq!(val(&a), vec![0, 0, 0, 1, 2, 3, 0, 0]);
    assert_eq!(a.storage_identity(), Some(buf));
    // STORE(SHRINK(buffer), value), then AFTER(buffer, store).
    assert_eq!(a.op(), Op::AFTER);
    ctx.with_graph(|g| {
        let store = g.node(a.id()).src[1];
        assert_eq!(g.node(store).op, Op::STORE);
        assert_eq!(g.node(g.node(store).src[0]).op, Op::SHRINK);
    });
    // The same on a 2-d view through assign_view.
    let mut m = Tensor::empty(&ctx, &[2, 3], DType::Int32, CPU).unwrap();
    m.assign(0).unwrap();
    m.assign_view(
        |t| t.shrink_axis(1, 1, 2)?.flip(&[0]),
        ints(&ctx, &[2, 1], &[5, 6]),
    )
    .unwrap();
    assert_eq!(val(&m), vec![0, 6, 0, 0, 5, 0]);
    // A view that is not of the target's storage is refused.
    let other = ints(&ctx, &[2, 3], &[0; 6]);
    assert!(reason(m.assign_view(|_| Ok(other.clone()), 1).unwrap_err())
        .contains("not a view of the target's storage"));
    check_graph(&ctx);
}

#[test]
fn assign_to_a_computed_value_initializes_storage() {
    let ctx = Ctx::new();
    // zeros() is a CONST (no storage): a slice assign makes fresh storage holding it.
    let mut z = Tensor::zeros(&ctx, &[8], DType::Int32).unwrap();
    assert!(!z.is_storage_view());
    z.assign_slice(&[(2, 6)], ints(&ctx, &[4], &[0, 1, 2, 3]))
        .unwrap();
    assert!(z.is_storage_view());
    assert_eq!(z.device(), Some(DeviceSpec::Single(CPU)));
    assert_eq!(val(&z), vec![0, 0, 0, 1, 2, 3, 0, 0]);
    let a = ints(&ctx, &[3], &[1, 2, 3]);
    let mut x = a.add(1).unwrap();
    x.assign_slice(&[(0, 1)], 100).unwrap();
    assert_eq!(val(&x), vec![100, 3, 4]);
    let mut y = a.mul(2).unwrap();
    y.assign(a.neg().unwrap()).unwrap();
    assert_eq!(val(&y), vec![-1, -2, -3]);
    assert_eq!(val(&a), vec![1, 2, 3]);
    check_graph(&ctx);
}

#[test]
fn cross_device_assign_keeps_the_target_buffer() {
    let ctx = Ctx::new();
    let mut dst = Tensor::empty(&ctx, &[3], DType::Int32, cpu(1)).unwrap();
    let buf = dst.storage_identity().unwrap();
    let src = ints(&ctx, &[3], &[4, 5, 6]);
    dst.assign(&src).unwrap();
    assert_eq!(dst.device(), Some(DeviceSpec::Single(cpu(1))));
    assert_eq!(dst.storage_identity(), Some(buf));
    assert_eq!(
        ctx.with_graph(|g| verify::storage_identity(g, dst.id())),
        Some(buf)
    );
    assert_eq!(val(&dst), vec![4, 5, 6]);
    // A STORE into another device's buffer is the copy: no COPY, no CONTIGUOUS.
    assert_eq!(count(&ctx, Op::COPY), 0);
    assert_eq!(count(&ctx, Op::CONTIGUOUS), 0);
    // A computed source is materialized on its own device first.
    dst.assign(src.add(1).unwrap()).unwrap();
    assert_eq!(val(&dst), vec![5, 6, 7]);
    assert_eq!(count(&ctx, Op::CONTIGUOUS), 1);
    assert_eq!(dst.storage_identity(), Some(buf));
    check_graph(&ctx);
}

#[test]
fn detach_assign_writes_the_base() {
    let ctx = Ctx::new();
    let a = ints(&ctx, &[3], &[1, 2, 3]);
    let mut d = a.detach().unwrap();
    d.assign(9).unwrap();
    assert_eq!(d.storage_identity(), a.storage_identity());
    assert_eq!(val(&d), vec![9, 9, 9]);
    assert_eq!(val(&a.latest().unwrap()), vec![9, 9, 9]);
    assert_eq!(val(&a), vec![1, 2, 3]);
    // contiguous() owns no storage.
    let c = a.contiguous().unwrap();
    assert!(!c.is_storage_view());
    assert_eq!(val(&c), vec![1, 2, 3]);
    check_graph(&ctx);
}

#[test]
fn uninitialized_read_is_reported() {
    let ctx = Ctx::new();
    let e = Tensor::empty(&ctx, &[2], DType::Float32, CPU).unwrap();
    assert!(matches!(ctx.evaluate(&[&e]).unwrap_err(), Error::Ub { .. }));
}

fn devs(n: u32) -> Vec<Device> {
    (0..n).map(cpu).collect()
}

#[test]
fn shard_then_sum_over_the_sharded_axis_allreduces() {
    let ctx = Ctx::new();
    let x = Tensor::arange(&ctx, 8, DType::Int32, CPU)
        .unwrap()
        .reshape(&[4, 2])
        .unwrap();
    let s = x.shard(&devs(4), Some(0)).unwrap();
    assert_eq!(s.shape(), vec![4, 2]);
    assert_eq!(s.local_shape(), vec![1, 2]);
    assert_eq!(
        s.sharding(),
        Some(Sharding {
            devices: devs(4),
            axis: Some(0)
        })
    );
    let t = s.sum(&[0]).unwrap();
    assert_eq!(
        t.sharding(),
        Some(Sharding {
            devices: devs(4),
            axis: None
        })
    );
    assert_eq!(comps(&t), vec![vec![12, 16]; 4]);
    assert_eq!(count(&ctx, Op::ALLREDUCE), 1);
    assert_eq!(count(&ctx, Op::MSTACK), 1);
    // The sharded value itself: one row per device.
    assert_eq!(
        comps(&s),
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
    );
    // max, min (as a MAX allreduce of the negation) and prod.
    assert_eq!(comps(&s.max(&[0]).unwrap()), vec![vec![6, 7]; 4]);
    assert_eq!(comps(&s.min(&[0, 1]).unwrap()), vec![vec![0]; 4]);
    assert_eq!(
        comps(&s.add(1).unwrap().prod(&[0]).unwrap()),
        vec![vec![105, 384]; 4]
    );
    ctx.with_graph(|g| {
        for id in g.ids() {
            if let uopkit_interp::ir::Arg::AllReduce { op, .. } = &g.node(id).arg {
                assert!(op.is_reduce_op());
            }
        }
    });
    // Gathering the replicated result.
    assert_eq!(val(&t.to(CPU).unwrap()), vec![12, 16]);
    check_graph(&ctx);
}

#[test]
fn reduce_over_another_axis_stays_sharded() {
    let ctx = Ctx::new();
    let x = Tensor::arange(&ctx, 8, DType::Int32, CPU)
        .unwrap()
        .reshape(&[4, 2])
        .unwrap();
    let s = x.shard(&devs(2), Some(0)).unwrap();
    let r = s.sum(&[1]).unwrap();
    assert_eq!(r.sharding().unwrap().axis, Some(0));
    assert_eq!(r.shape(), vec![4]);
    assert_eq!(val(&r.to(cpu(3)).unwrap()), vec![1, 5, 9, 13]);
    assert_eq!(count(&ctx, Op::ALLREDUCE), 0);
    // Sharded on axis 1, reduce axis 0: the sharded axis is renumbered to 0.
    let s1 = x.shard(&devs(2), Some(1)).unwrap();
    let r1 = s1.sum_keepdim(&[0]).unwrap();
    assert_eq!(r1.shape(), vec![1, 2]);
    assert_eq!(r1.sharding().unwrap().axis, Some(1));
    assert_eq!(val(&r1.to(CPU).unwrap()), vec![12, 16]);
}

#[test]
fn shard_gather_round_trip() {
    let ctx = Ctx::new();
    let x = Tensor::arange(&ctx, 12, DType::Int32, CPU)
        .unwrap()
        .reshape(&[2, 6])
        .unwrap();
    let want: Vec<i128> = (0..12).collect();
    for axis in [Some(0), Some(1), None] {
        let n = if axis == Some(0) { 2 } else { 3 };
        let s = x.shard(&devs(n), axis).unwrap();
        let back = s.to(CPU).unwrap();
        assert_eq!(back.device(), Some(DeviceSpec::Single(CPU)));
        assert_eq!(back.shape(), vec![2, 6]);
        assert_eq!(val(&back), want, "axis {axis:?}");
    }
    assert_eq!(count(&ctx, Op::UNSHARD), 2);
    assert_eq!(count(&ctx, Op::MSELECT), 1);
}

#[test]
fn elementwise_and_movement_on_sharded_tensors() {
    let ctx = Ctx::new();
    let x = Tensor::arange(&ctx, 8, DType::Int32, CPU)
        .unwrap()
        .reshape(&[4, 2])
        .unwrap();
    let s = x.shard(&devs(2), Some(0)).unwrap();
    // sharded * literal + replicated row (broadcast, then cut into the same shards).
    let row = ints(&ctx, &[2], &[100, 200]).shard(&devs(2), None).unwrap();
    let y = s.mul(2).unwrap().add(&row).unwrap();
    assert_eq!(y.sharding().unwrap().axis, Some(0));
    assert_eq!(
        val(&y.to(CPU).unwrap()),
        vec![100, 202, 104, 206, 108, 210, 112, 214]
    );
    // A device-less constant operand broadcasts too.
    let z = s
        .add(Tensor::full(&ctx, &[4, 2], DType::Int32, 1).unwrap())
        .unwrap();
    assert_eq!(val(&z.to(CPU).unwrap()), (1..=8).collect::<Vec<i128>>());
    // permute remaps the sharded axis; reshape keeping it intact is fine.
    let p = s.permute(&[1, 0]).unwrap();
    assert_eq!(p.sharding().unwrap().axis, Some(1));
    assert_eq!(val(&p.to(CPU).unwrap()), vec![0, 2, 4, 6, 1, 3, 5, 7]);
    let r = s.reshape(&[4, 1, 2]).unwrap();
    assert_eq!(r.sharding().unwrap().axis, Some(0));
    assert_eq!(r.local_shape(), vec![2, 1, 2]);
    let e = s
        .reshape(&[4, 2, 1])
        .unwrap()
        .expand(&[3, 4, 2, 5])
        .unwrap();
    assert_eq!(e.sharding().unwrap().axis, Some(1));
    assert_eq!(e.to(CPU).unwrap().shape(), vec![3, 4, 2, 5]);
    let sh = s
        .shrink_axis(1, 1, 2)
        .unwrap()
        .flip(&[1])
        .unwrap()
        .pad(&[(0, 0), (1, 0)])
        .unwrap();
    assert_eq!(val(&sh.to(CPU).unwrap()), vec![0, 1, 0, 3, 0, 5, 0, 7]);
    // Cross-shard movement is refused.
    assert!(reason(s.reshape(&[8]).unwrap_err()).contains("sharded axis"));
    assert!(reason(s.shrink_axis(0, 0, 2).unwrap_err()).contains("sharded axis"));
    assert!(reason(s.flip(&[0]).unwrap_err()).contains("sharded axis"));
    assert!(reason(s.pad(&[(1, 0), (0, 0)]).unwrap_err()).contains("sharded axis"));
    // A single-device operand with a sharded one.
    assert!(s.add(&x).is_err());
    check_graph(&ctx);
}

#[test]
fn assign_into_sharded_storage() {
    let ctx = Ctx::new();
    let mut b = Tensor::empty_multi(&ctx, &[4, 2], DType::Int32, &devs(2), Some(0)).unwrap();
    assert_eq!(b.local_shape(), vec![2, 2]);
    let x = Tensor::arange(&ctx, 8, DType::Int32, CPU)
        .unwrap()
        .reshape(&[4, 2])
        .unwrap();
    b.assign(x.shard(&devs(2), Some(0)).unwrap()).unwrap();
    assert_eq!(val(&b.to(CPU).unwrap()), (0..8).collect::<Vec<i128>>());
    b.assign_slice(&[(0, 4), (1, 2)], 9).unwrap();
    assert_eq!(val(&b.to(CPU).unwrap()), vec![0, 9, 2, 9, 4, 9, 6, 9]);
    let c = b.clone_storage(None).unwrap();
    assert_eq!(c.sharding(), b.sharding());
    assert_ne!(c.storage_identity(), b.storage_identity());
    check_graph(&ctx);
}

/// Runs a failing build step, checks that it added no node, and returns the error text.
fn fails<T: std::fmt::Debug>(ctx: &Ctx, f: impl FnOnce() -> Result<T, Error>) -> String {
    let n = ctx.len();
    let e = f().unwrap_err();
    assert_eq!(ctx.len(), n, "a failed build step added nodes");
    match e {
        Error::Verify { reason, .. } => reason,
        other => panic!("expected a verify error, got {other}"),
    }
}

#[test]
fn errors_name_the_reason_and_leave_the_graph_unchanged() {
    let ctx = Ctx::new();
    let x = Tensor::arange(&ctx, 7, DType::Int32, CPU).unwrap();
    let e = fails(&ctx, || x.shard(&devs(3), Some(0)));
    assert!(
        e.contains("cannot shard axis 0 of size 7 evenly over 3 devices"),
        "{e}"
    );
    assert!(fails(&ctx, || x.shard(&devs(3), Some(1))).contains("cannot shard axis 1"));
    let a = ints(&ctx, &[2, 3], &[0; 6]);
    let b = ints(&ctx, &[4], &[0; 4]);
    let e = fails(&ctx, || a.add(&b));
    assert!(e.contains("shapes [2, 3] and [4] do not broadcast"), "{e}");
    // The Display form names the node and the op.
    assert!(a.add(&b).unwrap_err().to_string().contains("(ADD)"));
    assert!(fails(&ctx, || a.permute(&[0, 0])).contains("not a permutation"));
    assert!(fails(&ctx, || a.permute(&[1, 0, 2])).contains("not a permutation"));
    assert!(fails(&ctx, || a.reshape(&[4, 2])).contains("changes the number of elements"));
    assert!(fails(&ctx, || a.sum(&[2])).contains("out of range"));
    assert!(fails(&ctx, || a.sum(&[1, 1])).contains("twice"));
    assert!(fails(&ctx, || a.pad(&[(1, 1)])).contains("pairs for a 2-d tensor"));
    let f = a.cast(DType::Float32).unwrap();
    assert!(fails(&ctx, || a.add(&f)).contains("dtype mismatch"));
    // Rejected by the verifier itself: shifts on floats, a non-bool WHERE condition, widths.
    assert!(fails(&ctx, || f.shl(&f)).contains("needs an integer dtype"));
    assert!(fails(&ctx, || a.where_(&a, &a)).contains("must be bool"));
    assert!(fails(&ctx, || f.bitcast(DType::Int8)).contains("widths must match"));
    // Device mismatch.
    let other = Tensor::from_i64s(&ctx, &[2, 3], DType::Int32, cpu(1), &[0; 6]).unwrap();
    assert!(fails(&ctx, || a.add(&other)).contains("different devices"));
    // Bad data.
    assert!(fails(&ctx, || Tensor::from_i64s(
        &ctx,
        &[2],
        DType::Int8,
        CPU,
        &[1, 300]
    ))
    .contains("does not fit int8"));
    assert!(fails(&ctx, || Tensor::from_i64s(
        &ctx,
        &[3],
        DType::Int8,
        CPU,
        &[1, 3]
    ))
    .contains("2 elements of data"));
    // Storage rules.
    let mut m = Tensor::empty_multi(&ctx, &[3], DType::Int32, &devs(3), Some(0)).unwrap();
    let single = ints(&ctx, &[3], &[1, 2, 3]);
    assert!(fails(&ctx, || m.assign(&single)).contains("shard it first"));
    let mut s = ints(&ctx, &[3], &[1, 2, 3]);
    let g = f.shrink_axis(0, 0, 1).unwrap().reshape(&[3]).unwrap();
    assert!(fails(&ctx, || s.assign(&g)).contains("cast first"));
    let h = ints(&ctx, &[2], &[1, 2]);
    assert!(fails(&ctx, || s.assign(&h)).contains("assign of shape [2] into a target of shape [3]"));
    verify::verify(&ctx.graph()).unwrap();
}

#[test]
fn a_long_chain_builds_and_evaluates() {
    let ctx = Ctx::new();
    let mut x = ints(&ctx, &[4], &[0, 1, 2, 3]);
    let start = std::time::Instant::now();
    for _ in 0..5000 {
        x = x.add(1).unwrap();
    }
    assert!(
        start.elapsed().as_secs() < 20,
        "building took {:?}",
        start.elapsed()
    );
    assert_eq!(val(&x), vec![5000, 5001, 5002, 5003]);
}

#[test]
fn many_assigns_build_and_evaluate() {
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[4], &[0; 4]);
    let start = std::time::Instant::now();
    for i in 0..1000 {
        let v = a.shrink_axis(0, i % 4, i % 4 + 1).unwrap().add(1).unwrap();
        a.assign_slice(&[(i % 4, i % 4 + 1)], &v).unwrap();
    }
    eprintln!("1000 assigns: {:?}", start.elapsed());
    assert!(
        start.elapsed().as_secs() < 20,
        "building took {:?}",
        start.elapsed()
    );
    assert_eq!(val(&a), vec![250; 4]);
    // The builder's storage bookkeeping on a shorter chain (the verifier's own
    // storage_identity is quadratic in the chain length).
    let ctx = Ctx::new();
    let mut a = ints(&ctx, &[4], &[0; 4]);
    let mut stale = a.clone();
    for i in 0..60 {
        let v = stale
            .latest()
            .unwrap()
            .shrink_axis(0, i % 4, i % 4 + 1)
            .unwrap()
            .mul(2)
            .unwrap();
        if i % 3 == 0 {
            stale = a.detach().unwrap();
        }
        a.assign_slice(&[(i % 4, i % 4 + 1)], &v).unwrap();
    }
    assert_eq!(val(&a), vec![0; 4]);
    check_graph(&ctx);
}
