"""The uopkit <-> tinygrad 0.14.0 mapping: op names, dtypes, devices, static arguments and literals.

Both directions live here: uopkit -> tinygrad for the bridge (bridges/tinygrad/bridge.py: each uopkit node
becomes the tinygrad UOp with the same op name, built directly, no Tensor methods) and tinygrad -> uopkit for
the exporter (tools/tinygrad_export.py). uopkit kept tinygrad's op names and argument conventions
(docs/ir.md); what differs is where a static argument lives: tinygrad 0.14 carries the shapes of
RESHAPE/EXPAND/PAD/SHRINK as CONST/STACK sources (`UOp._mop` builds them), uopkit carries them in `arg`.
Import it with `bridges/tinygrad` on sys.path.
"""

import struct
from decimal import Decimal
from fractions import Fraction

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops

# uopkit dtype name -> tinygrad DType
DTYPES = {
    "bool": dtypes.bool, "int8": dtypes.int8, "int16": dtypes.int16, "int32": dtypes.int32, "int64": dtypes.int64,
    "uint8": dtypes.uint8, "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
    "float16": dtypes.float16, "bfloat16": dtypes.bfloat16, "float32": dtypes.float32, "float64": dtypes.float64,
    "fp8e4m3": dtypes.fp8e4m3, "fp8e5m2": dtypes.fp8e5m2,
}
# bits per element (bool: one byte in memory, value 0/1)
BITS = {"bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32,
        "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "fp8e4m3": 8, "fp8e5m2": 8}
# float dtype -> (exponent bits, mantissa bits); fp8e4m3 is the "fn" variant (no inf, NaN = S.1111.111)
FLOATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52),
          "fp8e4m3": (4, 3), "fp8e5m2": (5, 2)}
SIGNED = {"int8", "int16", "int32", "int64"}

# uopkit op name -> tinygrad Ops member, for the ALU ops (same names in both IRs)
ALU = {name: getattr(Ops, name) for name in (
    "ADD", "SUB", "MUL", "NEG", "MAX", "CMPLT", "CMPNE", "CMPEQ", "WHERE", "AND", "OR", "XOR", "CDIV", "CMOD",
    "FLOORDIV", "FLOORMOD", "SHL", "SHR", "MULACC", "FDIV", "RECIPROCAL", "SQRT", "TRUNC", "EXP2", "LOG2", "SIN",
    "POW")}
MOVEMENT = {name: getattr(Ops, name) for name in ("RESHAPE", "EXPAND", "PERMUTE", "PAD", "SHRINK", "FLIP")}
REDUCE_OPS = {"ADD": Ops.ADD, "MUL": Ops.MUL, "MAX": Ops.MAX}
# everything the bridge translates (the hello's `accepts.ops`)
OPS = sorted(set(ALU) | set(MOVEMENT) | {
    "BUFFER", "CONST", "CAST", "BITCAST", "REDUCE", "STORE", "AFTER", "GROUP", "SINK", "CONTIGUOUS", "DETACH",
    "COPY", "MSELECT", "MSTACK", "UNSHARD", "ALLREDUCE"})


def movement_arg(op, arg):
    """uopkit's movement arg -> the arg of tinygrad's `UOp._mop(op, arg)`.

    RESHAPE/EXPAND: a shape (EXPAND: the new leading dims, as in tinygrad). PERMUTE: the permutation. FLIP: the
    per-axis bools. PAD/SHRINK: uopkit `[[offsets], [sizes]]` -> tinygrad per-axis `(offset, size)` pairs
    (PAD's size is the new size, SHRINK's the window's: the same convention)."""
    if op in ("RESHAPE", "EXPAND", "PERMUTE"):
        return tuple(int(x) for x in arg)
    if op == "FLIP":
        return tuple(bool(x) for x in arg)
    offs, sizes = arg
    return tuple((int(o), int(s)) for o, s in zip(offs, sizes))


def device(dev, tg):
    """A uopkit device (`CPU`, `CPU:n`, or a list of them) -> tinygrad's (`TG`, `TG:n`; tinygrad canonicalizes
    `TG:0` to `TG`). Raises ValueError for a device kind other than CPU."""
    if isinstance(dev, list):
        return tuple(device(d, tg) for d in dev)
    kind, _, num = dev.partition(":")
    if kind != "CPU":
        raise ValueError(f"device {dev}: only CPU devices are mapped (CPU:n -> {tg}:n)")
    n = int(num or 0)
    return tg if n == 0 else f"{tg}:{n}"


def uopkit_device(tgdev):
    """tinygrad `TG` / `TG:n` -> uopkit `CPU:n` (for copy pairs)."""
    _, _, num = tgdev.partition(":")
    return f"CPU:{int(num or 0)}"


