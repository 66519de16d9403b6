"""Check the GPU path in a few minutes: ``python -m hw4lib.gpu_check`` (``make gpu-check``).

Run it from the repository root with any Python whose torch sees the GPU (Colab's, a cluster's):
it needs no ``.venv`` and downloads nothing. Besides torch it imports numpy, pyyaml, pydantic,
tokenizers, tqdm and matplotlib, and says which are missing (on Colab:
``pip install -q tokenizers pyyaml pydantic tqdm "numpy>=2"``). It builds the data if needed, then
on the device (CUDA when there is one, else the CPU, which it says):

1. the masks and the positional encoding give on the device what they give on the CPU;
2. one epoch of ``configs/tiny.yaml`` in the precision ``training.precision: auto`` picks there
   (bf16, or fp16 with the gradient scaler, on a GPU), written under a temporary folder;
3. the cached generator (``generator_for_model``) gives the plain one's tokens, greedy and
   beam, with the trained model;
4. the run packs into a handin the grader would load (written to the temporary folder).

It prints the training speed in tokens per second and the peak GPU memory, one PASS/FAIL line per
check, and exits non-zero when a check fails.
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from hw4lib.file_io import read_json

NEEDED = {"numpy": "numpy>=2", "yaml": "pyyaml", "pydantic": "pydantic", "tokenizers": "tokenizers",
          "tqdm": "tqdm", "matplotlib": "matplotlib"}
CONFIG = Path("configs/tiny.yaml")


def missing_packages() -> list[str]:
    """The pip names of the packages this check imports besides torch that do not import."""
    missing = []
    for module, pip in NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(pip)
    return missing


def check_components(device) -> None:
    """PadMask, CausalMask and PositionalEncoding on ``device`` equal their CPU results."""
    import torch

    from hw4lib.model import CausalMask, PadMask, PositionalEncoding
    from hw4lib.utils.devices import same_device

    lengths = torch.tensor([5, 3, 1])
    tokens = torch.zeros(3, 5, dtype=torch.long)
    for name, build in (("PadMask", lambda x, n: PadMask(x, n)), ("CausalMask", lambda x, n: CausalMask(x))):
        on_device = build(tokens.to(device), lengths.to(device))
        assert same_device(on_device.device, device), f"{name} returned a mask on {on_device.device}"
        assert torch.equal(on_device.cpu(), build(tokens, lengths)), f"{name} differs on {device}"
    torch.manual_seed(0)
    x = torch.randn(2, 7, 16)
    encoding = PositionalEncoding(d_model=16, max_len=32)
    expected = encoding(x)
    got = encoding.to(device)(x.to(device))
    assert same_device(got.device, device), f"PositionalEncoding returned {got.device}"
    assert torch.allclose(got.cpu(), expected, atol=1e-6), f"PositionalEncoding differs on {device}"


def train_tiny(folder: Path, device) -> tuple[Path, dict]:
    """One epoch of the tiny config on ``device`` in ``auto`` precision; the run folder and the
    speed and memory it measured."""
    import torch

    from hw4lib.train import run

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    overrides = {"training.epochs": 1, "training.precision": "auto", "training.device": str(device),
                 "training.progress_bar": False, "training.expts_dir": str(folder / "expts")}
    run_folder = run(CONFIG, run_name="gpu-check", overrides=overrides)
    epoch = read_json(run_folder / "metrics" / "history.json")[-1]
    stats = {"epoch_seconds": epoch["epoch_seconds"], "train_tokens": epoch["train"]["num_tokens"],
             "peak_gpu_memory_mib": (torch.cuda.max_memory_allocated(device) / 2**20
                                     if device.type == "cuda" else None)}
    return run_folder, stats


def check_generators(run_folder: Path, device) -> None:
    """Greedy and beam search: the cached generator's tokens are the plain one's, on ``device``."""
    import torch

    from hw4lib.config import load_config
    from hw4lib.decoding import SequenceGenerator, generator_for_model
    from hw4lib.train import build_datasets, build_model, build_tokenizer
    from hw4lib.utils.devices import same_device

    config = load_config(run_folder / "config.yaml")
    tokenizer = build_tokenizer(config)
    model = build_model(config, tokenizer).to(device).eval()
    checkpoint = torch.load(run_folder / "checkpoints" / "checkpoint-best-metric-model.pth",
                            map_location=device, weights_only=False)
    model.load_state_dict(checkpoint["model_state_dict"])
    prompts, _ = build_datasets(config, tokenizer)[2].sample_prompts(4, 8, seed=0)
    max_length = min(40, model.max_len)
    cached = generator_for_model(model, tokenizer, max_length, device)
    plain = SequenceGenerator(model.score, tokenizer, max_length, device)
    assert type(cached) is not SequenceGenerator, "got the plain generator"
    with torch.no_grad():
        for search, kwargs in (("generate_greedy", {}), ("generate_beam", {"beam_width": 3})):
            fast, _ = getattr(cached, search)(prompts, **kwargs)
            slow, _ = getattr(plain, search)(prompts, **kwargs)
            assert same_device(fast.device, device), f"{search} returned tokens on {fast.device}"
            assert torch.equal(fast.cpu(), slow.cpu()), f"{search}: cached and plain tokens differ"


def check_handin(run_folder: Path, folder: Path) -> None:
    """The run packs, and its state dict loads as the grader loads it."""
    import io

    import torch

    from hw4lib.handin import pack

    out = folder / "handin.tar"
    pack(Path.cwd(), run=str(run_folder), out=out)
    with tarfile.open(out) as tar:
        data = tar.extractfile("handin/model_state_dict.pt").read()
    torch.load(io.BytesIO(data), weights_only=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when there is one), cuda, cpu")
    args = parser.parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"missing packages: {' '.join(missing)}\ninstall them with: "
              f"{sys.executable} -m pip install {' '.join(repr(p) for p in missing)}")
        return 2
    if not (Path("hw4lib").is_dir() and CONFIG.is_file()):
        print("run this from the repository root (the folder holding hw4lib/ and configs/)")
        return 2
    import torch

    from hw4lib.config import load_config
    from hw4lib.trainers.base_trainer import resolve_device
    from hw4lib.trainers.precision import precision_name, resolve_precision

    device = resolve_device(args.device)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA build "
          f"{torch.version.cuda or 'none'}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    if device.type != "cuda":
        print("NOTE: no CUDA device, so this runs on the CPU: it checks the code paths, not a GPU")
    precision, reason = resolve_precision("auto", device)
    print(f"precision auto picks: {precision_name(precision)} ({reason})")
    subprocess.run([sys.executable, "-m", "datagen.build_data", "--out",
                    load_config(CONFIG).data.root, "--seed", "0", "--if-stale"], check=True)

    results: dict[str, str] = {}

    def attempt(name: str, step):
        """``step()``, its outcome recorded under ``name``; None when it raised."""
        start = time.perf_counter()
        try:
            value = step()
        except Exception as error:  # noqa: BLE001 - every check reports, then the exit status fails
            results[name] = f"FAIL ({type(error).__name__}: {error})"
            return None
        results[name] = f"PASS ({time.perf_counter() - start:.1f}s)"
        return value if value is not None else True

    with tempfile.TemporaryDirectory(prefix="hw4p1-gpu-check-") as temporary:
        folder = Path(temporary)
        attempt("masks and positional encoding on the device", lambda: check_components(device))
        trained = attempt("one epoch of the tiny config", lambda: train_tiny(folder, device))
        if trained:
            run_folder, stats = trained
            attempt("cached and plain generators give the same tokens",
                    lambda: check_generators(run_folder, device))
            attempt("the handin packs and loads", lambda: check_handin(run_folder, folder))

    print(f"\ngpu check on {device}, precision {precision_name(precision)}")
    for name, result in results.items():
        print(f"  {name:<50s} {result}")
    if trained:
        print(f"  training speed: {stats['train_tokens'] / stats['epoch_seconds']:,.0f} tokens/s "
              f"({stats['train_tokens']:,} training tokens in a {stats['epoch_seconds']:.1f}s epoch, "
              f"its validation included)")
        memory = stats["peak_gpu_memory_mib"]
        print("  peak GPU memory: " + (f"{memory:,.0f} MiB" if memory is not None else "n/a (CPU)"))
    return 0 if trained and all(result.startswith("PASS") for result in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
