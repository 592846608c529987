"""Reduction kernels: sum/max/min/mean/prod over axes, argmax, cumsum, softmax."""
from tinygrad import Tensor, dtypes

X = [[0.5, -1.5, 2.25, 3.0, -0.75, 1.0], [4.0, 0.25, -2.0, 1.5, 6.5, -3.0],
     [-1.0, 2.0, 0.0, -4.5, 0.5, 7.25], [3.5, -0.5, 1.25, 2.0, -6.0, 0.75]]
N = [[3, -1, 4, 1, -5, 9], [2, 6, -5, 3, 5, -8], [9, 7, -9, 3, 2, 3], [-8, 4, 6, 2, 6, 4]]


def cases():
    x = lambda: Tensor(X, dtype=dtypes.float32)
    n = lambda: Tensor(N, dtype=dtypes.int32)
    for ax in (None, 0, 1):
        s = "all" if ax is None else f"axis{ax}"
        yield (f"sum_{s}", f"float32 sum over {s} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().sum(ax)})
        yield (f"max_{s}", f"float32 max over {s} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().max(ax)})
        yield (f"min_{s}", f"float32 min over {s} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().min(ax)})
        yield (f"mean_{s}", f"float32 mean over {s} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().mean(ax)})
        yield (f"isum_{s}", f"int32 sum over {s} of 4x6", ["reduce", "int32"], lambda ax=ax: {"out": n().sum(ax)})
        yield (f"imax_{s}", f"int32 max over {s} of 4x6", ["reduce", "int32"], lambda ax=ax: {"out": n().max(ax)})
        yield (f"argmax_{s}", f"float32 argmax over {s} of 4x6", ["reduce", "argmax"], lambda ax=ax: {"out": x().argmax(ax)})
        yield (f"argmin_{s}", f"int32 argmin over {s} of 4x6", ["reduce", "argmax"], lambda ax=ax: {"out": n().argmin(ax)})
    for ax in (0, 1):
        yield (f"cumsum_axis{ax}", f"float32 cumsum along axis {ax} of 4x6", ["reduce", "cumsum"], lambda ax=ax: {"out": x().cumsum(ax)})
        yield (f"icumsum_axis{ax}", f"int32 cumsum along axis {ax} of 4x6", ["reduce", "cumsum"], lambda ax=ax: {"out": n().cumsum(ax)})
        yield (f"cummax_axis{ax}", f"float32 cummax along axis {ax} of 4x6", ["reduce", "cumsum"], lambda ax=ax: {"out": x().cummax(ax)[0]})
        yield (f"softmax_axis{ax}", f"float32 softmax along axis {ax} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().softmax(ax)})
        yield (f"prod_axis{ax}", f"int32 prod along axis {ax} of 4x6", ["reduce", "int32"], lambda ax=ax: {"out": n().prod(ax)})
        yield (f"var_axis{ax}", f"float32 var along axis {ax} of 4x6", ["reduce", "float32"], lambda ax=ax: {"out": x().var(ax)})
    yield ("sum_and_max", "two outputs: sum and max over axis 1", ["reduce", "multi_output"],
           lambda: {"s": x().sum(1), "m": x().max(1)})
    yield ("logsumexp", "float32 logsumexp over axis 1", ["reduce", "float32"], lambda: {"out": x().logsumexp(1)})
