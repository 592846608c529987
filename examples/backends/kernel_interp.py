#!/usr/bin/env python3
"""kernel-interp: an example *kernel-level* external backend for uopkit (protocol `uopkit-backend/1`).

uopkit schedules each case itself and sends the schedule: its buffers, its lowered kernel programs
(linear SSA lists, `interp/src/kernel/mod.rs`), its steps (kernel launches and COPYs) and the buffers to
read back. This program plays a device runtime plus a renderer: it *renders* every kernel program into
a Python function (RANGE/END become nested `for` loops, each instruction one line), runs the steps in
order on byte-addressed storage, and answers the contents of the buffers asked for. It shows how a
renderer or device under development plugs into the conformance kit (docs/backend-protocol.md).

Run it through the kit:

    uopkit check --backend exec:'python3 examples/backends/kernel_interp.py'

It needs only the Python standard library (scalars are exact: integers are Python ints masked to
their width; floats are carried as raw bits and computed in Python's float64, then rounded once to
float32/float16 with `struct` -- a double rounding that is innocuous for + - * / sqrt because
53 >= 2*24+2; MULACC and 64-bit int->float casts use exact fractions).

Declared subset (the hello's `accepts`, applied by uopkit to the programs and buffers it sends):

* devices: CPU (`CPU:0`, `CPU:1`, ...; a COPY between devices is a copy of the storage).
* dtypes: bool, int8..int64, uint8..uint64, float16, float32, float64.
* instructions: PARAM BUFFER (register and local) CONST RANGE END INDEX LOAD STORE SPECIAL BARRIER,
  CAST BITCAST and the ALU ops ADD SUB MUL NEG MAX CMPLT CMPNE CMPEQ WHERE AND OR XOR CDIV CMOD
  FLOORDIV FLOORMOD SHL SHR MULACC FDIV RECIPROCAL SQRT TRUNC (not EXP2 LOG2 SIN POW).
* size: a schedule whose kernels would execute more than about 2,000,000 instructions (estimated from
  the loop bounds and launch sizes before anything runs) is answered `unsupported` ("too large for
  this example"): a Python interpreter is slow.

Semantics it follows (the kernel interpreter's, `interp/src/kernel/interp.rs`): undefined ALU
results (integer division by zero, shifts out of range, float->int out of range) are poison that
becomes an error only when stored, dereferenced as an index, used as a gate or a loop bound; an
access out of bounds is an error; work items of a workgroup run one after another up to each
BARRIER; uninitialized memory holds the byte 0xA5, as uopkit's own executor fills it.

Reads requests from stdin, one JSON object a line; answers one line each (flushed); logs to stderr.
"""

import json
import math
import struct
import sys
import traceback
from fractions import Fraction

PROTOCOL = "uopkit-backend/1"
MAX_STEPS = 2_000_000  # instruction executions per request this example is willing to interpret
MAX_LOOP_NESTING = 18  # Python allows 20 statically nested blocks


class Unsupported(Exception):
    pass


class KernelFailure(Exception):
    """The kernel did something undefined (answered `error`)."""


# name -> (bits, kind, memoryview format)
DTYPES = {
    "bool": (1, "b", "B"),
    "int8": (8, "i", "B"), "int16": (16, "i", "H"), "int32": (32, "i", "I"), "int64": (64, "i", "Q"),
    "uint8": (8, "u", "B"), "uint16": (16, "u", "H"), "uint32": (32, "u", "I"), "uint64": (64, "u", "Q"),
    "float16": (16, "f", "H"), "float32": (32, "f", "I"), "float64": (64, "f", "Q"),
}
ITEMSIZE = {"B": 1, "H": 2, "I": 4, "Q": 8}
# float dtype -> (exponent bits, mantissa bits, canonical NaN, struct format)
FLOAT = {"float16": (5, 10, 0x7E00, "e"), "float32": (8, 23, 0x7FC00000, "f"),
         "float64": (11, 52, 0x7FF8000000000000, "d")}

