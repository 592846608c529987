"""corpus/cast: CAST between all dtype pairs on edge values (grouped per source dtype) and
BITCAST between equal-width dtypes.

Expected values: numerics.cast: int->int wraps, x->bool is x != 0 (NaN -> true), int->float and
float->float round once (RNE) from the exact value, float->int truncates (the values are chosen
in range: out-of-range is UB and lives in corpus/ub), NaN -> the target's canonical NaN,
inf -> inf (fp8e4m3: NaN), fp8e4m3 finite overflow saturates to +-448.
"""

from fractions import Fraction as Q

import numerics as N
from builder import G

ALL = N.ALL_DTYPES
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64", "float16", "bfloat16", "fp8e4m3", "fp8e5m2"]


def exact_in(dt, v):
    """Is the literal v exactly representable in float dtype dt?"""
    if isinstance(v, str):
        return not (dt == "fp8e4m3" and "inf" in v)
    x = Q(v)
    b = N.round_fraction(dt, x)
    k = N.decode(dt, b)
    return k[0] == "fin" and k[2] == x


def nearest(dt, x):
    return N.value(dt, N.round_fraction(dt, Q(x)))


def neg_sign(src, b):
    return b & N.FLOATS[src].sign_bit


def float_edge_values(src, negative_nans=True):
    """Edge values exact in src (raw bits, deduplicated). negative_nans=False drops NaNs with the
    sign bit set (their CAST is pinned separately in cast/negative_nan_sign_kept)."""
    two = Q(2)
    c = [0, "-0.0", 1, Q(-3, 2), "inf", "-inf", "nan", "-nan",
         N.FLOATS[src].max_finite, -N.FLOATS[src].max_finite,
         two ** (N.FLOATS[src].emin - N.FLOATS[src].m), two ** N.FLOATS[src].emin,
         65504, 65520, 65519, -65520, 448, 464, -1000, 57344, 61440, 1024,
         two ** -24, two ** -25, 3 * two ** -26, two ** -9, two ** -10, two ** -16, two ** -17,
         1 + two ** -8, 1 + 3 * two ** -8, 1 + two ** -11, 1 + 3 * two ** -11, 17, 18, 1 + two ** -3 + two ** -4,
         two ** -126, two ** -149, two ** -150, 3 * two ** -151, 16777217, 16777219,
         1 + two ** -8 + two ** -30, 1 + two ** -8 - two ** -30, 1 + two ** -11 + two ** -40, two ** 200, two ** -1074, two ** 127 * 3,
         nearest(src, Q(1, 10)), nearest(src, Q(1, 3)), nearest(src, Q(-2, 3))]
    f = N.FLOATS[src]
    c.append("0x%x" % (f.nan | 1) if src != "fp8e4m3" else "0xff")  # a non-canonical NaN
    out, seen = [], set()
    for v in c:
        if not exact_in(src, v):
            continue
        b = N.raw(src, v)
        if b in seen:
            continue
        if not negative_nans and N.is_nan(src, b) and neg_sign(src, b):
            continue
        seen.add(b)
        out.append(b)
    return out


def float_small_values(src):
    """Values whose truncation fits every integer dtype (0..127 after truncation toward zero)."""
    c = [0, "-0.0", Q(1, 2), Q(-1, 2), Q(15, 16), Q(-15, 16), Q(-7, 8), 1, Q(3, 2), Q(5, 2), Q(15, 4),
         Q(201, 2), 100, 127, Q(255, 2), Q(1023, 8), 96, 120, 3, 7]
    out, seen = [], set()
    for v in c:
        if exact_in(src, v):
            b = N.raw(src, v)
            if b not in seen:
                seen.add(b)
                out.append(b)
    return out


