"""corpus/allreduce: ALLREDUCE across 2, 3, 4 and 8 CPU devices, and sharding round trips
(MSTACK / UNSHARD / MSELECT / COPY broadcast).

Expected values: a left fold over the components in device order ((c0 op c1) op c2)... through
numerics.alu. The data is exact by construction (small integers, dyadic floats, products that stay
exact) so every reduction order gives the same bits; MIN is built as the front end does:
NEG(ALLREDUCE(MAX, NEG(x))) for floats and XOR(ALLREDUCE(MAX, XOR(x, -1)), -1) for ints.
"""

from fractions import Fraction as Q

import numerics as N
from builder import G, devs
from tensor import T, concat, splitmix64


def fold(op, dt, comps):
    out = []
    for xs in zip(*comps):
        acc = xs[0]
        for x in xs[1:]:
            acc = N.alu(op, dt, acc, x)
        out.append(acc)
    return out


def allreduce_case(C, name, op, dt, ndev, comps, desc, prng=None, tags=(), ring=False):
    """comps: per-device lists of Python values (or raw values when prng is given)."""
    g = G(desc, ["allreduce", "multi", op.lower(), dt] + list(tags))
    ds = devs(ndev)
    n = len(comps[0])
    raws = [[N.raw(dt, v) for v in c] for c in comps]
    if prng is not None:
        x = g.buffer(dt, n, device=ds, init={"per_device": [{"prng": p} for p in prng]})
    else:
        x = g.buffer(dt, n, device=ds, data=raws)
    if op in ("ADD", "MUL", "MAX"):
        node = g.op("ALLREDUCE", dt, x, arg=[op, ds])
        res = fold(op, dt, raws)
    elif op == "MIN" and N.is_float(dt):
        inner = g.op("ALLREDUCE", dt, g.op("NEG", dt, x), arg=["MAX", ds])
        node = g.op("NEG", dt, inner)
        negs = [[N.alu("NEG", dt, v) for v in c] for c in raws]
        res = [N.alu("NEG", dt, v) for v in fold("MAX", dt, negs)]
    elif op == "MIN":
        ones = -1 if N.is_signed(dt) else N.int_range(dt)[1]
        c = g.const(dt, ones)
        inner = g.op("ALLREDUCE", dt, g.op("XOR", dt, x, c), arg=["MAX", ds])
        node = g.op("XOR", dt, inner, c)
        nots = [[N.alu("XOR", dt, v, ones) for v in comp] for comp in raws]
        res = [N.alu("XOR", dt, v, ones) for v in fold("MAX", dt, nots)]
        # the bitwise-not form really is the minimum
        assert res == [min(col) for col in zip(*raws)]
    else:
        raise AssertionError(op)
    g.output("reduced", node, [n], [res] * ndev)
    if ring:
        # Ring: reduce-scatter then all-gather, 2N(N-1) copies over exactly the N pairs
        # (device i+1 <- device i) of the ring (tinygrad's test_schedule_ring invariants).
        pairs = [[f"CPU:{(i + 1) % ndev}", f"CPU:{i}"] for i in range(ndev)]
        g.sched(copies=2 * ndev * (ndev - 1), copy_pairs=sorted(pairs), allreduce="ring")
    else:
        g.sched(copies=ndev * (ndev - 1))
    C.add("allreduce", name, g)


def ints(seed, n, lo, hi):
    return splitmix64(seed, n, lo, hi)


