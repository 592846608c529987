#!/usr/bin/env python3
"""Self-contained tests of the example backends (no uopkit needed).

    python3 examples/backends/test_examples.py      # python3 must import numpy for numpy_graph.py

Starts each backend as a subprocess, performs the handshake, sends hand-made requests and checks
the answers. Every expected value is derived here by hand or with `struct` / `fractions`, never
from uopkit. Exits non-zero on the first failure.
"""

import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL = "uopkit-backend/1"
failures = []


def f32(x):
    """float32 bits of x (struct rounds a Python float to nearest, ties to even)."""
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def i32(v):
    return "0x%08x" % (v & 0xFFFFFFFF)


def i64(v):
    return "0x%016x" % (v & 0xFFFFFFFFFFFFFFFF)


def norm(h):
    """Hex strings compare by value: "0x1" and "0x00000001" are the same bits."""
    return None if h is None else int(h, 16)


class Backend:
    def __init__(self, script, *flags):
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, script), *flags],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.hello = self.send({"type": "hello", "protocol": PROTOCOL})

    def send(self, msg):
        line = msg if isinstance(msg, str) else json.dumps(msg)
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            raise RuntimeError("the backend exited")
        return json.loads(out)

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        check(rc == 0, f"backend exits cleanly when stdin closes (rc {rc})")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def expect_outputs(ans, want, what):
    if ans.get("type") != "result":
        check(False, f"{what}: got {ans}")
        return
    got = [[norm(x) for x in o["components"][0]] for o in ans["outputs"]]
    exp = [[norm(x) for x in w] for w in want]
    check(got == exp, f"{what}" + ("" if got == exp else f": got {ans['outputs']}, expected {want}"))


def buf(i, slot, size, dtype="float32"):
    return {"id": i, "op": "BUFFER", "dtype": dtype, "arg": {"slot": slot, "size": size, "device": "CPU"}}


def run_req(rid, graph, inputs, outputs):
    return {"type": "run", "id": rid, "case": "test", "graph": graph, "inputs": inputs,
            "outputs": outputs, "options": {"allreduce": "auto"}}


# ------------------------------------------------------------------------------------------------
# graph level


def add_float32_request():
    a = [f32(1.0), f32(2.0), "0x7f7fffff", f32(float("inf")), "0x00000001", f32(-0.0), f32(1.0)]
    b = [f32(2.0), f32(-2.0), "0x7f7fffff", f32(float("-inf")), "0x00000001", f32(-0.0), None]
    # 1+2 = 3; 2-2 = +0; max+max overflows to inf; inf-inf is the canonical NaN (sign clear);
    # 2^-149 + 2^-149 = 2^-148 (subnormals kept); -0 + -0 = -0; an uninitialized operand is poison
    want = [f32(3.0), "0x00000000", "0x7f800000", "0x7fc00000", "0x00000002", "0x80000000", None]
    req = run_req(1, [buf(0, 0, 7), buf(1, 1, 7), {"id": 2, "op": "ADD", "dtype": "float32", "src": [0, 1]}],
                  [{"node": 0, "dtype": "float32", "components": [a]},
                   {"node": 1, "dtype": "float32", "components": [b]}],
                  [{"name": "sum", "node": 2, "dtype": "float32", "shape": [7], "devices": 1}])
    return req, [want]


