"""The uopkit <-> tinygrad 0.14.0 mapping of op names, dtypes, devices and static arguments.

Both directions live here so that the exporter (tinygrad -> uopkit case files,
tools/tinygrad_export.py) and the bridge (uopkit -> tinygrad) share one table.
Imports nothing from tinygrad at module level: the tables are plain strings, and the
functions that need tinygrad objects take them as arguments.

uopkit kept tinygrad's op names and argument conventions (docs/ir.md); what differs is where
a static argument lives: tinygrad 0.14 carries the shapes of RESHAPE/EXPAND/PAD/SHRINK as
CONST/STACK *sources*, uopkit carries them in `arg`.
"""

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
REDUCE_OPS = frozenset({"ADD", "MUL", "MAX"})
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
