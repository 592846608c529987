"""corpus/compiler: what breaks a compiler but keeps most corpus cases passing, found by mutation
testing of uopkit's own compiler (issue 18): index arithmetic whose simplification involves
comparisons, WHERE, MAX, casts and negative values; index arithmetic that is entirely constant
(single-element windows, scalar outputs through reshapes of multi-dimensional views); STOREs into
moved views of a whole buffer, in place and across devices; op x dtype pairs a renderer is rarely
asked to print (integer TRUNC, POW on narrow floats, an UNSHARD read directly as an output); element
arithmetic on CONST operands where a simplifier's integer rules must not fire (floats, AND/OR/MUL with
constants other than 0 and ~0, division/modulo by constants whose products wrap); element arithmetic whose
range-checked rules must not fire because the operand's true range just misses the rule's condition.

Expected values: tensor.T (index by index) and numerics.alu (exact, one rounding), as everywhere in
corpus/gen; never the oracle.
"""

from fractions import Fraction as Q

import numerics as N
from builder import G, devs
from tensor import T, concat, splitmix64

GRP = "compiler"


def arange(g, dtype, n, start=0, step=1, device="CPU:0"):
    """A BUFFER holding start, start+step, ... and its tensor.T value."""
    if N.is_float(dtype):
        vals = [N.raw(dtype, Q(start) + i * Q(step)) for i in range(n)]
    else:
        vals = [N.wrap(dtype, start + i * step) for i in range(n)]
    b = g.buffer(dtype, n, device=device, data=vals)
    return b, T([n], vals, dtype)


def rows_operand(g, a, m, k, n):
    """A matmul's left operand: BUFFER a as [m, k], viewed as [k, m, n] (a[i, kk] at [kk, i, j])."""
    return g.permute(g.expand(g.reshape(a, [m, k]), [n]), [2, 1, 0])


def cols_operand(g, b, k, n, m):
    """A matmul's right operand: BUFFER b as [k, n], viewed as [k, m, n] (b[kk, j] at [kk, i, j]); the product of
    the two operands reduced over its first axis is the [m, n] matmul."""
    return g.permute(g.expand(g.reshape(b, [k, n]), [m]), [1, 0, 2])


def out(g, name, node, t):
    g.output(name, node, t.shape, t.data)


def tight_probe(g, node, vals):
    """A probe of the range analysis at both ends of int32 `node`, whose values are `vals`: with lo and hi the
    least and greatest of them (w = hi - lo), (r - lo) % w + 64 * ((hi - r) % w) + 4096 * (WHERE(CAST(r, bool),
    7, 1) % 5) + 32768 * (WHERE(CAST(r, bool), 1, 7) % 5). x % w -> x (mod_of_small) is wrong at an attained end,
    so a range that leaves out either end of r, or a bool range of r's CAST that leaves out a value r takes (true
    or false), changes an element. r - lo is written
    r + (-lo): tinygrad's C renderer writes x - (-3) as x--3 (manifests/xfail.json). Returns (node, values)."""
    a = lambda op, *xs: N.alu(op, "int32", *xs)  # noqa: E731
    k = lambda v: g.const("int32", v)  # noqa: E731
    lo, hi = min(vals), max(vals)
    w = hi - lo
    rb = g.cast(node, "bool")
    b = g.op("CMOD", "int32", g.op("WHERE", "int32", rb, k(7), k(1)), k(5))
    nb = g.op("CMOD", "int32", g.op("WHERE", "int32", rb, k(1), k(7)), k(5))
    probe = g.op("ADD", "int32", g.op("MUL", "int32", b, k(4096)), g.op("MUL", "int32", nb, k(32768)))
    pv = [a("ADD", a("MUL", a("CMOD", 7 if v != 0 else 1, 5), 4096), a("MUL", a("CMOD", 1 if v != 0 else 7, 5), 32768))
          for v in vals]
    if w > 0:
        up = g.op("CMOD", "int32", g.op("ADD", "int32", node, k(-lo)), k(w))
        down = g.op("CMOD", "int32", g.op("SUB", "int32", k(hi), node), k(w))
        probe = g.op("ADD", "int32", g.op("ADD", "int32", up, g.op("MUL", "int32", down, k(64))), probe)
        pv = [a("ADD", a("ADD", a("CMOD", a("ADD", v, -lo), w), a("MUL", a("CMOD", a("SUB", hi, v), w), 64)), t)
              for v, t in zip(vals, pv)]
    return probe, pv


def gen(C):
    gen_index(C)
    gen_constant_index(C)
    gen_view_stores(C)
    gen_op_dtype(C)
    gen_value_ranges(C)
    gen_range_operands(C)
    gen_fusion(C)
    gen_matmul_tile(C)
    gen_matmul_k_blocks(C)
    gen_conv_tile(C)
    gen_pass_guards(C)
    gen_nan_operands(C)
    gen_inplace_reduce(C)
    gen_range_sweep(C)
    gen_padded_constant_compare(C)
    gen_value_rule_limits(C)
    gen_doubling_dag(C)
    gen_buffer_chain(C)
    gen_chunks_of_split(C)
    gen_grid_limit(C)
    gen_reduce_in_a_gpu_loop(C)


# -- index arithmetic: masks, comparisons, negative offsets --------------------------------------------
def gen_index(C):
    g = G("PAD [2,3] at (1,1) into [4,5], RESHAPE [20], SHRINK (3, 12): the merged axis makes the padding mask a "
          "divmod of the flat index (valid iff 1 <= i//5 <= 2 and 1 <= i%5 <= 3); int32 arange 1..6", [GRP, "movement", "pad"])
    b, t = arange(g, "int32", 6, start=1)
    v = g.shrink(g.reshape(g.pad(g.reshape(b, [2, 3]), [1, 1], [4, 5]), [20]), [3], [12])
    out(g, "window", v, t.reshape([2, 3]).pad([1, 1], [4, 5], 0).reshape([20]).shrink([3], [12]))
    C.add(GRP, "pad_reshape_merge_mask", g)

    g = G("PAD [5] at offset 3 into 11, SHRINK (2, 7): the window starts and ends inside the padding "
          "(two comparisons of the index against constants, neither always true); int32 arange -7..-3", [GRP, "movement", "pad", "negative"])
    b, t = arange(g, "int32", 5, start=-7)
    v = g.shrink(g.pad(b, [3], [11]), [2], [7])
    out(g, "window", v, t.pad([3], [11], 0).shrink([2], [7]))
    C.add(GRP, "pad_window_both_ends", g)

    g = G("PAD [3] at 0 into 8, SHRINK (4, 3): the window lies entirely in the padding, so every element reads 0 "
          "(the mask is constant false; a compiler must not load from the buffer); float32 data -1, -2, -3", [GRP, "movement", "pad"])
    b, t = arange(g, "float32", 3, start=-1, step=-1)
    v = g.shrink(g.pad(b, [0], [8]), [4], [3])
    out(g, "zeros", v, t.pad([0], [8], N.raw("float32", 0)).shrink([4], [3]))
    C.add(GRP, "shrink_entirely_in_padding", g)

    g = G("PAD [4] at 2 into 8, then SHRINK (2, 4): exactly the original window, the mask is constant true; "
          "then PAD of a PAD ([3] at 1 into 5, at 2 into 9); int32 arange 10, 20, ..", [GRP, "movement", "pad"])
    b, t = arange(g, "int32", 4, start=10, step=10)
    out(g, "same", g.shrink(g.pad(b, [2], [8]), [2], [4]), t.pad([2], [8], 0).shrink([2], [4]))
    s3 = g.shrink(b, [0], [3])
    out(g, "padpad", g.pad(g.pad(s3, [1], [5]), [2], [9]), t.shrink([0], [3]).pad([1], [5], 0).pad([2], [9], 0))
    C.add(GRP, "pad_identity_and_nested", g)

    g = G("[2,3,4] FLIP axes 0 and 2, PAD offsets [1,0,2] into [4,3,7], PERMUTE [2,0,1]: reversed indices "
          "(d-1-i) inside the padding mask after a permutation; int32 arange -12..11", [GRP, "movement", "pad", "flip", "negative"])
    b, t = arange(g, "int32", 24, start=-12)
    v = g.permute(g.pad(g.flip(g.reshape(b, [2, 3, 4]), [True, False, True]), [1, 0, 2], [4, 3, 7]), [2, 0, 1])
    out(g, "fpp", v, t.reshape([2, 3, 4]).flip([True, False, True]).pad([1, 0, 2], [4, 3, 7], 0).permute([2, 0, 1]))
    C.add(GRP, "flip_pad_permute_3d", g)

    # values through the mask: comparisons, WHERE, MAX and casts of padded negative data
    g = G("int32 x = arange -4..3 padded at 2 into 12 (padding reads 0): CMPLT(x, 0), CMPNE(x, 0), "
          "WHERE(x<0, -x, x) (abs), MAX(x, -2), CAST to float32 and to int8, x*(-3)+1; values in Python",
          [GRP, "pad", "cmp", "where", "max", "cast", "negative"])
    b, t = arange(g, "int32", 8, start=-4)
    p = g.pad(b, [2], [12])
    tp = t.pad([2], [12], 0)
    zero = g.const("int32", 0)
    lt = g.op("CMPLT", "bool", p, zero)
    out(g, "lt0", lt, tp.map(lambda x: x < 0, "bool"))
    out(g, "ne0", g.op("CMPNE", "bool", p, zero), tp.map(lambda x: x != 0, "bool"))
    out(g, "abs", g.op("WHERE", "int32", lt, g.op("NEG", "int32", p), p), tp.map(abs))
    out(g, "max_m2", g.op("MAX", "int32", p, g.const("int32", -2)), tp.map(lambda x: max(x, -2)))
    out(g, "as_f32", g.cast(p, "float32"), tp.map(lambda x: N.raw("float32", x), "float32"))
    out(g, "as_i8", g.cast(p, "int8"), tp.map(lambda x: N.wrap("int8", x), "int8"))
    out(g, "affine", g.op("ADD", "int32", g.op("MUL", "int32", p, g.const("int32", -3)), g.const("int32", 1)),
        tp.map(lambda x: N.wrap("int32", x * -3 + 1)))
    C.add(GRP, "padded_negative_values_cmp_where_max_cast", g)

    g = G("float32 [3,4] of arange -6..5 (step 1): SHRINK [1,1],[2,3], FLIP axis 1, then MAX with 0 (relu) and "
          "CMPLT against -1.5 selecting between the value and 100 by WHERE; exact small integers", [GRP, "where", "max", "cmp", "negative"])
    b, t = arange(g, "float32", 12, start=-6)
    w = g.flip(g.shrink(g.reshape(b, [3, 4]), [1, 1], [2, 3]), [False, True])
    tw = t.reshape([3, 4]).shrink([1, 1], [2, 3]).flip([False, True])
    fz = N.raw("float32", 0)
    out(g, "relu", g.op("MAX", "float32", w, g.const("float32", fz)),
        tw.map(lambda x: N.alu("MAX", "float32", x, fz)))
    m = N.raw("float32", Q(-3, 2))
    hundred = N.raw("float32", 100)
    c = g.op("CMPLT", "bool", w, g.const("float32", m))
    out(g, "sel", g.op("WHERE", "float32", c, w, g.const("float32", hundred)),
        tw.map(lambda x: x if N.alu("CMPLT", "float32", x, m) else hundred))
    C.add(GRP, "window_flip_relu_select", g)

    g = G("REDUCE ADD over axis 0 of PAD([3,2] int32 arange -3..2, offsets [2,1], sizes [6,4]) after PERMUTE: "
          "padded rows add 0; the reduce loop's index goes through the padding mask; values in Python",
          [GRP, "reduce", "pad", "negative"])
    b, t = arange(g, "int32", 6, start=-3)
    p = g.pad(g.reshape(b, [3, 2]), [2, 1], [6, 4])
    tp = t.reshape([3, 2]).pad([2, 1], [6, 4], 0)
    out(g, "colsum", g.reduce(p, "ADD", 1), tp.reduce("ADD", 1))
    out(g, "rowsum", g.reduce(g.permute(p, [1, 0]), "ADD", 1), tp.permute([1, 0]).reduce("ADD", 1))
    C.add(GRP, "reduce_over_padding", g)


