"""Shared pytest set-up: wandb off, one torch thread per xdist worker, the repo root importable."""
import os
import sys
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: more threads per worker only oversubscribes the machine.
    import torch

    torch.set_num_threads(1)
