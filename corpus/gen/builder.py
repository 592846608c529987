"""A small graph builder that writes cases in the canonical `uopkit-case/1` layout.

Node ids are 0..n-1 in creation (= topological) order; structurally equal nodes are one node
(the IR hash-conses them), BUFFER slots are 0..k-1 in creation order. Values passed to `buffer`
and `output` are *raw* element values (see numerics.py) and are turned into JSON literals here.
"""

import json
import os

import numerics as N

FORMAT = "uopkit-case/1"


def dev(i):
    return f"CPU:{i}"


def devs(n):
    return [dev(i) for i in range(n)]


def _literal_list(dt, values):
    return [N.lit(dt, v) for v in values]


class G:
    def __init__(self, description, tags):
        assert description and "\n" not in description and description.isascii()
        self.description = description
        self.tags = list(tags)
        self.nodes = []
        self._intern = {}
        self.inputs = {}
        self.outputs = []
        self.expect_error = None
        self.schedule = None
        self._slots = 0
        self.dtypes = {}

    # -- nodes --------------------------------------------------------------------------------
    def _add(self, op, dtype, src=(), arg=None):
        src = list(src)
        for s in src:
            assert isinstance(s, int) and 0 <= s < len(self.nodes), (op, src)
        key = json.dumps([op, dtype, src, arg], sort_keys=True)
        if key in self._intern:
            return self._intern[key]
        nid = len(self.nodes)
        node = {"id": nid, "op": op, "dtype": dtype}
        if src:
            node["src"] = src
        if arg is not None:
            node["arg"] = arg
        self.nodes.append(node)
        self._intern[key] = nid
        self.dtypes[nid] = dtype
        return nid

    def buffer(self, dtype, size, device="CPU:0", data=None, init=None):
        """A BUFFER. `data`: raw values (exactly `size`, or per device: a list of lists when
        device is a tuple). `init`: an explicit input object instead (fill/arange/prng/uninit)."""
        slot = self._slots
        self._slots += 1
        # arg keys sorted: serde_json (no preserve_order) writes JSON objects with sorted keys, so
        # this is the layout `uopkit fmt` reproduces byte for byte
        nid = self._add("BUFFER", dtype, (), {"device": device, "size": size, "slot": slot})
        if data is not None:
            assert init is None
            if isinstance(device, list):
                assert len(data) == len(device)
                per = []
                for d in data:
                    assert len(d) == size
                    per.append({"data": _literal_list(dtype, d)})
                init = {"per_device": per}
            else:
                assert len(data) == size, (len(data), size)
                init = {"data": _literal_list(dtype, data)}
        if init is not None:
            self.inputs[str(nid)] = init
        return nid

    def const(self, dtype, v):
        """CONST with a raw value."""
        return self._add("CONST", dtype, (), N.lit(dtype, v))

    def op(self, op, dtype, *src, arg=None):
        return self._add(op, dtype, src, arg)

    def dt(self, nid):
        return self.dtypes[nid]

    # movement / structure shorthands (dtype follows the source)
    def reshape(self, x, shape):
        return self.op("RESHAPE", self.dt(x), x, arg=list(shape))

    def expand(self, x, lead):
        return self.op("EXPAND", self.dt(x), x, arg=list(lead))

    def permute(self, x, perm):
        return self.op("PERMUTE", self.dt(x), x, arg=list(perm))

    def pad(self, x, offsets, sizes):
        return self.op("PAD", self.dt(x), x, arg=[list(offsets), list(sizes)])

    def shrink(self, x, offsets, sizes):
        return self.op("SHRINK", self.dt(x), x, arg=[list(offsets), list(sizes)])

    def flip(self, x, axes):
        return self.op("FLIP", self.dt(x), x, arg=list(axes))

    def reduce(self, x, rop, n, order=None):
        """order: None (sequential) or a declared order such as {"split": 2}."""
        return self.op("REDUCE", self.dt(x), x, arg=[rop, n] if order is None else [rop, n, order])

    def store(self, target, value):
        return self.op("STORE", "void", target, value)

    def after(self, x, *deps):
        return self.op("AFTER", self.dt(x), x, *deps)

    def copy(self, x, device):
        return self.op("COPY", self.dt(x), x, arg=device)

    def cast(self, x, dtype):
        return self.op("CAST", dtype, x)

    def bitcast(self, x, dtype):
        return self.op("BITCAST", dtype, x)

    # -- outputs / expectations ---------------------------------------------------------------
    def output(self, name, node, shape, expect, nan="canonical", dtype=None):
        """expect: raw values (row-major), or a list of per-device lists for a multi-device value."""
        dt = dtype or self.dt(node)
        n = 1
        for d in shape:
            n *= d
        if expect and isinstance(expect[0], list):
            for e in expect:
                assert len(e) == n, (name, len(e), n)
            lits = [_literal_list(dt, e) for e in expect]
        else:
            assert len(expect) == n, (name, len(expect), n)
            lits = _literal_list(dt, expect)
        self.outputs.append({"name": name, "node": node, "shape": list(shape), "expect": lits,
                             "compare": "exact", "nan": nan})

    def output_ub(self, name, node, shape):
        """An output in a case that expects an error: it names what is evaluated, no values."""
        self.outputs.append({"name": name, "node": node, "shape": list(shape), "expect": [],
                             "compare": "exact", "nan": "canonical"})

    def ub(self, kind, node, element):
        self.expect_error = {"kind": "ub", "ub": kind, "node": node, "element": element}

    def sched(self, **kw):
        order = ["copies", "kernels", "no_kernel", "writes", "copy_pairs", "allreduce"]
        assert set(kw) <= set(order)
        self.schedule = {k: kw[k] for k in order if k in kw}

    # -- writing ------------------------------------------------------------------------------
    def to_json(self):
        assert self.outputs or self.expect_error
        case = {"format": FORMAT, "description": self.description, "tags": self.tags,
                "graph": self.nodes,
                "inputs": {k: self.inputs[k] for k in sorted(self.inputs)},
                "outputs": self.outputs}
        if self.expect_error is not None:
            case["expect_error"] = self.expect_error
        if self.schedule is not None:
            case["schedule"] = self.schedule
        return dumps_case(case)


