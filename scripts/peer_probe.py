#!/usr/bin/env python3
"""Peer of `recall probe`: the same capacity measurement written plainly in PyTorch.

    apt-get install python3-torch
    recall probe --json probe.json                       # recall's measurement and its plan
    /usr/bin/python3 scripts/peer_probe.py --plan probe.json --threads 2 [--out peer.json] [--compare]

Reads the plan from recall's JSON (stores, d_k, d_v, queries, trials, beta, each store's M grid,
each rule point's M and beta) and measures it again with memories of its own (torch's generator):
keys and values uniform on the unit sphere, streamed in chunks so that memory stays flat in M; the
queries are the first stored keys; for every store and M the interference-to-signal ratio
    ISR_j = || sum_{i != j} w_i(k_j) v_i || / || w_j(k_j) v_j ||,  w_i(x) = sigma(k_i . x)
from one running sum per weight function, read off at each grid point (least squares by its
pseudo-inverse in float64, one M at a time). Prints one JSON line with the capacities (M where the
median and the RMS ISR cross 1, interpolated in log-log as recall does) and its time; --out writes
the curves in recall's JSON layout; --compare checks every capacity and curve point against
recall's within the trial noise and exits 1 when one is off.
"""
import argparse, json, math, re, sys, time

import torch
import torch.nn.functional as F


def relative_weight(store, beta):
    """sigma(s) / sigma(1) as a function of the similarities s."""
    if store in ("outer_product", "linear"):
        return lambda s: s.clone()  # the diagonal is zeroed in place: not in the shared S
    if store == "softmax":
        return lambda s: torch.exp((s - 1.0) * beta)
    if store == "swiglu":
        one = 1.0 / (1.0 + math.exp(-1.0))
        return lambda s: s * s * torch.sigmoid(s) / one
    m = re.fullmatch(r"relu(\d*)", store)
    if m:
        p = int(m.group(1) or 1)
        return lambda s: torch.relu(s) ** p
    m = re.fullmatch(r"exp(\d+)", store)
    if m:
        n = int(m.group(1))
        one = sum(beta**j / math.factorial(j) for j in range(n))
        return lambda s: sum((beta * s) ** j / math.factorial(j) for j in range(n)) / one
    raise SystemExit(f"peer_probe: store '{store}' is not supported here (use recall's --stores)")


def memories(gen, n, d_k, d_v):
    k = F.normalize(torch.randn(n, d_k, generator=gen), dim=1)
    v = F.normalize(torch.randn(n, d_v, generator=gen), dim=1)
    return k, v


def streamed_isr(accs, d_k, d_v, gen, chunk):
    """accs: list of dicts {w, q, grid}; fills acc['isr'][M] for each M in its grid."""
    end = max(max(a["grid"]) for a in accs)
    q_max = max(a["q"] for a in accs)
    bounds = sorted({M for a in accs for M in a["grid"]})
    for a in accs:
        a["sums"], a["signal"], a["isr"] = torch.zeros(a["q"], d_v), torch.zeros(a["q"]), {}
    queries = None
    for b0 in range(0, end, chunk):  # blocks of the stream; chunk >= q_max, so the first has the queries
        Kb, Vb = memories(gen, min(chunk, end - b0), d_k, d_v)
        if queries is None:
            queries = Kb[:q_max].clone()
        c0 = b0
        while c0 < b0 + len(Kb):  # pieces of the block between grid points
            c1 = min([b0 + len(Kb)] + [M for M in bounds if M > c0])
            K, V = Kb[c0 - b0 : c1 - b0], Vb[c0 - b0 : c1 - b0]
            S = queries @ K.T  # (q_max, C)
            for a in accs:
                if max(a["grid"]) <= c0:
                    continue
                W = a["w"](S[: a["q"]])
                if c0 < a["q"]:  # each query meets itself once: its signal
                    j = torch.arange(c0, min(c1, a["q"]))
                    a["signal"][j] = W[j, j - c0]
                    W[j, j - c0] = 0
                a["sums"] += W @ V
                if c1 in a["grid"]:
                    n = min(a["q"], c1)
                    a["isr"][c1] = (a["sums"][:n].norm(dim=1) / a["signal"][:n].abs()).double()
            c0 = c1


def least_squares_isr(M, q, d_k, d_v, gen):
    K, V = memories(gen, M, d_k, d_v)
    K, V = K.double(), V.double()
    n = min(q, M)
    W = K[:n] @ torch.linalg.pinv(K)  # (n, M): the minimum-norm least-squares weights
    j = torch.arange(n)
    signal = W[j, j].abs()
    W[j, j] = 0
    return (W @ V).norm(dim=1) / signal


def summary(x):
    x = torch.cat(x) if isinstance(x, list) else x
    return {"isr_median": float(torch.quantile(x, 0.5)), "isr_rms": float(x.pow(2).mean().sqrt()),
            "count": len(x)}


def crossing(Ms, isr):
    for g in range(1, len(Ms)):
        a, b = isr[g - 1], isr[g]
        if a < 1.0 <= b:
            la, lb = math.log(max(a, 1e-300)), math.log(b)
            x0, x1 = math.log(Ms[g - 1]), math.log(Ms[g])
            return math.exp(x0 - la * (x1 - x0) / (lb - la))
    return None


