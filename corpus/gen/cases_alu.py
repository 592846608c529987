"""corpus/alu: every ALU op over the dtypes where it is legal, on edge values.

Expected values: numerics.alu, i.e. the exact result (Fraction / Python int) rounded once to the
dtype (round to nearest even; ints wrap), with the IEEE special cases written out by hand.
"""

from fractions import Fraction as Q

import numerics as N
from builder import G

FLOATS = ["float32", "float64", "float16", "bfloat16", "fp8e4m3", "fp8e5m2"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]

RULE = "exact result rounded once to the dtype (RNE, subnormals kept), hand-derived in Python with Fraction"


def consts(dt):
    """Edge values of a float format, as exact Fractions."""
    f = N.FLOATS[dt]
    two = Q(2)
    return {
        "minsub": two ** (f.emin - f.m),
        "maxsub": ((1 << f.m) - 1) * two ** (f.emin - f.m),
        "minnorm": two ** f.emin,
        "max": f.max_finite,
        "ulp1": two ** -f.m,
        "half_ulp1": two ** -(f.m + 1),
        "quarter_ulp1": two ** -(f.m + 2),
        "half_ulp_max": two ** (f.emax - f.m - 1),
    }


def payload_nan(dt):
    """A NaN that is not the canonical one (payload 1 on top of the quiet bit), as hex."""
    f = N.FLOATS[dt]
    if dt == "fp8e4m3":
        return "0xff"  # e4m3 has only S.1111.111: the negative one is non-canonical
    return "0x%x" % (f.nan | 1)


def neg_nan(dt):
    return "0x%x" % (N.FLOATS[dt].nan | N.FLOATS[dt].sign_bit)


def fr(dt, vals):
    """Python-level values -> raw (exact) values of dt; entries that do not exist in dt
    (inf in e4m3) must be filtered by the caller."""
    return [N.raw(dt, v) for v in vals]


def has_inf(dt):
    return N.FLOATS[dt].has_inf


def filt(dt, rows):
    """Drop rows using inf on e4m3 (it has none)."""
    if has_inf(dt):
        return rows
    return [r for r in rows if not any(isinstance(v, str) and "inf" in v for v in r)]


def ew(C, group, name, op, dt, rows, desc, tags=(), out_dt=None, arg_dts=None):
    """An elementwise case: one BUFFER per operand column, one ALU node, one output."""
    cols = list(zip(*rows))
    arg_dts = arg_dts or [dt] * len(cols)
    raws = [fr(adt, col) if N.is_float(adt) else [N.raw(adt, v) for v in col] for adt, col in zip(arg_dts, cols)]
    n = len(rows)
    g = G(desc, ["alu", op.lower(), dt] + list(tags))
    bufs = [g.buffer(adt, n, data=r) for adt, r in zip(arg_dts, raws)]
    odt = out_dt or dt
    node = g.op(op, odt, *bufs)
    exp = [N.alu(op, dt if op != "WHERE" else dt, *xs) for xs in zip(*raws)]
    g.output(op.lower(), node, [n], exp)
    C.add(group, name, g)


def multi_ew(C, group, name, ops, dt, rows, desc, tags=(), out_dt=None):
    """Several binary ops over the same two operand buffers, one output each."""
    cols = list(zip(*rows))
    raws = [[N.raw(dt, v) for v in col] for col in cols]
    n = len(rows)
    g = G(desc, ["alu", dt] + [o.lower() for o in ops] + list(tags))
    bufs = [g.buffer(dt, n, data=r) for r in raws]
    for op in ops:
        odt = out_dt or ("bool" if op.startswith("CMP") else dt)
        node = g.op(op, odt, *bufs)
        g.output(op.lower(), node, [n], [N.alu(op, dt, *xs) for xs in zip(*raws)])
    C.add(group, name, g)


# ---------------------------------------------------------------------------------------------
# float tables (built per format from its edge values)

