"""Reductions as tinygrad's test_ops exercises them: sum/prod/max/min/mean over axes, argmax/argmin,
cumsum/cummax, any/all, var/std. Float data is small integers or dyadic values, so every partial sum is
exact and the result does not depend on the order tinygrad's CPU kernels fold in (see ../README.md)."""
import random
from tinygrad import Tensor, dtypes

R = random.Random(77)


def ints(n, lo=-9, hi=9):
    return [R.randint(lo, hi) for _ in range(n)]


SHAPES = [(7,), (3, 4), (2, 3, 4), (4, 1, 5), (1, 1), (16, 16)]
DT = {"float32": dtypes.float32, "int32": dtypes.int32, "float16": dtypes.float16, "int8": dtypes.int8,
      "uint8": dtypes.uint8, "float64": dtypes.float64, "int64": dtypes.int64}


def t(shape, dt, lo=-9, hi=9):
    n = 1
    for d in shape:
        n *= d
    lo = 0 if dt.startswith("uint") else lo
    return Tensor(ints(n, lo, hi), dtype=DT[dt]).reshape(shape)


def cases():
    for shape in SHAPES:
        sname = "x".join(map(str, shape))
        axes = [None] + list(range(len(shape)))
        for dt in ("float32", "int32", "float16", "int8"):
            for ax in axes:
                an = "all" if ax is None else f"ax{ax}"
                for op in ("sum", "max", "min"):
                    if dt == "int8" and op == "sum" and ax is None and len(shape) > 2:
                        continue
                    yield (f"{op}_{dt}_{sname}_{an}", f"Tensor.{op}(axis={ax}) of a {dt} {list(shape)} of small integers",
                           ["reduce", op, dt],
                           lambda shape=shape, dt=dt, ax=ax, op=op, d=t(shape, dt): {"y": getattr(d, op)(axis=ax)})
        for ax in axes[1:]:
            yield (f"argmax_{sname}_ax{ax}", f"Tensor.argmax(axis={ax}) of a float32 {list(shape)} with ties (first index wins)",
                   ["reduce", "argmax"], lambda ax=ax, d=t(shape, "float32", -2, 2): {"y": d.argmax(axis=ax)})
            yield (f"argmin_{sname}_ax{ax}", f"Tensor.argmin(axis={ax}) of an int32 {list(shape)}",
                   ["reduce", "argmin"], lambda ax=ax, d=t(shape, "int32", -3, 3): {"y": d.argmin(axis=ax)})
            yield (f"cumsum_{sname}_ax{ax}", f"Tensor.cumsum(axis={ax}) of a float32 {list(shape)}",
                   ["reduce", "cumsum"], lambda ax=ax, d=t(shape, "float32"): {"y": d.cumsum(axis=ax)})
            yield (f"cumsum_int32_{sname}_ax{ax}", f"Tensor.cumsum(axis={ax}) of an int32 {list(shape)}",
                   ["reduce", "cumsum"], lambda ax=ax, d=t(shape, "int32"): {"y": d.cumsum(axis=ax)})
        yield (f"argmax_{sname}_flat", f"Tensor.argmax() of a float32 {list(shape)}", ["reduce", "argmax"],
               lambda d=t(shape, "float32", -50, 50): {"y": d.argmax()})
        yield (f"prod_{sname}", f"Tensor.prod over the last axis of an int32 {list(shape)} of -2..2", ["reduce", "prod"],
               lambda shape=shape, d=t(shape, "int32", -2, 2): {"y": d.prod(axis=-1)})
        yield (f"mean_{sname}", f"Tensor.mean over axis 0 of a float32 {list(shape)} of multiples of {shape[0]}", ["reduce", "mean"],
               lambda shape=shape, d=t(shape, "float32"): {"y": (d * shape[0]).mean(axis=0)})
        yield (f"anyall_{sname}", f"Tensor.any / Tensor.all over the last axis of a bool {list(shape)}", ["reduce", "bool"],
               lambda d=t(shape, "int32", 0, 1): {"any": (d != 0).any(axis=-1), "all": (d != 0).all(axis=-1)})
    yield ("sum_uint8_wrap", "uint8 sum keeps uint8? tinygrad accumulates in its sum_acc_dtype (uint32) and the result is uint32",
           ["reduce", "sum", "uint8"], lambda: {"y": Tensor([200, 100, 255, 1], dtype=dtypes.uint8).sum()})
    yield ("sum_float16_acc", "float16 sum: tinygrad upcasts to float32 for the accumulation (sum_acc_dtype) and casts back",
           ["reduce", "sum", "float16"], lambda: {"y": Tensor([2048.0, 1.0, 1.0, 1.0, 1.0], dtype=dtypes.float16).sum()})
    yield ("sum_negzero", "a sum of three -0.0s: tinygrad's CPU kernel gives -0.0 (its unrolled sum starts from the first element); "
           "the oracle's REDUCE starts its accumulator at the identity +0.0 (docs/semantics.md, Reductions) and gives +0.0, the hand-derived alternative",
           ["reduce", "sum", "signed-zero", "tg:either=y=0.0"],
           lambda: {"y": Tensor([-0.0, -0.0, -0.0]).sum()})
    yield ("max_negzero", "max over +0.0/-0.0", ["reduce", "max", "signed-zero"],
           lambda: {"y": Tensor([-0.0, 0.0, -0.0]).max(), "z": Tensor([0.0, -0.0]).max()})
    yield ("max_inf", "max with -inf and inf", ["reduce", "max"], lambda: {"y": Tensor([[float("-inf"), 1.0], [2.0, float("inf")]]).max(axis=1)})
    yield ("cummax_float32", "Tensor.cummax of a float32 [8]", ["reduce", "cummax"], lambda d=t((8,), "float32"): dict(zip(("values", "indices"), d.cummax(0))))
    yield ("var_std", "var and std of exact data (var = 2.5, std = sqrt(2.5))", ["reduce", "var"],
           lambda: {"var": Tensor([1.0, 2.0, 3.0, 4.0, 5.0]).var(), "std": Tensor([1.0, 2.0, 3.0, 4.0, 5.0]).std()})
    yield ("sum_keepdim", "sum(axis=1, keepdim=True) of a [3,4]", ["reduce", "sum"], lambda d=t((3, 4), "float32"): {"y": d.sum(axis=1, keepdim=True)})
    yield ("sum_int64", "int64 sum near 2^62", ["reduce", "sum", "int64"], lambda: {"y": Tensor([2**62, 2**62, -5, 7], dtype=dtypes.int64).sum()})
