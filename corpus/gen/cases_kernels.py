"""corpus/compiler, kernel-level cases written by hand: kernel programs as a backend receives them in a
kernel-level request (`uopkit schema --protocol`, run_schedule), for what a backend must do with a program
that no compiler pass produced. Expected values: derived by hand below (Python's integers; IEEE rules for the
NaN), never the oracle.
"""

import numerics as N
from builder import KernelProgram, dumps_case

GRP = "compiler"

# The axis a compiler pass gives a loop it proved parallel (compiler/src/optimize/threads.rs PARALLEL_AXIS):
# a program from elsewhere may use the same number without any proof.
PARALLEL_AXIS = (1 << 32) - 1


def params(decls):
    return [{"dtype": dt, "size": size, "written": written} for dt, size, written in decls]


class KernelCase:
    """A kernel-level case: buffers, programs, steps and the buffers expected after the steps, written in the
    canonical layout (builder.dumps_case)."""

    def __init__(self, description, tags):
        self.description = description
        self.tags = tags
        self.buffers = []
        self.programs = []
        self.steps = []
        self.expect = []

    def buffer(self, dtype, size, init):
        bid = len(self.buffers)
        self.buffers.append({"id": bid, "dtype": dtype, "size": size, "device": "CPU", "storage": bid,
                             "init": init})
        return bid

    def program(self, prog):
        self.programs.append(prog)
        return len(self.programs) - 1

    def kernel(self, program, args):
        self.steps.append({"kernel": {"program": program, "device": "CPU", "args": list(args)}})

    def expect_buffer(self, name, buffer, values):
        self.expect.append({"name": name, "buffer": buffer, "expect": values, "nan": "canonical"})

    def to_json(self):
        return dumps_case({"format": "uopkit-case/1", "description": self.description, "tags": self.tags,
                           "kernel": {"buffers": self.buffers, "programs": [p.to_json() for p in self.programs],
                                      "steps": self.steps, "expect": self.expect}})


def gen(C):
    gen_parallel_axis_register_carry(C)
    gen_nan_store_with_register_first(C)
    gen_nan_payload_through_a_register(C)


def gen_parallel_axis_register_carry(C):
    # out[i] = x[0] + ... + x[i] through a one-element register carried from one iteration of the loop over i to
    # the next; that loop's RANGE has the axis number the compiler gives a proven parallel loop, but no pass
    # proved anything: the iterations depend on each other and must run in order. An inner loop of 8192 trips
    # repeats the (idempotent) store of out[i], so the loop is large enough to be split between threads if it
    # were taken for parallel (a thread starting at i = 4 would start from a fresh register).
    n, inner = 8, 8192
    xs = [1, 2, 3, 4, 5, 6, 7, 8]
    K = KernelCase(f"a kernel-level program whose loop has the axis number {PARALLEL_AXIS} (the one uopkit's cpu_threads "
                   "pass gives a loop it proved parallel) and carries a register from one iteration to the next: "
                   f"out[i] = x[0] + ... + x[i] for int32 x = {xs}; an inner loop of {inner} trips repeats the store. "
                   "Expected: the prefix sums (Python)",
                   [GRP, "kernel", "int32", "register", "parallel"])
    out = K.buffer("int32", n, None)
    x = K.buffer("int32", n, [hex(N.int_to_bits("int32", v)) for v in xs])
    p = KernelProgram("prefix_sum_on_the_parallel_axis", params([("int32", n, True), ("int32", n, False)]))
    p_out = p.emit("PARAM", "int32", arg={"param": 0})
    p_x = p.emit("PARAM", "int32", arg={"param": 1})
    reg = p.emit("BUFFER", "int32", arg={"reg": 1})
    zero = p.const("int64", 0)
    at_reg = p.emit("INDEX", "int32", [reg, zero])
    p.emit("STORE", "void", [at_reg, p.const("int32", 0)])
    i = p.emit("RANGE", "int64", [p.const("int64", n)], {"axis": PARALLEL_AXIS})
    xi = p.emit("LOAD", "int32", [p.emit("INDEX", "int32", [p_x, i])])
    at_reg2 = p.emit("INDEX", "int32", [reg, zero])
    s = p.emit("ADD", "int32", [p.emit("LOAD", "int32", [at_reg2]), xi])
    p.emit("STORE", "void", [at_reg2, s])
    j = p.emit("RANGE", "int64", [p.const("int64", inner)], {"axis": 0})
    p.emit("STORE", "void", [p.emit("INDEX", "int32", [p_out, i]), s])
    p.emit("END", "void", [j])
    p.emit("END", "void", [i])
    K.kernel(K.program(p), [out, x])
    sums = [sum(xs[:k + 1]) for k in range(n)]
    assert sums == [1, 3, 6, 10, 15, 21, 28, 36]
    K.expect_buffer("out", out, [hex(N.int_to_bits("int32", v)) for v in sums])
    C.add(GRP, "kernel_register_carried_along_the_parallel_axis_number", K)


