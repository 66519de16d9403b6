"""The sections of the handout's README that ``tools/make_handout.py`` generates: the students'
task list (every stub, by file in :data:`TASK_ORDER`, with each file's test command) and the
grading (the points and the pass mark of ``hw4lib/grading_numbers.py``, or the thresholds
``make handout`` is given, which its copy of that module then states too: see
:func:`with_thresholds`; ``make autograde`` checks a grader against them:
:func:`stated_numbers`)."""
from __future__ import annotations

import ast
import re

from autograder.classroom.rescore import NUMBERS_MODULE
from hw4lib.grading_numbers import (FULL_MARKS_PPL, LM_CATEGORY, LM_POINTS, MYTORCH_RUBRIC,
                                    ZERO_MARKS_PPL)
from hw4lib.handin_format import HANDIN_TAR
from tools.handout_regions import HandoutError, Region

# Lines of README.md whose sections (from their "## " heading up to the next one) the handout
# replaces by generated text: the task list, from the regions (the README holds no other task
# list), and the grading, from hw4lib/grading_numbers.py (the README quotes no point or threshold).
TASKS_MARKER = "<!-- make handout: the task list -->"
GRADING_MARKER = "<!-- make handout: the grading -->"

# The order students implement the files in, and the test modules that check each one (what the
# notebook's matching cell runs). A file with regions missing here is listed last in the README.
# The bonus track starts at BONUS_FIRST.
TASK_ORDER: dict[str, tuple[str, ...]] = {
    "mytorch/nn/linear.py": ("test_mytorch",),
    "mytorch/nn/activation.py": ("test_mytorch",),
    "mytorch/nn/scaled_dot_product_attention.py": ("test_mytorch",),
    "mytorch/nn/multi_head_attention.py": ("test_mytorch",),
    "hw4lib/data/lm_dataset.py": ("test_dataset",),
    "hw4lib/model/masks.py": ("test_mask_causal", "test_mask_padding"),
    "hw4lib/model/positional_encoding.py": ("test_positional_encoding",),
    "hw4lib/model/sublayers.py": ("test_sublayer_selfattention", "test_sublayer_feedforward",
                                  "test_model_vs_mytorch"),
    "hw4lib/model/decoder_layers.py": ("test_decoderlayer_selfattention",),
    "hw4lib/model/transformers.py": ("test_transformer_decoder_only",),
    "hw4lib/decoding/sequence_generator.py": ("test_decoding",),
    "hw4lib/trainers/lm_trainer.py": ("test_lm_trainer",),
    # The bonus track: the whole model in numpy, on top of the attention stack above.
    "mytorch/nn/embedding.py": ("test_mytorch_lm",),
    "mytorch/nn/layer_norm.py": ("test_mytorch_lm",),
    "mytorch/nn/gelu.py": ("test_mytorch_lm",),
    "mytorch/nn/dropout.py": ("test_mytorch_lm",),
    "mytorch/nn/loss.py": ("test_mytorch_lm",),
    "mytorch/nn/positional_encoding.py": ("test_mytorch_lm",),
    "mytorch/nn/sublayers.py": ("test_mytorch_lm",),
    "mytorch/nn/decoder_layers.py": ("test_mytorch_lm",),
    "mytorch/nn/transformers.py": ("test_mytorch_lm",),
    "mytorch/optim/adamw.py": ("test_mytorch_lm",),
}
BONUS_FIRST = "mytorch/nn/embedding.py"


def task_section(regions: list[Region], handout_tests: set[str]) -> str:
    """The students' README section: every stub, grouped by file in working order, with the test
    command of each file (only test modules that exist in the handout are named)."""
    by_file: dict[str, list[Region]] = {}
    for region in regions:
        by_file.setdefault(region.path, []).append(region)
    known = [p for p in TASK_ORDER if p in by_file]
    others = sorted(p for p in by_file if p not in TASK_ORDER)
    out = [
        "## Your tasks, in order\n\n",
        "Each task below is a `raise NotImplementedError(...)` line in the handout, under a "
        "`# TODO:` comment\nthat says what goes there; the docstring above it gives the shapes, "
        "the dtypes and the hints: read\nit whole first. Work from top to bottom (later parts use "
        "earlier ones) and run the file's test\nafter each task.\n",
    ]
    for number, path in enumerate(known + others, start=1):
        if path == BONUS_FIRST:
            out.append("\n**Bonus (0 points)**: the files below rebuild the whole model in numpy, "
                       "on top of your\nattention stack and checked against your PyTorch model: "
                       "finish the tasks above first.\n")
        tests = [t for t in TASK_ORDER.get(path, ()) if t in handout_tests]
        command = (", ".join(f"`python -m tests.{t}`" for t in tests) if tests
                   else "`make test`")
        out.append(f"\n### {number}. `{path}`\n\nTest: {command}\n\n")
        for region in by_file[path]:
            where = f"cell {region.cell}, " if region.cell is not None else ""
            function = region.qualname or "top-level code"
            out.append(f"- {where}`{function}`: {region.todo}\n")
    return "".join(out)