def gen(C):
    gen_ring(C)
    naive = "naive schedule: N*(N-1) copies"
    # ADD
    allreduce_case(C, "add_float32_2dev", "ADD", "float32", 2, [[1, Q(1, 2), -3, 1024], [2, Q(1, 4), 3, -1]],
                   f"ALLREDUCE ADD float32 over CPU:0,CPU:1 (4 elements each): c0+c1 on every device; dyadic data, exact; {naive}")
    allreduce_case(C, "add_float32_3dev_uneven", "ADD", "float32", 3,
                   [[i, -i, Q(i, 8), 100, 0, 7, Q(1, 2)] for i in (1, 2, 3)],
                   f"ALLREDUCE ADD float32 over 3 devices x 7 elements (7 does not split into 3 chunks); small dyadics, exact in any order; {naive}", tags=["uneven"])
    seeds = [101, 202, 303, 404]
    comps = [ints(s, 400, -1000, 1000) for s in seeds]
    allreduce_case(C, "add_float32_4dev_400", "ADD", "float32", 4, comps,
                   f"ALLREDUCE ADD float32 over 4 devices x 400 elements (ring would split 112/96/96/96); prng integers in [-1000,1000] (SplitMix64 per docs/case-format.md), sums exact; {naive}",
                   prng=[{"seed": s, "lo": -1000, "hi": 1000} for s in seeds], tags=["prng"])
    allreduce_case(C, "add_float32_8dev_1", "ADD", "float32", 8, [[i + 1] for i in range(8)],
                   f"ALLREDUCE ADD float32 over 8 devices x 1 element: 1+2+...+8 = 36 everywhere; {naive}", tags=["uneven"])
    allreduce_case(C, "add_int32_2dev", "ADD", "int32", 2, [[1, 2147483647, -5, 0], [2, 1, -7, -2147483648]],
                   f"ALLREDUCE ADD int32 over 2 devices with wrap-around (INT_MAX+1 = INT_MIN); exact ints mod 2^32; {naive}", tags=["wrap"])
    allreduce_case(C, "add_int32_3dev_uneven", "ADD", "int32", 3, [[i * 10 + j for j in range(7)] for i in range(3)],
                   f"ALLREDUCE ADD int32 over 3 devices x 7 elements; {naive}", tags=["uneven"])
    seeds = [11, 22, 33, 44]
    comps = [ints(s, 400, -2147483648, 2147483647) for s in seeds]
    allreduce_case(C, "add_int32_4dev_400", "ADD", "int32", 4, comps,
                   f"ALLREDUCE ADD int32 over 4 devices x 400 full-range prng elements (SplitMix64), wrapping sums (order-independent mod 2^32); {naive}",
                   prng=[{"seed": s, "lo": -2147483648, "hi": 2147483647} for s in seeds], tags=["prng", "wrap"])
    allreduce_case(C, "add_int32_8dev_1", "ADD", "int32", 8, [[(-1) ** i * (i + 1)] for i in range(8)],
                   f"ALLREDUCE ADD int32 over 8 devices x 1 element: 1-2+3-4+5-6+7-8 = -4; {naive}", tags=["uneven"])
    allreduce_case(C, "add_float16_4dev", "ADD", "float16", 4, [[1, Q(1, 4), 512, -3, 0], [2, Q(1, 4), 512, 3, 1], [4, Q(1, 4), 512, -3, 2], [8, Q(1, 4), 512, 3, 3]],
                   f"ALLREDUCE ADD float16 over 4 devices (no upcast): sums small enough to be exact in half (2048 is exact); {naive}")
    allreduce_case(C, "add_uint8_3dev_wrap", "ADD", "uint8", 3, [[200, 255, 1], [100, 255, 2], [50, 255, 3]],
                   f"ALLREDUCE ADD uint8 over 3 devices wraps mod 256: 200+100+50 = 94, 255*3 = 253; {naive}", tags=["wrap"])
    # MUL
    allreduce_case(C, "mul_float32_3dev", "MUL", "float32", 3, [[2, -1, Q(1, 2), 3], [Q(1, 2), -1, Q(1, 2), 5], [8, -1, 4, 7]],
                   f"ALLREDUCE MUL float32 over 3 devices; products of powers of two and small odd numbers, exact; {naive}")
    allreduce_case(C, "mul_int32_4dev", "MUL", "int32", 4, [[2, 65536, -1, 3], [3, 65536, -1, 5], [5, 1, -1, 7], [7, 3, -1, 11]],
                   f"ALLREDUCE MUL int32 over 4 devices (65536*65536 wraps to 0); exact ints mod 2^32; {naive}", tags=["wrap"])
    allreduce_case(C, "mul_float32_8dev", "MUL", "float32", 8, [[2 if i % 2 else Q(1, 2), -1, Q(3, 2) if i < 3 else 1] for i in range(8)],
                   f"ALLREDUCE MUL float32 over 8 devices: alternating 2 and 0.5 multiply to 1, (-1)^8 = 1, 1.5^3 = 3.375; exact; {naive}")
    # MAX
    allreduce_case(C, "max_float32_4dev", "MAX", "float32", 4, [[1, -5, "-inf", 3], [2, -7, -1, 3], [Q(1, 2), -6, -2, "inf"], [0, -8, -3, 3]],
                   f"ALLREDUCE MAX float32 over 4 devices (no NaN, no mixed-sign zeros, so order cannot matter); {naive}")
    allreduce_case(C, "max_int32_3dev_uneven", "MAX", "int32", 3, [[-2147483648, 5, -1, 7, 0, 3, 2], [-2147483647, 4, -2, 7, 0, 9, 1], [-2147483648, 6, -3, -7, 0, 1, 0]],
                   f"ALLREDUCE MAX int32 over 3 devices x 7 elements; {naive}", tags=["uneven"])
    allreduce_case(C, "max_uint8_2dev", "MAX", "uint8", 2, [[0, 255, 128], [1, 254, 127]],
                   f"ALLREDUCE MAX uint8 (unsigned order) over 2 devices; {naive}")
    # MIN (front-end forms)
    allreduce_case(C, "min_float32_4dev", "MIN", "float32", 4, [[1, -5, "inf", 3], [2, -7, -1, 3], [Q(1, 2), -6, -2, "-inf"], [0, -8, -3, 3]],
                   f"min across 4 devices as the front end builds it for floats: NEG(ALLREDUCE(MAX, NEG(x))); {naive}", tags=["min"])
    allreduce_case(C, "min_int32_3dev", "MIN", "int32", 3, [[5, -2147483648, 2147483647, 0], [3, 0, 2147483646, -1], [4, 7, 2147483647, 1]],
                   f"min across 3 devices as the front end builds it for ints: XOR(ALLREDUCE(MAX, XOR(x,-1)), -1) (bitwise not); {naive}", tags=["min"])
    allreduce_case(C, "min_uint8_8dev", "MIN", "uint8", 8, [[i * 30 + 5, 255 - i] for i in range(8)],
                   f"min across 8 devices for uint8: XOR with 255 (bitwise not), ALLREDUCE MAX, XOR 255; {naive}", tags=["min"])

    # sharded reduce: local REDUCE then ALLREDUCE (what multi_pm does for a reduce over the sharded axis)
    for op in ("ADD", "MAX", "MUL"):
        g = G(f"arange(16).reshape(4,4) sharded on axis 0 over CPU:0..3, reduced over axis 0 as multi_pm lowers it: per-device REDUCE {op} 1 of its [1,4] row, "
              f"then ALLREDUCE {op}; then MSELECT(2) takes device 2's copy; left folds in Python", ["allreduce", "multi", "shard", op.lower()])
        ds = devs(4)
        rows = [[r * 4 + c for c in range(4)] for r in range(4)]
        if op == "MUL":
            rows = [[(r + c) % 3 + 1 for c in range(4)] for r in range(4)]
        x = g.buffer("int32", 4, device=ds, data=rows)
        local = g.reduce(g.reshape(x, [1, 4]), op, 1)
        red = g.op("ALLREDUCE", "int32", local, arg=[op, ds])
        res = fold(op, "int32", rows)
        g.output("reduced", red, [4], [res] * 4)
        sel = g.op("MSELECT", "int32", red, arg=2)
        g.output("device2", sel, [4], res)
        g.sched(copies=12)
        C.add("allreduce", f"shard_reduce_{op.lower()}_4dev", g)

    # MSTACK -> UNSHARD -> COPY gathers the concatenation
    g = G("MSTACK of two single-device float32 buffers (CPU:0, CPU:1), UNSHARD axis 0, COPY to CPU:0 gathers the concatenation in device order",
          ["multi", "shard", "gather"])
    a = g.buffer("float32", 3, device="CPU:0", data=[N.raw("float32", v) for v in [1, 2, 3]])
    b = g.buffer("float32", 3, device="CPU:1", data=[N.raw("float32", v) for v in [4, "-0.0", "inf"]])
    ms = g.op("MSTACK", "float32", a, b)
    un = g.op("UNSHARD", "float32", ms, arg=[0])
    cp = g.copy(un, "CPU:0")
    g.output("gathered", cp, [6], [N.raw("float32", v) for v in [1, 2, 3, 4, "-0.0", "inf"]])
    C.add("allreduce", "mstack_unshard_gather_2dev", g)

    g = G("three [2,2] int32 shards (RESHAPE of per-device buffers) stacked with MSTACK, UNSHARD axis 1, COPY to CPU:1: a [2,6] concatenation along axis 1",
          ["multi", "shard", "gather"])
    shards = []
    ts = []
    for i in range(3):
        vals = [i * 10 + k for k in range(4)]
        bi = g.buffer("int32", 4, device=f"CPU:{i}", data=vals)
        shards.append(g.reshape(bi, [2, 2]))
        ts.append(T([2, 2], vals, "int32"))
    ms = g.op("MSTACK", "int32", *shards)
    un = g.op("UNSHARD", "int32", ms, arg=[1])
    cp = g.copy(un, "CPU:1")
    cat = concat(ts, 1)
    g.output("gathered", cp, cat.shape, cat.data)
    C.add("allreduce", "mstack_unshard_axis1_3dev", g)

    g = G("MSELECT(i) of a multi-device BUFFER on CPU:0..2 is component i (on device i); the whole multi value is also an output (one list per device)",
          ["multi", "mselect"])
    ds = devs(3)
    comps = [[i * 100 + k for k in range(3)] for i in range(3)]
    x = g.buffer("int16", 3, device=ds, data=comps)
    g.output("all", x, [3], comps)
    for i in range(3):
        g.output(f"dev{i}", g.op("MSELECT", "int16", x, arg=i), [3], comps[i])
    C.add("allreduce", "mselect_components_3dev", g)

    g = G("COPY of a single-device uint8 buffer to the tuple (CPU:0, CPU:1, CPU:2) broadcasts it: every device gets the same values; then ADD 1 runs per device",
          ["multi", "broadcast"])
    ds = devs(3)
    vals = [0, 7, 255]
    x = g.buffer("uint8", 3, device="CPU:1", data=vals)
    bc = g.copy(x, ds)
    g.output("broadcast", bc, [3], [vals] * 3)
    plus = g.op("ADD", "uint8", bc, g.const("uint8", 1))
    g.output("plus1", plus, [3], [[N.alu("ADD", "uint8", v, 1) for v in vals]] * 3)
    C.add("allreduce", "copy_broadcast_3dev", g)

    g = G("a multi-device value (MSTACK of per-device buffers) plus a broadcast COPY: ALU ops run per component; MSELECT each result",
          ["multi", "elementwise"])
    ds = devs(2)
    parts = [g.buffer("float32", 2, device=d, data=[N.raw("float32", v) for v in vals]) for d, vals in zip(ds, [[1, 2], [3, 4]])]
    ms = g.op("MSTACK", "float32", *parts)
    y = g.buffer("float32", 2, device="CPU:0", data=[N.raw("float32", v) for v in [Q(1, 2), 10]])
    s = g.op("ADD", "float32", ms, g.copy(y, ds))
    exp = [[N.raw("float32", v) for v in r] for r in [[Q(3, 2), 12], [Q(7, 2), 14]]]
    g.output("sum", s, [2], exp)
    g.output("sum_dev1", g.op("MSELECT", "float32", s, arg=1), [2], exp[1])
    C.add("allreduce", "mstack_plus_broadcast_2dev", g)


