#!/usr/bin/env python3
"""tinygrad's own rewrite rules applied to uopkit expressions (protocol `uopkit-tinygrad-rules/1`).

    python bridges/tinygrad/rules.py [--wrong NAME]     # what conformance/src/gen/tinygrad_rules.rs starts

A long-running process speaking line-delimited JSON on stdin/stdout. Each request holds an expression graph in
uopkit's canonical node form (docs/ir.md: `{"id", "op", "dtype", "src", "arg"}`, loop variables as
`RANGE int64 (CONST end) arg=axis`), its roots, and the name of one of tinygrad 0.14.0's rule sets; the nodes
are rebuilt as tinygrad UOps (tg_ops.py's op and dtype mapping), `graph_rewrite(root, RULES)` is applied, and
the rewritten expression comes back in the same canonical form. Requests and answers:

    {"type": "hello"}  ->  {"type": "hello", "protocol": ..., "tinygrad": "0.14.0", "rule_sets": [...],
                            "fault": NAME or null}   (or with "unavailable": REASON)
    {"type": "rewrite", "id": N, "rule_set": "symbolic", "graph": [...], "roots": [ids], "weak": ["int64"]}
        ->  {"type": "result", "id": N, "graph": [...], "roots": [ids]}
        |   {"type": "unsupported", "id": N, "reason": ...}      (an op/dtype with no mapping, either way)
        |   {"type": "error", "id": N, "kind": "tinygrad_raised", "message": ...}   (the exception text)
        |   {"type": "error", "id": N, "kind": "bad_request", "message": ...}

`weak` names the uopkit dtypes built as tinygrad's `dtypes.weakint`, the dtype of tinygrad's own index
arithmetic: `UOp.range` makes weakint RANGEs (uop/ops.py `UOp.range(..., dtype=dtypes.weakint)`), and the
general div/mod folding only matches weakint (uop/divandmod.py: `UPat((Ops.FLOORDIV, Ops.FLOORMOD), dtypes.weakint,
...)` -> `fold_divmod_general`). weakint is an unbounded integer; uopkit's int64 wraps, so the two agree as long
as no intermediate value leaves int64 (the Rust side only sends such expressions). A weakint node in the
result becomes the (single) weak dtype again; without `weak`, a weakint CONST a rule made (the long->int rule
of symbolic.py keeps "weak const weak") takes the dtype of the operation it is an operand of.

Loop variables are RANGEs (bounds 0..end-1 from `_min_max`, uop/ops.py: `if self.op in (Ops.RANGE, Ops.SPECIAL)
...: return 0, (self.src[0]-1).vmax`), as in a kernel's index arithmetic, not DEFINE_VAR-style Variables.

A deliberately wrong rule, for the test that the fuzzer catches one: `--wrong NAME` or
UOPKIT_TINYGRAD_RULE_FAULT=NAME prepends it to the requested rule set (PatternMatcher tries patterns in order,
so it wins where it matches; see FAULTS).
"""

import json
import os
import sys
import traceback

PROTOCOL = "uopkit-tinygrad-rules/1"
VERSION = "0.14.0"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import tinygrad  # noqa: F401
    from tinygrad.dtype import dtypes, Invalid
    from tinygrad.uop.ops import UOp, Ops, UPat, PatternMatcher, graph_rewrite
    from tinygrad.uop import symbolic as S
    import tg_ops as T
    IMPORT_ERROR = None
except Exception as e:  # reported in the hello as `unavailable`
    IMPORT_ERROR = f"tinygrad is not importable by {sys.executable}: {type(e).__name__}: {e}"


def installed_version():
    try:
        from importlib.metadata import version
        return version("tinygrad")
    except Exception:
        return None


# the rule sets a request may name (uop/symbolic.py)
RULE_SET_NAMES = ("symbolic_simple", "symbolic", "sym", "commutative")


def rule_set(name):
    if name not in RULE_SET_NAMES:
        raise BadRequest(f"rule set {name!r} is not one of {', '.join(RULE_SET_NAMES)}")
    return getattr(S, name)


# ---- deliberately wrong rules (--wrong NAME) --------------------------------------------------------------


def _mod_drop_bound(x, c):
    # tinygrad's real rule (divandmod.py fold_divmod_general: `(x//y).vmin == (x//y).vmax` -> x - q*y) removes
    # x % c only when x stays in one period; this one drops the bound condition x.vmax < c (allows < 2c)
    if c.val > 0 and x.vmin >= 0 and x.vmax < 2 * c.val:
        return x
    return None


def _div_drop_carry(x, c, d):
    # (x + c) // d -> x // d + c // d: wrong whenever x % d + c % d >= d (the carry is dropped)
    if c.val > 0 and d.val > 0 and c.val % d.val != 0:
        return x // d + c.val // d.val
    return None


