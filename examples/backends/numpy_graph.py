#!/usr/bin/env python3
"""numpy-graph: an example *graph-level* external backend for uopkit (protocol `uopkit-backend/1`).

uopkit sends each case's canonical tensor graph; this program evaluates it with numpy, node by node,
and answers the outputs' raw bits. It shows how a framework that schedules by itself plugs into the
conformance kit (docs/backend-protocol.md).

Run it through the kit:

    uopkit check --backend exec:'python3 examples/backends/numpy_graph.py'

(`python3` must be able to import numpy, e.g. `PATH=/path/to/venv/bin:$PATH`.) With `--wrong` it is
deliberately wrong (float32 ADD results off by one ulp) so you can see the kit catch a wrong backend.

Declared subset (the hello's `accepts`; uopkit skips everything else with the reason):

* devices: CPU (`CPU`, `CPU:0`, `CPU:1`, ...). Only single-device values: a device tuple (a sharded
  buffer, a broadcast COPY) is answered `unsupported`. A COPY between two single devices is the same
  value (devices are not modelled, so no schedule facts about copies are reported).
* dtypes: bool, int8..int64, uint8..uint64, float16, float32, float64 (not bfloat16 and the fp8s:
  numpy has no such types).
* ops: BUFFER CONST; ADD SUB MUL NEG MAX CMPLT CMPNE CMPEQ WHERE AND OR XOR; CDIV CMOD FLOORDIV FLOORMOD
  SHL SHR (integers, UB answered as `error`); MULACC FDIV RECIPROCAL SQRT TRUNC (floats; exact);
  CAST BITCAST; RESHAPE PERMUTE EXPAND PAD SHRINK FLIP; REDUCE (ADD/MUL/MAX, every declared order);
  STORE AFTER GROUP SINK CONTIGUOUS DETACH COPY. Not: the transcendentals (EXP2 LOG2 SIN POW: numpy's
  implementations are not glibc's), PARAM/CALL (uopkit inlines CALLs before sending), multi-device ops.

How it stays exact (docs/semantics.md: "compute the exact result, then round it once"):

* numpy's float16/float32/float64 `+ - * / sqrt` are IEEE operations, correctly rounded (float16 goes
  through float32, a double rounding that is innocuous for these ops because 24 >= 2*11+2).
* Arithmetic NaN results are replaced by the canonical quiet NaN with the sign clear (x86 produces
  the *negative* default NaN and propagates payloads); NEG is a sign-bit flip on the raw bits; MAX and
  WHERE select raw bits; a float->float CAST gives the canonical NaN with the source's sign.
* MULACC is one rounding: for float16/float32 the product is exact in float64 and the sum is rounded
  to odd (TwoSum) before the final conversion; float64 MULACC uses exact fractions per element.
* Integer conversions to floats from 64-bit sources use exact Python integers (no double rounding
  through float64); float->int casts check the range exactly and report UB.
* REDUCE never uses np.sum (pairwise summation): it folds from the identity over the reduced
  elements in row-major order, vectorized over the kept elements, each step one rounding.
* Uninitialized elements are tracked as a mask (poison) through every op, as the oracle does; an
  output element that is still poison is answered as `null`.
* Storage (STORE/AFTER) follows the oracle's versions model: a STORE makes a new version of the
  buffer its target views; an AFTER reads the newest version among its dependencies.

Reads requests from stdin, one JSON object a line; answers one line each (flushed); logs to stderr.
"""

import json
import sys
import traceback
from decimal import Decimal
from fractions import Fraction

import numpy as np

PROTOCOL = "uopkit-backend/1"
WRONG = "--wrong" in sys.argv[1:]


class Unsupported(Exception):
    """The request uses something outside this backend's subset: answered `unsupported`."""


class UB(Exception):
    """The graph computes undefined behaviour: answered `error` (uopkit never sends such cases)."""


