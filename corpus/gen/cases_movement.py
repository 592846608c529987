"""corpus/movement: RESHAPE, EXPAND (prepends), PERMUTE, PAD (offset, new_size; padding reads 0),
SHRINK (offset, size), FLIP and combinations, on int32 arange data.

Expected values: tensor.T, which applies each op index by index (out[idx] = in[f(idx)]).
"""

from fractions import Fraction

import numerics as N
from builder import G
from tensor import T


def arange_case(C, name, n, desc, build, dtype="int32", start=0, step=1):
    """build(g, buf_node, T_value) -> list of (name, node, T) outputs."""
    g = G(desc, ["movement"])
    b = g.buffer(dtype, n, init={"arange": {"start": start, "step": step}})
    if N.is_float(dtype):
        vals = [N.raw(dtype, Fraction(start) + i * Fraction(step)) for i in range(n)]
    else:
        vals = [N.wrap(dtype, start + i * step) for i in range(n)]
    t = T([n], vals, dtype)
    for oname, node, val in build(g, b, t):
        g.output(oname, node, val.shape, val.data)
    C.add("movement", name, g)


def gen(C):
    gen_padded_traps(C)
    arange_case(C, "reshape_2d_3d", 24, "RESHAPE [24] -> [4,6] -> [2,3,4]: same elements in row-major order (arange input 0..23)",
                lambda g, b, t: [("r46", g.reshape(b, [4, 6]), t.reshape([4, 6])),
                                 ("r234", g.reshape(g.reshape(b, [4, 6]), [2, 3, 4]), t.reshape([2, 3, 4]))])
    arange_case(C, "expand_prepends", 6, "EXPAND [2,3] by [4] gives [4,2,3]: the new axis is prepended and every slice is the source; by [2,1] gives [2,1,2,3]",
                lambda g, b, t: [("e4", g.expand(g.reshape(b, [2, 3]), [4]), t.reshape([2, 3]).expand([4])),
                                 ("e21", g.expand(g.reshape(b, [2, 3]), [2, 1]), t.reshape([2, 3]).expand([2, 1]))])
    arange_case(C, "permute_2d", 6, "PERMUTE [1,0] of [2,3] is the transpose: out dim i = in dim perm[i]",
                lambda g, b, t: [("t", g.permute(g.reshape(b, [2, 3]), [1, 0]), t.reshape([2, 3]).permute([1, 0]))])
    arange_case(C, "permute_3d", 24, "PERMUTE of a [2,3,4] tensor by [2,0,1] and by [1,2,0] (out dim i = in dim perm[i]); index arithmetic",
                lambda g, b, t: [("p201", g.permute(g.reshape(b, [2, 3, 4]), [2, 0, 1]), t.reshape([2, 3, 4]).permute([2, 0, 1])),
                                 ("p120", g.permute(g.reshape(b, [2, 3, 4]), [1, 2, 0]), t.reshape([2, 3, 4]).permute([1, 2, 0]))])
    arange_case(C, "pad_1d", 4, "PAD [4] with offset 2 into size 7: [0,0,x0..x3,0] (padding reads 0; arg is (offset, new_size), not (before, after))",
                lambda g, b, t: [("p", g.pad(b, [2], [7]), t.pad([2], [7], 0))], start=1)
    arange_case(C, "pad_2d", 6, "PAD [2,3] with offsets [1,0] into [4,5]: rows 1..2, columns 0..2 hold the data, the rest reads 0",
                lambda g, b, t: [("p", g.pad(g.reshape(b, [2, 3]), [1, 0], [4, 5]), t.reshape([2, 3]).pad([1, 0], [4, 5], 0))], start=1)
    arange_case(C, "shrink_1d", 10, "SHRINK [10] to the window (offset 3, size 4): x3..x6",
                lambda g, b, t: [("s", g.shrink(b, [3], [4]), t.shrink([3], [4]))])
    arange_case(C, "shrink_2d", 20, "SHRINK [4,5] with offsets [1,2] and sizes [2,3]: rows 1..2, columns 2..4",
                lambda g, b, t: [("s", g.shrink(g.reshape(b, [4, 5]), [1, 2], [2, 3]), t.reshape([4, 5]).shrink([1, 2], [2, 3]))])
    arange_case(C, "flip_axes", 12, "FLIP of [3,4] on axis 0, on axis 1, on both",
                lambda g, b, t: [("f0", g.flip(g.reshape(b, [3, 4]), [True, False]), t.reshape([3, 4]).flip([True, False])),
                                 ("f1", g.flip(g.reshape(b, [3, 4]), [False, True]), t.reshape([3, 4]).flip([False, True])),
                                 ("f01", g.flip(g.reshape(b, [3, 4]), [True, True]), t.reshape([3, 4]).flip([True, True]))])
    arange_case(C, "pad_then_shrink", 6, "PAD [6] by (2, 10) then SHRINK (1, 6): [0, x0..x4]; the window straddles the padding",
                lambda g, b, t: [("ps", g.shrink(g.pad(b, [2], [10]), [1], [6]), t.pad([2], [10], 0).shrink([1], [6]))], start=10, step=10)
    arange_case(C, "flip_then_pad", 4, "FLIP [4] then PAD (1, 6): [0, x3, x2, x1, x0, 0]",
                lambda g, b, t: [("fp", g.pad(g.flip(b, [True]), [1], [6]), t.flip([True]).pad([1], [6], 0))], start=1)
    arange_case(C, "permute_then_shrink_3d", 24, "[2,3,4] PERMUTE [2,0,1] -> [4,2,3] then SHRINK offsets [1,0,1] sizes [2,2,2]",
                lambda g, b, t: [("ps", g.shrink(g.permute(g.reshape(b, [2, 3, 4]), [2, 0, 1]), [1, 0, 1], [2, 2, 2]),
                                  t.reshape([2, 3, 4]).permute([2, 0, 1]).shrink([1, 0, 1], [2, 2, 2]))])
    arange_case(C, "shrink_reshape_expand", 12, "[3,4] SHRINK (0,1),(3,2) -> [3,2], RESHAPE [6], EXPAND [2] -> [2,6]",
                lambda g, b, t: [("sre", g.expand(g.reshape(g.shrink(g.reshape(b, [3, 4]), [0, 1], [3, 2]), [6]), [2]),
                                  t.reshape([3, 4]).shrink([0, 1], [3, 2]).reshape([6]).expand([2]))])
    arange_case(C, "pad_negative_data_then_flip", 6, "int32 arange start -3: PAD [2,3] into [3,4] at (1,1), FLIP axis 1, then ADD 100 (padding stays a real 0 once it is a value: 0+100)",
                lambda g, b, t: _pad_flip_add(g, b, t), start=-3)
    arange_case(C, "expand_then_permute", 3, "EXPAND [3] by [2] -> [2,3], PERMUTE [1,0] -> [3,2] (a broadcast along the last axis, tinygrad's _broadcast_to pattern)",
                lambda g, b, t: [("ep", g.permute(g.expand(b, [2]), [1, 0]), t.expand([2]).permute([1, 0]))], start=7)
    arange_case(C, "float32_pad_reads_zero", 3, "PAD on float32 reads +0.0 in the padding (not -0.0); arange of floats start -1.5 step 0.5",
                lambda g, b, t: [("p", g.pad(b, [1], [5]), t.pad([1], [5], 0))], dtype="float32", start="-1.5", step="0.5")


