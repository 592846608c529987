"""corpus/ub: each kind of undefined behaviour as an expected error.

`expect_error` = {kind: "ub", ub, node, element}: node is the case-file id of the node where the
UB happens (the ALU / CAST node; for uninitialized_read the output node whose value holds the
uninitialized element), element the flat row-major index of the FIRST offending element of that
node's value. The element index is found by evaluating numerics.alu / numerics.cast element by
element in row-major order and stopping at the first numerics.UB raised (hand rule: zero divisor
-> div_by_zero; signed INT_MIN / -1 -> div_overflow; count < 0 or >= width -> shift_out_of_range;
NaN, inf or a truncation outside the target -> float_to_int_out_of_range).

Each UB case lists the output(s) whose evaluation reaches the UB, with an empty `expect`.
"""

import numerics as N
from builder import G


def first_ub(fn, rows):
    for i, r in enumerate(rows):
        try:
            fn(*r)
        except N.UB as e:
            return e.kind, i
    raise AssertionError("no UB in rows")


def binop_ub(C, name, op, dt, rows, kind, desc):
    g = G(desc, ["ub", kind, op.lower(), dt])
    cols = list(zip(*rows))
    a = g.buffer(dt, len(rows), data=list(cols[0]))
    b = g.buffer(dt, len(rows), data=list(cols[1]))
    node = g.op(op, dt, a, b)
    k, i = first_ub(lambda x, y: N.alu(op, dt, x, y), rows)
    assert k == kind, (name, k, kind)
    g.output_ub(op.lower(), node, [len(rows)])
    g.ub(kind, node, i)
    C.add("ub", name, g)


def cast_ub(C, name, src, dst, vals, desc):
    g = G(desc, ["ub", "float_to_int_out_of_range", "cast", src, dst])
    raws = [N.raw(src, v) for v in vals]
    b = g.buffer(src, len(raws), data=raws)
    node = g.cast(b, dst)
    k, i = first_ub(lambda x: N.cast(src, dst, x), [(x,) for x in raws])
    assert k == "float_to_int_out_of_range"
    g.output_ub("cast", node, [len(raws)])
    g.ub(k, node, i)
    C.add("ub", name, g)


