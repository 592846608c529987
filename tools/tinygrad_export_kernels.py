#!/usr/bin/env python3
"""Export tinygrad's *lowered kernels* as uopkit kernel-level cases.

Usage: tinygrad_export_kernels.py [--device CPU] [--out DIR] SCRIPT.py...

Each SCRIPT defines `def cases():` yielding `(name, description, tags, build)` where `build()`
is a zero-arg callable returning `{output_name: Tensor}` of unrealized Tensors (the convention
the tensor-level exporter tools/tinygrad_export.py shares). For every case this realizes the
outputs with tinygrad on DEVICE (default CPU) while recording each kernel tinygrad runs: the
linearized UOp program its codegen produced for that device's renderer (PROGRAM -> LINEAR),
the buffers bound to it and their contents before the first kernel that reads them. The
programs are converted to uopkit kernel instructions (interp/src/kernel/mod.rs); tinygrad's
vector values (STACK, SHRINK of a pointer, INDEX of a vector) are split into lanes and its
IF/ENDIF blocks become gates on the loads and stores inside. A buffer copy tinygrad makes into a
buffer the case already holds becomes a `copy` step. tinygrad's realized buffers are the expected
contents (an independent source: compiled C run by tinygrad's runtime), its C compiled with
-ffp-contract=off added (see NO_CONTRACT below); a description names where tinygrad's C renderer
computes differently from the program (renderer_reassociations, renderer_unrounded_half).

The case goes to OUT/<script stem>/<name>.json (default OUT: corpus/imported/tinygrad/kernels),
written atomically in uopkit's canonical layout (what `uopkit fmt` writes). A case that cannot
be converted is reported on stderr naming the case and the uop, and the others go on. Exit
status: 0, or 1 when some case was skipped, 2 on bad usage.
"""
import argparse
import importlib.util
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tinygrad_export import KernelProgram, dumps_case, write_atomic  # noqa: E402  (one atomic writer and one canonical layout for both exporters)

DTYPES = {
    "bool": "bool", "signed char": "int8", "unsigned char": "uint8", "short": "int16", "unsigned short": "uint16",
    "int": "int32", "unsigned int": "uint32", "long": "int64", "unsigned long": "uint64", "half": "float16",
    "__bf16": "bfloat16", "float": "float32", "double": "float64", "weakint": "int64",
    "weakfloat": "float64",
}
ALU = {"EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "NEG", "TRUNC", "ADD", "MUL", "SUB", "FDIV", "POW", "CDIV",
       "CMOD", "FLOORDIV", "FLOORMOD", "MAX", "SHL", "SHR", "AND", "OR", "XOR", "CMPLT", "CMPNE", "CMPEQ", "WHERE",
       "MULACC"}


class Unsupported(Exception):
    pass


def dumps(v):
    return json.dumps(v, ensure_ascii=True)


def dtname(dt):
    base = getattr(dt, "base", dt)
    name = getattr(base, "name", str(base))
    if name not in DTYPES:
        raise Unsupported(f"dtype {dt}")
    return DTYPES[name]


