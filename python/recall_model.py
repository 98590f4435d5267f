"""recall's transformer in plain PyTorch, to load a model written by `recall export`.

    import sys; sys.path.insert(0, "python")           # this folder of the recall repository
    from recall_model import load
    model = load("runs/mqar-export")                   # logits = model(torch.tensor([[1, 2, 3]]))
    model = load("runs/mqar-export", weights="safetensors")   # the same, from model.safetensors

The architecture is the one of recall's C++ model, written again from its definition (only torch):
decoder-only and pre-norm,
    x = tok_emb(idx) [+ pos_emb[:T]]
    per block: x = x + attn(norm1(x));  x = x + ffn(norm2(x))   (no second half with ffn = none)
    logits = norm_f(x) @ W^T,  W = head.weight, or tok_emb.weight with tied_head
Attention is causal softmax attention whose logits q_t . k_s / sqrt(d_head) are multiplied, for
query position t, by beta(M) / beta_0 with M = t + 1 keys seen and L = seq_len (the beta rule):
    none: 1    su: ln M / ln L    qwen: max(1, ln M / ln L)    yarn: (0.1 ln max(1, M / L) + 1)^2
    ssmax: s_h ln M with s learned per head.
attn_scale multiplies every rule. attn_qk_norm scales each head's q and k to unit length, so the
logit is beta cos(q, k) with beta = attn_scale times the rule's factor (no 1 / sqrt(d_head)), and
attn_scale_learned replaces attn_scale by a parameter per head, beta (H,).
attn_qk_rmsnorm is Qwen3's RMSNorm of each head's q and k with learned gains (q_norm, k_norm), before
RoPE. n_kv_heads = G < n_heads shares each key/value head among n_heads / G query heads in a row
(grouped-query attention); d_head gives the heads a width apart from d_model / n_heads; qkv_bias
puts biases on q, k and v alone.
attn_mem_kv = N learned key/values per head precede the context keys and every query sees them.
attn_conv = W mixes each channel of the q, k, v projections causally over positions before the
heads split: z'_t = sum_{j < W} conv[:, j] * z_{t-j}.
Feed-forward kinds: linear W2 W1 x, mlp W2 act(W1 x), glu W2 (act(W1 x) * W3 x), learned_kv
W2 softmax_h(q_h K_h^T / sqrt(d_head)) V_h with q = W1 x, or none; their width is intermediate_size,
or ffn_mult * d_model when it is 0. Positions: rope (rotate-half, base rope_base), learned, or
none. Every norm's eps is norm_eps. Parameter names equal those of the C++ modules, so the exported
state dict loads with strict=True.
"""
import json
import math
import os
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


def activate(name, s):
    if name == "relu":
        return F.relu(s)
    if name == "relu2":
        return F.relu(s).pow(2)
    if name == "relu3":
        return F.relu(s).pow(3)
    if name == "gelu":
        return F.gelu(s)  # the exact (erf) GELU
    if name == "silu":
        return F.silu(s)
    if name == "gelu_tanh":  # GPT-2's GELU, written out
        return 0.5 * s * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (s + 0.044715 * s.pow(3))))
    raise ValueError(f"activation '{name}' is unknown")


def beta_ratio(rule, M, L):
    """beta(M) / beta_0 for memory counts M (a float64 tensor) at training length L."""
    ln_l = math.log(L)
    if rule == "none":
        return torch.ones_like(M)
    if rule in ("su", "ssmax"):
        return torch.log(M) / ln_l
    if rule == "qwen":
        return torch.clamp_min(torch.log(M) / ln_l, 1.0)
    if rule == "yarn":
        t = 0.1 * torch.log(torch.clamp_min(M / L, 1.0)) + 1.0
        return t * t
    if rule.startswith("log:"):  # log:c, 1 + c ln(M / L) past L
        return 1.0 + float(rule[4:]) * torch.log(torch.clamp_min(M / L, 1.0))
    raise ValueError(f"beta rule '{rule}' is unknown")


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def rope(x, base):
    """Rotates channel pairs (i, i + d/2) of x (B, T, H, d) at position t by t * base^(-2i/d)."""
    T, d = x.shape[1], x.shape[-1]
    inv_freq = torch.pow(base, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)  # (T, d/2)
    angles = torch.cat([angles, angles], -1)  # (T, d)
    cos, sin = angles.cos().to(x.dtype)[:, None], angles.sin().to(x.dtype)[:, None]  # (T, 1, d)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Norm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.kind, self.eps, self.dim = c["norm"], c.get("norm_eps", 1e-5), c["d_model"]
        self.weight = nn.Parameter(torch.ones(self.dim))
        has_bias = self.kind == "layernorm" and c["bias"]
        self.bias = nn.Parameter(torch.zeros(self.dim)) if has_bias else None

    def forward(self, x):
        if self.kind == "layernorm":
            return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)
        return rms_norm(x, self.weight, self.eps)