def grading_section(full_marks_ppl: float = FULL_MARKS_PPL,
                    zero_marks_ppl: float = ZERO_MARKS_PPL) -> str:
    """The students' README section on what the autograder awards: the points of
    ``hw4lib/grading_numbers.py`` and the language model's two thresholds."""
    rows = "".join(f"| `{category}` (mytorch) | {points} |\n"
                   for category, points in MYTORCH_RUBRIC.items())
    total = sum(MYTORCH_RUBRIC.values()) + LM_POINTS
    return (
        "## Grading\n\n"
        f"The autograder grades `{HANDIN_TAR}` out of {total} points:\n\n"
        f"| part | points |\n| --- | ---: |\n{rows}| `{LM_CATEGORY}` | {LM_POINTS} |\n\n"
        "Hidden tests like those of `tests/test_mytorch.py`, with other shapes, grade each mytorch "
        "class; each\nhidden test carries a share of its class's points. Locally, "
        "`python -m tests.test_mytorch` gives a\nclass its points when all its tests pass and "
        "no points when one fails: the hidden tests' partial\ncredit is theirs to decide, and "
        "no local count would match it. The language model earns all\n"
        f"{LM_POINTS} points at a per-character perplexity on hidden text of\nat most "
        f"{full_marks_ppl} (the pass mark), none at {zero_marks_ppl} or more, and a straight line "
        "in between; `make handin`\nstates what your run's test perplexity would earn. The bonus "
        "earns no points. These numbers are in\n`hw4lib/grading_numbers.py`.\n"
    )


def replace_section(readme: str, marker: str, section: str) -> str:
    """``readme`` with the section that holds the line ``marker`` (from its ``## `` heading up to
    the next ``## `` heading, or the end) replaced by ``section``."""
    lines = readme.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(marks) != 1:
        raise HandoutError(f"README.md must hold the line {marker!r} exactly once, under the "
                           f"heading of the section it stands for; found it {len(marks)} times")
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    start = max((i for i in headings if i < marks[0]), default=None)
    if start is None:
        raise HandoutError(f"README.md:{marks[0] + 1}: {marker!r} must sit under a '## ' "
                           "heading: that section is what the generated text replaces")
    end = min((i for i in headings if i > marks[0]), default=len(lines))
    after = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + after if after else "")


def student_readme(readme: str, regions: list[Region], handout_tests: set[str],
                   full_marks_ppl: float = FULL_MARKS_PPL,
                   zero_marks_ppl: float = ZERO_MARKS_PPL) -> str:
    """The handout README: the repo's README with the sections that hold :data:`TASKS_MARKER`
    and :data:`GRADING_MARKER` replaced by :func:`task_section` and :func:`grading_section`. What
    those sections say in the repo is for instructors only."""
    with_tasks = replace_section(readme, TASKS_MARKER, task_section(regions, handout_tests))
    return replace_section(with_tasks, GRADING_MARKER,
                           grading_section(full_marks_ppl, zero_marks_ppl))


# The names of hw4lib/grading_numbers.py that the Grading section states.
THRESHOLD_NAMES = {"full_marks_ppl": "FULL_MARKS_PPL", "zero_marks_ppl": "ZERO_MARKS_PPL"}


def with_thresholds(module: str, full_marks_ppl: float, zero_marks_ppl: float) -> str:
    """The text of ``hw4lib/grading_numbers.py`` (``module``) with the two thresholds set to these
    values (the handout's copy states what its README does); unchanged where they are already."""
    for key, value in (("full_marks_ppl", full_marks_ppl), ("zero_marks_ppl", zero_marks_ppl)):
        name = THRESHOLD_NAMES[key]
        if stated_numbers(module)[key] == value:
            continue
        module, found = re.subn(rf"^{name} = .*$", f"{name} = {float(value)!r}", module,
                                flags=re.MULTILINE)
        if found != 1:
            raise HandoutError(f"{NUMBERS_MODULE} must set {name} on one line `{name} = <number>` "
                               f"for make handout to state another value; found {found}")
    return module


def stated_numbers(module: str) -> dict:
    """What a ``hw4lib/grading_numbers.py`` text (``module``) states, as build_info.json records
    a grader's: ``rubric`` {category: points}, ``full_marks_ppl``, ``zero_marks_ppl``; read, never
    run."""
    values = {}
    for node in ast.parse(module).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    try:
        return {"rubric": {**values["MYTORCH_RUBRIC"], values["LM_CATEGORY"]: values["LM_POINTS"]},
                **{key: values[name] for key, name in THRESHOLD_NAMES.items()}}
    except KeyError as missing:
        raise HandoutError(f"{NUMBERS_MODULE} does not set {missing}") from None
