#!/usr/bin/env python3
"""tinygrad bridge: a graph-level external backend for uopkit (protocol `uopkit-backend/1`).

    python bridges/tinygrad/bridge.py DEVICE        # PYTHON, CPU, CUDA, ... (tinygrad device names)
    uopkit check --backend tinygrad:PYTHON          # what uopkit runs for you (conformance registry)

Each case's canonical tensor graph is rebuilt node by node as tinygrad 0.14 UOps (`UOp(Ops.X, dtype, src,
arg)`, the mapping in tg_ops.py), realized on DEVICE by tinygrad's own scheduler, and the outputs' raw bits
are answered with the schedule facts tinygrad reports (kernel CALLs, COPY CALLs and their device pairs, which
case BUFFERs a kernel or COPY wrote). uopkit device CPU:n becomes tinygrad DEVICE:n. What the bridge cannot
express is answered `unsupported` with the reason (see README.md). Env:

* UOPKIT_TINYGRAD_WRONG=swap-add-mul: deliberately wrong (ADD and MUL exchanged), to see the kit catch it.
* UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS=N: the PYTHON device's budget of case buffer elements (default 100000;
  larger cases are skipped there, see python_too_large).
"""

import json
import os
import sys
import time
import traceback
from decimal import Decimal

PROTOCOL = "uopkit-backend/1"
DEV = sys.argv[1] if len(sys.argv) > 1 else "PYTHON"
WRONG = os.environ.get("UOPKIT_TINYGRAD_WRONG", "")
NAME = f"tinygrad:{DEV}"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from tinygrad import Tensor  # noqa: E402
    from tinygrad.device import Buffer, MultiBuffer  # noqa: E402
    from tinygrad.engine.realize import run_linear  # noqa: E402
    from tinygrad.uop.ops import UOp, Ops, buffers  # noqa: E402
    import tinygrad  # noqa: E402
    from tinygrad.helpers import Context  # noqa: E402
    import tg_ops as T  # noqa: E402
    IMPORT_ERROR = None
except Exception as e:  # reported in the hello as `unavailable`
    IMPORT_ERROR = f"tinygrad is not importable by {sys.executable}: {type(e).__name__}: {e}"


class Unsupported(Exception):
    """Outside what the bridge can express: answered `unsupported` (a skip with this reason)."""


class BadSetting(Exception):
    """A bridge setting (environment variable) that cannot be used: answered `error` with this message."""


def log(*a):
    print("tinygrad-bridge:", *a, file=sys.stderr, flush=True)


def probe():
    """None if DEV works (a one-element kernel runs), else the reason."""
    if IMPORT_ERROR:
        return IMPORT_ERROR
    version = getattr(tinygrad, "__version__", None)
    try:
        from importlib.metadata import version as v
        version = v("tinygrad")
    except Exception:
        pass
    if version != "0.14.0":
        return f"the bridge maps tinygrad 0.14.0's IR; {sys.executable} has tinygrad {version}"
    try:
        b = Buffer(DEV, 1, T.DTYPES["int32"], initial_value=(20).to_bytes(4, "little"))
        u = UOp.from_buffer(b)
        t = Tensor(UOp(Ops.ADD, u.dtype, (u, u)))
        t.realize()
        got = int.from_bytes(bytes(t.uop.buffer.as_memoryview()), "little")
        if got != 40:
            return f"device {DEV}: a probe kernel computed {got} for 20+20"
    except Exception as e:
        return f"device {DEV} does not run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


_BF16 = []


