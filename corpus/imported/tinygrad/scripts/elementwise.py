"""Elementwise ops and dtype promotion, as tinygrad's test_ops / test_dtype exercise them.
Exported by tools/tinygrad_export.py (see ../README.md). Values are edge values of each dtype."""
import os
import random
import sys
from tinygrad import Tensor, dtypes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gen"))
import numerics  # noqa: E402  (the corpus generator's exact arithmetic: Python fractions, no uopkit code)

R = random.Random(1234)
FLOATS = {"float32": dtypes.float32, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16, "float64": dtypes.float64}
INTS = {"int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16, "uint16": dtypes.uint16,
        "int32": dtypes.int32, "uint32": dtypes.uint32, "int64": dtypes.int64, "uint64": dtypes.uint64}
IRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
          "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}
FEDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 100.0, 0.125, -7.75]


def bf(*names):
    """bfloat16 cases run on tinygrad's PYTHON device: clang's x86_64 freestanding target here has no __bf16."""
    return ["tg:device=PYTHON"] if "bfloat16" in names else []


def div_alt(fname, a, b):
    """tinygrad builds a / b as MUL(a, RECIPROCAL(b)); its CPU kernels divide (one rounding: the
    expected values), the oracle evaluates the graph as written (two roundings, docs/semantics.md
    "Why FDIV is a real division"). The two-rounding list, derived with the generator's exact arithmetic."""
    out = []
    for x, y in zip(a, b):
        xb, yb = numerics.fbits(fname, x), numerics.fbits(fname, y)
        out.append(numerics.lit(fname, numerics.alu("MUL", fname, xb, numerics.alu("RECIPROCAL", fname, yb))))
    return "tg:either=y=" + ",".join(str(v) for v in out)


def trunc_alt(fname, vals, op):
    """tinygrad's PYTHON emulator (used for bfloat16) rounds with math.trunc/floor/ceil, which return
    ints, so -0.0 comes back +0.0; the oracle keeps the sign (IEEE, docs/semantics.md). The alternative
    is the same list with -0.0 where the input is -0.0 (the exact op keeps it: trunc/floor/ceil(-0.0) = -0.0)."""
    import math
    res = [getattr(math, op)(v) for v in vals]
    return "tg:either=y=" + ",".join("-0.0" if str(v) == "-0.0" else numerics.lit(fname, numerics.fbits(fname, float(r))) for v, r in zip(vals, res))


