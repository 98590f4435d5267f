#!/usr/bin/env python3
"""Where one recalling head's interference comes from, on mqar prompts at several lengths.

    recall export --checkpoint RUN --out EXPORT
    python3 scripts/isr_terms.py EXPORT --head 0,0 [--multiples 1,2,4] [--pairs 8] [--values 256]

A query at position t asks the key of pair i; the head reads pair i's value position (key
position + offset, --offset, 1 as inspect finds it on mqar-store) and weighs every other key j it
sees by w_j / w_c, so ISR^2 = sum_j (w_j / w_c)^2 (docs/science.md §2). This sorts those terms by
what sits at j: another pair's key or value position (or one holding the asked value again, once
the pairs outnumber the values), the asked pair's own key, the query's own position, another
query's key, the filler between queries, or position 0. It prints, per multiple
m of the training length (the pairs growing with it, as `recall inspect --pairs grow`), the median
ISR over the queries, each kind's share of the summed ISR^2, and the median cosine of the read key
and of the nearest other key: the numbers that say whether a rule's sharpening or the keys a longer
prompt adds move the ISR. The prompts follow recall's mqar layout (src/train/task_mqar.cpp): the
pairs (key, value) first (the values distinct while the pairs are at most the values, drawn with
replacement past that), then each key asked once at an even offset of the query region, filler 0
between. Token ids: filler 0, keys 1 .. vocab - values - 1, then the values. Needs torch (any 2.x
or Debian's 1.13) and python/recall_model.py.
"""
import argparse
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from recall_model import load  # noqa: E402


def prompts(gen, B, T, n, vocab, values):
    """B mqar prompts of T tokens with n pairs: (B, T) ids and per prompt [(query position, pair)]."""
    key_end = vocab - values
    x = torch.zeros(B, T, dtype=torch.long)
    asked = []
    for b in range(B):
        keys = torch.randperm(key_end - 1, generator=gen)[:n] + 1
        if n <= values:  # distinct, as recall draws them; past that, with replacement
            vals = torch.randperm(values, generator=gen)[:n] + key_end
        else:
            vals = torch.randint(values, (n,), generator=gen) + key_end
        x[b, 0:2 * n:2], x[b, 1:2 * n:2] = keys, vals
        slots = torch.randperm((T - 1 - 2 * n) // 2 + 1, generator=gen)[:n]
        row = []
        for i in range(n):
            p = 2 * n + 2 * int(slots[i])
            x[b, p] = keys[i]
            row.append((p, i))
        asked.append(row)
    return x, asked


def kind(x, b, j, t, i, n):
    if j == 2 * i:
        return "asked pair's key"
    if j == t:
        return "query's own position"
    if j == 0:
        return "position 0"
    if j < 2 * n and j % 2 == 1 and int(x[b, j]) == int(x[b, 2 * i + 1]):
        return "the asked value again"  # more pairs than values: values repeat
    if j < 2 * n:
        return "other pair's key" if j % 2 == 0 else "other pair's value"
    return "other query's key" if int(x[b, j]) != 0 else "filler"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("export", help="a folder written by recall export")
    ap.add_argument("--head", required=True, help="layer,head")
    ap.add_argument("--multiples", default="1,2,4")
    ap.add_argument("--pairs", type=int, default=8, help="mqar_pairs at the training length")
    ap.add_argument("--values", type=int, default=256, help="mqar_values (0: as many as keys)")
    ap.add_argument("--offset", type=int, default=1, help="the read key's offset from the pair")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    layer, head = (int(v) for v in a.head.split(","))
    model = load(a.export).double().eval()
    vocab, L = model.config["vocab_size"], model.config["seq_len"]
    values = a.values or (vocab - 1) // 2
    gen = torch.Generator().manual_seed(a.seed)
    prefix = f"blocks.{layer}.attn."
    for m in (int(v) for v in a.multiples.split(",")):
        T, n = m * L, m * a.pairs
        x, asked = prompts(gen, a.prompts, T, n, vocab, values)
        isr, share, read, nearest = [], {}, [], []
        for b0 in range(0, a.prompts, 8):  # (8, H, T, T) weights at a time
            cache = {}
            with torch.no_grad():
                model(x[b0:b0 + 8], cache)
            w = cache[prefix + "weights"][:, head]  # (b, T, N + T)
            N = w.shape[-1] - T
            q = torch.nn.functional.normalize(cache[prefix + "q"][:, :, head], dim=-1)
            score = torch.einsum("btd,bsd->bts", q, cache[prefix + "k"][:, N:, head])  # (b, T, T)
            for bb in range(w.shape[0]):
                b = b0 + bb
                for t, i in asked[b]:
                    c = 2 * i + a.offset
                    r2 = (w[bb, t, N:N + t + 1] / w[bb, t, N + c]) ** 2
                    r2[c] = 0
                    isr.append(math.sqrt(float(r2.sum())))
                    for j in range(t + 1):
                        if j != c:
                            k = kind(x, b, j, t, i, n)
                            share[k] = share.get(k, 0.0) + float(r2[j])
                    s = score[bb, t, :t + 1].clone()
                    read.append(float(s[c]))
                    s[c] = -2
                    nearest.append(float(s.max()))
        total = sum(share.values())
        print(f"{m}x ({T} tokens, {n} pairs): median ISR {statistics.median(isr):.4g}; cosine of "
              f"the read key {statistics.median(read):.3f}, of the nearest other "
              f"{statistics.median(nearest):.3f} (medians over {len(isr)} queries)")
        for k, v in sorted(share.items(), key=lambda kv: -kv[1]):
            print(f"  {k:22s} {v / total:6.1%} of ISR^2")


if __name__ == "__main__":
    main()
