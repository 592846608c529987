"""Exact scalar semantics for the corpus generator (Python standard library only).

Independent of the Rust oracle: every value here is derived with exact integers and
fractions.Fraction, then rounded ONCE to the element type (round to nearest, ties to even).

Element representation used throughout the generator ("raw value"):
  * bool           -> 0 or 1
  * integer dtypes -> the Python int in the dtype's natural range (signed or unsigned)
  * float dtypes   -> the raw bit pattern as a non-negative Python int
"""

from fractions import Fraction
import json
import math
import os
import struct


class UB(Exception):
    """Undefined behaviour found while computing one element (kind = the case-file ub name)."""

    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


# --------------------------------------------------------------------------------------------
# dtypes

INT_BITS = {
    "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
}


class FloatFmt:
    def __init__(self, name, exp_bits, man_bits, has_inf, nan):
        self.name = name
        self.e = exp_bits
        self.m = man_bits
        self.has_inf = has_inf
        self.nan = nan  # canonical quiet NaN bits, sign clear
        self.bits = 1 + exp_bits + man_bits
        self.bias = (1 << (exp_bits - 1)) - 1
        self.emin = 1 - self.bias
        self.sign_bit = 1 << (self.bits - 1)
        if has_inf:
            self.emax = self.bias
            self.max_finite = Fraction((1 << (man_bits + 1)) - 1, 1 << man_bits) * Fraction(2) ** self.emax
        else:
            # OCP E4M3: exponent field all-ones is a normal binade; only S.1111.111 is NaN.
            self.emax = (1 << exp_bits) - 1 - self.bias
            self.max_finite = Fraction((1 << (man_bits + 1)) - 2, 1 << man_bits) * Fraction(2) ** self.emax


FLOATS = {
    "fp8e4m3": FloatFmt("fp8e4m3", 4, 3, False, 0x7F),
    "fp8e5m2": FloatFmt("fp8e5m2", 5, 2, True, 0x7E),
    "float16": FloatFmt("float16", 5, 10, True, 0x7E00),
    "bfloat16": FloatFmt("bfloat16", 8, 7, True, 0x7FC0),
    "float32": FloatFmt("float32", 8, 23, True, 0x7FC00000),
    "float64": FloatFmt("float64", 11, 52, True, 0x7FF8000000000000),
}

ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "fp8e4m3", "fp8e5m2", "float16", "bfloat16", "float32", "float64"]


def is_float(dt):
    return dt in FLOATS


def is_int(dt):
    return dt in INT_BITS


def is_signed(dt):
    return dt.startswith("int")


def bitwidth(dt):
    if dt == "bool":
        return 8  # stored in one byte (only used for BITCAST width checks, which skip bool)
    if dt in INT_BITS:
        return INT_BITS[dt]
    return FLOATS[dt].bits


def int_range(dt):
    if dt == "bool":
        return 0, 1
    b = INT_BITS[dt]
    if is_signed(dt):
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    return 0, (1 << b) - 1


def wrap(dt, v):
    """Two's complement wrap of an exact integer into an integer dtype."""
    b = INT_BITS[dt]
    v &= (1 << b) - 1
    if is_signed(dt) and v >= 1 << (b - 1):
        v -= 1 << b
    return v


def int_to_bits(dt, v):
    return v & ((1 << INT_BITS[dt]) - 1)


def bits_to_int(dt, bits):
    return wrap(dt, bits)


# --------------------------------------------------------------------------------------------
# float decode / exact rounding

def decode(dt, bits):
    """-> ('nan', sign, None) | ('inf', sign, None) | ('fin', sign, Fraction magnitude-signed)."""
    f = FLOATS[dt]
    s = (bits >> (f.bits - 1)) & 1
    E = (bits >> f.m) & ((1 << f.e) - 1)
    M = bits & ((1 << f.m) - 1)
    allones = (1 << f.e) - 1
    if f.has_inf and E == allones:
        return ("inf", s, None) if M == 0 else ("nan", s, None)
    if not f.has_inf and E == allones and M == (1 << f.m) - 1:
        return ("nan", s, None)
    if E == 0:
        mag = Fraction(M) * Fraction(2) ** (f.emin - f.m)
    else:
        mag = Fraction((1 << f.m) + M) * Fraction(2) ** (E - f.bias - f.m)
    return ("fin", s, -mag if s else mag)


