"""Argument checks for LMDataset, kept out of ``lm_dataset.py`` so it reads as the algorithm.
Each raises naming the problem and the fix."""
import warnings
from pathlib import Path


def check_dataset_config(config: dict) -> float:
    """config needs ``root``; ``subset`` (default 1.0) must be a fraction in (0, 1]. Returns it."""
    if "root" not in config:
        raise KeyError("config has no 'root': set it to the dataset directory, "
                       "e.g. hw4_data/hw4p1_data")
    subset = config.get("subset", 1.0)
    if not isinstance(subset, (int, float)) or not 0 < subset <= 1:
        raise ValueError(f"config['subset'] must be a fraction in (0, 1], got {subset!r}")
    return subset


def check_listing(text_dir: Path, text_files: list[Path]) -> None:
    """Fail on a partition without transcripts; warn about files that are not ``.npy``."""
    if not text_files:
        raise ValueError(
            f"No .npy transcript files in {text_dir}. Run `make data` to (re)build the dataset."
        )
    others = [p.name for p in text_dir.iterdir()
              if p.suffix != ".npy" and not p.name.startswith(".")]
    if others:
        warnings.warn(f"Ignoring {len(others)} files of {text_dir} that are not .npy, "
                      f"e.g. {others[0]!r}", stacklevel=3)


def check_subset_kept(text_files: list[Path], subset: float, text_dir: Path) -> None:
    """The subset must keep at least one file."""
    if not text_files:
        raise ValueError(
            f"subset={subset} keeps no file of the partition {text_dir}; use a larger subset"
        )


def check_prompt_request(num_samples: int, prompt_length: int) -> None:
    """Both must be >= 1."""
    if num_samples < 1 or prompt_length < 1:
        raise ValueError(f"num_samples and prompt_length must be >= 1, "
                         f"got {num_samples} and {prompt_length}")
