"""corpus/seeds: the storage behaviours of the two seed commits, one behaviour per case.

Seed 000 "cleanup COPY: it's an anonymous store" (TestCrossDeviceAssign's four cases on both
device pairs, a bare COPY used later). Seed 002 "simpler callify" (clone persists, contiguous is a
value, creation copies have storage, detach shares storage, assign to a computed value gets fresh
storage, WAR ordering, chained and view assigns).

Expected values are hand-derived: each case mirrors a seed test's assertion (values written out
in Python lists); where arithmetic is involved it is on small exact integers/dyadics.
"""

import numerics as N
from builder import G

PAIRS = [("CPU:1", "CPU:0"), ("CPU:0", "CPU:1")]  # (dst, src)


def f32(vals):
    return [N.raw("float32", v) for v in vals]


def tag(d):
    return d.replace(":", "")


def gen(C):
    grp = "seeds"
    for dst, src in PAIRS:
        sfx = f"{tag(src)}_to_{tag(dst)}"

        # test_cross_device_assign: zeros(4,4) on dst, assign full((4,4), 3.0) realized on src
        g = G(f"seed 000 test_cross_device_assign: dst = zeros(4,4) (16-element buffer) on {dst}, STORE(dst, src) with src = full 3.0 realized on {src}; "
              "AFTER(dst, STORE) viewed as [4,4] holds 3.0 everywhere and stays on dst's device; hand-derived", ["seed", "cross_device", "assign"])
        d = g.buffer("float32", 16, device=dst, init={"fill": "0.0"})
        s = g.buffer("float32", 16, device=src, init={"fill": "3.0"})
        st = g.store(d, s)
        out = g.reshape(g.after(d, st), [4, 4])
        g.output("dst", out, [4, 4], f32([3] * 16))
        g.sched(copies=1, no_kernel=True, writes=[d], copy_pairs=[[dst, src]])
        C.add(grp, f"cross_device_assign_{sfx}", g)

        # test_cross_device_assign_is_copy: a whole realized buffer -> exactly one COPY, no kernel
        g = G(f"seed 000 test_cross_device_assign_is_copy: STORE(dst_buf on {dst}, src_buf on {src}) of a whole realized buffer [0,1,2,3,4] "
              "is one COPY into dst's own buffer and no kernel; AFTER(dst, STORE) = [0,1,2,3,4]; hand-derived", ["seed", "cross_device", "assign", "schedule"])
        d = g.buffer("float32", 5, device=dst, init={"fill": "0.0"})
        s = g.buffer("float32", 5, device=src, data=f32([0, 1, 2, 3, 4]))
        st = g.store(d, s)
        g.output("dst", g.after(d, st), [5], f32([0, 1, 2, 3, 4]))
        g.sched(copies=1, no_kernel=True, writes=[d], copy_pairs=[[dst, src]])
        C.add(grp, f"cross_device_assign_is_copy_{sfx}", g)

        # test_cross_device_assign_unrealized: ones(8)*2 computed on src, assigned into dst
        g = G(f"seed 000 test_cross_device_assign_unrealized: STORE(dst on {dst}, ones(8)*2 computed on {src}); the source is materialized on "
              "its own device (one kernel) then copied (one COPY); dst = [2.0]*8; hand-derived", ["seed", "cross_device", "assign", "schedule"])
        d = g.buffer("float32", 8, device=dst, init={"fill": "0.0"})
        s = g.buffer("float32", 8, device=src, init={"fill": "1.0"})
        val = g.op("MUL", "float32", s, g.const("float32", N.raw("float32", 2)))
        st = g.store(d, val)
        g.output("dst", g.after(d, st), [8], f32([2] * 8))
        g.sched(copies=1, kernels=1, copy_pairs=[[dst, src]])
        C.add(grp, f"cross_device_assign_unrealized_{sfx}", g)

        # test_cross_device_assign_view: a[2:6].assign(src [0,1,2,3])
        g = G(f"seed 000 test_cross_device_assign_view: dst = zeros(8) on {dst}, STORE(SHRINK(dst,(2,4)), [0,1,2,3] on {src}) "
              "writes only the window: [0,0,0,1,2,3,0,0]; hand-derived", ["seed", "cross_device", "assign", "view"])
        d = g.buffer("float32", 8, device=dst, init={"fill": "0.0"})
        s = g.buffer("float32", 4, device=src, data=f32([0, 1, 2, 3]))
        st = g.store(g.shrink(d, [2], [4]), s)
        g.output("dst", g.after(d, st), [8], f32([0, 0, 0, 1, 2, 3, 0, 0]))
        g.sched(copies=1, copy_pairs=[[dst, src]])
        C.add(grp, f"cross_device_assign_view_{sfx}", g)

        # a bare COPY used later: one COPY into an anonymous buffer on the target, then a kernel there
        g = G(f"seed 000 bare COPY: x = COPY(buf on {src}, {dst}) used later by ADD(x, 1) on {dst} (an anonymous store on the target device); "
              "values x = [1,2,3], x+1 = [2,3,4]; hand-derived", ["seed", "copy"])
        s = g.buffer("int32", 3, device=src, data=[1, 2, 3])
        x = g.copy(s, dst)
        y = g.op("ADD", "int32", x, g.const("int32", 1))
        g.output("copied", x, [3], [1, 2, 3])
        g.output("plus1", y, [3], [2, 3, 4])
        g.sched(copies=1, kernels=1, copy_pairs=[[dst, src]])
        C.add(grp, f"bare_copy_used_later_{sfx}", g)

    # ---- seed 002: clone / contiguous / detach / assign storage ------------------------------
    g = G("seed 002 test_intermediate_clone_persists: x = clone(t+1) is AFTER(newbuf, STORE(newbuf, t+1)); y = x*2; x = [2,3,4], y = [4,6,8]; hand-derived",
          ["seed", "clone"])
    t = g.buffer("int32", 3, data=[1, 2, 3])
    nb = g.buffer("int32", 3)
    x = g.after(nb, g.store(nb, g.op("ADD", "int32", t, g.const("int32", 1))))
    y = g.op("MUL", "int32", x, g.const("int32", 2))
    g.output("x", x, [3], [2, 3, 4])
    g.output("y", y, [3], [4, 6, 8])
    C.add(grp, "clone_persists", g)

    g = G("seed 002 clone is independent storage: c = AFTER(newbuf, STORE(newbuf, src)); a later assign STORE(src, src*10) does not change the clone; "
          "read after the assign (AFTER(c, assign)) the clone still holds the old [1,2,3], the source holds [10,20,30]; hand-derived", ["seed", "clone", "war"])
    src = g.buffer("int32", 3, data=[1, 2, 3])
    nb = g.buffer("int32", 3)
    s1 = g.store(nb, src)
    c = g.after(nb, s1)
    s2 = g.store(src, g.op("MUL", "int32", src, g.const("int32", 10)))
    g.output("clone_after_assign", g.after(c, s2), [3], [1, 2, 3])
    g.output("source_after_assign", g.after(src, s2), [3], [10, 20, 30])
    C.add(grp, "clone_survives_source_assign", g)

    g = G("seed 002 clone to another device: AFTER(newbuf on CPU:1, STORE(newbuf, src on CPU:0)) holds src's values on CPU:1 (one COPY); later ADD on CPU:1; hand-derived",
          ["seed", "clone", "cross_device"])
    src = g.buffer("float32", 4, device="CPU:0", data=f32([1, "-0.0", "0.5", "inf"]))
    nb = g.buffer("float32", 4, device="CPU:1")
    c = g.after(nb, g.store(nb, src))
    g.output("clone", c, [4], f32([1, "-0.0", "0.5", "inf"]))
    g.output("clone_plus_1", g.op("ADD", "float32", c, g.const("float32", N.raw("float32", 1))), [4], f32([2, 1, "1.5", "inf"]))
    g.sched(copies=1, copy_pairs=[["CPU:1", "CPU:0"]])
    C.add(grp, "clone_to_other_device", g)

    g = G("seed 002 test_intermediate_contiguous_stays_a_value: x = CONTIGUOUS(t+1), y = x*2 = [4,6,8] and x itself is [2,3,4] (CONTIGUOUS owns no storage, it is the value); hand-derived",
          ["seed", "contiguous"])
    t = g.buffer("int32", 3, data=[1, 2, 3])
    x = g.op("CONTIGUOUS", "int32", g.op("ADD", "int32", t, g.const("int32", 1)))
    g.output("x", x, [3], [2, 3, 4])
    g.output("y", g.op("MUL", "int32", x, g.const("int32", 2)), [3], [4, 6, 8])
    C.add(grp, "contiguous_stays_a_value", g)

    g = G("seed 002 test_creation_copy_has_storage: x = COPY([1,2,3] from CPU:1, CPU:0); y = empty int32 assigned x then assigned 0; "
          "x still reads [1,2,3] after both assigns, y ends [0,0,0]; hand-derived", ["seed", "copy", "assign"])
    p = g.buffer("int32", 3, device="CPU:1", data=[1, 2, 3])
    x = g.copy(p, "CPU:0")
    y = g.buffer("int32", 3, device="CPU:0")
    s1 = g.store(y, x)
    ya = g.after(y, s1)
    s2 = g.store(ya, g.expand(g.const("int32", 0), [3]))
    g.output("x_after", g.after(x, s2), [3], [1, 2, 3])
    g.output("y_first", ya, [3], [1, 2, 3])
    g.output("y_final", g.after(ya, s2), [3], [0, 0, 0])
    C.add(grp, "creation_copy_has_storage", g)

    g = G("seed 002 test_assign_copy_retained_uses: x = COPY([1,2,3]); retained uses x.reshape(1,3) and x+1 are taken before dest = empty.assign(x) "
          "and dest.assign(0); they still read [[1,2,3]] and [2,3,4]; hand-derived", ["seed", "copy", "assign"])
    p = g.buffer("float32", 3, device="CPU:1", data=f32([1, 2, 3]))
    x = g.copy(p, "CPU:0")
    r1 = g.reshape(x, [1, 3])
    r2 = g.op("ADD", "float32", x, g.const("float32", N.raw("float32", 1)))
    dbuf = g.buffer("float32", 3, device="CPU:0")
    s1 = g.store(dbuf, x)
    s2 = g.store(g.after(dbuf, s1), g.expand(g.const("float32", N.raw("float32", 0)), [3]))
    g.output("retained_reshape", g.after(r1, s2), [1, 3], f32([1, 2, 3]))
    g.output("retained_plus1", g.after(r2, s2), [3], f32([2, 3, 4]))
    g.output("dest", g.after(dbuf, s2), [3], f32([0, 0, 0]))
    C.add(grp, "assign_copy_retained_uses", g)

    g = G("seed 002 test_detach_buffer_assignment: STORE(DETACH(buf), DETACH(buf)+1) writes the base: AFTER(buf, STORE) and AFTER(detached, STORE) are both [2,3,4]; hand-derived",
          ["seed", "detach", "assign"])
    b = g.buffer("float32", 3, data=f32([1, 2, 3]))
    d = g.op("DETACH", "float32", b)
    st = g.store(d, g.op("ADD", "float32", d, g.const("float32", N.raw("float32", 1))))
    g.output("base", g.after(b, st), [3], f32([2, 3, 4]))
    g.output("detached", g.after(d, st), [3], f32([2, 3, 4]))
    C.add(grp, "detach_assign_writes_base", g)

    g = G("seed 002 test_setitem_detach_whole: t = zeros(3,3); t.detach()[:] = 5 is STORE(RESHAPE(DETACH(t),(3,3)), EXPAND(5.0)); t reads all 5.0; hand-derived",
          ["seed", "detach", "setitem"])
    b = g.buffer("float32", 9, init={"fill": "0.0"})
    tv = g.reshape(g.op("DETACH", "float32", b), [3, 3])
    st = g.store(tv, g.expand(g.const("float32", N.raw("float32", 5)), [3, 3]))
    g.output("t", g.reshape(g.after(b, st), [3, 3]), [3, 3], f32([5] * 9))
    C.add(grp, "detach_setitem_whole", g)

    g = G("test_setitem detach element: t = zeros(3,3); t.detach()[1,2] = 5 stores through SHRINK((1,1),(2,1)) of the detached view; only element 5 changes; hand-derived",
          ["seed", "detach", "setitem"])
    b = g.buffer("float32", 9, init={"fill": "0.0"})
    tv = g.shrink(g.reshape(g.op("DETACH", "float32", b), [3, 3]), [1, 2], [1, 1])
    st = g.store(tv, g.expand(g.const("float32", N.raw("float32", 5)), [1, 1]))
    g.output("t", g.after(b, st), [9], f32([0, 0, 0, 0, 0, 5, 0, 0, 0]))
    C.add(grp, "detach_setitem_element", g)

    g = G("seed 002 test_clone (assign to a computed value): c = clone(t.permute(1,0)) gets fresh storage (STORE of the permuted value), then "
          "c[:,1:2] = ones(2,1) stores into AFTER(newbuf, first store): [[1,1],[2,1]] for t = [[1,2],[3,4]]; hand-derived", ["seed", "clone", "assign", "view"])
    t = g.buffer("int32", 4, data=[1, 2, 3, 4])
    ones = g.buffer("int32", 2, data=[1, 1])
    nb = g.buffer("int32", 4)
    s1 = g.store(g.reshape(nb, [2, 2]), g.permute(g.reshape(t, [2, 2]), [1, 0]))
    a1 = g.after(nb, s1)
    s2 = g.store(g.shrink(g.reshape(a1, [2, 2]), [0, 1], [2, 1]), g.reshape(ones, [2, 1]))
    g.output("c", g.reshape(g.after(a1, s2), [2, 2]), [2, 2], [1, 1, 2, 1])
    C.add(grp, "assign_view_of_clone", g)

    g = G("seed 002 test_detach_clone: d = DETACH(clone(t.permute(1,0))); d[:,1:2] = ones(2,1) writes the clone's storage: [[1,1],[2,1]]; hand-derived",
          ["seed", "clone", "detach", "assign"])
    t = g.buffer("int32", 4, data=[1, 2, 3, 4])
    ones = g.buffer("int32", 2, data=[1, 1])
    nb = g.buffer("int32", 4)
    s1 = g.store(g.reshape(nb, [2, 2]), g.permute(g.reshape(t, [2, 2]), [1, 0]))
    a1 = g.after(nb, s1)
    dv = g.op("DETACH", "int32", a1)
    s2 = g.store(g.shrink(g.reshape(dv, [2, 2]), [0, 1], [2, 1]), g.reshape(ones, [2, 1]))
    g.output("clone", g.reshape(g.after(a1, s2), [2, 2]), [2, 2], [1, 1, 2, 1])
    C.add(grp, "detach_clone_assign", g)

    g = G("seed 002 assign to a computed value initializes fresh storage: v = t+1 = [2,3,4] is stored into a new buffer, then the assign of [7,7,7] "
          "stores into AFTER(newbuf, first store); the result is the assigned value [7,7,7]; hand-derived", ["seed", "assign"])
    t = g.buffer("int32", 3, data=[1, 2, 3])
    nb = g.buffer("int32", 3)
    a1 = g.after(nb, g.store(nb, g.op("ADD", "int32", t, g.const("int32", 1))))
    s2 = g.store(a1, g.expand(g.const("int32", 7), [3]))
    g.output("assigned", g.after(a1, s2), [3], [7, 7, 7])
    C.add(grp, "assign_to_computed_value", g)

    g = G("seed 002 assign into a view of a computed value: fresh storage holds t+1 = [2,3,4], then STORE(SHRINK(that,(1,2)), [7,7]) gives [2,7,7]; hand-derived",
          ["seed", "assign", "view"])
    t = g.buffer("int32", 3, data=[1, 2, 3])
    nb = g.buffer("int32", 3)
    a1 = g.after(nb, g.store(nb, g.op("ADD", "int32", t, g.const("int32", 1))))
    s2 = g.store(g.shrink(a1, [1], [2]), g.expand(g.const("int32", 7), [2]))
    g.output("assigned", g.after(a1, s2), [3], [2, 7, 7])
    C.add(grp, "assign_to_computed_value_view", g)

    g = G("WAR ordering: r = buf*2 reads the plain BUFFER (captured before the assign) and sees the old [2,4,6,8]; the BUFFER node itself reads [1,2,3,4]; "
          "AFTER(buf, STORE(buf, buf+10)) sees [11,12,13,14]; all three are outputs of one graph; hand-derived", ["seed", "war", "assign"])
    b = g.buffer("int32", 4, data=[1, 2, 3, 4])
    r = g.op("MUL", "int32", b, g.const("int32", 2))
    st = g.store(b, g.op("ADD", "int32", b, g.const("int32", 10)))
    g.output("reader", r, [4], [2, 4, 6, 8])
    g.output("buffer_initial", b, [4], [1, 2, 3, 4])
    g.output("after_assign", g.after(b, st), [4], [11, 12, 13, 14])
    C.add(grp, "war_reader_sees_old_value", g)

    g = G("one expression reads a buffer before AND after an assign: old + new with new = old*2 is [3,6,9,12] "
          "(a compiler must read the old version from a copy taken before the store); then a second assign "
          "reads the first assign's result and the initial contents: (old*2) - old = [1,2,3,4]; hand-derived",
          ["seed", "war", "assign"])
    b = g.buffer("int32", 4, data=[1, 2, 3, 4])
    s1 = g.store(b, g.op("MUL", "int32", b, g.const("int32", 2)))
    new = g.after(b, s1)
    g.output("old_plus_new", g.op("ADD", "int32", b, new), [4], [3, 6, 9, 12])
    s2 = g.store(new, g.op("SUB", "int32", new, b))
    g.output("second_assign", g.after(new, s2), [4], [1, 2, 3, 4])
    C.add(grp, "read_before_and_after_assign", g)

    g = G("chained assign: s1 = STORE(buf, [1,2,3,4]); a1 = AFTER(buf, s1); s2 = STORE(a1, a1+a1); AFTER(a1, s2) = [2,4,6,8] while a1 itself still reads "
          "the contents after s1 only, [1,2,3,4]; hand-derived", ["seed", "assign", "chain"])
    b = g.buffer("int32", 4, init={"fill": 0})
    v = g.buffer("int32", 4, data=[1, 2, 3, 4])
    s1 = g.store(b, v)
    a1 = g.after(b, s1)
    s2 = g.store(a1, g.op("ADD", "int32", a1, a1))
    g.output("after_first", a1, [4], [1, 2, 3, 4])
    g.output("after_second", g.after(a1, s2), [4], [2, 4, 6, 8])
    C.add(grp, "chained_assign", g)

    g = G("assign into a view twice: zeros(8); [0:4] = [1,2,3,4]; then (through AFTER of the first store) [2:6] = [5,6,7,8]; the overlap takes the second "
          "store: [1,2,5,6,7,8,0,0]; hand-derived", ["seed", "assign", "view", "chain"])
    b = g.buffer("int32", 8, init={"fill": 0})
    v1 = g.buffer("int32", 4, data=[1, 2, 3, 4])
    v2 = g.buffer("int32", 4, data=[5, 6, 7, 8])
    s1 = g.store(g.shrink(b, [0], [4]), v1)
    a1 = g.after(b, s1)
    s2 = g.store(g.shrink(a1, [2], [4]), v2)
    g.output("buf", g.after(a1, s2), [8], [1, 2, 5, 6, 7, 8, 0, 0])
    C.add(grp, "assign_view_twice", g)

    g = G("test_assign_slice: X = [1,2,3,4]; X[2:4] = [9,8] through STORE(SHRINK(X,(2,2))) leaves X[0:2] alone: [1,2,9,8]; hand-derived",
          ["seed", "assign", "view"])
    b = g.buffer("int32", 4, data=[1, 2, 3, 4])
    v = g.buffer("int32", 2, data=[9, 8])
    st = g.store(g.shrink(b, [2], [2]), v)
    g.output("X", g.after(b, st), [4], [1, 2, 9, 8])
    C.add(grp, "assign_slice", g)

    g = G("test_setitem_permute: t = zeros(2,3); STORE(PERMUTE(RESHAPE(t,(2,3)),(1,0)), v) with v = [[1,2],[3,4],[5,6]] writes t = [[1,3,5],[2,4,6]]; hand-derived",
          ["seed", "assign", "view", "permute"])
    b = g.buffer("int32", 6, init={"fill": 0})
    v = g.buffer("int32", 6, data=[1, 2, 3, 4, 5, 6])
    st = g.store(g.permute(g.reshape(b, [2, 3]), [1, 0]), g.reshape(v, [3, 2]))
    g.output("t", g.reshape(g.after(b, st), [2, 3]), [2, 3], [1, 3, 5, 2, 4, 6])
    C.add(grp, "assign_through_permute", g)

    g = G("assign through FLIP: STORE(FLIP(buf), [1,2,3,4]) writes the buffer reversed: [4,3,2,1]; hand-derived", ["seed", "assign", "view", "flip"])
    b = g.buffer("int32", 4, init={"fill": 0})
    v = g.buffer("int32", 4, data=[1, 2, 3, 4])
    st = g.store(g.flip(b, [True]), v)
    g.output("buf", g.after(b, st), [4], [4, 3, 2, 1])
    C.add(grp, "assign_through_flip", g)

    g = G("a partly stored, otherwise uninitialized buffer: STORE(SHRINK(buf,(0,2)), [5,6]); reading AFTER(buf, STORE) through SHRINK((0,2)) only touches "
          "written elements, so it is NOT an uninitialized read: [5,6] (and +1: [6,7]); hand-derived", ["seed", "uninit", "view"])
    b = g.buffer("int32", 4)
    v = g.buffer("int32", 2, data=[5, 6])
    a = g.after(b, g.store(g.shrink(b, [0], [2]), v))
    w = g.shrink(a, [0], [2])
    g.output("window", w, [2], [5, 6])
    g.output("window_plus1", g.op("ADD", "int32", w, g.const("int32", 1)), [2], [6, 7])
    C.add(grp, "partial_store_shrink_reads_initialized", g)

    # test_callify shapes through CALL/PARAM
    g = G("test_callify basic: CALL(SINK(STORE(PARAM0, PARAM1+PARAM2)), out, a, b); AFTER(out, CALL) = [5,7,9] for a=[1,2,3], b=[4,5,6]; hand-derived",
          ["seed", "call"])
    a = g.buffer("float32", 3, data=f32([1, 2, 3]))
    bb = g.buffer("float32", 3, data=f32([4, 5, 6]))
    out = g.buffer("float32", 3)
    p0 = g.op("PARAM", "float32", arg={"device": "CPU:0", "size": 3, "slot": 0})
    p1 = g.op("PARAM", "float32", arg={"device": "CPU:0", "size": 3, "slot": 1})
    p2 = g.op("PARAM", "float32", arg={"device": "CPU:0", "size": 3, "slot": 2})
    body = g.op("SINK", "void", g.store(p0, g.op("ADD", "float32", p1, p2)))
    call = g.op("CALL", "void", body, out, a, bb, arg={"name": "add"})
    g.output("out", g.after(out, call), [3], f32([5, 7, 9]))
    C.add(grp, "callify_basic", g)

    g = G("test_callify multi-output: one CALL writes c = a+b and d = a*b into two buffers (a GROUP is not needed: the SINK holds both STOREs); "
          "AFTER(c, CALL) = [5,7,9], AFTER(d, CALL) = [4,10,18]; hand-derived", ["seed", "call"])
    a = g.buffer("float32", 3, data=f32([1, 2, 3]))
    bb = g.buffer("float32", 3, data=f32([4, 5, 6]))
    cb = g.buffer("float32", 3)
    db = g.buffer("float32", 3)
    ps = [g.op("PARAM", "float32", arg={"device": "CPU:0", "size": 3, "slot": i}) for i in range(4)]
    body = g.op("SINK", "void", g.store(ps[0], g.op("ADD", "float32", ps[2], ps[3])), g.store(ps[1], g.op("MUL", "float32", ps[2], ps[3])))
    call = g.op("CALL", "void", body, cb, db, a, bb, arg={"name": "add_mul"})
    g.output("c", g.after(cb, call), [3], f32([5, 7, 9]))
    g.output("d", g.after(db, call), [3], f32([4, 10, 18]))
    C.add(grp, "callify_multi_output", g)

    g = G("test_callify (a+b)*(a-b) as front-end ops (a-b = a + b*-1) written into fresh storage: [-15,-21,-27] for a=[1,2,3], b=[4,5,6]; hand-derived",
          ["seed", "callify"])
    a = g.buffer("float32", 3, data=f32([1, 2, 3]))
    bb = g.buffer("float32", 3, data=f32([4, 5, 6]))
    out = g.buffer("float32", 3)
    neg1 = g.const("float32", N.raw("float32", -1))
    val = g.op("MUL", "float32", g.op("ADD", "float32", a, bb), g.op("ADD", "float32", a, g.op("MUL", "float32", bb, neg1)))
    g.output("out", g.after(out, g.store(out, val)), [3], f32([-15, -21, -27]))
    C.add(grp, "callify_sum_times_difference", g)

    g = G("GROUP merges effects: two STOREs into two buffers grouped, AFTER(each, GROUP) holds its value; hand-derived", ["seed", "group"])
    x = g.buffer("int32", 2, init={"fill": 0})
    y = g.buffer("int32", 2, init={"fill": 0})
    grp_node = g.op("GROUP", "void", g.store(x, g.expand(g.const("int32", 3), [2])), g.store(y, g.expand(g.const("int32", 4), [2])))
    g.output("x", g.after(x, grp_node), [2], [3, 3])
    g.output("y", g.after(y, grp_node), [2], [4, 4])
    C.add(grp, "group_of_stores", g)
