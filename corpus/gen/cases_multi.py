"""corpus/multi: multi-device scheduling beyond ALLREDUCE itself: stores into sharded (multi-device)
buffers, broadcast COPYs from inside and outside the tuple, gathers to a member device, an
ALLREDUCE of a non-contiguous view, a sharded reduction gathered to one device.

Expected values: per device, index by index, through numerics.alu and tensor.T (left folds in
device order for ALLREDUCE). Schedule expectations pin the COPY steps: a broadcast or gather never
copies from a device to itself (the component already there is used in place), so it makes one COPY
per *other* device.
"""

import numerics as N
from builder import G, devs
from tensor import T, concat


def fold(op, dt, comps):
    out = []
    for xs in zip(*comps):
        acc = xs[0]
        for x in xs[1:]:
            acc = N.alu(op, dt, acc, x)
        out.append(acc)
    return out


def gen(C):
    # -- STORE into a multi-device buffer: one store per device ---------------------------------
    g = G("x (int32 on CPU:0..2) assigned 2*x+1 per device; AFTER reads the new contents, an MSELECT(1) of the "
          "BUFFER node reads the initial contents (it is ordered before the store); per-device values in Python",
          ["multi", "store"])
    ds = devs(3)
    comps = [[d * 10 + k - 3 for k in range(4)] for d in range(3)]
    x = g.buffer("int32", 4, device=ds, data=comps)
    v = g.op("ADD", "int32", g.op("MUL", "int32", x, g.const("int32", 2)), g.const("int32", 1))
    a = g.after(x, g.store(x, v))
    new = [[N.alu("ADD", "int32", N.alu("MUL", "int32", e, 2), 1) for e in c] for c in comps]
    g.output("assigned", a, [4], new)
    g.output("before_dev1", g.op("MSELECT", "int32", x, arg=1), [4], comps[1])
    g.sched(copies=0, writes=[x])
    C.add("multi", "store_sharded_3dev", g)

    g = G("x (float32 on CPU:0,CPU:1) assigned ALLREDUCE(ADD, x), then 0.5 stored into the window [1:3] of every "
          "component; both versions are outputs; dyadic data, exact sums; naive allreduce: 2 copies",
          ["multi", "store", "allreduce"])
    ds = devs(2)
    comps = [[N.raw("float32", q) for q in (1, 2, -3, 0.25, 8, 100)], [N.raw("float32", q) for q in (0.5, -2, 3, 0.25, -8, 1)]]
    x = g.buffer("float32", 6, device=ds, data=comps)
    ar = g.op("ALLREDUCE", "float32", x, arg=["ADD", ds])
    a1 = g.after(x, g.store(x, ar))
    win = g.shrink(a1, [1], [2])
    a2 = g.after(x, g.store(win, g.expand(g.const("float32", N.raw("float32", 0.5)), [2])))
    s = fold("ADD", "float32", comps)
    half = N.raw("float32", 0.5)
    g.output("summed", a1, [6], [s, s])
    g.output("windowed", a2, [6], [s[:1] + [half, half] + s[3:]] * 2)
    g.sched(copies=2, writes=[x])
    C.add("multi", "store_allreduce_then_window_2dev", g)

    # -- broadcast COPY -------------------------------------------------------------------------
    g = G("COPY of an int16 buffer on CPU:1 to (CPU:0, CPU:1, CPU:2): 2 COPY steps (CPU:1's component is the source "
          "itself, never a copy to itself); then MUL 3 per device",
          ["multi", "broadcast"])
    ds = devs(3)
    vals = [1, -2, 300, -32768]
    x = g.buffer("int16", 4, device="CPU:1", data=vals)
    bc = g.copy(x, ds)
    m = g.op("MUL", "int16", bc, g.const("int16", 3))
    g.output("tripled", m, [4], [[N.alu("MUL", "int16", e, 3) for e in vals]] * 3)
    g.sched(copies=2, copy_pairs=[["CPU:0", "CPU:1"], ["CPU:2", "CPU:1"]])
    C.add("multi", "broadcast_from_member_3dev", g)

    g = G("COPY of a uint8 buffer on CPU:3 to (CPU:0, CPU:1): one COPY per device of the tuple; the components are "
          "also selected back with MSELECT",
          ["multi", "broadcast"])
    ds = devs(2)
    vals = [0, 1, 128, 255]
    x = g.buffer("uint8", 4, device="CPU:3", data=vals)
    bc = g.copy(x, ds)
    g.output("broadcast", bc, [4], [vals, vals])
    g.output("dev1", g.op("MSELECT", "uint8", bc, arg=1), [4], vals)
    g.sched(copies=2, copy_pairs=[["CPU:0", "CPU:3"], ["CPU:1", "CPU:3"]])
    C.add("multi", "broadcast_from_outside_2dev", g)

    # -- gather -----------------------------------------------------------------------------------
    g = G("three [2,2] float32 shards on CPU:0..2 stacked with MSTACK, UNSHARD axis 0, COPY to CPU:2 (a member): "
          "only the two other shards are copied; a [6,2] concatenation along axis 0",
          ["multi", "shard", "gather"])
    shards, ts = [], []
    for i in range(3):
        vals = [N.raw("float32", i * 10 + k + 0.5) for k in range(4)]
        b = g.buffer("float32", 4, device=f"CPU:{i}", data=vals)
        shards.append(g.reshape(b, [2, 2]))
        ts.append(T([2, 2], vals, "float32"))
    un = g.op("UNSHARD", "float32", g.op("MSTACK", "float32", *shards), arg=[0])
    cp = g.copy(un, "CPU:2")
    cat = concat(ts, 0)
    g.output("gathered", cp, cat.shape, cat.data)
    g.sched(copies=2, copy_pairs=[["CPU:2", "CPU:0"], ["CPU:2", "CPU:1"]])
    C.add("multi", "gather_to_member_3dev", g)

    g = G("x = arange(8).reshape(2,4) int32 sharded on axis 1 over CPU:0,CPU:1 (each a [2,2] block); a local REDUCE "
          "ADD over axis 0 (no allreduce: the reduced axis is not the sharded one), UNSHARD axis 0 of the [2] sums, "
          "COPY to CPU:0: the column sums [4,6,8,10]",
          ["multi", "shard", "gather", "reduce"])
    ds = devs(2)
    full = T([2, 4], list(range(8)), "int32")
    blocks = [full.shrink([0, 2 * d], [2, 2]) for d in range(2)]
    x = g.buffer("int32", 4, device=ds, data=[b.data for b in blocks])
    local = g.reduce(g.reshape(x, [2, 2]), "ADD", 1)
    cp = g.copy(g.op("UNSHARD", "int32", local, arg=[0]), "CPU:0")
    want = concat([b.reduce("ADD", 1) for b in blocks], 0)
    assert want.data == full.reduce("ADD", 1).data
    g.output("column_sums", cp, want.shape, want.data)
    g.sched(copies=1, copy_pairs=[["CPU:0", "CPU:1"]])
    C.add("multi", "shard_axis1_sum_gather_2dev", g)

    # -- ALLREDUCE of a view ---------------------------------------------------------------------
    g = G("ALLREDUCE MAX of PERMUTE(RESHAPE(x,[2,3]),[1,0]) over CPU:0..2 (int32): the transposed view is "
          "realized on each device before it is copied; left fold in device order; naive: 6 copies",
          ["multi", "allreduce", "movement", "max"])
    ds = devs(3)
    comps = [[(d * 7 + k * 5) % 11 - 5 for k in range(6)] for d in range(3)]
    x = g.buffer("int32", 6, device=ds, data=comps)
    p = g.permute(g.reshape(x, [2, 3]), [1, 0])
    ar = g.op("ALLREDUCE", "int32", p, arg=["MAX", ds])
    views = [T([6], c, "int32").reshape([2, 3]).permute([1, 0]).data for c in comps]
    g.output("reduced", ar, [3, 2], [fold("MAX", "int32", views)] * 3)
    g.sched(copies=6)
    C.add("multi", "allreduce_of_permuted_view_3dev", g)
