"""Run configs for the tests: configs/tiny.yaml, complete and validated, with the changes a test
needs. The trainers take a whole config, as ``load_config`` returns it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hw4lib.config import Config, load_config, read_config

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"


def tiny_yaml() -> dict[str, Any]:
    """configs/tiny.yaml with its base resolved and seed 0 (a test's run repeats: a config
    without a seed draws one for each run), not yet validated."""
    return {**read_config(TINY), "seed": 0}


def tiny_config(tmp_path: Path, training: dict[str, Any] | None = None, **sections: Any) -> Config:
    """tiny.yaml with seed 0, its runs under ``tmp_path/expts``, float32 (runs compare exactly),
    no progress bar, the ``training`` keys given, and each of ``sections`` replaced whole
    (``scheduler={"name": "constant"}``)."""
    training = {"expts_dir": str(tmp_path / "expts"), "precision": "fp32", "progress_bar": False,
                **(training or {})}
    return load_config(TINY, {"seed": 0,
                              **{f"training.{key}": value for key, value in training.items()},
                              **sections})
