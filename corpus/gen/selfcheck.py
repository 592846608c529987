"""Cross-checks of the exact rounding helpers in numerics.py against independent references:

* float16 / float32 / float64: struct.pack('<e' / '<f' / '<d') of Python doubles (C conversions,
  round to nearest even). Values that struct refuses (OverflowError: rounds past the largest
  finite) are checked against the hand rule instead.
* bfloat16: for inputs that are exact float32 values, single rounding equals the integer
  round-to-nearest-even of the float32 bit pattern's top 16 bits (the classic bias trick).
* fp8e4m3 / fp8e5m2 (and every format): decode -> encode is the identity on all non-NaN codes,
  every midpoint between neighbours rounds to the even code, and a nudge either side of a midpoint
  rounds to the nearer code.
* the decoder against struct for every float16 code and for a spread of float32/float64 codes.
"""

from fractions import Fraction
import math
import random
import struct

import numerics as N


def _doubles(rng, count):
    out = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 65536.0, 2.0 ** -24, 2.0 ** -25,
           3 * 2.0 ** -26, 2.0 ** -14, 2.0 ** -149, 2.0 ** -150, 3 * 2.0 ** -151, 2.0 ** -126,
           3.4028234663852886e38, 1e-45, 1e-40, 0.1, 1 / 3, 2049.0, 2051.0, 16777217.0]
    for _ in range(count):
        kind = rng.randrange(5)
        if kind == 0:
            x = rng.uniform(-70000, 70000)
        elif kind == 1:
            x = math.ldexp(rng.random(), rng.randrange(-160, 130))
        elif kind == 2:
            # near a float16 midpoint
            x = math.ldexp(rng.randrange(1, 4096) + 0.5, rng.randrange(-35, 6))
        elif kind == 3:
            # random double bit patterns in a modest exponent range
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if math.isnan(x) or math.isinf(x) or abs(x) > 1e300:
                x = 1.5
        else:
            x = math.ldexp(rng.randrange(1, 1 << 30) | 1, rng.randrange(-180, 100))
        out.append(-x if rng.random() < 0.5 else x)
    return out


def check_struct_formats(count=20000):
    rng = random.Random(12345)
    checked = 0
    for x in _doubles(rng, count):
        for dt, ref in (("float16", N.f16_struct), ("float32", N.f32_struct), ("float64", N.f64_struct)):
            mine = N.round_fraction(dt, Fraction(x), 1 if math.copysign(1, x) < 0 else 0)
            try:
                theirs = ref(x)
            except OverflowError:
                # struct refuses values that round past the largest finite: we must give inf
                f = N.FLOATS[dt]
                assert mine == N.inf_bits(dt, x < 0), (dt, x, hex(mine))
                assert abs(Fraction(x)) >= f.max_finite
                continue
            assert mine == theirs, (dt, x, hex(mine), hex(theirs))
            checked += 1
    return checked


def _bf16_from_f32_bits(b):
    # round to nearest even on the top 16 bits of a finite float32 bit pattern
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def check_bfloat16(count=20000):
    rng = random.Random(777)
    checked = 0
    for _ in range(count):
        b = rng.getrandbits(32)
        k = N.decode("float32", b)
        if k[0] != "fin":
            continue
        v = k[2]
        expect = _bf16_from_f32_bits(b)
        mine = N.round_fraction("bfloat16", v, k[1])
        if N.decode("bfloat16", expect)[0] == "inf":
            assert mine == expect, (hex(b), hex(mine), hex(expect))
        else:
            assert mine == expect, (hex(b), hex(mine), hex(expect))
        checked += 1
    # a few hand values
    assert N.round_fraction("bfloat16", Fraction(1) + Fraction(1, 256)) == 0x3F80  # tie -> even (1.0)
    assert N.round_fraction("bfloat16", Fraction(1) + Fraction(3, 256)) == 0x3F82  # tie -> even (up)
    return checked


def check_all_codes():
    checked = 0
    for dt, f in N.FLOATS.items():
        if f.bits > 16:
            codes = list(range(0, 1 << 12)) + [random.Random(5).getrandbits(f.bits) for _ in range(4000)]
        else:
            codes = range(1 << f.bits)
        for b in codes:
            k, s, v = N.decode(dt, b)
            if k == "nan":
                continue
            if k == "inf":
                assert N.inf_bits(dt, s) == b
                continue
            assert N.round_fraction(dt, v, s) == b, (dt, hex(b))
            checked += 1
        # midpoints of neighbouring positive finite codes
        top = (1 << (f.bits - 1))
        pos = []
        for b in (range(top) if f.bits <= 16 else range(0, 1 << 12)):
            k, s, v = N.decode(dt, b)
            if k == "fin":
                pos.append((v, b))
        pos.sort()
        for (v0, b0), (v1, b1) in zip(pos, pos[1:]):
            mid = (v0 + v1) / 2
            even = b0 if b0 % 2 == 0 else b1
            assert N.round_fraction(dt, mid) == even, (dt, hex(b0), hex(b1))
            eps = (v1 - v0) / 1024
            assert N.round_fraction(dt, mid - eps) == b0
            assert N.round_fraction(dt, mid + eps) == b1
            assert N.round_fraction(dt, -mid) == even | f.sign_bit
            checked += 1
    # struct agrees with the decoder on every float16 code
    for b in range(1 << 16):
        x = struct.unpack("<e", struct.pack("<H", b))[0]
        k, s, v = N.decode("float16", b)
        if k == "nan":
            assert math.isnan(x)
        elif k == "inf":
            assert math.isinf(x) and (x < 0) == bool(s)
        else:
            assert Fraction(x) == v and math.copysign(1, x) == (-1 if s else 1)
    # overflow rules
    assert N.round_fraction("fp8e4m3", Fraction(1000)) == 0x7E  # saturates to 448
    assert N.round_fraction("fp8e4m3", Fraction(-464)) == 0xFE  # 464 is the 448/480 midpoint
    assert N.value("fp8e4m3", 0x7E) == 448
    assert N.value("fp8e5m2", 0x7B) == 57344
    assert N.round_fraction("fp8e5m2", Fraction(61440)) == 0x7C  # midpoint to 2^16 -> even -> inf
    assert N.round_fraction("fp8e5m2", Fraction(61439)) == 0x7B
    assert N.round_fraction("float16", Fraction(65520)) == 0x7C00
    assert N.round_fraction("float16", Fraction(65519)) == 0x7BFF
    return checked