def ivals(name, n=12):
    lo, hi = IRANGE[name]
    base = [lo, hi, 0, 1, lo + 1, hi - 1] if lo < 0 else [lo, hi, 1, 2, hi - 1, hi // 2]
    return (base + [R.randint(lo, hi) for _ in range(n)])[:n]


def small_ivals(name, n=12):
    lo, hi = IRANGE[name]
    return [max(lo, min(hi, R.randint(-9, 9) if lo < 0 else R.randint(0, 15))) for _ in range(n)]


def cases():
    # float binary ops on exact-friendly data
    for fname, fdt in FLOATS.items():
        a = FEDGE
        b = [2.0, -4.0, 0.25, 8.0, -0.5, 1.5, -3.0, 0.75, 16.0, 2.0]
        for op, f in [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
                      ("div", lambda x, y: x / y), ("maximum", lambda x, y: x.maximum(y)),
                      ("minimum", lambda x, y: x.minimum(y)), ("lt", lambda x, y: x < y), ("eq", lambda x, y: x == y),
                      ("ne", lambda x, y: x != y), ("ge", lambda x, y: x >= y), ("where", lambda x, y: (x < y).where(x, y))]:
            extra = [div_alt(fname, a, b)] if op == "div" and fname != "bfloat16" else []
            desc = f"Tensor {op} on {fname} (signed zeros, dyadic values)"
            if extra:
                desc += ("; tinygrad's graph is MUL(a, RECIPROCAL(b)), its CPU kernel divides once (expected); the oracle"
                         " rounds the graph's two ops (the alternative, derived with corpus/gen/numerics.py)")
            yield (f"{op}_{fname}", desc, ["alu", fname, op] + bf(fname) + extra,
                   lambda a=a, b=b, f=f, fdt=fdt: {"y": f(Tensor(a, dtype=fdt), Tensor(b, dtype=fdt))})
        for op, f in [("neg", lambda x: -x), ("abs", lambda x: x.abs()), ("relu", lambda x: x.relu()),
                      ("sqrt", lambda x: x.abs().sqrt()), ("reciprocal", lambda x: (x + 0.5).reciprocal()),
                      ("trunc", lambda x: x.trunc()), ("floor", lambda x: x.floor()), ("ceil", lambda x: x.ceil()),
                      ("square", lambda x: x.square()), ("sign", lambda x: x.sign()), ("clip", lambda x: x.clip(-1.0, 2.0)),
                      ("const_add", lambda x: x + 3), ("rsub", lambda x: 1 - x), ("rdiv", lambda x: 2 / (x + 0.5))]:
            extra = [trunc_alt(fname, FEDGE, op)] if fname == "bfloat16" and op in ("trunc", "floor", "ceil") else []
            desc = f"Tensor.{op} on {fname}"
            if extra:
                desc += ("; computed on PYTHON, whose math." + op + " returns an int, so -0.0 -> +0.0 (expected); the oracle keeps"
                         " -0.0 as IEEE does (the alternative; docs/semantics.md, tinygrad differs)")
            yield (f"{op}_{fname}", desc, ["alu", fname, op] + bf(fname) + extra,
                   lambda f=f, fdt=fdt: {"y": f(Tensor(FEDGE, dtype=fdt))})
    # float specials: inf, nan
    for fname in ("float32", "float16"):
        fdt = FLOATS[fname]
        sp = [float("inf"), float("-inf"), 1.0, -0.0, 65504.0 if fname == "float16" else 3.0e38, 2.0]
        yield (f"inf_arith_{fname}", f"x*2 and x+1 through inf and overflow on {fname}", ["alu", fname, "inf"],
               lambda sp=sp, fdt=fdt: {"y": Tensor(sp, dtype=fdt) * 2, "z": Tensor(sp, dtype=fdt) + 1})
        yield (f"nan_where_{fname}", f"isnan-free NaN plumbing: where(x != x) on {fname}", ["alu", fname, "nan", "tg:nan=any"],
               lambda fdt=fdt: {"y": (Tensor([0.0, 1.0, float("nan"), -2.0], dtype=fdt) * Tensor([float("inf"), 1.0, 1.0, 0.0], dtype=fdt)) != 1.0})
    # transcendentals: CPU uses tinygrad's polynomials, PYTHON libm; both recorded
    for fname in ("float32", "float16"):
        fdt = FLOATS[fname]
        xs = [0.0, 0.5, 1.0, -1.0, 2.0, -3.25, 0.1, 4.0]
        for op, f in [("exp", lambda x: x.exp()), ("exp2", lambda x: x.exp2()), ("log", lambda x: (x.abs() + 1).log()),
                      ("log2", lambda x: (x.abs() + 1).log2()), ("sin", lambda x: x.sin()), ("cos", lambda x: x.cos()),
                      ("sigmoid", lambda x: x.sigmoid()), ("tanh", lambda x: x.tanh())]:
            if fname == "float16" and op in ("sigmoid", "tanh"):
                continue  # see ../README.md: float16 composites of exp2 and a division differ by the
                #          rounding of float16 intermediates and nothing else
            yield (f"{op}_{fname}", f"Tensor.{op} on {fname}: tinygrad's CPU backend evaluates its own polynomial (transcendental.py), its PYTHON emulator libm; the oracle takes libm's double rounded once, so the PYTHON result is recorded as the alternative",
                   ["alu", fname, op, "transcendental", "tg:alt=PYTHON"], lambda xs=xs, f=f, fdt=fdt: {"y": f(Tensor(xs, dtype=fdt))})
    # integer ops
    for iname, idt in INTS.items():
        a, b = ivals(iname), ivals(iname)
        for op, f in [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
                      ("maximum", lambda x, y: x.maximum(y)), ("lt", lambda x, y: x < y), ("eq", lambda x, y: x == y),
                      ("xor", lambda x, y: x ^ y), ("and", lambda x, y: x & y), ("or", lambda x, y: x | y)]:
            yield (f"{op}_{iname}", f"Tensor {op} on {iname} with extremes (wrap-around)", ["alu", iname, op],
                   lambda a=a, b=b, f=f, idt=idt: {"y": f(Tensor(a, dtype=idt), Tensor(b, dtype=idt))})
        sa, sb = small_ivals(iname), [v if v != 0 else 3 for v in small_ivals(iname)]
        sb = [v if v > 0 else 3 for v in sb]
        yield (f"idiv_{iname}", f"Tensor // and % on {iname}, positive divisors", ["alu", iname, "div"],
               lambda sa=sa, sb=sb, idt=idt: {"q": Tensor(sa, dtype=idt) // Tensor(sb, dtype=idt), "r": Tensor(sa, dtype=idt) % Tensor(sb, dtype=idt)})
        yield (f"shift_{iname}", f"Tensor << 2 and >> 1 on {iname}", ["alu", iname, "shift"],
               lambda a=a, idt=idt: {"l": Tensor(a, dtype=idt) << 2, "r": Tensor(a, dtype=idt) >> 1})
        yield (f"neg_{iname}", f"-x on {iname}", ["alu", iname, "neg"], lambda a=a, idt=idt: {"y": -Tensor(a, dtype=idt)})
    # promotion
    pairs = [("int8", "uint8"), ("int8", "int32"), ("uint8", "int16"), ("uint8", "float16"), ("int32", "float32"),
             ("float16", "float32"), ("bfloat16", "float16"), ("bfloat16", "float32"), ("uint32", "int32"),
             ("int64", "float64"), ("bool", "int32"), ("bool", "float32"), ("uint16", "int8")]
    # uint64 + int64: tinygrad 0.14.0 promotes to a weak float it then cannot realize
    # ("must be BUFFER Ops.ADD"), so there is nothing to import
    alld = {**FLOATS, **INTS, "bool": dtypes.bool}
    for x, y in pairs:
        xv = [1, 0, 1, 1] if x == "bool" else [1, 2, 3, 100]
        yv = [3, 4, 5, 6] if y != "bool" else [1, 0, 0, 1]
        yield (f"promote_{x}_{y}", f"{x} + {y} promotes as tinygrad's least_upper_dtype says", ["alu", "promotion", x, y] + bf(x, y),
               lambda xv=xv, yv=yv, x=x, y=y: {"y": Tensor(xv, dtype=alld[x]) + Tensor(yv, dtype=alld[y])})
    # casts
    for src, dst, vals in [("float32", "int32", [1.5, -1.5, 100.9, -0.0, 2147483520.0]), ("float32", "float16", [1.0, 65504.0, 65520.0, 1e-8, 0.1]),
                           ("float32", "bfloat16", [1.0, 0.1, 3.0e38, -2.5, 1.00390625]), ("int32", "float32", [16777217, 16777219, -1, 0, 7]),
                           ("int32", "int8", [300, -129, 127, -1, 0]), ("int32", "uint8", [300, -1, 255, 256, 1]), ("float64", "float32", [0.1, 1e-40, 1e39, -0.0, 3.5]),
                           ("float16", "float32", [0.5, 65504.0, -0.0, 6e-8, 1.0]), ("float32", "bool", [0.0, -0.0, 1.0, 0.5, -3.0]),
                           ("bool", "float32", [True, False, True, False, True]), ("uint8", "int8", [0, 127, 128, 255, 1]), ("int64", "int32", [2**40 + 5, -2**40 - 1, 1, 0, -1])]:
            yield (f"cast_{src}_{dst}", f"Tensor.cast {src} -> {dst}", ["cast", src, dst] + bf(src, dst),
                   lambda vals=vals, src=src, dst=dst: {"y": Tensor(vals, dtype=alld[src]).cast(alld[dst])})
    for src, dst, vals in [("float32", "int32", [1.0, -0.0, 2.5, float("inf")]), ("int16", "float16", [15360, -1024, 0, 31744]),
                           ("uint32", "float32", [0x3f800000, 0x80000000, 0x7f800000, 1])]:
        yield (f"bitcast_{src}_{dst}", f"Tensor.bitcast {src} -> {dst}", ["bitcast", src, dst],
               lambda vals=vals, src=src, dst=dst: {"y": Tensor(vals, dtype=alld[src]).bitcast(alld[dst])})
