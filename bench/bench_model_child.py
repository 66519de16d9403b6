"""The model phase of one grading (``language_model.grade_language_model``) of a default-config handin, its
model child started fresh (``python -m autograder.judging.scoring.grade_model``, as before) and
forked from the judge (``model_child.park_model_child``): wall and CPU seconds (the judge's and its
children's), interleaved.

    OMP_NUM_THREADS=1 .venv/bin/python -m bench bench_model_child

Each grading runs in a judge of its own (a fresh interpreter that imports ``autograder.judging.grade``, then
parks the model child or not). The hidden set stands in as the public test split (``make data``),
and the run card names the whole split, so the child measures it twice, as a grading measures the
hidden set and the card's set. The judge's start and the parking (which overlaps the handin's
extraction) are outside the phase; the parked child's imports are inside its CPU seconds.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = REPO / "hw4_data" / "hw4p1_data"
REPEATS = 3
JUDGE = """
import json, resource, sys, time
from pathlib import Path
from autograder.judging import grade  # the judge's imports, as its main has them
from autograder.judging.isolation import judge_process, processes
from autograder.judging.scoring import language_model, model_child
from autograder.judging.intake.safe_tar import Extraction
processes.become_subreaper()
report = {}
parked = model_child.park_model_child(report) if sys.argv[1] == "forked" else None
judge_process.limit_address_space()
folder, data = Path(sys.argv[2]), Path(sys.argv[3])
language_model.HIDDEN_SET = language_model.PUBLIC_SET = data
for sub in ("home", "tmp"):
    (folder / sub).mkdir()
files = {name: folder / "handin" / name for name in
         ("config.yaml", "model_state_dict.pt", "test_metrics.json", "run_card.json")}
usage = lambda: sum(getattr(resource.getrusage(who), field) for who in
                    (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                    for field in ("ru_utime", "ru_stime"))
start, cpu = time.monotonic(), usage()
points, lm = language_model.grade_language_model(Extraction(files=files), folder, 600, 3.0, 30.0,
                                                 parked)
print(json.dumps({"wall": time.monotonic() - start, "cpu": usage() - cpu, "model_child":
                  report.get("model_child", "fresh"), "perplexity_char": lm["perplexity_char"],
                  "compared_perplexity_char": lm["compared_perplexity_char"]}))
"""


def default_handin(folder: Path) -> None:
    """A default-config handin (reference initialisation, seed 0) whose run card names the whole
    public test split."""
    from autograder.judging.scoring import grade_model
    from hw4lib.data import H4Tokenizer
    from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
    from hw4lib.handin_format import transcripts_sha256
    from hw4lib.model import DecoderOnlyTransformer

    config = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    token_type = config["tokenization"]["token_type"]
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**config["model"], num_classes=tokenizer.vocab_size)
    torch.save(model.state_dict(), folder / "model_state_dict.pt")
    (folder / "config.yaml").write_text(yaml.safe_dump(
        {"tokenization": {"token_type": token_type}, "model": config["model"]}))
    public = grade_model.read_partition(DATA_ROOT, tokenizer)
    (folder / "test_metrics.json").write_text(json.dumps({"perplexity_char": 1000.0}))
    (folder / "run_card.json").write_text(json.dumps({"test_set": {
        "transcripts": len(public), "sha256": transcripts_sha256(public.transcripts)}}))


def seconds(values: list[float]) -> str:
    return (f"{', '.join(f'{value:.2f}' for value in values)} s (median "
            f"{statistics.median(values):.2f})")


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '(unset)')}; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        default_handin(Path(tmp) / "handin")
        found = {"fresh": [], "forked": []}
        for repeat in range(REPEATS):
            for kind in found:
                folder = Path(tmp) / f"{kind}-{repeat}"
                folder.mkdir()
                (folder / "handin").symlink_to(Path(tmp) / "handin")
                run = subprocess.run([sys.executable, "-c", JUDGE, kind, str(folder),
                                      str(DATA_ROOT)], cwd=REPO, capture_output=True, text=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO)})
                if run.returncode:
                    raise SystemExit(f"the {kind} grading failed:\n{run.stdout[-3000:]}"
                                     f"{run.stderr[-3000:]}")
                found[kind].append(json.loads(run.stdout.splitlines()[-1]))
    for kind, runs in found.items():
        walls, cpus = [run["wall"] for run in runs], [run["cpu"] for run in runs]
        print(f"{kind:>6} ({runs[0]['model_child']}): wall {seconds(walls)}; CPU {seconds(cpus)}; "
              f"perplexity {runs[0]['perplexity_char']!r}, compared "
              f"{runs[0]['compared_perplexity_char']!r}")
    measured = {(r["perplexity_char"], r["compared_perplexity_char"])
                for runs in found.values() for r in runs}
    print(f"the same perplexities to every digit in every grading: {len(measured) == 1}")
