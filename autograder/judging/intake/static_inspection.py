"""The judge's static inspection of a handin's mytorch, never run (an AST read): where it builds
code at run time (``autograder/judging/intake/runtime_code.py``), what could not be inspected, and
each graded file that defines no graded class of its own; and, for the class tools' comparison, the
code of one part (``graded``: the classes the hidden tests grade; ``bonus``: the bonus track's),
each class taken where the package's imports define it
(``autograder/judging/intake/mytorch_resolver.py``).

The judge runs :func:`inspect_handin` once on its extraction and records the findings in its
report (``runtime_code``, ``static_findings``), for the staff's flags only: no score depends on
them. The class tools read them there (the regrade) or run :func:`inspect_mytorch` on their own
extraction (the similarity's documents). Files are decoded as Python decodes them (a PEP 263
coding declaration honoured) and read under one guard each
(``autograder/judging/intake/handin_guard.py``): a file that cannot be read, decoded or parsed is a
finding, never the end of the run.
"""
from __future__ import annotations

import codecs
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from autograder.judging.intake.handin_guard import guarded, read_bounded
from autograder.judging.intake.mytorch_resolver import (MAX_DEFINITIONS, MAX_STEPS, Resolver,
                                                 resolve_qualified)
from autograder.judging.intake.runtime_code import runtime_code
from autograder.sandboxed.wire import declared_encoding, is_native_utf8
from hw4lib.handin_format import MAX_PY_FILE_BYTES, is_mytorch_source

PARTS = ("graded", "bonus")
# The judge's inspection of one handin: an honest mytorch takes a fraction of a second, while a
# handin's files can make decoding (a pure-Python codec such as punycode is quadratic) or the
# tree walks take minutes; past this the handin's finding says so and the grading goes on.
INSPECTION_S = 20.0
# {part: {qualified name: the reference module defining it}}: ``graded``, ``mytorch.nn.<class>`` of
# each class rubric.MYTORCH_RUBRIC grades (as the grader imports it); ``bonus``, every other name
# mytorch.nn and mytorch.optim export. Written out because the reference mytorch does not ship
# with the judge; tests/classroom/test_similarity.py checks it against the packages.
PART_TARGETS = {
    "graded": {"mytorch.nn.Linear": "mytorch/nn/linear.py",
               "mytorch.nn.Softmax": "mytorch/nn/activation.py",
               "mytorch.nn.ScaledDotProductAttention": "mytorch/nn/scaled_dot_product_attention.py",
               "mytorch.nn.MultiHeadAttention": "mytorch/nn/multi_head_attention.py"},
    "bonus": {"mytorch.nn.Embedding": "mytorch/nn/embedding.py",
              "mytorch.nn.LayerNorm": "mytorch/nn/layer_norm.py",
              "mytorch.nn.GELU": "mytorch/nn/gelu.py",
              "mytorch.nn.erf": "mytorch/nn/gelu.py",
              "mytorch.nn.Dropout": "mytorch/nn/dropout.py",
              "mytorch.nn.CrossEntropyLoss": "mytorch/nn/loss.py",
              "mytorch.nn.PositionalEncoding": "mytorch/nn/positional_encoding.py",
              "mytorch.nn.SelfAttentionLayer": "mytorch/nn/sublayers.py",
              "mytorch.nn.FeedForwardLayer": "mytorch/nn/sublayers.py",
              "mytorch.nn.SelfAttentionDecoderLayer": "mytorch/nn/decoder_layers.py",
              "mytorch.nn.DecoderOnlyTransformer": "mytorch/nn/transformers.py",
              "mytorch.optim.AdamW": "mytorch/optim/adamw.py",
              "mytorch.optim.clip_grad_norm": "mytorch/optim/adamw.py"}}


def python_text(data: bytes) -> str:
    """Source bytes as the grader reads mytorch: UTF-8, a BOM dropped, undecodable bytes replaced;
    never through the codec a coding declaration names (one can take minutes, punycode is
    quadratic, or give lone surrogates no UTF-8 writer accepts, raw_unicode_escape)."""
    return data.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")


def foreign_encoding(name: str, data: bytes) -> str:
    """The finding of a mytorch file ``name`` whose coding declaration names an encoding the grader
    does not read (``judge.refuse_foreign_encodings`` leaves it ungraded), else ''."""
    encoding = declared_encoding(data)
    if encoding is None or is_native_utf8(encoding):
        return ""
    shown = " ".join(encoding.split())[:40].replace("; ", ", ")
    return f"{name} declares the source encoding {shown!r} (not graded; read here as UTF-8)"