# --- literals ----------------------------------------------------------------------------------------------


def round_fraction(x, name, negative_zero=False):
    """Bits of the exact rational x rounded once (nearest, ties to even) to float dtype `name` (IEEE-style;
    fp8e4m3 saturates to NaN above its max, as the oracle's literal parser does not need: literals are exact)."""
    eb, mb = FLOATS[name]
    sign = 1 << (eb + mb)
    s = sign if (x < 0 or (x == 0 and negative_zero)) else 0
    a = abs(x)
    if a == 0:
        return s
    bias = (1 << (eb - 1)) - 1
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    e = max(e, 1 - bias)
    shift = e - mb
    num, den = (n, d << shift) if shift >= 0 else (n << -shift, d)
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    if q >> (mb + 1):
        q >>= 1
        e += 1
    emax = bias if name != "fp8e4m3" else bias + 1
    if e > emax:
        return s | (((1 << eb) - 1) << mb)
    if q < (1 << mb):
        return s | q
    return s | ((e + bias) << mb) | (q - (1 << mb))


def nan_bits(name, neg=False):
    eb, mb = FLOATS[name]
    quiet = ((1 << eb) - 1) << mb | (1 << (mb - 1)) if name != "fp8e4m3" else 0x7F
    return quiet | ((1 << (eb + mb)) if neg else 0)


def inf_bits(name, neg=False):
    eb, mb = FLOATS[name]
    return (((1 << eb) - 1) << mb) | ((1 << (eb + mb)) if neg else 0)


def literal_bits(v, name):
    """A case-format scalar literal (docs/case-format.md) as bits of dtype `name`."""
    bits = BITS[name]
    mask = (1 << bits) - 1
    isfloat = name in FLOATS
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, str):
        s = v.strip()
        if s[:2].lower() == "0x":
            return int(s, 16) & mask
        if not isfloat:
            if s.lower() in ("true", "false"):
                return int(s.lower() == "true")
            return int(s) & mask
        neg = s.startswith("-")
        body = s.lstrip("+-").lower()
        if body == "nan":
            return nan_bits(name, neg)
        if body in ("inf", "infinity"):
            return inf_bits(name, neg)
        return round_fraction(Fraction(Decimal(s)), name, negative_zero=neg)
    if isinstance(v, int):
        return round_fraction(Fraction(v), name) if isfloat else v & mask
    if isinstance(v, Decimal):
        if not isfloat:
            return int(v) & mask
        return round_fraction(Fraction(v), name, negative_zero=v.is_signed())
    if isinstance(v, float):
        return literal_bits(repr(v), name)
    raise ValueError(f"bad literal {v!r} for {name}")


def float_value(bits, name):
    """The Python float (exact: every format here is a subset of float64) of float bits."""
    if name == "float64":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    if name == "float32":
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if name == "float16":
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    if name == "bfloat16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    eb, mb = FLOATS[name]
    neg = bits >> (eb + mb) & 1
    e = (bits >> mb) & ((1 << eb) - 1)
    m = bits & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    if name == "fp8e4m3" and e == (1 << eb) - 1 and m == (1 << mb) - 1:
        v = float("nan")
    elif name != "fp8e4m3" and e == (1 << eb) - 1:
        v = float("inf") if m == 0 else float("nan")
    elif e == 0:
        v = m * 2.0 ** (1 - bias - mb)
    else:
        v = (m + (1 << mb)) * 2.0 ** (e - bias - mb)
    return -v if neg else v


def python_value(bits, name):
    """Bits of `name` -> the Python value tinygrad's CONST holds (bool, int, or float)."""
    if name == "bool":
        return bool(bits & 1)
    if name in FLOATS:
        return float_value(bits, name)
    if name in SIGNED and bits >> (BITS[name] - 1):
        return bits - (1 << BITS[name])
    return bits


# --- buffers ---------------------------------------------------------------------------------------------


