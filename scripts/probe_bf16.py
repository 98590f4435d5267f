#!/usr/bin/env python3
"""Whether the probe could run its products in bf16: how far bf16 similarity and value products
(fp32 accumulation) move the ISR that the probe measures. Plain PyTorch, independent of recall:
keys and values uniform on the unit sphere (d_k = d_v = 64), each stored key queried, the store
f(k_q) = sum_i w(s_i) v_i with s_i = k_q . k_i; ISR = |sum_{i!=q} w(s_i) v_i| / |w(s_q) v_q|.
The same draws in fp32 and with q, K, w and V rounded to bf16 (products summed in fp32).
    /usr/bin/python3 scripts/probe_bf16.py     # about a minute on 2 cores"""
import math, torch
torch.manual_seed(0)
d, Q, trials = 64, 128, 4
bf = lambda x: x.to(torch.bfloat16).float()
stores = {
    "outer_product": lambda s, M: s,
    "relu2": lambda s, M: s.clamp(min=0) ** 2,
    "exp3": lambda s, M: 1 + s + s**2 / 2 + s**3 / 6,
    "softmax(beta 8)": lambda s, M: torch.exp(8 * (s - 1)),
    "softmax(su, beta 2 ln M)": lambda s, M: torch.exp(2 * math.log(M) * (s - 1)),
}
def isr(keys, vals, w, M, round_):
    r = round_ if round_ else (lambda x: x)
    q = keys[:Q]
    s = r(q) @ r(keys).t()                                   # (Q, M)
    wt = w(s, M)
    sig = wt[torch.arange(Q), torch.arange(Q)].unsqueeze(1) * vals[:Q]
    f = r(wt) @ r(vals)                                      # (Q, d)
    return ((f - sig).norm(dim=1) / sig.norm(dim=1))
print(f"{'store':26s} {'M':>6s} {'rms ISR fp32':>13s} {'bf16':>11s} {'rel diff':>9s}")
for name, w in stores.items():
    for M in (128, 1024, 8192, 32768):
        a, b = [], []
        for t in range(trials):
            k = torch.nn.functional.normalize(torch.randn(M, d, dtype=torch.float64), dim=1).float()
            v = torch.nn.functional.normalize(torch.randn(M, d, dtype=torch.float64), dim=1).float()
            a.append(isr(k, v, w, M, None)); b.append(isr(k, v, w, M, bf))
        ra = torch.cat(a).pow(2).mean().sqrt().item(); rb = torch.cat(b).pow(2).mean().sqrt().item()
        print(f"{name:26s} {M:6d} {ra:13.4g} {rb:11.4g} {abs(rb-ra)/ra:9.2%}")
