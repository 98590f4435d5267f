#!/usr/bin/env python3
"""The held-out table of scripts/forecast_heldout.sh: per configuration, over its seeds, what the
forecast (written first, forecast.json) said against what was measured after (inspect.json,
accuracy.json). Standard library only.

  python3 scripts/forecast_heldout_table.py OUT_DIR

Columns, per configuration (n: the seeds that finished):
- heads: recalling heads that hold at 1x (ISR < 1), mean over the seeds;
- ISR 64x, none: the forecast ISR at 64x under none of those heads (mean over the heads), the
  seeds' median, beside inspect's measured ISR of the same heads;
- worst miss: per seed, the largest forecast/measured ratio (either way) of a held head at any
  multiple to 64x under any of the five rules; the median and the worst over the seeds;
- failure: the memories where the forecast ISR reaches the ISR at which the development runs'
  accuracy halved (fitted once, on `store`), beside the memories where the measured accuracy under
  none crosses 0.5 ("-": not within 64x); foretold: both hold to 64x, or both fail within 1.5x;
- prescribed c: each seed's c ("none" where the ISR at 1x is above the level already), the seeds
  where c holds accuracy >= 0.95 at 64x and where c / 2 does not, of those with a c;
- c on accuracy: the same for the prescription on the forecast accuracy (accuracy_by_accuracy.json);
- published c: the medians of Chen et al.'s and Hayase and Karakida's c for the same heads, and
  the seeds where each holds accuracy >= 0.95 at 64x.
"""
import glob
import json
import math
import os
import statistics
import sys


def held(forecast):
    """The trained rule's forecast restricted to the heads with ISR < 1 at 1x: {(l, h): isr list}."""
    out = {}
    for f in forecast["forecasts"]:
        if f["rule"] == forecast["trained_rule"]:
            for h in f["heads"]:
                if h["isr"][0] < 1:
                    out[(h["layer"], h["head"])] = h["isr"]
    return out


