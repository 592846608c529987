#!/usr/bin/env python3
"""Structural check of every corpus/<group>/*.json case (standard library only):

* valid JSON, canonical layout (builder.dumps_case gives the same bytes), no JSON float numbers;
* node ids 0..n-1 in topological order, sources earlier, BUFFER slots 0..k-1 in order;
* shape / device / dtype inference per docs/ir.md agrees with every output's `shape`, and the
  expected lists have the right lengths (one list per device for multi-device values);
* inputs name BUFFER nodes, `data` lists have `size` elements, `per_device` matches the tuple;
* expect_error names an existing node and an element inside its shape;
* kernel-level cases (key `kernel`): the canonical layout and the top-level keys only (`uopkit check`'s
  loader checks their programs).

Usage: python3 corpus/gen/validate.py [files...]   (default: every case under corpus/)
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from builder import dumps_case  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASE_KEYS = ["format", "description", "tags", "graph", "inputs", "outputs", "expect_error", "schedule"]
NODE_KEYS = ["id", "op", "dtype", "src", "arg"]
OUT_KEYS = ["name", "node", "shape", "expect", "compare", "nan"]
ALU1 = {"EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "NEG", "TRUNC"}
ALU2 = {"ADD", "MUL", "SUB", "FDIV", "POW", "CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "MAX", "SHL", "SHR",
        "AND", "OR", "XOR", "CMPLT", "CMPNE", "CMPEQ"}
ALU3 = {"WHERE", "MULACC"}
FLOATS = {"float16", "bfloat16", "float32", "float64", "fp8e4m3", "fp8e5m2"}
INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def no_floats(v, where):
    if isinstance(v, float):
        raise AssertionError(f"JSON float number at {where}")
    if isinstance(v, list):
        for i, x in enumerate(v):
            no_floats(x, f"{where}[{i}]")
    if isinstance(v, dict):
        for k, x in v.items():
            no_floats(x, f"{where}.{k}")


def check(path):
    text = open(path, encoding="ascii").read()
    case = json.loads(text)
    assert dumps_case(case) == text, "not in canonical layout"
    no_floats(case, "case")
    if "kernel" in case:
        # a kernel-level case: its programs are checked by the loader (`uopkit check`), not here
        assert list(case) == [k for k in ("format", "description", "tags", "kernel", "expect_error") if k in case]
        assert case["format"] == "uopkit-case/1"
        return
    keys = list(case)
    assert keys == [k for k in CASE_KEYS if k in case], keys
    assert case["format"] == "uopkit-case/1"
    nodes = case["graph"]
    info = {}  # id -> (shape or None for void, device, dtype)
    slot = 0
    for i, n in enumerate(nodes):
        assert list(n) == [k for k in NODE_KEYS if k in n], n
        assert n["id"] == i, f"node ids must be 0..n-1 in order ({n['id']} at {i})"
        src = n.get("src", [])
        assert "src" not in n or src, "empty src must be omitted"
        assert "arg" not in n or n["arg"] is not None
        if isinstance(n.get("arg"), dict):
            assert list(n["arg"]) == sorted(n["arg"]), "arg object keys must be sorted (serde_json order)"
        for s in src:
            assert 0 <= s < i, f"node {i}: source {s} is not earlier"
        op, dt, arg = n["op"], n["dtype"], n.get("arg")
        ss = [info[s] for s in src]
        if op in ("BUFFER", "PARAM"):
            assert set(arg) == {"slot", "size", "device"}
            if op == "BUFFER":
                assert arg["slot"] == slot, f"node {i}: slot {arg['slot']} != {slot}"
                slot += 1
            info[i] = ([arg["size"]], arg["device"], dt)
        elif op == "CONST":
            info[i] = ([], None, dt)
        elif op in ("STORE", "SINK", "GROUP", "CALL"):
            assert dt == "void"
            if op == "STORE":
                assert ss[0][0] == ss[1][0], f"node {i}: STORE shapes {ss[0][0]} vs {ss[1][0]}"
                assert ss[0][2] == ss[1][2]
            info[i] = (None, None, dt)
        elif op == "AFTER":
            info[i] = ss[0]
        elif op in ("CONTIGUOUS", "DETACH"):
            info[i] = ss[0]
        elif op == "COPY":
            info[i] = (ss[0][0], arg, dt)
        elif op == "MSELECT":
            assert isinstance(ss[0][1], list)
            info[i] = (ss[0][0], ss[0][1][arg], dt)
        elif op == "MSTACK":
            for s in ss:
                assert s[0] == ss[0][0] and isinstance(s[1], str)
            info[i] = (ss[0][0], [s[1] for s in ss], dt)
        elif op == "UNSHARD":
            shape = list(ss[0][0])
            shape[arg[0]] *= len(ss[0][1])
            info[i] = (shape, ss[0][1], dt)
        elif op == "ALLREDUCE":
            assert arg[0] in ("ADD", "MUL", "MAX") and arg[1] == ss[0][1]
            info[i] = ss[0]
        elif op == "RESHAPE":
            assert prod(arg) == prod(ss[0][0])
            info[i] = (list(arg), ss[0][1], dt)
        elif op == "EXPAND":
            info[i] = (list(arg) + ss[0][0], ss[0][1], dt)
        elif op == "PERMUTE":
            assert sorted(arg) == list(range(len(ss[0][0])))
            info[i] = ([ss[0][0][p] for p in arg], ss[0][1], dt)
        elif op == "PAD":
            for o, sz, d in zip(arg[0], arg[1], ss[0][0]):
                assert o + d <= sz
            info[i] = (list(arg[1]), ss[0][1], dt)
        elif op == "SHRINK":
            for o, sz, d in zip(arg[0], arg[1], ss[0][0]):
                assert o + sz <= d
            info[i] = (list(arg[1]), ss[0][1], dt)
        elif op == "FLIP":
            assert len(arg) == len(ss[0][0])
            info[i] = ss[0]
        elif op == "REDUCE":
            assert arg[0] in ("ADD", "MUL", "MAX")
            info[i] = (ss[0][0][arg[1]:], ss[0][1], dt)
        elif op in ("CAST", "BITCAST"):
            info[i] = (ss[0][0], ss[0][1], dt)
        elif op in ALU1 | ALU2 | ALU3:
            want = {**{o: 1 for o in ALU1}, **{o: 2 for o in ALU2}, **{o: 3 for o in ALU3}}[op]
            assert len(src) == want, f"node {i}: {op} arity"
            shapes = [s[0] for s, sid in zip(ss, src) if not (s[0] == [] and nodes[sid]["op"] == "CONST")]
            for s in shapes:
                assert s == shapes[0], f"node {i}: {op} shapes {shapes}"
            shape = shapes[0] if shapes else []
            # "CPU" and "CPU:0" name one device (docs/ir.md; tinygrad canonicalizes them too).
            devs = [s[1] if ":" in str(s[1]) else f"{s[1]}:0" for s in ss if s[1] is not None]
            for d in devs:
                assert d == devs[0], f"node {i}: devices {devs}"
            if op in ("CMPLT", "CMPNE", "CMPEQ"):
                assert dt == "bool" and ss[0][2] == ss[1][2]
            elif op == "WHERE":
                assert ss[0][2] == "bool" and ss[1][2] == ss[2][2] == dt
            else:
                for s in ss:
                    assert s[2] == dt, f"node {i}: {op} operand dtype {s[2]} != {dt}"
                if op in ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "SHL", "SHR"):
                    assert dt in INTS
                if op in ("AND", "OR", "XOR"):
                    assert dt in INTS or dt == "bool"
                if op in ("EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "FDIV", "POW"):
                    assert dt in FLOATS
            info[i] = (shape, devs[0] if devs else None, dt)
        else:
            raise AssertionError(f"unknown op {op}")
    # inputs
    ik = list(case["inputs"])
    assert ik == sorted(ik), "inputs keys must be sorted as strings"
    for k, init in case["inputs"].items():
        n = nodes[int(k)]
        assert n["op"] == "BUFFER"
        size, device = n["arg"]["size"], n["arg"]["device"]
        inits = init["per_device"] if "per_device" in init else [init]
        if isinstance(device, list):
            assert "per_device" in init and len(inits) == len(device)
        for it in inits:
            assert len(it) == 1 and list(it)[0] in ("data", "fill", "arange", "prng", "uninit")
            if "data" in it:
                assert len(it["data"]) == size, f"input {k}: {len(it['data'])} != {size}"
    # outputs
    for o in case["outputs"]:
        assert list(o) == OUT_KEYS, list(o)
        shape, device, dt = info[o["node"]]
        assert shape is not None, "output of a void node"
        assert o["shape"] == shape, f"output {o['name']}: shape {o['shape']} but inferred {shape}"
        if "expect_error" in case:
            continue
        # an UNSHARD lives on its tuple but its value is the one concatenated tensor
        if isinstance(device, list) and nodes[o["node"]]["op"] != "UNSHARD":
            assert len(o["expect"]) == len(device) and all(len(e) == prod(shape) for e in o["expect"]), o["name"]
        else:
            assert len(o["expect"]) == prod(shape), f"output {o['name']}: {len(o['expect'])} values for {shape}"
    if "expect_error" in case:
        e = case["expect_error"]
        assert e["node"] < len(nodes)
        shape = info[e["node"]][0]
        assert 0 <= e.get("element", 0) < prod(shape)
    return True


def main(argv):
    files = argv or sorted(glob.glob(os.path.join(ROOT, "*", "*.json")))
    bad = 0
    for f in files:
        try:
            check(f)
        except Exception as ex:  # report every failing file
            bad += 1
            print(f"FAIL {os.path.relpath(f, ROOT)}: {ex!r}")
    print(f"{len(files)} files checked, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
