"""Elementwise kernels: binary/unary ALU ops over small float32 and int32 tensors."""
from tinygrad import Tensor, dtypes

A = [[1.5, -2.0, 3.25, 0.0], [-0.5, 4.0, -7.75, 2.5], [9.0, -1.0, 0.125, 6.0]]
B = [[0.5, 2.0, -1.25, 3.0], [1.0, -4.0, 2.75, -2.5], [3.0, 1.0, 8.0, -6.0]]
I = [[7, -3, 12, 0, 5], [-8, 9, 2, -1, 4]]
J = [[2, 5, -4, 3, 1], [3, -2, 7, 6, -5]]


def f(x):
    return Tensor(x, dtype=dtypes.float32)


def i(x):
    return Tensor(x, dtype=dtypes.int32)


def cases():
    for name, fn in [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
                     ("div", lambda a, b: a / b), ("maximum", lambda a, b: a.maximum(b)),
                     ("minimum", lambda a, b: a.minimum(b)), ("lt", lambda a, b: (a < b)),
                     ("eq", lambda a, b: (a == b)), ("where", lambda a, b: (a > 0).where(a, b)),
                     ("fma", lambda a, b: a * b + a), ("square_diff", lambda a, b: (a - b) * (a - b))]:
        yield (f"f32_{name}", f"float32 {name} of two 3x4 tensors", ["alu", "float32"],
               lambda fn=fn: {"out": fn(f(A), f(B))})
    for name, fn in [("neg", lambda a: -a), ("abs", lambda a: a.abs()), ("relu", lambda a: a.relu()),
                     ("sqrt", lambda a: a.abs().sqrt()), ("exp", lambda a: a.exp()), ("log", lambda a: (a.abs() + 1).log()),
                     ("sin", lambda a: a.sin()), ("recip", lambda a: (a.abs() + 1).reciprocal()),
                     ("sigmoid", lambda a: a.sigmoid()), ("tanh", lambda a: a.tanh()), ("exp2", lambda a: a.exp2()),
                     ("square", lambda a: a * a), ("clip", lambda a: a.clip(-1, 2)), ("sign", lambda a: a.sign()),
                     ("trunc", lambda a: a.trunc()), ("floor", lambda a: a.floor()), ("ceil", lambda a: a.ceil())]:
        yield (f"f32_{name}", f"float32 {name} of a 3x4 tensor", ["alu", "float32"], lambda fn=fn: {"out": fn(f(A))})
    for name, fn in [("add", lambda a, b: a + b), ("mul", lambda a, b: a * b), ("sub", lambda a, b: a - b),
                     ("idiv", lambda a, b: a // b), ("mod", lambda a, b: a % b), ("and", lambda a, b: a & b),
                     ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b), ("max", lambda a, b: a.maximum(b)),
                     ("lt", lambda a, b: a < b), ("shl", lambda a, b: a << 3), ("shr", lambda a, b: a >> 1),
                     ("neg", lambda a, b: -a), ("where", lambda a, b: (a < b).where(a, b))]:
        yield (f"i32_{name}", f"int32 {name} of two 2x5 tensors", ["alu", "int32"],
               lambda fn=fn: {"out": fn(i(I), i(J))})
