#!/usr/bin/env python3
"""Regenerate the uopkit corpus: `python3 corpus/gen/generate.py` (from the repository root or anywhere).

Runs the rounding self-checks first (numerics vs struct / bit tricks / exhaustive fp8 and float16),
then writes every case file corpus/<group>/<name>.json in the canonical layout
(builder.dumps_case: one graph node, output and input per line; keys in the case-format order). Files in a group directory that
the generator no longer produces are removed. Standard library only; no numpy, never the oracle.

  --check   do not write; exit 1 if any file on disk differs from what would be written
  --quick   run a reduced self-check
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import selfcheck  # noqa: E402
from builder import Corpus  # noqa: E402
import cases_alu  # noqa: E402
import cases_allreduce  # noqa: E402
import cases_cast  # noqa: E402
import cases_compiler  # noqa: E402
import cases_kernels  # noqa: E402
import cases_movement  # noqa: E402
import cases_multi  # noqa: E402
import cases_reduce  # noqa: E402
import cases_seeds  # noqa: E402
import cases_ub  # noqa: E402

ROOT = os.path.dirname(HERE)  # corpus/


def build():
    C = Corpus(ROOT)
    for mod in (cases_seeds, cases_allreduce, cases_multi, cases_alu, cases_cast, cases_compiler, cases_kernels, cases_movement, cases_reduce,
                cases_ub):
        mod.gen(C)
    return C


def main(argv):
    quick = "--quick" in argv
    if quick:
        selfcheck.check_struct_formats(2000)
        selfcheck.check_bfloat16(2000)
        selfcheck.check_all_codes()
        selfcheck.check_ops()
    else:
        selfcheck.run()
    C = build()
    if "--check" in argv:
        bad = []
        for path, text in sorted(C.cases.items()):
            full = os.path.join(ROOT, path)
            if not os.path.exists(full) or open(full, encoding="ascii").read() != text:
                bad.append(path)
        groups = sorted({p.split("/")[0] for p in C.cases})
        for grp in groups:
            for fn in os.listdir(os.path.join(ROOT, grp)) if os.path.isdir(os.path.join(ROOT, grp)) else []:
                if fn.endswith(".json") and f"{grp}/{fn}" not in C.cases:
                    bad.append(f"{grp}/{fn} (stale)")
        for b in bad:
            print("differs:", b)
        print(f"{len(C.cases)} cases, {len(bad)} differ")
        return 1 if bad else 0
    groups = C.write()
    counts = {g: sum(1 for p in C.cases if p.startswith(g + "/")) for g in groups}
    print(f"wrote {len(C.cases)} cases: " + ", ".join(f"{g} {n}" for g, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
