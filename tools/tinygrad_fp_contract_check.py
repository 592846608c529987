#!/usr/bin/env python3
"""Shows that tinygrad 0.14.0's CPU build contracts a*b+c into FMAs (the evidence behind the kernel
exporter's -ffp-contract=off and tinygrad-CPU's contract_mul_add allowance).

Usage: tinygrad_fp_contract_check.py [default|off]   (no argument: both, one process each)

Realizes float32 exp of the 3x4 tensor of corpus/imported/tinygrad/kernels/scripts/elementwise.py on
tinygrad's CPU device, with tinygrad's own clang arguments (runtime/support/compiler_cpu.py:21) or
with -ffp-contract=off added, and prints the result's bits and how many FMA instructions objdump finds
in the compiled kernel. tinygrad's compile cache is bypassed (CCACHE=0: it is keyed by source, so an
object of the other build would be reused) and so are its compile workers (PARALLEL=0: spawned fresh,
they would not see the patch). Needs objdump (binutils).
"""
import os
import subprocess
import sys
import tempfile

A = [[1.5, -2.0, 3.25, 0.0], [-0.5, 4.0, -7.75, 2.5], [9.0, -1.0, 0.125, 6.0]]


def one(mode):
    from tinygrad.helpers import PARALLEL
    from tinygrad.runtime.support import compiler_cpu
    PARALLEL.value = 0
    objs = []
    orig = compiler_cpu.ClangCompiler.compile

    def compile_(self, src):
        if mode == "off" and "-ffp-contract=off" not in self.args:
            self.args = [*self.args, "-ffp-contract=off"]
        lib = orig(self, src)
        if "void E_" in src:
            objs.append(lib)
        return lib
    compiler_cpu.ClangCompiler.compile = compile_
    from tinygrad import Tensor, dtypes
    out = Tensor(A, dtype=dtypes.float32).exp().realize()
    bits = [hex(v) for row in out.bitcast(dtypes.uint32).tolist() for v in row]
    fmas = 0
    for lib in objs:
        with tempfile.NamedTemporaryFile(suffix=".o") as f:
            f.write(lib)
            f.flush()
            dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f.name], capture_output=True, text=True, check=True).stdout
        fmas += sum(1 for line in dis.splitlines() if "\tvfmadd" in line or "\tvfmsub" in line or "\tvfnm" in line)
    print(f"{mode}: exp bits {bits}; FMA instructions in the kernel: {fmas}")


def main(argv):
    if argv and argv[0] in ("default", "off"):
        one(argv[0])
        return 0
    if argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    env = {**os.environ, "CCACHE": "0"}
    for mode in ("default", "off"):
        subprocess.run([sys.executable, os.path.abspath(__file__), mode], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