# -- constant index arithmetic ---------------------------------------------------------------------
def gen_constant_index(C):
    g = G("[4,5] int32 arange SHRINK offsets [2,3] sizes [1,1] (a single-element window: every index is a "
          "constant) then RESHAPE [] (a scalar output): element 2*5+3 = 13 of arange 0..19", [GRP, "movement", "scalar"])
    b, t = arange(g, "int32", 20)
    out(g, "one", g.reshape(g.shrink(g.reshape(b, [4, 5]), [2, 3], [1, 1]), []), T([], [13], "int32"))
    C.add(GRP, "single_element_window_scalar", g)

    g = G("[2,3,4] float32 arange 0.5 step 0.25: SHRINK [1,2,3],[1,1,1], RESHAPE [1], EXPAND [3] -> [3,1]; and a "
          "PERMUTE [1,0] + FLIP axis 0 of [3,4] (int32) shrunk to [1,1] at (1,2) then RESHAPE []; constants only",
          [GRP, "movement", "scalar"])
    b, t = arange(g, "float32", 24, start=Q(1, 2), step=Q(1, 4))
    one = g.reshape(g.shrink(g.reshape(b, [2, 3, 4]), [1, 2, 3], [1, 1, 1]), [1])
    t1 = t.reshape([2, 3, 4]).shrink([1, 2, 3], [1, 1, 1]).reshape([1])
    out(g, "bcast", g.expand(one, [3]), t1.expand([3]))
    bi, ti = arange(g, "int32", 12, start=100)
    pf = g.flip(g.permute(g.reshape(bi, [3, 4]), [1, 0]), [True, False])
    tpf = ti.reshape([3, 4]).permute([1, 0]).flip([True, False])
    out(g, "pf_scalar", g.reshape(g.shrink(pf, [1, 2], [1, 1]), []), tpf.shrink([1, 2], [1, 1]).reshape([]))
    C.add(GRP, "scalar_through_multi_dim_views", g)

    # A RESHAPE between two multi-dimensional shapes whose output index is entirely constant: the
    # lowering divides and reduces a constant flat offset by the input's strides and dims
    # ([6,4] from [3,8]: row = flat // 4, col = flat % 4). The first RESHAPE of a buffer never does
    # this (its input is the flat buffer), so a PERMUTE keeps the two RESHAPEs apart. The window
    # [4,6] of [8,6] leaves room after the view, so an index computed wrongly (flat % 4 for the
    # row, flat * 4, flat / 4 or flat + 4 for the column, …) still reads an element of the buffer,
    # just a different one.
    g = G("int32 arange 100..147 RESHAPE [8,6], SHRINK [0,0],[4,6], PERMUTE [1,0] -> [6,4], RESHAPE [3,8], then "
          "single-element windows at (0,1) and (0,6) RESHAPEd to [], plus 1 (a computed value, so a kernel "
          "computes the index; a bare view of a buffer needs none): constant flat offsets 1 and 6 split by the "
          "[6,4] strides (b[(f%4)*6 + f//4] + 1: 107 and 114); values in Python",
          [GRP, "movement", "scalar", "reshape"])
    b, t = arange(g, "int32", 48, start=100)
    v = g.reshape(g.permute(g.shrink(g.reshape(b, [8, 6]), [0, 0], [4, 6]), [1, 0]), [3, 8])
    tv = t.reshape([8, 6]).shrink([0, 0], [4, 6]).permute([1, 0]).reshape([3, 8])
    one = g.const("int32", 1)
    for name, at in (("f1", [0, 1]), ("f6", [0, 6])):
        s = g.reshape(g.shrink(v, at, [1, 1]), [])
        out(g, name, g.op("ADD", "int32", s, one), tv.shrink(at, [1, 1]).reshape([]).map(lambda x: x + 1))
    C.add(GRP, "constant_index_between_reshapes", g)

    g = G("REDUCE ADD of a [1,1] window (offset [2,0]) of [3,3] int32 data, and REDUCE MAX over axis 0 of a [1,4] "
          "window: reductions of one element, whose loops have constant bounds 0..1; values in Python",
          [GRP, "reduce", "scalar"])
    b, t = arange(g, "int32", 9, start=-4, step=3)
    w = g.shrink(g.reshape(b, [3, 3]), [2, 0], [1, 1])
    out(g, "sum1", g.reduce(w, "ADD", 2), t.reshape([3, 3]).shrink([2, 0], [1, 1]).reduce("ADD", 2))
    b2, t2 = arange(g, "int32", 8, start=7, step=-2)
    w2 = g.shrink(g.reshape(b2, [2, 4]), [1, 0], [1, 4])
    out(g, "max_row", g.reduce(w2, "MAX", 1), t2.reshape([2, 4]).shrink([1, 0], [1, 4]).reduce("MAX", 1))
    C.add(GRP, "reduce_of_one_element", g)

    g = G("size-1 axes everywhere: [6] RESHAPE [1,6,1], PERMUTE [2,1,0], SHRINK [0,2,0],[1,3,1], FLIP all, "
          "RESHAPE [3], ADD 1; uint8 data 250..255 wraps on the add", [GRP, "movement", "wrap"])
    b, t = arange(g, "uint8", 6, start=250)
    v = g.reshape(g.flip(g.shrink(g.permute(g.reshape(b, [1, 6, 1]), [2, 1, 0]), [0, 2, 0], [1, 3, 1]), [True, True, True]), [3])
    tv = t.reshape([1, 6, 1]).permute([2, 1, 0]).shrink([0, 2, 0], [1, 3, 1]).flip([True, True, True]).reshape([3])
    out(g, "plus1", g.op("ADD", "uint8", v, g.const("uint8", 1)), tv.map(lambda x: N.wrap("uint8", x + 1)))
    C.add(GRP, "unit_axes_chain", g)


# -- stores into moved views of a whole buffer ----------------------------------------------------------
def gen_view_stores(C):
    g = G("STORE into PERMUTE [1,0] of RESHAPE [2,3] of a whole 6-element int32 buffer (zeros) of the value "
          "arange(6) viewed [3,2]: view[i][j] is dst[j*3+i], so dst = [0,2,4,1,3,5]; hand-derived",
          [GRP, "store", "view"])
    d = g.buffer("int32", 6, data=[0] * 6)
    src, ts = arange(g, "int32", 6)
    view = g.permute(g.reshape(d, [2, 3]), [1, 0])
    st = g.store(view, g.reshape(src, [3, 2]))
    # view[i][j] = d[j*3 + i] := src[i*2 + j]
    exp = [0] * 6
    for i in range(3):
        for j in range(2):
            exp[j * 3 + i] = ts.data[i * 2 + j]
    out(g, "dst", g.after(d, st), T([6], exp, "int32"))
    g.sched(writes=[d])
    C.add(GRP, "store_into_transposed_whole_buffer", g)

    for dst, srcd in (("CPU:1", "CPU:0"), ("CPU:0", "CPU:1")):
        sfx = f"{srcd.replace(':', '')}_to_{dst.replace(':', '')}"
        g = G(f"STORE into FLIP of a whole float32 buffer on {dst} of a realized buffer on {srcd}: a cross-device "
              "store into a moved view (one COPY onto the target's device, then a kernel there writes the reversed "
              "order into the target, which keeps its identity); dst = [4,3,2,1]; hand-derived",
              [GRP, "store", "view", "cross_device"])
        d = g.buffer("float32", 4, device=dst, data=[N.raw("float32", 0)] * 4)
        s = g.buffer("float32", 4, device=srcd, data=[N.raw("float32", v) for v in (1, 2, 3, 4)])
        st = g.store(g.flip(d, [True]), s)
        out(g, "dst", g.after(d, st), T([4], [N.raw("float32", v) for v in (4, 3, 2, 1)], "float32"))
        g.sched(copies=1, writes=[d], copy_pairs=[[dst, srcd]])
        C.add(GRP, f"store_into_flipped_view_cross_device_{sfx}", g)

    g = G("in place through moved views of the whole buffer: x (int32, 1..6) gets STORE(RESHAPE [3,2] of x, "
          "RESHAPE [3,2] of x*10), then STORE(FLIP of that result, the result + 1), whose value reads every element "
          "before any is written (x[k] = first[5-k] + 1); both versions are outputs; hand-derived",
          [GRP, "store", "view", "inplace"])
    x = g.buffer("int32", 6, data=[1, 2, 3, 4, 5, 6])
    a1 = g.after(x, g.store(g.reshape(x, [3, 2]), g.reshape(g.op("MUL", "int32", x, g.const("int32", 10)), [3, 2])))
    a2 = g.after(x, g.store(g.flip(a1, [True]), g.op("ADD", "int32", a1, g.const("int32", 1))))
    v1 = [10, 20, 30, 40, 50, 60]
    # FLIP(x)[i] = x[5-i] := v1[i] + 1  ->  x[k] = v1[5-k] + 1
    v2 = [v1[5 - k] + 1 for k in range(6)]
    out(g, "first", a1, T([6], v1, "int32"))
    out(g, "second", a2, T([6], v2, "int32"))
    g.sched(writes=[x])
    C.add(GRP, "store_inplace_through_whole_views", g)

    g = G("STORE into SHRINK (1,2),(2,2) of RESHAPE [4,4] of a 16-element int16 buffer on CPU:1 of a value computed "
          "on CPU:0 (arange 1..4 viewed [2,2], times -1): the source is computed on its own device, copied, and "
          "stored into the window; every other element keeps 7; hand-derived", [GRP, "store", "view", "cross_device"])
    d = g.buffer("int16", 16, device="CPU:1", data=[7] * 16)
    s, ts = arange(g, "int16", 4, start=1)
    val = g.op("MUL", "int16", g.reshape(s, [2, 2]), g.const("int16", -1))
    st = g.store(g.shrink(g.reshape(d, [4, 4]), [1, 2], [2, 2]), val)
    exp = [7] * 16
    for i in range(2):
        for j in range(2):
            exp[(1 + i) * 4 + 2 + j] = -(i * 2 + j + 1)
    out(g, "dst", g.after(d, st), T([16], exp, "int16"))
    g.sched(copies=1, writes=[d], copy_pairs=[["CPU:1", "CPU:0"]])
    C.add(GRP, "store_computed_into_2d_window_cross_device", g)

    # AFTER of a value that already names the newer of two stores, ordered after a value that names the older
    # one: the older store is one the newer was made from, so the result keeps the newer version (an AFTER never
    # goes back to an older version; reading the older one's values, or a snapshot of them, is wrong). The stores
    # are spelled as tinygrad's Tensor.assign builds them (the second one into the first one's AFTER).
    g = G("two stores into float32 b = [1,2]: s1 = STORE(b, [10,11]), a1 = AFTER(b, s1), s2 = STORE(a1, [20,21]), "
          "a2 = AFTER(a1, s2); AFTER(a2, a1) still reads s2's version [20,21], since s1 is older than s2 (a1 alone "
          "would read [10,11]); hand-derived", [GRP, "store", "after"])
    b = g.buffer("float32", 2, data=[N.raw("float32", v) for v in (1, 2)])
    v1 = g.buffer("float32", 2, data=[N.raw("float32", v) for v in (10, 11)])
    v2 = g.buffer("float32", 2, data=[N.raw("float32", v) for v in (20, 21)])
    a1 = g.after(b, g.store(b, v1))
    a2 = g.after(a1, g.store(a1, v2))
    out(g, "newer_after_older", g.after(a2, a1), T([2], [N.raw("float32", v) for v in (20, 21)], "float32"))
    g.sched(writes=[b])
    C.add(GRP, "after_older_store_keeps_newer_version", g)

    # A value with no device (computed from constants only) ordered after a STORE: AFTER(EXPAND(CONST 5),
    # STORE(x, x+10)) has no device either, so the scheduler realizes it on the device that reads it (CPU:1,
    # not the CPU:0 a device-less value defaults to), after running the STORE it waits for; the AFTER itself is
    # not storage, so its source is what gets realized there.
    g = G("a device-less value ordered after a store: v = AFTER(EXPAND(CONST 5, [4]), STORE(x, x+10)) for int32 "
          "x = [1,2,3,4] on CPU:1, read there next to AFTER(x, STORE): v + x' = 5 + [11,12,13,14] = [16,17,18,19], "
          "and v * x' = [55,60,65,70]; hand-derived", [GRP, "store", "after", "device"])
    x = g.buffer("int32", 4, device="CPU:1", data=[1, 2, 3, 4])
    st = g.store(x, g.op("ADD", "int32", x, g.expand(g.const("int32", 10), [4])))
    v = g.after(g.expand(g.const("int32", 5), [4]), st)
    xa = g.after(x, st)
    out(g, "sum", g.op("ADD", "int32", v, xa), T([4], [16, 17, 18, 19], "int32"))
    out(g, "product", g.op("MUL", "int32", v, xa), T([4], [55, 60, 65, 70], "int32"))
    g.sched(writes=[x])
    C.add(GRP, "deviceless_value_after_store", g)