FAULTS = {
    "mod-drop-bound": lambda: PatternMatcher([
        (UPat(Ops.FLOORMOD, src=(UPat.var("x"), UPat.cvar("c"))), _mod_drop_bound),
        (UPat(Ops.CMOD, src=(UPat.var("x"), UPat.cvar("c"))), _mod_drop_bound),
    ]),
    "div-drop-carry": lambda: PatternMatcher([
        (UPat(Ops.FLOORDIV, src=(UPat.var("x") + UPat.cvar("c"), UPat.cvar("d"))), _div_drop_carry),
    ]),
}


def fault_name():
    args = sys.argv[1:]
    if "--wrong" in args:
        i = args.index("--wrong")
        return args[i + 1] if i + 1 < len(args) else ""
    return os.environ.get("UOPKIT_TINYGRAD_RULE_FAULT", "") or None


class BadRequest(Exception):
    pass


class Unsupported(Exception):
    pass


# ---- uopkit -> tinygrad ---------------------------------------------------------------------------------


class Builder:
    def __init__(self, weak):
        self.weak = set(weak)
        for w in self.weak:
            if w not in T.SIGNED and w not in ("uint8", "uint16", "uint32", "uint64"):
                raise BadRequest(f"weak dtype {w!r} is not an int dtype")

    def dt(self, name):
        if name in self.weak:
            return dtypes.weakint
        if name not in T.DTYPES:
            raise Unsupported(f"dtype {name} has no tinygrad dtype")
        return T.DTYPES[name]

    def build(self, nodes):
        u = {}
        for n in sorted(nodes, key=lambda n: n["id"]):
            try:
                u[n["id"]] = self.node(n, [u[s] for s in n.get("src") or []])
            except KeyError as e:
                raise BadRequest(f"node {n.get('id')}: source {e} is not an earlier node")
        return u

    def node(self, n, src):
        op, name = n["op"], n["dtype"]
        dt = self.dt(name)
        where = f"node {n['id']} ({op} {name})"
        if op == "CONST":
            bits = T.literal_bits(n["arg"], name)
            value = T.python_value(bits, name)
            if name in T.FLOATS and value != value and bits != T.nan_bits(name):
                raise Unsupported(f"{where}: a NaN with bits {bits:#x} (tinygrad's CONST is a Python float)")
            return UOp.const(value, dt)
        if op == "RANGE":
            end = src[0]
            if end.op is not Ops.CONST:
                raise Unsupported(f"{where}: the end is not a constant")
            return UOp.range(end.arg, int(n["arg"]), dtype=dt)
        if op == "NEG" and name == "bool":
            # uopkit's NEG on bool is logical not; tinygrad spells it CMPNE(x, True) (mixin/elementwise.py)
            return UOp(Ops.CMPNE, dtypes.bool, (src[0], UOp.const(True, dtypes.bool)))
        if op in T.ALU:
            return UOp(T.ALU[op], dt, tuple(src))
        if op in ("CAST", "BITCAST"):
            return UOp(getattr(Ops, op), dt, (src[0],), arg=dt)
        raise Unsupported(f"{where}: op {op} is not an expression op the rules bridge maps")


# ---- tinygrad -> uopkit ---------------------------------------------------------------------------------


class Reader:
    """Rewritten UOps -> canonical nodes (numbered 0.. in dependency order)."""

    def __init__(self, weak):
        self.weak = sorted(weak)
        self.nodes = []
        self.ids = {}

    def name(self, u, want):
        if u.dtype == dtypes.weakint:
            if len(self.weak) == 1:
                return self.weak[0]
            if want is None:
                raise Unsupported(f"a weakint {u.op.name} whose dtype the context does not fix")
            return want
        try:
            return T.uk_dtype(u.dtype)
        except KeyError:
            raise Unsupported(f"tinygrad's result has dtype {u.dtype} (on {u.op.name}), which uopkit has not")

    def add(self, node):
        node["id"] = len(self.nodes)
        self.nodes.append(node)
        return node["id"]

    def read(self, u, want=None):
        key = (u, want if u.dtype == dtypes.weakint else None)
        if key in self.ids:
            return self.ids[key]
        name = self.name(u, want)
        op = u.op.name
        if u.op is Ops.CONST:
            if u.arg is Invalid:
                raise Unsupported("tinygrad's result holds an Invalid CONST")
            v = u.arg
            if name == "bool":
                arg = bool(v)
            elif name in T.FLOATS:
                arg = "0x%x" % T.literal_bits(repr(float(v)), name)
            else:
                arg = int(v)
            nid = self.add({"op": "CONST", "dtype": name, "arg": arg})
        elif u.op is Ops.RANGE:
            end = self.read(u.src[0], name)
            nid = self.add({"op": "RANGE", "dtype": name, "src": [end], "arg": int(u.arg[0])})
        elif op in T.ALU_OPS or u.op in (Ops.CAST, Ops.BITCAST):
            if u.op in (Ops.CAST, Ops.BITCAST):
                wants = [None]
            elif op in T.COMPARE_OPS:
                concrete = [s for s in u.src if s.dtype != dtypes.weakint]
                wants = [self.name(concrete[0], None) if concrete else None] * len(u.src)
            elif u.op is Ops.WHERE:
                wants = ["bool", name, name]
            else:
                wants = [name] * len(u.src)
            src = [self.read(s, w) for s, w in zip(u.src, wants)]
            nid = self.add({"op": op, "dtype": name, "src": src, "arg": None})
        else:
            raise Unsupported(f"tinygrad's result has op {op}, which is not an expression op uopkit maps back")
        self.ids[key] = nid
        return nid