def bf16_unsupported():
    """None if DEV computes in bfloat16, else why not (checked once, on the first bfloat16 case).

    tinygrad's CPU device renders bfloat16 as C's `__bf16` (renderer/cstyle.py ClangRenderer) and compiles it
    with the clang on PATH; clang before 17 rejects arithmetic on it for x86 ("__bf16 is not supported on this
    target"), so no bfloat16 kernel builds there."""
    if not _BF16:
        why = None
        try:
            b = Buffer(DEV, 1, T.DTYPES["bfloat16"], initial_value=bytes([0x80, 0x3F]))
            u = UOp.from_buffer(b)
            Tensor(UOp(Ops.ADD, u.dtype, (u, u))).realize()
        except Exception as e:
            import subprocess
            try:
                cc = subprocess.run(["clang", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
                r = subprocess.run(["clang", "-c", "-x", "c", "--target=x86_64-none-unknown-elf", "-", "-o", os.devnull],
                                   input="__bf16 f(__bf16 a) { return a + a; }", capture_output=True, text=True)
                detail = next((m.split("error: ", 1)[1] for m in r.stderr.splitlines() if "error: " in m), first_line(e))
            except Exception:
                cc, detail = "clang (version unknown)", first_line(e)
            why = (f"tinygrad {DEV} renders bfloat16 as C __bf16 (renderer/cstyle.py ClangRenderer) and this "
                   f"{cc} cannot compile a bfloat16 kernel ({detail}; clang >= 17 can)")
        _BF16.append(why)
    return _BF16[0]


def python_half_unsupported():
    """None if the PYTHON device declares float16, else why not.

    tinygrad's PythonRenderer.supported_dtypes (runtime/ops_python.py:235) drops dtypes.half before Python 3.12;
    tinygrad then emulates float16 in float32
    (codegen/decomp/dtype.py:200 `_should_emulate`, pm_float_decomp), which is not the device's float16."""
    from tinygrad.device import Device
    if T.DTYPES["float16"] in Device[DEV].renderer.supported_dtypes():
        return None
    return (f"tinygrad's {DEV} device does not support float16 under Python {sys.version_info[0]}.{sys.version_info[1]} "
            "(runtime/ops_python.py:235: PythonRenderer.supported_dtypes drops dtypes.half before Python 3.12; "
            "tinygrad would emulate it in float32, codegen/decomp/dtype.py:200)")


PYTHON_MAX_ELEMENTS_DEFAULT = 100_000


def python_too_large(req):
    """None unless DEV is PYTHON and the case's BUFFERs hold more elements than its budget, else why it is skipped.

    tinygrad's PYTHON device interprets every lane of every kernel in Python (runtime/ops_python.py): the
    768096-element allreduce/auto_ring_add_int32_3dev_256032 takes ~100 s there and the 139392-element
    compiler/matmul_register_tile_k_blocks ~85 s (2-vCPU Xeon), near the harness's 120 s per-case limit, while
    tinygrad:CPU runs each in about a second. Elements are counted as BUFFER size times its number of devices."""
    if DEV.split(":")[0] != "PYTHON":
        return None
    raw = os.environ.get("UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS", "")
    if raw and not (raw.isascii() and raw.isdigit()):
        raise BadSetting(f"UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS={raw!r} is not a whole number")
    budget = int(raw) if raw else PYTHON_MAX_ELEMENTS_DEFAULT
    total = 0
    for n in req.get("graph", []):
        if n.get("op") == "BUFFER" and isinstance(n.get("arg"), dict):
            devs = n["arg"].get("device")
            total += int(n["arg"].get("size", 0)) * (len(devs) if isinstance(devs, list) else 1)
    if total <= budget:
        return None
    return (f"tinygrad's {DEV} device interprets every element in Python: a case with more than {budget} buffer "
            "elements would take minutes there (UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS raises the budget); "
            "tinygrad:CPU runs it")


# ----------------------------------------------------------------------------------------------------------
# graph -> UOps


def lit_uop(node):
    name = node["dtype"]
    bits = T.literal_bits(node["arg"], name)
    value = T.python_value(bits, name)
    if name in T.FLOATS and value != value and bits != T.nan_bits(name):
        # tinygrad's CONST holds a Python float: a NaN's sign and payload are not kept
        raise Unsupported(f"CONST {name} NaN with bits {bits:#x}: tinygrad's CONST is a Python float, "
                          "which does not keep a NaN's sign or payload")
    return UOp.const(value, T.DTYPES[name])


def broadcast(srcs):
    """A `[]` CONST combined with a shaped value is expanded to its shape (EXPAND prepends dims)."""
    shapes = [s.shape for s in srcs]
    full = max(shapes, key=len)
    return [s._mop(Ops.EXPAND, full) if s.shape == () and full != () else s for s in srcs]


# ops through which tinygrad's Tensor.assign looks for the buffer a view is of (tensor.py:457)
VIEW_OPS = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.BITCAST, Ops.DETACH})


