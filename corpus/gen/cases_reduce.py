"""corpus/reduce: REDUCE(op, n) reduces the FIRST n axes (other axes are permuted to the front
first): acc starts at the op's identity and acc = op(acc, x) in row-major order of the reduced
elements, in the input dtype (no implicit upcast: CAST first for a wider accumulator).

Expected values: tensor.T.reduce, each step through numerics.alu (exact result, rounded once per
step to the dtype).
"""

from fractions import Fraction as Q

import numerics as N
from builder import G
from tensor import T


def case(C, name, desc, dt, data, steps, tags=()):
    """steps: list of (kind, arg) applied in order: ('reshape', shape) / ('permute', perm) /
    ('reduce', (op, n)) / ('cast', dtype)."""
    g = G(desc, ["reduce", dt] + list(tags))
    raws = [N.raw(dt, v) for v in data]
    node = g.buffer(dt, len(raws), data=raws)
    t = T([len(raws)], raws, dt)
    for kind, arg in steps:
        if kind == "reshape":
            node, t = g.reshape(node, arg), t.reshape(arg)
        elif kind == "permute":
            node, t = g.permute(node, arg), t.permute(arg)
        elif kind == "reduce":
            node, t = g.reduce(node, arg[0], arg[1]), t.reduce(arg[0], arg[1])
        elif kind == "cast":
            src = t.dtype
            node, t = g.cast(node, arg), t.map(lambda x: N.cast(src, arg, x), arg)
        else:
            raise AssertionError(kind)
    g.output("out", node, t.shape, t.data)
    C.add("reduce", name, g)


F30 = N.value("float32", N.round_fraction("float32", Q(10 ** 30)))  # the float32 nearest 1e30
FM30 = N.value("float32", N.round_fraction("float32", Q(1, 10 ** 30)))


