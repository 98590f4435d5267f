"""Models in other programs' formats, and their logits by a forward pass written here from GPT-2's
definition (independent of recall), for the golden tests of `recall import`.

    foreign_models.py gpt2 DIR [--activation gelu_new] [--untied] [--weights safetensors|bin]
                               [--dtype float32|float16|bfloat16] [--transformers 4|5] ...
        a GPT-2-format folder of random weights under GPT-2's names and layouts (Conv1D weights
        (in, out), fused c_attn, the attn.bias mask buffer): config.json (the keys transformers
        4.x or 5.x writes: torch_dtype or dtype) and model.safetensors (written here by the
        format's rules) or pytorch_model.bin (torch.save), its tensors in --dtype; with tokens.pt
        and logits.pt (of the weights as stored, widened to float32).
    foreign_models.py nanogpt CKPT DIR [--compiled OUT]
        tokens.pt and logits.pt in DIR for the nanoGPT checkpoint CKPT (scripts/peer_gpt.py --save);
        with --compiled, also writes CKPT to OUT as nanoGPT saves a torch.compile'd model with its
        tied head (every name prefixed with _orig_mod., lm_head.weight the very tensor of wte),
        and its tokens.pt and logits.pt to DIR/compiled.
    foreign_models.py compare SOURCE EXPORT REF
        loads recall's export EXPORT (python/recall_model.py, from model.pt and model.safetensors),
        runs it on REF's tokens and writes EXPORT/compare.json: the largest logit difference from
        REF's logits, and whether every exported tensor equals the source's (a GPT-2 folder or a
        nanoGPT checkpoint) bit for bit.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from recall_model import load, load_state  # noqa: E402

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def write_safetensors(path, tensors, metadata=None):
    """u64 little-endian header length, the JSON header, then the tensors' bytes back to back."""
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = t.contiguous().numpy().tobytes() if t.dtype != torch.bfloat16 else \
            t.contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header, data, out = json.loads(raw[8:8 + n]), raw[8 + n:], {}
    names = {v: k for k, v in DTYPES.items()}
    for name, e in header.items():
        if name != "__metadata__":
            a, b = e["data_offsets"]
            out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=names[e["dtype"]]).reshape(e["shape"])
    return out


def gelu(name, s):
    if name == "gelu":
        return 0.5 * s * (1.0 + torch.erf(s / math.sqrt(2.0)))
    return 0.5 * s * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (s + 0.044715 * s ** 3)))


def forward(sd, n_head, activation, conv1d, tied, idx):
    """GPT-2's forward pass: sd in GPT-2's names without a prefix (h.0.attn.c_attn.weight...);
    conv1d: linear weights are (in, out)."""
    def lin(x, name):
        w = sd[name + ".weight"]
        y = x @ (w if conv1d else w.t())
        return y + sd[name + ".bias"] if name + ".bias" in sd else y

    def ln(x, name):
        return F.layer_norm(x, x.shape[-1:], sd[name + ".weight"], sd.get(name + ".bias"), 1e-5)

    B, T = idx.shape
    x = sd["wte.weight"][idx] + sd["wpe.weight"][:T]
    D = x.shape[-1]
    n_layer = len({k.split(".")[1] for k in sd if k.startswith("h.")})
    mask = torch.ones(T, T).tril().bool()
    for i in range(n_layer):
        h = ln(x, f"h.{i}.ln_1")
        q, k, v = lin(h, f"h.{i}.attn.c_attn").split(D, -1)
        q, k, v = (t.view(B, T, n_head, D // n_head).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-1, -2)) / math.sqrt(D // n_head)
        a = a.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, D)
        x = x + lin(y, f"h.{i}.attn.c_proj")
        h = ln(x, f"h.{i}.ln_2")
        x = x + lin(gelu(activation, lin(h, f"h.{i}.mlp.c_fc")), f"h.{i}.mlp.c_proj")
    x = ln(x, "ln_f")
    return x @ (sd["wte.weight"] if tied else sd["lm_head.weight"]).t()


def plain(sd):
    """Names without torch.compile's and the LM head model's prefixes."""
    out = {}
    for k, v in sd.items():
        for p in ("_orig_mod.", "transformer."):
            if k.startswith(p):
                k = k[len(p):]
        out[k] = v
    return out


def save_golden(out, tokens, logits):
    torch.save(tokens, os.path.join(out, "tokens.pt"))
    torch.save(logits, os.path.join(out, "logits.pt"))


def gpt2(a):
    torch.manual_seed(a.seed)
    V, D, L, H, P = a.vocab, a.d, a.layers, a.heads, a.positions
    r = lambda *shape: torch.randn(*shape) * 0.2
    sd = {"transformer.wte.weight": r(V, D), "transformer.wpe.weight": r(P, D)}
    for i in range(L):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            sd[p + ln + ".weight"], sd[p + ln + ".bias"] = 1 + r(D), r(D)
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = r(D, 3 * D), r(3 * D)
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = r(D, D), r(D)
        sd[p + "attn.bias"] = torch.ones(P, P).tril().view(1, 1, P, P)  # GPT-2's mask buffer
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = r(D, 4 * D), r(4 * D)
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = r(4 * D, D), r(D)
    sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"] = 1 + r(D), r(D)
    if a.untied:
        sd["lm_head.weight"] = r(V, D)
    sd = {k: v.to(getattr(torch, a.dtype)) for k, v in sd.items()}
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
              "n_positions": P, "n_ctx": P, "n_embd": D, "n_layer": L, "n_head": H, "n_inner": None,
              "activation_function": a.activation, "layer_norm_epsilon": 1e-05,
              "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02,
              "summary_type": "cls_index", "summary_use_proj": True, "summary_activation": None,
              "summary_proj_to_labels": True, "summary_first_dropout": 0.1,
              "scale_attn_weights": True, "use_cache": True, "bos_token_id": V - 1,
              "eos_token_id": V - 1, "tie_word_embeddings": not a.untied}
    if a.transformers == 4:
        config.update({"torch_dtype": a.dtype, "transformers_version": "4.40.0"})
    else:  # 5.x renamed torch_dtype to dtype
        config.update({"dtype": a.dtype, "transformers_version": "5.0.0", "pad_token_id": None})
    os.makedirs(a.dir, exist_ok=True)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if a.weights == "safetensors":
        write_safetensors(os.path.join(a.dir, "model.safetensors"), sd, {"format": "pt"})
    else:
        torch.save(sd, os.path.join(a.dir, "pytorch_model.bin"))
    tokens = torch.randint(V, (2, P))
    with torch.no_grad():
        wide = {k: v.float() for k, v in plain(sd).items()}  # as recall holds them
        logits = forward(wide, H, a.activation, True, not a.untied, tokens)
    save_golden(a.dir, tokens, logits)


