"""A realistic class of handins, in both platforms' bulk-download layouts, for the regrade's tests
(tests/classroom/test_regrade.py) and for trying the class tools by hand.

    python -m tools.class_fixture --out class-fixture      (or: make class-fixture)

Very small models are trained (a few seconds each) and packed by ``make handin``'s own code: two
shared ones (m1 and m2: different seeds and ``data.subset``) and one of m1's settings under a
seed of its own for each honest-looking student. The handins of the class are made from them:
honest work, edited metrics, a wrong attention scale, an empty tar, a tar of the run folder, a zip
named .tar, a .tar.gz, an independent implementation in another style and a disguised copy of it,
a hang, 10 MB of printing, swapped weights, a SyntaxError, the untouched stubs, code built at run
time, two versions of one student, two students with byte-identical weights and a mytorch tree
nested deeper than ``make handin`` writes. Each honest-looking handin gets weights of its own (its
own training: the regrade compares what weights learned, so m1 with one value moved would be
flagged as m1's), except where a case needs the same weights (the twins, the swapped weights).

``build()`` returns a folder holding ``autolab/`` (every version, ``<email>_<version>_handin.tar``)
and ``gradescope/`` (``submission_<id>/`` with the latest version, and
``submission_metadata.yml``). It is cached under ``$HW4P1_CACHE`` (default ``~/.cache/hw4p1``)
keyed by the sha256 of everything it is made from (this file, the reference code, the configs,
the data card), so only the first build trains.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("HW4P1_CACHE", Path.home() / ".cache" / "hw4p1")) / "class-fixture"
# The two trainings: a model small enough to train in seconds on two cores.
SMALL = {"model.num_layers": 1, "model.d_model": 32, "model.num_heads": 2, "model.d_ff": 64,
         "training.epochs": 1, "training.progress_bar": False, "training.precision": "fp32",
         "generation.num_samples": 1, "generation.max_length": 16}
MODELS = {"m1": {"seed": 11, "data.subset": 0.04}, "m2": {"seed": 22, "data.subset": 0.02}}
# Each honest-looking student's own training: m1's settings under seed OWN_SEEDS + 1, + 2, ...
OWN_SEEDS = 100
SDPA = "mytorch/nn/scaled_dot_product_attention.py"
SCALE_LINE = "scores *= 1.0 / math.sqrt(Q.shape[-1])"
SOFTMAX_LINE = "A = Z - Z.max(axis=self.dim, keepdims=True)"
DEEP_LEVELS = 1000


@dataclass
class Student:
    """One student of the class: their versions (oldest first), each {member name: bytes} or
    raw archive bytes, and what Gradescope's metadata says of them."""

    email: str
    name: str
    sid: str
    versions: list[bytes] = field(default_factory=list)
    suffix: str = ".tar"  # how the upload is named (.tar, .tar.gz)
    submitted_at: str = "2026-11-20 23:00:00.000000000 -05:00"


def inputs_digest() -> str:
    """sha256 of what the fixture is made from."""
    digest = hashlib.sha256()
    paths = [Path(__file__), REPO / "tools/mytorch_styles.py", REPO / "tools/handout_regions.py",
             REPO / "configs/default.yaml", REPO / "configs/tiny.yaml",
             REPO / "hw4_data/hw4p1_data/DATA_CARD.md",
             *sorted((REPO / "mytorch").rglob("*.py")), *sorted((REPO / "hw4lib").rglob("*.py"))]
    for path in paths:
        if "__pycache__" not in path.parts and path.is_file():
            digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def train(work: Path) -> dict[str, Path]:
    """{model: its run folder}, trained with configs/tiny.yaml made SMALL."""
    from hw4lib.train import run

    runs = {}
    for name, settings in MODELS.items():
        overrides = {**SMALL, "data.subset": settings["data.subset"],
                     "training.expts_dir": str(work / "expts")}
        runs[name] = run(REPO / "configs/tiny.yaml", seed=settings["seed"], run_name=name,
                         overrides=overrides)
    return runs


def reference_mytorch() -> dict[str, str]:
    return {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted((REPO / "mytorch").rglob("*.py")) if "__pycache__" not in path.parts}


def own_training(work: Path, index: int) -> Path:
    """The run folder of a training of m1's settings under a seed of its own (``OWN_SEEDS +
    index``): an honest student's independent work."""
    from hw4lib.train import run

    overrides = {**SMALL, "data.subset": MODELS["m1"]["data.subset"],
                 "training.expts_dir": str(work / "expts")}
    return run(REPO / "configs/tiny.yaml", seed=OWN_SEEDS + index, run_name=f"own-{index}",
               overrides=overrides)