def value(dt, bits):
    """Exact value of finite float bits as a Fraction (signed zero is lost: use decode for that)."""
    k, s, v = decode(dt, bits)
    assert k == "fin", (dt, hex(bits))
    return v


def is_nan(dt, bits):
    return decode(dt, bits)[0] == "nan"


def _floor_log2(a):
    """floor(log2(a)) for a positive Fraction a, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def round_fraction(dt, x, zero_sign=0):
    """Round the exact rational x to dtype dt, round to nearest ties to even, ONCE.

    Subnormals are kept. Overflow: IEEE formats give +-inf (rounding with an unbounded exponent,
    then anything above the largest finite value is inf); fp8e4m3 saturates to +-448.
    zero_sign is the sign bit used when x == 0 exactly.
    """
    f = FLOATS[dt]
    x = Fraction(x)
    if x == 0:
        return f.sign_bit if zero_sign else 0
    sign = 1 if x < 0 else 0
    a = -x if sign else x
    E = max(_floor_log2(a), f.emin)
    q = E - f.m  # exponent of the quantum (one unit in the last place) at this binade
    n = round(a / Fraction(2) ** q)  # Fraction.__round__ rounds half to even
    mag = n * Fraction(2) ** q
    sbit = f.sign_bit if sign else 0
    if mag > f.max_finite:
        if f.has_inf:
            return sbit | (((1 << f.e) - 1) << f.m)
        mag = f.max_finite  # e4m3: finite overflow saturates
    if mag == 0:
        return sbit  # underflow to zero keeps the sign of the exact value
    return sbit | _encode_mag(f, mag)


def _encode_mag(f, mag):
    E = _floor_log2(mag)
    if E < f.emin:
        M = mag / Fraction(2) ** (f.emin - f.m)
        assert M.denominator == 1
        return int(M)
    M = mag / Fraction(2) ** (E - f.m)
    assert M.denominator == 1 and (1 << f.m) <= M < (1 << (f.m + 1))
    return ((E + f.bias) << f.m) | (int(M) - (1 << f.m))


def inf_bits(dt, sign):
    f = FLOATS[dt]
    if not f.has_inf:
        return f.nan  # e4m3 has no infinity: inf becomes (canonical) NaN
    return (f.sign_bit if sign else 0) | (((1 << f.e) - 1) << f.m)


def from_result(dt, r):
    """Encode an exact op result: ('nan',) | ('inf', sign) | ('fin', Fraction, zero_sign)."""
    if r[0] == "nan":
        return FLOATS[dt].nan
    if r[0] == "inf":
        return inf_bits(dt, r[1])
    return round_fraction(dt, r[1], r[2])


def fbits(dt, v):
    """A float literal -> exact bits in dt. Accepts 'nan', '-nan', 'inf', '-inf', '-0.0', hex '0x..'
    strings, decimal strings, ints, Fractions and Python floats. Asserts the value is exact in dt
    (the generator never relies on literal rounding)."""
    f = FLOATS[dt]
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("0x"):
            b = int(s, 16)
            assert b < (1 << f.bits)
            return b
        if s == "nan":
            return f.nan
        if s == "-nan":
            return f.nan | f.sign_bit
        if s in ("inf", "+inf"):
            return inf_bits(dt, 0)
        if s == "-inf":
            return inf_bits(dt, 1)
        if s == "-0.0" or s == "-0":
            return f.sign_bit
        x = Fraction(s)
    elif isinstance(v, float):
        if math.isnan(v):
            return f.nan
        if math.isinf(v):
            return inf_bits(dt, v < 0)
        if v == 0:
            return f.sign_bit if math.copysign(1, v) < 0 else 0
        x = Fraction(v)
    else:
        x = Fraction(v)
    b = round_fraction(dt, x)
    assert decode(dt, b)[0] == "fin" and value(dt, b) == x, f"{v!r} is not exact in {dt}"
    return b


def fmt_float(dt, bits):
    """Canonical JSON literal (a string) for float bits: 'nan' for the canonical NaN, hex for any
    other NaN, 'inf'/'-inf', '0.0'/'-0.0', else Python's repr of the value as a double: the
    shortest decimal that rounds to that double. Every value of every format here is exactly a
    double, and the decimal lies within half a double ulp of it, so rounding the decimal to nearest
    in the element dtype (directly, or through float64 first) gives back exactly these bits."""
    f = FLOATS[dt]
    k, s, v = decode(dt, bits)
    if k == "nan":
        if bits == f.nan:
            return "nan"
        return "0x%0*x" % ((f.bits + 3) // 4, bits)
    if k == "inf":
        return "-inf" if s else "inf"
    if v == 0:
        return "-0.0" if s else "0.0"
    d = float(v)
    assert Fraction(d) == v
    r = repr(d)
    assert float(r) == d and round_fraction(dt, Fraction(r)) == bits
    return r


def lit(dt, raw):
    """Raw element value -> JSON literal."""
    if dt == "bool":
        return bool(raw)
    if dt in INT_BITS:
        lo, hi = int_range(dt)
        assert lo <= raw <= hi, (dt, raw)
        return raw
    return fmt_float(dt, raw)


def raw(dt, v):
    """A Python-level value -> raw element value (exact)."""
    if dt == "bool":
        assert v in (0, 1, True, False)
        return int(bool(v))
    if dt in INT_BITS:
        lo, hi = int_range(dt)
        assert isinstance(v, int) and lo <= v <= hi, (dt, v)
        return v
    return fbits(dt, v)


# --------------------------------------------------------------------------------------------
# exact float op results

def _sign_of(x):
    return 1 if x < 0 else 0


def _fadd(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    if ka == "nan" or kb == "nan":
        return ("nan",)
    if ka == "inf" and kb == "inf":
        return ("inf", sa) if sa == sb else ("nan",)
    if ka == "inf":
        return ("inf", sa)
    if kb == "inf":
        return ("inf", sb)
    r = va + vb
    if r == 0:
        # exact zero: -0 only when both are -0 (round to nearest gives +0 for x + (-x))
        zs = 1 if (va == 0 and vb == 0 and sa == 1 and sb == 1) else 0
        return ("fin", r, zs)
    return ("fin", r, 0)


def _fneg_dec(a):
    k, s, v = a
    return (k, 1 - s, -v if v is not None else None)


def _fmul(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    if ka == "nan" or kb == "nan":
        return ("nan",)
    s = sa ^ sb
    if ka == "inf" or kb == "inf":
        other = vb if ka == "inf" else va
        if (ka == "fin" and va == 0) or (kb == "fin" and vb == 0):
            return ("nan",)
        return ("inf", s)
    return ("fin", va * vb, s)


def _fdiv(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    if ka == "nan" or kb == "nan":
        return ("nan",)
    s = sa ^ sb
    if ka == "inf":
        return ("nan",) if kb == "inf" else ("inf", s)
    if kb == "inf":
        return ("fin", Fraction(0), s)
    if vb == 0:
        return ("nan",) if va == 0 else ("inf", s)
    return ("fin", va / vb, s)


def _fmulacc(a, b, c):
    p = _fmul(a, b)
    if p[0] == "nan":
        return p
    if p[0] == "inf":
        pd = ("inf", p[1], None)
    else:
        pd = ("fin", p[2], p[1])  # exact product with its sign (for a zero product)
    return _fadd(pd, c)


def _exact_sqrt(x):
    """Correctly-roundable proxy for sqrt(x), x a non-negative Fraction: exact when x is a square
    of a rational with a power-of-two denominator, else a value strictly inside the same 2^-K cell as
    the true root (K = 1400 bits, finer than every format's quantum, and a square root of a
    representable value is never a rounding midpoint of the same format)."""
    K = 1400
    N = x * Fraction(4) ** K
    assert N.denominator == 1
    N = int(N)
    s = math.isqrt(N)
    if s * s == N:
        return Fraction(s, 1 << K)
    return Fraction(2 * s + 1, 1 << (K + 1))


def _fsqrt(a):
    k, s, v = a
    if k == "nan":
        return ("nan",)
    if k == "inf":
        return ("nan",) if s else ("inf", 0)
    if v == 0:
        return ("fin", Fraction(0), s)  # sqrt(-0) = -0
    if v < 0:
        return ("nan",)
    return ("fin", _exact_sqrt(v), 0)


def _frecip(a):
    return _fdiv(("fin", 0, Fraction(1)), a)


def _ftrunc(a):
    k, s, v = a
    if k == "nan":
        return ("nan",)
    if k == "inf":
        return ("inf", s)
    t = Fraction(math.trunc(v))
    return ("fin", t, s)  # keeps the sign: trunc(-0.3) = -0.0


def _fexp2(a):
    k, s, v = a
    if k == "nan":
        return ("nan",)
    if k == "inf":
        return ("fin", Fraction(0), 0) if s else ("inf", 0)
    assert v.denominator == 1, "EXP2 corpus inputs must be integers (exact result)"
    return ("fin", Fraction(2) ** int(v), 0)


def _flog2(a):
    k, s, v = a
    if k == "nan":
        return ("nan",)
    if k == "inf":
        return ("nan",) if s else ("inf", 0)
    if v == 0:
        return ("inf", 1)
    if v < 0:
        return ("nan",)
    e = _floor_log2(v)
    assert Fraction(2) ** e == v, "LOG2 corpus inputs must be powers of two (exact result)"
    return ("fin", Fraction(e), 0)


def _fsin(a):
    k, s, v = a
    if k in ("nan", "inf"):
        return ("nan",)
    assert v == 0, "SIN corpus inputs must be +-0, +-inf or NaN (exact result)"
    return ("fin", Fraction(0), s)


def _fpow(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    assert ka == "fin" and kb == "fin", "POW corpus inputs are finite"
    if vb.denominator == 1:
        n = int(vb)
        assert not (va == 0 and n <= 0), "POW corpus avoids 0^(<=0)"
        r = va ** n
        zs = sa if (va == 0 and n % 2 == 1) else 0
        return ("fin", Fraction(r), zs)
    if va < 0:
        return ("nan",)  # negative base, non-integer exponent: complex result
    assert vb.denominator == 2, "POW corpus non-integer exponents are halves of an integer"
    r = _exact_sqrt(va)
    assert r * r == va, "POW x^(k/2) corpus inputs must be exact squares"
    return ("fin", r ** int(vb.numerator), 0)


def _flt(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    if ka == "nan" or kb == "nan":
        return False
    x = va if ka == "fin" else (Fraction(-1) if sa else Fraction(1)) * Fraction(10) ** 400
    y = vb if kb == "fin" else (Fraction(-1) if sb else Fraction(1)) * Fraction(10) ** 400
    if ka == "inf" and kb == "inf":
        return sa == 1 and sb == 0
    return x < y


def _feq(a, b):
    (ka, sa, va), (kb, sb, vb) = a, b
    if ka == "nan" or kb == "nan":
        return False
    if ka == "inf" or kb == "inf":
        return ka == kb and sa == sb
    return va == vb  # +0 == -0


# --------------------------------------------------------------------------------------------
# the ALU

def alu(op, dt, *args):
    """One element of ALU op `op` whose operands have dtype dt (WHERE: dt is the branch dtype and
    args[0] is the bool condition). Returns the raw result (bool for comparisons)."""
    if op == "WHERE":
        c, a, b = args
        return a if c else b
    if op in ("CMPLT", "CMPNE", "CMPEQ"):
        a, b = args
        if is_float(dt):
            da, db = decode(dt, a), decode(dt, b)
            if op == "CMPLT":
                return int(_flt(da, db))
            eq = _feq(da, db)
            return int(eq) if op == "CMPEQ" else int(not eq)
        if op == "CMPLT":
            return int(a < b)
        return int(a == b) if op == "CMPEQ" else int(a != b)
    if is_float(dt):
        return _alu_float(op, dt, *args)
    if dt == "bool":
        return _alu_bool(op, *args)
    return _alu_int(op, dt, *args)


def _alu_bool(op, *args):
    if op == "NEG":
        return 1 - args[0]
    a, b = args
    if op in ("AND", "MUL"):  # docs/semantics.md: bool MUL = AND
        return a & b
    if op == "OR":
        return a | b
    if op == "XOR":
        return a ^ b
    if op == "MAX":
        return b if a < b else a
    raise AssertionError(f"corpus does not use {op} on bool")


def _alu_int(op, dt, *args):
    bw = INT_BITS[dt]
    if op == "NEG":
        return wrap(dt, -args[0])
    if op == "MULACC":
        a, b, c = args
        return wrap(dt, a * b + c)
    a, b = args
    if op == "ADD":
        return wrap(dt, a + b)
    if op == "SUB":
        return wrap(dt, a - b)
    if op == "MUL":
        return wrap(dt, a * b)
    if op == "MAX":
        return b if a < b else a
    if op == "AND":
        return wrap(dt, a & b)
    if op == "OR":
        return wrap(dt, a | b)
    if op == "XOR":
        return wrap(dt, a ^ b)
    if op in ("SHL", "SHR"):
        if b < 0 or b >= bw:
            raise UB("shift_out_of_range")
        return wrap(dt, a << b) if op == "SHL" else wrap(dt, a >> b)  # >> is arithmetic on signed
    if op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD"):
        if b == 0:
            raise UB("div_by_zero")
        if is_signed(dt) and a == int_range(dt)[0] and b == -1:
            raise UB("div_overflow")
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        if op == "CDIV":
            return q
        if op == "CMOD":
            return a - q * b  # the dividend's sign (C)
        if op == "FLOORDIV":
            return a // b
        return a % b  # Python: the divisor's sign
    raise AssertionError(f"corpus does not use {op} on {dt}")


def _alu_float(op, dt, *args):
    f = FLOATS[dt]
    if op == "NEG":
        return args[0] ^ f.sign_bit  # flips the sign bit, NaN payload kept
    if op == "MAX":
        a, b = args
        return b if _flt(decode(dt, a), decode(dt, b)) else a  # a < b ? b : a, bits of the operand
    d = [decode(dt, x) for x in args]
    if op == "ADD":
        r = _fadd(*d)
    elif op == "SUB":
        r = _fadd(d[0], _fneg_dec(d[1]))
    elif op == "MUL":
        r = _fmul(*d)
    elif op == "FDIV":
        r = _fdiv(*d)
    elif op == "MULACC":
        r = _fmulacc(*d)
    elif op == "SQRT":
        r = _fsqrt(*d)
    elif op == "RECIPROCAL":
        r = _frecip(*d)
    elif op == "TRUNC":
        r = _ftrunc(*d)
    elif op == "EXP2":
        r = _fexp2(*d)
    elif op == "LOG2":
        r = _flog2(*d)
    elif op == "SIN":
        r = _fsin(*d)
    elif op == "POW":
        r = _fpow(*d)
    else:
        raise AssertionError(f"corpus does not use {op} on {dt}")
    return from_result(dt, r)


# --------------------------------------------------------------------------------------------
# casts

def cast(src, dst, x):
    """CAST one raw element from src to dst."""
    if src == dst:
        return x
    if is_float(src):
        k, s, v = decode(src, x)
        if dst == "bool":
            return int(k != "fin" or v != 0)  # NaN -> true, +-0 -> false
        if is_int(dst):
            if k != "fin":
                raise UB("float_to_int_out_of_range")
            t = math.trunc(v)
            lo, hi = int_range(dst)
            if not lo <= t <= hi:
                raise UB("float_to_int_out_of_range")
            return t
        if k == "nan":
            # A float->float CAST keeps the NaN's sign (as x86 conversions do); the payload
            # becomes the target's canonical quiet NaN.
            return FLOATS[dst].nan | (FLOATS[dst].sign_bit if s else 0)
        if k == "inf":
            if not FLOATS[dst].has_inf:
                return FLOATS[dst].nan | (FLOATS[dst].sign_bit if s else 0)  # e4m3: a NaN, sign kept
            return inf_bits(dst, s)
        return round_fraction(dst, v, s)
    # src is bool or int
    n = int(x)
    if dst == "bool":
        return int(n != 0)
    if is_int(dst):
        return wrap(dst, n)
    return round_fraction(dst, Fraction(n))


def to_bits(dt, x):
    if dt == "bool":
        return x
    if is_int(dt):
        return int_to_bits(dt, x)
    return x


def from_bits(dt, b):
    if dt == "bool":
        return b
    if is_int(dt):
        return bits_to_int(dt, b)
    return b


def bitcast(src, dst, x):
    assert bitwidth(src) == bitwidth(dst) and "bool" not in (src, dst)
    return from_bits(dst, to_bits(src, x))


# --------------------------------------------------------------------------------------------
# helpers built on Python's own float conversions (used only by the self-check)

def f32_struct(x):
    """Round a Python float (double) to float32 with struct (C double->float, RNE)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f16_struct(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f64_struct(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def reduce_identity(op, dt):
    """The start of a REDUCE fold: 0 for ADD, 1 for MUL, the lowest value for MAX (-inf, or
    -448 for fp8e4m3 which has no infinity; INT_MIN / 0 for ints; false for bool)."""
    if op == "ADD":
        return 0
    if op == "MUL":
        return fbits(dt, 1) if is_float(dt) else 1
    assert op == "MAX"
    if is_float(dt):
        f = FLOATS[dt]
        return inf_bits(dt, 1) if f.has_inf else round_fraction(dt, -f.max_finite, 1)
    if dt == "bool":
        return 0
    return int_range(dt)[0]


# --------------------------------------------------------------------------------------------
# the op table (corpus/gen/ops.jsonl, the Rust op table's dump; interp/tests/op_table.rs keeps it
# current)

OPS_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.jsonl")

# The dtype each class is tried in.
_CLASS_DTYPE = (("int", "int32"), ("float", "float32"), ("bool", "bool"))


def load_op_table(path=OPS_TABLE):
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def check_op_table(path=OPS_TABLE):
    """Every ALU op of ops.jsonl has an implementation here (on at least one dtype class its rule
    allows), and the UB kinds this module raises for it are the ones the table names."""
    checked = 0
    for e in load_op_table(path):
        op, n = e["name"], e["arity"]
        ok = []
        for cls, dt in _CLASS_DTYPE:
            if not e["classes"][cls]:
                continue
            one = fbits(dt, 1) if is_float(dt) else 1
            args = [one] * n
            if e["dtype_rule"] == "where":
                args[0] = 1
            try:
                alu(op, dt, *args)
                ok.append(dt)
            except AssertionError as err:
                # "corpus does not use OP on DT" is a missing implementation; other assertions
                # restrict the inputs of an implemented op (SIN: exact results only).
                if not str(err).startswith("corpus does not use"):
                    ok.append(dt)
            except (ValueError, TypeError):
                pass  # no unary/ternary branch for this op on this class
            if dt == "int32" and n == 2:
                for b in (0, 32, -1):
                    for a in (5, int_range(dt)[0]):
                        try:
                            alu(op, dt, a, b)
                        except UB as u:
                            assert u.kind in e["ub"], (op, a, b, u.kind, e["ub"])
                        except AssertionError:
                            pass
            checked += 1
        assert ok, f"{op} (ops.jsonl) has no implementation in numerics.alu"
        for kind in e["ub"]:
            assert any(_raises(op, kind, a, b) for a in (5, -2 ** 31) for b in (0, -1, 32)), (op, kind)
    return checked


def _raises(op, kind, a, b):
    try:
        alu(op, "int32", a, b)
    except UB as u:
        return u.kind == kind
    except AssertionError:
        return False
    return False