# -- op x dtype pairs --------------------------------------------------------------------------------
def gen_op_dtype(C):
    for dt, vals in (("int32", [-2147483648, -7, -1, 0, 1, 2147483647]), ("int8", [-128, -3, 0, 5, 127]),
                     ("uint8", [0, 1, 200, 255]), ("int64", [-(2 ** 63), -1, 0, 2 ** 63 - 1]), ("uint32", [0, 7, 2 ** 32 - 1])):
        g = G(f"TRUNC on {dt} is the identity (integers have no fractional part; docs/semantics.md), also on the "
              "extremes; and TRUNC(x) + 1 wraps; hand-derived", [GRP, "alu", "trunc", dt])
        b = g.buffer(dt, len(vals), data=vals)
        tr = g.op("TRUNC", dt, b)
        out(g, "trunc", tr, T([len(vals)], vals, dt))
        out(g, "trunc_plus1", g.op("ADD", dt, tr, g.const(dt, 1)), T([len(vals)], [N.wrap(dt, v + 1) for v in vals], dt))
        C.add(GRP, f"trunc_{dt}", g)

    g = G("TRUNC on bool is the identity; hand-derived", [GRP, "alu", "trunc", "bool"])
    b = g.buffer("bool", 2, data=[False, True])
    out(g, "trunc", g.op("TRUNC", "bool", b), T([2], [False, True], "bool"))
    C.add(GRP, "trunc_bool", g)

    # Integer identities must not be applied to floats: x+0 -> x (x = -0.0 gives +0.0), x-0, x*1 (a NaN
    # result is the canonical NaN, not x's payload), x*0 -> 0 (-2*0 = -0.0, inf*0 = NaN), x-x -> 0
    # (inf-inf = NaN), (x+c1)+c2 -> x+(c1+c2) (1 + 2^-24 rounds back to 1 twice, 1 + 2^-23 does not).
    # A compiler that simplifies the kernel's element arithmetic with integer rules (uopkit's GPU
    # pass list runs `symbolic` over the whole kernel) breaks these if the rules' dtype guards do.
    dt = "float32"
    xs = [N.raw(dt, v) for v in ("-0.0", 1, -2, "inf")] + [0x7FC00001]
    g = G("float32 x = -0.0, 1, -2, inf, NaN with payload 0x7fc00001 against CONST operands: x+0.0, x-0.0, x*1.0, "
          "x*0.0, x-x, (x+2^-24)+2^-24; integer identities (x+0 -> x, x*0 -> 0, x-x -> 0, constant chains) are "
          "wrong on floats; numerics.alu (exact, one rounding, canonical NaN)", [GRP, "alu", "float32", "const"])
    b = g.buffer(dt, len(xs), data=xs)
    zero, one, tiny = (N.raw(dt, v) for v in (0, 1, Q(1, 2 ** 24)))
    for name, op, c in (("add0", "ADD", zero), ("sub0", "SUB", zero), ("mul1", "MUL", one), ("mul0", "MUL", zero)):
        out(g, name, g.op(op, dt, b, g.const(dt, c)), T([len(xs)], [N.alu(op, dt, x, c) for x in xs], dt))
    out(g, "sub_self", g.op("SUB", dt, b, b), T([len(xs)], [N.alu("SUB", dt, x, x) for x in xs], dt))
    chain = g.op("ADD", dt, g.op("ADD", dt, b, g.const(dt, tiny)), g.const(dt, tiny))
    out(g, "add_chain", chain, T([len(xs)], [N.alu("ADD", dt, N.alu("ADD", dt, x, tiny), tiny) for x in xs], dt))
    C.add(GRP, "float_identities_on_const_operands", g)

    # AND/OR identities hold only for the all-ones and zero constants: x & c -> x only for c = ~0 (bool: true),
    # x | c -> c likewise. Element arithmetic (simplified on the GPU pass list) and a padding mask that
    # ANDs a condition that varies with a constant false one (the column window lies in the padding).
    xs = [-1, 0, 0x5A5A5A5A, 7, -8]
    g = G("int32 x = -1, 0, 0x5a5a5a5a, 7, -8: x & 12, x | 48, x & -1, x | 0, x | -1, (x // y) & 0 with y loaded; "
          "bool b = false, true: b & false, b & true, b | false, b * false, b * true; and PAD [2,3] int32 (offsets [1,0] into [4,6]) SHRINK rows 0..4, columns 4..6: a mask "
          "row-in-range AND column-in-range whose second half is the constant false; numerics.alu and tensor.T",
          [GRP, "alu", "bitwise", "pad", "int32", "bool"])
    b = g.buffer("int32", len(xs), data=xs)
    for name, op, c in (("and12", "AND", 12), ("or48", "OR", 48), ("and_ones", "AND", -1), ("or0", "OR", 0),
                        ("or_ones", "OR", -1)):
        out(g, name, g.op(op, "int32", b, g.const("int32", c)),
            T([len(xs)], [N.alu(op, "int32", x, c) for x in xs], "int32"))
    bs = [0, 1]
    bb = g.buffer("bool", 2, data=bs)
    for name, op, c in (("b_and_false", "AND", 0), ("b_and_true", "AND", 1), ("b_or_false", "OR", 0)):
        out(g, name, g.op(op, "bool", bb, g.const("bool", c)),
            T([2], [N.alu(op, "bool", x, c) for x in bs], "bool"))
    bm = bb
    for name, c in (("b_mul_false", 0), ("b_mul_true", 1)):
        out(g, name, g.op("MUL", "bool", bm, g.const("bool", c)),
            T([2], [N.alu("MUL", "bool", x, c) for x in bs], "bool"))
    # (x // y) & 0 is 0 wherever x // y is defined, but x // y may be UB (y is loaded), so a rule
    # may not drop it; it must not be kept either (x & 0 -> x is wrong)
    ys = [3, -2, 1, 5, 7]
    by = g.buffer("int32", len(ys), data=ys)
    out(g, "div_and0", g.op("AND", "int32", g.op("CDIV", "int32", b, by), g.const("int32", 0)),
        T([len(xs)], [0] * len(xs), "int32"))
    pb, pt = arange(g, "int32", 6, start=1)
    w = g.shrink(g.pad(g.reshape(pb, [2, 3]), [1, 0], [4, 6]), [0, 4], [4, 2])
    out(g, "pad_cols", g.op("ADD", "int32", w, g.const("int32", 100)),
        pt.reshape([2, 3]).pad([1, 0], [4, 6], 0).shrink([0, 4], [4, 2]).map(lambda x: x + 100))
    C.add(GRP, "bitwise_constants_and_false_mask", g)

    # Division and modulo rules by constants must check what they assume: (x*c)/c -> x and (x*c)%c -> 0
    # only when x*c does not wrap (int8: 100*3 wraps to 44, 100*-3 to -44), (x/4)/2 -> x/8, (x%6)%3 -> x%3 (3 divides 6)
    # but (x%5)%3 stays. Element arithmetic over loaded values, whose range is the dtype's.
    xs8 = [100, -100, 42, -43, 127, -128, 5, 0]
    g = G("int8 x = 100, -100, 42, -43, 127, -128, 5, 0: (x*3)/3, (x*3)%3, (x*-3)/-3, (x*-3)%-3 (the products wrap), C division (x/4)/2 and "
          "modulo (x%6)%3, (x%5)%3 by constants; numerics.alu (exact, wrapping)",
          [GRP, "alu", "cdiv", "cmod", "int8"])
    b = g.buffer("int8", len(xs8), data=xs8)
    k = {v: g.const("int8", v) for v in (2, 3, 4, 5, 6, -3)}

    def tv(f):
        return T([len(xs8)], [f(x) for x in xs8], "int8")

    a = lambda op, x, y: N.alu(op, "int8", x, y)  # noqa: E731
    m3 = g.op("MUL", "int8", b, k[3])
    out(g, "mul3_div3", g.op("CDIV", "int8", m3, k[3]), tv(lambda x: a("CDIV", a("MUL", x, 3), 3)))
    out(g, "mul3_mod3", g.op("CMOD", "int8", m3, k[3]), tv(lambda x: a("CMOD", a("MUL", x, 3), 3)))
    mm3 = g.op("MUL", "int8", b, k[-3])
    out(g, "mulm3_divm3", g.op("CDIV", "int8", mm3, k[-3]), tv(lambda x: a("CDIV", a("MUL", x, -3), -3)))
    out(g, "mulm3_modm3", g.op("CMOD", "int8", mm3, k[-3]), tv(lambda x: a("CMOD", a("MUL", x, -3), -3)))
    out(g, "div4_div2", g.op("CDIV", "int8", g.op("CDIV", "int8", b, k[4]), k[2]),
        tv(lambda x: a("CDIV", a("CDIV", x, 4), 2)))
    out(g, "mod6_mod3", g.op("CMOD", "int8", g.op("CMOD", "int8", b, k[6]), k[3]),
        tv(lambda x: a("CMOD", a("CMOD", x, 6), 3)))
    out(g, "mod5_mod3", g.op("CMOD", "int8", g.op("CMOD", "int8", b, k[5]), k[3]),
        tv(lambda x: a("CMOD", a("CMOD", x, 5), 3)))
    C.add(GRP, "int_div_mod_const_rules", g)

    # POW on narrow floats: only inputs whose exact result is representable (or exactly rounded in Python)
    for dt in ("float16", "bfloat16"):
        pairs = [(2, 3), (Q(1, 2), 4), (3, 2), (-2, 3), (-2, 2), (4, Q(1, 2)), (16, Q(-1, 2)), (1, 100), (7, 0), (0, 3)]
        xs = [N.raw(dt, a) for a, _ in pairs]
        ys = [N.raw(dt, b_) for _, b_ in pairs]
        g = G(f"POW on {dt}: integer and half-integer powers whose exact result is representable in {dt} "
              "(2^3, 0.5^4, 3^2, (-2)^3, (-2)^2, 4^0.5, 16^-0.5, 1^100, 7^0, 0^3); numerics.alu (exact, one rounding)",
              [GRP, "alu", "pow", dt])
        bx = g.buffer(dt, len(xs), data=xs)
        by = g.buffer(dt, len(ys), data=ys)
        out(g, "pow", g.op("POW", dt, bx, by), T([len(xs)], [N.alu("POW", dt, x, y) for x, y in zip(xs, ys)], dt))
        C.add(GRP, f"pow_{dt}", g)

    g = G("UNSHARD (axis 0) of an int32 buffer sharded over CPU:0..2 read directly as an output (no COPY): the "
          "logical value is the concatenation of the components in device order; and UNSHARD axis 1 of the "
          "components viewed [2,2]; hand-derived", [GRP, "multi", "unshard"])
    ds = devs(3)
    comps = [[d * 100 + k for k in range(4)] for d in range(3)]
    x = g.buffer("int32", 4, device=ds, data=comps)
    out(g, "cat0", g.op("UNSHARD", "int32", x, arg=[0]), T([12], sum(comps, []), "int32"))
    parts = [T([2, 2], c, "int32") for c in comps]
    out(g, "cat1", g.op("UNSHARD", "int32", g.reshape(x, [2, 2]), arg=[1]), concat(parts, 1))
    C.add(GRP, "unshard_as_output_3dev", g)


