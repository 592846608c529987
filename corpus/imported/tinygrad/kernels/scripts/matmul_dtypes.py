"""Matmul-ish kernels and dtype casts: dot, matmul shapes, conv1d-ish, casts between dtypes."""
from tinygrad import Tensor, dtypes

A = [[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]]
B = [[2.0, 1.0, -1.0, 0.5], [-3.0, 0.0, 4.0, 1.0], [0.5, 2.5, -2.0, 1.5]]


def cases():
    a = lambda: Tensor(A, dtype=dtypes.float32)
    b = lambda: Tensor(B, dtype=dtypes.float32)
    yield ("matmul_2x3x4", "float32 matmul 2x3 @ 3x4", ["matmul"], lambda: {"out": a() @ b()})
    yield ("matmul_int", "int32 matmul 2x3 @ 3x2", ["matmul", "int32"],
           lambda: {"out": Tensor([[1, 2, 3], [4, 5, 6]]) @ Tensor([[7, -8], [9, 10], [-11, 12]])})
    yield ("dot", "float32 dot of two 8-vectors", ["matmul"],
           lambda: {"out": Tensor.arange(8).float().dot(Tensor.arange(8).float() - 3)})
    yield ("matvec", "float32 3x4 matrix times 4-vector", ["matmul"],
           lambda: {"out": b() @ Tensor([1.0, -1.0, 2.0, 0.5])})
    yield ("matmul_8x8", "float32 8x8 @ 8x8 of aranges", ["matmul"],
           lambda: {"out": Tensor.arange(64).reshape(8, 8).float() @ (Tensor.arange(64).reshape(8, 8).float() - 30)})
    yield ("matmul_half", "float16 matmul 2x3 @ 3x4", ["matmul", "float16"],
           lambda: {"out": a().cast(dtypes.half) @ b().cast(dtypes.half)})
    yield ("linear_relu", "float32 x @ w + bias, relu", ["matmul"],
           lambda: {"out": (a() @ b() + Tensor([0.5, -1.0, 0.0, 2.0])).relu()})
    yield ("conv1d", "float32 1D convolution as conv2d (1x1x1x8 input, 1x1x1x3 kernel)", ["matmul", "conv"],
           lambda: {"out": Tensor.arange(8).float().reshape(1, 1, 1, 8).conv2d(Tensor([[[[1.0, -2.0, 0.5]]]]))})
    casts = [("f32_to_i32", dtypes.float32, dtypes.int32, [1.5, -2.75, 3.0, 100.25]),
             ("f32_to_f16", dtypes.float32, dtypes.half, [1.5, -2.75, 3.0e4, 1.0e-3]),
             ("f32_to_bf16", dtypes.float32, dtypes.bfloat16, [1.5, -2.75, 3.0e4, 1.0e-3]),
             ("f16_to_f32", dtypes.half, dtypes.float32, [1.5, -2.75, 300.0, 0.5]),
             ("i32_to_f32", dtypes.int32, dtypes.float32, [7, -3, 16777217, 0]),
             ("i32_to_i8", dtypes.int32, dtypes.int8, [7, -3, 300, -200]),
             ("u8_to_i32", dtypes.uint8, dtypes.int32, [0, 1, 200, 255]),
             ("i32_to_bool", dtypes.int32, dtypes.bool, [0, 1, -5, 0]),
             ("bool_to_f32", dtypes.bool, dtypes.float32, [True, False, True, True]),
             ("f32_to_f64", dtypes.float32, dtypes.float64, [1.5, -2.75, 3.0, 0.1]),
             ("i64_to_f32", dtypes.int64, dtypes.float32, [1, -2, 3 << 40, 5]),
             ("f32_to_u32", dtypes.float32, dtypes.uint32, [1.5, 2.75, 3.0, 100.25])]
    for name, src, dst, vals in casts:
        yield (f"cast_{name}", f"cast {src.name} -> {dst.name}", ["cast", dst.name],
               lambda src=src, dst=dst, vals=vals: {"out": (Tensor(vals, dtype=src) + 0 if src != dtypes.bool else Tensor(vals, dtype=src)).cast(dst) })
    for dt in (dtypes.half, dtypes.bfloat16, dtypes.float64, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.uint32):
        yield (f"{dt.name}_arith", f"{dt.name} a*b+a and a sum", ["alu", dt.name],
               lambda dt=dt: {"out": (Tensor([1, 2, 3, 4, 5, 6], dtype=dt) * Tensor([3, 1, 2, 1, 2, 2], dtype=dt) + 1),
                              "sum": Tensor([1, 2, 3, 4, 5, 6], dtype=dt).sum()})
    yield ("bitcast_f32_u32", "bitcast float32 -> uint32", ["cast", "bitcast"],
           lambda: {"out": (Tensor([1.0, -2.0, 0.5, 3.0]) + 0).bitcast(dtypes.uint32)})
