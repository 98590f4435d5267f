"""Golden check of python/recall_model.py against recall: for each case folder (a `recall export`
plus tokens.pt and logits.pt written by recall), loads the model from model.pt (torch.load with its
defaults: weights_only where this torch has it) and from model.safetensors, runs each on the tokens
and writes the largest absolute difference of their logits from recall's to diff.txt in that
folder (inf when the two files disagree on any tensor).

It also reads model.pt's pickle opcode by opcode (pickletools, not torch) and writes to globals.txt
every global it names, one "module.name" per line, sorted; then the globals that torch.load's
weights_only unpickler would refuse (torch >= 2.5 says so itself; 1.13 has its allowlist), as lines
"refused module.name"."""
import os
import pickletools
import sys
import zipfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from recall_model import load, load_state  # noqa: E402


def pickle_globals(path):
    """Every GLOBAL and STACK_GLOBAL of the archive's data.pkl (STACK_GLOBAL takes the two strings
    pushed before it)."""
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"))
    names, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            names.add(arg.replace(" ", "."))
        elif op.name == "STACK_GLOBAL":
            names.add(f"{strings[-2]}.{strings[-1]}")
        if isinstance(arg, str) and "UNICODE" in op.name:
            strings.append(arg)
    return sorted(names)


def refused(path, names):
    if hasattr(torch.serialization, "get_unsafe_globals_in_checkpoint"):
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    from torch import _weights_only_unpickler as w  # torch 1.13
    allowed = set(w._get_allowed_globals())
    return [n for n in names if n not in allowed]


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
    names = pickle_globals(os.path.join(case, "model.pt"))
    with open(os.path.join(case, "globals.txt"), "w") as f:
        f.write("".join(f"{n}\n" for n in names))
        f.write("".join(f"refused {n}\n" for n in refused(os.path.join(case, "model.pt"), names)))