# -- value ranges of element arithmetic ---------------------------------------------------------------
def gen_value_ranges(C):
    # The GPU pass list simplifies element arithmetic with rules that trust a value-range analysis:
    # x % c -> x when x is in [0, c), CAST(CAST(x, uint8), int32) -> x when x fits uint8, (a*c)/c -> a when
    # a*c cannot wrap, (a*c + b)/c -> a + b/c when b and the sum share a sign (c >= 2), (x/c1)/c2 -> x/(c1*c2)
    # when c1, c2 > 0. Each output below is built so that its operand's true range (or its constants) just
    # misses the rule's condition, while a range computed wrongly (WHERE of a comparison taken as always true,
    # SUB's low end, C modulo or OR of a negative operand, floor division by a negative divisor, x % c for
    # x = c, NEG, OR of small non-negative operands, floor modulo of a dividend past the divisor, a product
    # that wraps in uint8) or a divisor condition read wrongly lets the rule fire and changes some element.
    # The loaded operands have the dtype's full range, so a narrow range comes from AND with a constant and
    # WHERE between constants.
    xs = [0, 1, 2, 3, 5, 7, -1, 11]
    cs = [1, 0, 1, 0, 1, 0, 1, 0]
    ds = [0, 0, 1, 1, 0, 1, 0, 1]
    ys = [100, 0, 85, 86, 255, 1, 171, 200]
    n = len(xs)
    g = G("element arithmetic whose range-checked rules must not fire (int32 x = 0,1,2,3,5,7,-1,11; bool c, d): "
          "(x&3)%3, WHERE(x==5, 1, 7)%5, WHERE(x==5, 7, 1)%5, (WHERE(c,1,2) - WHERE(d,0,5))%3, CAST(CAST(WHERE(c,-1,1)|2, uint8), int32), "
          "CAST(CAST(2|WHERE(c,-1,1), uint8), int32), "
          "CAST(CAST(WHERE(c,-5,5)%3, uint8), int32), ((x&7)*4 - 1)/4 (C division), FLOORDIV(WHERE(c,-7,-5), -2)%3, "
          "FLOORMOD(FLOORDIV(WHERE(c,-1,1), 2), 3), CAST(CAST(FLOORMOD(x&3, y), uint8), int32) for a loaded y = -3 "
          "and for the constant -3, "
          "NEG(WHERE(c,-5,-2))%3, ((x&7)|1)%3, (WHERE(d,-1,0)*4 + FLOORMOD(WHERE(c,5,10), 3))/4, "
          "(WHERE(d,-2,-1)*4 + FLOORMOD(WHERE(c,5,10), 3)) / and % 4 (C), "
          "the tight probes of FLOORMOD and CMOD of WHERE(c,2,3) by 3, "
          "the tight probes of NEG(WHERE(c,2,5)) and NEG(WHERE(c,-2,3)), "
          "(WHERE(c,1,2)*-2 + WHERE(d,3,5))/-2, FLOORDIV(FLOORDIV(x, 2), -3); "
          "numerics.alu and numerics.cast (exact, wrapping)",
          [GRP, "alu", "range", "int32", "cmod", "cdiv", "floordiv"])
    bx = g.buffer("int32", n, data=xs)
    bc = g.buffer("bool", n, data=cs)
    bd = g.buffer("bool", n, data=ds)
    k = lambda v: g.const("int32", v)  # noqa: E731
    a = lambda op, x, y: N.alu(op, "int32", x, y)  # noqa: E731

    def o(name, node, vals, dt="int32"):
        out(g, name, node, T([n], vals, dt))

    def where(c, t, f):
        return g.op("WHERE", "int32", c, k(t), k(f))

    def i32_u8_i32(v):
        return N.cast("uint8", "int32", N.cast("int32", "uint8", v))

    def via_u8(node):
        return g.cast(g.cast(node, "uint8"), "int32")

    # x & 3 is in [0, 3]: x % 3 -> x only when x < 3 (x & 3 = 3 gives 0)
    o("and3_mod3", g.op("CMOD", "int32", g.op("AND", "int32", bx, k(3)), k(3)),
      [a("CMOD", a("AND", x, 3), 3) for x in xs])
    # x == 5 is false for most x: the WHERE's range is [1, 7], not [1, 1]
    eq5 = g.op("CMPEQ", "bool", bx, k(5))
    o("eq5_sel_mod5", g.op("CMOD", "int32", g.op("WHERE", "int32", eq5, k(1), k(7)), k(5)),
      [a("CMOD", 1 if N.alu("CMPEQ", "int32", x, 5) else 7, 5) for x in xs])
    # a floor modulo by the constant -3 is in [-2, 0] (the divisor's sign), which uint8 wraps
    o("fmod_neg_const_via_u8", via_u8(g.op("FLOORMOD", "int32", g.op("AND", "int32", bx, k(3)), k(-3))),
      [i32_u8_i32(a("FLOORMOD", a("AND", x, 3), -3)) for x in xs])
    # x == 5 is true for some x: the WHERE's range is [1, 7], not [7, 7] nor [1, 1] (7 % 5 is 2)
    o("eq5_sel71_mod5", g.op("CMOD", "int32", g.op("WHERE", "int32", eq5, k(7), k(1)), k(5)),
      [a("CMOD", 7 if N.alu("CMPEQ", "int32", x, 5) else 1, 5) for x in xs])
    # [1, 2] - [0, 5] is [-4, 2]
    o("sub_mod3", g.op("CMOD", "int32", g.op("SUB", "int32", where(bc, 1, 2), where(bd, 0, 5)), k(3)),
      [a("CMOD", a("SUB", 1 if c else 2, 0 if d else 5), 3) for c, d in zip(cs, ds)])
    # -1 | 2 = -1: OR of a negative operand is negative
    o("or2_via_u8", via_u8(g.op("OR", "int32", where(bc, -1, 1), k(2))),
      [i32_u8_i32(a("OR", -1 if c else 1, 2)) for c in cs])
    # the same with the operands swapped: the constant first, the possibly negative operand second
    o("or2_swapped_via_u8", via_u8(g.op("OR", "int32", k(2), where(bc, -1, 1))),
      [i32_u8_i32(a("OR", 2, -1 if c else 1)) for c in cs])
    # C modulo keeps the dividend's sign: -5 % 3 = -2
    o("mod3_via_u8", via_u8(g.op("CMOD", "int32", where(bc, -5, 5), k(3))),
      [i32_u8_i32(a("CMOD", -5 if c else 5, 3)) for c in cs])
    # (4a - 1)/4 truncates to a - 1 for a >= 1: b = -1 and the sum 4a - 1 differ in sign
    m = g.op("MUL", "int32", g.op("AND", "int32", bx, k(7)), k(4))
    o("affine_cdiv", g.op("CDIV", "int32", g.op("ADD", "int32", m, k(-1)), k(4)),
      [a("CDIV", a("ADD", a("MUL", a("AND", x, 7), 4), -1), 4) for x in xs])
    # floor(-7 / -2) = 3, floor(-5 / -2) = 2: the quotient's range is [2, 3]
    fd = g.op("FLOORDIV", "int32", where(bc, -7, -5), k(-2))
    o("floordiv_neg_mod3", g.op("CMOD", "int32", fd, k(3)),
      [a("CMOD", a("FLOORDIV", -7 if c else -5, -2), 3) for c in cs])
    # floor(-1 / 2) = -1, floor(1 / 2) = 0: a quotient of operands of mixed sign that is not exact rounds down,
    # so FLOORDIV(WHERE(c,-1,1), 2) is in [-1, 0] and its floor modulo 3 is 2 or 0 (truncation would say [0, 0])
    o("floordiv_mixed_sign_fmod3", g.op("FLOORMOD", "int32", g.op("FLOORDIV", "int32", where(bc, -1, 1), k(2)), k(3)),
      [a("FLOORMOD", a("FLOORDIV", -1 if c else 1, 2), 3) for c in cs])
    # a floor modulo takes the divisor's sign: (x&3) fmod y for a loaded y = -3 is in [-2, 0], which uint8 wraps
    by = g.buffer("int32", n, data=[-3] * n)
    o("fmod_neg_divisor_via_u8", via_u8(g.op("FLOORMOD", "int32", g.op("AND", "int32", bx, k(3)), by)),
      [i32_u8_i32(a("FLOORMOD", a("AND", x, 3), -3)) for x in xs])
    # NEG of [-5, -2] is [2, 5]: a NEG range taken with the wrong sign on one end ([2, -5]) looks below 3
    w = where(bc, -5, -2)
    o("neg_mod3", g.op("CMOD", "int32", g.op("NEG", "int32", w), k(3)),
      [a("CMOD", N.alu("NEG", "int32", -5 if c else -2), 3) for c in cs])
    # (x&7) | 1 is in [1, 7]: an OR range whose all-ones bound is computed wrongly (too small) lets % 3 go
    o("or1_mod3", g.op("CMOD", "int32", g.op("OR", "int32", g.op("AND", "int32", bx, k(7)), k(1)), k(3)),
      [a("CMOD", a("OR", a("AND", x, 7), 1), 3) for x in xs])
    # WHERE(c,5,10) floor-mod 3 is in [0, 2], not the dividend's [5, 10] (the dividend reaches past the
    # divisor); with a = WHERE(d,-1,0), (4a + m)/4 truncates to 0 while a + m/4 is -1: m and the sum differ
    # in sign for d true
    m = g.op("FLOORMOD", "int32", where(bc, 5, 10), k(3))
    o("floormod_affine_cdiv",
      g.op("CDIV", "int32", g.op("ADD", "int32", g.op("MUL", "int32", where(bd, -1, 0), k(4)), m), k(4)),
      [a("CDIV", a("ADD", a("MUL", -1 if d else 0, 4), a("FLOORMOD", 5 if c else 10, 3)), 4)
       for c, d in zip(cs, ds)])
    # with a = WHERE(d,-2,-1) instead, the sum 4a + m is in [-8, -2]: never positive, while m is (1 or 2), so
    # splitting off a is not exact under truncation either: a = -1, m = 2 gives (-2)/4 = 0, not -1 + 0/4, and
    # (-2)%4 = -2, not 2%4 (b's upper end and the sum's must both be <= 0, not just the sum's)
    s2 = g.op("ADD", "int32", g.op("MUL", "int32", where(bd, -2, -1), k(4)), m)
    for op, split in (("CDIV", lambda a_, b_: a("ADD", a_, a("CDIV", b_, 4))), ("CMOD", lambda a_, b_: a("CMOD", b_, 4))):
        ab = [(-2 if d else -1, a("FLOORMOD", 5 if c else 10, 3)) for c, d in zip(cs, ds)]
        vals = [a(op, a("ADD", a("MUL", a_, 4), b_), 4) for a_, b_ in ab]
        assert any(v != split(a_, b_) for v, (a_, b_) in zip(vals, ab))  # the wrong split shows
        o(f"floormod_affine_{op.lower()}_nonpositive_sum", g.op(op, "int32", s2, k(4)), vals)
    # (-2a + b)/-2 with a = WHERE(c,1,2), b = WHERE(d,3,5) (C division): splitting off a (a + b/-2) is exact
    # only where b and the sum share a sign; for a = 2, b = 3 the sum is -1 (quotient 0, not 2 + -1). The
    # split is argued for divisors >= 2 only: a negative divisor swaps the ends of a*c's range
    o("affine_cdiv_neg_divisor",
      g.op("CDIV", "int32", g.op("ADD", "int32", g.op("MUL", "int32", where(bc, 1, 2), k(-2)), where(bd, 3, 5)),
           k(-2)),
      [a("CDIV", a("ADD", a("MUL", 1 if c else 2, -2), 3 if d else 5), -2) for c, d in zip(cs, ds)])
    # floor(floor(x/2)/-3) is not floor(x/-6) (x = 1: 0 vs -1): merging two floor divisions needs both
    # divisors positive, not just one
    o("floordiv2_floordiv_neg3", g.op("FLOORDIV", "int32", g.op("FLOORDIV", "int32", bx, k(2)), k(-3)),
      [a("FLOORDIV", a("FLOORDIV", x, 2), -3) for x in xs])
    # NEG of a positive and of a mixed range: [2, 5] -> [-5, -2], [-2, 3] -> [-3, 2] (both ends swap and negate;
    # negating only one end gives an empty or a too-narrow range, which the tight probes see)
    for lo_, hi_ in ((2, 5), (-2, 3)):
        r = g.op("NEG", "int32", where(bc, lo_, hi_))
        tight, tv = tight_probe(g, r, [a("SUB", 0, lo_ if c else hi_) for c in cs])
        o(f"neg_of_{lo_}_{hi_}_tight".replace("-", "m"), tight, tv)
    # a dividend whose range ends exactly at the divisor: WHERE(c,2,3) fmod and C-mod 3 is 2 or 0, so a range that
    # keeps the dividend's [2, 3] (right only below the divisor) leaves out the 0 the tight probe's bool part sees
    wm = where(bc, 2, 3)
    for op in ("FLOORMOD", "CMOD"):
        r = g.op(op, "int32", wm, k(3))
        tight, tv = tight_probe(g, r, [a(op, 2 if c else 3, 3) for c in cs])
        o(f"{op.lower()}_dividend_up_to_the_divisor_tight", tight, tv)
    # CAST(CAST(WHERE(c, 2, 300), int16), int64): every value survives int16, so the pair is one CAST from int32 to
    # int64 (cast_widen_chain), a node of another dtype than its operand's (the probes above all cast back to int32)
    o("where_via_int16_to_int64", g.cast(g.cast(where(bc, 2, 300), "int16"), "int64"),
      [N.cast("int16", "int64", N.cast("int32", "int16", 2 if c else 300)) for c in cs], "int64")
    C.add(GRP, "value_range_rules", g)

    # Its own case: tinygrad 0.14's CPU renderer has no MULACC (manifests/xfail.json).
    # MULACC((x&7), 2, WHERE(c,-1,0)) is in [-1, 14]: its addend can be negative, which uint8 wraps to 255
    g = G("CAST(CAST(MULACC(x&7, 2, WHERE(c,-1,0)), uint8), int32) for int32 x = 0,1,2,3,5,7,-1,11 and bool c: the "
          "MULACC is in [-1, 14] (its addend can be negative, which uint8 wraps to 255), and its tight probe; the tight "
          "probe of MULACC(x&7, 2, WHERE(c,-1,3)), which takes both ends of its range [-1, 17]; numerics.alu and "
          "numerics.cast",
          [GRP, "alu", "range", "int32", "mulacc"])
    bx = g.buffer("int32", n, data=xs)
    bc = g.buffer("bool", n, data=cs)
    m0 = g.op("MULACC", "int32", g.op("AND", "int32", bx, k(7)), k(2), where(bc, -1, 0))
    m0v = [N.alu("MULACC", "int32", a("AND", x, 7), 2, -1 if c else 0) for x, c in zip(xs, cs)]
    o("mulacc_via_u8", via_u8(m0), [i32_u8_i32(v) for v in m0v])
    o("mulacc_addend_max_0_tight", *tight_probe(g, m0, m0v))
    # MULACC(x&7, 2, WHERE(c,-1,3)) takes -1 and 17, the ends of its range [0,14] + [-1,3]: tight_probe
    m = g.op("MULACC", "int32", g.op("AND", "int32", bx, k(7)), k(2), where(bc, -1, 3))
    mv = [N.alu("MULACC", "int32", a("AND", x, 7), 2, -1 if c else 3) for x, c in zip(xs, cs)]
    assert (min(mv), max(mv)) == (-1, 17)
    o("mulacc_tight", *tight_probe(g, m, mv))
    C.add(GRP, "value_range_mulacc", g)

    # uint8: the loaded y has the range [0, 255] and y*3 the exact range [0, 765], which does not fit: the
    # product wraps (100*3 = 300 -> 44), so (y*3)/3 -> y must not fire (a range check that takes "exceeds the
    # dtype" for "fits" lets it). Its own case: tinygrad 0.14 CPU does not wrap the product (manifests/xfail.json)
    g = G("uint8 y = 100, 0, 85, 86, 255, 1, 171, 200: (y*3)/3 (C division) where the product wraps (300 -> 44, "
          "258 -> 2, 765 -> 253, 513 -> 1, 600 -> 88); numerics.alu (exact, wrapping)",
          [GRP, "alu", "range", "uint8", "cdiv"])
    by = g.buffer("uint8", n, data=ys)
    k3 = g.const("uint8", 3)
    out(g, "mul3_div3", g.op("CDIV", "uint8", g.op("MUL", "uint8", by, k3), k3),
        T([n], [N.alu("CDIV", "uint8", N.alu("MUL", "uint8", y, 3), 3) for y in ys], "uint8"))
    C.add(GRP, "value_range_rules_uint8_product", g)

    # WHERE with a constant condition: a simplifier may keep the chosen branch only if the other one, which it
    # drops, can have no UB; here the chosen branch is the constant and the dropped one is the loaded x (a LOAD
    # counts as possibly UB), so the WHERE stays, while a rule that reads the condition the wrong way round would
    # keep x and drop the constant.
    g = G("WHERE with a constant condition between a constant and a loaded int32 x = [1,2,3,4]: WHERE(true, 3, x) "
          "= [3,3,3,3] and WHERE(false, x, 7) = [7,7,7,7]; hand-derived", [GRP, "alu", "where", "int32"])
    bx = g.buffer("int32", 4, data=[1, 2, 3, 4])
    b4 = lambda dt, v: g.expand(g.const(dt, v), [4])  # noqa: E731
    out(g, "true_takes_const", g.op("WHERE", "int32", b4("bool", 1), b4("int32", 3), bx), T([4], [3] * 4, "int32"))
    out(g, "false_takes_const", g.op("WHERE", "int32", b4("bool", 0), bx, b4("int32", 7)), T([4], [7] * 4, "int32"))
    C.add(GRP, "where_constant_condition", g)


# -- fusion: kernel counts tinygrad 0.14's scheduler also chooses (GlobalCounters.kernel_count) -------------
def gen_fusion(C):
    def f32(vals):
        return [N.raw("float32", v) for v in vals]

    def mul(a, b):
        return N.alu("MUL", "float32", a, b)

    def add(a, b):
        return N.alu("ADD", "float32", a, b)

    two, one = N.raw("float32", 2), N.raw("float32", 1)

    g = G("an elementwise chain (x*2+1)*x is one kernel (nothing in it needs a buffer; tinygrad 0.14 also "
          "launches 1); float32 x = 0..5, exact", [GRP, "schedule", "fusion"])
    x, t = arange(g, "float32", 6)
    v = g.op("MUL", "float32", g.op("ADD", "float32", g.op("MUL", "float32", x, g.const("float32", two)),
                                     g.const("float32", one)), x)
    out(g, "chain", v, t.map(lambda e: mul(add(mul(e, two), one), e)))
    g.sched(kernels=1, copies=0)
    C.add(GRP, "fusion_elementwise_chain", g)

    g = G("a reduction followed by elementwise work on its result (sum over axis 0 of [2,3], times 2) is one kernel "
          "(tinygrad 0.14: 1); and PAD then FLIP then +1 is one kernel (tinygrad: 1); float32, exact",
          [GRP, "schedule", "fusion", "reduce"])
    x, t = arange(g, "float32", 6)
    r = g.reduce(g.reshape(x, [2, 3]), "ADD", 1)
    out(g, "sum2", g.op("MUL", "float32", r, g.const("float32", two)),
        t.reshape([2, 3]).reduce("ADD", 1).map(lambda e: mul(e, two)))
    g.sched(kernels=1, copies=0)
    C.add(GRP, "fusion_reduce_epilogue", g)

    g = G("PAD [6] by (2, 9) then FLIP then +1 is one kernel (movement is index arithmetic; tinygrad 0.14: 1); "
          "int32 0..5", [GRP, "schedule", "fusion", "pad"])
    x, t = arange(g, "int32", 6)
    v = g.op("ADD", "int32", g.flip(g.pad(x, [2], [9]), [True]), g.const("int32", 1))
    out(g, "pf1", v, t.pad([2], [9], 0).flip([True]).map(lambda e: e + 1))
    g.sched(kernels=1, copies=0)
    C.add(GRP, "fusion_movement_then_alu", g)

    g = G("two outputs of different values of the same inputs (a+b and a*b) are two kernels, one per output "
          "buffer (tinygrad 0.14: 2); and MAX and ADD reductions of one [2,3] tensor as two outputs: 2 more; int32",
          [GRP, "schedule", "fusion", "reduce"])
    a, ta = arange(g, "int32", 6, start=-2)
    b, tb = arange(g, "int32", 6, start=5, step=-3)
    out(g, "sum", g.op("ADD", "int32", a, b), T([6], [x + y for x, y in zip(ta.data, tb.data)], "int32"))
    out(g, "prod", g.op("MUL", "int32", a, b), T([6], [x * y for x, y in zip(ta.data, tb.data)], "int32"))
    m = g.reshape(a, [2, 3])
    out(g, "max0", g.reduce(m, "MAX", 1), ta.reshape([2, 3]).reduce("MAX", 1))
    out(g, "add0", g.reduce(m, "ADD", 1), ta.reshape([2, 3]).reduce("ADD", 1))
    g.sched(kernels=4, copies=0)
    C.add(GRP, "fusion_separate_outputs", g)