# ---- requests -------------------------------------------------------------------------------------------


FAULT = None


def hello():
    msg = {"type": "hello", "protocol": PROTOCOL, "rule_sets": list(RULE_SET_NAMES), "fault": FAULT}
    if IMPORT_ERROR:
        msg["unavailable"] = IMPORT_ERROR
        return msg
    v = installed_version()
    msg["tinygrad"] = v
    if v != VERSION:
        msg["unavailable"] = f"the rules bridge maps tinygrad {VERSION}'s IR; {sys.executable} has tinygrad {v}"
    elif FAULT is not None and FAULT not in FAULTS:
        msg["unavailable"] = f"unknown fault {FAULT!r} (known: {', '.join(sorted(FAULTS))})"
    return msg


def rewrite(req):
    if IMPORT_ERROR:
        raise Unsupported(IMPORT_ERROR)
    pm = rule_set(req.get("rule_set"))
    if FAULT is not None:
        pm = FAULTS[FAULT]() + pm
    weak = req.get("weak") or []
    nodes = req.get("graph")
    roots = req.get("roots")
    if not isinstance(nodes, list) or not isinstance(roots, list):
        raise BadRequest("a rewrite request needs `graph` (a list of nodes) and `roots` (a list of ids)")
    u = Builder(weak).build(nodes)
    dtype_of = {n["id"]: n["dtype"] for n in nodes}
    reader = Reader(weak)
    out = []
    for r in roots:
        if r not in u:
            raise BadRequest(f"root {r} is not a node")
        try:
            new = graph_rewrite(u[r], pm, name="uopkit")
        except Exception as e:
            raise Raised(e)
        out.append(reader.read(new, dtype_of[r]))
    return {"type": "result", "id": req.get("id", 0), "graph": reader.nodes, "roots": out}


class Raised(Exception):
    def __init__(self, e):
        super().__init__(first_line(e))
        self.tb = traceback.format_exception(e)


def first_line(e):
    s = str(e).strip()
    return f"{type(e).__name__}: {s.splitlines()[0] if s else ''}"


def answer(line):
    try:
        req = json.loads(line)
    except ValueError as e:
        return {"type": "error", "id": 0, "kind": "bad_request", "message": f"not JSON: {e}"}
    if not isinstance(req, dict):
        return {"type": "error", "id": 0, "kind": "bad_request", "message": "a request is a JSON object"}
    rid = req.get("id", 0)
    try:
        t = req.get("type")
        if t == "hello":
            return hello()
        if t == "rewrite":
            return rewrite(req)
        raise BadRequest(f"unknown request type {t!r}")
    except Unsupported as e:
        return {"type": "unsupported", "id": rid, "reason": str(e)}
    except Raised as e:
        print("tinygrad-rules:", "".join(e.tb), file=sys.stderr, flush=True)
        return {"type": "error", "id": rid, "kind": "tinygrad_raised", "message": f"tinygrad raised {e}"}
    except (BadRequest, KeyError, TypeError) as e:
        return {"type": "error", "id": rid, "kind": "bad_request", "message": f"{type(e).__name__}: {e}"}
    except Exception as e:  # building the UOps or reading the result back: tinygrad's own checks
        print("tinygrad-rules:", traceback.format_exc(), file=sys.stderr, flush=True)
        return {"type": "error", "id": rid, "kind": "tinygrad_raised", "message": f"tinygrad raised {first_line(e)}"}


def main():
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(line)), flush=True)


if __name__ == "__main__":
    FAULT = fault_name()
    sys.setrecursionlimit(100000)
    main()