def nanogpt_golden(ckpt, out):
    sd, args = plain(ckpt["model"]), ckpt["model_args"]
    tied = "lm_head.weight" not in sd or torch.equal(sd["lm_head.weight"], sd["wte.weight"])
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1)
    tokens = torch.randint(args["vocab_size"], (2, args["block_size"]))
    with torch.no_grad():
        logits = forward(sd, args["n_head"], "gelu", False, tied, tokens)
    save_golden(out, tokens, logits)


def nanogpt(a):
    ckpt = torch.load(a.ckpt)
    nanogpt_golden(ckpt, a.dir)
    if a.compiled:
        sd = dict(ckpt["model"])
        sd["lm_head.weight"] = sd["transformer.wte.weight"]  # one storage, saved once
        ckpt["model"] = {"_orig_mod." + k: v for k, v in sd.items()}
        torch.save(ckpt, a.compiled)
        nanogpt_golden(ckpt, os.path.join(a.dir, "compiled"))


def source_state(path):
    """The source's tensors under recall's names, in recall's layout."""
    if os.path.isdir(path):
        st = os.path.join(path, "model.safetensors")
        sd = plain(read_safetensors(st) if os.path.exists(st) else
                   torch.load(os.path.join(path, "pytorch_model.bin")))
        conv1d = True
    else:
        sd, conv1d = plain(torch.load(path)["model"]), False
    names = {"wte": "tok_emb", "wpe": "pos_emb", "ln_f": "norm_f", "lm_head": "head"}
    parts = {"ln_1": "norm1", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.out",
             "ln_2": "norm2", "mlp.c_fc": "ffn.w1", "mlp.c_proj": "ffn.w2"}
    out = {}
    for k, t in sd.items():
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        if k.startswith("h."):
            _, i, rest = k.split(".", 2)
            part, kind = rest.rsplit(".", 1)
            k = f"blocks.{i}.{parts[part]}.{kind}"
            if conv1d and kind == "weight" and part not in ("ln_1", "ln_2"):
                t = t.t()
        else:
            base, kind = k.rsplit(".", 1)
            k = f"{names[base]}.{kind}"
        out[k] = t.float()
    return out


def compare(a):
    tokens = torch.load(os.path.join(a.ref, "tokens.pt"))
    want = torch.load(os.path.join(a.ref, "logits.pt"))
    diff = 0.0
    for weights in ("pt", "safetensors"):
        with torch.no_grad():
            got = load(a.export, weights)(tokens)
        diff = max(diff, (got - want).abs().max().item() if got.shape == want.shape else math.inf)
    src = source_state(a.source)
    if "head.weight" in src and torch.equal(src["head.weight"], src["tok_emb.weight"]):
        del src["head.weight"]  # a tied head: recall holds it once
    exact = True
    for weights in ("pt", "safetensors"):
        got = load_state(a.export, weights)
        exact &= got.keys() == src.keys() and all(torch.equal(got[k], src[k]) for k in src)
    with open(os.path.join(a.export, "compare.json"), "w") as f:
        json.dump({"max_logit_diff": diff, "exact": exact}, f)


ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
g = sub.add_parser("gpt2")
g.add_argument("dir")
g.add_argument("--vocab", type=int, default=37)
g.add_argument("--d", type=int, default=16)
g.add_argument("--layers", type=int, default=2)
g.add_argument("--heads", type=int, default=2)
g.add_argument("--positions", type=int, default=12)
g.add_argument("--activation", default="gelu_new")
g.add_argument("--untied", action="store_true")
g.add_argument("--weights", default="safetensors", choices=["safetensors", "bin"])
g.add_argument("--seed", type=int, default=0)
g.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
g.add_argument("--transformers", type=int, default=4, choices=[4, 5])
n = sub.add_parser("nanogpt")
n.add_argument("ckpt")
n.add_argument("dir")
n.add_argument("--compiled")
c = sub.add_parser("compare")
c.add_argument("source")
c.add_argument("export")
c.add_argument("ref")
a = ap.parse_args()
torch.set_num_threads(1)
{"gpt2": gpt2, "nanogpt": nanogpt, "compare": compare}[a.cmd](a)
