"""GPT-2 folders by transformers itself, for the golden tests of `recall import` and
`recall export --format gpt2`: what save_pretrained writes, and what from_pretrained reads.

    transformers_models.py save DIR [--dtype float32|float16|bfloat16] [--untied] [--shard]
                                    [--activation gelu_new|gelu] [--seed N]
        GPT2LMHeadModel(GPT2Config(...)) with random weights away from its initialisation, saved by
        save_pretrained in --dtype (with --shard, in shards of a few kB under
        model.safetensors.index.json); DIR/tokens.pt and DIR/logits.pt: transformers' own forward
        of the saved weights, loaded back in float32.
    transformers_models.py load DIR TOKENS OUT
        loads the GPT-2 folder DIR (recall export --format gpt2) with from_pretrained; fails if it
        reports a missing, unexpected or mismatched key or logs a warning. Writes OUT/logits.pt
        (its forward on TOKENS, a torch.save'd (B, T) tensor) and saves the model again with
        save_pretrained to OUT/resaved.
"""
import argparse
import logging
import os
import sys
import warnings

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def from_pretrained(path):
    """In float32, eager attention; dtype= from transformers 5, torch_dtype= before."""
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype" if major >= 5 else "torch_dtype": torch.float32}
    return GPT2LMHeadModel.from_pretrained(path, attn_implementation="eager",
                                           output_loading_info=True, **kw)


def save(a):
    torch.manual_seed(a.seed)
    config = GPT2Config(vocab_size=48, n_positions=12, n_embd=32, n_layer=2, n_head=4,
                        n_inner=64, activation_function=a.activation,
                        tie_word_embeddings=not a.untied, bos_token_id=None, eos_token_id=None)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        # unit norm gains and zero biases would hide a misplaced parameter
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    model.to(DTYPES[a.dtype]).save_pretrained(a.dir, **({"max_shard_size": "8kB"} if a.shard else {}))
    ref, _ = from_pretrained(a.dir)
    ref.eval()
    tokens = torch.randint(config.vocab_size, (2, config.n_positions))
    with torch.no_grad():
        logits = ref(tokens).logits
    torch.save(tokens, os.path.join(a.dir, "tokens.pt"))
    torch.save(logits, os.path.join(a.dir, "logits.pt"))


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
l = sub.add_parser("load")
l.add_argument("dir")
l.add_argument("tokens")
l.add_argument("out")
l.set_defaults(run=load)
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
args = ap.parse_args()
args.run(args)