def dumps_case(case):
    """The canonical text of a case (what `uopkit fmt` writes, `Case::to_canonical_string`):
    one top-level key per line; `graph` and `outputs` one element per line and `inputs` one
    buffer per line; every value on its line as json.dumps writes it (", " and ": " separators,
    non-ASCII escaped); a newline at the end."""
    def c(v):
        return json.dumps(v)
    if "kernel" in case:
        return dumps_kernel_case(case)
    parts = []
    for k, v in case.items():
        if k in ("graph", "outputs") and v:
            inner = ",\n".join("    " + c(x) for x in v)
            parts.append(f"  {c(k)}: [\n{inner}\n  ]")
        elif k == "inputs" and v:
            inner = ",\n".join(f"    {c(kk)}: {c(vv)}" for kk, vv in v.items())
            parts.append(f"  {c(k)}: {{\n{inner}\n  }}")
        else:
            parts.append(f"  {c(k)}: {c(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


class KernelProgram:
    """A kernel program in the protocol's JSON form (`{"op", "dtype", "src"?, "arg"?}` per instruction): emit
    appends an instruction and returns its index."""

    def __init__(self, name, params):
        self.name = name
        self.params = params  # [{"dtype", "size", "written"}]
        self.insts = []

    def emit(self, op, dtype, src=(), arg=None):
        inst = {"op": op, "dtype": dtype}
        if src:
            inst["src"] = list(src)
        if arg is not None:
            inst["arg"] = arg
        self.insts.append(inst)
        return len(self.insts) - 1

    def const(self, dtype, bits):
        # not cached: a CONST inside a loop would not reach uses after its END
        return self.emit("CONST", dtype, arg={"const": hex(bits)})

    def to_json(self):
        return {"name": self.name, "params": self.params, "insts": self.insts}


def dumps_kernel_case(case):
    """The canonical text of a kernel-level case (`Case::kernel_canonical_string`): the top-level keys one per
    line, then inside `kernel` one buffer, program header, instruction, step and expected buffer per line."""
    def c(v):
        return json.dumps(v)

    def lst(key, rows):
        if not rows:
            return f"    {c(key)}: []"
        return f"    {c(key)}: [\n" + ",\n".join(rows) + "\n    ]"
    k = case["kernel"]
    progs = []
    for p in k["programs"]:
        insts = ",\n".join("          " + c(i) for i in p["insts"])
        progs.append(f"      {{\"name\": {c(p['name'])}, \"params\": {c(p['params'])}, \"insts\": [\n{insts}\n      ]}}")
    body = [lst("buffers", ["      " + c(b) for b in k["buffers"]]), lst("programs", progs),
            lst("steps", ["      " + c(s) for s in k["steps"]]), lst("expect", ["      " + c(e) for e in k["expect"]])]
    parts = [f"  \"format\": {c(case['format'])}", f"  \"description\": {c(case['description'])}",
             f"  \"tags\": {c(case['tags'])}", "  \"kernel\": {\n" + ",\n".join(body) + "\n  }"]
    if "expect_error" in case:
        parts.append(f"  \"expect_error\": {c(case['expect_error'])}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


class Corpus:
    """Collects cases per group and writes them under corpus/<group>/<name>.json."""

    def __init__(self, root):
        self.root = root
        self.cases = {}

    def add(self, group, name, g):
        path = f"{group}/{name}.json"
        assert path not in self.cases, path
        self.cases[path] = g.to_json()

    def write(self):
        groups = sorted({p.split("/")[0] for p in self.cases})
        for grp in groups:
            d = os.path.join(self.root, grp)
            os.makedirs(d, exist_ok=True)
            for fn in os.listdir(d):
                if fn.endswith(".json") and f"{grp}/{fn}" not in self.cases:
                    os.remove(os.path.join(d, fn))  # a case that the generator no longer makes
        for p, text in sorted(self.cases.items()):
            with open(os.path.join(self.root, p), "w", encoding="ascii", newline="\n") as fh:
                fh.write(text)
        return groups