class SsmaxScale(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(heads))


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        D, H = c["d_model"], c["n_heads"]
        self.G = c.get("n_kv_heads", 0) or H  # key/value heads
        self.H, self.dh, self.L = H, c.get("d_head", 0) or D // H, c["seq_len"]
        C = (H + 2 * self.G) * self.dh  # q, k, v channels
        self.rule, self.use_rope, self.base = c["attn_rule"], c["pos"] == "rope", c.get(
            "rope_base", 10000.0)
        self.N = c["attn_mem_kv"]
        self.s = c.get("attn_scale", 1.0)  # multiplies 1 / sqrt(d_head) under every rule
        self.W = c.get("attn_conv", 0)  # causal depthwise convolution of q, k, v; 0: none
        self.qk_norm = c.get("attn_qk_norm", False)
        self.eps = c.get("norm_eps", 1e-5)
        if c.get("attn_qk_rmsnorm", False):
            self.q_norm = nn.Parameter(torch.ones(self.dh))
            self.k_norm = nn.Parameter(torch.ones(self.dh))
        else:
            self.q_norm = self.k_norm = None
        if c.get("attn_scale_learned", False):
            self.beta = nn.Parameter(torch.full((H,), float(self.s)))  # per head, replaces s
        else:
            self.beta = None
        self.qkv = nn.Linear(D, C, bias=c["bias"] or c.get("qkv_bias", False))
        if self.W > 0:
            self.conv = nn.Parameter(torch.zeros(C, self.W))  # column j weighs position t - j
        self.out = nn.Linear(H * self.dh, D, bias=c["bias"])
        if self.N > 0:
            self.mem_k = nn.Parameter(torch.zeros(H, self.N, self.dh))
            self.mem_v = nn.Parameter(torch.zeros(H, self.N, self.dh))
        if self.rule == "ssmax":
            self.ssmax = SsmaxScale(H)

    def forward(self, x, cache=None, prefix=""):
        B, T, D = x.shape
        z = self.qkv(x)  # (B, T, (H + 2 G) dh)
        if self.W > 0:
            z = sum(F.pad(z, (0, 0, j, 0))[:, :T] * self.conv[:, j] for j in range(self.W))
        q, k, v = z.split([self.H * self.dh, self.G * self.dh, self.G * self.dh], -1)
        q = q.reshape(B, T, self.H, self.dh)  # (B, T, H, dh)
        k, v = k.reshape(B, T, self.G, self.dh), v.reshape(B, T, self.G, self.dh)  # (B, T, G, dh)
        if self.q_norm is not None:  # before RoPE, as transformers' Qwen3
            q, k = rms_norm(q, self.q_norm, self.eps), rms_norm(k, self.k_norm, self.eps)
        if self.use_rope:
            q, k = rope(q, self.base), rope(k, self.base)
        mem_k = self.mem_k if self.N > 0 else None
        if self.qk_norm:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
            mem_k = F.normalize(mem_k, dim=-1) if self.N > 0 else None
        if self.G != self.H:  # kv head j serves query heads j H/G .. (j + 1) H/G - 1
            k = k.repeat_interleave(self.H // self.G, 2)  # (B, T, H, dh)
            v = v.repeat_interleave(self.H // self.G, 2)
        if self.N > 0:
            expand = lambda m: m.transpose(0, 1).unsqueeze(0).expand(B, self.N, self.H, self.dh)
            k = torch.cat([expand(mem_k), k], 1)  # (B, N + T, H, dh)
            v = torch.cat([expand(self.mem_v), v], 1)
        M = torch.arange(1, T + 1, dtype=torch.float64)
        unit = 1.0 if self.qk_norm else 1.0 / math.sqrt(self.dh)
        fixed = unit if self.beta is not None else self.s * unit
        if self.rule == "ssmax":
            scale = self.ssmax.scale[:, None] * torch.log(M.to(x.dtype))[None] * fixed
        else:
            scale = (beta_ratio(self.rule, M, self.L) * fixed).to(x.dtype)[None]
        if self.beta is not None:
            scale = scale * self.beta[:, None]  # (H, T)
        logits = torch.einsum("bthd,bshd->bhts", q, k) * scale[..., None]  # (B, H, T, N + T)
        col = torch.arange(self.N + T)[None]
        row = torch.arange(T)[:, None]
        logits = logits.masked_fill(col > row + self.N, float("-inf"))
        w = torch.softmax(logits, -1)
        y = torch.einsum("bhts,bshd->bthd", w, v).reshape(B, T, self.H * self.dh)
        a = self.out(y)
        if cache is not None:
            cache.update({prefix + "attn.q": q, prefix + "attn.k": k, prefix + "attn.v": v,
                          prefix + "attn.weights": w, prefix + "attn.out": a})
        return a


class TwoLayer(nn.Module):
    """linear, mlp and glu: weights(x) are the hidden units' activations, forward W2 weights(x)."""

    def __init__(self, c, maps=2):
        super().__init__()
        D, bias = c["d_model"], c["bias"]
        hidden = c.get("intermediate_size", 0) or c["ffn_mult"] * D
        self.act = c["activation"]
        self.w1 = nn.Linear(D, hidden, bias=bias)
        self.w2 = nn.Linear(hidden, D, bias=bias)
        if maps == 3:
            self.w3 = nn.Linear(D, hidden, bias=bias)

    def forward(self, x, w=None):
        return self.w2(self.weights(x) if w is None else w)


class Linear(TwoLayer):
    def weights(self, x):
        return self.w1(x)


class Mlp(TwoLayer):
    def weights(self, x):
        return activate(self.act, self.w1(x))


class Glu(TwoLayer):
    def __init__(self, c):
        super().__init__(c, maps=3)

    def weights(self, x):
        return activate(self.act, self.w1(x)) * self.w3(x)


class LearnedKv(nn.Module):
    """Per head softmax over ffn_slots learned key/value slots; w1 is the query map, w2 the output."""

    def __init__(self, c):
        super().__init__()
        D, bias = c["d_model"], c["bias"]
        self.H, self.dh = c["n_heads"], D // c["n_heads"]
        self.w1 = nn.Linear(D, D, bias=bias)
        self.w2 = nn.Linear(D, D, bias=bias)
        self.keys = nn.Parameter(torch.zeros(self.H, c["ffn_slots"], self.dh))
        self.values = nn.Parameter(torch.zeros(self.H, c["ffn_slots"], self.dh))

    def weights(self, x):
        q = self.w1(x).reshape(*x.shape[:-1], self.H, self.dh)  # (..., H, dh)
        logits = torch.einsum("...hd,hsd->...hs", q, self.keys) / math.sqrt(self.dh)
        return torch.softmax(logits, -1)  # (..., H, S)

    def forward(self, x, w=None):
        w = self.weights(x) if w is None else w
        y = torch.einsum("...hs,hsd->...hd", w, self.values)
        return self.w2(y.reshape(x.shape))


# The feed-forward store of each ffn value, the twins of the C++ kinds (feed_forward.h); every one
# has weights(x), its recall weights, and forward(x, w=None).
FEED_FORWARD_KINDS = {"linear": Linear, "mlp": Mlp, "glu": Glu, "learned_kv": LearnedKv}


def feed_forward(c):
    if c["ffn"] not in FEED_FORWARD_KINDS:
        raise ValueError(f"ffn '{c['ffn']}' is unknown")
    return FEED_FORWARD_KINDS[c["ffn"]](c)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = Norm(c)
        self.attn = Attention(c)
        if c["ffn"] != "none":
            self.norm2 = Norm(c)
            self.ffn = feed_forward(c)
        else:
            self.ffn = None

    def forward(self, x, cache=None, prefix=""):
        if cache is not None:
            cache[prefix + "resid_pre"] = x
        h = x + self.attn(self.norm1(x), cache, prefix)
        if cache is not None:
            cache[prefix + "resid_mid"] = h
        if self.ffn is not None:
            n = self.norm2(h)
            w = self.ffn.weights(n)
            f = self.ffn(n, w)
            if cache is not None:
                cache[prefix + "ffn.weights"] = w
                cache[prefix + "ffn.out"] = f
            h = h + f
        if cache is not None:
            cache[prefix + "resid_post"] = h
        return h


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = dict(c)
        D = c["d_model"]
        self.tok_emb = nn.Embedding(c["vocab_size"], D)
        self.pos_emb = nn.Embedding(c["seq_len"], D) if c["pos"] == "learned" else None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm_f = Norm(c)
        self.head = None if c["tied_head"] else nn.Linear(D, c["vocab_size"], bias=False)

    def forward(self, idx, cache=None):
        """idx (B, T) int64 -> logits (B, T, vocab). A dict `cache` receives the activations under
        the names of recall's C++ activation cache (blocks.i.resid_pre, blocks.i.attn.weights...)."""
        T = idx.shape[1]
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            if T > self.pos_emb.num_embeddings:
                raise ValueError(f"sequence length {T} exceeds seq_len with learned positions")
            x = x + self.pos_emb.weight[:T]
        for i, block in enumerate(self.blocks):
            x = block(x, cache, f"blocks.{i}.")
        x = self.norm_f(x)
        w = self.head.weight if self.head is not None else self.tok_emb.weight
        return x @ w.t()


_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                       "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(file):
    """The tensors of a safetensors file, by the format's rules (no package needed): u64
    little-endian N, an N-byte JSON header {name: {dtype, shape, data_offsets}}, the data."""
    with open(file, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = _SAFETENSORS_DTYPES[e["dtype"]]
        if begin == end:
            out[name] = torch.empty(e["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
            out[name] = t.reshape(e["shape"])
    return out


_OLD_BLOCK = re.compile(r"^block(\d+)\.")


def load_state(path, weights="pt"):
    """The state dict of a `recall export` folder: model.pt read by torch.load with its defaults
    (weights_only where this torch has it), or model.safetensors. Exports written before the
    blocks were a list name them block0., block1., ...: they are read as blocks.0., blocks.1., ..."""
    if weights == "safetensors":
        state = read_safetensors(os.path.join(path, "model.safetensors"))
    elif weights != "pt":
        raise ValueError(f"weights '{weights}': use pt or safetensors")
    else:
        file = os.path.join(path, "model.pt")
        try:
            state = torch.load(file, weights_only=True)
        except TypeError:  # a torch older than 1.13 has no weights_only
            state = torch.load(file)
    return {_OLD_BLOCK.sub(r"blocks.\1.", k): t for k, t in state.items()}


def load(path, weights="pt"):
    """The model of a `recall export` folder (config.json, model.pt or model.safetensors), in eval
    mode."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    model = Transformer(config["model"])
    model.load_state_dict(load_state(path, weights), strict=True)
    return model.eval()


def shape(name_or_path):
    """The model config of a recall model shape (models/<shape>.toml lists every model key): a
    file, or a shape's name in the repository's models/. Transformer(shape("gpt-tiny")) is that
    model with fresh weights."""
    import tomllib  # Python 3.11+

    path = name_or_path
    if not os.path.isfile(path):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", path + ".toml")
    with open(path, "rb") as f:
        return tomllib.load(f)
