#!/usr/bin/env python3
"""Write the corpus/policy cases: outputs compared with the modes other than `exact` (docs/comparison.md).

`python3 corpus/policy/generate.py` (standard library only; reuses corpus/gen's builder, numerics and
tensor helpers; never the Rust oracle). Expected values:
- MAX and REDUCE: numerics.alu, the exact-then-round-once rule, as in corpus/gen;
- EXP2 / SIN of non-exact arguments: Python's math (libm, f64) rounded once to float32 with
  numerics.round_fraction -- within 1 ulp of the true value, hence the `ulp(1)` mode;
- `either` alternatives: what IEEE maximumNumber (fmaxf) and NaN-propagating maximum return.
"""

import math
import os
import sys
from fractions import Fraction as Q

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gen"))

import numerics as N  # noqa: E402
from builder import G  # noqa: E402
from tensor import T  # noqa: E402

F = "float32"


def f32(x):
    """The float32 nearest the rational/decimal x (raw bits)."""
    return N.round_fraction(F, Q(x))


def lits(raws):
    return [N.lit(F, r) for r in raws]


def max_nan_either():
    g = G("MAX of float32 with NaN and signed-zero operands: the oracle's a<b?b:a gives [1, nan, 3, -0.0]; "
          "`either` also accepts what fmaxf (maximumNumber) and NaN-propagating maximum return per element; by hand",
          ["policy", "either", "alu", F])
    a = [f32(1), N.FLOATS[F].nan, f32(2), N.raw(F, "-0.0")]
    b = [N.FLOATS[F].nan, f32(1), f32(3), N.raw(F, "0.0")]
    x = g.buffer(F, 4, data=a)
    y = g.buffer(F, 4, data=b)
    m = g.op("MAX", F, x, y)
    g.output("max", m, [4], [N.alu("MAX", F, p, q) for p, q in zip(a, b)])
    # per element: NaN-propagating gives nan at 0; fmaxf gives 1 at 1; either zero at 3
    g.outputs[-1]["compare"] = {"either": [["nan", "1.0", None, "0.0"]]}
    return g


def reduce_max_nan_either_output():
    g = G("REDUCE MAX of float32 columns [nan,1,2] and [3,nan,-1]: the sequential fold from -inf skips a NaN "
          "operand (acc<nan is false) -> [2, 3]; `either_output` also accepts NaN-propagating [nan, nan]; numerics.alu per step",
          ["policy", "either", "reduce", F])
    data = [N.FLOATS[F].nan, f32(3), f32(1), N.FLOATS[F].nan, f32(2), f32(-1)]
    x = g.buffer(F, 6, data=data)
    r = g.reshape(x, [3, 2])
    s = g.reduce(r, "MAX", 1)
    t = T([6], data, F).reshape([3, 2]).reduce("MAX", 1)
    g.output("max", s, t.shape, t.data)
    g.outputs[-1]["compare"] = {"either_output": [["nan", "nan"]]}
    return g


def libm_case(name, op, fn, xs, desc):
    g = G(desc, ["policy", "ulp", "alu", op.lower(), F])
    raws = [f32(x) for x in xs]
    x = g.buffer(F, len(raws), data=raws)
    y = g.op(op, F, x)
    expect = [N.round_fraction(F, Q(fn(float(N.value(F, r))))) for r in raws]
    g.output("y", y, [len(raws)], expect)
    g.outputs[-1]["compare"] = {"ulp": 1}
    return name, g


def sum_bounded():
    g = G("REDUCE ADD over axis 0 of float32 [16,4] with values k/10 (k = 37*i mod 101 - 50): `bounded`, so "
          "exact here (the sequential fold from +0, each step rounded once via numerics.alu) and within the "
          "backend's reassociation bound elsewhere",
          ["policy", "bounded", "reduce", F])
    data = [f32(Q((37 * i) % 101 - 50, 10)) for i in range(64)]
    x = g.buffer(F, 64, data=data)
    r = g.reshape(x, [16, 4])
    s = g.reduce(r, "ADD", 1)
    t = T([64], data, F).reshape([16, 4]).reduce("ADD", 1)
    g.output("sum", s, t.shape, t.data)
    g.outputs[-1]["compare"] = "bounded"
    return g


def cases():
    out = {
        "max_nan_either": max_nan_either(),
        "reduce_max_nan_either_output": reduce_max_nan_either_output(),
        "sum_float32_bounded": sum_bounded(),
    }
    for name, g in [
        libm_case("exp2_float32_ulp", "EXP2", lambda v: 2.0 ** v, ["0.5", "-0.5", "0.1", "3", "-10.3", "7.77"],
                  "EXP2 of float32 non-integers (0.5, -0.5, 0.1, 3, -10.3, 7.77 rounded to float32): Python's 2.0**x "
                  "(f64 libm) rounded once to float32, compared with ulp(1)"),
        libm_case("sin_float32_ulp", "SIN", math.sin, ["0.5", "1", "-2.5", "3.14159265", "100", "1e-3"],
                  "SIN of float32 arguments (0.5, 1, -2.5, 3.14159265, 100, 1e-3 rounded to float32): Python's math.sin "
                  "(f64 libm) rounded once to float32, compared with ulp(1)"),
    ]:
        out[name] = g
    return out


def main():
    for name, g in sorted(cases().items()):
        with open(os.path.join(HERE, name + ".json"), "w", encoding="ascii", newline="\n") as fh:
            fh.write(g.to_json())
    print(f"wrote {len(cases())} policy cases")


if __name__ == "__main__":
    main()
