#!/usr/bin/env bash
# Sensitivity of DSM-PUCL to d_r on one task: learns with seeds 0-3 at each d_r (every other setting
# the task's usual ones) and prints a table of the median IoU, recall, unsafe rate and goal-reached
# rate of `pucl eval`.
# Usage: scripts/dr_sweep.sh [TASK DEMOS [D_R ...]]
#   (default: reach_obstacle_3d, data/demos/reach_obstacle_3d_ds.csv, 0.020 0.022 0.025 0.028 0.031)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TASK=${1:-reach_obstacle_3d}
DEMOS=${2:-$ROOT/data/demos/reach_obstacle_3d_ds.csv}
shift $(($# > 2 ? 2 : $#))
VALUES=("$@")
[ ${#VALUES[@]} -gt 0 ] || VALUES=(0.020 0.022 0.025 0.028 0.031)
cargo build --release --quiet --bin pucl --manifest-path "$ROOT/Cargo.toml"
PUCL=$ROOT/target/release/pucl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for d in "${VALUES[@]}"; do
  echo "identify: {d_r: $d}" > "$WORK/learn.yaml"
  for seed in 0 1 2 3; do
    "$PUCL" learn --task "$TASK" --demos "$DEMOS" --config "$WORK/learn.yaml" --seed "$seed" \
      --out "$WORK/model.json" > /dev/null 2>&1
    echo "$d $("$PUCL" eval --task "$TASK" --model "$WORK/model.json" --json)"
  done
done > "$WORK/runs.txt"
python3 - "$WORK/runs.txt" "$TASK" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d, js = line.split(" ", 1)
    rows.setdefault(d, []).append(json.loads(js))
keys = list(rows)
print(f"{sys.argv[2]}: median over seeds 0-3")
print()
print("| d_r | " + " | ".join(keys) + " |")
print("|---" * (len(keys) + 1) + "|")
for name, key, scale, fmt in [("IoU", "iou", 1, "{:.3f}"), ("recall", "recall", 1, "{:.3f}"),
                              ("unsafe %", "unsafe_rate", 100, "{:.3f}"),
                              ("goal reached %", "goal_reached", 100, "{:.1f}")]:
    cells = [fmt.format(scale * statistics.median(r[key] for r in rows[k])) for k in keys]
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
