#!/usr/bin/env bash
# Runs one recall binary over a fixed set of small, seeded jobs and writes what they output (the
# JSON and CSV of theory, probe, fit, inspect, eval, extrapolate, an experiment and a sweep;
# checkpoints of every feed-forward kind and attention variant; exports in both formats and their
# import back; greedy samples) into a folder, with the SHA-256 of each file in SHA256SUMS. A change
# that should not change behaviour (a refactor) must leave every line of SHA256SUMS as it was:
#
#   scripts/output_digest.sh /path/to/old/recall /tmp/before
#   scripts/output_digest.sh build/recall /tmp/after
#   diff /tmp/before/SHA256SUMS /tmp/after/SHA256SUMS && echo same bytes
#
# Timings are not outputs: metrics.jsonl and the keys that hold seconds or rates are left out
# (their names are listed in `volatile` below), and so are paths, which name the folder.
# Runs on 2 threads in about 4 minutes on a 2-core machine.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 RECALL_BINARY OUT_DIR" >&2
  exit 2
fi
recall=$(realpath "$1")
out=$2
rm -rf "$out"
mkdir -p "$out"
out=$(realpath "$out")
cd "$out"
r() { "$recall" --threads 2 --quiet "$@"; }

# Written stores and theory.
r theory --json theory.json >/dev/null
r probe --json probe.json --csv probe.csv --m 16,64,256,1024 --rule-m-max 65536 >/dev/null

# Training: every feed-forward kind and attention variant, a few steps each (checkpoints and
# their config.toml), then what reads a checkpoint.
train() {
  local name=$1
  shift
  r train --config mqar-tiny --out "runs/$name" --set steps=12 --set warmup_steps=2 --set eval_every=6 \
    --set checkpoint_every=6 "$@" >/dev/null
}
train mlp-gelu
train linear --set ffn=linear
train mlp-relu2 --set ffn=mlp --set activation=relu2
train swiglu --set ffn=swiglu
train learned_kv --set ffn=learned_kv --set ffn_slots=16
train none --set ffn=none
train attn-store --set attn_qk_norm=true --set attn_scale=6.0 --set attn_scale_learned=true \
  --set attn_rule=su --set pos=none --set attn_conv=3 --set attn_mem_kv=4
train ssmax --set attn_rule=ssmax --set norm=layernorm --set bias=true
# bf16 products where the CPU has them (recall refuses precision = bf16 elsewhere, where it would
# run slower than fp32): the digest then holds one run fewer, on every build alike.
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then train bf16 --set precision=bf16; fi
r train --config text-tiny --out runs/text --set steps=8 --set warmup_steps=2 --set eval_every=4 \
  --set checkpoint_every=4 --set batch_size=4 >/dev/null
r eval --checkpoint runs/mlp-gelu >eval.txt
r eval --checkpoint runs/attn-store --seq-len 256 --rule yarn >eval-yarn.txt
r sample --checkpoint runs/text --prompt "The " --tokens 40 --temperature 0 >sample.txt
r sample --checkpoint runs/mlp-gelu --tokens 16 --temperature 1 --seed 3 --samples 2 >sample-mqar.txt
r inspect --checkpoint runs/swiglu --lengths 1 4 --rules none su --batches 1 --json inspect-swiglu.json >/dev/null
r inspect --checkpoint runs/learned_kv --lengths 1 4 --rules none su --batches 1 --json inspect-learned_kv.json >/dev/null
r inspect --checkpoint runs/attn-store --lengths 1 4 --rules none su --batches 1 --json inspect-attn-store.json >/dev/null
r extrapolate --checkpoints runs/attn-store runs/mlp-gelu --lengths 1 2 --batches 1 \
  --json extrapolate.json >/dev/null
r export --checkpoint runs/mlp-gelu --out export/mlp-gelu >/dev/null
r export --checkpoint runs/learned_kv --out export/learned_kv >/dev/null
r train --config text-tiny --out runs/gpt2 --set model=gpt-bench --set vocab_size=256 \
  --set seq_len=64 --set steps=4 --set warmup_steps=1 --set batch_size=2 --set eval_every=4 >/dev/null
r export --checkpoint runs/gpt2 --out export/gpt2 --format gpt2 >/dev/null
r import --from export/gpt2 --out runs/imported --config text-tiny >/dev/null

# Fitted stores, an experiment and a sweep.
for kind in linear mlp-relu2 glu-silu learned_kv; do
  r fit --kind "$kind" --width 8 --dk 16 --steps 60 --m-max 64 --json "fit-$kind.json" >/dev/null
done
r experiment sharpness --quiet --out experiment-sharpness --quick --steps 120 >/dev/null
r sweep --config mqar-tiny --out sweep --grid ffn_mult=1,2 --set steps=6 --set warmup_steps=1 --set eval_every=6 \
  >/dev/null

# Timings and paths are left out of the digest.
python3 - "$out" <<'EOF'
import json, pathlib, re, sys
volatile = re.compile(r"(^|_)(seconds|s|ms|per_s|time|wall|elapsed|rss|mib|gflops|peak|when)$|"
                      r"^(path|checkpoint|checkpoints|out|dir|run|runs|source)$")
def scrub(v):
    if isinstance(v, dict):
        return {k: scrub(x) for k, x in v.items() if not volatile.search(k)}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v
root = pathlib.Path(sys.argv[1])
for f in root.rglob("*"):
    if f.name == "metrics.jsonl" or f.suffix in (".png", ".svg", ".log"):
        f.unlink()
    elif f.suffix == ".json":
        f.write_text(json.dumps(scrub(json.loads(f.read_text())), indent=1, sort_keys=True) + "\n")
    elif f.suffix == ".csv":
        rows = [line.split(",") for line in f.read_text().splitlines()]
        keep = [i for i, name in enumerate(rows[0]) if not volatile.search(name)]
        f.write_text("".join(",".join(r[i] for i in keep) + "\n" for r in rows))
EOF
find . -type f ! -name SHA256SUMS | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
echo "$(wc -l <SHA256SUMS) files in $out/SHA256SUMS"