class Graph:
    def __init__(self, req):
        self.req = req
        self.nodes = {n["id"]: n for n in req["graph"]}
        self.inputs = {i["node"]: i for i in req.get("inputs", [])}
        self.u = {}
        self.bufs = {}  # node id -> Buffer / MultiBuffer (identity used to name writes)
        self.multi = False
        # deps that no output's AFTER holds (a STORE to another buffer than the AFTER's, the deps of an AFTER of a
        # non-storage value): realized alongside the outputs (run())
        self.effects = []

    def build(self):
        for nid in sorted(self.nodes):
            self.u[nid] = self.node(self.nodes[nid])

    def dt(self, node):
        name = node.get("dtype")
        if name == "void":
            return None
        if name not in T.DTYPES:
            raise Unsupported(f"dtype {name} has no tinygrad dtype")
        if name == "bfloat16" and DEV.split(":")[0] == "CPU" and (why := bf16_unsupported()):
            raise Unsupported(why)
        if name == "float16" and DEV.split(":")[0] == "PYTHON" and (why := python_half_unsupported()):
            raise Unsupported(why)
        return T.DTYPES[name]

    def buffer(self, nid, node):
        arg, name = node["arg"], node["dtype"]
        dt = T.DTYPES[name]
        try:
            dev = T.device(arg["device"], DEV)
        except ValueError as e:
            raise Unsupported(str(e))
        size = int(arg["size"])
        inp = self.inputs.get(nid)
        comps = inp["components"] if inp else None
        if isinstance(dev, tuple):
            self.multi = True
            mb = MultiBuffer(dev, size, dt)
            for i, b in enumerate(mb.bufs):
                b.allocate()
                if comps is not None:
                    b.copy_from(Buffer("PYTHON", size, dt, initial_value=T.pack(comps[i], name)))
            self.bufs[nid] = mb
            return UOp.from_buffer(mb, dev)
        if comps is not None:
            b = Buffer(dev, size, dt, initial_value=T.pack(comps[0], name))
        else:
            b = Buffer(dev, size, dt).allocate()
        self.bufs[nid] = b
        return UOp.from_buffer(b)

    def after_deps(self, x, deps):
        """uopkit AFTER(x, deps...) -> tinygrad's AFTER sources after x.

        tinygrad's scheduler (schedule/__init__.py create_schedule, `writes.setdefault(u.buf_uop, ...)`) takes
        every kernel under an AFTER's sources as a write of x's buffer, so a CALL body's GROUP of stores to
        several buffers (uopkit's multi-output CALL, canonicalized) is not its spelling: there each output is
        AFTER(buffer, STORE to that buffer), as Tensor.assign builds it (tensor.py assign). So the GROUPs are
        flattened and only the stores to x's buffer (and AFTER / other deps) are kept; a store to another
        buffer is ordering only (it cannot change x's contents) and is run as its own AFTER (run())."""
        out = []
        def walk(d):
            if d.op is Ops.GROUP:
                for s in d.src:
                    walk(s)
            elif d.op is Ops.STORE and d.src[0].buf_uop is not x.buf_uop:
                self.effects.append(d)
            elif d.op is Ops.STORE and d.src[0] is not x and d.src[0].op in VIEW_OPS:
                # a store into a view of x's buffer: tinygrad's Tensor.assign spells it
                # AFTER(buffer, AFTER(view, STORE(view, value))) (tensor.py:455-460, "view assign")
                out.append(UOp(Ops.AFTER, d.src[0].dtype, (d.src[0], d)))
            else:
                out.append(d)
        for d in deps:
            walk(d)
        if sum(1 for d in out if d.op is Ops.STORE) > 1:
            return [UOp(Ops.GROUP, T.dtypes.void, tuple(d for d in out if d.op is Ops.STORE))] + \
                [d for d in out if d.op is not Ops.STORE]
        return out

    def node(self, n):
        op, arg = n["op"], n.get("arg")
        dt = self.dt(n)
        src = [self.u[s] for s in n.get("src") or []]
        if op == "BUFFER":
            return self.buffer(n["id"], n)
        if op == "CONST":
            return lit_uop(n)
        if op == "NEG" and n["dtype"] == "bool":
            # uopkit's NEG on bool is logical not; tinygrad spells it CMPNE(x, True) (mixin/elementwise.py)
            return UOp(Ops.CMPNE, dt, (src[0], UOp.const(True, dt)._mop(Ops.EXPAND, src[0].shape)))
        if op in T.ALU:
            top = T.ALU[op]
            if WRONG == "swap-add-mul" and op in ("ADD", "MUL"):
                top = T.ALU["MUL" if op == "ADD" else "ADD"]
            return UOp(top, dt, tuple(broadcast(src)))
        if op in T.MOVEMENT:
            return src[0]._mop(T.MOVEMENT[op], T.movement_arg(op, arg))
        if op == "CAST":
            return UOp(Ops.CAST, dt, (src[0],), arg=dt)
        if op == "BITCAST":
            return UOp(Ops.BITCAST, dt, (src[0],), arg=dt)
        if op == "REDUCE":
            if len(arg) > 2 and arg[2] not in (None, "sequential"):
                raise Unsupported(f"REDUCE with declared order {json.dumps(arg[2])}: tinygrad's REDUCE has no order argument")
            # built as tinygrad's own tensor-level builder does (uop/ops.py UOp._rop: "we don't allow reduce on
            # 1s axis"): size-1 axes among the first n are reshaped away, not reduced; a REDUCE over them makes
            # codegen/simplify.py reduce_unparented assert "some reduce srcs aren't ranges"
            return src[0]._rop(T.REDUCE_OPS[arg[0]], tuple(range(int(arg[1]))))
        if op == "STORE":
            target, value = src
            if value.shape == () and target.shape != ():
                value = value._mop(Ops.EXPAND, target.shape)
            tdev = target.device
            if value.device is not None and tdev is not None and value.device != tdev:
                value = value.copy_to_device(tdev)  # a STORE to another device is a COPY
            return UOp(Ops.STORE, T.dtypes.void, (target, value))
        if op == "AFTER":
            ib = src[0]
            while not ib.has_buffer_identity(after_ok=True) and ib.op in VIEW_OPS:
                ib = ib.src[0]
            if not ib.has_buffer_identity(after_ok=True):
                # uopkit's AFTER of a value that is no view of storage (a COPY, an ALU result) is that value,
                # ordered after deps that cannot change it; tinygrad's AFTER is on storage only (uop/spec.py:99,
                # the tensor spec: a movement op, PARAM, BUFFER, CONTIGUOUS, INDEX, AFTER, ...), so the value is
                # used as it is and the deps run as effects of their own (run())
                self.effects.extend(src[1:])
                return src[0]
            return UOp(Ops.AFTER, src[0].dtype, (src[0], *self.after_deps(src[0], src[1:])))
        if op in ("GROUP", "SINK"):
            # tinygrad's SINK is the root of a kernel (or of a schedule): as an effect inside the graph (a
            # CALL's body, canonicalized, under AFTER) its spelling is GROUP, which merges effects
            return UOp(Ops.GROUP, T.dtypes.void, tuple(src))
        if op == "CONTIGUOUS":
            return UOp(Ops.CONTIGUOUS, dt, (src[0],))
        if op == "DETACH":
            return UOp(Ops.DETACH, dt, (src[0],))
        if op == "COPY":
            try:
                dev = T.device(arg, DEV)
            except ValueError as e:
                raise Unsupported(str(e))
            if isinstance(dev, tuple):
                self.multi = True
            return src[0].copy_to_device(dev)
        if op == "MSELECT":
            return src[0].mselect(int(arg))
        if op == "MSTACK":
            self.multi = True
            return UOp(Ops.MSTACK, dt, tuple(src))
        if op == "UNSHARD":
            return src[0].unshard(int(arg[0]))
        if op == "ALLREDUCE":
            self.multi = True
            return src[0].allreduce(T.REDUCE_OPS[arg[0]], T.device(arg[1], DEV))
        raise Unsupported(f"op {op} is not mapped to tinygrad")


