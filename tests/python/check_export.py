"""Golden check of python/recall_model.py against recall: for each case folder (a `recall export`
plus tokens.pt and logits.pt written by recall), loads the model from model.pt (torch.load with its
defaults: weights_only where this torch has it) and from model.safetensors, runs each on the tokens
and writes the largest absolute difference of their logits from recall's to diff.txt in that
folder (inf when the two files disagree on any tensor)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from recall_model import load, load_state  # noqa: E402

torch.set_num_threads(1)
for case in sys.argv[1:]:
    tokens = torch.load(os.path.join(case, "tokens.pt"))
    want = torch.load(os.path.join(case, "logits.pt"))
    pt, st = load_state(case, "pt"), load_state(case, "safetensors")
    same = pt.keys() == st.keys() and all(torch.equal(pt[k], st[k]) for k in pt)
    diff = 0.0 if same else float("inf")
    for weights in ("pt", "safetensors"):
        with torch.no_grad():
            got = load(case, weights)(tokens)
        diff = max(diff, (got - want).abs().max().item() if got.shape == want.shape else float("inf"))
    with open(os.path.join(case, "diff.txt"), "w") as f:
        f.write(f"{diff!r}\n")