def packed(work: Path, run_folder: Path, mytorch: dict[str, str | bytes],
           name: str = "pack") -> dict[str, bytes]:
    """{member: bytes} of the handin ``make handin`` packs from ``run_folder`` with ``mytorch``."""
    from hw4lib.handin import pack

    root = work / "packs" / name
    shutil.rmtree(root, ignore_errors=True)
    run = root / "expts" / run_folder.name
    shutil.copytree(run_folder, run, ignore=shutil.ignore_patterns("checkpoint-last*"))
    for path, text in mytorch.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(text if isinstance(text, bytes) else text.encode())
    pack(root, run_folder.name, root / "handin.tar")
    with tarfile.open(root / "handin.tar") as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers()
                if member.isfile()}


def archive(members: dict[str, bytes], kind: str = "tar") -> bytes:
    """``members`` as a tar, a gzipped tar or a zip."""
    buffer = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buffer, "w") as out:
            for name, data in members.items():
                out.writestr(name, data)
        return buffer.getvalue()
    with tarfile.open(fileobj=buffer, mode="w:gz" if kind == "gz" else "w",
                      format=tarfile.PAX_FORMAT) as out:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def stubs() -> dict[str, str]:
    """The handout's mytorch: every region stubbed out."""
    from tools.handout_regions import file_regions, stub_out

    return {path: "".join(stub_out(text.splitlines(keepends=True), file_regions(path, text)))
            for path, text in reference_mytorch().items()}


MHA = "mytorch/nn/multi_head_attention.py"
# MultiHeadAttention's five regions (forward, backward, _split_heads, _concat_heads, _merge_masks)
# written apart from the reference, for the independent student.
MHA_OTHER_STYLE = [
    """projected = [self._split_heads(layer.forward(x)) for layer, x in
             ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value))]
combined = self._merge_masks(key_padding_mask, attn_mask)
attended = self.attention.forward(*projected, combined)
return self.out_proj.forward(self._concat_heads(attended))""",
    """upstream = self._split_heads(self.out_proj.backward(dLdZ))
grads = self.attention.backward(upstream)
layers = (self.q_proj, self.k_proj, self.v_proj)
return tuple(layer.backward(self._concat_heads(g)) for layer, g in zip(layers, grads))""",
    """batch, length = x.shape[0], x.shape[1]
return np.swapaxes(np.reshape(x, (batch, length, self.num_heads, -1)), 1, 2)""",
    """moved = np.swapaxes(x, 1, 2)
return np.reshape(moved, moved.shape[:2] + (-1,))""",
    """parts = []
if key_padding_mask is not None:
    parts.append(np.expand_dims(key_padding_mask, (1, 2)))
if attn_mask is not None:
    parts.append(attn_mask)
if not parts:
    return None
return parts[0] if len(parts) == 1 else np.logical_or(parts[0], parts[1])""",
]


def other_style() -> tuple[dict[str, str], dict[str, str]]:
    """(an independent implementation in another style, a disguised copy of it): the einsum style
    of tools/mytorch_styles.py and MHA_OTHER_STYLE, and its copy with names changed and methods
    reordered."""
    from tools.mytorch_styles import FILES, STYLES, disguised, filled

    tree = reference_mytorch()
    for index, path in enumerate(FILES):
        tree[path] = filled(path, STYLES["einsum"][2 * index:2 * index + 2])
    tree[MHA] = filled(MHA, MHA_OTHER_STYLE)
    copy = disguised(tree, {"flat": "rows", "shifted": "centered", "logits": "scores",
                            "inner": "dot"}, reorder=True)
    return tree, copy


def edited(mytorch: dict[str, str], path: str, old: str, new: str) -> dict[str, str]:
    assert old in mytorch[path], (path, old)
    return {**mytorch, path: mytorch[path].replace(old, new, 1)}


def with_metrics(members: dict[str, bytes], factor: float) -> dict[str, bytes]:
    """test_metrics.json's perplexities multiplied by ``factor`` after packing."""
    metrics = json.loads(members["handin/test_metrics.json"])
    for key in ("perplexity_char", "perplexity_token"):
        metrics[key] *= factor
    return {**members, "handin/test_metrics.json": json.dumps(metrics).encode()}


