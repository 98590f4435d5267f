"""GPT-2, Llama, Qwen2 and Qwen3 folders by transformers itself, for the golden tests of
`recall import` and `recall export --format gpt2|llama|qwen2|qwen3`: what save_pretrained writes,
and what from_pretrained reads.

    transformers_models.py save DIR [--dtype float32|float16|bfloat16] [--untied] [--shard]
                                    [--activation gelu_new|gelu] [--seed N]
        GPT2LMHeadModel(GPT2Config(...)) with random weights away from its initialisation, saved by
        save_pretrained in --dtype (with --shard, in shards of a few kB under
        model.safetensors.index.json); DIR/tokens.pt and DIR/logits.pt: transformers' own forward
        of the saved weights, loaded back in float32.
    transformers_models.py family DIR --family llama|qwen2|qwen3 [--dtype ...] [--shard]
                                      [--tied] [--bias] [--config4] [--seed N]
        a small LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM (grouped-query attention,
        a feed-forward width no multiple of hidden_size, its own RoPE base; Qwen3 a head_dim of its
        own; --bias: Llama's attention_bias and mlp_bias), saved and checked as `save` does, its
        tokens the full context (3, max_position_embeddings). --config4 rewrites config.json with
        transformers 4.x's keys (rope_theta, rope_scaling, torch_dtype) after the logits are taken.
    transformers_models.py load DIR TOKENS OUT [--generate PROMPT]
        loads the folder DIR (recall export --format gpt2|llama|qwen2|qwen3) with
        AutoModelForCausalLM.from_pretrained; fails if it reports a missing, unexpected or
        mismatched key or logs a warning. Writes OUT/logits.pt (its forward on TOKENS, a
        torch.save'd (B, T) tensor) and saves the model again with save_pretrained to
        OUT/resaved. With --generate "3 1 4", OUT/generated.txt holds the 32 tokens that greedy
        generate appends to those token ids, space-separated.
    transformers_models.py batch FILE
        each line of FILE the arguments of one of the above, run in this one process (loading
        torch and transformers takes seconds; the tests ask for several folders at once).
"""
import argparse
import json
import logging
import os
import shlex
import sys
import warnings

import torch
import transformers
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# Each family's class, and what sets its small model apart from the default shape.
FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM,
              dict(num_key_value_heads=2, intermediate_size=72, rope_theta=500000.0,
                   rms_norm_eps=1e-5)),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(num_key_value_heads=1, intermediate_size=64, rope_theta=1000000.0,
                   rms_norm_eps=1e-6)),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM,
              dict(num_key_value_heads=2, head_dim=16, intermediate_size=48,
                   rope_theta=1000000.0, rms_norm_eps=1e-6)),
}


def from_pretrained(path, cls=AutoModelForCausalLM):
    """In float32, eager attention; dtype= from transformers 5, torch_dtype= before."""
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype" if major >= 5 else "torch_dtype": torch.float32}
    return cls.from_pretrained(path, attn_implementation="eager", output_loading_info=True, **kw)


def save_checked(model, a, cls, tokens_shape):
    """Weights away from their initialisation, saved in --dtype, with DIR/tokens.pt and
    DIR/logits.pt of transformers' own forward of the saved weights, loaded back in float32."""
    with torch.no_grad():
        # unit norm gains and zero biases would hide a misplaced parameter
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    model.to(DTYPES[a.dtype]).save_pretrained(a.dir, **({"max_shard_size": "8kB"} if a.shard else {}))
    ref, _ = from_pretrained(a.dir, cls)
    ref.eval()
    tokens = torch.randint(model.config.vocab_size, tokens_shape)
    with torch.no_grad():
        logits = ref(tokens).logits
    torch.save(tokens, os.path.join(a.dir, "tokens.pt"))
    torch.save(logits, os.path.join(a.dir, "logits.pt"))


def save(a):
    torch.manual_seed(a.seed)
    config = GPT2Config(vocab_size=48, n_positions=12, n_embd=32, n_layer=2, n_head=4,
                        n_inner=64, activation_function=a.activation,
                        tie_word_embeddings=not a.untied, bos_token_id=None, eos_token_id=None)
    save_checked(GPT2LMHeadModel(config), a, GPT2LMHeadModel, (2, config.n_positions))


def family(a):
    torch.manual_seed(a.seed)
    config_cls, model_cls, shape = FAMILIES[a.family]
    extra = dict(attention_bias=True, mlp_bias=True) if a.bias else {}
    config = config_cls(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        max_position_embeddings=16, tie_word_embeddings=a.tied,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None, **shape, **extra)
    save_checked(model_cls(config), a, model_cls, (3, config.max_position_embeddings))
    if a.config4:
        path = os.path.join(a.dir, "config.json")
        with open(path) as f:
            c = json.load(f)
        rope = c.pop("rope_parameters", None) or {}
        c["rope_theta"] = rope.get("rope_theta", shape["rope_theta"])
        c["rope_scaling"] = None
        if "dtype" in c:
            c["torch_dtype"] = c.pop("dtype")
        c.pop("layer_types", None)
        c["transformers_version"] = "4.46.3"
        with open(path, "w") as f:
            json.dump(c, f, indent=2)


def load(a):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    transformers.logging.set_verbosity_warning()
    transformers.logging.get_logger().addHandler(Keep(level=logging.WARNING))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, info = from_pretrained(a.dir)
    problems = {k: v for k, v in info.items() if v}
    problems.update({"warnings": [str(w.message) for w in caught] + records} if caught or records else {})
    if problems:
        sys.exit(f"{a.dir}: from_pretrained reported {problems}")
    model.eval()
    tokens = torch.load(a.tokens)
    with torch.no_grad():
        logits = model(tokens).logits
    os.makedirs(a.out, exist_ok=True)
    torch.save(logits, os.path.join(a.out, "logits.pt"))
    model.save_pretrained(os.path.join(a.out, "resaved"))
    if a.generate:
        prompt = torch.tensor([[int(t) for t in a.generate.split()]])
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=32, do_sample=False,
                                 attention_mask=torch.ones_like(prompt))
        with open(os.path.join(a.out, "generated.txt"), "w") as f:
            f.write(" ".join(str(int(t)) for t in out[0, prompt.shape[1]:]) + "\n")


ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
s = sub.add_parser("save")
s.add_argument("dir")
s.add_argument("--dtype", default="float32", choices=DTYPES)
s.add_argument("--untied", action="store_true")
s.add_argument("--shard", action="store_true")
s.add_argument("--activation", default="gelu_new")
s.add_argument("--seed", type=int, default=0)
s.set_defaults(run=save)
fam = sub.add_parser("family")
fam.add_argument("dir")
fam.add_argument("--family", required=True, choices=FAMILIES)
fam.add_argument("--dtype", default="float32", choices=DTYPES)
fam.add_argument("--shard", action="store_true")
fam.add_argument("--tied", action="store_true")
fam.add_argument("--bias", action="store_true")
fam.add_argument("--config4", action="store_true")
fam.add_argument("--seed", type=int, default=0)
fam.set_defaults(run=family)
l = sub.add_parser("load")
l.add_argument("dir")
l.add_argument("tokens")
l.add_argument("out")
l.add_argument("--generate", default="")
l.set_defaults(run=load)
b = sub.add_parser("batch")
b.add_argument("file")
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
args = ap.parse_args()
if args.cmd == "batch":
    with open(args.file) as f:
        for line in f:
            if line.strip():
                one = ap.parse_args(shlex.split(line))
                one.run(one)
else:
    args.run(args)