# -- a matmul the CPU target register-tiles --------------------------------------------------------------
def gen_matmul_tile(C):
    # [8,3] @ [3,16] float32: 8 rows divide into blocks of 4 and 16 columns into one tile of 16, so uopkit's
    # CPU target runs it through cpu_tile (a packed [3,16] panel, blocks of 4 rows x 16 accumulators). Each
    # element must still fold k = 0, 1, 2 from +0 in order, one rounding per MUL and per ADD: rows whose
    # products are 1e8, 1, -1e8 give (1e8 + 1) - 1e8 = 0 only in that order; -0 products sum to +0 from the
    # +0 identity; inf*0 and inf + -inf give NaN; a NaN input with a payload comes out as the canonical NaN;
    # 3e38 * 2 overflows to inf. Expected values: tensor.T's reduce (numerics.alu, exact, one rounding).
    dt = "float32"
    a_lits = ["inf", "-0.5", "1.0", "100000000.0", "1.0", "-100000000.0", "-0.0", "-0.0", "-0.0", "inf", "1.0",
              "-inf", "-1.5", "0.0", "1.5", "f32max", "f32max", "-f32max", "1.0", "-2.0", "-0.5", "0.0", "1.5",
              "-1.5"]
    b_vals = [-3, 0, 1, 2, -1, 3, 0, 2, 1, 2, 2, -1, 3, 0, -3, 1, 2, -1, 1, 0, -3, "nan", -2, 2, -1, 1, 0, -3,
              1, -2, 2, -1, 0, -3, 1, -2, 2, -1, 3, 3, -3, 1, -2, 2, -1, 3, 0, -3]
    big = N.round_fraction(dt, Q(3 * 10 ** 38))  # the float32 nearest 3e38

    def a_raw(v):
        if v.endswith("f32max"):
            return big | (0x80000000 if v.startswith("-") else 0)
        return N.raw(dt, v)

    a = [a_raw(v) for v in a_lits]
    b = [0x7FA01234 if v == "nan" else N.raw(dt, v) for v in b_vals]
    g = G("float32 [8,3] @ [3,16]: blocks that divide, so the CPU target's cpu_tile runs it (blocks of 4 rows x 16 "
          "columns of register accumulators, the [3,16] operand packed into a panel); each element folds k = 0, 1, 2 "
          "from +0 in order: (1e8 + 1) - 1e8 = 0, -0 products sum to +0, inf*0, inf + -inf, a NaN input with a "
          "payload, overflow to inf (expected values: Python doubles rounded to float32 after each op, k ascending "
          "from +0)", [GRP, "reduce", "matmul", "float32", "nan"])
    ba = g.buffer(dt, 24, data=a)
    va = rows_operand(g, ba, 8, 3, 16)
    bb = g.buffer(dt, 48, data=b)
    vb = cols_operand(g, bb, 3, 16, 8)
    ta = T([24], a, dt).reshape([8, 3]).expand([16]).permute([2, 1, 0])
    tb = T([48], b, dt).reshape([3, 16]).expand([8]).permute([1, 0, 2])
    prod = g.op("MUL", dt, va, vb)
    tp = T([3, 8, 16], [N.alu("MUL", dt, x, y) for x, y in zip(ta.data, tb.data)], dt)
    out(g, "y", g.reduce(prod, "ADD", 1), tp.reduce("ADD", 1))
    C.add(GRP, "matmul_register_tile", g)


def gen_matmul_k_blocks(C):
    # [50,2112] @ [2112,16] float32: a K*T panel of 2112*16 float32 is over cpu_tile's 128 KiB, so the CPU
    # target cuts k into two blocks of 1056 (the row panel's 2 x 16 accumulators of each of 5 blocks of 2
    # rows live in a register between blocks); 50 rows = 5 row panels of 10, so the outer loop has 5
    # iterations (threads, and the conformance cpu backend's 3-chunk rerun). Inputs are prng integers in
    # [-30000, 30000] (docs/case-format.md), so products reach 9e8 and sums 1e12: MUL and ADD both round in
    # float32, and any other fold order than k ascending from +0 shows. Expected values: Python doubles
    # rounded to float32 after each MUL and ADD (a product of two float32 is exact in a double; a sum of two
    # is rounded once correctly because 53 >= 2*24 + 1, so the double's rounding is innocuous), k ascending
    # from +0.
    import struct
    dt = "float32"
    m, k, n = 50, 2112, 16
    lo, hi = -30000, 30000

    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]

    a = splitmix64(61, m * k, lo, hi)
    b = splitmix64(62, k * n, lo, hi)
    rows = []
    for i in range(m):
        ai = a[i * k:(i + 1) * k]
        for j in range(n):
            acc = 0.0
            for kk in range(k):
                acc = f32(acc + f32(float(ai[kk]) * float(b[kk * n + j])))
            rows.append(struct.unpack("<I", struct.pack("<f", acc))[0])
    g = G("float32 [50,2112] @ [2112,16] from prng integers in [-30000, 30000]: the CPU target's cpu_tile cuts "
          "the [2112,16] panel (over 128 KiB) into two k blocks of 1056 and keeps each row panel's accumulators "
          "in a register between them; 5 row panels of 10 rows (blocks of 2); every MUL and ADD rounds "
          "(expected values: Python doubles rounded to float32 after each op, k ascending from +0)",
          [GRP, "reduce", "matmul", "float32"])
    ba = g.buffer(dt, m * k, init={"prng": {"seed": 61, "lo": lo, "hi": hi}})
    va = rows_operand(g, ba, m, k, n)
    bb = g.buffer(dt, k * n, init={"prng": {"seed": 62, "lo": lo, "hi": hi}})
    vb = cols_operand(g, bb, k, n, m)
    prod = g.op("MUL", dt, va, vb)
    out(g, "y", g.reduce(prod, "ADD", 1), T([m, n], rows, dt))
    C.add(GRP, "matmul_register_tile_k_blocks", g)


def gen_conv_tile(C):
    # A 1-D convolution with stride = kernel width, as the bench's conv: x [3, 512] read as 128 windows of 4
    # (RESHAPE [3,128,4], PERMUTE to [3,4,128]), w [8,3,4]; out[o, p] = sum over (c, k), row-major (c outer),
    # of x[c, 4p + k] * w[o, c, k]. Two reduced axes (c and k), and the operand that does not depend on the
    # output row o reads x with a stride of 4 along the output column p: uopkit's CPU target tiles it
    # (cpu_tile packs the strided windows into a contiguous panel and keeps one accumulator per element); with
    # 8 rows (384 bytes of w) and 8 column tiles of 16 (4 of 32 with AVX-512), the column tiles are the outer loop, which cpu_threads
    # runs on threads. Inputs are prng integers in [-30000, 30000] (docs/case-format.md): products reach 9e8
    # and every MUL and ADD rounds in float32, so any other fold order than (c, k) row-major from +0 shows.
    # Expected values: Python doubles rounded to float32 after each MUL and ADD (a product of two float32 is
    # exact in a double; a sum of two is rounded once correctly because 53 >= 2*24 + 1).
    import struct
    dt = "float32"
    ch, o, kw, length = 3, 8, 4, 512
    p = length // kw
    lo, hi = -30000, 30000

    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]

    x = splitmix64(63, ch * length, lo, hi)
    w = splitmix64(64, o * ch * kw, lo, hi)
    rows = []
    for oo in range(o):
        for pp in range(p):
            acc = 0.0
            for c in range(ch):
                for k in range(kw):
                    acc = f32(acc + f32(float(x[c * length + pp * kw + k]) * float(w[(oo * ch + c) * kw + k])))
            rows.append(struct.unpack("<I", struct.pack("<f", acc))[0])
    g = G("float32 1-D convolution, stride = kernel width: x [3,512] as 128 windows of 4, w [8,3,4], "
          "out[o,p] = sum over (c, k) row-major of x[c,4p+k]*w[o,c,k]: two reduced axes and a strided operand, "
          "which the CPU target's cpu_tile packs into a panel (column tiles outermost, on threads); prng integers "
          "in [-30000, 30000], so every MUL and ADD rounds (expected values: Python doubles rounded to float32 "
          "after each op, (c, k) row-major from +0)", [GRP, "reduce", "matmul", "conv", "float32"])
    bx = g.buffer(dt, ch * length, init={"prng": {"seed": 63, "lo": lo, "hi": hi}})
    vx = g.permute(g.expand(g.permute(g.reshape(bx, [ch, p, kw]), [0, 2, 1]), [o]), [1, 2, 0, 3])
    bw = g.buffer(dt, o * ch * kw, init={"prng": {"seed": 64, "lo": lo, "hi": hi}})
    vw = g.permute(g.expand(g.reshape(bw, [o, ch, kw]), [p]), [2, 3, 1, 0])
    prod = g.op("MUL", dt, vx, vw)
    out(g, "y", g.reduce(prod, "ADD", 2), T([o, p], rows, dt))
    C.add(GRP, "conv_register_tile_strided_windows", g)


# -- a sweep of the value-range analysis: every integer op on operands of each sign class ------------------
# Each operand is a constant (-5, -3 or 3) or a WHERE between two constants whose range is all negative [-5, -2],
# mixed [-2, 3] or all positive [2, 5]; the four elements take every pair of WHERE branches (c, d = TT, TF, FT,
# FF). Each result goes through three probes whose rewrites need its range: CAST(CAST(r, uint8), int32)
# (cast_widen_chain drops the pair when the range lies in [0, 255]), WHERE(r < 0, 7, 1) % 5 and its mirror
# WHERE(r < 0, 1, 7) % 5 (the comparison folds to a constant when the range lies on one side of 0, and the modulo
# folds when the WHERE's range lies below 5: the first probe sees a range that wrongly leaves out the negatives,
# the mirror one that wrongly leaves out 0 and the positives). A range computed too narrow for any op and sign class changes some element; the probes' values
# are numerics.alu and numerics.cast (exact, wrapping). No operand is 0, so no division is undefined; shift
# counts are only the non-negative classes.
RANGE_CLASSES = [("neg", -5, -2), ("mixed", -2, 3), ("pos", 2, 5)]
RANGE_CONSTS = [-5, -3, 3]
RANGE_OPS = ["ADD", "SUB", "MUL", "MAX", "AND", "OR", "XOR", "CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "SHL", "SHR",
             "CMPLT", "CMPNE", "CMPEQ"]


def gen_range_sweep(C):
    cs = [1, 1, 0, 0]
    ds = [1, 0, 1, 0]
    n = len(cs)
    a = lambda op, *xs: N.alu(op, "int32", *xs)  # noqa: E731
    for op in RANGE_OPS:
        g = G(f"value-range sweep of {op} int32: each operand a constant (-5, -3, 3) or WHERE(c|d, lo, hi) over "
              f"[-5,-2], [-2,3] or [2,5] (c, d = TT, TF, FT, FF), each result r probed by CAST(CAST(r, uint8), int32), "
              f"WHERE(r < 0, 7, 1) % 5 and WHERE(r < 0, 1, 7) % 5, and by (r - lo) % w + 64 * ((hi - r) % w) "
              f"+ 4096 * (WHERE(CAST(r, bool), 7, 1) % 5) + 32768 * (WHERE(CAST(r, bool), 1, 7) % 5) with lo, hi the least and "
              f"greatest values r takes, w = hi - lo"
              + (" (r = WHERE(cmp, 6, -1) for a comparison)" if op.startswith("CMP") else "")
              + (" (the count only from the non-negative classes)" if op in ("SHL", "SHR") else "")
              + "; numerics.alu and numerics.cast (exact, wrapping)",
              [GRP, "alu", "range", "int32", op.lower()])
        bc = g.buffer("bool", n, data=cs)
        bd = g.buffer("bool", n, data=ds)
        k = lambda v: g.const("int32", v)  # noqa: E731
        operands = [(f"k{v}".replace("-", "m"), lambda v=v: k(v), [v] * n) for v in RANGE_CONSTS]
        for cname, cond, conds in (("c", bc, cs), ("d", bd, ds)):
            for name, lo, hi in RANGE_CLASSES:
                operands.append((f"{name}_{cname}", lambda cond=cond, lo=lo, hi=hi: g.op("WHERE", "int32", cond, k(lo), k(hi)),
                                 [lo if t else hi for t in conds]))
        cmp = op.startswith("CMP")
        for xname, xnode, xv in operands:
            for yname, ynode, yv in operands:
                if xname.startswith("k") and yname.startswith("k"):
                    continue
                if xname[-1] == yname[-1] and not xname.startswith("k"):
                    continue  # both read the same condition: keep one condition per operand
                if op in ("SHL", "SHR") and min(yv) < 0:
                    continue
                if cmp:
                    node = g.op("WHERE", "int32", g.op(op, "bool", xnode(), ynode()), k(6), k(-1))
                    vals = [6 if a(op, x, y) else -1 for x, y in zip(xv, yv)]
                else:
                    node = g.op(op, "int32", xnode(), ynode())
                    vals = [a(op, x, y) for x, y in zip(xv, yv)]
                name = f"{xname}_{yname}"
                out(g, f"{name}_u8", g.cast(g.cast(node, "uint8"), "int32"),
                    T([n], [N.cast("uint8", "int32", N.cast("int32", "uint8", v)) for v in vals], "int32"))
                neg = g.op("CMPLT", "bool", node, k(0))
                out(g, f"{name}_sign", g.op("CMOD", "int32", g.op("WHERE", "int32", neg, k(7), k(1)), k(5)),
                    T([n], [a("CMOD", 7 if a("CMPLT", v, 0) else 1, 5) for v in vals], "int32"))
                # mirrored: a range that wrongly leaves out 0 and the positives makes the WHERE look like 1
                out(g, f"{name}_nsign", g.op("CMOD", "int32", g.op("WHERE", "int32", neg, k(1), k(7)), k(5)),
                    T([n], [a("CMOD", 1 if a("CMPLT", v, 0) else 7, 5) for v in vals], "int32"))
                tight, tv = tight_probe(g, node, vals)
                out(g, f"{name}_tight", tight, T([n], tv, "int32"))
        C.add(GRP, f"range_sweep_{op.lower()}", g)

    # Division and modulo by a constant 0 inside an empty reduction: never evaluated, so no UB and the sums are
    # the identity 0; a range analysis must still give the divisor-0 results a range (the value rules probe them
    # through the uint8 round trip) without failing.
    g = G("int32 [4] viewed as [0,4] (an empty axis first), FLOORMOD, FLOORDIV, CMOD and CDIV by the constant 0, "
          "each cast to uint8 and back and summed over the empty axis: never evaluated (no UB), every sum is the "
          "identity: [0, 0, 0, 0]; by hand", [GRP, "alu", "range", "int32", "reduce"])
    b = g.buffer("int32", 4, data=[1, -2, 3, -4])
    empty = g.permute(g.shrink(g.reshape(b, [4, 1]), [0, 0], [4, 0]), [1, 0])
    for op in ("FLOORMOD", "FLOORDIV", "CMOD", "CDIV"):
        r = g.op(op, "int32", empty, g.const("int32", 0))
        out(g, op.lower(), g.reduce(g.cast(g.cast(r, "uint8"), "int32"), "ADD", 1), T([4], [0] * 4, "int32"))
    C.add(GRP, "division_by_zero_in_an_empty_axis", g)


