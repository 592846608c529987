"""Movement kernels: pad, flip, permute, shrink, expand, cat, repeat, gather-ish indexing."""
from tinygrad import Tensor, dtypes

X = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]


def cases():
    x = lambda: Tensor(X, dtype=dtypes.float32)
    y = lambda: Tensor([[-1.0, -2.0, -3.0, -4.0]], dtype=dtypes.float32)
    ops = [
        ("pad", lambda: x().pad(((1, 1), (2, 0))) + 1),
        ("pad_value", lambda: x().pad(((0, 2), (1, 1)), value=-5.0) * 2),
        ("flip0", lambda: x().flip(0) + 0),
        ("flip1", lambda: x().flip(1) * 3),
        ("flip_pad", lambda: x().pad(((1, 1), (0, 2))).flip(0) - 1),
        ("permute", lambda: x().permute(1, 0) + 0.5),
        ("shrink", lambda: x()[1:, 1:3] * 2),
        ("stride", lambda: x()[:, ::2] + 1),
        ("expand", lambda: y().expand(3, 4) + x()),
        ("cat0", lambda: Tensor.cat(x(), y(), dim=0)),
        ("cat1", lambda: Tensor.cat(x(), x() * 2, dim=1)),
        ("cat3", lambda: Tensor.cat(x(), x() + 1, x() - 1, dim=0)),
        ("repeat", lambda: x().repeat(2, 1) + 0),
        ("reshape_sum", lambda: x().reshape(2, 6).sum(0)),
        ("transpose_sum", lambda: x().T.sum(1)),
        ("roll", lambda: x().roll(1, 1) + 0),
        ("tril", lambda: Tensor.ones(4, 4).contiguous().tril()),
        ("triu", lambda: x().triu(1) + 0),
        ("arange", lambda: Tensor.arange(10) * 3),
        ("arange_float", lambda: Tensor.arange(0, 3, 0.25)),
        ("eye", lambda: Tensor.eye(4) + 0),
        ("one_hot", lambda: Tensor([0, 2, 1, 3]).one_hot(4)),
        ("gather", lambda: x().gather(1, Tensor([[0, 3], [1, 1], [2, 0]]))),
        ("index_tensor", lambda: x()[Tensor([2, 0])]),
        ("pad_flip_cat", lambda: Tensor.cat(x().flip(1), x().pad(((0, 0), (1, 0)))[:, :4], dim=0)),
    ]
    for name, fn in ops:
        yield (name, f"movement: {name} on float32 3x4", ["movement"], lambda fn=fn: {"out": fn()})
