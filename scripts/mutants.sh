#!/usr/bin/env bash
# Mutation score of the conformance corpus against uopkit's compiler (issue 18).
#
#   scripts/mutants.sh [PART] [--shard K/N] [--jobs J] [--list] [--all] [--no-baseline]
#                      [--timeout SECS] [-- extra cargo-mutants args, e.g. --in-place]
#   scripts/mutants.sh --check-lists
#
# PART: a file or folder under compiler/src (default: all of compiler/src), e.g.
#   scripts/mutants.sh compiler/src/lower/index.rs
#   scripts/mutants.sh compiler/src/schedule --shard 0/4
#
# Every mutant cargo-mutants makes in PART is built and judged by the conformance trials only
# (`cargo test --test conformance` of the root package: the corpus on every backend this machine
# has), never by the unit tests, because the question is whether a backend author's corpus would
# notice the bug. Mutants listed in mutants/equivalent.txt (a regex per line, each with a reason)
# cannot change behaviour and are excluded; so are those in mutants/out_of_scope.txt (behaviour
# the trials cannot see here, each with the tests that cover it) unless --all is given. At the
# end it prints the score per file: caught / (caught + missed), timeouts counted as caught (the
# run would hang), unviable mutants (they do not compile) not counted.
#
# The trials run with UOPKIT_FAIL_FAST=1 (a caught mutant stops at its first failing trial) and
# without the oracle's own trials (the oracle does not use the compiler).
#
# Needs cargo-mutants (`cargo install cargo-mutants --version 27.1.0 --locked`). Cost on an idle
# 2-core machine with a warm build and kernel cache: one mutant is an incremental rebuild of the
# compiler and the conformance test (2-30 s) plus one conformance run (about 8 s), 9-17 s on
# average, and compiler/src has about 1700 mutants in scope (`scripts/mutants.sh --list | wc -l`),
# so a whole run is about 5 hours: shard it (`--shard K/N` runs the K-th of N disjoint slices, K
# from 0) over a CI matrix, and merge the shards' mutants.out directories with
# `scripts/mutants_score.py DIR...`.
#
# --check-lists prints every entry of mutants/equivalent.txt and mutants/out_of_scope.txt that
# matches no mutant of compiler/src (a line:col pin the code moved away from) and exits 1 if
# there is one: run it after editing a file the lists pin.
#
# A sampled estimate of the whole tree's score: one round-robin shard (every N-th mutant, so
# every file is represented), in random order so that a run stopped early is still a random
# sample:
#   scripts/mutants.sh --shard 0/20 --no-baseline -- --sharding round-robin --shuffle --in-place
# (about 90 mutants; 13-17 minutes on an idle 2-core machine; a build or a stray process beside it
# can double that). --in-place mutates this checkout: run it in a
# throwaway worktree (`git worktree add`). The samples measured so far, before and after their
# misses were classified and killed: mutants/SAMPLES.md.
set -euo pipefail
cd "$(dirname "$0")/.."

part="compiler/src"
shard=""
jobs=""
list=""
all=""
check_lists=""
no_baseline=""
timeout=1800
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shard) shard="${2:?--shard needs K/N}"; shift 2 ;;
    --shard=*) shard="${1#--shard=}"; shift ;;
    --jobs|-j) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --list) list=1; shift ;;
    --all) all=1; shift ;;
    --check-lists) check_lists=1; shift ;;
    --no-baseline) no_baseline=1; shift ;;
    --timeout) timeout="${2:?--timeout needs seconds}"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "scripts/mutants.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) part="$1"; shift ;;
  esac
done
case "$part" in
  compiler/src|compiler/src/*) ;;
  *) echo "scripts/mutants.sh: PART must be under compiler/src, got '$part'" >&2; exit 2 ;;
esac
if [ ! -e "$part" ]; then
  echo "scripts/mutants.sh: $part does not exist" >&2; exit 2
fi
if ! cargo mutants --version >/dev/null 2>&1; then
  echo "scripts/mutants.sh: cargo-mutants is not installed: cargo install cargo-mutants --version 27.1.0 --locked" >&2
  exit 2
fi

args=(--package uopkit-compiler --test-package uopkit)
if [ -d "$part" ]; then
  args+=(--file "$part/**/*.rs")
else
  args+=(--file "$part")
fi
if [ -n "$check_lists" ]; then
  cargo mutants --package uopkit-compiler --file "compiler/src/**/*.rs" --list \
    | python3 scripts/mutants_score.py --stale
  exit $?
fi
# Excluded mutants, "regex  # reason" per line (blank lines and lines starting with # ignored):
# mutants/equivalent.txt (cannot change behaviour) always, mutants/out_of_scope.txt (behaviour the
# trials cannot see: diagnostics, GPU run time, the cache's and FP guard's defences) unless --all.
lists=(mutants/equivalent.txt)
[ -z "$all" ] && lists+=(mutants/out_of_scope.txt)
for list_file in "${lists[@]}"; do
  while IFS= read -r line; do
    case "$line" in \#*|"") continue ;; esac
    re="${line%%  #*}"
    [ -z "$re" ] && continue
    args+=(--exclude-re "$re")
  done < "$list_file"
done
[ -n "$shard" ] && args+=(--shard "$shard")
[ -n "$jobs" ] && args+=(--jobs "$jobs")

if [ -n "$list" ]; then
  exec cargo mutants "${args[@]}" --list "${extra[@]}"
fi

# The conformance trials only; the fault-injection feature stays off (normal builds).
# UOPKIT_FAIL_FAST: a caught mutant ends at its first failing trial instead of running the rest.
# The oracle's own trials are left out: the oracle (interp/) does not use the compiler, so no
# compiler mutant can change them (UOPKIT_BACKENDS, if set, still wins).
export UOPKIT_FAIL_FAST=1
export UOPKIT_BACKENDS="${UOPKIT_BACKENDS:-kernels,gpusim,cpu,nvrtc,hiprtc,cuda,cuda-cpu,hip,hip-cpu}"
# NVRTC as .ci/run installs it (pip's nvidia-cuda-nvrtc-cu12 in .venv): without it the nvrtc trial is
# skipped and mutants of the CUDA rendering look missed.
if [ -x .venv/bin/python ]; then
  nvrtc_lib="$(.venv/bin/python -c 'import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null || true)"
  if [ -n "$nvrtc_lib" ] && [ -d "$nvrtc_lib" ]; then
    export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
# `--test=conformance` goes to every cargo call (`--cargo-arg`), so each mutant builds only
# that test binary, not all of the root package's. cargo-mutants' own baseline would test the
# mutated package (uopkit-compiler), which has no conformance test, so the baseline is run here
# instead, on the unmutated tree: if it fails, every mutant would look caught.
start=$(date +%s)
if [ -z "$no_baseline" ]; then
  echo "scripts/mutants.sh: baseline: cargo test --test conformance on the unmutated tree"
  if ! cargo test --package uopkit --test conformance >mutants.baseline.log 2>&1; then
    echo "scripts/mutants.sh: the unmutated tree fails its conformance trials (mutants.baseline.log)" >&2
    exit 1
  fi
fi
status=0
cargo mutants "${args[@]}" --baseline=skip --timeout "${timeout}" --cargo-arg=--test=conformance \
  "${extra[@]}" || status=$?
# cargo-mutants exits 2 when some mutants were missed, 3 on timeouts: the score is the answer.
case "$status" in 0|2|3) ;; *) echo "scripts/mutants.sh: cargo mutants failed ($status)" >&2; exit "$status" ;; esac
python3 scripts/mutants_score.py mutants.out
echo "took $(( $(date +%s) - start )) s"
