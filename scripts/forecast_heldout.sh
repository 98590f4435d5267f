#!/usr/bin/env bash
# The forecast judged on models it was not developed on: for each configuration below, train the
# seeds, write `recall forecast` (ISR and accuracy per rule, the prescribed c on the ISR and on the
# accuracy, the published criteria's c) to forecast.json BEFORE anything past the training length
# is read, then measure: inspect's ISR per head at 1x to 64x, and accuracy at 64x under none, each
# prescribed c and half of it, and the published criteria's c (analysis/critical_scaling.h). Then
# scripts/forecast_heldout_table.py sets the predictions beside the measurements (hits and misses).
#   scripts/forecast_heldout.sh OUT_DIR [SEEDS] [CONFIG ...]
# SEEDS defaults to 3; the configurations default to every one below. Two runs at a time, one
# thread each. The essay's store, `mqar-store` (beta 6, d_head 16, 8,192 keys, 2 layers), is what
# the forecast was developed on; the others each change one thing, except `content`, the content-only
# recipe without unit q and k, where nothing bounds the logits.
set -euo pipefail
out=${1:?usage: scripts/forecast_heldout.sh OUT_DIR [SEEDS] [CONFIG ...]}
seeds=${2:-3}
shift $(($# < 2 ? $# : 2))
recall=${RECALL:-$(cd "$(dirname "$0")/.." && pwd)/build/recall}
declare -A sets=(
  [store]=""
  [beta4]="--set attn_scale=4"
  [beta8]="--set attn_scale=8"
  [dhead8]="--set d_head=8"
  [dhead32]="--set d_head=32"
  [keys2048]="--set vocab_size=2305"   # 1 filler + 2,048 keys + 256 values
  [keys32768]="--set vocab_size=33025" # 1 filler + 32,768 keys + 256 values
  [layers3]="--set n_layers=3"
  [bf16]="--precision bf16"
  [content]=""
)
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(store beta4 beta8 dhead8 dhead32 keys2048 keys32768 layers3 bf16 content)
one() {  # one seed of one configuration, start to end
  local name=$1 seed=$2 dir=$out/$1-$2 recipe=mqar-store
  [ "$name" = content ] && recipe=mqar-extrapolate
  mkdir -p "$dir"
  # shellcheck disable=SC2086 # the --set words split on purpose
  [ -f "$dir/run/checkpoint.bin" ] ||
    "$recall" --threads 1 train --config $recipe ${sets[$name]} --set seed="$seed" \
      --out "$dir/run" >"$dir/train.log" 2>&1
  [ -f "$dir/forecast.json" ] ||
    "$recall" --threads 1 forecast --checkpoint "$dir/run" --target 64x --isr 0.25 \
      --rules none,su,qwen,yarn,ssmax --json "$dir/forecast.json" >"$dir/forecast.txt"
  [ -f "$dir/inspect.json" ] ||
    "$recall" --threads 1 inspect --checkpoint "$dir/run" --lengths 1,2,4,8,16,32,64 \
      --rules none,su,qwen,yarn,ssmax --pairs grow --no-ablate --json "$dir/inspect.json" >/dev/null
  local rules=none
  local c
  c=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prescription']['c'])" \
    "$dir/forecast.json")
  if [ "$c" != None ]; then rules="none,log:$c,log:$(python3 -c "print($c / 2)")"; fi
  [ -f "$dir/accuracy.json" ] ||
    "$recall" --threads 1 extrapolate --checkpoints "$dir/run" --rules "$rules" --lengths 1,64 \
      --pairs grow --json "$dir/accuracy.json" >"$dir/accuracy.txt" 2>&1
  # the prescription on the forecast accuracy, and its half, measured alike
  c=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prescription_by_accuracy']['c'])" \
    "$dir/forecast.json")
  [ -f "$dir/accuracy_by_accuracy.json" ] || [ "$c" = None ] ||
    "$recall" --threads 1 extrapolate --checkpoints "$dir/run" \
      --rules "log:$c,log:$(python3 -c "print($c / 2)")" --lengths 64 --pairs grow \
      --json "$dir/accuracy_by_accuracy.json" >"$dir/accuracy_by_accuracy.txt" 2>&1
  # the published criteria's c for the same heads, measured alike
  local published
  published=$(python3 -c "import json,sys; k = json.load(open(sys.argv[1]))['published_criteria']
print(','.join('log:%s' % k[c] for c in ('c_critical', 'c_gap_count') if k.get(c) is not None))" \
    "$dir/forecast.json")
  [ -f "$dir/published.json" ] || [ -z "$published" ] ||
    "$recall" --threads 1 extrapolate --checkpoints "$dir/run" --rules "$published" --lengths 64 \
      --pairs grow --json "$dir/published.json" >"$dir/published.txt" 2>&1
  echo "$name seed $seed done"
}
jobs_=()
for name in "${configs[@]}"; do
  [ -n "${sets[$name]+x}" ] || { echo "unknown configuration: $name" >&2; exit 2; }
  for ((s = 0; s < seeds; s++)); do jobs_+=("$name $s"); done
done
printf '%s\n' "${jobs_[@]}" | xargs -P 2 -L 1 bash -c "$(declare -p out recall sets); $(declare -f one); one \"\$0\" \"\$1\""
python3 "$(dirname "$0")/forecast_heldout_table.py" "$out"