def gen(C):
    for op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
        binop_ub(C, f"div_by_zero_{op.lower()}_int32", op, "int32", [(7, 2), (-7, 3), (5, 0), (1, 0)], "div_by_zero",
                 f"{op} int32 by zero at element 2 (elements 0..1 are fine) is UB div_by_zero; element = first zero divisor in row-major order")
    for op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
        binop_ub(C, f"div_by_zero_{op.lower()}_uint8", op, "uint8", [(255, 0), (7, 0)], "div_by_zero",
                 f"{op} uint8 by zero at element 0 is UB div_by_zero")
    for op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
        binop_ub(C, f"div_overflow_{op.lower()}_int32", op, "int32", [(-2147483648, 1), (-2147483647, -1), (-2147483648, -1)], "div_overflow",
                 f"{op} int32 of INT_MIN by -1 (element 2) is UB div_overflow; INT_MIN/1 and (INT_MIN+1)/-1 are fine")
    binop_ub(C, "div_overflow_cdiv_int8", "CDIV", "int8", [(-128, 2), (-128, -1)], "div_overflow",
             "CDIV int8 of -128 by -1 (element 1) is UB div_overflow")
    binop_ub(C, "div_overflow_floormod_int8", "FLOORMOD", "int8", [(-127, -1), (127, -1), (-128, -1)], "div_overflow",
             "FLOORMOD int8 of -128 by -1 (element 2) is UB div_overflow (even though the mathematical remainder 0 fits)")
    binop_ub(C, "div_first_offending_element", "CDIV", "int32", [(1, 1), (-2147483648, -1), (4, 0)], "div_overflow",
             "CDIV int32 with INT_MIN/-1 at element 1 and a zero divisor at element 2: the error names the first offending element in row-major order (1, div_overflow)")
    binop_ub(C, "shift_count_eq_width_shl_int32", "SHL", "int32", [(1, 31), (1, 32)], "shift_out_of_range",
             "SHL int32 by 32 (= the bit width, element 1) is UB shift_out_of_range; 1<<31 is fine (wraps to INT_MIN)")
    binop_ub(C, "shift_count_eq_width_shr_uint8", "SHR", "uint8", [(255, 7), (255, 8)], "shift_out_of_range",
             "SHR uint8 by 8 (= the bit width, element 1) is UB shift_out_of_range")
    binop_ub(C, "shift_count_negative_shl_int32", "SHL", "int32", [(1, 0), (1, -1)], "shift_out_of_range",
             "SHL int32 by -1 (element 1) is UB shift_out_of_range")
    binop_ub(C, "shift_count_negative_shr_int8", "SHR", "int8", [(-8, -3)], "shift_out_of_range",
             "SHR int8 by -3 (element 0) is UB shift_out_of_range")
    binop_ub(C, "shift_count_large_shr_uint64", "SHR", "uint64", [(1, 63), (1, 64), (1, 100)], "shift_out_of_range",
             "SHR uint64 by 64 (element 1) is UB shift_out_of_range")

    cast_ub(C, "float_to_int_nan_int32", "float32", "int32", [1, "-0.0", "nan"],
            "CAST float32 NaN -> int32 (element 2) is UB float_to_int_out_of_range")
    cast_ub(C, "float_to_int_inf_int32", "float32", "int32", [2, "-inf"],
            "CAST float32 -inf -> int32 (element 1) is UB float_to_int_out_of_range")
    cast_ub(C, "float_to_int_3e9_int32", "float32", "int32", [2147483520, 3000000000],
            "CAST float32 3e9 -> int32 (element 1) is UB: the truncation does not fit (2147483520 at element 0 does)")
    cast_ub(C, "float_to_int_2p31_int32", "float32", "int32", [-2147483648, 2147483648],
            "CAST float32 2^31 -> int32 (element 1) is UB; -2^31 fits")
    cast_ub(C, "float_to_int_minus1_uint32", "float32", "uint32", ["-0.75", -1],
            "CAST float32 -1.0 -> uint32 (element 1) is UB; -0.75 truncates to 0 and fits")
    cast_ub(C, "float_to_int_256_uint8", "float16", "uint8", ["255.875", 256],
            "CAST float16 256 -> uint8 (element 1) is UB; 255.875 truncates to 255")
    cast_ub(C, "float_to_int_inf_uint8_fp8e5m2", "fp8e5m2", "uint8", [1, "inf"],
            "CAST fp8e5m2 inf -> uint8 (element 1) is UB float_to_int_out_of_range")
    cast_ub(C, "float_to_int_2p63_int64", "float64", "int64", [-9223372036854775808, 9223372036854775808],
            "CAST float64 2^63 -> int64 (element 1) is UB; -2^63 fits")

    # uninitialized reads
    g = G("a BUFFER with no input, read by ADD(buf, 1): the output's element 0 is uninitialized -> UB uninitialized_read at the output node",
          ["ub", "uninitialized_read"])
    b = g.buffer("int32", 3)
    s = g.op("ADD", "int32", b, g.const("int32", 1))
    g.output_ub("sum", s, [3])
    g.ub("uninitialized_read", s, 0)
    C.add("ub", "uninitialized_buffer_add", g)

    g = G("a buffer stored only at [0:2] (STORE(SHRINK(buf,(0,2)))), read whole through AFTER: element 2 is uninitialized -> UB uninitialized_read at the output (AFTER) node",
          ["ub", "uninitialized_read"])
    b = g.buffer("float32", 4)
    v = g.buffer("float32", 2, data=[N.raw("float32", 1), N.raw("float32", 2)])
    a = g.after(b, g.store(g.shrink(b, [0], [2]), v))
    g.output_ub("buf", a, [4])
    g.ub("uninitialized_read", a, 2)
    C.add("ub", "uninitialized_partial_store", g)

    g = G("a partly stored buffer read through FLIP then MUL 2: the uninitialized elements 2,3 of the buffer land at elements 0,1 of the output -> UB uninitialized_read at the MUL, element 0",
          ["ub", "uninitialized_read"])
    b = g.buffer("int32", 4)
    v = g.buffer("int32", 2, data=[5, 6])
    a = g.after(b, g.store(g.shrink(b, [0], [2]), v))
    m = g.op("MUL", "int32", g.flip(a, [True]), g.const("int32", 2))
    g.output_ub("flipped", m, [4])
    g.ub("uninitialized_read", m, 0)
    C.add("ub", "uninitialized_through_flip", g)

    g = G("input {uninit: true} is the same as no input: PERMUTE of a [2,2] view of it reaches the output, element 0 uninitialized -> UB uninitialized_read",
          ["ub", "uninitialized_read"])
    b = g.buffer("uint8", 4, init={"uninit": True})
    p = g.op("ADD", "uint8", g.permute(g.reshape(b, [2, 2]), [1, 0]), g.const("uint8", 0))
    g.output_ub("p", p, [2, 2])
    g.ub("uninitialized_read", p, 0)
    C.add("ub", "uninitialized_explicit_uninit", g)
