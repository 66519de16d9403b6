"""Check the GPU path in a few minutes: ``python -m hw4lib.gpu_check`` (``make gpu-check``).

Run it from the repository root with any Python whose torch sees the GPU (Colab's, a cluster's):
it needs no ``.venv`` and downloads nothing. Besides torch it imports numpy, pyyaml, pydantic,
tokenizers, tqdm and matplotlib, and says which are missing (on Colab:
the notebook's Set-up pip line, at the pins of ``requirements-grader.txt``). It builds the data if needed, then
on the device (CUDA when there is one, else the CPU, which it says):

1. the masks and the positional encoding give on the device what they give on the CPU;
2. one epoch of ``configs/tiny.yaml`` in the precision ``training.precision: auto`` picks there
   (on a GPU the fastest it measures of fp32+TF32 and bf16, or fp16 with the gradient scaler
   without bf16), written under a temporary folder;
3. the cached generator (``generator_for_model``) gives the plain one's tokens, greedy and
   beam, with the trained model;
4. the run packs into a handin the grader would load (written to the temporary folder);
5. on a GPU, the student test modules (``tests/test_*.py`` without the slow ones) pass there;
6. speed, on the default config's model (``SPEED_CONFIG``): the training pass beside its raw step
   (hw4lib/trainers/throughput.py), a training step in fp32, fp32 with TF32 and bf16, and the
   cached generator beside the plain one, greedy and beam. On a GPU the cached greedy search must
   be at least ``MIN_CACHE_SPEEDUP`` times the plain one and the pass at least
   ``MIN_LOOP_OVER_RAW`` of the raw step. Without a GPU it measures a reduced workload on the CPU
   and judges no speed.

It prints one table with a PASS/FAIL line per check, the speeds and the peak GPU memory, writes
them to a JSON file (``--json``, default ``gpu_check.json`` in the current folder: the record the
course's measured results cite), and exits 1 when a check fails. On a handout with parts not
written yet, a check that reaches one of their stubs says ``needs: <file>: <function>
(unwritten)`` instead, the others run, and the exit status is ``UNWRITTEN_EXIT`` when nothing
else failed. It exits 2 before checking anything, saying why, when a package is missing, when
it is not run from the repository root, and when ``--device cuda`` is asked where torch sees no
GPU.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from hw4lib.file_io import read_json

# matplotlib is not needed: the training's plots are extras that report and go on without it.
NEEDED = {"numpy": "numpy>=2", "yaml": "pyyaml", "pydantic": "pydantic", "tokenizers": "tokenizers",
          "tqdm": "tqdm"}
CONFIG = Path("configs/tiny.yaml")
SPEED_CONFIG = Path("configs/default.yaml")
JSON_OUT = Path("gpu_check.json")
UNWRITTEN_EXIT = 3  # no check failed, but some need parts of the handout not written yet
# A handout stub raises NotImplementedError("<file>: <function>: <what to write>").
STUB = re.compile(r"NotImplementedError: ([\w./-]+\.py: [\w.]+): ")
MIN_CACHE_SPEEDUP = 3.0   # cached greedy search over the plain one, on a GPU
MIN_LOOP_OVER_RAW = 0.5   # the trainer's pass over its raw step, on a GPU
# (GPU, CPU) sizes of the speed workloads: the CPU's only exercise the code.
SPEED_SIZES = {"subset": (0.1, 0.007), "repeats": (3, 1), "greedy": ((16, 100), (4, 12)),
               "beam": ((4, 100), (2, 12)), "step_batch": ((32, 200), (4, 32))}


class Unwritten(Exception):
    """Student test modules failed only at stubs: ``parts`` ("<file>: <function>") are unwritten."""

    def __init__(self, parts: list[str]) -> None:
        super().__init__(", ".join(parts))
        self.parts = parts


def unwritten_parts(error: BaseException) -> list[str]:
    """The unwritten parts ("<file>: <function>") ``error`` comes from: an ``Unwritten``'s, or the
    stub of a NotImplementedError in ``error`` or its causes; [] for any other error."""
    while error is not None:
        if isinstance(error, Unwritten):
            return error.parts
        found = STUB.match(f"{type(error).__name__}: {error}")  # the class name is in STUB
        if found:
            return [found.group(1)]
        error = error.__cause__ or error.__context__
    return []


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
    torch.manual_seed(0)  # pragma: no mutate (equivalent: any input compares the encoding alike)
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
    (epoch,) = read_json(run_folder / "metrics" / "history.json")
    stats = {"epoch_seconds": epoch["epoch_seconds"], "train_tokens": epoch["train"]["num_tokens"],
             "peak_gpu_memory_mib": peak_gpu_memory_mib(device)}
    return run_folder, stats


def peak_gpu_memory_mib(device) -> float | None:
    """The most memory torch has held on the GPU ``device`` since its last reset, in MiB; None on
    another device."""
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


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
    prompts, _ = build_datasets(config, tokenizer)[2].sample_prompts(4, 8, seed=0)  # pragma: no mutate (equivalent: any split's prompts compare the two generators alike)
    max_length = min(40, model.max_len)  # pragma: no mutate (equivalent: any length compares them alike)
    cached = generator_for_model(model, tokenizer, max_length, device)
    plain = SequenceGenerator(model.score, tokenizer, max_length, device)
    assert type(cached) is not SequenceGenerator, "got the plain generator"
    searches = (("generate_greedy", {}), ("generate_beam", {"beam_width": 3}))  # pragma: no mutate (equivalent: any width compares them alike)
    with torch.no_grad():
        for search, kwargs in searches:
            fast, _ = getattr(cached, search)(prompts, **kwargs)
            slow, _ = getattr(plain, search)(prompts, **kwargs)
            assert same_device(fast.device, device), f"{search} returned tokens on {fast.device}"
            assert torch.equal(fast.cpu(), slow.cpu()), f"{search}: cached and plain tokens differ"


def run_student_tests(tests: list[str] | None = None, timeout_s: int = 420) -> str:
    """Run the shipped test modules (``tests``, by default ``tests/test_*.py``; slow tests left
    out) with pytest in a child; return pytest's summary line. Raises ``Unwritten`` naming the
    parts when every failure is a stub's NotImplementedError, else AssertionError naming the
    other failures."""
    tests = tests or sorted(str(path) for path in Path("tests").glob("test_*.py"))
    # Every failure on its own summary line: none of the caller's PYTEST_ADDOPTS (-x, -r...).
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-m", "not slow", *tests], capture_output=True, text=True,
                            timeout=timeout_s, env={**env, "COLUMNS": "1000"})
    lines = result.stdout.strip().splitlines() or [result.stderr.strip()]
    if result.returncode != 0:
        failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        stubs = {line: STUB.search(line) for line in failed}
        others = [line for line, stub in stubs.items() if not stub]
        if failed and not others:
            raise Unwritten(sorted({stub.group(1) for stub in stubs.values()}))
        raise AssertionError("; ".join(others[:5]) or lines[-1])
    return lines[-1]


def _sizes(device) -> dict:
    """SPEED_SIZES for ``device``: the GPU's on CUDA, the CPU's elsewhere."""
    return {name: sizes[0 if device.type == "cuda" else 1] for name, sizes in SPEED_SIZES.items()}


def _median_seconds(run, repeats: int, device) -> float:
    """Median wall-clock seconds of ``run()`` over ``repeats`` runs after one warm-up run."""
    import statistics

    import torch

    times = []
    for _ in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def measure_training(folder: Path, device, config_path: Path) -> dict:
    """The trainer's pass beside its raw step (``loop_against_raw_step``) on ``config_path``'s
    model, optimizer and schedule, in its ``auto`` precision, over a subset of its data."""
    from hw4lib.config import load_config
    from hw4lib.train import build_datasets, build_loader, build_model, build_tokenizer, set_seed
    from hw4lib.trainers import LMTrainer
    from hw4lib.trainers.precision import precision_name
    from hw4lib.trainers.throughput import loop_against_raw_step
    from hw4lib.utils import create_optimizer, create_scheduler

    sizes = _sizes(device)
    config = load_config(config_path, {"data.subset": sizes["subset"], "training.device": str(device),
                                       "training.progress_bar": False,
                                       "training.expts_dir": str(folder / "speed")})
    set_seed(0)  # pragma: no mutate (equivalent: the weights a seed draws train as fast)
    tokenizer = build_tokenizer(config)
    loader = build_loader(config, build_datasets(config, tokenizer)[0], shuffle=False)
    trainer = LMTrainer(build_model(config, tokenizer), tokenizer, config, "speed", None)
    trainer.optimizer = create_optimizer(trainer.model, config.optimizer)
    trainer.scheduler = create_scheduler(trainer.optimizer, config.scheduler, loader,
                                         config.training.gradient_accumulation_steps)
    return {**loop_against_raw_step(trainer, loader, sizes["repeats"]), "batches": len(loader),
            "precision": precision_name(trainer.precision)}


def measure_precisions(device, config_path: Path) -> dict[str, float]:
    """Training-step tokens per second of ``config_path``'s model in each format ``precision:
    auto`` measures on ``device`` (``measure_formats``: fp32, fp32 with TF32 matrix products on
    CUDA, bf16 where the device has it natively)."""
    from hw4lib.config import load_config
    from hw4lib.train import build_model, build_tokenizer
    from hw4lib.trainers.precision import measure_formats

    config = load_config(config_path)
    model = build_model(config, build_tokenizer(config))
    batch, length = _sizes(device)["step_batch"]
    return measure_formats(model, batch, length, device, steps=5 if device.type == "cuda" else 1)


def peaked_model(config_path: Path, device="cpu"):
    """(model, tokenizer): ``config_path``'s untrained model (seed 0) in eval mode on ``device``,
    its weights scaled by 5 and its EOS logit's bias at -1e4, for timing generation. An untrained
    model's logits are nearly uniform, so beam search would choose between near-ties that float
    rounding decides; scaled, its distributions are peaked like a trained model's at the same
    cost, and with EOS never chosen every run is as long. Raises what building the model raises
    (NotImplementedError while a part is unwritten)."""
    import torch

    from hw4lib.config import load_config
    from hw4lib.train import build_model, build_tokenizer

    config = load_config(config_path)
    tokenizer = build_tokenizer(config)
    torch.manual_seed(0)
    model = build_model(config, tokenizer).to(device).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(5.0)
        model.final_linear.bias[tokenizer.eos_id] = -1e4
    return model, tokenizer


def measure_decoding(device, config_path: Path) -> dict[str, dict[str, float]]:
    """New tokens per second of the plain generator (``model.score``) and the cached one, greedy
    and beam (width 3), on :func:`peaked_model`."""
    import torch

    from hw4lib.decoding import SequenceGenerator, generator_for_model

    model, tokenizer = peaked_model(config_path, device)
    sizes = _sizes(device)
    results = {}
    with torch.no_grad():
        for search, (prompts_n, new) in (("greedy", sizes["greedy"]), ("beam", sizes["beam"])):
            prompts = torch.randint(4, tokenizer.vocab_size, (prompts_n, 10),  # pragma: no mutate (equivalent: any ordinary tokens take as long)
                                    generator=torch.Generator().manual_seed(0))  # pragma: no mutate (equivalent: as above)
            generators = {"plain": SequenceGenerator(model.score, tokenizer, 10 + new, device),
                          "cached": generator_for_model(model, tokenizer, 10 + new, device)}
            speeds = {}
            for kind, generator in generators.items():
                run = ((lambda g=generator: g.generate_greedy(prompts)) if search == "greedy"
                       else (lambda g=generator: g.generate_beam(prompts, 3)))
                speeds[kind] = prompts_n * new / _median_seconds(run, sizes["repeats"], device)
            results[search] = {**speeds, "speedup": speeds["cached"] / speeds["plain"]}
    return results


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
    parser.add_argument("--json", type=Path, default=JSON_OUT, help="where the numbers are written")
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

    device = resolve_device(args.device)
    on_gpu = device.type == "cuda"
    cuda_build = torch.version.cuda or "none"
    if on_gpu and not torch.cuda.is_available():
        print(f"--device {args.device}: torch sees no CUDA device here (torch {torch.__version__}, "
              f"CUDA build {cuda_build}); run with --device cpu, or on a machine with a GPU")
        return 2
    device_name = torch.cuda.get_device_name(device) if on_gpu else "cpu"
    speed_config = SPEED_CONFIG if on_gpu else CONFIG
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA build {cuda_build}, "
          f"device {device}" + (f" ({device_name})" if on_gpu else ""))
    if not on_gpu:
        print("NOTE: no CUDA device, so this runs on the CPU: it checks the code paths, not a GPU")
    subprocess.run([sys.executable, "-m", "datagen.build_data", "--out",
                    load_config(CONFIG).data.root, "--seed", "0", "--if-stale"], check=True)

    results: dict[str, str] = {}

    def attempt(name: str, step):
        """``step()``'s value, its outcome recorded under ``name``; None when it raised."""
        start = time.perf_counter()
        try:
            value = step()
        except Exception as error:  # noqa: BLE001 - every check reports, then the exit status fails
            parts = unwritten_parts(error)
            results[name] = (f"needs: {', '.join(parts)} (unwritten)" if parts
                             else f"FAIL ({type(error).__name__}: {error})")
            return None
        results[name] = f"PASS ({time.perf_counter() - start:.1f}s)"
        return value

    with tempfile.TemporaryDirectory(prefix="hw4p1-gpu-check-") as temporary:
        folder = Path(temporary)
        attempt("masks and positional encoding on the device", lambda: check_components(device))
        trained = attempt("one epoch of the tiny config", lambda: train_tiny(folder, device))
        after_training = ("cached and plain generators give the same tokens",
                          "the handin packs and loads")
        if trained:
            run_folder, stats = trained
            attempt(after_training[0], lambda: check_generators(run_folder, device))
            attempt(after_training[1], lambda: check_handin(run_folder, folder))
        elif results["one epoch of the tiny config"].startswith("needs: "):
            results.update(dict.fromkeys(after_training, results["one epoch of the tiny config"]))
        if on_gpu:
            attempt("the student test modules on the device", run_student_tests)
        speed = {"training": attempt("training pass beside its raw step (speed)",
                                     lambda: measure_training(folder, device, speed_config)),
                 "precision": attempt("training step per number format (speed)",
                                      lambda: measure_precisions(device, speed_config)),
                 "decoding": attempt("cached and plain generators (speed)",
                                     lambda: measure_decoding(device, speed_config))}
    judged = judge_speed(speed, on_gpu)
    results.update(judged)

    print(f"\ngpu check on {device}")
    for name, result in results.items():
        print(f"  {name:<58s} {result}")
    print(speed_table(speed, speed_config))
    if trained:
        memory = stats["peak_gpu_memory_mib"]
        print("  peak GPU memory: " + (f"{memory:,.0f} MiB" if memory is not None else "n/a (CPU)"))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "python": sys.version.split()[0], "torch": torch.__version__, "device": device_name,
        "gpu": on_gpu, "checks": results, "tiny_epoch": stats if trained else None,
        **{key: (value if isinstance(value, dict) else None) for key, value in speed.items()}},
        indent=2) + "\n")
    print(f"  numbers written to {args.json}")
    return exit_status(results)


