#!/usr/bin/env python3
"""numpy and tinygrad (CPU) figures for `uopkit bench`.

Reads a JSON request on stdin: {"rounds": N, "workloads": [{"name", "kind", sizes...}]}.
Writes one JSON object on stdout: {"numpy": bool, "tinygrad": bool, "unavailable": {lib:
why}, "results": {name: {"numpy": value, "tinygrad": value, "errors": {lib: why}}}} in each
workload's unit (GB/s or GFLOP/s, the same byte and flop counts as uopkit's), from the best
of N runs after one warm-up. A library that is not installed or cannot run gives no figure
(the key is absent) and says why under "unavailable"; a figure that fails says why under its
workload's "errors". tinygrad's figures time a full call (graph build, schedule, realize,
with its kernel cache warm); its first call (compile included) is reported as
"tinygrad_first_ms".
"""
import json
import os
import sys
import time

req = json.load(sys.stdin)
rounds = max(1, int(req.get("rounds", 5)))
unavailable = {}


def why(e):
    """One line saying what went wrong."""
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


try:
    import numpy as np
except Exception as e:
    np = None
    unavailable["numpy"] = "not installed (" + why(e) + ")" if isinstance(e, ImportError) else why(e)
Tensor = None
if np is None:
    unavailable["tinygrad"] = "needs numpy (to make its inputs)"
else:
    # tinygrad reads DEV when it is imported; every tensor below also names CPU.
    os.environ["DEV"] = "CPU"
    try:
        from tinygrad import Tensor as _Tensor
    except Exception as e:
        unavailable["tinygrad"] = "not installed (" + why(e) + ")" if isinstance(e, ImportError) else why(e)
    else:
        # One tiny kernel, so that a device that cannot compile (tinygrad's CPU device runs
        # clang) is said once here rather than once per workload.
        try:
            (_Tensor([1.0, 2.0], device="CPU") + 1).realize().tolist()
            Tensor = _Tensor
        except Exception as e:
            unavailable["tinygrad"] = "cannot run on its CPU device: " + why(e)


def best(f, rounds):
    f()
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def work(w):
    k = w["kind"]
    if k == "triad":
        item = 2 if w["dtype"] == "float16" else 4
        return 3.0 * item * w["n"]
    if k == "sum":
        return 4.0 * w["n"]
    if k == "matmul":
        return 2.0 * w["m"] * w["k"] * w["n"]
    if k == "softmax":
        return 8.0 * w["r"] * w["c"]
    if k == "conv":
        return 2.0 * w["c"] * w["o"] * w["l"]
    raise ValueError(k)


def numpy_fn(w):
    rng = np.random.default_rng(1)
    k = w["kind"]
    if k == "triad":
        dt = np.float16 if w["dtype"] == "float16" else np.float32
        b = rng.uniform(-1, 1, w["n"]).astype(dt)
        c = rng.uniform(-1, 1, w["n"]).astype(dt)
        out = np.empty_like(b)
        three = dt(3)
        return lambda: np.add(b, np.multiply(c, three, out=out), out=out)
    if k == "sum":
        x = rng.uniform(-1, 1, w["n"]).astype(np.float32)
        return lambda: x.sum()
    if k == "matmul":
        a = rng.uniform(-1, 1, (w["m"], w["k"])).astype(np.float32)
        b = rng.uniform(-1, 1, (w["k"], w["n"])).astype(np.float32)
        return lambda: a @ b
    if k == "softmax":
        x = rng.uniform(-4, 4, (w["r"], w["c"])).astype(np.float32)
        def f():
            e = np.exp2(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return f
    if k == "conv":
        c, o, kw, l = w["c"], w["o"], w["k"], w["l"]
        x = rng.uniform(-1, 1, (c, l)).astype(np.float32)
        wt = rng.uniform(-1, 1, (o, c, kw)).astype(np.float32)
        def f():
            xv = x.reshape(c, l // kw, kw)
            return np.einsum("cpk,ock->op", xv, wt, optimize=True)
        return f
    raise ValueError(k)


def tinygrad_fn(w):
    rng = np.random.default_rng(1)
    k = w["kind"]
    T = lambda a: Tensor(a, device="CPU").realize()
    if k == "triad":
        dt = np.float16 if w["dtype"] == "float16" else np.float32
        b = T(rng.uniform(-1, 1, w["n"]).astype(dt))
        c = T(rng.uniform(-1, 1, w["n"]).astype(dt))
        return lambda: (b + c * 3).realize()
    if k == "sum":
        x = T(rng.uniform(-1, 1, w["n"]).astype(np.float32))
        return lambda: x.sum().realize()
    if k == "matmul":
        a = T(rng.uniform(-1, 1, (w["m"], w["k"])).astype(np.float32))
        b = T(rng.uniform(-1, 1, (w["k"], w["n"])).astype(np.float32))
        return lambda: (a @ b).realize()
    if k == "softmax":
        x = T(rng.uniform(-4, 4, (w["r"], w["c"])).astype(np.float32))
        def f():
            e = (x - x.max(axis=1, keepdim=True)).exp2()
            return (e / e.sum(axis=1, keepdim=True)).realize()
        return f
    if k == "conv":
        c, o, kw, l = w["c"], w["o"], w["k"], w["l"]
        x = T(rng.uniform(-1, 1, (c, l)).astype(np.float32))
        wt = T(rng.uniform(-1, 1, (o, c, kw)).astype(np.float32))
        def f():
            xv = x.reshape(1, c, l // kw, kw)
            return (xv * wt.reshape(o, c, 1, kw)).sum(axis=(1, 3)).realize()
        return f
    raise ValueError(k)


results = {}
for w in req["workloads"]:
    r = {}
    errors = {}
    if np is not None:
        try:
            r["numpy"] = work(w) / best(numpy_fn(w), rounds) / 1e9
        except Exception as e:  # a figure we cannot make is absent, and says why
            errors["numpy"] = why(e)
    if Tensor is not None:
        try:
            f = tinygrad_fn(w)
            t = time.perf_counter()
            f()
            r["tinygrad_first_ms"] = (time.perf_counter() - t) * 1e3
            r["tinygrad"] = work(w) / best(f, rounds) / 1e9
        except Exception as e:
            errors["tinygrad"] = why(e)
    if errors:
        r["errors"] = errors
    results[w["name"]] = r

json.dump({"numpy": np is not None, "tinygrad": Tensor is not None,
           "unavailable": unavailable, "results": results}, sys.stdout)