# name -> (numpy dtype, bits, kind: b/i/u/f)
DTYPES = {
    "bool": (np.bool_, 1, "b"),
    "int8": (np.int8, 8, "i"),
    "int16": (np.int16, 16, "i"),
    "int32": (np.int32, 32, "i"),
    "int64": (np.int64, 64, "i"),
    "uint8": (np.uint8, 8, "u"),
    "uint16": (np.uint16, 16, "u"),
    "uint32": (np.uint32, 32, "u"),
    "uint64": (np.uint64, 64, "u"),
    "float16": (np.float16, 16, "f"),
    "float32": (np.float32, 32, "f"),
    "float64": (np.float64, 64, "f"),
}
UINT = {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# float dtype -> (exponent bits, mantissa bits, canonical NaN bits)
FLOAT_FORMAT = {"float16": (5, 10, 0x7E00), "float32": (8, 23, 0x7FC00000),
                "float64": (11, 52, 0x7FF8000000000000)}

ELEMENTWISE = ["ADD", "SUB", "MUL", "NEG", "MAX", "CMPLT", "CMPNE", "CMPEQ", "WHERE", "AND", "OR",
               "XOR", "CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "SHL", "SHR", "MULACC", "FDIV",
               "RECIPROCAL", "SQRT", "TRUNC", "CAST", "BITCAST"]
MOVEMENT = ["RESHAPE", "PERMUTE", "EXPAND", "PAD", "SHRINK", "FLIP"]
STORAGE = ["STORE", "AFTER", "GROUP", "SINK", "CONTIGUOUS", "DETACH", "COPY"]
ACCEPTS = {"devices": ["CPU"], "dtypes": list(DTYPES),
           "ops": ["BUFFER", "CONST"] + ELEMENTWISE + MOVEMENT + ["REDUCE"] + STORAGE}


def log(*a):
    print("numpy-graph:", *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# Scalars: bits <-> numpy, literals, exact rounding


def dt_info(name):
    if name not in DTYPES:
        raise Unsupported(f"dtype {name} is not implemented")
    return DTYPES[name]


def uview(name):
    return UINT[dt_info(name)[1]]


def round_fraction(x, name, negative_zero=False):
    """Bits of the exact rational x rounded once (nearest, ties to even) to float dtype `name`."""
    eb, mb, _ = FLOAT_FORMAT[name]
    sign = 1 << (eb + mb)
    s = sign if (x < 0 or (x == 0 and negative_zero)) else 0
    a = abs(x)
    if a == 0:
        return s
    bias = (1 << (eb - 1)) - 1
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()  # 2^e <= a < 2^(e+2)
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    e = max(e, 1 - bias)
    shift = e - mb  # quantum 2^shift
    num, den = (n, d << shift) if shift >= 0 else (n << -shift, d)
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    if q >> (mb + 1):  # carried into the next binade
        q >>= 1
        e += 1
    if e > bias:
        return s | (((1 << eb) - 1) << mb)  # overflow: inf
    if q < (1 << mb):
        return s | q  # subnormal (e is the minimum exponent)
    return s | ((e + bias) << mb) | (q - (1 << mb))


def float_of_bits(bits, name):
    u = np.array([bits], dtype=uview(name))
    return u.view(dt_info(name)[0])[0]


def literal_bits(v, name):
    """A case-format scalar literal (docs/case-format.md) as bits of dtype `name`."""
    np_dt, bits, kind = dt_info(name)
    mask = (1 << bits) - 1
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, str):
        s = v.strip()
        if s[:2].lower() == "0x":
            return int(s, 16) & mask
        if kind != "f":
            return int(s) & mask
        neg = s.startswith("-")
        body = s.lstrip("+-").lower()
        eb, mb, canon = FLOAT_FORMAT[name]
        sign = (1 << (eb + mb)) if neg else 0
        if body == "nan":
            return sign | canon
        if body in ("inf", "infinity"):
            return sign | (((1 << eb) - 1) << mb)
        return round_fraction(Fraction(Decimal(s)), name, negative_zero=neg)
    if isinstance(v, int):
        return round_fraction(Fraction(v), name) if kind == "f" else v & mask
    if isinstance(v, Decimal):  # a JSON number with a fraction or exponent, kept exact
        if kind != "f":
            raise ValueError(f"literal {v} for {name}")
        return round_fraction(Fraction(v), name, negative_zero=v.is_signed())
    if isinstance(v, float):
        return literal_bits(repr(v), name)
    raise ValueError(f"bad literal {v!r} for {name}")


def decode(hexes, name, shape):
    """A list of hex strings / nulls -> (array, mask or None)."""
    np_dt, bits, kind = dt_info(name)
    ints = [0 if h is None else int(h, 16) for h in hexes]
    u = np.array(ints, dtype=UINT[bits])
    arr = u.astype(np.bool_) if kind == "b" else u.view(np_dt)
    mask = None
    if any(h is None for h in hexes):
        mask = np.array([h is not None for h in hexes], dtype=np.bool_).reshape(shape)
    return arr.reshape(shape), mask


def encode(arr, mask, name):
    np_dt, bits, kind = dt_info(name)
    flat = np.ascontiguousarray(arr).reshape(-1)
    u = flat.astype(np.uint8) if kind == "b" else flat.view(UINT[bits])
    width = max(1, (bits + 3) // 4)
    m = None if mask is None else np.broadcast_to(mask, arr.shape).reshape(-1)
    return [None if (m is not None and not m[i]) else "0x%0*x" % (width, int(x))
            for i, x in enumerate(u.tolist())]


def canon_nan(arr, name):
    """Arithmetic result: every NaN becomes the canonical quiet NaN, sign clear."""
    nan = np.isnan(arr)
    if not nan.any():
        return arr
    u = np.array(arr).view(uview(name)).copy()
    u[nan] = FLOAT_FORMAT[name][2]
    return u.view(dt_info(name)[0])


# ----------------------------------------------------------------------------------------------
# Values


class Val:
    """A single-device value: an array of the dtype and a mask of defined elements (None: all)."""

    __slots__ = ("dt", "arr", "mask")

    def __init__(self, dt, arr, mask=None):
        self.dt, self.arr, self.mask = dt, arr, mask


def and_masks(*vals):
    masks = [v.mask for v in vals if v.mask is not None]
    if not masks:
        return None
    shape = np.broadcast_shapes(*[v.arr.shape for v in vals])
    m = np.ones(shape, dtype=np.bool_)
    for x in masks:
        m = m & x
    return m


def defined(mask, shape):
    return np.ones(shape, dtype=np.bool_) if mask is None else np.broadcast_to(mask, shape)


def bits_of(arr, name):
    return arr.astype(np.uint8) if dt_info(name)[2] == "b" else arr.view(uview(name))


def select(cond, a, b, name):
    """cond ? a : b on raw bits (NaN payloads untouched)."""
    if dt_info(name)[2] == "b":
        return np.where(cond, a, b)
    u = np.where(cond, np.asarray(a).view(uview(name)), np.asarray(b).view(uview(name)))
    return np.asarray(u).view(dt_info(name)[0])


def two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def float_mulacc(a, b, c, name):
    if name == "float64":  # exact fractions, one rounding, per element
        out = []
        for x, y, z in zip(*[np.broadcast_arrays(a, b, c)[i].reshape(-1).tolist() for i in range(3)]):
            if all(np.isfinite([x, y, z])):
                out.append(round_fraction(Fraction(x) * Fraction(y) + Fraction(z), name,
                                          negative_zero=(x * y + z == 0 and np.signbit(x * y + z))))
            else:
                r = x * y + z
                out.append(int(np.array([r]).view(np.uint64)[0]))
        shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
        return canon_nan(np.array(out, dtype=np.uint64).view(np.float64).reshape(shape), name)
    # float16/float32: the product is exact in float64; the sum rounded to odd, then converted
    # (round to odd at 53 bits followed by one RNE at <= 24 bits is one correct rounding).
    a64, b64, c64 = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64
        s, err = two_sum(p, c64)
        fix = np.isfinite(s) & (err != 0) & ((s.view(np.uint64) & 1) == 0)
        toward = np.where(err > 0, np.inf, -np.inf)
        s = np.where(fix, np.nextafter(s, toward), s)
        r = s.astype(dt_info(name)[0])
    return canon_nan(r, name)


def int_divmod(op, a, b, name, mask):
    np_dt, bits, kind = dt_info(name)
    a, b = np.broadcast_arrays(a, b)
    live = defined(mask, a.shape)
    if kind == "b":
        if np.any(live & ~b):
            raise UB("div_by_zero")
        return a.copy() if op in ("CDIV", "FLOORDIV") else np.zeros(a.shape, dtype=np.bool_)
    if np.any(live & (b == 0)):
        raise UB("div_by_zero")
    if kind == "i":
        imin = np_dt(-(1 << (bits - 1)))
        if np.any(live & (a == imin) & (b == -1)):
            raise UB("div_overflow")
    safe_b = np.where(live & (b != 0), b, np.ones_like(b))
    if kind == "i":
        safe_b = np.where((a == imin) & (safe_b == -1), np.ones_like(b), safe_b)
    with np.errstate(all="ignore"):
        if op == "FLOORDIV":
            return np.floor_divide(a, safe_b)
        if op == "FLOORMOD":
            return np.remainder(a, safe_b)
        r = np.fmod(a, safe_b)  # C remainder: the dividend's sign
        if op == "CMOD":
            return r
        return ((a - r) // safe_b).astype(np_dt)  # exact division


def shift(op, a, c, name, mask):
    np_dt, bits, kind = dt_info(name)
    if kind == "b":
        raise Unsupported("shifts on bool")
    a, c = np.broadcast_arrays(a, c)
    live = defined(mask, a.shape)
    if np.any(live & ((c < 0) | (c >= bits))):
        raise UB("shift_out_of_range")
    u = a.view(UINT[bits])
    cnt = np.where(live, c, 0).astype(UINT[bits])
    if op == "SHL":
        return (u << cnt).view(np_dt)
    return a >> cnt.astype(np_dt) if kind == "i" else (u >> cnt)


def alu(op, dt, srcs, node_dt):
    """Elementwise op on Vals; dt is the operands' dtype, node_dt the result's."""
    arrs = [s.arr for s in srcs]
    mask = and_masks(*srcs)
    kind = dt_info(dt)[2]
    with np.errstate(all="ignore"):
        if op == "WHERE":
            c, a, b = srcs
            arr = select(c.arr, a.arr, b.arr, dt)
            if mask is not None:  # a defined condition only looks at the chosen branch
                m_chosen = select(c.arr, defined(a.mask, a.arr.shape), defined(b.mask, b.arr.shape), "bool")
                mask = defined(c.mask, c.arr.shape) & m_chosen
            return arr, mask
        a = arrs[0]
        b = arrs[1] if len(arrs) > 1 else None
        if op in ("CMPLT", "CMPNE", "CMPEQ"):
            f = {"CMPLT": np.less, "CMPNE": np.not_equal, "CMPEQ": np.equal}[op]
            return f(a, b), mask
        if op == "MAX":
            return select(np.less(a, b), b, a, dt), mask
        if kind == "b":
            r = {"ADD": np.logical_or, "OR": np.logical_or, "MUL": np.logical_and,
                 "AND": np.logical_and, "SUB": np.logical_xor, "XOR": np.logical_xor}.get(op)
            if r is not None:
                return r(a, b), mask
            if op == "NEG":
                return np.logical_not(a), mask
            if op == "MULACC":
                return np.logical_or(np.logical_and(a, b), arrs[2]), mask
            if op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
                return int_divmod(op, a, b, dt, mask), mask
            raise Unsupported(f"{op} on bool")
        if kind in "iu":
            if op == "ADD":
                return a + b, mask
            if op == "SUB":
                return a - b, mask
            if op == "MUL":
                return a * b, mask
            if op == "MULACC":
                return a * b + arrs[2], mask
            if op == "NEG":
                return np.negative(a), mask
            if op == "TRUNC":
                return a, mask
            if op in ("AND", "OR", "XOR"):
                return {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}[op](a, b), mask
            if op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
                return int_divmod(op, a, b, dt, mask), mask
            if op in ("SHL", "SHR"):
                return shift(op, a, b, dt, mask), mask
            raise Unsupported(f"{op} on {dt}")
        # floats
        if op == "NEG":  # a bit operation: flips the sign, NaN payload kept
            u = np.asarray(a).view(uview(dt)) ^ uview(dt)(1 << (dt_info(dt)[1] - 1))
            return u.view(dt_info(dt)[0]), mask
        if op == "ADD":
            r = canon_nan(a + b, dt)
            if WRONG and dt == "float32":  # deliberately one ulp off for nonzero finite sums
                u = np.array(r).view(np.uint32).copy()
                bump = np.isfinite(r) & (r != 0)
                u[bump] += np.uint32(1)
                r = u.view(np.float32)
            return r, mask
        if op == "SUB":
            return canon_nan(a - b, dt), mask
        if op == "MUL":
            return canon_nan(a * b, dt), mask
        if op == "FDIV":
            return canon_nan(a / b, dt), mask
        if op == "RECIPROCAL":
            return canon_nan(dt_info(dt)[0](1) / a, dt), mask
        if op == "SQRT":
            return canon_nan(np.sqrt(a), dt), mask
        if op == "TRUNC":
            return canon_nan(np.trunc(a), dt), mask
        if op == "MULACC":
            return float_mulacc(a, b, arrs[2], dt), mask
        raise Unsupported(f"{op} on {dt}")


def cast(v, to):
    """CAST of a Val to dtype `to` (docs/semantics.md, "Casts and bitcasts")."""
    frm = v.dt
    a = v.arr
    fk, tk = dt_info(frm)[2], dt_info(to)[2]
    to_np, to_bits = dt_info(to)[0], dt_info(to)[1]
    if frm == to:
        return a.copy()
    if tk == "b":
        return a != 0  # NaN is true, -0.0 false
    with np.errstate(all="ignore"):
        if fk != "f":
            if tk in "iu":
                return a.astype(to_np)  # two's complement wrap
            # int/bool -> float: the exact integer rounded once
            if fk == "b" or dt_info(frm)[1] <= 32:
                return a.astype(np.float64).astype(to_np)  # int32 is exact in float64
            flat = [round_fraction(Fraction(int(x)), to) for x in a.reshape(-1).tolist()]
            return np.array(flat, dtype=UINT[to_bits]).view(to_np).reshape(a.shape)
        # from a float
        if tk == "f":
            r = a.astype(to_np)
            nan = np.isnan(a)
            if nan.any():  # canonical NaN keeping the source's sign
                u = r.view(UINT[to_bits]).copy()
                sign = np.signbit(a)
                canon = FLOAT_FORMAT[to][2]
                u[nan & ~sign] = canon
                u[nan & sign] = canon | (1 << (to_bits - 1))
                r = u.view(to_np)
            return r
        # float -> int: truncate; UB outside the range (NaN, inf included)
        t = np.trunc(a.astype(np.float64))
        lo = -(2.0 ** (to_bits - 1)) if tk == "i" else 0.0
        hi = 2.0 ** (to_bits - 1) if tk == "i" else 2.0 ** to_bits
        ok = (t >= lo) & (t < hi)
        live = defined(v.mask, a.shape)
        if np.any(live & ~ok):
            raise UB("float_to_int_out_of_range")
        t = np.where(ok, t, 0.0)
        if to_bits < 64:
            return t.astype(np.int64).astype(to_np)
        flat = [int(x) & ((1 << 64) - 1) for x in t.reshape(-1).tolist()]
        return np.array(flat, dtype=np.uint64).view(to_np).reshape(a.shape)


def bitcast(v, to):
    if dt_info(v.dt)[1] != dt_info(to)[1] or "bool" in (v.dt, to):
        raise UB(f"BITCAST from {v.dt} to {to}")
    return np.ascontiguousarray(v.arr).view(uview(v.dt)).view(dt_info(to)[0])


def move(op, arg, arr, pad_value):
    """A movement op on a numpy array (also used on index arrays and masks)."""
    if op == "RESHAPE":
        return np.reshape(arr, tuple(arg))
    if op == "PERMUTE":
        return np.transpose(arr, tuple(arg))
    if op == "EXPAND":
        return np.broadcast_to(arr, tuple(arg) + arr.shape)
    if op == "SHRINK":
        offs, sizes = arg
        return arr[tuple(slice(o, o + s) for o, s in zip(offs, sizes))]
    if op == "FLIP":
        axes = tuple(i for i, f in enumerate(arg) if f)
        return np.flip(arr, axis=axes) if axes else arr
    if op == "PAD":
        offs, sizes = arg
        out = np.full(tuple(sizes), pad_value, dtype=arr.dtype)
        out[tuple(slice(o, o + s) for o, s in zip(offs, arr.shape))] = arr
        return out
    raise Unsupported(op)


# ----------------------------------------------------------------------------------------------
# REDUCE


def reduce_identity(op, name):
    np_dt, bits, kind = dt_info(name)
    if op == "ADD":
        return np.zeros((), dtype=np_dt)[()]
    if op == "MUL":
        return np.ones((), dtype=np_dt)[()]
    if kind == "f":
        return np_dt(-np.inf)
    if kind == "i":
        return np_dt(-(1 << (bits - 1)))
    return np.zeros((), dtype=np_dt)[()]  # unsigned 0, bool false


def fold(op, name, rows, mask_rows, order):
    """rows: (n, k) reduced elements x kept elements; returns (k,) values and mask."""
    n, k = rows.shape

    def combine(acc, accm, x, xm):
        r, _ = alu(op, name, [Val(name, acc), Val(name, x)], name)
        return r, accm & xm

    def seq(lo, hi):
        acc = np.full(k, reduce_identity(op, name), dtype=dt_info(name)[0])
        accm = np.ones(k, dtype=np.bool_)
        for r in range(lo, hi):
            acc, accm = combine(acc, accm, rows[r], mask_rows[r])
        return acc, accm

    def chain(parts):
        acc, accm = parts[0]
        for x, xm in parts[1:]:
            acc, accm = combine(acc, accm, x, xm)
        return acc, accm

    if order in (None, "sequential"):
        return seq(0, n)
    if not isinstance(order, dict) or len(order) != 1:
        raise Unsupported(f"reduce order {order!r}")
    (kind, m), = order.items()
    if kind == "chunks_of_split":
        # c contiguous chunks of n/c (c divides n), each a split(kk) fold of its own elements,
        # the chunk results folded from the identity
        if not (isinstance(m, list) and len(m) == 2):
            raise Unsupported(f"reduce order {order!r}")
        c, kk = (max(int(v), 1) for v in m)
        s = -(-n // c)
        acc = np.full(k, reduce_identity(op, name), dtype=dt_info(name)[0])
        accm = np.ones(k, dtype=np.bool_)
        for j in range(c):
            lo, hi = min(j * s, n), min((j + 1) * s, n)
            lanes = []
            for l in range(kk):
                la = np.full(k, reduce_identity(op, name), dtype=dt_info(name)[0])
                lm = np.ones(k, dtype=np.bool_)
                for r in range(lo + l, hi, kk):
                    la, lm = combine(la, lm, rows[r], mask_rows[r])
                lanes.append((la, lm))
            part, partm = chain(lanes)
            acc, accm = combine(acc, accm, part, partm)
        return acc, accm
    if not isinstance(m, int):
        raise Unsupported(f"reduce order {order!r}")
    m = max(int(m), 1)
    if kind == "split":
        parts = []
        for j in range(m):
            acc = np.full(k, reduce_identity(op, name), dtype=dt_info(name)[0])
            accm = np.ones(k, dtype=np.bool_)
            for r in range(j, n, m):
                acc, accm = combine(acc, accm, rows[r], mask_rows[r])
            parts.append((acc, accm))
        return chain(parts)
    if kind == "chunks":
        c = max(-(-n // m), 1)
        return chain([seq(min(j * c, n), min((j + 1) * c, n)) for j in range(m)])
    if kind == "tree":
        def tree(lo, hi):
            if hi - lo <= m:
                return seq(lo, hi)
            mid = lo + (hi - lo) // 2
            a, am = tree(lo, mid)
            b, bm = tree(mid, hi)
            return combine(a, am, b, bm)
        return tree(0, n)
    raise Unsupported(f"reduce order {order!r}")


# ----------------------------------------------------------------------------------------------
# The graph evaluator


VIEW_OPS = ("RESHAPE", "PERMUTE", "SHRINK", "FLIP", "DETACH")


class Graph:
    def __init__(self, req):
        self.nodes = {n["id"]: n for n in req["graph"]}
        self.inputs = {i["node"]: i for i in req.get("inputs", [])}
        self.vals = {}
        self.versions = {}
        self.written = set()

    def src(self, nid):
        return self.nodes[nid].get("src") or []

    # --- storage -------------------------------------------------------------------------------

    def is_view(self, nid):
        n = self.nodes[nid]
        if n["op"] == "BUFFER":
            return True
        if n["op"] in VIEW_OPS or n["op"] == "AFTER":
            return self.is_view(self.src(nid)[0])
        return False

    def idxmap(self, nid):
        """(storage BUFFER id, flat element indices of that buffer, in this node's shape)."""
        n = self.nodes[nid]
        if n["op"] == "BUFFER":
            return nid, np.arange(n["arg"]["size"])
        buf, idx = self.idxmap(self.src(nid)[0])
        if n["op"] in ("DETACH", "AFTER"):
            return buf, idx
        return buf, move(n["op"], n.get("arg"), idx, 0)

    def version(self, nid):
        """The version of storage a view node names: (buffer, chain of STORE ids, data, mask)."""
        if nid in self.versions:
            return self.versions[nid]
        n = self.nodes[nid]
        op = n["op"]
        if op == "BUFFER":
            v = self.value(nid)
            ver = (nid, (), v.arr.reshape(-1), defined(v.mask, v.arr.shape).reshape(-1))
        elif op in VIEW_OPS:
            ver = self.version(self.src(nid)[0])
        elif op == "AFTER":
            x = self.src(nid)[0]
            buf, _ = self.idxmap(x)
            cands = [self.version(x)]
            for s in self.stores_in(self.src(nid)[1:]):
                if self.idxmap(self.src(s)[0])[0] == buf:
                    cands.append(self.version(s))
            newest = max(cands, key=lambda c: len(c[1]))
            for c in cands:
                if newest[1][:len(c[1])] != c[1]:
                    raise ValueError(f"node {nid}: unordered stores to buffer {buf}")
            ver = newest
        elif op == "STORE":
            target, value = self.src(nid)
            base = self.version(target)
            buf, idx = self.idxmap(target)
            v = self.value(value)
            data = base[2].copy()
            m = base[3].copy()
            shape = idx.shape
            data[idx.reshape(-1)] = np.broadcast_to(v.arr, shape).reshape(-1)
            m[idx.reshape(-1)] = defined(v.mask, shape).reshape(-1)
            self.written.add(buf)
            ver = (buf, base[1] + (nid,), data, m)
        else:
            raise ValueError(f"node {nid} ({op}) is not a view of storage")
        self.versions[nid] = ver
        return ver

    def stores_in(self, deps):
        out, seen, todo = [], set(), list(deps)
        while todo:
            d = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            op = self.nodes[d]["op"]
            if op == "STORE":
                out.append(d)
            elif op in ("GROUP", "SINK"):
                todo.extend(self.src(d))
            elif op == "AFTER":
                todo.extend(self.src(d)[1:])
        return out

    # --- values --------------------------------------------------------------------------------

    def value(self, nid):
        if nid not in self.vals:
            # evaluate sources first, iteratively, so deep graphs do not hit the recursion limit
            stack = [nid]
            while stack:
                top = stack[-1]
                pending = [s for s in self.value_srcs(top) if s not in self.vals]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                if top not in self.vals:
                    self.vals[top] = self.eval_node(top)
        return self.vals[nid]

    def value_srcs(self, nid):
        n = self.nodes[nid]
        if n["op"] in ("AFTER", "STORE", "GROUP", "SINK"):
            return []  # storage: evaluated through version()
        return self.src(nid)

    def eval_node(self, nid):
        n = self.nodes[nid]
        op, dt, arg = n["op"], n.get("dtype"), n.get("arg")
        src = [self.vals[s] for s in self.value_srcs(nid)]
        if dt != "void":
            dt_info(dt)
        if op == "BUFFER":
            if not isinstance(arg["device"], str):
                raise Unsupported("multi-device buffers (device tuples) are not implemented")
            size = arg["size"]
            inp = self.inputs.get(nid)
            if inp is None:
                return Val(dt, np.zeros(size, dtype=dt_info(dt)[0]), np.zeros(size, dtype=np.bool_))
            comps = inp["components"]
            if len(comps) != 1:
                raise Unsupported("multi-device inputs are not implemented")
            arr, mask = decode(comps[0], dt, (size,))
            return Val(dt, arr, mask)
        if op == "CONST":
            bits = literal_bits(arg, dt)
            arr = np.array([bits], dtype=uview(dt))
            arr = arr.astype(np.bool_) if dt == "bool" else arr.view(dt_info(dt)[0])
            return Val(dt, arr.reshape(()))
        if op in MOVEMENT:
            x = src[0]
            arr = move(op, arg, x.arr, np.zeros((), dtype=x.arr.dtype)[()])
            mask = None if x.mask is None else move(op, arg, x.mask, True)  # padding is defined
            return Val(dt, arr, mask)
        if op == "CAST":
            return Val(dt, cast(src[0], dt), src[0].mask)
        if op == "BITCAST":
            return Val(dt, bitcast(src[0], dt), src[0].mask)
        if op in ELEMENTWISE:
            operand_dt = src[1].dt if op == "WHERE" else src[0].dt
            arr, mask = alu(op, operand_dt, src, dt)
            return Val(dt, np.asarray(arr), mask)
        if op == "REDUCE":
            rop, naxes = arg[0], arg[1]
            order = arg[2] if len(arg) > 2 else None
            if rop not in ("ADD", "MUL", "MAX"):
                raise Unsupported(f"REDUCE {rop}")
            x = src[0]
            shape = x.arr.shape
            out_shape = shape[naxes:]
            red_n = int(np.prod(shape[:naxes], dtype=np.int64))
            out_n = int(np.prod(out_shape, dtype=np.int64))
            rows = np.reshape(x.arr, (red_n, out_n))
            mrows = np.reshape(defined(x.mask, shape), (red_n, out_n))
            acc, accm = fold(rop, dt, rows, mrows, order)
            return Val(dt, acc.reshape(out_shape), None if accm.all() else accm.reshape(out_shape))
        if op in ("CONTIGUOUS", "DETACH"):
            return src[0]
        if op == "COPY":
            if not isinstance(arg, str):
                raise Unsupported("COPY to a device tuple (broadcast) is not implemented")
            return src[0]
        if op == "AFTER":
            x = self.src(nid)[0]
            if not self.is_view(x):
                return self.value(x)
            ver = self.version(nid)
            _, idx = self.idxmap(nid)
            return Val(dt, ver[2][idx], None if ver[3].all() else ver[3][idx])
        raise Unsupported(f"op {op} is not implemented")


def run(req):
    for o in req["outputs"]:
        if o.get("devices", 1) != 1:
            raise Unsupported("multi-device outputs are not implemented")
    g = Graph(req)
    outs = []
    for o in req["outputs"]:
        v = g.value(o["node"])
        arr = np.broadcast_to(v.arr, tuple(o["shape"]))
        mask = None if v.mask is None else np.broadcast_to(v.mask, tuple(o["shape"]))
        outs.append({"name": o["name"], "components": [encode(arr, mask, v.dt)]})
    return {"type": "result", "id": req["id"], "outputs": outs,
            "schedule": {"writes": sorted(g.written)}}


def answer(line):
    try:
        req = json.loads(line, parse_float=Decimal)
    except ValueError as e:
        return {"type": "error", "id": None, "message": f"not JSON: {e}"}
    rid = req.get("id") if isinstance(req, dict) else None
    try:
        if not isinstance(req, dict):
            raise ValueError("a request must be a JSON object")
        t = req.get("type")
        if t == "hello":
            return {"type": "hello", "protocol": PROTOCOL, "name": "numpy-graph" + ("-wrong" if WRONG else ""),
                    "level": "graph", "accepts": ACCEPTS}
        if t == "run":
            return run(req)
        if t == "run_schedule":
            return {"type": "unsupported", "id": rid, "reason": "numpy-graph is a graph-level backend"}
        raise ValueError(f"unknown request type {t!r}")
    except Unsupported as e:
        return {"type": "unsupported", "id": rid, "reason": str(e)}
    except UB as e:
        return {"type": "error", "id": rid, "message": f"undefined behaviour: {e}"}
    except Exception as e:  # never crash on a request
        log(traceback.format_exc())
        return {"type": "error", "id": rid, "message": f"{type(e).__name__}: {e}"}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(answer(line)), flush=True)


if __name__ == "__main__":
    # the storage helpers recurse along view chains: room for deep graphs
    import threading
    sys.setrecursionlimit(200000)
    threading.stack_size(512 << 20)
    t = threading.Thread(target=main)
    t.start()
    t.join()