def seed_row(d):
    f = json.load(open(os.path.join(d, "forecast.json")))
    ins = json.load(open(os.path.join(d, "inspect.json")))
    acc = json.load(open(os.path.join(d, "accuracy.json")))
    T = f["seq_len"]
    keep = held(f)
    measured = {}
    for a in ins["attention"]:
        measured[(a["rule"], a["seq_len"] // T)] = {
            (h["layer"], h["head"]): h["isr"]["median"] for h in a["heads"]
        }
    worst = 1.0
    for fr in f["forecasts"]:
        for h in fr["heads"]:
            key = (h["layer"], h["head"])
            if key not in keep:
                continue
            for k, m in enumerate(f["multiples"]):
                mv = measured.get((fr["rule"], m), {}).get(key)
                if mv and mv > 0 and h["isr"][k] > 0:
                    worst = max(worst, h["isr"][k] / mv, mv / h["isr"][k])
    none = next(fr for fr in f["forecasts"] if fr["rule"] == "none")
    none_held = [h["isr"][-1] for h in none["heads"] if (h["layer"], h["head"]) in keep]
    meas_held = [measured[("none", f["multiples"][-1])].get(k) for k in keep]
    meas_held = [v for v in meas_held if v is not None]
    at64 = {p["rule"]: p["accuracy"] for p in acc["points"] if p["multiple"] == 64}
    p = f["prescription"]
    c = p["c"]
    pc = f.get("published_criteria", {})
    row = {
        "heads": len(keep),
        "isr_f": statistics.mean(none_held) if none_held else float("nan"),
        "isr_m": statistics.mean(meas_held) if meas_held else float("nan"),
        "worst": worst,
        "none_acc": at64.get("none"),
        "c": c,
        "c_holds": None,
        "half_fails": None,
        "c_critical": pc.get("c_critical"),
        "c_gap_count": pc.get("c_gap_count"),
    }
    if c is not None:
        rules = [r for r in at64 if r.startswith("log:")]
        # the larger c is the prescribed one, the other its half
        rules.sort(key=lambda r: float(r[4:]))
        if len(rules) == 2:
            row["c_holds"] = at64[rules[1]] >= 0.95
            row["half_fails"] = at64[rules[0]] < 0.95
    # the prescription on the forecast accuracy: its c, and whether it and its half hold at 64x
    pa = f.get("prescription_by_accuracy", {})
    row["c_acc"] = pa.get("c")
    row["c_acc_holds"] = row["half_acc_fails"] = None
    by_acc = os.path.join(d, "accuracy_by_accuracy.json")
    if row["c_acc"] is not None and os.path.exists(by_acc):
        a = sorted(((float(p["rule"][4:]), p["accuracy"]) for p in json.load(open(by_acc))["points"]))
        if len(a) == 2:
            row["c_acc_holds"] = a[1][1] >= 0.95
            row["half_acc_fails"] = a[0][1] < 0.95
    row["critical_holds"] = row["gap_count_holds"] = None
    pub = os.path.join(d, "published.json")
    if os.path.exists(pub):
        acc_pub = {p["rule"]: p["accuracy"] for p in json.load(open(pub))["points"]}
        for key, c_key in (("critical_holds", "c_critical"), ("gap_count_holds", "c_gap_count")):
            rule = next((r for r in acc_pub if row[c_key] is not None
                         and abs(float(r[4:]) - row[c_key]) <= 5e-3 * row[c_key] + 1e-12), None)
            if rule is not None:
                row[key] = acc_pub[rule] >= 0.95
    return row


def crossing(xs, ys, level, rising):
    """Where ys crosses level, interpolated linearly in ys and log xs; None where it does not."""
    for k in range(1, len(xs)):
        a, b = ys[k - 1], ys[k]
        if (a < level <= b) if rising else (a >= level > b):
            f = (level - a) / (b - a)
            return math.exp(math.log(xs[k - 1]) + f * (math.log(xs[k]) - math.log(xs[k - 1])))
    return None


def curves(d):
    """Per multiple under none: the held heads' forecast ISR (their mean), their measured ISR, and
    inspect's accuracy, with the memories in context."""
    f = json.load(open(os.path.join(d, "forecast.json")))
    ins = json.load(open(os.path.join(d, "inspect.json")))
    keep = held(f)
    none = next(fr for fr in f["forecasts"] if fr["rule"] == "none")
    fc = [statistics.mean(h["isr"][k] for h in none["heads"] if (h["layer"], h["head"]) in keep)
          if keep else float("nan") for k in range(len(f["multiples"]))]
    by_len = {a["seq_len"] // f["seq_len"]: a for a in ins["attention"] if a["rule"] == "none"}
    ms, acc = [], []
    for m in f["multiples"]:
        a = by_len[m]
        isr = [h["isr"]["median"] for h in a["heads"] if (h["layer"], h["head"]) in keep]
        ms.append(statistics.mean(isr) if isr else float("nan"))
        acc.append(a["accuracy"])
    return f["pairs"], fc, ms, acc


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def held_count(rows, key):
    """'k of n': the seeds where a c held accuracy >= 0.95 at 64x, of those measured."""
    measured = [r[key] for r in rows if r[key] is not None]
    return f"{sum(measured)} of {len(measured)}"


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def interpolate(xs, ys, x):
    """ys at x, linear in log xs."""
    for k in range(1, len(xs)):
        if xs[k - 1] <= x <= xs[k]:
            f = (math.log(x) - math.log(xs[k - 1])) / (math.log(xs[k]) - math.log(xs[k - 1]))
            return ys[k - 1] + f * (ys[k] - ys[k - 1])
    return None


def main():
    out = sys.argv[1]
    groups, runs = {}, {}
    for d in sorted(glob.glob(os.path.join(out, "*-*"))):
        if not os.path.exists(os.path.join(d, "accuracy.json")):
            continue
        name = os.path.basename(d).rsplit("-", 1)[0]
        groups.setdefault(name, []).append(seed_row(d))
        runs.setdefault(name, []).append(curves(d))
    # The ISR at which accuracy halves, from the development runs (mqar-store as it is): the
    # measured ISR of the held heads where the accuracy under none crosses 0.5, median over seeds.
    theta = med(interpolate(p, ms, x) for p, _, ms, acc in runs.get("store", [])
                for x in [crossing(p, acc, 0.5, rising=False)] if x is not None)
    print(f"accuracy halves at ISR {fmt(theta)} (the store runs' median); failure = where the "
          "forecast ISR reaches it, against where the measured accuracy under none crosses 0.5\n")
    print("| config | n | held heads | ISR 64x none: forecast / measured | worst miss: median, worst "
          "| failure (memories): forecast / measured | failure foretold | accuracy 64x none "
          "| c prescribed per seed | c holds | c/2 fails | c on accuracy per seed | holds | c/2 fails "
          "| c Chen et al. (holds) | c gap counting (holds) |")
    print("|---|---:|---:|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|")
    for name, rows in groups.items():
        n = len(rows)
        accs = [r["none_acc"] for r in rows if r["none_acc"] is not None]
        with_c = [r for r in rows if r["c_holds"] is not None]
        fails, right = [], 0
        for p, fc, _, acc in runs[name]:
            f = crossing(p, fc, theta, rising=True) if theta is not None else None
            m = crossing(p, acc, 0.5, rising=False)
            fails.append(f"{fmt(f, '.0f')}/{fmt(m, '.0f')}")
            # foretold: both say it holds to the target, or both fail within 1.5x of each other
            right += (f is None and m is None) or (f is not None and m is not None
                                                   and max(f / m, m / f) <= 1.5)
        print(
            f"| {name} | {n} | {statistics.mean(r['heads'] for r in rows):.1f} "
            f"| {fmt(med(r['isr_f'] for r in rows))} / {fmt(med(r['isr_m'] for r in rows))} "
            f"| {fmt(med(r['worst'] for r in rows), '.2f')}x, {max(r['worst'] for r in rows):.2f}x "
            f"| {', '.join(fails)} | {right} of {n} "
            f"| {fmt(med(accs))} [{fmt(min(accs) if accs else None)}, {fmt(max(accs) if accs else None)}] "
            f"| {', '.join(fmt(r['c']) if r['c'] is not None else 'none' for r in rows)} "
            f"| {sum(r['c_holds'] for r in with_c)} of {len(with_c)} "
            f"| {sum(r['half_fails'] for r in with_c)} of {len(with_c)} "
            f"| {', '.join(fmt(r['c_acc']) if r['c_acc'] is not None else 'none' for r in rows)} "
            f"| {held_count(rows, 'c_acc_holds')} | {held_count(rows, 'half_acc_fails')} "
            f"| {fmt(med(r['c_critical'] for r in rows))} ({held_count(rows, 'critical_holds')}) "
            f"| {fmt(med(r['c_gap_count'] for r in rows))} ({held_count(rows, 'gap_count_holds')}) |"
        )


if __name__ == "__main__":
    main()