# ----------------------------------------------------------------------------------------------------------
# schedule facts


def base_buffer(u):
    """The Buffer / MultiBuffer a CALL argument names (through views, BITCAST, MSELECT, MSTACK)."""
    seen = set()
    while u is not None and u not in seen:
        seen.add(u)
        if u.op is Ops.BUFFER:
            return buffers.get(u)
        u = u.src[0] if u.src else None
    return None


def stored_params(ast):
    """PARAM slots a kernel AST stores to."""
    slots = set()
    for x in ast.toposort():
        if x.op is Ops.STORE:
            for y in x.src[0].toposort():
                if y.op is Ops.PARAM:
                    slots.add(y.arg.slot if hasattr(y.arg, "slot") else y.arg)
    return slots


def facts(linear, graph):
    kernels = copies = 0
    pairs = set()
    written = []
    for call in linear.src:
        if call.op is not Ops.CALL:
            continue
        body, args = call.src[0], call.src[1:]
        if body.op is Ops.COPY:
            copies += 1
            dst, srcu = args[0], args[1]
            dd, sd = dst.device, srcu.device
            if isinstance(dd, str) and isinstance(sd, str):
                pairs.add((T.uopkit_device(dd), T.uopkit_device(sd)))
            written.append(args[0])
        elif body.op is Ops.SINK:
            kernels += 1
            for s in stored_params(body):
                if isinstance(s, int) and s < len(args):
                    written.append(args[s])
    ids = set()
    for u in written:
        b = base_buffer(u)
        for nid, mine in graph.bufs.items():
            if b is not None and b is mine:
                ids.add(nid)
    return {"kernels": kernels, "copies": copies, "copy_pairs": [list(p) for p in sorted(pairs)],
            "writes": sorted(ids)}