def gen_nan_operands(C):
    # A NaN computed by an arithmetic op reaches MAX as its first operand and WHERE as its false branch: the
    # oracle's ADD makes every NaN the canonical one (0x7fc00000, whatever the payload of the NaN it read), and
    # MAX and WHERE pass it on, so a backend that leaves the NaN's canonicalization to a later op must still
    # canonicalize these operands. x = [NaN with payload 1, 1.0]; numerics.alu per op (exact).
    dt = "float32"
    xs = [N.raw(dt, "0x7fc00001"), N.raw(dt, 1)]
    g = G("float32 x = [NaN payload 1 (0x7fc00001), 1.0], c = [F, F]: MAX(x + 1, 0) and WHERE(c, 0, x + 1) give "
          "[canonical NaN 0x7fc00000, 2.0] (ADD canonicalizes a NaN; MAX and WHERE pass it on); with y = [1, 2], "
          "d = [T, F], MAX(x + 1, y + 1) and WHERE(d, x + 1, y * 2), both operands computed, give [canonical NaN, "
          "3.0] and [canonical NaN, 4.0]; numerics.alu",
          [GRP, "alu", "nan", "float32"])
    bx = g.buffer(dt, 2, data=xs)
    bc = g.buffer("bool", 2, data=[0, 0])
    one, zero = N.raw(dt, 1), N.raw(dt, 0)
    s1 = g.op("ADD", dt, bx, g.const(dt, one))
    sums = [N.alu("ADD", dt, x, one) for x in xs]
    assert sums[0] == N.raw(dt, "0x7fc00000")
    out(g, "max_first", g.op("MAX", dt, s1, g.const(dt, zero)), T([2], [N.alu("MAX", dt, v, zero) for v in sums], dt))
    out(g, "where_false", g.op("WHERE", dt, bc, g.const(dt, zero), s1), T([2], sums, dt))
    # Both operands computed (neither a constant nor a load): MAX(x + 1, y + 1) and WHERE(d, x + 1, y * 2) with
    # y = [1, 2], d = [T, F] give [canonical NaN, 3.0] and [canonical NaN, 4.0].
    ys = [N.raw(dt, 1), N.raw(dt, 2)]
    by = g.buffer(dt, 2, data=ys)
    bd = g.buffer("bool", 2, data=[1, 0])
    two = N.raw(dt, 2)
    y1 = g.op("ADD", dt, by, g.const(dt, one))
    y2 = g.op("MUL", dt, by, g.const(dt, two))
    out(g, "max_both_computed", g.op("MAX", dt, s1, y1),
        T([2], [N.alu("MAX", dt, a, N.alu("ADD", dt, y, one)) for a, y in zip(sums, ys)], dt))
    out(g, "where_both_computed", g.op("WHERE", dt, bd, s1, y2),
        T([2], [a if d else N.alu("MUL", dt, y, two) for a, y, d in zip(sums, ys, [1, 0])], dt))
    C.add(GRP, "nan_into_max_and_where_operands", g)


def gen_padded_constant_compare(C):
    # CMPNE(p, 0) for p = PAD of four 1s to six (0, 1, 1, 1, 1, 0): the padded constant is a value whose range is
    # [0, 1] (not [1, 1], nor a single point), so the comparison is not constant; summed as float32: 4.0
    dt = "float32"
    g = G("PAD of EXPAND(int32 1, [4]) by 1 on each side = [0,1,1,1,1,0]; CAST(p != 0, float32) summed: 4.0; "
          "likewise 0 != p: 4.0, 0 == p: 2.0, p == 0: 2.0, p < 1: 2.0 (exact)",
          [GRP, "alu", "range", "pad", "reduce"])
    p = g.pad(g.expand(g.const("int32", 1), [4]), [1], [6])
    ne = g.op("CMPNE", "bool", p, g.const("int32", 0))
    vals = [N.alu("CMPNE", "int32", v, 0) for v in [0, 1, 1, 1, 1, 0]]
    tot = N.reduce_identity("ADD", dt)
    for v in vals:
        tot = N.alu("ADD", dt, tot, N.raw(dt, v))
    assert tot == N.raw(dt, 4)
    out(g, "count", g.reduce(g.cast(ne, dt), "ADD", 1), T([], [tot], dt))
    # the same comparisons with the constant first, CMPEQ both ways round, and p < 1: a point range ([0, 0])
    # against [0, 1] is neither disjoint from it nor the same point
    pv = [0, 1, 1, 1, 1, 0]
    for name, opn, first_const, cval, f in (
            ("ne_const_first", "CMPNE", True, 0, lambda v: N.alu("CMPNE", "int32", 0, v)),
            ("eq_const_first", "CMPEQ", True, 0, lambda v: N.alu("CMPEQ", "int32", 0, v)),
            ("eq_pad_first", "CMPEQ", False, 0, lambda v: N.alu("CMPEQ", "int32", v, 0)),
            ("lt_one", "CMPLT", False, 1, lambda v: N.alu("CMPLT", "int32", v, 1))):
        kc = g.const("int32", cval)
        cmp = g.op(opn, "bool", kc, p) if first_const else g.op(opn, "bool", p, kc)
        t = N.reduce_identity("ADD", dt)
        for v in pv:
            t = N.alu("ADD", dt, t, N.raw(dt, f(v)))
        out(g, name, g.reduce(g.cast(cmp, dt), "ADD", 1), T([], [t], dt))
    C.add(GRP, "padded_constant_compared_with_zero", g)


def gen_value_rule_limits(C):
    # Two of the GPU pass list's range-checked rules at the edge of their conditions.
    # x / c -> 0 and x % c -> x need 0 <= x < c: a padded constant -5 (PAD(EXPAND(-5, [2])) = [0, -5, -5, 0],
    # range [-5, 0], free of UB) is below c = 3, yet not in [0, 3), so neither may fire.
    g = G("a padded constant below the divisor: PAD(EXPAND(int32 -5, [2])) = [0,-5,-5,0] divided by 3 (C and floor "
          "division and modulo): [0,-1,-1,0], [0,-2,-2,0], [0,-2,-2,0], [0,1,1,0]; numerics.alu",
          [GRP, "alu", "range", "int32", "cdiv", "floordiv", "cmod", "floormod", "pad"])
    pv = [0, -5, -5, 0]
    p = g.pad(g.expand(g.const("int32", -5), [2]), [1], [4])
    for op in ("CDIV", "FLOORDIV", "CMOD", "FLOORMOD"):
        vals = [N.alu(op, "int32", v, 3) for v in pv]
        out(g, f"{op.lower()}_3", g.op(op, "int32", p, g.const("int32", 3)), T([4], vals, "int32"))
    C.add(GRP, "padded_negative_constant_divided", g)
    # (x / c1) / c2 -> x / (c1*c2) needs c1*c2 to be a value of the dtype: 65536 * 65536 is not an int32 and
    # 2^32 * 2^32 is not an int64, so both divisions must stay (C and floor division, the dtypes' extremes and
    # values near 0).
    for dt, c, xs in (("int32", 1 << 16, [-(1 << 31), -(1 << 16) - 1, -(1 << 16), -1, 0, 1, (1 << 16) - 1, (1 << 31) - 1]),
                      ("int64", 1 << 32, [-(1 << 63), -(1 << 32) - 1, -1, 0, 1, (1 << 32), (1 << 63) - 1])):
        assert c * c > (1 << (63 if dt == "int64" else 31)) - 1  # c*c is not a value of dt
        g = G(f"(x/{c})/{c} on {dt}, C and floor division: {c}*{c} is not a {dt}, so the two divisions cannot "
              "be merged into one; numerics.alu", [GRP, "alu", "range", dt, "cdiv", "floordiv"])
        bx = g.buffer(dt, len(xs), data=xs)
        for op in ("CDIV", "FLOORDIV"):
            inner = g.op(op, dt, bx, g.const(dt, c))
            vals = [N.alu(op, dt, N.alu(op, dt, x, c), c) for x in xs]
            out(g, f"{op.lower()}_twice", g.op(op, dt, inner, g.const(dt, c)), T([len(xs)], vals, dt))
        C.add(GRP, f"division_chain_past_{dt}", g)


def gen_doubling_dag(C):
    # y_0 = x, y_{k+1} = y_k + y_k, 40 times: a graph of 41 nodes whose expression tree has 2^40 leaves. Each
    # stage (lowering, rewriting, rendering) must treat it as the DAG it is; one that expands it as a tree
    # never ends. y_40 = x * 2^40, exact in float32 for these x (each ADD doubles: one rounding, none inexact).
    xs = [Q(1), Q(-3), Q(1, 2)]
    g = G("y = x; y = y + y, 40 times (41 nodes, an expression tree of 2^40 leaves) for float32 x = 1, -3, 0.5: "
          "x * 2^40, exact (Fraction)", [GRP, "alu", "float32", "dag"])
    dt = "float32"
    y = g.buffer(dt, 3, data=[N.raw(dt, v) for v in xs])
    vals = [N.raw(dt, v) for v in xs]
    for _ in range(40):
        y = g.op("ADD", dt, y, y)
        vals = [N.alu("ADD", dt, v, v) for v in vals]
    assert vals == [N.raw(dt, v * 2 ** 40) for v in xs]
    out(g, "y40", y, T([3], vals, dt))
    C.add(GRP, "doubling_dag_40", g)


def gen_buffer_chain(C):
    # Two intermediate buffers in a row: t1 = CONTIGUOUS(x + 1), t2 = CONTIGUOUS(PERMUTE(t1)), y = t2 * 2. t2's kernel
    # reads t1 transposed while it writes t2, so t1 and t2 must not share storage (t1 lives until that kernel
    # ends); x = [[1,2],[3,4]]: t1 = [[2,3],[4,5]], t2 = [[2,4],[3,5]], y = [[4,8],[6,10]] (exact)
    dt = "float32"
    g = G("float32 x = [[1,2],[3,4]]; t1 = CONTIGUOUS(x+1), t2 = CONTIGUOUS(PERMUTE(t1, [1,0])), y = t2*2: "
          "[[4,8],[6,10]] (a kernel that reads one buffer transposed while writing the next; exact)",
          [GRP, "schedule", "memory"])
    x = g.buffer(dt, 4, data=[N.raw(dt, v) for v in (1, 2, 3, 4)])
    one, two = N.raw(dt, 1), N.raw(dt, 2)
    t1 = g.op("CONTIGUOUS", dt, g.op("ADD", dt, g.reshape(x, [2, 2]), g.const(dt, one)))
    t2 = g.op("CONTIGUOUS", dt, g.permute(t1, [1, 0]))
    tx = T([4], [N.raw(dt, v) for v in (1, 2, 3, 4)], dt).reshape([2, 2])
    exp = tx.map(lambda e: N.alu("ADD", dt, e, one)).permute([1, 0]).map(lambda e: N.alu("MUL", dt, e, two))
    out(g, "y", g.op("MUL", dt, t2, g.const(dt, two)), exp)
    C.add(GRP, "transposed_copy_between_buffers", g)


def gen_inplace_reduce(C):
    # b += sum(x) in place, the sum first: b = [10], x = 16 ones (int32), so b becomes 10 + 16 = 26. The sum
    # and the add fuse into one kernel that reads b and writes it; a GPU kernel that reduces with several work
    # items must let one of them read, add and store, or b gets the sum added once per work item.
    dt = "int32"
    g = G("int32 b = [10]; b = REDUCE(ADD, x as [16,1]) + b stored into b in place, x = 16 ones: [26] (exact "
          "integers)", [GRP, "store", "reduce", "int32"])
    b = g.buffer(dt, 1, data=[10])
    x = g.buffer(dt, 16, data=[1] * 16)
    r = g.reduce(g.reshape(x, [16, 1]), "ADD", 1)
    st = g.store(b, g.op("ADD", dt, r, b))
    out(g, "b", g.after(b, st), T([1], [26], dt))
    C.add(GRP, "inplace_sum_into_its_own_operand", g)


def gen_grid_limit(C):
    # A GPU launches at most 65535 workgroups along its y and z axes. x = arange(2n) int32 as [n, 2], transposed into
    # a [2, n] buffer (CONTIGUOUS) whose rows are then summed. The copy's outer loop (2) becomes gidx0; its inner loop
    # (n, odd, so no power-of-two workgroup divides it) becomes gidx1 for n = 65535, exactly the limit, and must stay
    # a loop for n = 65537, which as gidx1 would launch 65537 workgroups along y. Row i holds x[2j + i] = 2j + i for
    # j < n: sum_i = n(n - 1) + n i, wrapped to int32 (exact integers).
    dt = "int32"
    g = G("int32 x = arange(2n) as [n, 2] transposed into a [2, n] buffer (CONTIGUOUS) whose rows are summed, for "
          "n = 65535 (a GPU's y-axis limit of workgroups: the copy may launch them all) and n = 65537 (past it) "
          "(expected values: exact integers, sum_i = n(n - 1) + n i wrapped to int32)", [GRP, "gpu", "launch", "int32"])
    for n in (65535, 65537):
        x = g.buffer(dt, 2 * n, init={"arange": {"start": 0, "step": 1}})
        t = g.op("CONTIGUOUS", dt, g.permute(g.reshape(x, [n, 2]), [1, 0]))
        s = g.reduce(g.permute(t, [1, 0]), "ADD", 1)
        sums = [N.wrap(dt, sum(2 * j + i for j in range(n))) for i in range(2)]
        assert sums == [N.wrap(dt, n * (n - 1) + n * i) for i in range(2)]
        out(g, f"row_sums_{n}", s, T([2], sums, dt))
    C.add(GRP, "transposes_at_and_past_a_gpu_grid_limit_int32", g)


def gen_reduce_in_a_gpu_loop(C):
    # Four output axes: a GPU grid has three, so the innermost output loop stays a loop in each work item, and
    # the int32 sum inside it (order-free, so otherwise split over a workgroup's items in local memory) must stay
    # one item's sequential fold: a local-memory tree inside a loop would be rewritten by the next iteration while
    # other items still read it. x = arange(120) as [5, 2, 2, 2, 3] (the reduced axis first), summed over it:
    # out[a,b,c,d] = sum_k (24k + 12a + 6b + 3c + d) = 240 + 5 * (12a + 6b + 3c + d) (exact integers).
    dt = "int32"
    g = G("int32 x = arange(120) as [5, 2, 2, 2, 3] summed over its first axis: four output axes, one more than a GPU "
          "grid, so the sum sits inside the work items' remaining loop; the same in float32 with a declared split(3) "
          "(expected values: exact integers, out = 240 + 5 * (flat output index), exact in float32 too)", [GRP, "gpu", "reduce", "int32"])
    x = g.buffer(dt, 120, init={"arange": {"start": 0, "step": 1}})
    s = g.reduce(g.reshape(x, [5, 2, 2, 2, 3]), "ADD", 1)
    vals = [sum(24 * k + o for k in range(5)) for o in range(24)]
    assert vals == [240 + 5 * o for o in range(24)]
    out(g, "sums", s, T([2, 2, 2, 3], vals, dt))
    # The same sum in float32 with a declared split(3): three work items fold the oracle's three accumulators
    # and every item then reads all three partials from local memory, which the next iteration of the loop
    # would overwrite. Small integers: every partial and sum is exact, so the order cannot change a bit.
    xf = g.buffer("float32", 120, data=[N.raw("float32", v) for v in range(120)])
    sf = g.reduce(g.reshape(xf, [5, 2, 2, 2, 3]), "ADD", 1, order={"split": 3})
    out(g, "sums_split3_float32", sf, T([2, 2, 2, 3], [N.raw("float32", v) for v in vals], "float32"))
    C.add(GRP, "sum_inside_a_gpu_work_items_loop_int32", g)


