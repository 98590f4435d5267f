#!/usr/bin/env python3
"""Cost as the work grows: recall's training loop against the PyTorch 2.x peer at wider and longer
shapes than bench-gpt, in one run, each shape back to back.

The peer (--peer PATH) is bench-gpt's model written as a PyTorch 2.x user would write it
(`peer_gpt2.py`: SDPA attention, fused AdamW, --compile for torch.compile, --bf16 for bf16
autocast; --threads and --steps), printing one JSON line with tokens_per_s, and setting its shape
in one line, `V, D, L, H, T, B, FF = 96, 128, 4, 4, 256, 16, 4`.

For every shape (d_model 128, 256, 512, 768 at seq 256; seq 1,024 and 4,096 at d_model 256; 4
layers, 4 heads, batch 16 as bench-gpt, 4 at seq 4,096, where recall's kept attention weights would
need 54 GiB at 16) it runs `recall bench train` on bench-gpt's recipe with the shape's keys added,
in fp32 and bf16, and the peer with d_model, seq and batch set in that line (eager fp32 and eager bf16
autocast; with --compile, the compiled modes too), each under /usr/bin/time for its peak memory.
Prints one JSON line per run and a Markdown table at the end:

    python3 scripts/bench_scaling.py --peer PATH/peer_gpt2.py --recall build/recall --threads 2
                                     [--compile] [--only 128x256] [--rounds 3]

With --rounds N every run is repeated N times, the modes interleaved, and the table gives medians.

The peer runs under $RECALL_TORCH_VENV (default ~/.cache/recall/torch2-venv, scripts/torch2_venv.sh).
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPES = [(128, 256), (256, 256), (512, 256), (768, 256), (256, 1024), (256, 4096)]  # (d, T)
PEER_SHAPE = "V, D, L, H, T, B, FF = 96, 128, 4, 4, 256, 16, 4"

def fail(message):
    """One line naming the problem and its fix; exit status 2, as recall's own errors."""
    print(f"bench_scaling: {message}", file=sys.stderr)
    sys.exit(2)


ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--peer", required=True, help="the PyTorch 2.x peer script (peer_gpt2.py)")
ap.add_argument("--recall", default=str(ROOT / "build" / "recall"))
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--compile", action="store_true", help="also the peer under torch.compile")
ap.add_argument("--only", help="one shape, DxT (e.g. 256x1024)")
ap.add_argument("--rounds", type=int, default=1, help="runs of each mode, interleaved; the table gives medians")
ap.add_argument("--json", help="append every shape's row (medians) to this file")
args = ap.parse_args()
venv = pathlib.Path(os.environ.get("RECALL_TORCH_VENV", pathlib.Path.home() / ".cache/recall/torch2-venv"))
python = venv / "bin" / "python"
PEER = pathlib.Path(args.peer)
for need, what in ((pathlib.Path(args.recall), "the recall binary (--recall)"), (python, "the torch 2.x venv"),
                   (PEER, "the peer (--peer)")):
    if not need.exists():
        fail(f"{what} not found at {need}")
shapes = SHAPES
if args.only:
    m = re.fullmatch(r"(\d+)x(\d+)", args.only)
    if not m:
        fail(f"--only {args.only}: expected DxT, e.g. 256x1024")
    shapes = [(int(m.group(1)), int(m.group(2)))]


def batch_for(t):
    return 16 if t <= 1024 else 4


def steps_for(d, t):
    # about 0.3 G tokens x d^2 of work per timed run: at least 4 timed steps, at most bench-gpt's 28
    tokens = batch_for(t) * t
    return max(6, min(30, int(30 * 4096 * 128 * 128 / (tokens * d * d)) + 2))


