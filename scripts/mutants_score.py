#!/usr/bin/env python3
"""Mutation score per file from one or more cargo-mutants output directories (shards merge).

  python3 scripts/mutants_score.py mutants.out [more/mutants.out ...] [--markdown]
  cargo mutants ... --list | python3 scripts/mutants_score.py --stale

--stale reads mutant names (one per line, as `cargo mutants --list` prints them, with no
exclusions) on standard input and prints every line of mutants/equivalent.txt and
mutants/out_of_scope.txt whose regex matches none of them (a pin left behind when the code moved:
the mutant it meant is scored again, under another line:col); exit status 1 when there is one.

Reads caught.txt, missed.txt, timeout.txt and unviable.txt (one mutant per line,
`file:line:col: description`). Score = (caught + timeout) / (caught + timeout + missed): a timeout
counts as caught (the conformance run would hang, which fails it); unviable mutants (they do not
compile) are not counted. Mutants matched by mutants/out_of_scope.txt (regex  # reason, like
mutants/equivalent.txt) are listed apart: they change behaviour that the conformance trials cannot
see on a machine without a GPU, or only diagnostics, and are scored separately. Mutants matched by
mutants/equivalent.txt are left out of the score too: scripts/mutants.sh passes both lists to cargo-mutants
as --exclude-re, but cargo-mutants 27.1.0 still makes the "delete field ... from struct ... expression"
mutants whatever --exclude-re says, so a listed one may be in a run's results.
Exit status 0; 2 on bad arguments or an unreadable directory.
"""

import os
import re
import sys

KINDS = ("caught", "missed", "timeout", "unviable")


def load_entries(path):
    """(line number, line, compiled regex) for each entry of a list file."""
    entries = []
    if not os.path.exists(path):
        return entries
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            entries.append((n, line, re.compile(line.split("  #", 1)[0].rstrip())))
    return entries


def load_patterns(path):
    return [rx for _, _, rx in load_entries(path)]


def stale(root, names):
    """Prints the list entries that match none of `names`; 1 when there is one, else 0."""
    found = 0
    for lst in ("equivalent.txt", "out_of_scope.txt"):
        for n, line, rx in load_entries(os.path.join(root, "mutants", lst)):
            if not any(rx.search(name) for name in names):
                found += 1
                print(f"mutants/{lst}:{n}: matches no mutant: {line.split('  #', 1)[0]}")
    print(f"{len(names)} mutants listed; {found} stale entries", file=sys.stderr)
    return 1 if found else 0


def read_outcomes(dirs):
    seen = {}
    for d in dirs:
        if not os.path.isdir(d):
            print(f"mutants_score: {d} is not a directory", file=sys.stderr)
            sys.exit(2)
        for kind in KINDS:
            p = os.path.join(d, f"{kind}.txt")
            if not os.path.exists(p):
                continue
            with open(p, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line:
                        seen[line] = kind
    return seen


def main(argv):
    markdown = "--markdown" in argv
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--stale" in argv:
        return stale(root, [l.strip() for l in sys.stdin if l.strip()])
    dirs = [a for a in argv if not a.startswith("--")]
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_of_scope = load_patterns(os.path.join(root, "mutants", "out_of_scope.txt"))
    equivalent = load_patterns(os.path.join(root, "mutants", "equivalent.txt"))
    outcomes = read_outcomes(dirs)
    per_file = {}
    oos = {k: 0 for k in KINDS}
    eq = {k: 0 for k in KINDS}
    wrong_eq = []
    for mutant, kind in outcomes.items():
        name = mutant
        if any(p.search(name) for p in equivalent):
            eq[kind] += 1
            if kind in ("caught", "timeout"):
                # a listed mutant that the trials catch changes behaviour: its entry is wrong
                wrong_eq.append(name)
            continue
        if any(p.search(name) for p in out_of_scope):
            oos[kind] += 1
            continue
        f = mutant.split(":", 1)[0]
        per_file.setdefault(f, {k: 0 for k in KINDS})[kind] += 1
    rows = []
    tot = {k: 0 for k in KINDS}
    for f in sorted(per_file):
        c = per_file[f]
        for k in KINDS:
            tot[k] += c[k]
        rows.append((f, c))
    rows.append(("total", tot))
    if markdown:
        print("| file | caught | timeout | missed | unviable | score |")
        print("|---|---|---|---|---|---|")
    else:
        print(f"{'file':<48} {'caught':>7} {'timeout':>7} {'missed':>7} {'unviable':>8} {'score':>7}")
    for f, c in rows:
        judged = c["caught"] + c["timeout"] + c["missed"]
        score = f"{100.0 * (c['caught'] + c['timeout']) / judged:.1f}%" if judged else "-"
        if markdown:
            print(f"| `{f}` | {c['caught']} | {c['timeout']} | {c['missed']} | {c['unviable']} | {score} |")
        else:
            print(f"{f:<48} {c['caught']:>7} {c['timeout']:>7} {c['missed']:>7} {c['unviable']:>8} {score:>7}")
    if sum(eq.values()):
        print(f"equivalent (mutants/equivalent.txt; cargo-mutants ran them anyway): {eq['caught']} caught, "
              f"{eq['timeout']} timeout, {eq['missed']} missed, {eq['unviable']} unviable")
    for name in sorted(wrong_eq):
        print(f"caught, yet listed in mutants/equivalent.txt (the entry is wrong): {name}")
    if sum(oos.values()):
        print(f"out of scope (mutants/out_of_scope.txt): {oos['caught']} caught, {oos['timeout']} timeout, "
              f"{oos['missed']} missed, {oos['unviable']} unviable")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