# ----------------------------------------------------------------------------------------------------------
# run


def raw_bytes(buf):
    # a realized view (a SHRINK of a buffer is a Buffer with base and offset) may not be bound yet
    buf.ensure_allocated()
    return bytes(buf.as_memoryview())


def read(t, name, shape, devices):
    n = 1
    for d in shape:
        n *= int(d)
    if devices == 1:
        if isinstance(t.uop.device, tuple):
            # a whole value on a device tuple (UNSHARD's result): read as tinygrad's own Tensor.numpy() does,
            # by a COPY to one device (not counted: the facts come from the case's LINEAR above)
            tt = Tensor(t.uop.copy_to_device(t.uop.device[0]))
        elif t.uop.device is None:
            # a graph of constants only has no device: tinygrad's own Tensor._buffer (tensor.py) clones it to
            # one (here DEV) to read it; realizing it where it is leaves no BUFFER behind
            tt = t.contiguous().clone(DEV)
        else:
            tt = Tensor(t.uop.contiguous()) if t.uop.op is not Ops.BUFFER else t
        tt.realize()
        return [T.unpack(raw_bytes(tt.uop.base.buffer if tt.uop.op is not Ops.BUFFER else tt.uop.buffer), name, n)]
    comps = []
    for i in range(devices):
        tt = Tensor(t.uop.mselect(i).contiguous())
        tt.realize()
        raw = raw_bytes(tt.uop.buffer)
        comps.append(T.unpack(raw, name, len(raw) // max(1, T.BITS[name] // 8)))
    return comps


def run(req):
    if why := python_too_large(req):
        raise Unsupported(why)
    g = Graph(req)
    g.build()
    outs = []
    for o in req["outputs"]:
        u = g.u[o["node"]]
        if u.dtype == T.dtypes.void:
            raise Unsupported(f"output node {o['node']} is void")
        outs.append(Tensor(u))
    if not outs:
        raise Unsupported("no outputs")
    # a store that was only an ordering dep of another buffer's AFTER still runs, unless an output AFTER of its
    # own buffer already holds it
    held = {s for t in outs for a in t.uop.toposort() if a.op is Ops.AFTER for s in a.src[1:]}
    extra = []

    def effect(e):
        if e in held:
            return
        held.add(e)
        if e.op is Ops.GROUP:
            for s in e.src:
                effect(s)
        elif e.op is Ops.STORE:
            extra.append(Tensor(UOp(Ops.AFTER, e.src[0].dtype, (e.src[0], e))))
        elif e.op is Ops.AFTER:
            extra.append(Tensor(e))
    for e in dict.fromkeys(g.effects):
        effect(e)
    # options.allreduce: tinygrad's RING context variable (0: naive, 2: ring, 1: its own size rule)
    ring = {"naive": 0, "ring": 2}.get((req.get("options") or {}).get("allreduce"), 1)
    # tinygrad's schedule cache (schedule/__init__.py lower_sink_to_linear, schedule_cache keyed by the
    # function's UOp key) ignores RING/ALL2ALL: an allreduce of a shape scheduled earlier in this process under
    # another RING would reuse that lowering, so a graph with ALLREDUCE is scheduled uncached (SCACHE=0)
    scache = 0 if any(n["op"] == "ALLREDUCE" for n in req["graph"]) else 1
    with Context(RING=ring, ALL2ALL=0, SCACHE=scache):
        linear, var_vals = outs[0].linear_with_vars(*outs[1:], *extra)
    sched = facts(linear, g)
    run_linear(linear, var_vals)
    answer = []
    for o, t in zip(req["outputs"], outs):
        answer.append({"name": o["name"], "components": read(t, o["dtype"], o["shape"], o.get("devices", 1))})
    return {"type": "result", "id": req["id"], "outputs": answer, "schedule": sched}


def hello():
    msg = {"type": "hello", "protocol": PROTOCOL, "name": NAME, "level": "graph",
           "accepts": {"devices": ["CPU"]}, "allowances": f"tinygrad-{DEV}"}
    why = probe()
    if why:
        msg["unavailable"] = why
    else:
        msg["accepts"]["dtypes"] = sorted(T.DTYPES)
        msg["accepts"]["ops"] = T.OPS
    return msg


def first_line(e):
    """`Type: message` on one line: a multi-line message (tinygrad prints the UOp it failed on below the
    sentence) keeps its first line and its last."""
    lines = str(e).strip().splitlines()
    text = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1].strip()}"
    return f"{type(e).__name__}: {text}"