def timed(cmd):
    """Runs cmd under /usr/bin/time; returns (its JSON line, peak RSS in MiB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf.name] + cmd, capture_output=True, text=True)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no message"])[-1]
            fail(f"{' '.join(cmd)} failed ({p.returncode}): {last}")
        rss = int(tf.read().strip().splitlines()[-1]) / 1024
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), rss


def recall_run(d, t, precision, steps):
    base = (ROOT / "train" / "bench-gpt.toml").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        recipe = pathlib.Path(tmp) / f"bench-gpt-d{d}-t{t}.toml"
        base = re.sub(r"(?m)^batch_size = 16$", f"batch_size = {batch_for(t)}", base)
        recipe.write_text(base + f"\n# the shape under test\nd_model = {d}\nseq_len = {t}\n")
        out, rss = timed([args.recall, "--threads", str(args.threads), "bench", "train", "--config", str(recipe),
                          "--steps", str(steps), "--precision", precision])
    return out, rss


def peer_run(d, t, mode, steps):
    src = PEER.read_text()
    if PEER_SHAPE not in src:
        fail(f"{PEER} no longer sets its shape as `{PEER_SHAPE}`")
    code = ("import sys; p = sys.argv[1]; src = open(p).read().replace(%r, %r); sys.argv = [p] + sys.argv[2:]; "
            "exec(compile(src, p, 'exec'))" % (PEER_SHAPE, PEER_SHAPE.replace("128, 4, 4, 256, 16", f"{d}, 4, 4, {t}, {batch_for(t)}")))
    flags = {"eager fp32": [], "eager bf16": ["--bf16"], "compiled fp32": ["--compile"],
             "compiled bf16": ["--compile", "--bf16"]}[mode]
    return timed([str(python), "-c", code, str(PEER), "--threads", str(args.threads), "--steps", str(steps)] + flags)


rows = []
modes = ["eager fp32", "eager bf16"] + (["compiled fp32", "compiled bf16"] if args.compile else [])
for d, t in shapes:
    steps = steps_for(d, t)
    runs = {}  # name -> [(tokens/s, useful / GEMM rate, peak RSS MiB)]
    for _ in range(args.rounds):
        for precision in ("fp32", "bf16"):
            out, rss = recall_run(d, t, precision, steps)
            out.update(shape=f"{d}x{t}", rss_mib=round(rss))
            print(json.dumps(out), flush=True)
            runs.setdefault(f"recall {precision}", []).append((out["tokens_per_s"], out["useful_gemm"], rss))
        for mode in modes:
            out, rss = peer_run(d, t, mode, max(4, steps - 2))
            out.update(shape=f"{d}x{t}", mode=mode, rss_mib=round(rss))
            print(json.dumps(out), flush=True)
            runs.setdefault(f"peer {mode}", []).append((out["tokens_per_s"], None, rss))
    row = {"d_model": d, "seq_len": t, "batch": batch_for(t), "steps": steps, "rounds": args.rounds}
    for name, got in runs.items():
        got = sorted(got, key=lambda g: g[0])
        row[name] = got[len(got) // 2]  # the median run (the middle one of an odd count)
        row[name + " runs"] = [g[0] for g in got]
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    rows.append(row)

print()
print("| d_model x seq | recall fp32 | recall bf16 | useful / GEMM rate (fp32, bf16) | "
      + " | ".join(f"peer {m}" for m in modes) + " | lead | peak RSS recall / peer (MiB) |")
print("|---|" + "---:|" * (5 + len(modes)))
for r in rows:
    ours = max(r["recall fp32"][0], r["recall bf16"][0])
    best_mode = max(modes, key=lambda m: r[f"peer {m}"][0])
    theirs = r[f"peer {best_mode}"][0]
    rss_ours = max(r["recall fp32"][2], r["recall bf16"][2])
    rss_theirs = max(r[f"peer {m}"][2] for m in modes)
    shape = f"{r['d_model']} x {r['seq_len']}" + ("" if r["batch"] == 16 else f" (batch {r['batch']})")
    print(f"| {shape} | {r['recall fp32'][0]:,} | {r['recall bf16'][0]:,} | "
          f"{r['recall fp32'][1]:.2f}, {r['recall bf16'][1]:.2f} | "
          + " | ".join(f"{r[f'peer {m}'][0]:,}" for m in modes)
          + f" | {ours / theirs:.2f}x | {rss_ours:,.0f} / {rss_theirs:,.0f} |")
if args.rounds > 1:
    print()
    for r in rows:
        print(f"{r['d_model']} x {r['seq_len']}, tokens/s of each run: "
              + "; ".join(f"{k[:-5]} {', '.join(f'{x:,}' for x in v)}" for k, v in r.items() if k.endswith(" runs")))