def mytorch_sources(files: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """({path: text read as UTF-8} of the handed-in mytorch .py files of an extraction's
    ``files``, the findings of those that could not be read, over MAX_PY_FILE_BYTES, and of those
    declaring an encoding the grader does not read)."""
    sources, findings = {}, []
    for name in sorted(files):
        if is_mytorch_source(name):
            data, finding = guarded(name, read_bounded, files[name], MAX_PY_FILE_BYTES)
            if finding:
                findings.append(finding)
                continue
            findings += [found] if (found := foreign_encoding(name, data)) else []
            sources[name] = python_text(data)
    return sources, findings


@dataclass
class Inspection:
    """What the class tools read in one handin's mytorch: its files ({path: text read as UTF-8}),
    the paths of one part (the modules holding its code), where it builds code at run time, and
    its findings (files that could not be inspected, graded files that define no graded class of
    their own, a tracing cut short)."""

    sources: dict[str, str] = field(default_factory=dict)
    part: list[str] = field(default_factory=list)
    runtime: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def inspect_mytorch(files: dict[str, Path], part: str = "graded") -> Inspection:
    """The Inspection of the mytorch .py files among an extraction's ``files`` (never run)."""
    sources, findings = mytorch_sources(files)
    runtime = []
    for path in sorted(sources):  # one file at a time: one that cannot be parsed is its finding
        found, finding = guarded(path, runtime_code, {path: sources[path]})
        runtime += found or []
        findings += [finding] if finding else []
    resolver = Resolver(sources)
    paths, cut = part_files(resolver, part)
    findings += resolver.findings + moved_classes(resolver)
    if cut:
        findings.append(f"its {part} classes use more than {MAX_DEFINITIONS} definitions: traced "
                        f"no further (every file is compared whole all the same)")
    if resolver.steps > MAX_STEPS:
        findings.append(f"its mytorch's imports could not be traced within {MAX_STEPS} look-ups")
    return Inspection(sources, paths, runtime, list(dict.fromkeys(findings)))


def part_files(resolver: Resolver, part: str) -> tuple[list[str], bool]:
    """(the modules of ``part`` in a handin: each of its reference files handed in, then each
    file defining something its classes use, as the package's imports bind them, the other
    part's classes left out; whether that tracing stopped at MAX_DEFINITIONS)."""
    other = PART_TARGETS["bonus" if part == "graded" else "graded"]
    stop = {found.key for name in other if (found := resolve_qualified(resolver, name))}
    roots = [found for name in PART_TARGETS[part] if (found := resolve_qualified(resolver, name))]
    used = resolver.closure(roots, stop)
    paths = [path for path in PART_TARGETS[part].values() if path in resolver.sources]
    return list(dict.fromkeys(paths + [found.path for found in used])), len(used) >= MAX_DEFINITIONS


def moved_classes(resolver: Resolver) -> list[str]:
    """A finding for each graded file (where the reference defines graded classes) whose graded
    classes all come from elsewhere, or cannot be traced, while the file is handed in and parses
    (one that does not parse fails the grader's import on its own)."""
    by_file: dict[str, list[str]] = {}
    for qualified, reference in PART_TARGETS["graded"].items():
        by_file.setdefault(reference, []).append(qualified)
    findings = []
    for reference, names in by_file.items():
        if reference not in resolver.sources or resolver.module(reference) is None:
            continue
        found = {name.rpartition(".")[2]: resolve_qualified(resolver, name) for name in names}
        if any(definition and definition.path == reference for definition in found.values()):
            continue
        where = ", ".join(f"{name} is defined in {definition.path}" if definition
                          else f"{name} cannot be traced" for name, definition in found.items())
        findings.append(f"{reference} defines no graded class of its own ({where})")
    return findings


class OutOfTime(BaseException):
    """Raised by the judge's timer: a BaseException, so no guard of a single file catches it."""


def inspect_handin(files: dict[str, Path]) -> tuple[list[str], list[str]]:
    """(the ways the mytorch among an extraction's ``files`` builds code at run time, its findings
    for the staff's flags): the judge's one call. The whole inspection runs under one more guard
    and, from the main thread (the judge's; a timer's signal reaches no other), at most
    INSPECTION_S seconds, so whatever a file does costs at most the finding "its mytorch could not
    be inspected (...)"."""
    if threading.current_thread() is not threading.main_thread():
        return findings_of(*guarded("its mytorch", inspect_mytorch, files))

    ended = threading.Event()  # a signal already pending when the inspection ends must not raise

    def out_of_time(signum, frame):
        if not ended.is_set():
            raise OutOfTime

    previous = signal.signal(signal.SIGALRM, out_of_time)
    try:
        signal.setitimer(signal.ITIMER_REAL, INSPECTION_S)
        return findings_of(*guarded("its mytorch", inspect_mytorch, files))
    except OutOfTime:
        return findings_of(None, f"its mytorch could not be inspected within {INSPECTION_S:g} s")
    finally:
        ended.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def findings_of(inspection: Inspection | None, finding: str) -> tuple[list[str], list[str]]:
    """:func:`inspect_handin`'s pair from a guarded inspection."""
    if finding:
        return [], [finding]
    return inspection.runtime, inspection.findings