def class_of(work: Path) -> dict[str, Student]:
    """Every student of the class (their role is the name before the @)."""
    runs = train(work)
    ref = reference_mytorch()
    independent, copy = other_style()
    trainings = iter(range(1, 100))

    def honest(mytorch=ref, name="pack"):
        return packed(work, own_training(work, next(trainings)), mytorch, name=name)

    m1_exact = packed(work, runs["m1"], ref, name="m1-exact")
    m2_exact = packed(work, runs["m2"], ref, name="m2-exact")
    deep = "handin/mytorch/" + "d/" * DEEP_LEVELS + "deep.py"
    run_folder = {f"run/{path.relative_to(runs['m1']).as_posix()}": path.read_bytes()
                  for path in sorted(runs["m1"].rglob("*")) if path.is_file()
                  and "checkpoint-last" not in path.name}
    students = {
        "honest-m1": archive(honest()),
        "honest-m2": archive(m2_exact),
        "twin-a": archive(m1_exact),
        "twin-b": archive(m1_exact),
        "edited-metrics": archive(with_metrics(honest(), 0.8)),
        "wrong-scale": archive(honest(edited(ref, SDPA, SCALE_LINE, "scores *= 1.0 / Q.shape[-1]"))),
        "empty": archive({}),
        "run-folder": archive(run_folder),
        "zip-named-tar": archive(honest(), "zip"),
        "gzipped": archive(honest(), "gz"),
        "independent": archive(honest(independent)),
        "disguised-copy": archive(honest(copy)),
        "hang": archive(honest(edited(ref, "mytorch/nn/activation.py", SOFTMAX_LINE,
                                      "while True:\n            pass\n        " + SOFTMAX_LINE))),
        "prints-10mb": archive(honest(edited(ref, "mytorch/__init__.py", '"""\n',
                                             '"""\nprint("x" * 10_000_000)\n'))),
        "swapped-weights": archive({**m1_exact, "handin/model_state_dict.pt":
                                    m2_exact["handin/model_state_dict.pt"]}),
        "syntax-error": archive(honest({**ref, "mytorch/nn/linear.py":
                                        ref["mytorch/nn/linear.py"] + "\ndef broken(:\n"})),
        "stubs": archive(honest(stubs())),
        "runtime-code": archive(honest({**ref, "mytorch/nn/linear.py":
                                        ref["mytorch/nn/linear.py"] + '\nexec("UNUSED = 1")\n'})),
        "deep-tree": archive({**honest(), deep: b"X = 1\n"}),
    }
    class_ = {role: Student(f"{role}@uni.edu", role.replace("-", " ").title(), f"9{index:03d}",
                            [data]) for index, (role, data) in enumerate(students.items())}
    class_["gzipped"].suffix = ".tar.gz"
    class_["edited-metrics"].submitted_at = "2026-11-21 00:30:00.000000000 -05:00"  # late
    class_["two-versions"] = Student("two-versions@uni.edu", "Two Versions", "9100", [
        students["wrong-scale"], archive(honest())])
    return class_


def write_layouts(class_: dict[str, Student], out: Path) -> None:
    """``out/autolab`` (every version) and ``out/gradescope`` (the latest, with metadata)."""
    autolab, gradescope = out / "autolab", out / "gradescope"
    autolab.mkdir(parents=True)
    gradescope.mkdir(parents=True)
    metadata = []
    for index, student in enumerate(class_.values()):
        for version, data in enumerate(student.versions, start=1):
            (autolab / f"{student.email}_{version}_handin{student.suffix}").write_bytes(data)
        folder = gradescope / f"submission_{1000 + index}"
        folder.mkdir()
        (folder / f"handin{student.suffix}").write_bytes(student.versions[-1])
        metadata.append(f"{folder.name}:\n  :submitters:\n  - :name: {student.name}\n"
                        f"    :sid: '{student.sid}'\n    :email: {student.email}\n"
                        f"  :created_at: {student.submitted_at}\n  :score: 0.0\n"
                        f"  :status: processed\n")
    (gradescope / "submission_metadata.yml").write_text("".join(metadata), encoding="utf-8")


def build() -> Path:
    """The class's folder (see the module docstring), from the cache when it holds this build."""
    folder = CACHE / inputs_digest()
    if (folder / ".complete").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE))
    try:
        write_layouts(class_of(work / "build"), work / "class")
        (work / "class" / ".complete").write_text("")
        if not folder.exists():
            (work / "class").rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build (or reuse) the class fixture and copy "
                                                 "its two layouts to --out.")
    parser.add_argument("--out", type=Path, default=Path("class-fixture"))
    args = parser.parse_args(argv)
    folder = build()
    shutil.copytree(folder, args.out, dirs_exist_ok=True)
    print(f"{args.out}/autolab (every version) and {args.out}/gradescope (with "
          f"submission_metadata.yml), from {folder}")


if __name__ == "__main__":
    main()
