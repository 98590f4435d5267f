"""Golden check of python/recall_model.py against recall: for each case folder (a `recall export`
plus tokens.pt and logits.pt written by recall), loads the model, runs it on the tokens and writes
the largest absolute difference of its logits from recall's to diff.txt in that folder."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from recall_model import load  # noqa: E402

torch.set_num_threads(1)
for case in sys.argv[1:]:
    model = load(case)
    tokens = torch.load(os.path.join(case, "tokens.pt"))
    want = torch.load(os.path.join(case, "logits.pt"))
    with torch.no_grad():
        got = model(tokens)
    diff = (got - want).abs().max().item() if got.shape == want.shape else float("inf")
    with open(os.path.join(case, "diff.txt"), "w") as f:
        f.write(f"{diff!r}\n")