def test_graph():
    b = Backend("numpy_graph.py")
    h = b.hello
    check(h.get("type") == "hello" and h.get("protocol") == PROTOCOL and h.get("level") == "graph",
          "numpy_graph: hello")
    check("float32" in h["accepts"]["dtypes"] and "REDUCE" in h["accepts"]["ops"], "numpy_graph: accepts")

    req, want = add_float32_request()
    expect_outputs(b.send(req), want, "numpy_graph: float32 ADD (rounding, inf, NaN, subnormal, -0, poison)")

    # int32 REDUCE ADD and MAX over axis 0 of a 2x3 view: wraps modulo 2^32
    data = [2147483647, 1, -5, 1, 2, 3]
    g = [buf(0, 0, 6, "int32"), {"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [2, 3]},
         {"id": 2, "op": "REDUCE", "dtype": "int32", "src": [1], "arg": ["ADD", 1]},
         {"id": 3, "op": "REDUCE", "dtype": "int32", "src": [1], "arg": ["MAX", 1]},
         {"id": 4, "op": "REDUCE", "dtype": "int32", "src": [1], "arg": ["ADD", 2]}]
    req = run_req(2, g, [{"node": 0, "dtype": "int32", "components": [[i32(v) for v in data]]}],
                  [{"name": "sum", "node": 2, "dtype": "int32", "shape": [3], "devices": 1},
                   {"name": "max", "node": 3, "dtype": "int32", "shape": [3], "devices": 1},
                   {"name": "all", "node": 4, "dtype": "int32", "shape": [], "devices": 1}])
    expect_outputs(b.send(req), [[i32(-2 ** 31), i32(3), i32(-2)], [i32(2147483647), i32(2), i32(3)],
                                 [i32(2147483647 + 1 - 5 + 1 + 2 + 3)]], "numpy_graph: int32 REDUCE ADD/MAX")

    # float32 REDUCE folds sequentially from +0: ((0 + 2^24) + 1) + 1 = 2^24 (both ties go to even),
    # where a pairwise sum would give 2^24 + 2
    g = [buf(0, 0, 3), {"id": 1, "op": "REDUCE", "dtype": "float32", "src": [0], "arg": ["ADD", 1]}]
    req = run_req(3, g, [{"node": 0, "dtype": "float32", "components": [[f32(2.0 ** 24), f32(1.0), f32(1.0)]]}],
                  [{"name": "s", "node": 1, "dtype": "float32", "shape": [], "devices": 1}])
    expect_outputs(b.send(req), [[f32(2.0 ** 24)]], "numpy_graph: float32 REDUCE is a sequential fold")

    # RESHAPE [2,3] -> PERMUTE -> PAD -> SHRINK -> FLIP over 0..5:
    # permuted [[0,3],[1,4],[2,5]]; PAD offsets (1,0) sizes (5,3) puts it at rows 1..3, cols 0..1;
    # SHRINK offsets (1,1) sizes (3,2) takes rows 1..3, cols 1..2 = [[3,0],[4,0],[5,0]];
    # FLIP axis 0 = [[5,0],[4,0],[3,0]]
    g = [buf(0, 0, 6, "int32"), {"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [2, 3]},
         {"id": 2, "op": "PERMUTE", "dtype": "int32", "src": [1], "arg": [1, 0]},
         {"id": 3, "op": "PAD", "dtype": "int32", "src": [2], "arg": [[1, 0], [5, 3]]},
         {"id": 4, "op": "SHRINK", "dtype": "int32", "src": [3], "arg": [[1, 1], [3, 2]]},
         {"id": 5, "op": "FLIP", "dtype": "int32", "src": [4], "arg": [True, False]},
         {"id": 6, "op": "EXPAND", "dtype": "int32", "src": [5], "arg": [2]}]
    req = run_req(4, g, [{"node": 0, "dtype": "int32", "components": [[i32(v) for v in range(6)]]}],
                  [{"name": "m", "node": 5, "dtype": "int32", "shape": [3, 2], "devices": 1},
                   {"name": "e", "node": 6, "dtype": "int32", "shape": [2, 3, 2], "devices": 1}])
    flat = [5, 0, 4, 0, 3, 0]
    expect_outputs(b.send(req), [[i32(v) for v in flat], [i32(v) for v in flat * 2]],
                   "numpy_graph: RESHAPE/PERMUTE/PAD/SHRINK/FLIP/EXPAND chain")

    # storage: clone = AFTER(b1, STORE(b1, b0 + 1)); then b0 := b0 * 10 (a WAR reader sees the old b0)
    g = [buf(0, 0, 3, "int32"), buf(1, 1, 3, "int32"),
         {"id": 2, "op": "CONST", "dtype": "int32", "arg": 1},
         {"id": 3, "op": "ADD", "dtype": "int32", "src": [0, 2]},
         {"id": 4, "op": "STORE", "dtype": "void", "src": [1, 3]},
         {"id": 5, "op": "AFTER", "dtype": "int32", "src": [1, 4]},
         {"id": 6, "op": "CONST", "dtype": "int32", "arg": 10},
         {"id": 7, "op": "MUL", "dtype": "int32", "src": [0, 6]},
         {"id": 8, "op": "STORE", "dtype": "void", "src": [0, 7]},
         {"id": 9, "op": "AFTER", "dtype": "int32", "src": [0, 8]},
         {"id": 10, "op": "SHRINK", "dtype": "int32", "src": [9], "arg": [[1], [2]]},
         {"id": 11, "op": "STORE", "dtype": "void", "src": [10, 10]},
         {"id": 12, "op": "AFTER", "dtype": "int32", "src": [9, 11]}]
    req = run_req(5, g, [{"node": 0, "dtype": "int32", "components": [[i32(v) for v in (1, 2, 3)]]}],
                  [{"name": "clone", "node": 5, "dtype": "int32", "shape": [3], "devices": 1},
                   {"name": "old", "node": 0, "dtype": "int32", "shape": [3], "devices": 1},
                   {"name": "new", "node": 9, "dtype": "int32", "shape": [3], "devices": 1},
                   {"name": "again", "node": 12, "dtype": "int32", "shape": [3], "devices": 1}])
    ans = b.send(req)
    expect_outputs(ans, [[i32(v) for v in (2, 3, 4)], [i32(v) for v in (1, 2, 3)],
                         [i32(v) for v in (10, 20, 30)], [i32(v) for v in (10, 20, 30)]],
                   "numpy_graph: STORE/AFTER versions (clone, write-after-read)")
    check(ans.get("schedule", {}).get("writes") == [0, 1], "numpy_graph: reports the buffers written")

    # an op outside the subset, and a multi-device buffer: unsupported
    g = [buf(0, 0, 1), {"id": 1, "op": "EXP2", "dtype": "float32", "src": [0]}]
    ans = b.send(run_req(6, g, [], [{"name": "e", "node": 1, "dtype": "float32", "shape": [1], "devices": 1}]))
    check(ans.get("type") == "unsupported" and ans.get("id") == 6 and ans.get("reason"),
          f"numpy_graph: EXP2 is unsupported ({ans})")
    g = [{"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 1, "device": ["CPU:0", "CPU:1"]}}]
    ans = b.send(run_req(7, g, [], [{"name": "x", "node": 0, "dtype": "int32", "shape": [1], "devices": 2}]))
    check(ans.get("type") == "unsupported" and ans.get("id") == 7, f"numpy_graph: multi-device is unsupported ({ans})")

    # undefined behaviour is an error, never a guess
    g = [buf(0, 0, 2, "int32"), buf(1, 1, 2, "int32"), {"id": 2, "op": "CDIV", "dtype": "int32", "src": [0, 1]}]
    ans = b.send(run_req(8, g, [{"node": 0, "dtype": "int32", "components": [[i32(7), i32(-7)]]},
                                {"node": 1, "dtype": "int32", "components": [[i32(2), i32(0)]]}],
                         [{"name": "q", "node": 2, "dtype": "int32", "shape": [2], "devices": 1}]))
    check(ans.get("type") == "error" and ans.get("id") == 8, f"numpy_graph: division by zero is an error ({ans})")

    # malformed requests: error answers, and the backend keeps going
    ans = b.send("this is not json")
    check(ans.get("type") == "error", f"numpy_graph: a line that is not JSON is an error ({ans})")
    ans = b.send({"type": "run", "id": 9, "graph": [{"id": 0, "op": "ADD", "dtype": "float32", "src": [5, 6]}],
                  "outputs": [{"name": "x", "node": 0, "dtype": "float32", "shape": [], "devices": 1}]})
    check(ans.get("type") == "error" and ans.get("id") == 9, f"numpy_graph: a broken graph is an error ({ans})")
    req, want = add_float32_request()
    expect_outputs(b.send(req), want, "numpy_graph: still answers after errors")
    b.close()

    # --wrong: a deliberately wrong backend gives other bits for float32 ADD
    w = Backend("numpy_graph.py", "--wrong")
    req, want = add_float32_request()
    ans = w.send(req)
    got = [norm(x) for x in ans["outputs"][0]["components"][0]]
    check(got != [norm(x) for x in want[0]] and got[0] == norm(want[0][0]) + 1,
          "numpy_graph --wrong: float32 ADD is one ulp off")
    w.close()


# ------------------------------------------------------------------------------------------------
# kernel level


def inst(op, dtype, src=(), arg=None):
    d = {"op": op, "dtype": dtype}
    if src:
        d["src"] = list(src)
    if arg is not None:
        d["arg"] = arg
    return d


def const(dtype, v):
    bits = {"int64": 64, "int32": 32, "bool": 1}[dtype]
    return inst("CONST", dtype, arg={"const": "0x%x" % (v & ((1 << bits) - 1))})


def sum_axis_program():
    """out[j] = sum_i in[i*3 + j] for a 2x3 int32 input (the CPU lowering's shape of a REDUCE)."""
    return {"name": "sum0", "params": [{"dtype": "int32", "size": 3, "written": True},
                                       {"dtype": "int32", "size": 6, "written": False}],
            "insts": [
                inst("PARAM", "int32", arg={"param": 0}),            # 0
                inst("PARAM", "int32", arg={"param": 1}),            # 1
                const("int64", 3),                                   # 2
                inst("RANGE", "int64", [2], {"axis": 0}),            # 3  j
                inst("BUFFER", "int32", arg={"reg": 1}),             # 4
                const("int64", 0),                                   # 5
                inst("INDEX", "int32", [4, 5]),                      # 6
                const("int32", 0),                                   # 7
                inst("STORE", "void", [6, 7]),                       # 8  acc = 0
                const("int64", 2),                                   # 9
                inst("RANGE", "int64", [9], {"axis": 1}),            # 10 i
                inst("MUL", "int64", [10, 2]),                       # 11
                inst("ADD", "int64", [11, 3]),                       # 12
                inst("INDEX", "int32", [1, 12]),                     # 13
                inst("LOAD", "int32", [13]),                         # 14
                inst("LOAD", "int32", [6]),                          # 15
                inst("ADD", "int32", [15, 14]),                      # 16
                inst("STORE", "void", [6, 16]),                      # 17
                inst("END", "void", [10]),                           # 18
                inst("LOAD", "int32", [6]),                          # 19
                inst("INDEX", "int32", [0, 3]),                      # 20
                inst("STORE", "void", [20, 19]),                     # 21
                inst("END", "void", [3]),                            # 22
            ]}


def add_f32_program(n):
    return {"name": "add", "params": [{"dtype": "float32", "size": n, "written": True},
                                      {"dtype": "float32", "size": n, "written": False},
                                      {"dtype": "float32", "size": n, "written": False}],
            "insts": [inst("PARAM", "float32", arg={"param": 0}), inst("PARAM", "float32", arg={"param": 1}),
                      inst("PARAM", "float32", arg={"param": 2}), const("int64", n),
                      inst("RANGE", "int64", [3], {"axis": 0}),
                      inst("INDEX", "float32", [1, 4]), inst("LOAD", "float32", [5]),
                      inst("INDEX", "float32", [2, 4]), inst("LOAD", "float32", [7]),
                      inst("ADD", "float32", [6, 8]), inst("INDEX", "float32", [0, 4]),
                      inst("STORE", "void", [10, 9]), inst("END", "void", [4])]}


def sched(rid, buffers, programs, steps, read):
    return {"type": "run_schedule", "id": rid, "case": "test", "buffers": buffers, "programs": programs,
            "steps": steps, "read": read}


def kbuf(i, dtype, size, init=None, storage=None, device="CPU:0"):
    return {"id": i, "dtype": dtype, "size": size, "device": device,
            "storage": i if storage is None else storage, "init": init}


def expect_buffers(ans, want, what):
    if ans.get("type") != "result":
        check(False, f"{what}: got {ans}")
        return
    got = {b["id"]: [norm(x) for x in b["data"]] for b in ans["buffers"]}
    exp = {k: [norm(x) for x in v] for k, v in want.items()}
    check(got == exp, what + ("" if got == exp else f": got {got}, expected {exp}"))


def test_kernel():
    k = Backend("kernel_interp.py")
    h = k.hello
    check(h.get("type") == "hello" and h.get("protocol") == PROTOCOL and h.get("level") == "kernel",
          "kernel_interp: hello")

    data = [2147483647, 1, -5, 1, 2, 3]
    req = sched(1, [kbuf(0, "int32", 3), kbuf(1, "int32", 6, [i32(v) for v in data])], [sum_axis_program()],
                [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1]}}], [0])
    expect_buffers(k.send(req), {0: [i32(-2 ** 31), i32(3), i32(-2)]}, "kernel_interp: int32 sum kernel (wraps)")

    a = [f32(1.0), f32(2.0), "0x7f7fffff", f32(float("inf")), "0x00000001", f32(0.1)]
    bb = [f32(2.0), f32(-2.0), "0x7f7fffff", f32(float("-inf")), "0x00000001", f32(0.2)]
    # 0.1f + 0.2f: exact sum of the two float32 values, rounded once to float32
    s = struct.unpack("<f", struct.pack("<f", 0.1))[0] + struct.unpack("<f", struct.pack("<f", 0.2))[0]
    want = [f32(3.0), "0x0", "0x7f800000", "0x7fc00000", "0x2", f32(s)]
    # the sum goes to buffer 2, then a COPY to buffer 3 on CPU:1; buffer 4 shares storage with 2
    req = sched(2, [kbuf(0, "float32", 6, a), kbuf(1, "float32", 6, bb), kbuf(2, "float32", 6),
                    kbuf(3, "float32", 6, device="CPU:1")],
                [add_f32_program(6)],
                [{"kernel": {"program": 0, "device": "CPU:0", "args": [2, 0, 1]}}, {"copy": {"dst": 3, "src": 2}}],
                [2, 3])
    expect_buffers(k.send(req), {2: want, 3: want}, "kernel_interp: float32 add kernel and a COPY")

    # a division by zero in a lane that a WHERE discards is harmless; the same value stored is an error
    def div_prog(store_raw):
        return {"name": "div", "params": [{"dtype": "int32", "size": 2, "written": True},
                                          {"dtype": "int32", "size": 2, "written": False}],
                "insts": [inst("PARAM", "int32", arg={"param": 0}), inst("PARAM", "int32", arg={"param": 1}),
                          const("int64", 2), inst("RANGE", "int64", [2], {"axis": 0}),
                          inst("INDEX", "int32", [1, 3]), inst("LOAD", "int32", [4]),
                          const("int32", 100), inst("CDIV", "int32", [6, 5]),            # 7: 100 / d
                          const("int32", 0), inst("CMPNE", "bool", [5, 8]),              # 9: d != 0
                          inst("WHERE", "int32", [9, 7, 8]),                             # 10
                          inst("INDEX", "int32", [0, 3]),
                          inst("STORE", "void", [11, 7 if store_raw else 10]), inst("END", "void", [3])]}
    req = sched(3, [kbuf(0, "int32", 2), kbuf(1, "int32", 2, [i32(-7), i32(0)])], [div_prog(False)],
                [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1]}}], [0])
    expect_buffers(k.send(req), {0: [i32(-14), i32(0)]}, "kernel_interp: discarded division by zero (C truncation)")
    req["id"] = 4
    req["programs"] = [div_prog(True)]
    ans = k.send(req)
    check(ans.get("type") == "error" and ans.get("id") == 4 and "div_by_zero" in ans.get("message", ""),
          f"kernel_interp: a stored division by zero is an error ({ans})")

    # a workgroup of 4 items reverses through a local buffer and a barrier
    prog = {"name": "rev", "params": [{"dtype": "int32", "size": 4, "written": True},
                                      {"dtype": "int32", "size": 4, "written": False}],
            "insts": [inst("PARAM", "int32", arg={"param": 0}), inst("PARAM", "int32", arg={"param": 1}),
                      inst("BUFFER", "int32", arg={"local": 4}), const("int32", 4),
                      inst("SPECIAL", "int32", [3], {"special": "lidx0"}),                # 4
                      inst("CAST", "int64", [4]),                                         # 5
                      inst("INDEX", "int32", [1, 5]), inst("LOAD", "int32", [6]),         # 6, 7
                      inst("INDEX", "int32", [2, 5]), inst("STORE", "void", [8, 7]),      # 8, 9
                      inst("BARRIER", "void", [9]),                                       # 10
                      const("int64", 3), inst("NEG", "int64", [5]), inst("ADD", "int64", [11, 12]),
                      inst("INDEX", "int32", [2, 13]), inst("LOAD", "int32", [14]),       # 14, 15
                      inst("INDEX", "int32", [0, 5]), inst("STORE", "void", [16, 15])]}
    req = sched(5, [kbuf(0, "int32", 4), kbuf(1, "int32", 4, [i32(v) for v in (10, 20, 30, 40)])], [prog],
                [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1]}}], [0])
    expect_buffers(k.send(req), {0: [i32(v) for v in (40, 30, 20, 10)]}, "kernel_interp: SPECIAL, local buffer, BARRIER")

    # an access out of bounds is an error
    prog = {"name": "oob", "params": [{"dtype": "int64", "size": 2, "written": True}],
            "insts": [inst("PARAM", "int64", arg={"param": 0}), const("int64", 2), inst("INDEX", "int64", [0, 1]),
                      const("int64", 7), inst("STORE", "void", [2, 3])]}
    ans = k.send(sched(6, [kbuf(0, "int64", 2)], [prog], [{"kernel": {"program": 0, "device": "CPU:0", "args": [0]}}], [0]))
    check(ans.get("type") == "error" and "out_of_bounds" in ans.get("message", ""), f"kernel_interp: out of bounds ({ans})")

    # too large, an instruction outside the subset, another device kind: unsupported
    big = add_f32_program(6)
    big["insts"][3] = const("int64", 10 ** 7)
    ans = k.send(sched(7, [kbuf(i, "float32", 6) for i in range(3)], [big],
                       [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1, 2]}}], [0]))
    check(ans.get("type") == "unsupported" and "too large" in ans.get("reason", ""), f"kernel_interp: too large ({ans})")
    exp2 = add_f32_program(6)
    exp2["insts"][9] = inst("EXP2", "float32", [6])
    ans = k.send(sched(8, [kbuf(i, "float32", 6) for i in range(3)], [exp2],
                       [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1, 2]}}], [0]))
    check(ans.get("type") == "unsupported" and ans.get("id") == 8, f"kernel_interp: EXP2 is unsupported ({ans})")
    ans = k.send(sched(9, [kbuf(0, "int32", 1, device="CUDA:0")], [], [], [0]))
    check(ans.get("type") == "unsupported", f"kernel_interp: CUDA buffers are unsupported ({ans})")

    ans = k.send("{not json")
    check(ans.get("type") == "error", f"kernel_interp: a line that is not JSON is an error ({ans})")
    ans = k.send({"type": "run_schedule", "id": 10, "buffers": [], "programs": [],
                  "steps": [{"kernel": {"program": 3, "device": "CPU:0", "args": []}}], "read": []})
    check(ans.get("type") == "error" and ans.get("id") == 10, f"kernel_interp: a broken schedule is an error ({ans})")
    expect_buffers(k.send(dict(sched(11, [kbuf(0, "int32", 3), kbuf(1, "int32", 6, [i32(v) for v in data])],
                                     [sum_axis_program()], [{"kernel": {"program": 0, "device": "CPU:0", "args": [0, 1]}}],
                                     [0]))), {0: [i32(-2 ** 31), i32(3), i32(-2)]}, "kernel_interp: still answers after errors")
    k.close()


if __name__ == "__main__":
    try:
        import numpy  # noqa: F401
        test_graph()
    except ImportError:
        check(False, "numpy is importable (numpy_graph.py needs it)")
    test_kernel()
    print(f"\n{len(failures)} failure(s)" if failures else "\nall passed")
    sys.exit(1 if failures else 0)