def check_ops():
    """Hand facts about the op definitions."""
    f32 = lambda v: N.fbits("float32", v)
    assert N.alu("MAX", "float32", f32(1), f32("nan")) == f32(1)
    assert N.alu("MAX", "float32", f32("nan"), f32(1)) == f32("nan")
    assert N.alu("MAX", "float32", f32("-0.0"), f32(0)) == f32("-0.0")
    assert N.alu("TRUNC", "float32", f32("-0.25")) == f32("-0.0")
    assert N.alu("FDIV", "float32", f32(10), f32(3)) == 0x40555555
    assert N.alu("SQRT", "float32", f32(2)) == 0x3FB504F3
    assert N.alu("SQRT", "float64", N.fbits("float64", 2)) == N.f64_struct(math.sqrt(2))
    for x in (3.0, 5.0, 7.5, 1e-300, 123456.789):
        assert N.alu("SQRT", "float64", N.fbits("float64", x)) == N.f64_struct(math.sqrt(x))
        assert N.alu("SQRT", "float32", N.f32_struct(x)) == N.f32_struct(
            math.sqrt(struct.unpack("<f", struct.pack("<f", x))[0]))
    a = f32(Fraction(1) + Fraction(1, 1 << 23))
    c = f32(-(Fraction(1) + Fraction(1, 1 << 22)))
    assert N.value("float32", N.alu("MULACC", "float32", a, a, c)) == Fraction(1, 1 << 46)
    assert N.alu("CDIV", "int32", -7, 2) == -3 and N.alu("CMOD", "int32", -7, 2) == -1
    assert N.alu("FLOORDIV", "int32", -7, 2) == -4 and N.alu("FLOORMOD", "int32", -7, 2) == 1
    assert N.alu("SHR", "int32", -8, 1) == -4
    assert N.cast("float32", "uint8", f32("-0.75")) == 0
    return 1


def _native(dt, op, xs):
    """The op on Python doubles (IEEE, correctly rounded), then struct to dt. For + - * / sqrt,
    rounding to double first and then to float32/float16 is innocuous (53 >= 2p+2)."""
    try:
        if op == "ADD":
            r = xs[0] + xs[1]
        elif op == "SUB":
            r = xs[0] - xs[1]
        elif op == "MUL":
            r = xs[0] * xs[1]
        elif op == "FDIV":
            if xs[1] == 0:
                if xs[0] == 0 or math.isnan(xs[0]):
                    r = math.nan
                else:
                    r = math.copysign(math.inf, xs[0]) * math.copysign(1, xs[1])
            else:
                r = xs[0] / xs[1]
        elif op == "SQRT":
            r = math.nan if xs[0] < 0 else math.sqrt(xs[0])
    except OverflowError:
        r = math.inf
    if math.isnan(r):
        return None
    pack = {"float16": N.f16_struct, "float32": N.f32_struct, "float64": N.f64_struct}[dt]
    try:
        return pack(r)
    except OverflowError:
        return N.inf_bits(dt, r < 0)


def check_native_ops(count=6000):
    """numerics.alu against native double arithmetic for float16/32/64 on random operands."""
    rng = random.Random(99)
    checked = 0
    for dt in ("float16", "float32", "float64"):
        f = N.FLOATS[dt]
        unpack = {"float16": "<e", "float32": "<f", "float64": "<d"}[dt]
        ufmt = {"float16": "<H", "float32": "<I", "float64": "<Q"}[dt]
        for _ in range(count):
            bs = []
            for _ in range(2):
                if rng.random() < 0.5:
                    b = rng.getrandbits(f.bits)
                else:  # moderate magnitudes so sums and products interact
                    b = N.round_fraction(dt, Fraction(rng.randrange(-4096, 4096), 1 << rng.randrange(0, 16)))
                bs.append(b)
            xs = [struct.unpack(unpack, struct.pack(ufmt, b))[0] for b in bs]
            for op in ("ADD", "SUB", "MUL", "FDIV", "SQRT"):
                args = bs[:1] if op == "SQRT" else bs
                mine = N.alu(op, dt, *args)
                theirs = _native(dt, op, xs[:1] if op == "SQRT" else xs)
                if theirs is None:
                    assert mine == f.nan, (dt, op, [hex(b) for b in args], hex(mine))
                else:
                    assert mine == theirs, (dt, op, [hex(b) for b in args], hex(mine), hex(theirs))
                checked += 1
    return checked


def run():
    n = check_struct_formats() + check_bfloat16() + check_all_codes() + check_ops() + check_native_ops()
    n += N.check_op_table()
    return n


if __name__ == "__main__":
    print("self-check ok:", run(), "checks")