# per float source: target int dtype -> values near the edge of the target's range (all in range)
def int_edges(src):
    two = Q(2)
    t = {
        "int8": [127, -128, Q(255, 2), Q(-257, 2), Q(-1023, 8)],
        "uint8": [255, Q(511, 2), Q(2047, 8), Q(-15, 16), 0],
        "int16": [32767, -32768, Q(65535, 2), -Q(65537, 2), 32752, -32752, 448, -448],
        "uint16": [65535, Q(131071, 2), 65504, 57344, 448],
        "int32": [2 ** 31 - 1, -2 ** 31, 2 ** 31 - 128, -(2 ** 31 - 128), 2 ** 31 - 2 ** 23, Q(2 ** 32 - 1, 2), -Q(2 ** 32 + 1, 2), 57344, -57344],
        "uint32": [2 ** 32 - 1, 2 ** 32 - 256, 2 ** 32 - 2 ** 24, Q(-3, 4), Q(2 ** 33 - 1, 2)],
        "int64": [2 ** 63 - 1024, -2 ** 63, 2 ** 63 - 2 ** 39, -(2 ** 63 - 2 ** 55), 2 ** 53 + 2],
        "uint64": [2 ** 64 - 2048, 2 ** 64 - 2 ** 40, 2 ** 64 - 2 ** 56, 2 ** 63, Q(-1, 2)],
    }
    out = {}
    for dst, vals in t.items():
        raws, seen = [], set()
        for v in vals:
            if not exact_in(src, v):
                continue
            b = N.raw(src, v)
            N.cast(src, dst, b)  # asserts in range (raises UB otherwise)
            if b not in seen:
                seen.add(b)
                raws.append(b)
        if raws:
            out[dst] = raws
    return out


def int_values(dt):
    lo, hi = N.int_range(dt)
    c = [0, 1, -1, 5, -7, 17, 18, 100, 127, 128, 255, 256, -128, -129, 448, 464, 1000, -1000, 2048, 2049,
         32767, -32768, 57344, 61440, 65504, 65519, 65520, 65535, 65536, -70000, 16777217, 16777219,
         16842753, 2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 63 - 1, -2 ** 63,
         2 ** 63, 2 ** 64 - 1, 2 ** 63 + 2 ** 39 + 1, 2 ** 62 + 2 ** 38 + 1, lo, hi]
    out = []
    for v in c:
        if lo <= v <= hi and v not in out:
            out.append(v)
    return out


def cast_case(C, name, src, vals, targets, desc, tags=()):
    g = G(desc, ["cast", src] + list(tags))
    n = len(vals)
    b = g.buffer(src, n, data=vals)
    for dst in targets:
        node = g.cast(b, dst)
        g.output(f"to_{dst}", node, [n], [N.cast(src, dst, x) for x in vals])
    C.add("cast", name, g)


