#!/usr/bin/env python3
"""Triage aid: re-evaluates an exported kernel-level case (tools/tinygrad_export_kernels.py) in Python
with fixed-width numpy scalars, either per op as the program is written, or as tinygrad's C renderer
prints it, and says whether the result equals the case's expected values (tinygrad's C output).

Usage: tinygrad_kernel_c_semantics.py CASE.json [--c-grouping] [--fp16-in-float]

  --c-grouping     a float ADD/MUL operand that is a single-use ADD/MUL is flattened into its user and
                   the chain is evaluated left to right, as C evaluates `(a+b+c)`: what the renderer's
                   parenthesis stripping (tinygrad renderer/cstyle.py:64-65) compiles
  --fp16-in-float  a float16 ADD/SUB/MUL computes in float32 from the unrounded float32 value of a
                   single-use float16 ADD/SUB/MUL operand and rounds to half once, as clang does for
                   `__fp16` expressions (renderer/cstyle.py:270)

Not an oracle (interp/ is): it knows only the instructions the tinygrad transcendental kernels use,
RANGE loops nested as END closes them, and no barriers; an instruction it does not know exits 2.
Output: one line per expected buffer, `equal` or `differs` and both element lists. Exit 0 when every
buffer is equal, 1 otherwise.
"""
import argparse
import json
import sys

import numpy as np

np.seterr(all="ignore")
T = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
     "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "float16": np.float16, "float32": np.float32,
     "float64": np.float64}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def from_bits(dt, b):
    if dt == "bool":
        return np.bool_(b)
    return np.array([b], dtype=UINT[np.dtype(T[dt]).itemsize]).view(T[dt])[0]


def to_bits(x):
    if x is None:
        return None
    return hex(int(np.array([x]).view(UINT[np.dtype(type(x)).itemsize])[0]))


class Unknown(Exception):
    pass


def run_program(ins, args, mem, c_grouping, fp16_in_float):
    val, wide = {}, {}
    uses = {}
    for x in ins:
        for q in x.get("src", []):
            uses[q] = uses.get(q, 0) + 1

    def chain(j, op, dt):
        y = ins[j]
        if c_grouping and y["op"] == op and y["dtype"] == dt and uses.get(j, 0) == 1:
            return [leaf for q in y["src"] for leaf in chain(q, op, dt)]
        return [j]

    def operand(j):
        return wide[j] if (j in wide and uses.get(j, 0) == 1) else val[j]

    def arith(op, dt, x):
        if op in ("ADD", "MUL") and dt.startswith("float"):
            terms = [leaf for q in x["src"] for leaf in chain(q, op, dt)]
        else:
            terms = list(x["src"])
        half = fp16_in_float and dt == "float16" and op in ("ADD", "SUB", "MUL")
        vs = [np.float32(operand(t)) if half else val[t] for t in terms]
        r = vs[0]
        for b in vs[1:]:
            if op == "ADD":
                r = r + b
            elif op == "SUB":
                r = r - b
            elif op == "MUL":
                r = r * b
            elif op == "AND":
                r = r & b
            elif op == "OR":
                r = r | b
            elif op == "XOR":
                r = r ^ b
            elif op == "SHL":
                r = r << b
            elif op == "SHR":
                r = r >> b
            elif op == "MAX":
                r = max(r, b)
            elif op == "FDIV":
                r = r / b
            elif op in ("CDIV", "CMOD"):
                a_, b_ = int(r), int(b)
                q = abs(a_) // abs(b_) * (1 if (a_ >= 0) == (b_ > 0) else -1)  # C truncating division
                r = q if op == "CDIV" else a_ - q * b_
            if half:
                r = np.float32(r)
        if half:
            return np.float16(r), r
        return T[dt](r), None

    def block(lo, hi):
        pc = lo
        while pc < hi:
            x = ins[pc]
            op, dt = x["op"], x["dtype"]
            s = [val.get(j) for j in x.get("src", [])]
            if op == "CONST":
                val[pc] = from_bits(dt, int(x["arg"]["const"], 16))
            elif op == "PARAM":
                val[pc] = ("buf", args[x["arg"]["param"]])
            elif op == "INDEX":
                val[pc] = (s[0][1], int(s[1]))
            elif op == "LOAD":
                val[pc] = s[1] if len(s) > 2 and not s[2] else mem[s[0][0]][s[0][1]]
            elif op == "STORE":
                if len(s) < 3 or s[2]:
                    mem[s[0][0]][s[0][1]] = s[1]
            elif op == "RANGE":
                end = next(e for e in range(pc + 1, len(ins)) if ins[e]["op"] == "END" and ins[e]["src"][0] == pc)
                for it in range(int(s[0])):
                    val[pc] = T[dt](it)
                    block(pc + 1, end)
                pc = end
            elif op == "END":
                pass
            elif op == "CAST":
                a = s[0]
                if dt == "bool":
                    val[pc] = np.bool_(a != 0)
                elif np.issubdtype(type(a), np.floating) and np.issubdtype(T[dt], np.integer):
                    val[pc] = T[dt](int(float(a)) % (1 << (8 * np.dtype(T[dt]).itemsize)) if dt.startswith("u") else int(float(a)))
                else:
                    val[pc] = np.array([a]).astype(T[dt])[0]
            elif op == "BITCAST":
                val[pc] = np.array([s[0]]).view(T[dt])[0]
            elif op == "WHERE":
                val[pc] = s[1] if s[0] else s[2]
            elif op in ("CMPLT", "CMPNE", "CMPEQ"):
                val[pc] = np.bool_(s[0] < s[1] if op == "CMPLT" else (s[0] != s[1] if op == "CMPNE" else s[0] == s[1]))
            elif op in ("ADD", "SUB", "MUL", "AND", "OR", "XOR", "SHL", "SHR", "MAX", "FDIV", "CDIV", "CMOD"):
                val[pc], w = arith(op, dt, x)
                if w is not None:
                    wide[pc] = w
            else:
                raise Unknown(f"instruction {pc}: {op} is not known to this triage aid")
            pc += 1
    block(0, len(ins))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case")
    ap.add_argument("--c-grouping", action="store_true")
    ap.add_argument("--fp16-in-float", action="store_true")
    a = ap.parse_args(argv)
    try:
        with open(a.case) as f:
            k = json.load(f)["kernel"]
    except (OSError, ValueError, KeyError) as e:
        print(f"{a.case}: not a kernel-level case: {e}", file=sys.stderr)
        return 2
    mem = {b["id"]: [from_bits(b["dtype"], int(x, 16)) if x is not None else None
                     for x in (b["init"] or [None] * b["size"])] for b in k["buffers"]}
    try:
        for st in k["steps"]:
            if "copy" in st:
                mem[st["copy"]["dst"]] = list(mem[st["copy"]["src"]])
                continue
            run_program(k["programs"][st["kernel"]["program"]]["insts"], st["kernel"]["args"], mem,
                        a.c_grouping, a.fp16_in_float)
    except Unknown as e:
        print(f"{a.case}: {e}", file=sys.stderr)
        return 2
    ok = True
    for e in k["expect"]:
        got = [to_bits(x) for x in mem[e["buffer"]]]
        same = got == e["expect"]
        ok &= same
        print(f"{e['name']}: {'equal' if same else 'differs'}\n  got    {got}\n  expect {e['expect']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