def add_rows(dt):
    k = consts(dt)
    one = Q(1)
    return filt(dt, [
        (1, 2), (3, -5), ("0.0", "-0.0"), ("-0.0", "-0.0"), ("-0.0", "0.0"), (1, -1),
        ("inf", "-inf"), ("inf", k["max"]), ("-inf", "-inf"), ("nan", 1), (payload_nan(dt), 1),
        (k["max"], k["max"]), (k["max"], k["half_ulp_max"]), (-k["max"], -k["half_ulp_max"] / 2 if k["half_ulp_max"] / 2 >= k["minsub"] else -k["minsub"]),
        (one, k["half_ulp1"]), (one + k["ulp1"], k["half_ulp1"]), (one, k["quarter_ulp1"] * 3),
        (k["minsub"], k["minsub"]), (k["minnorm"], -k["minsub"]), (-k["maxsub"], -k["minsub"]),
    ])


def sub_rows(dt):
    k = consts(dt)
    one = Q(1)
    return filt(dt, [
        (5, 3), (3, 5), (1, 1), ("-0.0", "0.0"), ("0.0", "0.0"), ("0.0", "-0.0"), ("-0.0", "-0.0"),
        ("inf", "inf"), ("-inf", "inf"), ("nan", "nan"), (k["minnorm"], k["minsub"]),
        (one, k["quarter_ulp1"]), (one, k["quarter_ulp1"] * 3), (-k["max"], k["max"]),
    ])


def mul_rows(dt):
    k = consts(dt)
    one = Q(1)
    return filt(dt, [
        (3, 5), (-3, 5), ("-0.0", 5), ("-0.0", "-0.0"), (0, -2), ("0.0", "inf"), ("-inf", -2),
        ("inf", "-inf"), ("nan", 0), (k["max"], 2), (-k["max"], k["max"]), (k["minsub"], Q(1, 2)),
        (-k["minsub"], Q(1, 2)), (k["minsub"] * 3, Q(1, 2)), (k["minnorm"], Q(1, 2)),
        (one + k["ulp1"], one + k["ulp1"]), (one + k["ulp1"], one - k["half_ulp1"]),
        (k["minnorm"], k["minnorm"]), (payload_nan(dt), 2),
    ])


def fdiv_rows(dt):
    k = consts(dt)
    return filt(dt, [
        (1, 3), (10, 3), (7, 2), (-7, 2), (1, 0), (-1, 0), (1, "-0.0"), (0, 0), ("-0.0", 5),
        ("inf", "inf"), ("inf", 2), (2, "inf"), (-2, "inf"), ("nan", 1), (k["minnorm"], 4),
        (k["max"], Q(1, 2)), (k["minsub"], 2), (k["minsub"] * 3, 2), (1, 7),
    ])


def mulacc_rows(dt):
    k = consts(dt)
    one = Q(1)
    return filt(dt, [
        (2, 3, 4), (3, 3, -9), (0, 5, "-0.0"), ("-0.0", 5, "-0.0"), ("-0.0", 5, "0.0"),
        ("inf", 0, 1), ("inf", 1, "-inf"), ("inf", 1, "inf"), (1, 1, "nan"),
        (k["max"], 2, -k["max"]),  # fused: 2*max - max = max exactly; unfused would be inf
        (one + k["ulp1"], one + k["ulp1"], -(one + 2 * k["ulp1"])),  # = ulp^2, one rounding
        (k["minsub"], Q(1, 2), 0), (one, one, k["half_ulp1"]),
    ])


def max_rows(dt):
    k = consts(dt)
    return filt(dt, [
        (1, 2), (2, 1), (-3, -5), (1, "nan"), ("nan", 1), ("-0.0", "0.0"), ("0.0", "-0.0"),
        ("-inf", -5), ("inf", "nan"), (payload_nan(dt), 1), (1, payload_nan(dt)),
        (neg_nan(dt), "nan"), (k["minsub"], "-0.0"), (-k["max"], "-inf"),
    ])


def neg_rows(dt):
    k = consts(dt)
    return filt(dt, [(v,) for v in [
        0, "-0.0", 1, Q(-3, 2), "inf", "-inf", "nan", payload_nan(dt), neg_nan(dt), k["max"],
        k["minsub"], -k["maxsub"]]])


