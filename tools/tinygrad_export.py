#!/usr/bin/env python3
"""Export the tensor graphs a tinygrad script builds as uopkit case files (`uopkit-case/1`).

    python tools/tinygrad_export.py SCRIPT.py --out corpus/imported/tinygrad/<group>/ [--device CPU]

SCRIPT.py defines `def cases():` yielding `(name, description, tags, build)`; `build()` takes no
argument and returns `{output_name: Tensor}` of unrealized Tensors (assign/setitem cases realize what
they must inside build and return the tensors to read). For each case the exporter

1. calls build() with tinygrad's default device set to --device,
2. converts the UOp graph behind the outputs (`t.uop`, before realize) op by op to uopkit's IR
   (bridges/tinygrad/tg_ops.py has the name/dtype/device/arg mapping; multi-device graphs first go
   through tinygrad's own `multi_pm`, see tools/README.md), reading every BUFFER's current contents
   as its initial contents,
3. realizes the outputs with tinygrad and writes tinygrad's results as the expected values,
4. writes `<out>/<name>.json` atomically in uopkit's canonical layout.

A tag `tg:alt=PYTHON` makes the exporter build and realize the case a second time on tinygrad's
PYTHON device (its emulator, libm-based transcendentals) and record that result as an `either`
alternative wherever it differs from --device's. A tag `tg:device=X` builds and realizes that case
on tinygrad device X instead of --device (bfloat16: the CPU backend's clang here cannot compile
`__bf16`). A tag `tg:either=OUT=LIT,LIT,...` adds that whole list as an `either` alternative of
output OUT: a value derived by hand from docs/semantics.md where the oracle's definition differs from
tinygrad's (the case's description must say which and why). A tag `tg:nan=any` writes `"nan": "any"` (NaN bits
are the hardware's). Both are for documented oracle<->tinygrad differences only (see the README of
corpus/imported/tinygrad/).

A case that cannot be converted prints `SCRIPT: case NAME: node OP: reason`, is not written, and
makes the exit status 1; the other cases are still exported. Output is deterministic.
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import traceback
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bridges", "tinygrad"))
sys.path.insert(0, os.path.join(ROOT, "corpus", "gen"))

import tg_ops  # noqa: E402
import numerics  # noqa: E402  (exact decode/round/literal helpers of the corpus generator)
from builder import KernelProgram, dumps_case  # noqa: E402,F401  (the canonical layout `uopkit fmt` writes; the program builder of the kernel exporter)

TINYGRAD_VERSION = "0.14.0"
ALT_TAG = "tg:alt=PYTHON"
NAN_ANY_TAG = "tg:nan=any"
DEVICE_TAG = "tg:device="
EITHER_TAG = "tg:either="


class Unsupported(Exception):
    def __init__(self, op, reason):
        super().__init__(f"node {op}: {reason}")


# ----------------------------------------------------------------------------------------------
# literals

def elem_literal(dt, raw_bits):
    """Raw element bits (int) -> canonical JSON literal (exact: floats as the corpus writes them)."""
    if dt == "bool":
        return bool(raw_bits)
    if dt in numerics.INT_BITS:
        return numerics.bits_to_int(dt, raw_bits)
    return numerics.fmt_float(dt, raw_bits)


def bytes_to_literals(dt, data):
    w = tg_ops.UK_ITEMSIZE[dt]
    if len(data) % w:
        raise ValueError(f"{len(data)} bytes is not a whole number of {dt} elements")
    return [elem_literal(dt, int.from_bytes(data[i:i + w], "little")) for i in range(0, len(data), w)]


def python_value_literal(dt, v):
    """A tinygrad CONST value (bool / int / float, a double) committed to dtype dt the way tinygrad
    does it (`dtypes.as_const`: the double rounded to nearest in dt; ints kept; bool of the value)."""
    if dt == "bool":
        return bool(v)
    if dt in numerics.INT_BITS:
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")) or v != int(v):
                raise Unsupported("CONST", f"float constant {v!r} used as {dt}")
            v = int(v)
        # a weak int literal committed to a narrower int wraps, as its C rendering does
        # (`x - y` on uint8 is built as x + y * -1, the -1 becomes 255)
        return numerics.wrap(dt, int(v))
    v = float(v)
    if v != v:
        bits = getattr(v, "bits", None)
        neg = bits is not None and bits >> 63
        return "-nan" if neg else "nan"
    if v in (float("inf"), float("-inf")):
        b = numerics.inf_bits(dt, 1 if v < 0 else 0)
        return numerics.fmt_float(dt, b)
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    b = numerics.round_fraction(dt, Fraction(v))
    return numerics.fmt_float(dt, b)


# ----------------------------------------------------------------------------------------------
# graph conversion

class Converter:
    def __init__(self, Ops, dtypes):
        self.Ops = Ops
        self.dtypes = dtypes
        self.nodes = []          # case-file nodes in creation (topological) order
        self.keys = {}           # structural key -> id (uopkit hash-conses nodes)
        self.memo = {}           # (tinygrad UOp, dtype wanted for a weak CONST) -> id
        self.inputs = {}         # id -> input spec
        self.slots = 0
        self.relocate = {}       # PYTHON BUFFER UOp -> the device of the COPY that consumes it

    def add(self, op, dtype, src=(), arg=None):
        key = json.dumps([op, dtype, list(src), arg], sort_keys=True)
        if key in self.keys:
            return self.keys[key]
        nid = len(self.nodes)
        node = {"id": nid, "op": op, "dtype": dtype}
        if src:
            node["src"] = list(src)
        if arg is not None:
            node["arg"] = arg
        self.nodes.append(node)
        self.keys[key] = nid
        return nid

    def is_weak(self, u):
        return u.dtype.name in tg_ops.WEAK_DTYPES

    def dt(self, u):
        name = u.dtype.name
        if name in tg_ops.WEAK_DTYPES:
            raise Unsupported(u.op.name, f"weak dtype {name} where a concrete dtype is needed")
        if name not in tg_ops.TG_TO_UK_DTYPE:
            raise Unsupported(u.op.name, f"dtype {name} has no uopkit dtype")
        return tg_ops.TG_TO_UK_DTYPE[name]

    # the staging device of Tensor(list): tinygrad puts Python data in a PYTHON buffer and COPYs it
    # to the tensor's device. The exporter places that buffer on the COPY's device instead.
    def plan_relocations(self, sink):
        Ops = self.Ops
        for u in sink.toposort():
            if u.op is Ops.COPY and isinstance(u.arg, str):
                x = u.src[0]
                while x.op in (Ops.RESHAPE,):
                    x = x.src[0]
                if x.op is Ops.BUFFER and x.arg.device == "PYTHON":
                    prev = self.relocate.get(x)
                    if prev is not None and prev != u.arg:
                        raise Unsupported("COPY", f"one PYTHON staging buffer copied to {prev} and {u.arg}")
                    self.relocate[x] = u.arg

    def buffer(self, u):
        dt = self.dt(u)
        size = int(u.src[0].arg) if u.src else int(u.size)
        dev = self.relocate.get(u, u.arg.device)
        arg = {"device": tg_ops.uk_device(dev), "size": size, "slot": self.slots}
        self.slots += 1
        nid = self.add("BUFFER", dt, (), arg)
        buf = u.buffer
        if isinstance(dev, tuple):
            per = []
            for b in buf.bufs:
                if not b.is_allocated():
                    per = None
                    break
                per.append({"data": bytes_to_literals(dt, bytes(b.as_memoryview()))})
            if per is not None:
                self.inputs[nid] = {"per_device": per}
        elif buf.is_allocated():
            self.inputs[nid] = {"data": bytes_to_literals(dt, bytes(buf.as_memoryview()))}
        return nid

    def const(self, u, want):
        v = u.arg
        if type(v).__name__ == "InvalidType" or str(v) == "Invalid":
            raise Unsupported("CONST", "Invalid (masked-lane) constant")
        if isinstance(v, tuple):
            raise Unsupported("CONST", f"vector constant {v!r}")
        dt = want if self.is_weak(u) else self.dt(u)
        if dt is None:
            raise Unsupported("CONST", f"weak constant {v!r} with no concrete partner")
        return self.add("CONST", dt, (), python_value_literal(dt, v))

    def dtw(self, u, want):
        """u's uopkit dtype; a weak node (a literal, or arithmetic on literals) takes its consumer's."""
        if self.is_weak(u):
            if want is None:
                raise Unsupported(u.op.name, f"weak dtype {u.dtype.name} with no concrete consumer")
            return want
        return self.dt(u)

    def operand_dtypes(self, u, want):
        """The dtype each ALU source must have in uopkit (weak constants are committed to it)."""
        op = u.op.name
        if op == "WHERE":
            return ["bool", self.dtw(u, want), self.dtw(u, want)]
        if op in tg_ops.COMPARE_OPS:
            concrete = [s for s in u.src if not self.is_weak(s)]
            if not concrete:
                raise Unsupported(op, "comparison of two weak constants")
            d = self.dt(concrete[0])
            return [d] * len(u.src)
        return [self.dtw(u, want)] * len(u.src)

    def broadcast(self, nid, s, out, dt):
        """tinygrad 0.14's ALU ops broadcast their operands (numpy rules: right-aligned, size-1 dims
        stretch); uopkit's need equal shapes (a `[]` CONST excepted) and EXPAND only prepends. Lowered
        as tinygrad's own `_broadcast_to` does it: RESHAPE away the stretched 1s, EXPAND (prepend) the
        stretched dims, PERMUTE them into place."""
        shape = [int(d) for d in s.shape]
        if shape == out or (shape == [] and self.nodes[nid]["op"] == "CONST"):
            return nid
        if len(shape) > len(out):
            raise Unsupported(s.op.name, f"operand shape {shape} does not broadcast to {out}")
        full = [1] * (len(out) - len(shape)) + shape
        if any(a != b and a != 1 for a, b in zip(full, out)):
            raise Unsupported(s.op.name, f"operand shape {shape} does not broadcast to {out}")
        stretched = [i for i, (a, b) in enumerate(zip(full, out)) if a != b]
        kept = [i for i in range(len(out)) if i not in stretched]
        squeezed = [full[i] for i in kept]
        if squeezed != shape:
            nid = self.add("RESHAPE", dt, [nid], squeezed)
        if not stretched:
            return nid
        nid = self.add("EXPAND", dt, [nid], [out[i] for i in stretched])
        order = stretched + kept  # the axes of the expanded value, as out axes
        perm = [order.index(i) for i in range(len(out))]
        if perm != list(range(len(out))):
            nid = self.add("PERMUTE", dt, [nid], perm)
        return nid

    def stack(self, u, want):
        """tinygrad's value STACK(x0..xn-1) (a new leading axis of size n; Tensor.stack and equal-size
        cat build it) has no uopkit op. Lowered bit-exactly: each x_i is reshaped to [1]+shape and
        padded into row i of [n]+shape, and the rows are selected with WHERE on padded `true` masks
        (a select, not a sum, so -0.0 and NaN bits survive)."""
        dt = self.dtw(u, want)
        if dt == "void" or not u.src:
            raise Unsupported("STACK", "a shape-argument STACK used as a value")
        shape = [int(d) for d in u.src[0].shape]
        n = len(u.src)
        pad = [[0] + [0] * len(shape), [n] + shape]
        true = self.add("CONST", "bool", (), True)
        acc = None
        for i, s in enumerate(u.src):
            if [int(d) for d in s.shape] != shape:
                raise Unsupported("STACK", "sources of different shapes")
            pad[0][0] = i
            arg = [list(pad[0]), list(pad[1])]
            row = self.add("PAD", dt, [self.add("RESHAPE", dt, [self.conv(s, dt)], [1] + shape)], arg)
            if acc is None:
                acc = row
                continue
            mask = self.add("PAD", "bool", [self.add("EXPAND", "bool", [true], [1] + shape)], arg)
            acc = self.add("WHERE", dt, [mask, row, acc])
        return acc

    def conv(self, u, want=None):
        key = (u, want if self.is_weak(u) else None)
        if key in self.memo:
            return self.memo[key]
        nid = self._conv(u, want)
        self.memo[key] = nid
        return nid

    def _conv(self, u, want):
        Ops = self.Ops
        op = u.op.name
        if u.op is Ops.CONST:
            return self.const(u, want)
        if u.op is Ops.BUFFER:
            return self.buffer(u)
        if op in tg_ops.IDENTITY_OPS:
            return self.conv(u.src[0], want)
        if u.op is Ops.COPY:
            x = u.src[0]
            base = x
            while base.op is Ops.RESHAPE:
                base = base.src[0]
            if base.op is Ops.BUFFER and base in self.relocate:
                return self.conv(x)  # the staging buffer already lives on the COPY's device
            return self.add("COPY", self.dt(u), [self.conv(x)], tg_ops.uk_device(u.arg))
        if op in tg_ops.ALU_OPS:
            wants = self.operand_dtypes(u, want)
            out = [int(d) for d in u.shape]
            src = [self.broadcast(self.conv(s, w), s, out, w) for s, w in zip(u.src, wants)]
            return self.add(op, self.dtw(u, want), src)
        if op in tg_ops.SHAPE_ARG_OPS:
            dt = self.dtw(u, want)
            x = self.conv(u.src[0], dt)
            if op == "RESHAPE":
                arg = [int(d) for d in u.shape]
            elif op == "EXPAND":
                out, inn = u.shape, u.src[0].shape
                arg = [int(d) for d in out[:len(out) - len(inn)]]
            elif op == "PAD":
                arg = tg_ops.uk_pad_arg(u.marg)
            else:
                arg = tg_ops.uk_shrink_arg(u.marg)
            return self.add(op, dt, [x], arg)
        if u.op is Ops.PERMUTE:
            return self.add(op, self.dt(u), [self.conv(u.src[0])], [int(a) for a in u.arg])
        if u.op is Ops.FLIP:
            return self.add(op, self.dt(u), [self.conv(u.src[0])], [bool(a) for a in u.arg])
        if u.op is Ops.REDUCE:
            if len(u.src) != 1:
                raise Unsupported(op, "REDUCE with range sources (kernel level)")
            return self.add(op, self.dt(u), [self.conv(u.src[0])], tg_ops.uk_reduce_arg(u.arg))
        if u.op in (Ops.CAST, Ops.BITCAST):
            s, dt = u.src[0], self.dtw(u, want)
            if self.is_weak(s):  # CAST of a weak literal: commit the literal to the cast's dtype
                return self.conv(s, dt)
            return self.add(op, dt, [self.conv(s)])
        if u.op is Ops.MSELECT:
            return self.add(op, self.dt(u), [self.conv(u.src[0])], int(u.arg))
        if u.op is Ops.ALLREDUCE:
            return self.add(op, self.dt(u), [self.conv(u.src[0])], tg_ops.uk_allreduce_arg(u.arg))
        if u.op is Ops.UNSHARD:
            if len(u.arg) != 1:
                raise Unsupported(op, f"sharded on {len(u.arg)} axes (uopkit's UNSHARD takes one)")
            return self.add(op, self.dt(u), [self.conv(u.src[0])], [int(u.arg[0])])
        if u.op is Ops.STORE:
            if len(u.src) != 2:
                raise Unsupported(op, "gated STORE")
            t, v = u.src
            tid = self.conv(t)
            vid = self.conv(v, self.dt(t) if self.is_weak(v) else None)
            return self.add(op, "void", [tid, vid])
        if u.op is Ops.STACK:
            return self.stack(u, want)
        if op in tg_ops.PLAIN_OPS:
            dt = "void" if op in ("SINK", "GROUP") else self.dt(u)
            return self.add(op, dt, [self.conv(s) for s in u.src])
        raise Unsupported(op, "no uopkit equivalent at the tensor level")


def is_multi(sink):
    return any(isinstance(getattr(u, "_device", None) or u.device, tuple) for u in sink.toposort()
               if u.op.name not in ("CONST", "STACK", "RANGE"))


def tensor_bytes(t):
    return bytes(t._data())


def expected_of(t, uk_dt, multi_rep):
    """tinygrad's realized value of output t: a flat literal list, or one list per device for a
    replicated multi-device tensor."""
    from tinygrad import Tensor
    if multi_rep:
        return [bytes_to_literals(uk_dt, bytes(Tensor(t.uop.mselect(i))._data())) for i in range(len(t.device))]
    return bytes_to_literals(uk_dt, tensor_bytes(t))


def build_case(name, description, tags, build, device):
    from tinygrad import dtypes, Tensor
    from tinygrad.helpers import Context
    from tinygrad.uop.ops import Ops, UOp, graph_rewrite
    device = next((t[len(DEVICE_TAG):] for t in tags if t.startswith(DEVICE_TAG)), device)
    with Context(DEV=device):
        return _build_case(name, description, tags, build, device, dtypes, Tensor, Context, Ops, UOp, graph_rewrite)


def _build_case(name, description, tags, build, device, dtypes, Tensor, Context, Ops, UOp, graph_rewrite):
    outs = build()
    if not isinstance(outs, dict) or not outs:
        raise Unsupported("build", "build() must return a non-empty dict {name: Tensor}")
    names = list(outs)
    roots = [outs[n].uop for n in names]
    sink = UOp.sink(*roots)
    multi = is_multi(sink)
    if multi:
        from tinygrad.schedule.multi import multi_pm
        sink = graph_rewrite(sink, multi_pm, name="uopkit export: multi_pm")
    cv = Converter(Ops, dtypes)
    cv.plan_relocations(sink)
    def concrete(d):  # a weak output dtype is tinygrad's default int / float (dtype.py to_dtype)
        return {"weakint": dtypes.default_int, "weakfloat": dtypes.default_float}.get(d.name, d)
    out_dts = [tg_ops.uk_dtype(concrete(outs[n].dtype)) for n in names]
    out_ids = [cv.conv(r, d) for r, d in zip(sink.src, out_dts)]
    # tinygrad's own results (this realizes: every BUFFER's contents were read above)
    Tensor.realize(*[outs[n] for n in names])
    outputs = []
    for n, r, nid, uk_dt in zip(names, sink.src, out_ids, out_dts):
        t = outs[n]
        rep = isinstance(t.device, tuple) and r.op is not Ops.UNSHARD
        outputs.append({"name": n, "node": nid, "shape": [int(d) for d in t.shape],
                        "expect": expected_of(t, uk_dt, rep), "compare": "exact", "nan": "canonical"})
    if ALT_TAG in tags:
        with Context(DEV="PYTHON"):
            alt = build()
            Tensor.realize(*[alt[n] for n in names])
            for o, n, uk_dt in zip(outputs, names, out_dts):
                t = alt[n]
                rep = bool(o["expect"]) and isinstance(o["expect"][0], list)
                a = expected_of(t, uk_dt, rep)
                if a != o["expect"]:
                    o["compare"] = {"either": [a]}
    for t in tags:  # tg:either=OUT=LIT,LIT,...: a whole alternative derived by hand from docs/semantics.md
        if t.startswith(EITHER_TAG):
            oname, _, lits = t[len(EITHER_TAG):].partition("=")
            o = next((o for o in outputs if o["name"] == oname), None)
            if o is None:
                raise Unsupported("tag", f"{t}: no output {oname!r}")
            alt = [int(x) if x.lstrip("-").isdigit() else x for x in lits.split(",")]
            if len(alt) != len(o["expect"]):
                raise Unsupported("tag", f"{t}: {len(alt)} elements, the output has {len(o['expect'])}")
            if alt != o["expect"]:
                o["compare"] = {"either": [alt]}
    if NAN_ANY_TAG in tags:
        for o in outputs:
            o["nan"] = "any"
    src = f"expected values: tinygrad {TINYGRAD_VERSION} realized on {device}"
    if ALT_TAG in tags and any(isinstance(o["compare"], dict) for o in outputs):
        src += "; either-alternative: tinygrad on PYTHON"
    case = {
        "format": "uopkit-case/1",
        "description": f"{description} ({src})",
        "tags": ["tinygrad-import"] + [t for t in tags if not t.startswith("tg:")],
        "graph": cv.nodes,
    }
    case["inputs"] = {str(k): cv.inputs[k] for k in sorted(cv.inputs)}  # fmt writes {} when empty
    case["outputs"] = outputs
    return case


def write_atomic(path, text):
    """Writes `text` to `path` through a temporary file in the same folder and a rename (also
    used by tools/tinygrad_export_kernels.py)."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json.part", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_script(path):
    spec = importlib.util.spec_from_file_location("tg_export_script", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "cases"):
        raise SystemExit(f"{path}: defines no cases()")
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description="export tinygrad tensor graphs as uopkit case files")
    ap.add_argument("script")
    ap.add_argument("--out", required=True, help="directory for the case files")
    ap.add_argument("--device", default="CPU", help="tinygrad device that builds and realizes (default CPU)")
    ap.add_argument("--keep-stale", action="store_true",
                    help="do not remove *.json files in --out that this run did not write")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(20000)
    os.environ.setdefault("SCACHE", "0")
    try:
        mod = load_script(args.script)
        items = list(mod.cases())
    except Exception as e:  # a broken script is bad input
        print(f"{args.script}: cannot load cases(): {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    written, failed, seen = [], [], set()
    for item in items:
        try:
            name, description, tags, build = item
        except (TypeError, ValueError):
            print(f"{args.script}: cases() yielded {item!r}, not (name, description, tags, build)", file=sys.stderr)
            failed.append(str(item)[:40])
            continue
        if name in seen or not name.replace("_", "").replace("-", "").isalnum():
            print(f"{args.script}: case {name!r}: duplicate or unusable name", file=sys.stderr)
            failed.append(name)
            continue
        seen.add(name)
        try:
            case = build_case(name, description, list(tags), build, args.device)
        except Unsupported as e:
            print(f"{args.script}: case {name}: {e}", file=sys.stderr)
            failed.append(name)
            continue
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            print(f"{args.script}: case {name}: tinygrad or conversion error: {type(e).__name__}: {e} "
                  f"(at {os.path.basename(tb.filename)}:{tb.lineno})", file=sys.stderr)
            failed.append(name)
            continue
        write_atomic(os.path.join(args.out, f"{name}.json"), dumps_case(case))
        written.append(name)
    if not args.keep_stale:
        keep = {f"{n}.json" for n in written} | {f"{n}.json" for n in failed}
        for fn in sorted(os.listdir(args.out)):
            if fn.endswith(".json") and fn not in keep:
                os.remove(os.path.join(args.out, fn))
    print(f"{args.script}: {len(written)} written, {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else "") + f" -> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