def itemsize(name):
    return {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
            "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}[name]


def hexes(raw, dt):
    n = itemsize(dt)
    return [hex(int.from_bytes(raw[i:i + n], "little")) for i in range(0, len(raw), n)]


def lanes(u):
    shp = getattr(u, "_shape", None)
    if not shp:
        return 1
    n = 1
    for s in shp:
        if not isinstance(s, int):
            raise Unsupported(f"{u.op} with a symbolic shape")
        n *= s
    return n


class Conv(KernelProgram):
    """One tinygrad LINEAR program -> one uopkit program (dict in the protocol's JSON form)."""

    def __init__(self, name, uops, sizes):
        super().__init__(name, [])
        self.uops, self.sizes = uops, sizes
        self.val = {}         # tinygrad uop -> ('mem', inst) | ('addr', mem_inst, [idx insts], gate) | ('val', [lanes]) | None
        self.conds = []       # open IF conditions (uopkit insts)
        self.written = set()  # param slots stored into
        self.consts = {}

    def lanes_of(self, s, n):
        v = self.val.get(s)
        if v is None or v[0] != "val":
            raise Unsupported(f"{s.op} used as a value")
        ls = v[1]
        if len(ls) == n:
            return ls
        if len(ls) == 1:
            return ls * n
        raise Unsupported(f"lane count {len(ls)} vs {n}")

    def gate(self, own):
        gs = list(self.conds) + ([own] if own is not None else [])
        if not gs:
            return None
        g = gs[0]
        for h in gs[1:]:
            g = self.emit("AND", "bool", [g, h])
        return g

    def convert(self):
        from tinygrad.uop.ops import Ops
        for u in self.uops:
            op = u.op.name
            try:
                self.one(u, op, Ops)
            except Unsupported as e:
                raise Unsupported(f"uop {self.uops.index(u)} ({op}): {e}") from None
        params = [{"dtype": dtname(d), "size": self.sizes[s], "written": s in self.written}
                  for s, d in enumerate(self.param_dtypes)]
        return {"name": self.name, "params": params, "insts": self.insts}

    def one(self, u, op, Ops):
        if op in ("SINK", "GROUP", "NOOP"):
            self.val[u] = None
        elif op == "CONST":
            dt = dtname(u.dtype)
            v = u.arg
            self.val[u] = ("val", [self.const(dt, const_bits(dt, v))])
        elif op == "PARAM":
            arg = u.arg
            if not hasattr(arg, "slot"):
                raise Unsupported("a PARAM without a slot")
            space = getattr(getattr(arg, "addrspace", None), "name", "GLOBAL")
            if space != "GLOBAL":
                raise Unsupported(f"PARAM in address space {space}")
            self.param_dtypes_set(arg.slot, u.dtype)
            self.val[u] = ("mem", self.emit("PARAM", dtname(u.dtype), arg={"param": arg.slot}), arg.slot)
        elif op == "BUFFER":
            arg = u.arg
            space = getattr(getattr(arg, "addrspace", None), "name", "")
            sz = u.src[0] if u.src else None
            while sz is not None and sz.op.name == "CAST":
                sz = sz.src[0]
            size = int(sz.arg) if sz is not None and sz.op.name == "CONST" else None
            if size is None:
                raise Unsupported("BUFFER without a constant size")
            kind = {"REG": "reg", "LOCAL": "local"}.get(space)
            if kind is None:
                raise Unsupported(f"BUFFER in address space {space}")
            self.val[u] = ("mem", self.emit("BUFFER", dtname(u.dtype), arg={kind: size}), None)
        elif op == "AFTER":
            self.val[u] = self.val.get(u.src[0])
        elif op == "INDEX":
            base = self.val.get(u.src[0])
            if base is None:
                raise Unsupported("INDEX of nothing")
            if base[0] == "val":  # element of a vector value (a GEP)
                k = u.src[1]
                if k.op.name == "CAST":
                    k = k.src[0]
                if k.op.name != "CONST":
                    raise Unsupported("a vector element at a non-constant position")
                self.val[u] = ("val", [base[1][int(k.arg)]])
                return
            if base[0] != "mem":
                raise Unsupported("INDEX of an address")
            n = lanes(u)
            idx = self.lanes_of(u.src[1], n)
            own = self.lanes_of(u.src[2], n)[0] if len(u.src) > 2 else None
            if len(u.src) > 2 and n != 1:
                raise Unsupported("a gated vector INDEX")
            self.val[u] = ("addr", base[1], idx, own, base[2])
        elif op == "SHRINK":
            base = self.val.get(u.src[0])
            if base is None or base[0] not in ("mem", "addr"):
                raise Unsupported("SHRINK of a value")
            n = lanes(u)
            if base[0] == "addr":
                if len(base[2]) != 1:
                    raise Unsupported("SHRINK of a vector address")
                start, mem, own, slot = base[2][0], base[1], base[3], base[4]
                start = self.emit("ADD", self.insts[start]["dtype"], [start, self.lanes_of(u.src[1], 1)[0]])
            else:
                start, mem, own, slot = self.lanes_of(u.src[1], 1)[0], base[1], None, base[2]
            dt = self.insts[start]["dtype"]
            idx = [start] + [self.emit("ADD", dt, [start, self.const(dt, k)]) for k in range(1, n)]
            self.val[u] = ("addr", mem, idx, own, slot)
        elif op == "LOAD":
            a = self.val.get(u.src[0])
            if a is None or a[0] != "addr":
                raise Unsupported("LOAD of something that is not an address")
            # A gated load is LOAD(index, alt, gate) (tinygrad's C renderer prints
            # `gate ? *index : alt`, renderer/cstyle.py); a gate on the INDEX is a[3].
            own = a[3]
            if len(u.src) > 2:
                lg = self.lanes_of(u.src[2], 1)
                if len(lg) != 1:
                    raise Unsupported("a LOAD gate with several lanes")
                own = lg[0] if own is None else self.emit("AND", "bool", [own, lg[0]])
            g = self.gate(own)
            dt = dtname(u.dtype)
            out = []
            alts = self.lanes_of(u.src[1], len(a[2])) if len(u.src) > 1 else None
            for k, i in enumerate(a[2]):
                ix = self.emit("INDEX", self.insts[a[1]]["dtype"], [a[1], i])
                if g is None:
                    out.append(self.emit("LOAD", dt, [ix]))
                else:
                    alt = alts[k] if alts else self.const(dt, 0)
                    out.append(self.emit("LOAD", dt, [ix, alt, g]))
            self.val[u] = ("val", out)
        elif op == "STORE":
            a = self.val.get(u.src[0])
            if a is None or a[0] != "addr":
                raise Unsupported("STORE to something that is not an address")
            vals = self.lanes_of(u.src[1], len(a[2]))
            g = self.gate(a[3])
            for i, v in zip(a[2], vals):
                ix = self.emit("INDEX", self.insts[a[1]]["dtype"], [a[1], i])
                self.emit("STORE", "void", [ix, v] + ([g] if g is not None else []))
            if a[4] is not None:
                self.written.add(a[4])
            self.val[u] = None
        elif op == "RANGE":
            end = self.lanes_of(u.src[0], 1)[0]
            axis = u.arg[0] if isinstance(u.arg, tuple) else 0
            self.val[u] = ("val", [self.emit("RANGE", dtname(u.dtype), [end], arg={"axis": int(axis)})])
        elif op == "END":
            for r in u.src[1:]:
                if r.op.name != "RANGE":
                    raise Unsupported(f"END of {r.op}")
                self.emit("END", "void", [self.val[r][1][0]])
            self.val[u] = None
        elif op == "IF":
            self.conds.append(self.lanes_of(u.src[0], 1)[0])
            self.val[u] = None
        elif op == "ENDIF":
            self.conds.pop()
            self.val[u] = None
        elif op == "BARRIER":
            self.emit("BARRIER", "void")
            self.val[u] = None
        elif op == "SPECIAL":
            end = u.src[0]
            if end.op.name == "CAST":
                end = end.src[0]
            if end.op.name != "CONST":
                raise Unsupported("SPECIAL with a non-constant extent")
            dt = dtname(u.dtype)
            e = self.const(dt, int(end.arg))
            self.val[u] = ("val", [self.emit("SPECIAL", dt, [e], arg={"special": str(u.arg)})])
        elif op == "STACK":
            ls = []
            for s in u.src:
                ls += self.lanes_of(s, lanes(s))
            self.val[u] = ("val", ls)
        elif op in ("CAST", "BITCAST"):
            n = lanes(u)
            dt = dtname(u.dtype)
            self.val[u] = ("val", [self.emit(op, dt, [x]) for x in self.lanes_of(u.src[0], n)])
        elif op in ALU:
            n = lanes(u)
            dt = dtname(u.dtype)
            srcs = [self.lanes_of(s, n) for s in u.src]
            self.val[u] = ("val", [self.emit(op, dt, [s[k] for s in srcs]) for k in range(n)])
        else:
            raise Unsupported("no uopkit kernel instruction for it")

    def param_dtypes_set(self, slot, dt):
        if not hasattr(self, "param_dtypes"):
            self.param_dtypes = [None] * len(self.sizes)
        if slot >= len(self.param_dtypes):
            raise Unsupported(f"PARAM slot {slot} beyond the {len(self.sizes)} buffers passed")
        self.param_dtypes[slot] = dt


def const_bits(dt, v):
    import struct
    if dt == "bool":
        return 1 if v else 0
    if dt.startswith("int") or dt.startswith("uint"):
        return int(v) & ((1 << (8 * itemsize(dt))) - 1)
    f = float(v)
    if dt == "float64":
        return struct.unpack("<Q", struct.pack("<d", f))[0]
    if dt == "float32":
        return struct.unpack("<I", struct.pack("<f", f))[0]
    if dt == "float16":
        return struct.unpack("<H", struct.pack("<e", f))[0]
    if dt == "bfloat16":
        b = struct.unpack("<I", struct.pack("<f", f))[0]
        if f != f:
            return 0x7FC0
        return (b + 0x7FFF + ((b >> 16) & 1)) >> 16  # round to nearest even
    raise Unsupported(f"constant of {dt}")


def raw_of(buf):
    return bytes(buf.as_memoryview(force_zero_copy=False)) if hasattr(buf, "as_memoryview") else bytes(buf.numpy().tobytes())


def renderer_reassociations(uops):
    """How many float ADD/MUL uops of a program tinygrad's C renderer prints reassociated: a same-op
    operand used once is inlined (renderer/cstyle.py:242) and its parentheses are stripped whatever
    its position (renderer/cstyle.py:64-65, helpers.strip_parens), so ADD(a, ADD(b, c)) becomes
    `(a+b+c)`, which C evaluates as (a+b)+c. The kernel program computes a+(b+c)."""
    from collections import Counter
    from tinygrad.dtype import dtypes
    uses = Counter(v for u in uops for v in u.src)
    n = 0
    for u in uops:
        if u.op.name in ("ADD", "MUL") and dtypes.is_float(u.dtype):
            n += sum(1 for v in u.src[1:] if v.op is u.op and uses[v] == 1)
    return n


def renderer_unrounded_half(uops):
    """How many float16 ALU results tinygrad's C keeps in float: the clang renderer types half as
    `__fp16` (renderer/cstyle.py:270), a storage-only type whose arithmetic clang does in float, and an
    ALU result used once is inlined into its user's expression (renderer/cstyle.py:242), so it is
    rounded to half only where the expression is assigned. The kernel program rounds every op."""
    from collections import Counter
    from tinygrad.dtype import dtypes
    uses = Counter(v for u in uops for v in u.src)
    alu = {"ADD", "SUB", "MUL", "FDIV", "MAX", "NEG", "RECIPROCAL", "SQRT", "TRUNC", "MULACC"}
    return sum(1 for u in uops for v in u.src
               if u.op.name in alu and v.op.name in alu and uses[v] == 1 and getattr(v.dtype, "base", v.dtype) == dtypes.half)


class Recorder:
    def __init__(self):
        self.steps = []      # (program dict, [buffer ids], device)
        self.bufs = {}       # id(Buffer) -> case buffer id
        self.objs = []       # Buffer objects by case id
        self.init = {}       # case id -> raw bytes or None
        self.error = None
        self.reassociated = 0  # renderer_reassociations over the kernels run
        self.unrounded_half = 0  # renderer_unrounded_half over the kernels run
        self.view_bases = set()  # id() of the bases of the views taken

    def record(self, R, Ops, ctx, call, ast):
        lin = [s for s in ast.src if s.op is Ops.LINEAR]
        if not lin:
            raise Unsupported(f"kernel {ast.arg.name}: no LINEAR program")
        uops = list(lin[0].src)
        self.reassociated += renderer_reassociations(uops)
        self.unrounded_half += renderer_unrounded_half(uops)
        if ast.arg.vars:
            raise Unsupported(f"kernel {ast.arg.function_name}: symbolic variables {ast.arg.vars}")
        resolved = R.resolve_params(call, ctx.input_uops)
        per_dev = list(R.unwrap_multi(call, [resolved[i] for i in ast.arg.globals]))
        if len(per_dev) != 1:
            raise Unsupported(f"kernel {ast.arg.function_name}: multi-device")
        self.refuse_views(ast.arg.function_name, per_dev[0][0])
        # which buffers held data before this kernel: only a fresh allocation has undefined contents
        held = [b.is_initialized() for b in per_dev[0][0]]
        bufs = [b.ensure_allocated() for b in per_dev[0][0]]
        conv = Conv(ast.arg.function_name, uops, [b.size for b in bufs])
        prog = conv.convert()
        ids = [self.case_buffer(b, h) for b, h in zip(bufs, held)]
        self.steps.append(("kernel", prog, ids, str(bufs[0].device)))

    def refuse_views(self, what, bufs):
        """A view (Buffer.base/offset) of a buffer the case also takes, e.g. `x[0:2] = x[2:4].contiguous()`
        binding x and x[2:4] to one kernel, shares that buffer's memory, and kernel-level cases do not
        alias buffers (docs/case-format.md), so it has no form. Views into tinygrad's memory planner
        arenas are fine: the arena itself is never bound, and the planner gives each view a range of
        its own while it lives."""
        bound = {id(b) for b in bufs}
        for b in bufs:
            base = getattr(b, "_base", None)
            aliased = (base is not None and (id(base) in self.bufs or id(base) in bound)) or id(b) in self.view_bases
            if aliased:
                v = b if base is not None else next(x for x in bufs + self.objs if getattr(x, "_base", None) is b)
                raise Unsupported(f"{what}: takes a buffer and a view of it ({v.size} {v.dtype.name} at byte offset"
                                  f" {v.offset} of a buffer of {v.base.size} {v.base.dtype.name}); kernel-level cases do not alias buffers")

    def case_buffer(self, b, held):
        """The case buffer id of tinygrad Buffer B, registering it on first sight with its contents
        then: a buffer that held data keeps what the step does not overwrite (a setitem writes part
        of it), so they are recorded; a fresh allocation's contents are undefined (reading them is UB)."""
        key = id(b)
        if key not in self.bufs:
            cid = len(self.objs)
            self.bufs[key] = cid
            self.objs.append(b)  # kept alive: id() stays unique
            if getattr(b, "_base", None) is not None:
                self.view_bases.add(id(b._base))
            self.init[cid] = raw_of(b) if held else None
        return self.bufs[key]

    def record_copy(self, R, ctx, call):
        """tinygrad's buffer copies (exec_copy: between devices, or from Python data). A copy into a
        buffer no recorded step has taken yet needs no step: the buffer's contents at its first
        kernel are its initial contents. A copy into one already taken (tinygrad's memory planner
        reuses a buffer once its last reader ran) becomes a `copy` step, or the case would read the
        buffer's old contents."""
        for bufs, _ in R.unwrap_multi(call, R.resolve_params(call, ctx.input_uops)):
            dest, src = bufs[0], bufs[1]
            if id(dest) not in self.bufs:
                continue
            self.refuse_views("copy", [dest, src])
            if dest.size != src.size or dest.dtype != src.dtype:
                raise Unsupported(f"copy of {src.size} {src.dtype.name} into {dest.size} {dest.dtype.name}")
            sid = self.case_buffer(src, src.is_initialized())
            self.steps.append(("copy", None, [self.bufs[id(dest)], sid], None))


# The Recorder of the case being exported, in a mutable holder: tinygrad's pattern matchers refuse
# closures and compile their functions with a snapshot of the module's globals.
_REC = {"rec": None}


def _capture(ctx, call, ast):
    import tinygrad.engine.realize as R
    from tinygrad.uop.ops import Ops
    rec = _REC["rec"]
    if rec is not None:
        try:
            rec.record(R, Ops, ctx, call, ast)
        except Unsupported as e:
            rec.error = rec.error or str(e)
    return R.exec_kernel(ctx, call, ast)


def _capture_copy(ctx, call, ast):
    import tinygrad.engine.realize as R
    rec = _REC["rec"]
    if rec is not None and rec.error is None:
        try:
            rec.record_copy(R, ctx, call)
        except Unsupported as e:
            rec.error = str(e)
    return R.exec_copy(ctx, call, ast)


_HOOKED = False

# tinygrad 0.14.0 compiles its CPU kernels with `clang -O2 ... -march=native` and no -ffp-contract
# (runtime/support/compiler_cpu.py:21), so clang's C default (-ffp-contract=on) fuses a*b+c inside one
# expression into an FMA wherever the host has one: the nested polynomials of tinygrad's exp2/log2/sin
# decompositions are rendered as one expression, and objdump of the default build shows vfmadd213ss.
# The kernel program has separate MUL and ADD uops, each rounded, so the expected values must come
# from that program compiled without contraction: the exporter compiles with -ffp-contract=off.
NO_CONTRACT = "-ffp-contract=off"


def no_fp_contraction():
    """Makes every ClangCompiler tinygrad creates from now on pass -ffp-contract=off, under a disk-cache
    key of its own (tinygrad caches objects by source: an object of the default build must not be
    reused), and turns off tinygrad's parallel compilation: its worker processes are spawned fresh
    (engine/worker.py) and would compile with the default flags. Installed before tinygrad creates
    its CPU device."""
    from tinygrad.helpers import PARALLEL
    from tinygrad.runtime.support import compiler_cpu
    PARALLEL.value = 0
    C = compiler_cpu.ClangCompiler
    if getattr(C, "_uopkit_no_contract", False):
        return
    orig = C.__init__

    def init(self, arch, cachekey="compile_clang_obj"):
        orig(self, arch, cachekey + "_fp_contract_off")
        self.args = [*self.args, NO_CONTRACT]
    C.__init__ = init
    C._uopkit_no_contract = True


def compiled_without_contraction(device):
    """True when DEVICE's kernels are compiled by a ClangCompiler passing -ffp-contract=off; None when
    its compiler is not clang (nothing to say about contraction)."""
    from tinygrad import Device
    from tinygrad.helpers import PARALLEL
    from tinygrad.runtime.support.compiler_cpu import ClangCompiler
    comp = getattr(Device[device].renderer, "compiler", None)
    if not isinstance(comp, ClangCompiler):
        return None
    return NO_CONTRACT in comp.args and PARALLEL.value == 0


def install_hook():
    """Routes tinygrad's kernel launches through `_capture` (once per process)."""
    global _HOOKED
    if _HOOKED:
        return
    import tinygrad.engine.realize as R
    hooks = {R.exec_kernel: _capture, R.exec_copy: _capture_copy}
    R.pm_exec = R.PatternMatcher([(p, hooks.get(f, f)) for p, f in R.pm_exec.patterns])
    _HOOKED = True


def export_case(name, description, tags, build, device):
    import tinygrad.engine.realize as R
    from tinygrad.uop.ops import Ops
    from tinygrad import Tensor
    outs = build()
    if not isinstance(outs, dict) or not outs:
        raise Unsupported("build() must return a non-empty {name: Tensor} dict")
    outs = {k: v.to(device) if v.device != device else v for k, v in sorted(outs.items())}
    install_hook()
    rec = _REC["rec"] = Recorder()
    try:
        Tensor.realize(*outs.values())
    finally:
        _REC["rec"] = None
    if rec.error:
        raise Unsupported(rec.error)
    if compiled_without_contraction(device) is False:
        raise Unsupported(f"{device}'s clang compiler lacks {NO_CONTRACT} (created before no_fp_contraction())")
    if not rec.steps:
        raise Unsupported("tinygrad ran no kernel for it")
    programs, steps, keys = [], [], {}
    for kind, prog, ids, dev in rec.steps:
        if kind == "copy":
            steps.append({"copy": {"dst": ids[0], "src": ids[1]}})
            continue
        key = dumps(prog)
        if key not in keys:
            keys[key] = len(programs)
            programs.append(prog)
        steps.append({"kernel": {"program": keys[key], "device": dev, "args": ids}})
    buffers = []
    for cid, b in enumerate(rec.objs):
        dt = dtname(b.dtype)
        raw = rec.init[cid]
        buffers.append({"id": cid, "dtype": dt, "size": b.size, "device": str(b.device), "storage": cid,
                        "init": None if raw is None else hexes(raw, dt)})
    expect = []
    for oname, t in outs.items():
        buf = t.uop.base.buffer if hasattr(t.uop.base, "buffer") else None
        cid = rec.bufs.get(id(buf)) if buf is not None else None
        if cid is None:
            raise Unsupported(f"output {oname}: its buffer is not one a kernel took")
        expect.append({"name": oname, "buffer": cid, "expect": hexes(raw_of(buf), dtname(buf.dtype)), "nan": "canonical"})
    if rec.reassociated:
        description += (f"; tinygrad's C renderer strips the parentheses of {rec.reassociated} right-nested float"
                        " ADD/MUL operand(s) (renderer/cstyle.py:64-65), so its compiled C evaluates them left to"
                        " right, not in the program's order: a mismatch here is that finding")
    if rec.unrounded_half:
        description += (f"; tinygrad's C keeps {rec.unrounded_half} inlined float16 intermediate(s) in float (clang's"
                        " __fp16 is storage-only, renderer/cstyle.py:270), so it rounds fewer times than the program:"
                        " a mismatch here is that finding")
    return {"format": "uopkit-case/1", "description": description, "tags": tags,
            "kernel": {"buffers": buffers, "programs": programs, "steps": steps, "expect": expect}}


def load_script(path):
    spec = importlib.util.spec_from_file_location(re.sub(r"\W", "_", os.path.basename(path)[:-3]), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "cases"):
        raise SystemExit(f"{path}: defines no cases()")
    return mod


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--out", default=os.path.join(here, "..", "corpus", "imported", "tinygrad", "kernels"))
    ap.add_argument("scripts", nargs="+")
    a = ap.parse_args(argv)
    import tinygrad
    version = getattr(tinygrad, "__version__", "0.14.0")
    no_fp_contraction()
    how = f"lowered kernels, device {a.device}"
    if compiled_without_contraction(a.device):
        how += f", C compiled with clang {NO_CONTRACT}"
    skipped = written = 0
    for path in a.scripts:
        if not path.endswith(".py") or not os.path.isfile(path):
            print(f"{path}: not a Python script", file=sys.stderr)
            return 2
        mod = load_script(path)
        stem = os.path.basename(path)[:-3]
        for name, desc, tags, build in mod.cases():
            where = f"{stem}/{name}"
            try:
                case = export_case(name, f"{desc} (tinygrad {version} {how})",
                                   sorted(set(list(tags) + ["tinygrad", "kernel"])), build, a.device)
            except Unsupported as e:
                print(f"{where}: skipped: {e}", file=sys.stderr)
                skipped += 1
                continue
            except Exception as e:  # tinygrad itself failed on the script
                print(f"{where}: skipped: tinygrad failed: {type(e).__name__}: {e}", file=sys.stderr)
                skipped += 1
                continue
            write_atomic(os.path.join(a.out, stem, name + ".json"), dumps_case(case))
            written += 1
    print(f"wrote {written} case(s), skipped {skipped}", file=sys.stderr)
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