def gen(C):
    gen_declared_orders(C)
    a12 = list(range(12))
    a24 = list(range(24))
    case(C, "add_2d_axis0", "REDUCE ADD 1 of int32 [3,4] (arange) sums over axis 0 -> [4]", "int32", a12,
         [("reshape", [3, 4]), ("reduce", ("ADD", 1))])
    case(C, "add_2d_axis1", "sum over axis 1 of int32 [3,4]: PERMUTE [1,0] then REDUCE ADD 1 -> [3]", "int32", a12,
         [("reshape", [3, 4]), ("permute", [1, 0]), ("reduce", ("ADD", 1))])
    case(C, "add_2d_all", "REDUCE ADD 2 of int32 [3,4] reduces every axis -> shape [] (a scalar)", "int32", a12,
         [("reshape", [3, 4]), ("reduce", ("ADD", 2))])
    case(C, "add_3d_axis1", "sum over axis 1 of int32 [2,3,4]: PERMUTE [1,0,2], REDUCE ADD 1 -> [2,4]", "int32", a24,
         [("reshape", [2, 3, 4]), ("permute", [1, 0, 2]), ("reduce", ("ADD", 1))])
    case(C, "add_3d_axes02", "sum over axes 0 and 2 of int32 [2,3,4]: PERMUTE [0,2,1], REDUCE ADD 2 -> [3]", "int32", a24,
         [("reshape", [2, 3, 4]), ("permute", [0, 2, 1]), ("reduce", ("ADD", 2))])
    case(C, "max_3d_axis2", "max over the last axis of int32 [2,3,4] (data 5-i*7 mod 23 - 11): PERMUTE [2,0,1], REDUCE MAX 1 -> [2,3]", "int32",
         [(5 - i * 7) % 23 - 11 for i in range(24)], [("reshape", [2, 3, 4]), ("permute", [2, 0, 1]), ("reduce", ("MAX", 1))])
    case(C, "mul_3d_all", "REDUCE MUL 3 of int32 [2,2,2] (1..8) = 40320 -> shape []", "int32", list(range(1, 9)),
         [("reshape", [2, 2, 2]), ("reduce", ("MUL", 3))])
    case(C, "mul_int32_wrap", "REDUCE MUL of int32 columns [65536,65536,3,7] (wraps to 0 at step 1 and stays 0) and [46341,46341,-1,1] (46341^2 wraps to -2147479015, then negated); exact product mod 2^32 per step", "int32",
         [65536, 46341, 65536, 46341, 3, -1, 7, 1], [("reshape", [4, 2]), ("reduce", ("MUL", 1))])
    case(C, "add_int8_wrap", "REDUCE ADD of int8 [100,100,100] and [-100,-100,-100] wraps (each step mod 2^8): 44 and -44", "int8",
         [100, -100, 100, -100, 100, -100], [("reshape", [3, 2]), ("reduce", ("ADD", 1))], ["wrap"])
    case(C, "add_uint8_wrap", "REDUCE ADD of uint8 [200,100,50] = 350 mod 256 = 94", "uint8", [200, 100, 50], [("reduce", ("ADD", 1))], ["wrap"])
    case(C, "add_int64_wrap", "REDUCE ADD of int64 [2^63-1, 1, 5] wraps to -2^63+5", "int64", [2 ** 63 - 1, 1, 5], [("reduce", ("ADD", 1))], ["wrap"])
    case(C, "max_int32_extremes", "REDUCE MAX of int32 columns with INT_MIN/INT_MAX and negatives", "int32",
         [-2147483648, -5, -2147483648, -7, 2147483647, -2147483648, -2147483648, -9], [("reshape", [4, 2]), ("reduce", ("MAX", 1))])
    case(C, "max_uint32", "REDUCE MAX of uint32 (unsigned order: 2^32-1 is the largest)", "uint32", [5, 4294967295, 0, 2147483648],
         [("reduce", ("MAX", 1))])
    case(C, "max_bool", "REDUCE MAX of bool is any(): columns [F,F,T], [F,F,F]", "bool", [0, 0, 0, 0, 1, 0],
         [("reshape", [3, 2]), ("reduce", ("MAX", 1))])
    case(C, "add_float32_order", "REDUCE ADD of float32 columns [1e8,1,-1e8,1] and [1,1e8,1,-1e8]: the sequential fold gives 1.0 and 0.0 "
         "(1e8+1 rounds back to 1e8), not the exact 2; each step rounded RNE via Fraction", "float32",
         [100000000, 1, 1, 100000000, -100000000, 1, 1, -100000000], [("reshape", [4, 2]), ("reduce", ("ADD", 1))], ["order"])
    case(C, "add_float16_ties", "REDUCE ADD of float16 [2048,1,1,1,1] folds to 2048 (each 2048+1 ties to even 2048) and [2046,1,1,1,1] to 2048; no upcast in the IR", "float16",
         [2048, 2046, 1, 1, 1, 1, 1, 1, 1, 1], [("reshape", [5, 2]), ("reduce", ("ADD", 1))], ["order"])
    case(C, "add_float16_cast_float32", "the same float16 data CAST to float32 first, then REDUCE ADD: 2052 and 2050 (exact in float32)", "float16",
         [2048, 2046, 1, 1, 1, 1, 1, 1, 1, 1], [("cast", "float32"), ("reshape", [5, 2]), ("reduce", ("ADD", 1))], ["cast"])
    case(C, "mul_float32", "REDUCE MUL of float32 [2,0.5,3,-1] = -3 and [1e30,1e30,1e-30,1] overflows to inf at step 2 and stays inf", "float32",
         [2, F30, Q(1, 2), F30, 3, FM30, -1, 1],
         [("reshape", [4, 2]), ("reduce", ("MUL", 1))])
    case(C, "max_float32_signed_zero", "REDUCE MAX of float32 [-0.0, +0.0] stays -0.0 (max(a,b) = a<b ? b : a), [-inf,-3,-1e30] gives -3", "float32",
         ["-0.0", "-inf", "0.0", -3, "-0.0", -F30], [("reshape", [3, 2]), ("reduce", ("MAX", 1))])
    case(C, "max_float32_nan_not_first", "REDUCE MAX fold acc = max(acc, x) = (acc < x ? x : acc) drops a NaN that is not the first element: [1, NaN, 0.5] -> 1; [-2, NaN, 3] -> 3", "float32",
         [1, -2, "nan", "nan", Q(1, 2), 3], [("reshape", [3, 2]), ("reduce", ("MAX", 1))], ["nan"])
    case(C, "add_float32_negative_zeros", "REDUCE ADD folds from the identity +0.0 (as tinygrad's kernels do), so a sum of -0.0s is +0.0: acc = 0.0 + -0.0 = +0.0 (IEEE: x + -0 with x = +0 is +0)", "float32",
         ["-0.0", "-0.0", "-0.0"], [("reduce", ("ADD", 1))], ["signed_zero"])
    case(C, "max_float32_nan_first", "REDUCE MAX folds from the identity -inf with acc = (acc < x ? x : acc): a NaN first is dropped too ([NaN, 1, 0.5] -> 1), and an all-NaN column gives -inf", "float32",
         ["nan", "nan", 1, "nan", Q(1, 2), "nan"], [("reshape", [3, 2]), ("reduce", ("MAX", 1))], ["nan"])
    case(C, "add_bfloat16_no_upcast", "REDUCE ADD of bfloat16 [256, 1, 1, 1, 1] folds to 256 (256+1 ties to even at 8 significant bits); exact Fraction rounding per step", "bfloat16",
         [256, 1, 1, 1, 1], [("reduce", ("ADD", 1))], ["order"])