def trunc_rows(dt):
    k = consts(dt)
    vals = [Q(5, 2), Q(-5, 2), Q(1, 4), Q(-1, 4), "-0.0", "0.0", Q(7, 4), Q(-7, 4), Q(31, 8), Q(-31, 8),
            "inf", "-inf", "nan", payload_nan(dt), k["max"], k["minsub"], -k["minsub"], 1, -1]
    if dt in ("float32", "float64"):
        vals += [Q(8388609, 2), -Q(16777215, 2)]  # 4194304.5 -> 4194304, -8388607.5 -> -8388607
    return filt(dt, [(v,) for v in vals])


def sqrt_rows(dt):
    k = consts(dt)
    vals = [4, 2, Q(1, 4), Q(9, 4), 0, "-0.0", -1, "inf", "-inf", "nan", payload_nan(dt), 3,
            k["minsub"], k["max"], 9]
    return filt(dt, [(v,) for v in vals])


def recip_rows(dt):
    k = consts(dt)
    vals = [2, -4, 0, "-0.0", "inf", "-inf", "nan", 3, k["max"], k["minsub"], Q(1, 8), 10]
    return filt(dt, [(v,) for v in vals])


def cmp_rows(dt):
    k = consts(dt)
    return filt(dt, [
        (1, 2), (2, 1), (1, 1), ("0.0", "-0.0"), ("-0.0", "0.0"), ("nan", 1), (1, "nan"),
        ("nan", "nan"), ("-inf", "inf"), ("inf", "inf"), (k["minsub"], 0), (-k["minsub"], "-0.0"),
        (k["max"], "inf"), (payload_nan(dt), payload_nan(dt)),
    ])


def exp2_rows(dt):
    f = N.FLOATS[dt]
    lowest = f.emin - f.m  # 2^lowest = min subnormal; 2^(lowest-1) ties to +0
    vals = [0, "-0.0", 1, 3, -1, -2, 10, lowest, lowest - 1, f.emax, f.emax + 1, "-inf", "inf", "nan"]
    return filt(dt, [(v,) for v in vals])


def log2_rows(dt):
    f = N.FLOATS[dt]
    k = consts(dt)
    vals = [1, 2, 8, Q(1, 2), Q(1, 1024), k["minsub"], k["minnorm"], Q(2) ** f.emax, 0, "-0.0", -1, "inf", "-inf", "nan"]
    return filt(dt, [(v,) for v in vals])


def sin_rows(dt):
    return filt(dt, [(v,) for v in [0, "-0.0", "inf", "-inf", "nan", payload_nan(dt)]])


def pow_rows(dt):
    rows = [(2, 3), (2, -1), (4, Q(1, 2)), (9, Q(3, 2)), (-2, 3), (-2, 2), (-2, Q(1, 2)), (2, 10),
            (3, 0), (Q(1, 2), 2), (0, 3), ("-0.0", 3), ("-0.0", 2), (-1, 7), (Q(1, 4), Q(1, 2))]
    big = 1 + N.FLOATS[dt].emax
    rows.append((2, big))  # 2^(emax+1): overflow -> inf
    return rows


def where_rows(dt, fl=True):
    if fl:
        vals_a = [1, "nan", payload_nan(dt), "-0.0", "inf", 5, neg_nan(dt), 0]
        vals_b = [2, 3, 4, "0.0", "-inf", payload_nan(dt), 7, "-0.0"]
    else:
        lo, hi = N.int_range(dt)
        vals_a = [1, lo, hi, 0, -1 if lo < 0 else 1, 5, 7, hi]
        vals_b = [2, hi, lo, 1, 0, 6, 8, lo]
    conds = [True, True, True, False, True, False, False, True]
    return [(c, a, b) for c, a, b in zip(conds, vals_a, vals_b)]


# ---------------------------------------------------------------------------------------------
# integer tables