ALU_OPS = ["ADD", "SUB", "MUL", "NEG", "MAX", "CMPLT", "CMPNE", "CMPEQ", "WHERE", "AND", "OR", "XOR",
           "CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "SHL", "SHR", "MULACC", "FDIV", "RECIPROCAL",
           "SQRT", "TRUNC"]
INST_OPS = ["PARAM", "BUFFER", "CONST", "RANGE", "END", "INDEX", "LOAD", "STORE", "SPECIAL", "BARRIER",
            "CAST", "BITCAST"]
ACCEPTS = {"devices": ["CPU"], "dtypes": list(DTYPES), "ops": INST_OPS + ALU_OPS}


def log(*a):
    print("kernel-interp:", *a, file=sys.stderr, flush=True)


def dtype(name):
    if name not in DTYPES:
        raise Unsupported(f"dtype {name} is not implemented")
    return DTYPES[name]


# ----------------------------------------------------------------------------------------------
# Scalars on raw bits


class Trap:
    """The result of an undefined ALU op or CAST: poison that names the instruction."""

    __slots__ = ("inst", "op", "kind")

    def __init__(self, inst, op, kind):
        self.inst, self.op, self.kind = inst, op, kind

    def fail(self, used_by):
        raise KernelFailure(f"v{self.inst} ({self.op}): undefined behaviour: {self.kind} "
                            f"(its result is used by {used_by})")


def signed(bits, width):
    return bits - (1 << width) if bits >> (width - 1) & 1 else bits


def value_of(bits, name):
    """The integer value of integer/bool bits."""
    width, kind, _ = DTYPES[name]
    return signed(bits, width) if kind == "i" else bits


def round_fraction(x, name, negative_zero=False):
    """Bits of the exact rational x rounded once (nearest, ties to even) to float dtype `name`."""
    eb, mb, _, _ = FLOAT[name]
    s = (1 << (eb + mb)) if (x < 0 or (x == 0 and negative_zero)) else 0
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
    if e > bias:
        return s | (((1 << eb) - 1) << mb)
    if q < (1 << mb):
        return s | q
    return s | ((e + bias) << mb) | (q - (1 << mb))


def float_codec(name):
    """(bits -> Python float, Python float -> bits rounded once with NaN kept as NaN)."""
    width = DTYPES[name][0]
    fmt = "<" + FLOAT[name][3]
    nbytes = width // 8
    ufmt = "<" + {2: "H", 4: "I", 8: "Q"}[nbytes]
    inf = ((1 << FLOAT[name][0]) - 1) << FLOAT[name][1]
    sign = 1 << (width - 1)
    pack, unpack = struct.Struct(fmt).pack, struct.Struct(ufmt).unpack
    upack, funpack = struct.Struct(ufmt).pack, struct.Struct(fmt).unpack

    def dec(b):
        return funpack(upack(b))[0]

    def enc(x):
        try:
            return unpack(pack(x))[0]
        except OverflowError:  # rounds beyond the largest finite value
            return inf | (sign if x < 0 else 0)

    return dec, enc