def pack(elems, name):
    """Hex strings / None (uninitialized: 0) -> the bytes of a tinygrad buffer of `name` (little endian)."""
    width = max(1, BITS[name] // 8)
    out = bytearray()
    for h in elems:
        out += (0 if h is None else int(h, 16)).to_bytes(width, "little")
    return bytes(out)


def unpack(raw, name, n):
    """Bytes of a tinygrad buffer -> n hex strings of `name`'s bits."""
    width = max(1, BITS[name] // 8)
    mask = (1 << BITS[name]) - 1
    return ["0x%x" % (int.from_bytes(raw[i * width:(i + 1) * width], "little") & mask) for i in range(n)]


# ---- tinygrad -> uopkit (tools/tinygrad_export.py) ----

# dtypes: tinygrad DType.name -> uopkit dtype name
TG_TO_UK_DTYPE = {
    "bool": "bool",
    "signed char": "int8", "char": "int8",
    "unsigned char": "uint8",
    "short": "int16", "unsigned short": "uint16",
    "int": "int32", "unsigned int": "uint32",
    "long": "int64", "unsigned long": "uint64",
    "half": "float16", "__bf16": "bfloat16", "bfloat16": "bfloat16",
    "float": "float32", "double": "float64",
    "float8_e4m3": "fp8e4m3", "float8_e5m2": "fp8e5m2",
    "void": "void",
}
# uopkit dtype name -> attribute of tinygrad.dtypes
UK_TO_TG_DTYPE_ATTR = {
    "bool": "bool", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "fp8e4m3": "fp8e4m3", "fp8e5m2": "fp8e5m2", "void": "void",
}
# element width in bytes (raw bits of a buffer's contents are read little-endian)
UK_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
               "fp8e4m3": 1, "fp8e5m2": 1}
WEAK_DTYPES = ("weakint", "weakfloat")

# ALU ops: same name on both sides (tinygrad GroupOp.ALU minus THREEFRY, which uopkit has not)
ALU_OPS = frozenset({
    "ADD", "SUB", "MUL", "MULACC", "FDIV", "CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "MAX", "NEG",
    "TRUNC", "EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "POW", "SHL", "SHR", "AND", "OR", "XOR",
    "CMPLT", "CMPNE", "CMPEQ", "WHERE",
})
COMPARE_OPS = frozenset({"CMPLT", "CMPNE", "CMPEQ"})
# ops whose tinygrad form is (x, shape-sources...) and whose uopkit form is (x) + static arg
SHAPE_ARG_OPS = frozenset({"RESHAPE", "EXPAND", "PAD", "SHRINK"})
# ops that pass over with the same sources and an arg that needs no conversion (None / int / bools)
PLAIN_OPS = frozenset({"STORE", "AFTER", "SINK", "GROUP", "CONTIGUOUS", "DETACH", "MSTACK"})
# tinygrad tensor-graph ops the exporter lowers away (documented in tools/README.md)
IDENTITY_OPS = frozenset({"CONTIGUOUS_BACKWARD"})  # gradient-only marker: its value is its source


def uk_dtype(tg_dtype):
    """tinygrad DType -> uopkit dtype name (KeyError for one uopkit has not)."""
    return TG_TO_UK_DTYPE[tg_dtype.name]


def tg_dtype(dtypes, uk):
    """uopkit dtype name -> tinygrad DType (pass `tinygrad.dtypes`)."""
    return getattr(dtypes, UK_TO_TG_DTYPE_ATTR[uk])


def uk_device(tg_dev):
    """tinygrad device (str or tuple) -> uopkit device. Every tinygrad device `X` / `X:n` becomes
    uopkit `CPU:0` / `CPU:n` (uopkit's devices are CPU:n; the backend under test decides where
    they run)."""
    if isinstance(tg_dev, tuple):
        return [uk_device(d) for d in tg_dev]
    _, _, n = tg_dev.partition(":")
    return f"CPU:{int(n) if n else 0}"


def tg_device(uk_dev, base="CPU"):
    """uopkit device (str or list) -> tinygrad device on `base` (CPU:0 -> "CPU", CPU:n -> "CPU:n")."""
    if isinstance(uk_dev, list):
        return tuple(tg_device(d, base) for d in uk_dev)
    _, _, n = uk_dev.partition(":")
    return base if n in ("", "0") else f"{base}:{n}"


def uk_pad_arg(marg):
    """tinygrad PAD marg ((offset, new_size) per axis) -> uopkit [[offsets], [new_sizes]]."""
    return [[int(a) for a, _ in marg], [int(b) for _, b in marg]]


def uk_shrink_arg(marg):
    """tinygrad SHRINK marg ((offset, size) per axis) -> uopkit [[offsets], [sizes]]."""
    return [[int(a) for a, _ in marg], [int(b) for _, b in marg]]


def tg_pairs(uk_arg):
    """uopkit [[offsets], [sizes]] (PAD or SHRINK) -> tinygrad per-axis ((offset, size), ...)."""
    return tuple(zip(uk_arg[0], uk_arg[1]))


def uk_reduce_arg(arg):
    """tinygrad REDUCE arg (Ops.X, n) -> uopkit ["X", n]."""
    op, n = arg
    return [op.name, int(n)]


def uk_allreduce_arg(arg):
    """tinygrad ALLREDUCE arg (Ops.X, devices) -> uopkit ["X", [devices]]."""
    op, devs = arg
    return [op.name, uk_device(tuple(devs))]
