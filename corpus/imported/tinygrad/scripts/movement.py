"""Movement ops as tinygrad's test_ops exercises them: reshape, permute/transpose, expand, pad (incl.
negative = shrink and value pads), shrink/slicing with steps, flip, cat, stack, repeat, squeeze, gather-free indexing."""
from tinygrad import Tensor, dtypes


def ar(*shape, dt=dtypes.int32):
    n = 1
    for d in shape:
        n *= d
    return Tensor(list(range(n)), dtype=dt).reshape(shape)


def cases():
    yield "reshape_2x6", "reshape [12] -> [2,6]", ["movement", "reshape"], lambda: {"y": ar(12).reshape(2, 6)}
    yield "reshape_infer", "reshape with -1", ["movement", "reshape"], lambda: {"y": ar(2, 3, 4).reshape(-1, 4)}
    for perm in [(1, 0, 2), (2, 0, 1), (0, 2, 1), (2, 1, 0)]:
        yield (f"permute_{''.join(map(str, perm))}", f"permute{perm} of a [2,3,4]", ["movement", "permute"],
               lambda perm=perm: {"y": ar(2, 3, 4).permute(perm)})
    yield "transpose", "transpose(0,1) of a [3,5]", ["movement", "permute"], lambda: {"y": ar(3, 5).transpose(0, 1)}
    yield "T_float", "x.T + 0.5 on float32", ["movement", "permute"], lambda: {"y": ar(2, 3, dt=dtypes.float32).T + 0.5}
    for shp, tgt in [((1, 3), (4, 3)), ((3, 1), (3, 4)), ((1,), (5,)), ((2, 1, 3), (2, 4, 3)), ((1, 1), (2, 3))]:
        yield (f"expand_{'x'.join(map(str, shp))}_to_{'x'.join(map(str, tgt))}", f"expand {shp} -> {tgt}", ["movement", "expand"],
               lambda shp=shp, tgt=tgt: {"y": ar(*shp).expand(tgt)})
    for pads in [((1, 2),), ((0, 0), (1, 1)), ((2, 0), (0, 3)), ((1, 1), (1, 1))]:
        nd = len(pads)
        shape = (3,) if nd == 1 else (2, 3)
        tag = "_".join(f"{a}{b}" for a, b in pads)
        yield (f"pad_{tag}", f"pad {pads} of a {list(shape)} (zeros)", ["movement", "pad"],
               lambda pads=pads, shape=shape: {"y": ar(*shape).pad(pads)})
        yield (f"pad_value_{tag}", f"pad {pads} with value -1.5 of a float32 {list(shape)}", ["movement", "pad"],
               lambda pads=pads, shape=shape: {"y": ar(*shape, dt=dtypes.float32).pad(pads, value=-1.5)})
    yield "pad_negative", "pad with negative widths (a crop) of a [5]", ["movement", "pad"], lambda: {"y": ar(5).pad(((-1, -2),))}
    yield "pad_reflect", "pad mode=reflect of a [5]", ["movement", "pad"], lambda: {"y": ar(5, dt=dtypes.float32).pad((2, 2), mode="reflect")}
    yield "pad_replicate", "pad mode=replicate of a [4]", ["movement", "pad"], lambda: {"y": ar(4, dt=dtypes.float32).pad((1, 2), mode="replicate")}
    yield "pad_circular", "pad mode=circular of a [4]", ["movement", "pad"], lambda: {"y": ar(4, dt=dtypes.float32).pad((1, 1), mode="circular")}
    for sl, txt in [((slice(1, 3),), "1:3"), ((slice(None, None, 2),), "::2"), ((slice(None, None, -1),), "::-1"),
                    ((slice(5, 0, -2),), "5:0:-2"), ((slice(-3, None),), "-3:")]:
        yield (f"slice_{txt.replace(':', 'c').replace('-', 'm')}", f"x[{txt}] of a [8]", ["movement", "shrink"],
               lambda sl=sl: {"y": ar(8)[sl]})
    yield "slice_2d", "x[1:, ::2] of a [3,5]", ["movement", "shrink"], lambda: {"y": ar(3, 5)[1:, ::2]}
    yield "index_int", "x[1] and x[:, -1] of a [3,4]", ["movement", "shrink"], lambda: {"a": ar(3, 4)[1], "b": ar(3, 4)[:, -1]}
    yield "shrink", "shrink(((1,3),(0,2))) of a [4,3]", ["movement", "shrink"], lambda: {"y": ar(4, 3).shrink(((1, 3), (0, 2)))}
    for axes in [(0,), (1,), (0, 1)]:
        yield (f"flip_{''.join(map(str, axes))}", f"flip{axes} of a [3,4]", ["movement", "flip"], lambda axes=axes: {"y": ar(3, 4).flip(axes)})
    yield "flip_float16", "flip of a float16 [5] with -0.0", ["movement", "flip"], lambda: {"y": Tensor([-0.0, 1.0, 2.5, -3.0, 65504.0], dtype=dtypes.float16).flip(0)}
    for dim in (0, 1):
        yield (f"cat_dim{dim}", f"cat of a [2,3] and a [2,3] on dim {dim}", ["movement", "cat"],
               lambda dim=dim: {"y": ar(2, 3).cat(ar(2, 3) + 100, dim=dim)})
    yield "cat_three", "cat of [1], [2], [3] int8", ["movement", "cat"], lambda: {"y": Tensor([1], dtype=dtypes.int8).cat(Tensor([2, 3], dtype=dtypes.int8), Tensor([-4, -5, -6], dtype=dtypes.int8))}
    yield "cat_uneven", "cat of [2,1] and [2,3] on dim 1", ["movement", "cat"], lambda: {"y": ar(2, 1).cat(ar(2, 3), dim=1)}
    # an uneven cat of a -0.0 is not here: tinygrad builds it as a sum of zero-padded pieces, the
    # uopkit graph then adds +0.0 to -0.0 (= +0.0), while tinygrad's kernels select the piece (padding is
    # Invalid, not added) and keep -0.0; see ../README.md. Uneven cat without -0.0 and an even cat with it:
    yield "cat_float", "uneven cat of float32 vectors with inf", ["movement", "cat"], lambda: {"y": Tensor([-1.0, float("inf")]).cat(Tensor([1.5]))}
    yield "cat_float_even", "even cat (a STACK) of float32 vectors with -0.0 and inf", ["movement", "cat"], lambda: {"y": Tensor([-0.0, float("inf")]).cat(Tensor([1.5, -0.0]))}
    for dim in (0, 1, 2):
        yield (f"stack_dim{dim}", f"stack of two [2,3] on dim {dim}", ["movement", "stack"], lambda dim=dim: {"y": Tensor.stack(ar(2, 3), ar(2, 3) * 2, dim=dim)})
    yield "repeat", "repeat((2,3)) of a [2,2]", ["movement", "repeat"], lambda: {"y": ar(2, 2).repeat((2, 3))}
    yield "repeat_3d", "repeat((1,2,1)) of a [2,1,3]", ["movement", "repeat"], lambda: {"y": ar(2, 1, 3).repeat((1, 2, 1))}
    yield "squeeze_unsqueeze", "unsqueeze(1) then squeeze(0) of a [1,4]", ["movement", "reshape"], lambda: {"y": ar(1, 4).squeeze(0).unsqueeze(1)}
    yield "flatten", "flatten(1) of a [2,3,2]", ["movement", "reshape"], lambda: {"y": ar(2, 3, 2).flatten(1)}
    yield "chain", "permute, pad, flip, shrink chained", ["movement"], lambda: {"y": ar(2, 3).permute(1, 0).pad(((1, 0), (0, 1))).flip(0)[1:]}
    yield "broadcast_add", "[3,1] + [1,4] broadcast", ["movement", "expand", "alu"], lambda: {"y": ar(3, 1) + ar(1, 4) * 10}
    yield "broadcast_where", "where with a [4] condition over [3,4]", ["movement", "expand", "alu"], lambda: {"y": (ar(4) < 2).where(ar(3, 4), -1)}
    yield "split_chunk", "chunk(3) of a [6]", ["movement", "shrink"], lambda: dict(zip("abc", ar(6).chunk(3)))
    yield "split_sizes", "split([1,3]) of a [4,2]", ["movement", "shrink"], lambda: dict(zip("ab", ar(4, 2).split([1, 3])))
    yield "roll", "roll(2) of a [5]", ["movement"], lambda: {"y": ar(5).roll(2)}
    yield "tril_triu", "tril and triu of a [3,3]", ["movement"], lambda: {"l": ar(3, 3).tril(), "u": ar(3, 3).triu(1)}
    yield "eye", "Tensor.eye(3)", ["movement", "creation"], lambda: {"y": Tensor.eye(3)}
    yield "arange", "Tensor.arange(2, 11, 3) and linspace-free arange float", ["creation"], lambda: {"a": Tensor.arange(2, 11, 3), "f": Tensor.arange(0, 2, 0.25)}
    yield "full_zeros_ones", "full, zeros_like, ones_like", ["creation"], lambda: {"f": Tensor.full((2, 2), 7, dtype=dtypes.int16), "z": ar(3).zeros_like(), "o": ar(3).ones_like()}
    yield "one_hot", "one_hot(4) of [0,3,1]", ["movement"], lambda: {"y": Tensor([0, 3, 1]).one_hot(4).cast(dtypes.int32)}
    yield "gather", "gather(1, idx) of a [2,3]", ["movement", "gather"], lambda: {"y": ar(2, 3).gather(1, Tensor([[0, 0], [2, 1]]))}
    yield "fancy_index", "x[Tensor([2,0])] of a [3,2]", ["movement", "gather"], lambda: {"y": ar(3, 2)[Tensor([2, 0])]}
    yield "matmul_int", "int32 [2,3] @ [3,2]", ["matmul"], lambda: {"y": ar(2, 3) @ ar(3, 2)}
    yield "matmul_float", "float32 [3,4] @ [4,2] of small integers", ["matmul"], lambda: {"y": ar(3, 4, dt=dtypes.float32) @ (ar(4, 2, dt=dtypes.float32) - 3)}
    yield "dot_vec", "float32 dot of [5] vectors", ["matmul"], lambda: {"y": ar(5, dt=dtypes.float32).dot(ar(5, dt=dtypes.float32) - 2)}