def make_alu(op, name):
    """The scalar function of `op` on operands of dtype `name` (bits in, bits or Trap out).
    UB returns the string kind; the caller turns it into a Trap naming the instruction."""
    width, kind, _ = dtype(name)
    mask = (1 << width) - 1
    if kind == "f":
        dec, enc = float_codec(name)
        canon = FLOAT[name][2]
        sign = 1 << (width - 1)

        def arith(x):  # an arithmetic result: NaN is canonical, sign clear
            return canon if x != x else enc(x)

        def div(x, y):
            if y == 0:
                if x != x or x == 0:
                    return canon
                neg = (math.copysign(1, x) < 0) != (math.copysign(1, y) < 0)
                return enc(-math.inf if neg else math.inf)
            return arith(x / y)

        def sqrt(x):
            if x != x or x < 0:
                return canon
            return enc(math.sqrt(x))  # sqrt(-0) = -0, sqrt(inf) = inf

        def trunc(x):
            if x != x:
                return canon
            if math.isinf(x):
                return enc(x)
            return enc(math.copysign(float(math.trunc(x)), x))

        def mulacc(x, y, z):
            if math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
                exact = Fraction(x) * Fraction(y) + Fraction(z)
                if exact == 0:  # an exact zero: -0 only for (-0) + (-0)
                    p = x * y
                    negz = math.copysign(1, p) < 0 and math.copysign(1, z) < 0
                    return sign if negz else 0
                return round_fraction(exact, name)
            return arith(x * y + z)

        table = {
            "NEG": lambda a: a ^ sign,
            "MAX": lambda a, b: b if dec(a) < dec(b) else a,
            "CMPLT": lambda a, b: int(dec(a) < dec(b)),
            "CMPNE": lambda a, b: int(dec(a) != dec(b)),
            "CMPEQ": lambda a, b: int(dec(a) == dec(b)),
            "ADD": lambda a, b: arith(dec(a) + dec(b)),
            "SUB": lambda a, b: arith(dec(a) - dec(b)),
            "MUL": lambda a, b: arith(dec(a) * dec(b)),
            "FDIV": lambda a, b: div(dec(a), dec(b)),
            "RECIPROCAL": lambda a: div(1.0, dec(a)),
            "SQRT": lambda a: sqrt(dec(a)),
            "TRUNC": lambda a: trunc(dec(a)),
            "MULACC": lambda a, b, c: mulacc(dec(a), dec(b), dec(c)),
        }
        if op not in table:
            raise Unsupported(f"{op} on {name}")
        return table[op]
    if kind == "b":
        def bdiv(a, b):
            return "div_by_zero" if b == 0 else a

        def bmod(a, b):
            return "div_by_zero" if b == 0 else 0

        def bshift(a, b):
            return "shift_out_of_range" if b != 0 else a

        table = {
            "ADD": lambda a, b: a | b, "OR": lambda a, b: a | b, "MAX": lambda a, b: a | b,
            "MUL": lambda a, b: a & b, "AND": lambda a, b: a & b,
            "SUB": lambda a, b: a ^ b, "XOR": lambda a, b: a ^ b, "CMPNE": lambda a, b: a ^ b,
            "CMPEQ": lambda a, b: a ^ b ^ 1, "CMPLT": lambda a, b: (a ^ 1) & b,
            "NEG": lambda a: a ^ 1, "MULACC": lambda a, b, c: (a & b) | c,
            "CDIV": bdiv, "FLOORDIV": bdiv, "CMOD": bmod, "FLOORMOD": bmod,
            "SHL": bshift, "SHR": bshift, "TRUNC": lambda a: a,
        }
        if op not in table:
            raise Unsupported(f"{op} on bool")
        return table[op]
    sgn = kind == "i"
    imin = -(1 << (width - 1))

    def val(b):
        return signed(b, width) if sgn else b

    def divmod_(a, b):
        x, y = val(a), val(b)
        if y == 0:
            return "div_by_zero"
        if sgn and y == -1 and x == imin:
            return "div_overflow"
        q = abs(x) // abs(y)
        if (x < 0) != (y < 0):
            q = -q
        r = x - q * y  # C: truncating quotient, remainder with the dividend's sign
        if op == "CDIV":
            return q & mask
        if op == "CMOD":
            return r & mask
        if op == "FLOORDIV":
            return (x // y) & mask
        return (x % y) & mask

    def shl(a, b):
        c = val(b)
        if c < 0 or c >= width:
            return "shift_out_of_range"
        return (a << c) & mask

    def shr(a, b):
        c = val(b)
        if c < 0 or c >= width:
            return "shift_out_of_range"
        return (val(a) >> c) & mask

    table = {
        "ADD": lambda a, b: (a + b) & mask,
        "SUB": lambda a, b: (a - b) & mask,
        "MUL": lambda a, b: (a * b) & mask,
        "MULACC": lambda a, b, c: (a * b + c) & mask,
        "NEG": lambda a: (-a) & mask,
        "TRUNC": lambda a: a,
        "MAX": lambda a, b: b if val(a) < val(b) else a,
        "CMPLT": lambda a, b: int(val(a) < val(b)),
        "CMPNE": lambda a, b: int(a != b),
        "CMPEQ": lambda a, b: int(a == b),
        "AND": lambda a, b: a & b, "OR": lambda a, b: a | b, "XOR": lambda a, b: a ^ b,
        "CDIV": divmod_, "CMOD": divmod_, "FLOORDIV": divmod_, "FLOORMOD": divmod_,
        "SHL": shl, "SHR": shr,
    }
    if op not in table:
        raise Unsupported(f"{op} on {name}")
    return table[op]


def make_cast(frm, to):
    fw, fk, _ = dtype(frm)
    tw, tk, _ = dtype(to)
    tmask = (1 << tw) - 1
    if frm == to:
        return lambda a: a
    if fk != "f":
        if tk == "b":
            return lambda a: int(a != 0)
        if tk != "f":
            return lambda a: value_of(a, frm) & tmask  # wrap
        _, enc = float_codec(to)

        def int_to_float(a):
            v = value_of(a, frm)
            if abs(v) < (1 << 53):
                return enc(float(v))  # exact in float64, then one rounding
            return round_fraction(Fraction(v), to)
        return int_to_float
    dec, _ = float_codec(frm)
    if tk == "b":
        return lambda a: int(dec(a) != 0)  # NaN is true
    if tk == "f":
        _, enc = float_codec(to)
        canon = FLOAT[to][2]
        tsign = 1 << (tw - 1)
        fsign = 1 << (fw - 1)

        def float_to_float(a):
            x = dec(a)
            if x != x:  # canonical NaN with the source's sign
                return canon | (tsign if a & fsign else 0)
            return enc(x)
        return float_to_float
    lo, hi = (-(1 << (tw - 1)), 1 << (tw - 1)) if tk == "i" else (0, 1 << tw)

    def float_to_int(a):
        x = dec(a)
        if not math.isfinite(x):
            return "float_to_int_out_of_range"
        t = math.trunc(x)
        if not (lo <= t < hi):
            return "float_to_int_out_of_range"
        return t & tmask
    return float_to_int


# ----------------------------------------------------------------------------------------------
# Rendering a program into Python


def ld(m, i, where):
    if 0 <= i < len(m):
        return m[i]
    raise KernelFailure(f"{where}: undefined behaviour: out_of_bounds (element {i} of a buffer of {len(m)})")


def st(m, i, v, where):
    if 0 <= i < len(m):
        m[i] = v
        return
    raise KernelFailure(f"{where}: undefined behaviour: out_of_bounds (element {i} of a buffer of {len(m)})")


def check_x(x, where):
    if type(x) is Trap:
        x.fail(where)
    return x


def bound(x, width, where):
    x = check_x(x, where)
    v = signed(x, width)
    if v < 0:
        raise KernelFailure(f"{where}: malformed program: negative loop bound {v}")
    return v


def fill_bits(width):
    """What uninitialized memory reads as: the byte 0xA5 repeated (bool: its low bit)."""
    return 1 if width == 1 else int.from_bytes(b"\xa5" * (width // 8), "little")


class Rendered:
    """A program turned into a Python function `kern(P, L, C)` (a generator when it has barriers)."""

    def __init__(self, prog):
        self.prog = prog
        insts = prog["insts"]
        self.name = prog.get("name", "kernel")
        self.specials = {}  # name -> extent
        self.locals = []  # sizes of local buffers, by order of their BUFFER
        self.has_barrier = False
        ns = {"ld": ld, "st": st, "check_x": check_x, "bound": bound, "Trap": Trap,
              "KernelFailure": KernelFailure}
        lines = []
        depth = 1
        open_loops = []  # (range inst, trip count or None)
        self.steps_estimate = 0
        mult = 1  # product of the trip counts of the open loops (None: unknown)
        maybe_trap = [False] * len(insts)
        mem_of = {}  # INDEX / PARAM / BUFFER inst -> memory variable name
        const = {}

        def dt_of(k):
            return insts[k]["dtype"]

        def emit(s):
            lines.append("    " * depth + s)

        for i, ins in enumerate(insts):
            op, dt = ins["op"], ins["dtype"]
            src = ins.get("src") or []
            arg = ins.get("arg") or {}
            where = f"v{i} ({op})"
            if op not in INST_OPS and op not in ALU_OPS:
                raise Unsupported(f"instruction {op} is not implemented")
            if dt != "void":
                dtype(dt)
            for s in src:
                if not (0 <= s < i):
                    raise ValueError(f"{where}: source v{s} is not an earlier instruction")
            self.steps_estimate += mult if mult is not None else 0
            v = f"v{i}"
            if op == "PARAM":
                mem_of[i] = f"m{i}"
                emit(f"m{i} = P[{int(arg['param'])}]")
            elif op == "BUFFER":
                mem_of[i] = f"m{i}"
                if "reg" in arg:
                    emit(f"m{i} = [{fill_bits(dtype(dt)[0])}] * {int(arg['reg'])}")
                elif "local" in arg:
                    if open_loops:
                        raise ValueError(f"{where}: a local buffer must be at top level")
                    emit(f"m{i} = L[{len(self.locals)}]")
                    self.locals.append((int(arg["local"]), fill_bits(dtype(dt)[0])))
                else:
                    raise ValueError(f"{where}: BUFFER needs a reg or local size")
            elif op == "CONST":
                bits = int(arg["const"], 16) & ((1 << dtype(dt)[0]) - 1)
                const[i] = bits
                emit(f"{v} = {bits}")
            elif op == "SPECIAL":
                name = arg["special"]
                end = const.get(src[0]) if src else None
                if end is None or open_loops:
                    raise Unsupported("a SPECIAL must be top level with a CONST extent")
                end = signed(end, dtype(dt_of(src[0]))[0])
                if name in self.specials and self.specials[name] != end:
                    raise ValueError(f"{where}: {name} has two extents")
                self.specials[name] = end
                emit(f"{v} = C[{name!r}] & {(1 << dtype(dt)[0]) - 1}")
            elif op == "RANGE":
                if len(open_loops) >= MAX_LOOP_NESTING:
                    raise Unsupported(f"more than {MAX_LOOP_NESTING} nested loops")
                b = src[0]
                trips = const.get(b)
                trips = None if trips is None else max(signed(trips, dtype(dt_of(b))[0]), 0)
                open_loops.append((i, trips, mult))
                mult = None if (mult is None or trips is None) else mult * trips
                emit(f"for {v} in range(bound(v{b}, {dtype(dt_of(b))[0]}, {where!r})):")
                depth += 1
            elif op == "END":
                if not open_loops or open_loops[-1][0] != src[0]:
                    raise ValueError(f"{where}: does not close the innermost loop")
                _, _, mult = open_loops.pop()
                emit("pass")
                depth -= 1
            elif op == "INDEX":
                buf, idx = src
                if buf not in mem_of:
                    raise ValueError(f"{where}: source 0 is not a PARAM or BUFFER")
                mem_of[i] = mem_of[buf]
                maybe_trap[i] = maybe_trap[idx]
                w = dtype(dt_of(idx))[0]
                if maybe_trap[idx]:
                    emit(f"{v} = v{idx} if type(v{idx}) is Trap else "
                         f"(v{idx} - {1 << w} if v{idx} >> {w - 1} else v{idx})")
                else:
                    emit(f"{v} = v{idx} - {1 << w} if v{idx} >> {w - 1} else v{idx}")
            elif op in ("LOAD", "STORE"):
                addr = src[0]
                if addr not in mem_of or insts[addr]["op"] != "INDEX":
                    raise ValueError(f"{where}: source 0 is not an INDEX")
                m = mem_of[addr]
                a = f"check_x(v{addr}, {where!r})" if maybe_trap[addr] else f"v{addr}"
                if op == "LOAD":
                    access = f"ld({m}, {a}, {where!r})"
                    if len(src) == 3:
                        alt, gate = src[1], src[2]
                        g = f"check_x(v{gate}, {where!r})" if maybe_trap[gate] else f"v{gate}"
                        emit(f"{v} = {access} if {g} & 1 else v{alt}")
                        maybe_trap[i] = maybe_trap[alt]
                    else:
                        emit(f"{v} = {access}")
                else:
                    val = src[1]
                    x = f"check_x(v{val}, {where!r})" if maybe_trap[val] else f"v{val}"
                    access = f"st({m}, {a}, {x}, {where!r})"
                    if len(src) == 3:
                        gate = src[2]
                        g = f"check_x(v{gate}, {where!r})" if maybe_trap[gate] else f"v{gate}"
                        emit(f"if {g} & 1: {access}")
                    else:
                        emit(access)
            elif op == "BARRIER":
                self.has_barrier = True
                emit(f"yield {i}")
            elif op == "BITCAST":
                a = src[0]
                if dtype(dt)[0] != dtype(dt_of(a))[0] or "bool" in (dt, dt_of(a)):
                    raise ValueError(f"{where}: BITCAST from {dt_of(a)} to {dt}")
                maybe_trap[i] = maybe_trap[a]
                emit(f"{v} = v{a}")
            else:  # ALU or CAST
                if op == "CAST":
                    f = make_cast(dt_of(src[0]), dt)
                    can_trap = dtype(dt_of(src[0]))[1] == "f" and dtype(dt)[1] in "iu"
                else:
                    operand_dt = dt_of(src[1]) if op == "WHERE" else dt_of(src[0])
                    f = None if op == "WHERE" else make_alu(op, operand_dt)
                    can_trap = op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "SHL", "SHR")
                args = [f"v{s}" for s in src]
                traps_in = any(maybe_trap[s] for s in src)
                maybe_trap[i] = can_trap or traps_in
                if op == "WHERE":
                    c, a, b = args
                    if maybe_trap[src[0]]:
                        emit(f"{v} = {c} if type({c}) is Trap else ({a} if {c} & 1 else {b})")
                    else:
                        emit(f"{v} = {a} if {c} & 1 else {b}")
                    continue
                fname = f"F{i}"
                if can_trap:
                    ns[fname] = trapping(f, i, op)
                else:
                    ns[fname] = f
                if traps_in:
                    first = " else ".join(f"{x} if type({x}) is Trap" for x in args)
                    emit(f"{v} = {first} else {fname}({', '.join(args)})")
                else:
                    emit(f"{v} = {fname}({', '.join(args)})")
        if open_loops:
            raise ValueError(f"loop of v{open_loops[-1][0]} is never closed")
        self.source = "def kern(P, L, C):\n" + "\n".join(lines) + "\n    return\n"
        if self.has_barrier:
            self.source += "    yield\n"
        exec(compile(self.source, f"<kernel {self.name}>", "exec"), ns)
        self.fn = ns["kern"]
        self.unknown_trips = mult is None

    def launches(self):
        """The work items, as (group coordinates, list of item coordinates)."""
        groups = sorted(n for n in self.specials if not n.startswith("lidx"))
        items = sorted(n for n in self.specials if n.startswith("lidx"))

        def grid(names):
            out = [{}]
            for n in names:
                out = [dict(c, **{n: k}) for c in out for k in range(self.specials[n])]
            return out
        return [(g, [dict(g, **l) for l in grid(items)]) for g in grid(groups)]

    def work_items(self):
        n = 1
        for e in self.specials.values():
            n *= max(e, 0)
        return n

    def run(self, params):
        for group, items in self.launches():
            locals_ = [[fill] * size for size, fill in self.locals]
            if not self.has_barrier:
                for c in items:
                    self.fn(params, locals_, c)
                continue
            gens = [self.fn(params, locals_, c) for c in items]
            live = list(range(len(gens)))
            while live:
                at = {}
                for k in live:
                    try:
                        at[k] = next(gens[k])
                    except StopIteration:
                        at[k] = None
                stops = set(at.values())
                if len(stops) != 1:
                    raise KernelFailure(f"kernel {self.name}: barrier divergence in work group {group}")
                if stops == {None}:
                    break


def trapping(f, inst, op):
    def g(*xs):
        r = f(*xs)
        return Trap(inst, op, r) if type(r) is str else r
    return g


# ----------------------------------------------------------------------------------------------
# Schedules


def run_schedule(req):
    bufs = {}
    storages = {}
    for b in req["buffers"]:
        dev = b["device"]
        if not isinstance(dev, str) or not (dev == "CPU" or dev.startswith("CPU:")):
            raise Unsupported(f"device {dev}")
        width, _, fmt = dtype(b["dtype"])
        nbytes = b["size"] * ITEMSIZE[fmt]
        storages[b["storage"]] = max(storages.get(b["storage"], 0), nbytes)
    mem = {s: bytearray(b"\xa5" * n) for s, n in storages.items()}
    for b in req["buffers"]:
        width, _, fmt = DTYPES[b["dtype"]]
        view = memoryview(mem[b["storage"]])[: b["size"] * ITEMSIZE[fmt]].cast(fmt)
        bufs[b["id"]] = (b, view)
        if b.get("init") is not None:
            if len(b["init"]) != b["size"]:
                raise ValueError(f"buffer {b['id']}: init has {len(b['init'])} elements, size {b['size']}")
            for k, h in enumerate(b["init"]):
                if h is not None:
                    view[k] = int(h, 16)
    progs = [Rendered(p) for p in req["programs"]]
    steps = 0
    for s in req["steps"]:
        if "kernel" in s:
            k = s["kernel"]
            r = progs[k["program"]]
            if r.unknown_trips:
                raise Unsupported("a loop bound known only at run time (too large to estimate)")
            steps += r.steps_estimate * max(r.work_items(), 1)
    if steps > MAX_STEPS:
        raise Unsupported(f"too large for this example (about {steps} instruction executions)")
    for n, s in enumerate(req["steps"]):
        if "kernel" in s:
            k = s["kernel"]
            r = progs[k["program"]]
            decl = req["programs"][k["program"]]["params"]
            args = k["args"]
            if len(args) != len(decl):
                raise ValueError(f"step {n}: {len(args)} args for {len(decl)} params")
            params = []
            for slot, (bid, p) in enumerate(zip(args, decl)):
                b, view = bufs[bid]
                if b["dtype"] != p["dtype"] or b["size"] != p["size"]:
                    raise ValueError(f"step {n}: buffer {bid} ({b['dtype']}[{b['size']}]) bound to "
                                     f"param {slot} ({p['dtype']}[{p['size']}])")
                params.append(view)
            try:
                r.run(params)
            except KernelFailure as e:
                raise KernelFailure(f"step {n}, kernel {r.name}: {e}") from None
        elif "copy" in s:
            c = s["copy"]
            (db, dv), (sb, sv) = bufs[c["dst"]], bufs[c["src"]]
            if db["dtype"] != sb["dtype"] or db["size"] != sb["size"]:
                raise ValueError(f"step {n}: COPY between buffers of different dtype or size")
            dv[:] = sv
        else:
            raise ValueError(f"step {n}: unknown step {s}")
    out = []
    for bid in req["read"]:
        b, view = bufs[bid]
        width = DTYPES[b["dtype"]][0]
        digits = max(1, (width + 3) // 4)
        mask = (1 << width) - 1
        out.append({"id": bid, "data": ["0x%0*x" % (digits, x & mask) for x in view.tolist()]})
    return {"type": "result", "id": req["id"], "buffers": out}


def answer(line):
    try:
        req = json.loads(line)
    except ValueError as e:
        return {"type": "error", "id": None, "message": f"not JSON: {e}"}
    rid = req.get("id") if isinstance(req, dict) else None
    try:
        if not isinstance(req, dict):
            raise ValueError("a request must be a JSON object")
        t = req.get("type")
        if t == "hello":
            return {"type": "hello", "protocol": PROTOCOL, "name": "kernel-interp", "level": "kernel",
                    "accepts": ACCEPTS}
        if t == "run_schedule":
            return run_schedule(req)
        if t == "run":
            return {"type": "unsupported", "id": rid, "reason": "kernel-interp is a kernel-level backend"}
        raise ValueError(f"unknown request type {t!r}")
    except Unsupported as e:
        return {"type": "unsupported", "id": rid, "reason": str(e)}
    except KernelFailure as e:
        return {"type": "error", "id": rid, "message": str(e)}
    except Exception as e:  # never crash on a request
        log(traceback.format_exc())
        return {"type": "error", "id": rid, "message": f"{type(e).__name__}: {e}"}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(answer(line)), flush=True)


if __name__ == "__main__":
    main()