def gen_nan_store_with_register_first(C):
    # A float32 register at instruction 1, holding x[0] * 1; out[0] = reg[0] + x[1] for x = [inf, -inf] is
    # inf + -inf, a NaN that IEEE arithmetic gives with a payload and sign of the hardware's choosing (x86: sign
    # set). Stored into a buffer, it must be the canonical NaN 0x7fc00000 (docs/semantics.md: every NaN an
    # operation produces is the canonical quiet NaN), whichever instruction the register is.
    K = KernelCase("a kernel-level program whose instruction 1 is a float32 register: reg[0] = x[0] * 1, "
                   "out[0] = reg[0] + x[1] for x = [inf, -inf]; inf + -inf is a NaN, stored as the canonical "
                   "NaN 0x7fc00000 (by hand: IEEE 754 invalid operation, then the oracle's NaN rule)",
                   [GRP, "kernel", "float32", "register", "nan"])
    out = K.buffer("float32", 1, None)
    x = K.buffer("float32", 2, ["0x7f800000", "0xff800000"])
    p = KernelProgram("nan_from_a_register_at_instruction_1", params([("float32", 1, True), ("float32", 2, False)]))
    p_out = p.emit("PARAM", "float32", arg={"param": 0})
    reg = p.emit("BUFFER", "float32", arg={"reg": 1})
    assert reg == 1
    p_x = p.emit("PARAM", "float32", arg={"param": 1})
    zero, one = p.const("int64", 0), p.const("int64", 1)
    at_reg = p.emit("INDEX", "float32", [reg, zero])
    x0 = p.emit("LOAD", "float32", [p.emit("INDEX", "float32", [p_x, zero])])
    p.emit("STORE", "void", [at_reg, p.emit("MUL", "float32", [x0, p.const("float32", 0x3F800000)])])
    x1 = p.emit("LOAD", "float32", [p.emit("INDEX", "float32", [p_x, one])])
    s = p.emit("ADD", "float32", [p.emit("LOAD", "float32", [at_reg]), x1])
    p.emit("STORE", "void", [p.emit("INDEX", "float32", [p_out, zero]), s])
    K.kernel(K.program(p), [out, x])
    K.expect_buffer("out", out, ["0x7fc00000"])
    C.add(GRP, "kernel_nan_stored_with_a_register_at_instruction_1", K)


def gen_nan_payload_through_a_register(C):
    # A float32 register holding a loaded value (no arithmetic): reg[0] = x[i], out[i] = reg[0]. A load and a
    # store move bits, so a NaN keeps its payload and sign (docs/semantics.md: only arithmetic results are
    # canonicalized): out = x bit for bit, the quiet NaN 0x7fa01234 and the negative NaN 0xffc00005 included.
    # A renderer that defers NaN canonicalization must not treat the register as holding arithmetic results.
    xs = ["0x7fa01234", "0x3fc00000", "0xffc00005", "0xff800000"]
    K = KernelCase("a kernel-level program copying float32 x to out through a one-element register: reg[0] = "
                   "x[i], out[i] = reg[0] for x = NaN 0x7fa01234, 1.5, NaN 0xffc00005, -inf; loads and stores "
                   "move bits, so out is x bit for bit, NaN payloads and signs included (by hand: no arithmetic, "
                   "docs/semantics.md)",
                   [GRP, "kernel", "float32", "register", "nan"])
    n = len(xs)
    out = K.buffer("float32", n, None)
    x = K.buffer("float32", n, xs)
    p = KernelProgram("copy_through_a_register", params([("float32", n, True), ("float32", n, False)]))
    p_out = p.emit("PARAM", "float32", arg={"param": 0})
    p_x = p.emit("PARAM", "float32", arg={"param": 1})
    reg = p.emit("BUFFER", "float32", arg={"reg": 1})
    zero = p.const("int64", 0)
    i = p.emit("RANGE", "int64", [p.const("int64", n)], {"axis": 0})
    at_reg = p.emit("INDEX", "float32", [reg, zero])
    p.emit("STORE", "void", [at_reg, p.emit("LOAD", "float32", [p.emit("INDEX", "float32", [p_x, i])])])
    v = p.emit("LOAD", "float32", [p.emit("INDEX", "float32", [reg, zero])])
    p.emit("STORE", "void", [p.emit("INDEX", "float32", [p_out, i]), v])
    p.emit("END", "void", [i])
    K.kernel(K.program(p), [out, x])
    K.expect_buffer("out", out, xs)
    C.add(GRP, "kernel_nan_payload_copied_through_a_register", K)