def gen_declared_orders(C):
    """A REDUCE whose arg records the order a compiler split it in; the oracle replays that
    order, so the split result is exact (and differs from the sequential one)."""
    g = G("REDUCE ADD of float32 [1e8, 1, -1e8, 1] declared as split(2): acc0 = (0 + 1e8) + -1e8 = 0, "
          "acc1 = (0 + 1) + 1 = 2, combined left to right: 0 + 2 = 2.0 (sequential gives 1.0 since 1e8 + 1 "
          "rounds to 1e8); declared as chunks(2): blocks [1e8, 1] -> 1e8 (1e8 + 1 rounds back) and [-1e8, 1] -> -1e8, "
          "combined 1e8 + -1e8 = 0.0; declared as tree(1): (1e8 + 1) + (-1e8 + 1) with both sums rounding back, "
          "1e8 + -1e8 = 0.0; by hand, every step exact or checked with struct", ["reduce", "order", "float32"])
    b = g.buffer("float32", 4, data=[N.raw("float32", v) for v in [10 ** 8, 1, -(10 ** 8), 1]])
    g.output("split2", g.reduce(b, "ADD", 1, {"split": 2}), [], [N.raw("float32", 2)])
    g.output("sequential", g.reduce(b, "ADD", 1), [], [N.raw("float32", 1)])
    g.output("chunks2", g.reduce(b, "ADD", 1, {"chunks": 2}), [], [N.raw("float32", 0)])
    g.output("tree1", g.reduce(b, "ADD", 1, {"tree": 1}), [], [N.raw("float32", 0)])
    C.add("reduce", "add_float32_declared_split", g)

    # Two reduced axes in a declared tree: the lowering unflattens the leaf loops' flat index.
    g = G("REDUCE ADD over both axes of a [3,4] int32 tensor (arange 0..11) declared as tree(3): leaves [0,3) [3,6) "
          "[6,9) [9,12) -> 3, 12, 21, 30, combined ((3+12)+(21+30)) = 66; integer sums, by hand", ["reduce", "order", "int32"])
    b = g.buffer("int32", 12, init={"arange": {"start": 0, "step": 1}})
    g.output("tree3", g.reduce(g.reshape(b, [3, 4]), "ADD", 2, {"tree": 3}), [], [66])
    C.add("reduce", "add_int32_declared_tree_2d", g)

    # Found by review: more parts than elements, and a split of an empty axis.
    g = G("REDUCE ADD of a [5,2] int32 tensor (1..10) over axis 0 declared as split(8): 5 elements go to accumulators "
          "0..4, accumulators 5..7 stay 0, combined left to right: [1+3+5+7+9, 2+4+6+8+10] = [25, 30]; by hand",
          ["reduce", "order", "int32"])
    b = g.buffer("int32", 10, data=list(range(1, 11)))
    g.output("split8", g.reduce(g.reshape(b, [5, 2]), "ADD", 1, {"split": 8}), [2], [25, 30])
    C.add("reduce", "declared_split_more_parts_than_elements", g)

    g = G("REDUCE MAX over an empty axis declared as split(3): every accumulator keeps the identity -inf, and "
          "combining identities gives -inf for each of the 4 outputs; by hand", ["reduce", "order", "float32"])
    b = g.buffer("float32", 4, data=[N.raw("float32", v) for v in (1, 2, 3, 4)])
    empty = g.permute(g.shrink(g.reshape(b, [4, 1]), [0, 0], [4, 0]), [1, 0])
    g.output("split3", g.reduce(empty, "MAX", 1, {"split": 3}), [4], [N.raw("float32", "-inf")] * 4)
    C.add("reduce", "declared_split_of_empty_axis", g)