def _pad_flip_add(g, b, t):
    p = g.flip(g.pad(g.reshape(b, [2, 3]), [1, 1], [3, 4]), [False, True])
    c = g.const("int32", 100)
    s = g.op("ADD", "int32", p, c)
    tv = t.reshape([2, 3]).pad([1, 1], [3, 4], 0).flip([False, True])
    return [("pf", p, tv), ("pf_plus_100", s, tv.map(lambda x: N.alu("ADD", "int32", x, 100)))]


def gen_padded_traps(C):
    """Padding around ops that would trap on the values a padded lane sees (a compiled backend
    computes the padded expression on gated loads that read 0 there)."""
    g = G("PAD around FLOORDIV, CMOD and SHL: the padded region reads 0 whatever the inner op would do on "
          "the zeros a gated load gives there (x // 0 would trap in C); inside: Python // and C-style % by hand: "
          "[7,-7,9] // [2,2,-4] = [3,-4,-3], [7,-7,9] % [2,2,-4] (sign of dividend) = [1,-1,1], [1,2,3] << [1,2,3] = [2,8,24]",
          ["movement", "pad", "trap"])
    a = g.buffer("int32", 3, data=[7, -7, 9])
    b = g.buffer("int32", 3, data=[2, 2, -4])
    s = g.buffer("int32", 3, data=[1, 2, 3])
    fd = g.op("FLOORDIV", "int32", a, b)
    cm = g.op("CMOD", "int32", a, b)
    sh = g.op("SHL", "int32", s, s)
    g.output("floordiv", g.pad(fd, [1], [5]), [5], [0, 3, -4, -3, 0])
    g.output("cmod", g.pad(cm, [2], [6]), [6], [0, 0, 1, -1, 1, 0])
    g.output("shl", g.pad(sh, [0], [4]), [4], [2, 8, 24, 0])
    C.add("movement", "pad_around_trapping_ops", g)