def gen(C):
    # integer and bool sources: every target
    for src in INTS:
        vals = int_values(src)
        cast_case(C, f"{src}_to_all", src, vals, [d for d in ALL if d != src],
                  f"CAST from {src} to every other dtype: int->int wraps, ->bool is x!=0, ->float rounds once from the exact integer "
                  "(16777217 -> f32 16777216 tie-to-even; 16842753 -> bf16 16908288 directly, not 16777216 via f32; 2^63+2^39+1 -> f32 2^63+2^40, not 2^63 via f64; "
                  "65520 -> f16 inf; fp8e4m3 saturates at 448); exact Python ints and Fraction rounding")
    cast_case(C, "bool_to_all", "bool", [0, 1], [d for d in ALL if d != "bool"], "CAST from bool to every dtype: false/true -> 0/1; hand-derived")

    # float sources
    for src in FLOATS:
        vals = float_edge_values(src, negative_nans=False)
        cast_case(C, f"{src}_to_floats", src, vals, [d for d in FLOATS if d not in (src, "fp8e4m3")] + ["bool"],
                  f"CAST from {src} to the other float dtypes (fp8e4m3: see floats_to_fp8e4m3) and bool on edge values: single RNE rounding from the exact value "
                  "(ties at f16/bf16/fp8 midpoints, subnormals kept, overflow -> inf), "
                  "NaN (canonical or with a payload, sign clear) -> target canonical NaN, NaN -> bool true, -0 -> bool false; Fraction rounding cross-checked against struct")

    g = G("CAST from every other float dtype to fp8e4m3 on edge values: RNE from the exact value, subnormals kept, finite overflow saturates to +-448, "
          "+inf -> NaN 0x7f, NaN (sign clear) -> 0x7f; Fraction rounding, fp8 codes checked exhaustively", ["cast", "fp8e4m3"])
    for src in FLOATS:
        if src == "fp8e4m3":
            continue
        vals = [b for b in float_edge_values(src, negative_nans=False) if N.decode(src, b)[:2] != ("inf", 1)]
        b = g.buffer(src, len(vals), data=vals)
        g.output(f"from_{src}", g.cast(b, "fp8e4m3"), [len(vals)], [N.cast(src, "fp8e4m3", x) for x in vals])
    C.add("cast", "floats_to_fp8e4m3", g)

    g = G("CAST of NaNs with the sign bit set (and of -inf to fp8e4m3, which has no inf) between float dtypes gives the target's canonical quiet NaN with the sign KEPT "
          "(x86 float conversions keep the sign; docs/semantics.md); hand rule",
          ["cast", "nan", "sign"])
    for src in FLOATS:
        f = N.FLOATS[src]
        vals = [f.nan | f.sign_bit]
        if src != "fp8e4m3":
            vals += [f.nan | f.sign_bit | 1, N.inf_bits(src, 1)]
        b = g.buffer(src, len(vals), data=vals)
        for dst in FLOATS:
            if dst == src:
                continue
            out = [N.cast(src, dst, x) for x in vals]
            if dst != "fp8e4m3" and src != "fp8e4m3":
                out = out[:2]  # -inf -> -inf is uncontroversial and covered above; keep NaNs only
                node = g.cast(g.shrink(b, [0], [2]), dst)
                g.output(f"{src}_to_{dst}", node, [2], out)
            else:
                node = g.cast(b, dst)
                g.output(f"{src}_to_{dst}", node, [len(vals)], out)
    C.add("cast", "negative_nan_sign_kept", g)

    for src in FLOATS:
        cast_case(C, f"{src}_to_ints", src, float_small_values(src), INTS,
                  f"CAST from {src} to every integer dtype on values whose truncation fits all of them (-0.9375 -> 0, 127.5 -> 127); math.trunc")
        edges = int_edges(src)
        g = G(f"CAST from {src} to integer dtypes near each target's range limits (all in range; out of range is UB, see corpus/ub); math.trunc of the exact value",
              ["cast", src, "int_edges"])
        for dst, vals in edges.items():
            b = g.buffer(src, len(vals), data=vals)
            node = g.cast(b, dst)
            g.output(f"to_{dst}", node, [len(vals)], [N.cast(src, dst, x) for x in vals])
        C.add("cast", f"{src}_to_int_edges", g)

    # f64 -> bf16 single rounding vs via f32, spelled out
    two = Q(2)
    vals = [N.raw("float64", v) for v in [1 + two ** -8 + two ** -30, 1 + two ** -8 - two ** -30, 1 + two ** -8,
                                           1 + 3 * two ** -8 - two ** -40, 1 + 3 * two ** -8]]
    cast_case(C, "float64_to_bfloat16_single_rounding", "float64", vals, ["bfloat16", "float32"],
              "CAST float64 -> bfloat16 rounds ONCE: 1+2^-8+2^-30 -> 1+2^-7 (0x3f81) although its float32 rounding 1+2^-8 would tie to 1.0; "
              "1+2^-8-2^-30 -> 1.0; exact midpoints tie to even; Fraction rounding", ["bfloat16", "double_rounding"])

    # BITCAST between equal widths
    bit_groups = {
        "float32": ["int32", "uint32"],
        "int32": ["float32", "uint32"],
        "float16": ["int16", "uint16", "bfloat16"],
        "bfloat16": ["float16", "int16"],
        "uint16": ["float16", "bfloat16", "int16"],
        "float64": ["int64", "uint64"],
        "uint64": ["float64", "int64"],
        "fp8e4m3": ["uint8", "int8", "fp8e5m2"],
        "int8": ["fp8e4m3", "fp8e5m2", "uint8"],
    }
    for src, targets in bit_groups.items():
        if N.is_float(src):
            vals = float_edge_values(src)
        else:
            lo, hi = N.int_range(src)
            vals = [0, 1, hi, lo, hi // 3, (hi // 5) + 7]
            if lo < 0:
                vals += [-1, -2]
            if src == "int32":
                vals += [0x7FC00001, -0x00400000, 0x3F800000, 0x00000001]
            if src == "uint16":
                vals += [0x7E00, 0x7C01, 0xFE00, 0x3C00, 0x3F80, 0x8000, 0x0001]
            if src == "uint64":
                vals += [0x7FF8000000000001, 0xFFF0000000000000, 0x3FF0000000000000]
            if src == "int8":
                vals += [0x7F, -1, 0x7E, 0x7C, -0x80 + 0x7C]
            seen = []
            for v in vals:
                if v not in seen:
                    seen.append(v)
            vals = seen
        g = G(f"BITCAST from {src} to {', '.join(targets)}: the same bits reinterpreted (NaN payloads, -0, signed patterns kept); struct-free bit arithmetic",
              ["bitcast", src])
        b = g.buffer(src, len(vals), data=vals)
        for dst in targets:
            node = g.bitcast(b, dst)
            g.output(f"as_{dst}", node, [len(vals)], [N.bitcast(src, dst, x) for x in vals])
        C.add("cast", f"bitcast_{src}", g)