# -- the guards of the CPU loop passes: shapes and orders a pass must leave alone ------------------------
def split_fold(op, dt, xs, k):
    """A REDUCE declared split(k) (docs/ir.md): element i goes to accumulator i mod k, each accumulator
    folds its elements in order from the identity, and the accumulators combine left to right from the
    first (numerics.alu: exact, one rounding per op)."""
    accs = [N.reduce_identity(op, dt)] * k
    for i, x in enumerate(xs):
        accs[i % k] = N.alu(op, dt, accs[i % k], x)
    acc = accs[0]
    for a in accs[1:]:
        acc = N.alu(op, dt, acc, a)
    return acc


def gen_pass_guards(C):
    # A [4,2] float32 sum over axis 0 declared split(2): cpu_interchange may move the output axis j inside
    # the reduce loop only where each element's fold keeps its declared order (sequential, or an order-free
    # integer fold); a float split(2) is neither (float ADD is commutative but not associative), so the
    # loop nest must keep the two accumulators. Column 0 is [1e8, 1, -1e8, 1]: split(2) gives
    # ((0 + 1e8) + -1e8) + ((0 + 1) + 1) = 2, sequential (1e8 + 1 rounds to 1e8) gives 1.
    dt = "float32"
    lits = ["100000000.0", "1.0", "1.0", "2.0", "-100000000.0", "3.0", "1.0", "4.0"]
    vals = [N.raw(dt, v) for v in lits]
    g = G("float32 [4,2] summed over axis 0 declared split(2): each column folds elements 0, 2 and 1, 3 into two "
          "accumulators combined left to right, so column [1e8, 1, -1e8, 1] gives (1e8 + -1e8) + (1 + 1) = 2 where "
          "the sequential order gives 1 (a CPU pass that moves the column loop inside the reduce loop must keep "
          "that order: float ADD is not associative); column [1, 2, 3, 4] gives 10 either way (expected values: "
          "numerics.alu per op, in the declared order)", [GRP, "reduce", "order", "float32"])
    b = g.buffer(dt, 8, data=vals)
    t = T([8], vals, dt).reshape([4, 2])
    cols = [split_fold("ADD", dt, [t.at([i, j]) for i in range(4)], 2) for j in range(2)]
    assert cols == [N.raw(dt, "2.0"), N.raw(dt, "10.0")]
    g.output("split2", g.reduce(g.reshape(b, [4, 2]), "ADD", 1, {"split": 2}), [2], cols)
    C.add(GRP, "columns_declared_split_float32", g)

    # The same order in a matmul the CPU register tile would take: [4,4] @ [4,16] float32 (blocks that divide),
    # summed over k declared split(2). The tile folds each element's k in order from +0, so it must leave a
    # matmul whose declared order is another alone. Row 0 of A is [1e8, 1, -1e8, 1] and B is all ones: split(2)
    # gives 2, sequential 1; the other rows are small integers (exact in any order).
    a_lits = ["100000000.0", "1.0", "-100000000.0", "1.0"] + [str(float(v)) for v in range(1, 13)]
    av = [N.raw(dt, v) for v in a_lits]
    bv = [N.raw(dt, "1.0")] * 64
    g = G("float32 [4,4] @ [4,16] summed over k declared split(2) (a shape the CPU register tile takes): row 0 of A is "
          "[1e8, 1, -1e8, 1] and B all ones, so every element of row 0 is (1e8 + -1e8) + (1 + 1) = 2 in the declared "
          "order where k ascending gives 1; rows 1 to 3 are small integers (expected values: numerics.alu per op, "
          "in the declared order)", [GRP, "reduce", "matmul", "order", "float32"])
    ba = g.buffer(dt, 16, data=av)
    va = rows_operand(g, ba, 4, 4, 16)
    bb = g.buffer(dt, 64, data=bv)
    vb = cols_operand(g, bb, 4, 16, 4)
    ta = T([16], av, dt).reshape([4, 4])
    want = [split_fold("ADD", dt, [N.alu("MUL", dt, ta.at([i, k]), N.raw(dt, "1.0")) for k in range(4)], 2)
            for i in range(4) for _ in range(16)]
    assert want[0] == N.raw(dt, "2.0") and want[16] == N.raw(dt, "10.0")
    g.output("y", g.reduce(g.op("MUL", dt, va, vb), "ADD", 1, {"split": 2}), [4, 16], want)
    C.add(GRP, "matmul_declared_split_float32", g)

    # A float32 sum of 0..1199 declared split(1100): more accumulators than the CPU lanes pass (up to 1024) and
    # the GPU local reduction (up to 256) take, so the generic lowering into k accumulators runs everywhere.
    # Accumulator j folds elements j and j + 1100 (j < 100) or j alone; a count of elements per accumulator
    # that is too large makes some accumulator read past the end of the axis (element 1200, 1201). Every
    # partial sum is an integer below 2^24, exact in float32 in any order: 719400 = 1199 * 1200 / 2.
    dt = "float32"
    g = G("float32 arange 0..1199 summed declared split(1100): 100 accumulators fold two elements (j, j + 1100), "
          "1000 fold one, combined left to right; every partial is an integer below 2^24, so the sum is exactly "
          "719400 (expected value: numerics.alu per op, in the declared order)", [GRP, "reduce", "order", "float32"])
    b = g.buffer(dt, 1200, init={"arange": {"start": 0, "step": 1}})
    tot = split_fold("ADD", dt, [N.raw(dt, Q(i)) for i in range(1200)], 1100)
    assert tot == N.raw(dt, "719400.0")
    g.output("sum", g.reduce(b, "ADD", 1, {"split": 1100}), [], [tot])
    C.add(GRP, "declared_split_wider_than_lanes_float32", g)

    # The same split(1100) on data where the order shows in the bits: x[0] = 1e8, x[1] = -1e8, x[1100] = 1,
    # zeros elsewhere. Accumulator 0 folds x[0] and x[1100]: 1e8 + 1 rounds back to 1e8 (float32 spacing is 8
    # at 1e8); accumulator 1 is -1e8, the others +0; combined left to right: 1e8 + -1e8 = 0, then + 0s: 0.0.
    # Folded sequentially (an order the declaration does not allow) the sum is (1e8 + -1e8) + 1 = 1.0.
    lits = [0] * 1200
    lits[0], lits[1], lits[1100] = 10 ** 8, -(10 ** 8), 1
    xs = [N.raw(dt, v) for v in lits]
    tot = split_fold("ADD", dt, xs, 1100)
    assert tot == N.raw(dt, 0) and seq_fold("ADD", dt, xs) == N.raw(dt, 1)
    g = G("float32 [1e8, -1e8, 0 ..., 1 (at 1100), 0 ...] (1200 elements) summed declared split(1100): "
          "accumulator 0 folds 1e8 and 1 (1e8 + 1 rounds to 1e8), accumulator 1 is -1e8, combined left to right: "
          "0.0, where the sequential order gives 1.0; more accumulators than the CPU lanes and GPU local passes "
          "take (expected value: numerics.alu per op, in the declared order)", [GRP, "reduce", "order", "float32"])
    b = g.buffer(dt, 1200, data=xs)
    g.output("sum", g.reduce(b, "ADD", 1, {"split": 1100}), [], [tot])
    C.add(GRP, "declared_split_wider_than_lanes_order_float32", g)

    # 65537 float32 ones summed declared split(65537): one element per accumulator, every partial an integer
    # below 2^24, so the sum is exactly 65537.0. More accumulators than the kernel interpreter runs work items in
    # one workgroup (65536; real GPUs allow 1024): a GPU pass must fold them in a loop, not one work item each.
    g = G("65537 float32 ones summed declared split(65537): each accumulator folds one 1.0, combined left to "
          "right: 65537.0, exact in float32 (expected value: numerics.alu per op, in the declared order); more "
          "accumulators than work items in one workgroup (65536 in the kernel interpreter, 1024 on real GPUs)", [GRP, "reduce", "order", "float32"])
    b = g.buffer(dt, 65537, init={"fill": "1.0"})
    tot = split_fold("ADD", dt, [N.raw(dt, 1)] * 65537, 65537)
    assert tot == N.raw(dt, 65537)
    g.output("sum", g.reduce(b, "ADD", 1, {"split": 65537}), [], [tot])
    C.add(GRP, "declared_split_wider_than_a_workgroup_float32", g)

    # int32 [2,2] @ [2,10]: 10 columns are not a multiple of the CPU register tile's widths (16 or 8 int32),
    # so cpu_tile must leave the matmul to cpu_interchange; a tile of another width would have to cover all
    # 10 columns with its 8-lane vectors. Expected values: tensor.T's reduce (exact integers, k ascending).
    dt = "int32"
    a = [1, -2, 3, 4]
    bv = list(range(1, 21))
    g = G("int32 [2,2] @ [2,10]: 2 rows and 10 columns (not a multiple of 8 or 16 int32 lanes, so no CPU register "
          "tile fits; every column, 8 and 9 included, is a sum of k = 0, 1; expected values: exact integers, "
          "k ascending)", [GRP, "reduce", "matmul", "int32"])
    ba = g.buffer(dt, 4, data=a)
    va = rows_operand(g, ba, 2, 2, 10)
    bb = g.buffer(dt, 20, data=bv)
    vb = cols_operand(g, bb, 2, 10, 2)
    ta = T([4], a, dt).reshape([2, 2]).expand([10]).permute([2, 1, 0])
    tb = T([20], bv, dt).reshape([2, 10]).expand([2]).permute([1, 0, 2])
    tp = T([2, 2, 10], [N.alu("MUL", dt, x, y) for x, y in zip(ta.data, tb.data)], dt)
    y = tp.reduce("ADD", 1)
    assert y.data[:10] == [1 * j - 2 * (10 + j) for j in range(1, 11)]
    out(g, "y", g.reduce(g.op("MUL", dt, va, vb), "ADD", 1), y)
    C.add(GRP, "matmul_columns_no_tile_width_int32", g)

    # float32 [4,3] @ [3,90]: 90 columns are a multiple of neither tile width (2V or V float32 lanes: 16 or 8 with
    # AVX2, 32 or 16 with AVX-512), so no CPU register tile may take it; a tile of another width (10 or 18 columns:
    # V + 2) would divide 90 and cover columns its vectors do not hold. Small integers: every product and sum is
    # exact in float32 (expected values: exact integers, k ascending).
    dt = "float32"
    m_, k_, n_ = 4, 3, 90
    # No factor is 0: a -0 product would make the sum's sign depend on starting from +0 (tinygrad starts from
    # the first product), which is not what this case is about.
    av = [(-3, -2, -1, 1, 2, 3)[i % 6] for i in range(m_ * k_)]
    bv = [(-2, -1, 1, 2)[i % 4] for i in range(k_ * n_)]
    g = G("float32 [4,3] @ [3,90] of small nonzero integers: 90 columns are a multiple of neither CPU tile width (16, 32 or 8 "
          "float32 lanes), so no register tile fits (one of 10 or 18 columns would divide 90); every product and sum "
          "is exact (expected values: exact integers, k ascending)", [GRP, "reduce", "matmul", "float32"])
    ba = g.buffer(dt, m_ * k_, data=[N.raw(dt, v) for v in av])
    va = rows_operand(g, ba, m_, k_, n_)
    bb = g.buffer(dt, k_ * n_, data=[N.raw(dt, v) for v in bv])
    vb = cols_operand(g, bb, k_, n_, m_)
    want = [N.raw(dt, sum(av[i * k_ + kk] * bv[kk * n_ + j] for kk in range(k_))) for i in range(m_) for j in range(n_)]
    g.output("y", g.reduce(g.op("MUL", dt, va, vb), "ADD", 1), [m_, n_], want)
    C.add(GRP, "matmul_columns_no_tile_width_float32", g)

    # float32 [2,3] @ [3,16]: 16 columns fit a CPU register tile's width, but 2 rows are fewer than its largest row block;
    # the tile must cover both rows (or not fire). Small integers: every product and sum is exact in float32.
    dt = "float32"
    a = [1, -2, 3, 4, 5, -6]
    bv = [(i % 7) - 3 for i in range(48)]
    g = G("float32 [2,3] @ [3,16] of small integers: 2 rows (fewer than the CPU register tile's largest row block, 4), 16 columns; "
          "every product and sum is an integer below 2^24, exact in float32 (expected values: exact integers, k "
          "ascending)", [GRP, "reduce", "matmul", "float32"])
    ba = g.buffer(dt, 6, data=[N.raw(dt, v) for v in a])
    va = rows_operand(g, ba, 2, 3, 16)
    bb = g.buffer(dt, 48, data=[N.raw(dt, v) for v in bv])
    vb = cols_operand(g, bb, 3, 16, 2)
    rows = [N.raw(dt, sum(a[i * 3 + kk] * bv[kk * 16 + j] for kk in range(3))) for i in range(2) for j in range(16)]
    out(g, "y", g.reduce(g.op("MUL", dt, va, vb), "ADD", 1), T([2, 16], rows, dt))
    C.add(GRP, "matmul_two_rows_float32", g)

    # float32 1..5 summed declared split(2): 5 elements do not fill the last pair of lanes, so the lanes loop
    # needs a tail (accumulator 0 folds 1, 3, 5 and accumulator 1 folds 2, 4: 9 + 6 = 15)
    g = G("float32 [1,2,3,4,5] summed declared split(2): accumulators (1+3+5) and (2+4), 15; 5 is not a multiple "
          "of the 2 lanes (expected value: numerics.alu per op, in the declared order)", [GRP, "reduce", "order", "float32"])
    xs = [N.raw(dt, v) for v in (1, 2, 3, 4, 5)]
    b = g.buffer(dt, 5, data=xs)
    tot = split_fold("ADD", dt, xs, 2)
    assert tot == N.raw(dt, 15)
    g.output("sum", g.reduce(b, "ADD", 1, {"split": 2}), [], [tot])
    C.add(GRP, "split2_odd_length_float32", g)

    # int32 [8] summed declared split(2): the sum wraps (2^31 - 1 + (-2^31) + (-2^31) wraps twice), and an
    # integer sum's bits do not depend on the order, so any order gives 2^31 - 22. gcc 12.2 at -O2 miscompiled
    # the two-lane register array uopkit used to emit for it (it returned p1 + p3 + p2 + p6); uopkit now lowers
    # an order-free integer fold as one accumulator. Expected value: Python's exact integers, wrapped to int32.
    dt = "int32"
    vals = [2 ** 31 - 1, -8, -2 ** 31, 2, -2 ** 31, -6, -4, -5]
    tot = (sum(vals) + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert tot == 2 ** 31 - 22
    g = G("int32 [2^31-1, -8, -2^31, 2, -2^31, -6, -4, -5] summed declared split(2): the sum wraps to 2^31 - 22 in "
          "any order (a two-lane array of partial sums is what gcc 12.2 -O2 miscompiled; expected value: exact "
          "integers wrapped to int32)", [GRP, "reduce", "order", "int32"])
    b = g.buffer(dt, 8, data=[N.raw(dt, v) for v in vals])
    g.output("sum", g.reduce(b, "ADD", 1, {"split": 2}), [], [N.raw(dt, tot)])
    C.add(GRP, "int32_sum_declared_split2", g)

    # A float32 [2,1040] summed over axis 0: one output row of 1040 columns, longer than the CPU passes'
    # widest register row (1024), so cpu_interchange must cover it in tiles whose width divides 1040 (or
    # none): every column, 1024..1039 included, is x[0, j] + x[1, j] = j + (1040 + j), exact in float32.
    dt = "float32"
    g = G("float32 arange 0..2079 as [2,1040] summed over axis 0: 1040 columns, more than one CPU register row "
          "(1024) holds; column j is j + (1040 + j) = 1040 + 2j, exact in float32 (expected values: exact "
          "integers)", [GRP, "reduce", "float32"])
    b = g.buffer(dt, 2080, init={"arange": {"start": 0, "step": 1}})
    cols = [N.alu("ADD", dt, N.alu("ADD", dt, N.reduce_identity("ADD", dt), N.raw(dt, Q(j))), N.raw(dt, Q(1040 + j)))
            for j in range(1040)]
    assert cols[1039] == N.raw(dt, Q(1040 + 2 * 1039))
    out(g, "y", g.reduce(g.reshape(b, [2, 1040]), "ADD", 1), T([1040], cols, dt))
    C.add(GRP, "long_row_sum_float32", g)


def gen_range_operands(C):
    # Range-checked rules on operands whose range analysis is easy to get wrong at its edges: a shift count
    # whose range has one end out of range ([-1, 1]: the shift's range must stay unknown, never computed from
    # the out-of-range corner), and a comparison of two loaded values (both with the dtype's full range, which
    # are equal ranges but not one point: x != y can be either).
    cs = [0, 0]
    bs = [0, 1]
    xs = [1, 2]
    ys = [1, 3]
    g = G("range edges: SHR(12, WHERE(c, -1, CAST(b, int32))) % 8 for c = [F, F], b = [F, T] (counts 0, 1; the -1 "
          "branch is never taken): [4, 6]; WHERE(x != y, 5, 1) % 3 for loaded int32 x = [1, 2], y = [1, 3]: [1, 2]; "
          "CMOD(FLOORMOD(x, 4), 2) for x = [-1, -6, 5, 7]: [1, 0, 1, 1]; numerics.alu (exact, wrapping)",
          [GRP, "alu", "range", "int32", "shift", "cmod", "floormod"])
    bc = g.buffer("bool", 2, data=cs)
    bb = g.buffer("bool", 2, data=bs)
    k = lambda v: g.const("int32", v)  # noqa: E731
    a = lambda op, x, y: N.alu(op, "int32", x, y)  # noqa: E731
    cnt = g.op("WHERE", "int32", bc, k(-1), g.cast(bb, "int32"))
    counts = [-1 if c else b for c, b in zip(cs, bs)]
    out(g, "shr_count_edge_mod8", g.op("CMOD", "int32", g.op("SHR", "int32", k(12), cnt), k(8)),
        T([2], [a("CMOD", a("SHR", 12, s), 8) for s in counts], "int32"))
    bx = g.buffer("int32", 2, data=xs)
    by = g.buffer("int32", 2, data=ys)
    ne = g.op("CMPNE", "bool", bx, by)
    out(g, "ne_loads_sel_mod3", g.op("CMOD", "int32", g.op("WHERE", "int32", ne, k(5), k(1)), k(3)),
        T([2], [a("CMOD", 5 if N.alu("CMPNE", "int32", x, y) else 1, 3) for x, y in zip(xs, ys)], "int32"))
    # (x fmod 4) cmod 2: the inner floor modulo is never negative, so the outer C modulo is not x cmod 2 for a
    # negative x (-1 fmod 4 = 3, 3 cmod 2 = 1, while -1 cmod 2 = -1): only a modulo of the same kind folds
    zs = [-1, -6, 5, 7]
    bz = g.buffer("int32", 4, data=zs)
    out(g, "cmod_of_floormod", g.op("CMOD", "int32", g.op("FLOORMOD", "int32", bz, k(4)), k(2)),
        T([4], [a("CMOD", a("FLOORMOD", z, 4), 2) for z in zs], "int32"))
    C.add(GRP, "value_range_edges", g)

    # Its own case: tinygrad 0.14 CPU does not wrap the int8 sum before dividing (manifests/xfail.json).
    g = G("int8 (WHERE(c,-32,-1)*4 + WHERE(d,-1,0)) / 4 (C division) where -32*4 + -1 = -129 wraps to 127: "
          "[31, -32, -1, -1] for c = [T, T, F, F], d = [T, F, T, F]; numerics.alu (exact, wrapping)",
          [GRP, "alu", "range", "int8", "cdiv"])
    # (a*4 + b)/4 -> a + b/4 only where a*4 + b cannot wrap: in int8, a = -32 and b = -1 give -129, which wraps
    # to 127 (127/4 = 31, not -32 + 0); a sum range computed with the wrong sign on one end, or the wrap test
    # read the wrong way round, lets the rewrite fire
    a8 = lambda op, x, y: N.alu(op, "int8", x, y)  # noqa: E731
    k8 = lambda v: g.const("int8", v)  # noqa: E731
    ca = [1, 1, 0, 0]
    db = [1, 0, 1, 0]
    bca = g.buffer("bool", 4, data=ca)
    bdb = g.buffer("bool", 4, data=db)
    av = g.op("WHERE", "int8", bca, k8(-32), k8(-1))
    bv = g.op("WHERE", "int8", bdb, k8(-1), k8(0))
    out(g, "affine_cdiv_wraps_int8", g.op("CDIV", "int8", g.op("ADD", "int8", g.op("MUL", "int8", av, k8(4)), bv), k8(4)),
        T([4], [a8("CDIV", a8("ADD", a8("MUL", -32 if c else -1, 4), -1 if d else 0), 4) for c, d in zip(ca, db)],
          "int8"))
    C.add(GRP, "value_range_edges_int8_wrap", g)

    # A flat index whose range is exactly [1, d] divided by d: a SHRINK (offset 1, size 3) of the flat view of a
    # [2,3] view (PERMUTE of RESHAPE [3,2] of a 6-element buffer, so the flat view's index is unflattened by 3).
    # Element 2 has flat index 3 = row 1, column 0; a simplifier that takes x // 3 for 0 when x can equal 3 reads
    # row 0. Expected values: tensor.T, index by index.
    g = G("SHRINK offset 1 size 3 of RESHAPE [6] of PERMUTE [1,0] of RESHAPE [3,2] of int32 arange 10..15: the "
          "flat index 1..3 is unflattened by 3 (index 3 is row 1), [12, 14, 11], plus 100: [112, 114, 111]; tensor.T",
          [GRP, "movement", "int32"])
    bsrc, tsrc = arange(g, "int32", 6, start=10)
    view = g.shrink(g.reshape(g.permute(g.reshape(bsrc, [3, 2]), [1, 0]), [6]), [1], [3])
    tv = tsrc.reshape([3, 2]).permute([1, 0]).reshape([6]).shrink([1], [3])
    assert tv.data == [12, 14, 11]
    # + 100, so that a kernel computes it (a bare view of a buffer is read without one)
    out(g, "window_plus_100", g.op("ADD", "int32", view, g.expand(g.const("int32", 100), [3])),
        T([3], [N.alu("ADD", "int32", v, 100) for v in tv.data], "int32"))
    C.add(GRP, "flat_window_to_the_divisor", g)


# -- declared chunks_of_split(c, k): the order a compiler runs on threads (chunks) and lanes (split) ------
def chunks_of_split_fold(op, dt, xs, c, k):
    """A REDUCE declared chunks_of_split(c, k) (docs/ir.md): c contiguous chunks of len(xs)/c elements, each
    the split(k) fold of its own elements (accumulator = position within the chunk mod k), and the c chunk
    results folded in order from the identity (numerics.alu: exact, one rounding per op)."""
    assert len(xs) % c == 0
    s = len(xs) // c
    acc = N.reduce_identity(op, dt)
    for j in range(c):
        acc = N.alu(op, dt, acc, split_fold(op, dt, xs[j * s:(j + 1) * s], k))
    return acc


def seq_fold(op, dt, xs):
    acc = N.reduce_identity(op, dt)
    for x in xs:
        acc = N.alu(op, dt, acc, x)
    return acc


def gen_chunks_of_split(C):
    # Eight float32 values where every order gives a different sum (float32 spacing at 1e8 is 8, so 1e8 + 1
    # and 1e8 + 2 round back to 1e8). chunks_of_split(2, 2): chunk [1e8, 1, -1e8, 1] gives (1e8 + -1e8) +
    # (1 + 1) = 2, chunk [1, 1e8, 1, -1e8] gives (1 + 1) + (1e8 + -1e8) = 2, folded from 0: 4. split(2) over
    # all eight: accumulator 0 = ((1e8 + -1e8) + 1) + 1 = 2, accumulator 1 = ((1 + 1) + 1e8) + -1e8 = 0: 2.
    # chunks(2) folds each chunk sequentially, ((1e8 + 1) + -1e8) + 1 = 1 and ((1 + 1e8) + 1) + -1e8 = 0, then
    # 1 + 0 = 1. Sequential: 0.
    dt = "float32"
    lits = [10 ** 8, 1, -(10 ** 8), 1, 1, 10 ** 8, 1, -(10 ** 8)]
    xs = [N.raw(dt, v) for v in lits]
    g = G("float32 [1e8, 1, -1e8, 1, 1, 1e8, 1, -1e8] summed declared chunks_of_split(2, 2): each chunk of four "
          "is a split(2) fold, (1e8 + -1e8) + (1 + 1) = 2 and (1 + 1) + (1e8 + -1e8) = 2, and the chunks fold "
          "from 0 to 4, where split(2) gives 2, chunks(2) gives 1 and the sequential order 0 (1e8 + 1 and "
          "1e8 + 2 round to 1e8); also MAX declared chunks_of_split(4, 2), and a [8,3] tensor summed over axis "
          "0 declared chunks_of_split(2, 2) per column (expected values: numerics.alu per op, in the declared "
          "order)", [GRP, "reduce", "order", "float32"])
    b = g.buffer(dt, 8, data=xs)
    want = {
        "chunks_of_split_2_2": (chunks_of_split_fold("ADD", dt, xs, 2, 2), {"chunks_of_split": [2, 2]}, 4),
        "split2": (split_fold("ADD", dt, xs, 2), {"split": 2}, 2),
        "chunks2": (None, {"chunks": 2}, 1),
        "sequential": (seq_fold("ADD", dt, xs), None, 0),
    }
    # chunks(2), independently: each chunk of four folded sequentially from 0, the two combined.
    want["chunks2"] = (N.alu("ADD", dt, seq_fold("ADD", dt, xs[:4]), seq_fold("ADD", dt, xs[4:])), {"chunks": 2}, 1)
    for name, (v, order, hand) in want.items():
        assert v == N.raw(dt, hand), (name, v)
        g.output(name, g.reduce(b, "ADD", 1, order), [], [v])
    mx = chunks_of_split_fold("MAX", dt, xs, 4, 2)
    assert mx == N.raw(dt, 10 ** 8)
    g.output("max_chunks_of_split_4_2", g.reduce(b, "MAX", 1, {"chunks_of_split": [4, 2]}), [], [mx])
    # [8,3]: column 0 is the eight values above, column 1 the same reversed, column 2 is 0.5, 1.5, ..., 7.5.
    cols = [xs, xs[::-1], [N.raw(dt, Q(2 * i + 1, 2)) for i in range(8)]]
    flat = [cols[j][i] for i in range(8) for j in range(3)]
    b2 = g.buffer(dt, 24, data=flat)
    per_col = [chunks_of_split_fold("ADD", dt, col, 2, 2) for col in cols]
    assert per_col[2] == N.raw(dt, 32)
    g.output("columns", g.reduce(g.reshape(b2, [8, 3]), "ADD", 1, {"chunks_of_split": [2, 2]}), [3], per_col)
    C.add(GRP, "declared_chunks_of_split_float32", g)

    # Long enough for the CPU passes to apply: 4096 elements in 8 chunks of 512, each a split(32) fold (lanes),
    # the chunks an output axis the scheduler can run on threads. The operand is x * 0.1 (x integers from the
    # case format's prng), so every element is rounded and the fold order shows in the bits.
    n, c, k = 4096, 8, 32
    prng = {"seed": 1207, "lo": -1000000, "hi": 1000000}
    ints = splitmix64(prng["seed"], n, prng["lo"], prng["hi"])
    tenth = N.round_fraction(dt, Q(1, 10))  # the float32 nearest 0.1
    xs = [N.alu("MUL", dt, N.raw(dt, Q(v)), tenth) for v in ints]
    tot = chunks_of_split_fold("ADD", dt, xs, c, k)
    seq = seq_fold("ADD", dt, xs)
    assert tot != seq and tot != split_fold("ADD", dt, xs, k)
    g = G("float32 x * 0.1 for 4096 prng integers x in [-1e6, 1e6], summed declared chunks_of_split(8, 32): 8 "
          "contiguous chunks of 512, each folded in 32 interleaved accumulators, the chunk sums folded from 0 "
          "(differs from the sequential and the plain split(32) sums on this data); expected values: numerics.alu "
          "per op, in the declared order", [GRP, "reduce", "order", "float32", "prng"])
    x = g.buffer(dt, n, init={"prng": prng})
    y = g.op("MUL", dt, x, g.const(dt, tenth))
    g.output("sum", g.reduce(y, "ADD", 1, {"chunks_of_split": [c, k]}), [], [tot])
    g.output("sequential", g.reduce(y, "ADD", 1), [], [seq])
    C.add(GRP, "declared_chunks_of_split_4096_float32", g)
