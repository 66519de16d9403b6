"""Shared pytest set-up: wandb off, one torch thread, the repo root importable."""
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("WANDB_MODE", "disabled")
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# The tests' tensors are tiny: a second math thread only adds its start-up and, on a busy machine,
# waits for a core (a tiny model's forward is then two orders of magnitude slower than on one).
torch.set_num_threads(1)