def exit_status(results: dict[str, str]) -> int:
    """0 when every check passed; ``UNWRITTEN_EXIT`` (saying so) when the others need parts not
    written yet; 1 when a check failed."""
    if any(result.startswith("FAIL") for result in results.values()):
        return 1
    if any(result.startswith("needs: ") for result in results.values()):
        print("  the checks marked 'needs' run once those parts are written (the README's task "
              "list, each with its test command); the rest passed")
        return UNWRITTEN_EXIT
    return 0


def judge_speed(speed: dict, on_gpu: bool) -> dict[str, str]:
    """The PASS/FAIL lines of the speed targets (on a GPU only; the CPU's sizes prove nothing)."""
    pass_speed, decoding = speed["training"], speed["decoding"]
    if not on_gpu:
        return {"speed targets": "PASS (not judged: no GPU)"}
    lines = {}
    if isinstance(decoding, dict):
        ratio = decoding["greedy"]["speedup"]
        lines[f"cached greedy >= {MIN_CACHE_SPEEDUP:g}x plain"] = (
            f"{'PASS' if ratio >= MIN_CACHE_SPEEDUP else 'FAIL'} ({ratio:.1f}x)")
    if isinstance(pass_speed, dict):
        ratio = pass_speed["loop_over_raw"]
        lines[f"training pass >= {MIN_LOOP_OVER_RAW:.0%} of its raw step"] = (
            f"{'PASS' if ratio >= MIN_LOOP_OVER_RAW else 'FAIL'} ({ratio:.0%})")
    return lines


def speed_table(speed: dict, config_path: Path) -> str:
    """The measured speeds, one line each (tokens per second)."""
    rows = []
    pass_speed = speed["training"]
    if isinstance(pass_speed, dict):
        rows += [(f"training, raw step ({pass_speed['precision']}, {pass_speed['batches']} batches)",
                  pass_speed["raw_tokens_per_s"], ""),
                 ("training, the trainer's pass", pass_speed["loop_tokens_per_s"],
                  f"{pass_speed['loop_over_raw']:.0%} of raw")]
    if isinstance(speed["precision"], dict):
        rows += [(f"training step, {name}", value, "") for name, value in speed["precision"].items()]
    if isinstance(speed["decoding"], dict):
        for search, values in speed["decoding"].items():
            rows += [(f"{search}, plain generator", values["plain"], ""),
                     (f"{search}, cached generator", values["cached"], f"{values['speedup']:.1f}x")]
    lines = [f"  speeds on {config_path}'s model, tokens/s:"]
    lines += [f"    {label:<44s} {value:>12,.0f}  {note}".rstrip() for label, value, note in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
