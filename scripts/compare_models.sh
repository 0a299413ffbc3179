#!/usr/bin/env bash
# Checks that a change of code leaves learning unchanged: builds the `pucl` CLI of git revision REV
# (default: HEAD) and of the work tree, runs `pucl learn` with both on every built-in task, both
# policies and all four methods at fixed seeds, and compares the model files. Only the wall-clock
# fields (summary.wall_seconds, summary.history[].seconds) may differ.
# Usage: scripts/compare_models.sh [REV] [--full-crl]
#   CRL-PUCL runs use a shortened schedule (config below: 3 outer iterations of 3000 steps) that
#   goes through every code path; --full-crl runs the shipped CRL settings (about 2 min per run).
# Prints one line per run and ends with 'N passed, N failed'.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=HEAD FULL_CRL=0
for a in "$@"; do
  case $a in
    --full-crl) FULL_CRL=1 ;;
    -h | --help) sed -n 2,9p "$0"; exit 0 ;;
    *) REV=$a ;;
  esac
done
WORK=$(mktemp -d)
trap 'git -C "$ROOT" worktree remove --force "$WORK/old" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

echo "[compare_models] building $REV and the work tree" >&2
git -C "$ROOT" worktree add --detach -q "$WORK/old" "$REV"
# A target folder of its own for the old revision, kept between runs so rebuilds are incremental.
CARGO_TARGET_DIR="$ROOT/target/compare-models" cargo build --release --quiet --bin pucl \
  --manifest-path "$WORK/old/Cargo.toml"
cargo build --release --quiet --bin pucl --manifest-path "$ROOT/Cargo.toml"
OLD=$ROOT/target/compare-models/release/pucl NEW=$ROOT/target/release/pucl

# A short CRL schedule; the lenient policy filter lets its young policy's rollouts reach identification.
cat > "$WORK/short_crl.yaml" <<'YAML'
iterations: 3
epochs: 50
policy_filter: {delta: 0.99, max_mean_cost: 1.0}
crl: {n_envs: 4, n_steps: 250, timesteps_per_iteration: 3000, rollouts_per_start: 2}
YAML
DEMOS=$ROOT/data/demos
runs=(
  "point_ellipse_2d $DEMOS/point_ellipse_2d.csv"
  "reach_obstacle_3d $DEMOS/reach_obstacle_3d_ds.csv"
  "reach_velocity_3d $DEMOS/reach_velocity_3d.csv"
  "reach_four_cups_3d $DEMOS/reach_four_cups_3d_ds.csv"
)
# The model file without its wall-clock fields, canonical JSON.
strip() {
  python3 -c 'import json,sys
m=json.load(open(sys.argv[1])); s=m["summary"]; s.pop("wall_seconds",None)
[h.pop("seconds",None) for h in s["history"]]
print(json.dumps(m,sort_keys=True))' "$1"
}
passed=0 failed=0
for r in "${runs[@]}"; do
  read -r task demos <<<"$r"
  for policy in dsm crl; do
    for method in pucl mecl bc gpucl; do
      for seed in 0 1; do
        args=(learn --task "$task" --demos "$demos" --policy "$policy" --method "$method" --seed "$seed")
        [ "$policy" = crl ] && [ "$FULL_CRL" = 0 ] && args+=(--config "$WORK/short_crl.yaml")
        name="$task $policy $method seed $seed"
        o=$("$OLD" "${args[@]}" --out "$WORK/old.json" 2>&1 >/dev/null) && os=0 || os=$?
        n=$("$NEW" "${args[@]}" --out "$WORK/new.json" 2>&1 >/dev/null) && ns=0 || ns=$?
        if [ "$os" != "$ns" ]; then
          echo "FAIL $name: exit $os before, $ns now"; failed=$((failed + 1)); continue
        fi
        if [ "$os" != 0 ]; then
          # Both refuse (e.g. nothing learned): the same error is the same behaviour.
          if [ "$(echo "$o" | tail -n 1)" = "$(echo "$n" | tail -n 1)" ]; then
            echo "same (both fail: $(echo "$n" | tail -n 1)) $name"; passed=$((passed + 1))
          else
            echo "FAIL $name: errors differ: '$(echo "$o" | tail -n 1)' vs '$(echo "$n" | tail -n 1)'"
            failed=$((failed + 1))
          fi
          continue
        fi
        if [ "$(strip "$WORK/old.json")" = "$(strip "$WORK/new.json")" ]; then
          echo "same $name"; passed=$((passed + 1))
        else
          echo "FAIL $name: model files differ"; failed=$((failed + 1))
        fi
      done
    done
  done
done
echo "compare_models: $passed passed, $failed failed"
[ "$failed" = 0 ]
