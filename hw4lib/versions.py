"""The versions this homework needs, checked where it runs (the notebook's set-up cell).

``requirements.txt`` pins what ``make install`` builds: every test, the benchmarks and the grader
run with exactly those versions. A hosted notebook (Colab, Kaggle) keeps its own preinstalled
torch and matplotlib; what must hold everywhere is :data:`MINIMUM`, and any other difference from
the pins is reported as a note (it should work: the grader loads only the handed-in weights, a
plain state dict that every torch 2.x saves and reads alike). Standard library only, so it runs
before anything else is imported.
"""
from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

# The oldest versions the code itself uses: np.vecdot (the Softmax backward's hint) came with
# numpy 2.0; `X | None` annotations evaluated at run time (the config models) need Python 3.10;
# torch.nn.functional.scaled_dot_product_attention and torch.load(weights_only=...) torch 2.0.
MINIMUM = {"python": (3, 10), "numpy": (2, 0), "torch": (2, 0)}
INSTALL = {"numpy": 'pip install -q "numpy>=2"', "torch": 'pip install -q "torch>=2"',
           "python": "use a Python 3.10 or newer kernel"}


def _release(version: str) -> tuple[int, ...]:
    """(major, minor, ...) of a version string such as '2.13.0+cpu' or '2.4.6'."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def pinned(requirements: Path) -> dict[str, str]:
    """{package: version} of the ``name==version`` lines of ``requirements`` and of the files its
    ``-r other.txt`` lines include (relative to it)."""
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        included = re.match(r"\s*-r\s+(\S+)", line)
        if included:
            pins.update(pinned(requirements.parent / included.group(1)))
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def installed(package: str) -> str | None:
    if package == "python":
        return ".".join(map(str, sys.version_info[:3]))
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def built_by_make_install(requirements: Path) -> bool:
    """Whether this Python runs in the ``.venv`` that ``make install`` builds beside
    ``requirements`` (that folder, with the stamp the Makefile writes once it installed the pins)."""
    venv = requirements.resolve().parent / ".venv"
    return (Path(sys.prefix).resolve() == venv.resolve()
            and (venv / ".installed-stamp").is_file())


def check_versions(requirements: Path) -> list[str]:
    """Raise RuntimeError naming the fix when a package is missing or older than MINIMUM; return a
    note for each of torch, numpy and matplotlib whose version differs from ``requirements``."""
    for package, oldest in MINIMUM.items():
        version = installed(package)
        if version is None or _release(version) < oldest:
            raise RuntimeError(f"{package} {version or 'is not installed'}: this homework needs "
                               f"{package} >= {'.'.join(map(str, oldest))}. Fix: "
                               f"{INSTALL[package]}, then restart the kernel")
    pins = pinned(requirements)
    notes = []
    for package in ("torch", "numpy", "matplotlib"):
        version = installed(package)
        if package in pins and version is not None and _release(version) != _release(pins[package]):
            notes.append(f"{package} {version} here, {pins[package]} in requirements.txt (what "
                         f"the tests and the grader run): fine for the homework")
    return notes