def gen_ring(C):
    """Forced ring allreduce: exact-by-construction data (small integers, dyadic values), so the
    ring's per-chunk fold orders give the same bits as the oracle's device-order fold."""
    ring = "ring schedule (forced): 2N(N-1) copies over exactly the N ring pairs"
    for ndev, n in ((2, 64), (3, 7), (4, 400), (8, 256)):
        comps = [ints(900 + 7 * d + ndev, n, -64, 64) for d in range(ndev)]
        allreduce_case(C, f"ring_add_int32_{ndev}dev_{n}", "ADD", "int32", ndev, comps,
                       f"ALLREDUCE ADD int32 over {ndev} devices x {n} prng elements in [-64,64] (SplitMix64), {ring}; "
                       f"integer sums are exact in any order", tags=["ring"], ring=True,
                       prng=[{"seed": 900 + 7 * d + ndev, "lo": -64, "hi": 64} for d in range(ndev)])
    # Not forced: above 256,000 elements per device and with more than 2 devices, the default (auto) mode is the
    # ring (tinygrad 0.14's default: RING_ALLREDUCE_THRESHOLD 256_000, more than 2 devices). The output is the
    # sum of the reduced tensor on each device, so the case stays small; int32 sums are exact in any order.
    ndev, n = 3, 256_032
    seeds = [9101 + d for d in range(ndev)]
    ds = devs(ndev)
    g = G(f"ALLREDUCE ADD int32 over 3 devices x {n} prng elements in [-1000,1000] (SplitMix64) in the auto mode: "
          f"more than 256,000 elements per device and more than 2 devices, so the ring (12 copies over the 3 ring "
          f"pairs); then each device sums its reduced tensor (exact integers)", ["allreduce", "multi", "add", "int32", "ring"])
    x = g.buffer("int32", n, device=ds, init={"per_device": [{"prng": {"seed": sd, "lo": -1000, "hi": 1000}} for sd in seeds]})
    red = g.op("ALLREDUCE", "int32", x, arg=["ADD", ds])
    total = sum(sum(ints(sd, n, -1000, 1000)) for sd in seeds)
    assert -2**31 <= total < 2**31
    g.output("sum_of_reduced", g.reduce(red, "ADD", 1), [], [[N.raw("int32", total)] for _ in ds])
    pairs = [[f"CPU:{(i + 1) % ndev}", f"CPU:{i}"] for i in range(ndev)]
    g.sched(copies=2 * ndev * (ndev - 1), copy_pairs=sorted(pairs), allreduce="auto")
    C.add("allreduce", "auto_ring_add_int32_3dev_256032", g)
    comps = [[Q(i % 16, 4) * (1 if (i + d) % 3 else -1) for i in range(400)] for d in range(4)]
    allreduce_case(C, "ring_add_float32_4dev_400", "ADD", "float32", 4, comps,
                   f"ALLREDUCE ADD float32 over 4 devices x 400 quarter-integers in [-3.75, 3.75]: every partial sum is a small "
                   f"dyadic, exact in float32 whatever the order; {ring} (chunks 112/96/96/96)", tags=["ring"], ring=True)
    # Fewer elements than devices: 2 elements on 4 devices make the chunks [2, 0, 0, 0] (factor 2, one unit), and
    # an empty chunk has nothing to move, so only chunk 0 travels: 3 reduce-scatter and 3 all-gather hops, still
    # over the ring pairs (all four of them: 1<-0, 2<-1, 3<-2 reducing, then 0<-3, 1<-0, 2<-1 gathering).
    ndev, n = 4, 2
    comps = [[10 ** d, 2 * 10 ** d] for d in range(ndev)]
    g = G("ALLREDUCE ADD int32 over 4 devices x 2 elements ([1,2], [10,20], [100,200], [1000,2000]) forced to the "
          "ring: the chunks are [2, 0, 0, 0], so only the first travels, 3 reduce-scatter and 3 all-gather copies over "
          "the 4 ring pairs; every device gets [1111, 2222] (exact integers)", ["allreduce", "multi", "add", "int32", "ring", "uneven"])
    ds = devs(ndev)
    x = g.buffer("int32", n, device=ds, data=comps)
    res = fold("ADD", "int32", [[N.raw("int32", v) for v in c] for c in comps])
    assert res == [1111, 2222]
    g.output("reduced", g.op("ALLREDUCE", "int32", x, arg=["ADD", ds]), [n], [res] * ndev)
    pairs = [[f"CPU:{(i + 1) % ndev}", f"CPU:{i}"] for i in range(ndev)]
    g.sched(copies=2 * (ndev - 1), copy_pairs=sorted(pairs), allreduce="ring")
    C.add("allreduce", "ring_add_int32_4dev_2", g)
    comps = [[(i * (d + 3)) % 11 - 5 for i in range(7)] for d in range(3)]
    allreduce_case(C, "ring_max_int32_3dev_7", "MAX", "int32", 3, comps,
                   f"ALLREDUCE MAX int32 over 3 devices x 7 elements (7 splits unevenly into 3 ring chunks); {ring}", tags=["ring", "uneven"], ring=True)
