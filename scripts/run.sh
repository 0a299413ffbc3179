#!/usr/bin/env bash
# The main job: learn the constraint of a built-in task from its reference demonstrations with
# DSM-PUCL, print the metrics against the true constraint, and draw the learned constraint.
# TASK, DEMOS and OUT may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
TASK=${TASK:-reach_obstacle_3d}
DEMOS=${DEMOS:-data/demos/reach_obstacle_3d_ds.csv}
OUT=${OUT:-out}
mkdir -p "$OUT"
cargo build --release --quiet
pucl=./target/release/pucl
"$pucl" learn --task "$TASK" --demos "$DEMOS" --out "$OUT/model.json"
"$pucl" eval --task "$TASK" --model "$OUT/model.json"
"$pucl" plot --task "$TASK" --model "$OUT/model.json" --demos "$DEMOS" --out "$OUT/heat.png"
