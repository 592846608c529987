#!/usr/bin/env bash
# SIGKILL during `uopkit fmt`: every case file must still parse afterwards (fmt writes each
# file atomically). Usage: scripts/fmt_kill_experiment.sh [ROUNDS] (default 35).
# Each round: copy the corpus, make every file non-canonical (compact JSON), start
# `uopkit fmt` on all of them, kill it with SIGKILL after a random delay, then parse every
# file. Prints the number of kills that landed mid-run and of broken files; exits 1 if any
# case file no longer parses. (A SIGKILL can leave the temporary file it was writing.)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-35}
bin=target/release/uopkit
[ -x "$bin" ] || cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
landed=0; broken=0; leftover=0
for r in $(seq 1 "$rounds"); do
  rm -rf "$work/c"; cp -r corpus "$work/c"
  python3 - "$work/c" <<'PY'
import json, pathlib, sys
for p in pathlib.Path(sys.argv[1]).rglob("*.json"):
    p.write_text(json.dumps(json.loads(p.read_text()), separators=(",", ":")))
PY
  mapfile -t files < <(find "$work/c" -name '*.json' | sort)
  "$bin" fmt "${files[@]}" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  if kill -KILL "$pid" 2>/dev/null; then landed=$((landed + 1)); fi
  wait "$pid" 2>/dev/null || true
  b=$(python3 - "$work/c" <<'PY'
import json, pathlib, sys
bad = 0
for p in pathlib.Path(sys.argv[1]).rglob("*.json"):
    try:
        json.loads(p.read_text())
    except Exception:
        bad += 1
left = list(pathlib.Path(sys.argv[1]).rglob(".uopkit-tmp-*"))
print(bad, len(left))
PY
)
  broken=$((broken + ${b% *})); leftover=$((leftover + ${b#* }))
done
echo "rounds: $rounds, kills that landed during fmt: $landed, case files that no longer parse: $broken, temporary files left by the killed process (.uopkit-tmp-*, never read as cases): $leftover"
[ "$broken" -eq 0 ]
