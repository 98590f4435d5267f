"""A model trained elsewhere, for recall to probe: a small Qwen3- or Llama-shaped model trained on
MQAR in plain PyTorch and transformers, saved with save_pretrained.

    python train_mqar_hf.py --out DIR [--arch qwen3|llama] [--recall-steps 600] [--steps 600]
                            [--seed 0] [--threads 1]

The task is recall's own `mqar` at its mqar-extrapolate sizes, written again here so that the
script needs nothing of recall: a vocabulary of 512 (filler 0, keys 1 to 255, values 256 to 511),
32 tokens, 8 key-value pairs at the start, then each key once more at an even offset of the query
region with filler between; only the query positions are scored, each predicting its key's value.
max_position_embeddings is the training length (32), which recall reads as L, the length its
sharpness rules grow from.

The model: 2 layers, width 64, 4 query heads of 16 sharing 2 key-value heads (grouped-query
attention), SwiGLU of width 128, RoPE, untied head; under --arch qwen3, each head's query and key
pass an RMSNorm with learned gains before RoPE (Qwen3's q_norm and k_norm: the essay's keys of unit
length, scaled by the gains).

Training: first --recall-steps of dense associative recall (16 distinct tokens, then 16 of them
again in random order, each scored on the token that followed it), then --steps of mqar. A plain
transformer recalls by composing two heads: one in layer 0 that copies a value's key into the
value's position (a previous-token head), one in layer 1 that matches the query against it. On mqar
alone the pair does not form in thousands of steps: with 8 of 32 positions scored, the model sits
at accuracy 1/8 (loss ln 8), spreading its guess over the 8 values in context, and the gradient
toward the two heads is too small to leave it. Dense recall, every second-half position scored,
forms them in about 300 steps; mqar then takes the circuit as it is (mqar accuracy 0.95 before its
first mqar step) and sharpens it. AdamW at 3e-3, 100 warmup steps and one cosine to 3e-4 over both
phases, batches of 64, gradient norm clipped at 1, fp32 on the CPU: about a minute on one thread.
The same seed and thread count give the same weights.

DIR gets config.json and model.safetensors (save_pretrained) and train.json: the mqar accuracy on 8
fresh batches every 100 steps, and the final one on 16 others.
"""
import argparse
import json
import math
import os
import time

import torch
import transformers

SEQ, PAIRS = 32, 8
VOCAB, KEY_BEGIN, VALUE_BEGIN = 512, 1, 256  # 255 keys, 256 values; set_vocab changes them


def set_vocab(v):
    global VOCAB, VALUE_BEGIN
    VOCAB, VALUE_BEGIN = v, 1 + (v - 1) // 2


def mqar_batch(batch, gen):
    """(x, y, mask), each (batch, SEQ): recall's mqar layout (src/train/task_mqar.cpp)."""
    n, T = PAIRS, SEQ
    slots = (T - 1 - 2 * n) // 2 + 1  # even offsets p with 2n + p <= T - 1
    keys = torch.argsort(torch.rand(batch, VALUE_BEGIN - KEY_BEGIN, generator=gen), dim=1)[:, :n]
    values = torch.argsort(torch.rand(batch, VOCAB - VALUE_BEGIN, generator=gen), dim=1)[:, :n]
    where = torch.argsort(torch.rand(batch, slots, generator=gen), dim=1)[:, :n]  # slot of pair i
    x = torch.zeros(batch, T, dtype=torch.long)
    y = torch.zeros(batch, T, dtype=torch.long)
    mask = torch.zeros(batch, T, dtype=torch.bool)
    rows = torch.arange(batch).unsqueeze(1)
    x[:, 0:2 * n:2] = KEY_BEGIN + keys
    x[:, 1:2 * n:2] = VALUE_BEGIN + values
    q = 2 * n + 2 * where  # (batch, n): the query positions
    x[rows, q] = KEY_BEGIN + keys
    y[rows, q] = VALUE_BEGIN + values
    mask[rows, q] = True
    return x, y, mask


def recall_batch(batch, gen):
    """(x, y, mask): dense associative recall, the warm-up. SEQ/2 distinct tokens of the whole
    vocabulary (filler aside), then SEQ/2 of them again, each drawn at random from all but the last;
    every position of the second half is scored, predicting the token that followed its draw."""
    h = SEQ // 2
    ctx = torch.argsort(torch.rand(batch, VOCAB - 1, generator=gen), dim=1)[:, :h] + 1
    j = torch.randint(0, h - 1, (batch, h), generator=gen)
    x = torch.cat([ctx, ctx.gather(1, j)], dim=1)
    y = torch.cat([torch.zeros_like(ctx), ctx.gather(1, j + 1)], dim=1)
    mask = torch.zeros(batch, SEQ, dtype=torch.bool)
    mask[:, h:] = True
    return x, y, mask


def make_model(arch):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=SEQ, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if arch == "qwen3":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common))
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))


def accuracy(model, gen, batches=8):
    model.eval()
    hit = total = 0
    with torch.no_grad():
        for _ in range(batches):
            x, y, mask = mqar_batch(64, gen)
            pred = model(x).logits.argmax(-1)
            hit += (pred[mask] == y[mask]).sum().item()
            total += mask.sum().item()
    model.train()
    return hit / total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--arch", choices=["qwen3", "llama"], default="qwen3")
    p.add_argument("--recall-steps", type=int, default=600,
                   help="steps of dense associative recall first (the warm-up)")
    p.add_argument("--steps", type=int, default=600, help="steps of mqar after them")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--vocab", type=int, default=512)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    set_vocab(a.vocab)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    eval_gen = torch.Generator().manual_seed(a.seed + 1)
    model = make_model(a.arch)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    total = a.recall_steps + a.steps
    warmup, lr, min_lr = 100, a.lr, a.lr / 10

    def lr_at(step):  # linear warmup, then a cosine to min_lr over both phases (recall's schedule)
        if step < warmup:
            return lr * (step + 1) / warmup
        t = (step - warmup) / max(1, total - warmup)
        return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * t))

    history, start = [], time.time()
    for step in range(total):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        phase = "recall" if step < a.recall_steps else "mqar"
        x, y, mask = (recall_batch if phase == "recall" else mqar_batch)(64, gen)
        logits = model(x).logits  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits[mask], y[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 100 == 0 or step + 1 == total:
            acc = accuracy(model, eval_gen)
            history.append({"step": step + 1, "phase": phase, "loss": loss.item(),
                            "accuracy": acc, "seconds": round(time.time() - start, 1)})
            print(f"step {step + 1} ({phase}): loss {loss.item():.4f}, mqar accuracy {acc:.3f}",
                  flush=True)
    seconds = time.time() - start
    model.save_pretrained(a.out)
    result = {"arch": a.arch, "seed": a.seed, "recall_steps": a.recall_steps, "steps": a.steps,
              "threads": a.threads, "lr": a.lr, "vocab": a.vocab, "pairs": PAIRS, "seq_len": SEQ,
              "seconds": seconds, "transformers": transformers.__version__,
              "torch": torch.__version__, "history": history,
              "accuracy": accuracy(model, torch.Generator().manual_seed(a.seed + 2), batches=16)}
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"saved {a.arch} to {a.out}: mqar accuracy {result['accuracy']:.4f} at {SEQ} tokens "
          f"({seconds:.0f} s)")


if __name__ == "__main__":
    main()