def run(plan, chunk, seed):
    c = plan["config"]
    d_k, d_v, q, trials = c["d_k"], c["d_v"], c["queries"], c["trials"]
    stores = [(s["store"], [p["M"] for p in s["curve"]]) for s in plan["stores"]]
    rules = [(r["rule"], [(p["M"], p["beta"]) for p in r["curve"]]) for r in plan["rules"]]
    per_store = {name: {M: [] for M in grid} for name, grid in stores}
    per_rule = {name: {M: [] for M, _ in pts} for name, pts in rules}
    for t in range(trials):
        gen = torch.Generator().manual_seed(seed * 100003 + t)
        accs, by_key = [], {}

        def acc(key, w, qq, M):
            if key not in by_key:
                by_key[key] = {"w": w, "q": qq, "grid": set()}
                accs.append(by_key[key])
            by_key[key]["grid"].add(M)
            return by_key[key]

        reads = []  # (table, name, M, accumulator, queries)
        for name, grid in stores:
            if name == "least_squares":
                continue
            for M in grid:
                reads.append((per_store, name, M, acc((name, q), relative_weight(name, c["beta"]), q, M), q))
        for name, pts in rules:
            for M, beta in pts:
                a = acc(("softmax", beta, c["rule_queries"]), relative_weight("softmax", beta),
                        c["rule_queries"], M)
                reads.append((per_rule, name, M, a, c["rule_queries"]))
        if accs:
            streamed_isr(accs, d_k, d_v, gen, max(chunk, q, c["rule_queries"]))
        for table, name, M, a, qq in reads:
            table[name][M].append(a["isr"][M][: min(qq, M)])
        for name, grid in stores:
            if name == "least_squares":
                for M in grid:
                    g = torch.Generator().manual_seed(seed * 100003 + t + 7919 * M)
                    per_store[name][M].append(least_squares_isr(M, q, d_k, d_v, g))
    out = {"stores": [], "rules": []}
    for name, grid in stores:
        curve = [dict(summary(per_store[name][M]), M=M) for M in grid]
        med = crossing(grid, [p["isr_median"] for p in curve])
        rms = crossing(grid, [p["isr_rms"] for p in curve])
        trial_rms = [crossing(grid, [float(per_store[name][M][t].pow(2).mean().sqrt()) for M in grid])
                     for t in range(trials)]
        sem = None
        if trials >= 2 and all(x is not None for x in trial_rms):
            sem = float(torch.tensor(trial_rms).std() / math.sqrt(trials))
        out["stores"].append({"store": name, "curve": curve,
                              "capacity": {"median": med, "rms": rms, "rms_sem": sem}})
    for name, pts in rules:
        out["rules"].append({"rule": name, "curve": [dict(summary(per_rule[name][M]), M=M, beta=b)
                                                     for M, b in pts]})
    return out


def compare(ours, theirs, trials):
    """Capacities within 4 of their combined standard errors (and 2 %); rule medians within 15 %."""
    bad = []
    for a, b in zip(ours["stores"], theirs["stores"]):
        ca, cb = a["capacity"], b["capacity"]
        if ca["rms"] is None or cb["rms"] is None:
            if (ca["rms"] is None) != (cb["rms"] is None):
                bad.append(f"{a['store']}: rms crossing {ca['rms']} vs recall's {cb['rms']}")
            continue
        sem = math.hypot(ca["rms_sem"] or 0.05 * ca["rms"], cb["rms_sem"] or 0.05 * cb["rms"])
        if abs(ca["rms"] - cb["rms"]) > 4 * sem + 0.02 * cb["rms"]:
            bad.append(f"{a['store']}: rms capacity {ca['rms']:.4g} vs recall's {cb['rms']:.4g} "
                       f"(noise {sem:.3g})")
    for a, b in zip(ours["rules"], theirs["rules"]):
        for p, r in zip(a["curve"], b["curve"]):
            if abs(p["isr_median"] - r["isr_median"]) > 0.15 * r["isr_median"] * math.sqrt(4 / trials):
                bad.append(f"rule {a['rule']} M {p['M']}: median ISR {p['isr_median']:.4g} vs "
                           f"recall's {r['isr_median']:.4g}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", required=True, help="recall probe's JSON (its plan; --compare: its numbers)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--chunk", type=int, default=16384, help="memories per streamed chunk")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the peer's curves and capacities as JSON here")
    ap.add_argument("--compare", action="store_true", help="check against the plan's numbers")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    with open(a.plan) as f:
        plan = json.load(f)
    t0 = time.perf_counter()
    with torch.no_grad():
        ours = run(plan, a.chunk, a.seed)
    seconds = time.perf_counter() - t0
    if a.out:
        with open(a.out, "w") as f:
            json.dump(ours, f, indent=1)
    line = {"impl": "pytorch-peer", "torch": torch.__version__, "threads": torch.get_num_threads(),
            "seconds": seconds,
            "capacity_median": {s["store"]: s["capacity"]["median"] for s in ours["stores"]},
            "capacity_rms": {s["store"]: s["capacity"]["rms"] for s in ours["stores"]}}
    if a.compare:
        bad = compare(ours, plan, plan["config"]["trials"])
        line["agrees"] = not bad
        for b in bad:
            print("peer_probe: " + b, file=sys.stderr)
    print(json.dumps(line))
    return 1 if a.compare and bad else 0


if __name__ == "__main__":
    sys.exit(main())