def answer(line):
    try:
        req = json.loads(line, parse_float=Decimal)
    except ValueError as e:
        return {"type": "error", "id": 0, "message": f"not JSON: {e}"}
    if not isinstance(req, dict):
        return {"type": "error", "id": 0, "message": f"a request is a JSON object, got {type(req).__name__}"}
    rid = req.get("id", 0)
    try:
        t = req.get("type")
        if t == "hello":
            return hello()
        if t == "run":
            return run(req)
        if t == "run_schedule":
            return {"type": "unsupported", "id": rid, "reason": "the tinygrad bridge is a graph-level backend"}
        raise ValueError(f"unknown request type {t!r}")
    except Unsupported as e:
        return {"type": "unsupported", "id": rid, "reason": str(e)}
    except BadSetting as e:
        return {"type": "error", "id": rid, "message": str(e)}
    except Exception as e:
        log(req.get("case", "?"), traceback.format_exc())
        # the graph's tinygrad objects are per request: a raise leaves nothing behind that the next case
        # sees, so the process is kept (a restart re-imports tinygrad and re-probes: ~2 s each)
        return {"type": "error", "id": rid, "message": f"tinygrad raised {first_line(e)}"}


def main():
    times = os.environ.get("UOPKIT_TINYGRAD_TIMES")
    for line in sys.stdin:
        if line.strip():
            t0 = time.perf_counter()
            a = answer(line)
            print(json.dumps(a), flush=True)
            if times:
                with open(times, "a") as f:
                    f.write(f"{time.perf_counter() - t0:.3f} {DEV} {a.get('type')} {_case(line)}\n")


def _case(line):
    try:
        return json.loads(line).get("case", "?")
    except Exception:
        return "?"


if __name__ == "__main__":
    import threading
    sys.setrecursionlimit(100000)
    threading.stack_size(256 << 20)
    th = threading.Thread(target=main)
    th.start()
    th.join()