def int_rows(dt, kind):
    lo, hi = N.int_range(dt)
    b = N.INT_BITS[dt]
    s = N.is_signed(dt)
    if kind == "ADD":
        rows = [(1, 2), (hi, 1), (hi, hi), (0, 0), (lo, hi), (hi - 5, 3), (100, 100)]
        rows += [(lo, -1), (lo, lo), (-1, -1), (-7, 3)] if s else [(hi, hi - 1), (200, 100), (5, hi - 4)]
    elif kind == "SUB":
        rows = [(5, 3), (3, 5), (0, 1), (lo, 1), (hi, hi), (lo, hi), (0, hi)]
        rows += [(hi, -1), (-1, lo)] if s else [(0, lo), (1, 2)]
    elif kind == "MUL":
        h = 1 << (b // 2)
        rows = [(3, 7), (hi, 2), (hi, hi), (h, h), (h + 1, h - 1), (0, hi), (1 << (b - 1) if not s else lo, 2)]
        rows += [(lo, -1), (lo, lo), (-1, -1), (-3, 7), (lo, 3)] if s else [(hi, 3), (h - 1, h + 3)]
    elif kind == "MAX":
        rows = [(1, 2), (2, 1), (lo, hi), (hi, lo), (hi, hi), (0, lo), (lo, lo)]
        rows += [(-1, 0), (-5, -3), (lo, -1)] if s else [(hi - 1, hi), (1 << (b - 1), (1 << (b - 1)) - 1)]
    elif kind == "MULACC":
        rows = [(2, 3, 4), (hi, 2, 2), (hi, hi, 0), (0, hi, lo), (1 << (b - 1) if not s else lo, 2, 1)]
        rows += [(lo, -1, 0), (-3, 5, 7), (-1, -1, -1)] if s else [(hi, hi, 1), (3, 5, hi)]
    else:
        raise AssertionError(kind)
    return rows


def bitwise_rows(dt):
    lo, hi = N.int_range(dt)
    b = N.INT_BITS[dt]
    m = (1 << b) - 1
    alt = N.wrap(dt, int("10" * (b // 2), 2))   # 1010...
    alt2 = N.wrap(dt, int("01" * (b // 2), 2))  # 0101...
    nib = N.wrap(dt, int("11110000" * (b // 8), 2))
    rows = [(alt, alt2), (alt, alt), (nib, alt), (lo, hi), (0, hi), (N.wrap(dt, m), 1), (0, 0), (hi, hi)]
    if N.is_signed(dt):
        rows += [(-1, 12345 % (hi + 1)), (lo, -1)]
    return rows


def shift_rows(dt):
    lo, hi = N.int_range(dt)
    b = N.INT_BITS[dt]
    rows = [(1, 0), (1, b - 1), (3, b - 1), (hi, 1), (0x55, 4), (hi, b - 1), (lo if N.is_signed(dt) else 1 << (b - 1), b - 1), (5, 1)]
    if N.is_signed(dt):
        rows += [(-1, 1), (-8, 1), (-7, 1), (lo, 1), (-1, b - 1)]
    else:
        rows += [(hi, b - 2), (1 << (b - 1), 1)]
    return rows


def divmod_rows(dt):
    lo, hi = N.int_range(dt)
    if N.is_signed(dt):
        return [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (1, hi), (-1, hi),
                (lo, 1), (lo, 2), (lo, -2), (lo, hi), (hi, lo), (hi, -1), (lo + 1, -1), (5, 7), (-5, 7)]
    return [(7, 2), (6, 3), (0, 5), (5, 7), (hi, 2), (hi, hi), (hi, 1), (hi - 1, hi), (1 << (N.INT_BITS[dt] - 1), 3), (100, 7)]


def cmp_int_rows(dt):
    lo, hi = N.int_range(dt)
    rows = [(1, 2), (2, 1), (5, 5), (lo, hi), (hi, lo), (0, 0), (lo, lo), (hi, hi)]
    rows += [(-1, 0), (0, -1), (-1, 1)] if N.is_signed(dt) else [(hi - 1, hi), (1 << (N.INT_BITS[dt] - 1), 1)]
    return rows


def neg_int_rows(dt):
    lo, hi = N.int_range(dt)
    vals = [0, 1, hi, lo, 5]
    vals += [-1, -5, lo + 1] if N.is_signed(dt) else [1 << (N.INT_BITS[dt] - 1), hi - 1]
    return [(v,) for v in vals]


# ---------------------------------------------------------------------------------------------

def gen(C):
    grp = "alu"
    for dt in FLOATS:
        ew(C, grp, f"add_{dt}", "ADD", dt, add_rows(dt),
           f"ADD on {dt}: signed zeros, inf-inf, NaN in (payload in -> canonical out), overflow, ties to even at 1 and at the top, subnormals; {RULE}")
        ew(C, grp, f"mul_{dt}", "MUL", dt, mul_rows(dt),
           f"MUL on {dt}: sign of zero products, 0*inf, overflow, subnormal results and ties to even under 2^emin; {RULE}")
        ew(C, grp, f"max_{dt}", "MAX", dt, max_rows(dt),
           f"MAX on {dt} is (a < b ? b : a) returning the operand's bits: max(1,NaN)=1, max(NaN,1)=NaN (payload kept), max(-0,+0)=-0; hand-derived")
        ew(C, grp, f"neg_{dt}", "NEG", dt, neg_rows(dt),
           f"NEG on {dt} flips the sign bit only (NaN payloads and signs pass through, -(+0)=-0); hand-derived from the bits")
        multi_ew(C, grp, f"cmp_{dt}", ["CMPLT", "CMPNE", "CMPEQ"], dt, cmp_rows(dt),
                 f"CMPLT/CMPNE/CMPEQ on {dt}: IEEE (NaN compares unordered: CMPNE true, others false; -0 == +0); hand-derived")
    for dt in ["float32", "float64", "float16", "bfloat16"]:
        ew(C, grp, f"sub_{dt}", "SUB", dt, sub_rows(dt),
           f"SUB on {dt}: (-0)-(+0)=-0, (+0)-(+0)=+0, inf-inf=NaN, ties to even just below 1; {RULE}")
        ew(C, grp, f"mulacc_{dt}", "MULACC", dt, mulacc_rows(dt),
           f"MULACC(a,b,c)=a*b+c on {dt} with ONE rounding (2*max-max = max, (1+u)^2-(1+2u) = u^2), zero signs, inf*0; {RULE}")
        ew(C, grp, f"trunc_{dt}", "TRUNC", dt, trunc_rows(dt),
           f"TRUNC on {dt} rounds toward zero keeping the sign (trunc(-0.25) = -0.0), inf stays, NaN -> canonical; hand-derived")
        ew(C, grp, f"sqrt_{dt}", "SQRT", dt, sqrt_rows(dt),
           f"SQRT on {dt}: exact squares, correctly rounded sqrt(2), sqrt(3), of min subnormal and max, sqrt(-0)=-0, sqrt(<0)=NaN; exact integer square root with a 1400-bit sticky, rounded once")
        ew(C, grp, f"exp2_{dt}", "EXP2", dt, exp2_rows(dt),
           f"EXP2 on {dt} of integers (exact powers of two), down to the min subnormal (one below it ties to +0) and past emax (inf); exp2(-inf)=+0; hand-derived")
    for dt in ["float32", "float64", "float16", "bfloat16", "fp8e5m2"]:
        ew(C, grp, f"fdiv_{dt}", "FDIV", dt, fdiv_rows(dt),
           f"FDIV on {dt}: correctly rounded quotients (10/3 etc.), x/0 = +-inf, 0/0 and inf/inf NaN, subnormal results; {RULE}")
    for dt in ["float32", "float64", "float16", "fp8e4m3", "fp8e5m2"]:
        ew(C, grp, f"reciprocal_{dt}", "RECIPROCAL", dt, recip_rows(dt),
           f"RECIPROCAL on {dt}: 1/(+-0) = +-inf (e4m3: inf is NaN), 1/inf = 0, 1/3 rounded, 1/max subnormal, 1/min subnormal overflows; {RULE}")
    for dt in ["float32", "float64", "float16"]:
        ew(C, grp, f"log2_{dt}", "LOG2", dt, log2_rows(dt),
           f"LOG2 on {dt} of powers of two (exact integers), log2(+-0)=-inf, log2(<0)=NaN, log2(inf)=inf; hand-derived")
        ew(C, grp, f"sin_{dt}", "SIN", dt, sin_rows(dt),
           f"SIN on {dt}: sin(+0)=+0, sin(-0)=-0, sin(+-inf)=NaN, NaN -> canonical NaN; hand-derived")
    for dt in ["float32", "float64"]:
        ew(C, grp, f"pow_{dt}", "POW", dt, pow_rows(dt),
           f"POW on {dt} with exact results only: integer powers (negative base too), x^0=1, square roots via x^(k/2), negative base with non-integer exponent = NaN, overflow to inf, (-0)^3=-0; hand-derived")
    for dt in ["float32", "float16", "float64", "bfloat16"]:
        ew(C, grp, f"where_{dt}", "WHERE", dt, where_rows(dt), f"WHERE(c,a,b) on {dt} passes the chosen operand's bits through (NaN payloads, -NaN, -0); hand-derived",
           arg_dts=["bool", dt, dt])

    # ties to even and single rounding, spelled out
    ew(C, grp, "add_float16_ties", "ADD", "float16",
       [(2048, 1), (2050, 1), (2052, 1), (-2050, -1), (1, Q(1, 2048)), (1 + Q(1, 1024), Q(1, 2048)),
        (65504, 16), (65504, 15), (Q(1, 1 << 24), Q(1, 1 << 24)), (1024, Q(1, 2))],
       "float16 ADD exact ties: 2048+1 -> 2048, 2050+1 -> 2052 (ties to even), 65504+16 -> inf, 65504+15 -> 65504; cross-checked against struct.pack('<e')")
    ew(C, grp, "mulacc_bfloat16_single_rounding", "MULACC", "bfloat16",
       [(7, Q(37, 256), -Q(1, 1 << 40)), (9, Q(29, 256), Q(1, 1 << 40)), (7, Q(37, 256), Q(1, 1 << 40)),
        (9, Q(29, 256), -Q(1, 1 << 40)), (7, Q(37, 256), 0), (9, Q(29, 256), 0)],
       "bfloat16 MULACC rounded ONCE from the exact value: 7*(37/256) = 1+3/256 is a bf16 midpoint, -2^-40 puts it just below -> 1+1/128 (0x3f81), where rounding via float32 would tie to even 1+1/64 (0x3f82); 9*(29/256)+2^-40 -> 1+3/128 (0x3f83) vs via-f32 0x3f82; zero-tail rows are plain ties to even")
    ew(C, grp, "mul_bfloat16_ties", "MUL", "bfloat16",
       [(3, Q(129, 128)), (3, Q(131, 128)), (Q(255, 128), Q(255, 128)), (2, Q(129, 128)), (-3, Q(129, 128))],
       "bfloat16 MUL on midpoints: 3*(129/128)=387/128 is a tie and goes up to the even 388/128, 3*(131/128)=393/128 ties down to the even 392/128; (255/128)^2 rounds normally; RNE from the exact product")

    # scalar CONST operands ([] shape broadcasts)
    g = G("ADD of a float32 buffer and a shape-[] CONST 0.5 (the CONST combines with any shape); sums of dyadics are exact", ["alu", "add", "float32", "const"])
    a = g.buffer("float32", 4, data=fr("float32", [1, "-0.5", "inf", "nan"]))
    c = g.const("float32", N.fbits("float32", "0.5"))
    s = g.op("ADD", "float32", a, c)
    g.output("sum", s, [4], [N.alu("ADD", "float32", x, N.fbits("float32", "0.5")) for x in fr("float32", [1, "-0.5", "inf", "nan"])])
    C.add(grp, "add_const_float32", g)
    g = G("MUL of an int32 buffer by a shape-[] CONST 3 (wraps: 0x7fffffff*3 = 0x7ffffffd); exact int arithmetic mod 2^32", ["alu", "mul", "int32", "const"])
    vals = [1, -2, 2147483647, -2147483648, 715827883]
    a = g.buffer("int32", 5, data=vals)
    c = g.const("int32", 3)
    m = g.op("MUL", "int32", a, c)
    g.output("prod", m, [5], [N.alu("MUL", "int32", v, 3) for v in vals])
    C.add(grp, "mul_const_int32", g)

    # integers
    for dt in INTS:
        ew(C, grp, f"add_{dt}", "ADD", dt, int_rows(dt, "ADD"), f"ADD on {dt} wraps modulo 2^{N.INT_BITS[dt]}; exact Python ints, then two's complement wrap")
        ew(C, grp, f"mul_{dt}", "MUL", dt, int_rows(dt, "MUL"), f"MUL on {dt} wraps (INT_MIN*-1 = INT_MIN is not UB); exact Python ints, then wrap")
        ew(C, grp, f"max_{dt}", "MAX", dt, int_rows(dt, "MAX"), f"MAX on {dt} ({'signed' if N.is_signed(dt) else 'unsigned'} order); hand-derived")
        ew(C, grp, f"neg_{dt}", "NEG", dt, neg_int_rows(dt), f"NEG on {dt} wraps (-INT_MIN = INT_MIN; unsigned -x = 2^n - x); exact Python ints, then wrap")
        multi_ew(C, grp, f"bitwise_{dt}", ["AND", "OR", "XOR"], dt, bitwise_rows(dt), f"AND/OR/XOR on {dt} (two's complement bit patterns); Python bit ops then wrap")
        multi_ew(C, grp, f"shift_{dt}", ["SHL", "SHR"], dt, shift_rows(dt),
                 f"SHL/SHR on {dt} with counts 0..width-1: SHL wraps (bits shifted out are lost), SHR is {'arithmetic' if N.is_signed(dt) else 'logical'}; Python shifts then wrap")
        multi_ew(C, grp, f"divmod_{dt}", ["CDIV", "CMOD", "FLOORDIV", "FLOORMOD"], dt, divmod_rows(dt),
                 f"CDIV truncates, CMOD has the dividend's sign, FLOORDIV/FLOORMOD are Python // and % on {dt} (no zero divisor, no INT_MIN/-1); exact Python ints")
        multi_ew(C, grp, f"cmp_{dt}", ["CMPLT", "CMPNE", "CMPEQ"], dt, cmp_int_rows(dt), f"CMPLT/CMPNE/CMPEQ on {dt} ({'signed' if N.is_signed(dt) else 'unsigned'} order); hand-derived")
    for dt in ["int8", "int32", "uint32", "uint64"]:
        ew(C, grp, f"sub_{dt}", "SUB", dt, int_rows(dt, "SUB"), f"SUB on {dt} wraps; exact Python ints, then wrap")
    for dt in ["int32", "uint8", "int64", "uint16"]:
        ew(C, grp, f"mulacc_{dt}", "MULACC", dt, int_rows(dt, "MULACC"), f"MULACC(a,b,c)=a*b+c on {dt}, wrapped once; exact Python ints")
    for dt in ["int32", "uint8", "int64", "int16"]:
        ew(C, grp, f"where_{dt}", "WHERE", dt, where_rows(dt, fl=False), f"WHERE(c,a,b) on {dt} selects per element; hand-derived", arg_dts=["bool", dt, dt])

    # bool
    brows = [(0, 0), (0, 1), (1, 0), (1, 1)]
    multi_ew(C, grp, "bitwise_bool", ["AND", "OR", "XOR"], "bool", brows, "AND/OR/XOR on bool: truth tables")
    ew(C, grp, "max_bool", "MAX", "bool", brows, "MAX on bool is OR (false < true); truth table")
    ew(C, grp, "neg_bool", "NEG", "bool", [(0,), (1,)], "NEG on bool is logical NOT; truth table")
    multi_ew(C, grp, "cmp_bool", ["CMPLT", "CMPNE", "CMPEQ"], "bool", brows, "CMPLT/CMPNE/CMPEQ on bool (false < true); truth tables")
    g = G("ADD/SUB/MUL on bool: the exact integer result converted to bool (x != 0), so ADD = OR, SUB = XOR, MUL = AND; truth tables",
          ["alu", "bool", "add", "sub", "mul"])
    bufs = [g.buffer("bool", 4, data=[r[i] for r in brows]) for i in range(2)]
    for op, fn in (("ADD", lambda a, b: int(a + b != 0)), ("SUB", lambda a, b: int(a - b != 0)), ("MUL", lambda a, b: a * b)):
        g.output(op.lower(), g.op(op, "bool", *bufs), [4], [fn(*r) for r in brows])
    C.add(grp, "arith_bool", g)
    ew(C, grp, "where_bool", "WHERE", "bool", [(1, 1, 0), (0, 1, 0), (1, 0, 1), (0, 0, 1)], "WHERE on bool branches; truth table", arg_dts=["bool", "bool", "bool"])
