"""assign / setitem / clone / contiguous / detach, as tinygrad's test_assign and test_setitem exercise
them. Targets are realized inside build (a realized Tensor's buffer keeps its contents as the case's
initial contents); the returned tensors are read after tinygrad realizes them."""
from tinygrad import Tensor, dtypes


def buf(vals, dt=dtypes.int32):
    return Tensor(vals, dtype=dt).contiguous().realize()


def c_assign_whole():
    x = buf([1, 2, 3, 4]); x.assign(Tensor([5, 6, 7, 8])); return {"x": x}


def c_assign_self_add():
    x = buf([1, 2, 3, 4]); x.assign(x + 10); return {"x": x}


def c_assign_twice():
    x = buf([1, 2, 3]); x.assign(x * 2); x.assign(x + 1); return {"x": x}


def c_assign_read_before():
    x = buf([1.0, 2.0, 3.0], dtypes.float32); y = (x * 3).contiguous().realize(); x.assign(x - 1); return {"x": x, "y": y + 0}


def c_assign_permuted():
    x = buf([1, 2, 3, 4, 5, 6]).reshape(2, 3).contiguous().realize(); x.assign(x.T.contiguous().reshape(2, 3)); return {"x": x}


def c_assign_float16():
    x = buf([1.0, -0.0, 65504.0, 0.5], dtypes.float16); x.assign(x * 2); return {"x": x}


def c_setitem_slice():
    x = buf([1, 2, 3, 4, 5]); x[1:3] = Tensor([9, 9]); return {"x": x}


def c_setitem_scalar():
    x = buf([1, 2, 3, 4]); x[2] = 42; return {"x": x}


def c_setitem_step():
    x = buf([0, 0, 0, 0, 0, 0]); x[::2] = Tensor([1, 2, 3]); return {"x": x}


def c_setitem_2d_row():
    x = buf(list(range(6))).reshape(2, 3).contiguous().realize(); x[1] = Tensor([7, 8, 9]); return {"x": x}


def c_setitem_2d_col():
    x = buf(list(range(6))).reshape(2, 3).contiguous().realize(); x[:, 1] = -1; return {"x": x}


def c_setitem_negative():
    x = buf([1.0, 2.0, 3.0, 4.0], dtypes.float32); x[-2:] = Tensor([-0.0, float("inf")]); return {"x": x}


def c_setitem_twice():
    x = buf([0, 0, 0, 0]); x[0:2] = 1; x[1:3] = 2; return {"x": x}


def c_setitem_self_view():
    x = buf([1, 2, 3, 4]); x[0:2] = x[2:4].contiguous(); return {"x": x}


def c_setitem_broadcast():
    x = buf(list(range(12))).reshape(3, 4).contiguous().realize(); x[1:, 1:3] = Tensor([[100, 200]]); return {"x": x}


def c_setitem_uint8():
    x = buf([250, 251, 252, 253], dtypes.uint8); x[1:3] = x[1:3] + 10; return {"x": x}


def c_clone():
    x = buf([1, 2, 3]); y = x.clone(); return {"y": y}


def c_clone_then_assign():
    x = buf([1, 2, 3]); y = x.clone().realize(); x.assign(Tensor([7, 8, 9])); return {"x": x, "y": y + 0}


def c_contiguous():
    x = buf([1, 2, 3, 4, 5, 6]); return {"y": x.reshape(2, 3).T.contiguous()}


def c_contiguous_float():
    x = buf([0.5, 1.5, -2.0, 3.25], dtypes.float32); return {"y": (x.reshape(2, 2).T.contiguous() * 2).flip(0)}


def c_detach():
    x = buf([1.0, 2.0, 3.0], dtypes.float32); return {"y": x.detach() * 2}


def c_detach_assign():
    x = buf([1, 2, 3]); d = x.detach(); d.assign(Tensor([4, 5, 6])); return {"d": d}


def c_assign_expand_value():
    x = buf([0, 0, 0, 0]); x.assign(Tensor([3]).expand(4)); return {"x": x}


def c_assign_from_reduce():
    x = buf([1, 2, 3, 4]); x.assign(x.reshape(2, 2).sum(0).repeat((2,))); return {"x": x}


def c_assign_cast():
    x = buf([1.5, -2.5, 3.75, 100.0], dtypes.float32); y = buf([0, 0, 0, 0]); y.assign(x.cast(dtypes.int32)); return {"y": y}


def c_realize_chain():
    x = buf([1, 2, 3]); y = (x + 1).realize(); z = (y * y).realize(); return {"z": z + x}


def cases():
    for name, fn in sorted(globals().items()):
        if name.startswith("c_"):
            doc = name[2:].replace("_", " ")
            yield name[2:], f"tinygrad {doc}", ["assign" if "assign" in name or "setitem" in name else "storage"], fn
