"""Grade one handin.tar; the last line printed is Autolab's ``{"scores": {...}}``.

Run from the extracted autograder (the Makefile does this)::

    cd autograde && python3 -m autograder.judging.grade ../handin.tar --work ../work \
        --autograde-tar ../autograde.tar

This process is the judge: it decides every score and prints the scores line, and it never imports
or runs student code. Steps, in this order on purpose:

1. refuse to run under ``python -O`` (it would strip asserts, and a check must never vanish); import
   everything the judge needs, the hidden mytorch tests included (before any student code runs, so
   nothing written later can shadow it); make the autograder folder private; become a child
   subreaper, so no descendant can outlive a step unnoticed; fork the model child of step 3 and
   park it (:func:`park_model_child`), so that it needs no interpreter start and no
   ``import torch`` of its own;
2. extract handin.tar safely into ``<work>/handin`` (``autograder.judging.safe_tar``);
3. grade the language model in a child process (``autograder.judging.grade_model``): the reference model
   code rebuilds the handed-in weights and measures per-character perplexity on the hidden test set.
   No student code runs there. The student's self-reported metrics never count: they are echoed,
   and compared (for the staff's integrity flags) with what the weights give on the very test
   transcripts the run card says they were measured on;
4. delete every copy of the hidden material on disk: the hidden test set, the hidden mytorch tests
   (already in memory), the reference ``hw4lib`` and the autograde.tar they came in;
5. choose the strongest sandbox that works here (``autograder.judging.sandbox``), then start one sandboxed
   worker (``autograder.sandboxed.worker``), which runs each mytorch category in a process of its own, send
   it each category's hidden tests' programs and judge each test on the arrays it returns
   (``autograder.judging.judge``). Each test earns its share of the category's points.

Whatever happens, every category's outcome and reason are printed and the last line is the scores
line, printed once every worker and every process they started is dead. What the student code
prints or returns is never echoed: the feedback is the judge's own words.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import secrets
import shutil
import sys
import time
import traceback
from pathlib import Path

import torch

from autograder.judging import (file_trees, judge, parked_child, processes,
                                report as grading_report, rubric, sandbox, sandbox_modes,
                                thread_policy)
from autograder.judging.lm_diagnosis import lm_hint
from autograder.judging.safe_tar import Extraction, HandinError, extract_handin
from hw4lib.file_io import file_sha256, read_untrusted_json
# REPORTED_TOLERANCE: a reported test perplexity this far (relative) from the run card's, or from
# what the weights give on the test transcripts it was measured on, is flagged for the staff.
from hw4lib.handin_format import (CONFIG_FILE, HANDIN_DIR, HANDIN_TAR, METRICS_FILE, MYTORCH_DIR,
                                  REPORTED_TOLERANCE, RUN_CARD_FILE, STATE_DICT_FILE,
                                  card_losses, card_perplexity, finite_number,
                                  is_mytorch_source)

AUTOGRADER_PACKAGE = Path(__file__).resolve().parents[1]
AUTOGRADE_ROOT = AUTOGRADER_PACKAGE.parent
HIDDEN_SET = AUTOGRADER_PACKAGE / "hidden_set"
# The public test split, not secret: a run's test_metrics.json is checked on the part it measured.
PUBLIC_SET = AUTOGRADER_PACKAGE / "public_test"
HIDDEN_TESTS = Path(__file__).resolve().parent / "hidden_tests"
REFERENCE_HW4LIB = AUTOGRADE_ROOT / "hw4lib"
# Written by tools/make_autograde.py. The driver runs only inside a built autograder, never in the
# repository, whose hw4lib it would otherwise delete.
BUILD_INFO = AUTOGRADE_ROOT / "build_info.json"
# How many disagreeing transcripts a flag names one by one (then a count).
MAX_LISTED_TRANSCRIPTS = 5
# Whatever the run card says, a report this far (relative) below the hidden set's measurement of the
# same weights is flagged: ten honest runs measured the hidden set at most 12.4% above their own
# test_metrics.json (a test split cut to 1% to 4% of its transcripts), at most 1.4% above the whole
# public test split; twice the largest gap (docs/results.md, "Reported versus hidden perplexity").
HIDDEN_MARGIN = 0.25
# What the worker imports: the package's marker and the folder that runs beside student code.
RUNTIME_FOLDER = "sandboxed"
MODEL_FILE_BYTES = 2**20  # the model child writes only its result JSON
MODEL_CHILD_MODULE = "autograder.judging.grade_model"  # its main(argv) is the model child
# Every channel (Autolab's feedback, --results-json, Gradescope's results.json, the regrade's
# feedback files) shows the handin notes through summarised(): the first MAX_NOTES, each cut to
# MAX_NOTE_CHARS, then a count, so that no handin, however many odd members it holds, makes a
# report much larger than an honest one (the tests hold every channel under 1 MiB).
MAX_NOTES = 12
MAX_NOTE_CHARS = 400
# The judge's own address space (soft limit; the worker and the model child set their own): no
# input can make it take the machine's memory. Above its honest peak with torch loaded, plus the
# stacks and buffers of torch's and OpenBLAS's threads, one of each per CPU.
MAX_JUDGE_ADDRESS_SPACE = 4 * 2**30
JUDGE_ADDRESS_SPACE_PER_CPU = 64 * 2**20
# glibc's malloc serves blocks above its mmap threshold (at most 32 MiB by default) with a fresh
# mmap and unmaps them when freed, so each of the model child's batches would page-fault and zero
# its attention scores again (up to grade_model.ACTIVATION_BUDGET float32s, 256 MiB). Above that
# size, freed blocks stay in the heap and the next batch reuses them; the values computed are the
# same (torch aligns every tensor to 64 bytes wherever its memory comes from).
MALLOC_REUSE_BYTES = 2**30


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Grade a hw4p1 handin.tar; the scores line "
                                                 "comes last.")
    parser.add_argument("handin", type=Path, help="the student's handin.tar")
    parser.add_argument("--work", type=Path, default=AUTOGRADE_ROOT.parent / "work",
                        help="scratch folder, emptied first (default: beside the autograder)")
    parser.add_argument("--autograde-tar", type=Path,
                        help="the autograde.tar this autograder came in: deleted with the "
                             "hidden set before student code runs")
    parser.add_argument("--mytorch-timeout", type=float, default=rubric.MYTORCH_TIMEOUT_S,
                        help="seconds allowed to each mytorch category")
    parser.add_argument("--model-timeout", type=float, default=rubric.MODEL_TIMEOUT_S,
                        help="seconds allowed to rebuild and evaluate the model")
    parser.add_argument("--sandbox", choices=sandbox_modes.MODES,
                        help="force one isolation mode (default: the strongest that works): "
                             + "; ".join(f"{mode.name}: {mode.isolates}"
                                         for mode in sandbox_modes.MODES.values()))
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="run student code even where no isolation layer works (never on a "
                             "shared grading host)")
    parser.add_argument("--results-json", type=Path,
                        help="also write every test's outcome here (for other platforms)")
    args = parser.parse_args(argv)
    scores = rubric.zero_scores()
    report = grading_report.GradingReport()
    try:
        if sys.flags.optimize:
            print(f"The autograder refuses to run under python -O (PYTHONOPTIMIZE="
                  f"{os.environ.get('PYTHONOPTIMIZE', '')!r}): unset PYTHONOPTIMIZE and run it "
                  f"again. Nothing was graded.")
            return
        processes.become_subreaper()
        threads = thread_policy.measure()  # before the model child, which starts importing
        model_child = park_model_child(report)
        limit_address_space()
        report.threads = use_threads(threads)
        grade(args, scores, report, model_child)
    except BaseException:  # noqa: BLE001 - a bug of ours must still leave a scores line
        report.status = grading_report.Status.CRASHED
        print("The autograder itself failed; please send this output to the course staff:")
        traceback.print_exc(file=sys.stdout)
    finally:
        try:
            processes.kill_descendants()
        except BaseException:  # noqa: BLE001 - the scores line is printed whatever happens
            print("The autograder could not check for leftover processes; please send this "
                  "output to the course staff:")
            traceback.print_exc(file=sys.stdout)
        print_summary(scores)
        if args.results_json is not None:
            write_results(args.results_json, scores, report)
        board = report.scoreboard()
        print(json.dumps({"scores": scores, **({"scoreboard": board} if board else {})}),
              flush=True)


def grade(args: argparse.Namespace, scores: dict[str, float],
          report: grading_report.GradingReport,
          model_child: parked_child.ParkedChild | None = None) -> None:
    """Fill ``scores`` category by category (it stays valid if this stops half-way);
    ``model_child``: see :func:`grade_language_model`."""
    build_info = read_untrusted_json(BUILD_INFO)
    if not isinstance(build_info, dict):
        print(f"{BUILD_INFO} not found: this is not a built autograder. Run `make autograde` and "
              f"grade with dist/autograde.tar and dist/autograde-Makefile.")
        return
    print(f"hw4p1 autograder built from commit {build_info.get('git_commit', '?')}")
    os.chmod(AUTOGRADE_ROOT, 0o700)  # the hidden material stays private until it is deleted
    work = args.work.resolve()
    if work.exists():
        file_trees.remove_tree(work)
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True)

    section("Unpacking handin.tar")
    try:
        handin = extract_handin(args.handin, work / "handin")
    except HandinError as error:
        print(f"  {error}")
        report.status = grading_report.Status.INVALID
        handin = Extraction()
    else:
        judge.refuse_foreign_encodings(handin.files, handin.notes)
        report_extraction(handin)
    report.handin_notes = summarised(handin.notes)
    if STATE_DICT_FILE in handin.files:
        report.weights_sha256 = file_sha256(handin.files[STATE_DICT_FILE])
    problem = gradable_problem(handin)
    if problem:
        report.status = grading_report.Status.INVALID
        print(f"  {problem}")

    section(f"{rubric.LM_CATEGORY} ({rubric.LM_POINTS} points)")
    thresholds = build_info.get("lm_thresholds", {})
    started = time.monotonic()
    scores[rubric.LM_CATEGORY], lm = grade_language_model(
        handin, work, args.model_timeout,
        thresholds.get("full_marks_ppl", rubric.FULL_MARKS_PPL),
        thresholds.get("zero_marks_ppl", rubric.ZERO_MARKS_PPL), model_child)
    if model_child is not None:
        model_child.close()
    report.lm = grading_report.LanguageModelResult(**lm)
    report.seconds[rubric.LM_CATEGORY] = round(time.monotonic() - started, 2)
    if report.lm.timed_out:
        report.status = grading_report.Status.TIMEOUT
    report.flags = integrity_flags(handin, lm)
    if report.flags:  # the facts go to the staff's channels (details.json), never to students
        print(f"  note: {len(report.flags)} remark(s) on how this handin's files match its "
              f"{RUN_CARD_FILE} are recorded for the course staff; no score depends on them")
    remove_secrets(work, args.autograde_tar)

    layout = prepare_sandbox(handin, work)
    if layout is None:
        skip_mytorch("the handin has no mytorch/ .py files", report)
        return
    section("Sandbox")
    mode, notes = sandbox.choose_mode(layout, judge.python_executable(), args.sandbox,
                                      args.allow_unisolated)
    report.sandbox = mode
    for note in notes:
        print(f"  not used: {note}")
    if mode is None:
        skip_mytorch(f"the sandbox asked for (--sandbox {args.sandbox}) does not work here, so "
                     f"student code was not run; grade without --sandbox to use the strongest "
                     f"mode that works" if args.sandbox else
                     "no sandbox layer works here (see the notes above), so student code was not "
                     "run", report)
        return
    print(f"  {sandbox.mode_summary(mode)}")
    print(f"  layers: {sandbox.layers_summary(mode)}")
    cap_note = sandbox.process_cap_note(mode)
    if cap_note:
        print(f"  note: {cap_note}")
    grade_mytorch(layout, mode, args.mytorch_timeout, scores, report)


def skip_mytorch(reason: str, report: grading_report.GradingReport) -> None:
    """Every mytorch test fails with ``reason`` (each category scores 0)."""
    for category, points in rubric.MYTORCH_RUBRIC.items():
        section(f"{category} ({points} points)")
        print(f"  {reason}. 0/{points}")
        report.tests += [grading_report.TestResult(test.name, category, float(test.points), 0.0,
                                                   test.summary, reason)
                         for test in judge.tests_of(category)]


def prepare_sandbox(handin: Extraction, work: Path) -> sandbox_modes.Layout | None:
    """The folders the worker sees, or None when there is no mytorch code to run.

    The student's ``mytorch/`` is copied alone into ``sandbox/student`` and the worker's own code
    into ``sandbox/runtime``; the autograder and the rest of ``work/`` are made private to the
    grader's user (which matters when the worker runs as another uid).
    """
    sources = {name: path for name, path in handin.files.items() if is_mytorch_source(name)}
    if not sources:
        return None
    root = work / "sandbox"
    layout = sandbox_modes.Layout(runtime_dir=root / "runtime", pylib_dir=root / "pylib",
                                  student_dir=root / "student", input_dir=root / "input",
                                  tmp_dir=root / "tmp",
                                  hidden_dirs=(AUTOGRADE_ROOT, work / "handin"),
                                  readonly_dir=AUTOGRADE_ROOT.parent)
    for name, path in sources.items():
        target = layout.student_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    add_worker_folders(layout, root)
    os.chmod(layout.tmp_dir, 0o700)
    os.chmod(work, 0o711)
    for private in (AUTOGRADE_ROOT, work / "handin", work / "home", work / "tmp"):
        if private.exists():
            os.chmod(private, 0o700)
    return layout


def worker_layout(root: Path, mytorch: Path | None = None) -> sandbox_modes.Layout:
    """The folders a worker reads, under ``root``, laid out as :func:`prepare_sandbox` lays them
    out but without a grading's privacy (for the tools, benches and tests that run a worker on a
    mytorch folder): its runtime, numpy, a copy of ``mytorch`` (an empty package when None) and
    empty input and tmp folders."""
    layout = sandbox_modes.Layout(root / "runtime", root / "pylib", root / "student",
                                  root / "input", root / "tmp")
    if mytorch is None:
        (layout.student_dir / "mytorch").mkdir(parents=True)
    else:
        shutil.copytree(mytorch, layout.student_dir / "mytorch",
                        ignore=shutil.ignore_patterns("__pycache__"))
    add_worker_folders(layout, root)
    return layout


def add_worker_folders(layout: sandbox_modes.Layout, root: Path) -> None:
    """Beside the student's folder of ``layout``: the worker's own code, numpy, empty input and
    tmp folders (tmp owned by the sandbox's uid when root); everything under ``root`` readable."""
    package = layout.runtime_dir / "autograder"
    (package / RUNTIME_FOLDER).mkdir(parents=True)
    shutil.copyfile(AUTOGRADER_PACKAGE / "__init__.py", package / "__init__.py")
    for source in sorted((AUTOGRADER_PACKAGE / RUNTIME_FOLDER).glob("*.py")):
        shutil.copyfile(source, package / RUNTIME_FOLDER / source.name)
    link_numpy(layout.pylib_dir)
    layout.input_dir.mkdir()
    layout.tmp_dir.mkdir()
    sandbox.make_readable(root)
    if os.geteuid() == 0:
        os.chown(layout.tmp_dir, sandbox_modes.grading_uid(), sandbox_modes.grading_uid())


def link_numpy(folder: Path) -> None:
    """``folder`` holding links to numpy (and its bundled libraries) and nothing else."""
    import numpy

    folder.mkdir(parents=True)
    numpy_dir = Path(numpy.__file__).resolve().parent
    for source in (numpy_dir, numpy_dir.parent / "numpy.libs"):
        if source.is_dir():
            (folder / source.name).symlink_to(source)


def grade_mytorch(layout: sandbox_modes.Layout, mode: str, timeout: float,
                  scores: dict[str, float], report: grading_report.GradingReport) -> None:
    """Judge every mytorch category in turn with one worker start (``judge.grade_categories``),
    ``timeout`` seconds each; print each category's outcome as it is judged and fill its score."""
    def graded(category: str, run: judge.CategoryRun) -> None:
        scores[category] = grade_mytorch_category(category, run, report)

    judge.grade_categories(list(rubric.MYTORCH_RUBRIC), layout, mode, timeout, graded=graded)


def grade_mytorch_category(category: str, run: judge.CategoryRun,
                           report: grading_report.GradingReport) -> float:
    """Print one category's section and each test's outcome from its ``run``; return the
    points."""
    points = rubric.MYTORCH_RUBRIC[category]
    section(f"{category} ({points} points)")
    if run.timed_out:
        report.status = grading_report.Status.TIMEOUT
    report.seconds[category] = round(run.seconds, 2)
    for result in run.results:
        verdict = "PASS" if result.passed else "FAIL"
        print(f"  [{verdict}] {result.name}: {result.points:g}/{result.max_points:g}")
        print(f"         checks: {result.summary}")
        if result.message:
            print(indent(result.message, "         why: "))
        if result.hint:
            print(indent(result.hint, "         likely cause: "))
        report.tests.append(result)
    if run.output.strip():  # never echoed: it could carry whatever the worker could read
        print(f"  (your code printed {len(run.output)} characters; output is not shown, run the "
              f"public tests to see it)")
    earned = rubric.added(result.points for result in run.results)
    reason = f" ({run.note})" if run.note else ""
    print(f"  => {category}: {earned:g}/{points}{reason}   [{run.seconds:.1f} s]")
    return earned


def use_threads(choice: thread_policy.ThreadChoice) -> dict:
    """Hold the judge's torch and, through this process's environment, its children's math
    libraries to ``choice``; print it in the feedback's header; return details.json's entry."""
    os.environ.update(thread_policy.environment(choice.threads))
    torch.set_num_threads(choice.threads)  # the hidden tests' truths: torch is loaded already
    print(f"hw4p1 autograder: {choice.summary()}")
    return thread_policy.report(choice)


def child_environment(work: Path, python_path: list[Path]) -> dict[str, str]:
    """A child's environment: ``python_path`` importable first, caches and temp files in work/,
    the math threads :func:`use_threads` chose (it set them in this process's environment)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH",
                          "PYTHONUSERBASE")}
    tmp = work / "tmp"
    env.update({
        "PYTHONPATH": os.pathsep.join(str(path) for path in python_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8",
        "TQDM_DISABLE": "1",
        "WANDB_MODE": "disabled",
        "HOME": str(work / "home"),
        "TMPDIR": str(tmp),
        "MPLCONFIGDIR": str(tmp / "matplotlib"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "TORCH_HOME": str(tmp / "torch"),
        "MALLOC_MMAP_THRESHOLD_": str(MALLOC_REUSE_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(MALLOC_REUSE_BYTES),
    })
    return env


def report_extraction(handin: Extraction) -> None:
    mytorch = sorted(name for name in handin.files if is_mytorch_source(name))
    others = sorted(name for name in handin.files if not is_mytorch_source(name))
    print(f"  extracted {len(mytorch)} mytorch files and: {', '.join(others) or 'nothing else'}")
    for note in summarised(handin.notes):
        print(f"  note: {note}")


def gradable_problem(handin: Extraction) -> str:
    """What a handin lacks to be graded in full, what it held instead and how to pack it; '' when
    it has a mytorch and a model."""
    missing = ([] if any(is_mytorch_source(name) for name in handin.files)
               else [f"{MYTORCH_DIR}/ .py files"])
    missing += [name for name in (CONFIG_FILE, STATE_DICT_FILE) if name not in handin.files]
    if not missing:
        return ""
    skipped = sum("; skipped" in note for note in handin.notes)
    found = (f"{len(handin.files)} files the grader uses ({', '.join(sorted(handin.files)[:5])}"
             f"{', ...' if len(handin.files) > 5 else ''})" if handin.files else "no file the "
             "grader uses")
    if skipped:
        found += f" and {skipped} it skipped (see the notes above)"
    return (f"Not a complete handin: it has no {', no '.join(missing)}; it holds {found}. Run "
            f"`make handin` after training and hand in the {HANDIN_TAR} it writes, unchanged: it "
            f"holds {HANDIN_DIR}/{MYTORCH_DIR}/, {HANDIN_DIR}/{CONFIG_FILE} and "
            f"{HANDIN_DIR}/{STATE_DICT_FILE} (a tar of the run folder, or of files outside "
            f"{HANDIN_DIR}/, is not a handin).")


def summarised(notes: list[str]) -> list[str]:
    """The notes every channel shows: the first MAX_NOTES (each at most MAX_NOTE_CHARS), then one
    line counting the rest."""
    shown = [note if len(note) <= MAX_NOTE_CHARS else note[:MAX_NOTE_CHARS - 3] + "..."
             for note in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        shown.append(f"... and {len(notes) - MAX_NOTES} more notes like these: the archive should "
                     f"hold only what `make handin` packs")
    return shown


def judge_address_space() -> int:
    """MAX_JUDGE_ADDRESS_SPACE plus JUDGE_ADDRESS_SPACE_PER_CPU per CPU, or the machine's memory
    when that is smaller (bytes)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(MAX_JUDGE_ADDRESS_SPACE + JUDGE_ADDRESS_SPACE_PER_CPU * (os.cpu_count() or 1),
               physical)


def limit_address_space() -> None:
    """Cap this process's address space (soft limit) at :func:`judge_address_space`, so that no
    input makes the judge take the machine's memory; a MemoryError then ends the grading with its
    scores line like any failure of ours."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = judge_address_space()
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def park_model_child(report: grading_report.GradingReport) -> parked_child.ParkedChild | None:
    """The model child, forked now from this process (which has imported torch for the hidden
    tests and run no torch computation yet) and waiting for its arguments; None when forking is
    not safe here, and ``report.model_child`` says why (the model child is then started
    fresh, as a command)."""
    try:
        child = parked_child.ParkedChild(MODEL_CHILD_MODULE, "main")
    except parked_child.ForkRefused as refusal:
        report.model_child = f"started fresh: {refusal}"
        return None
    report.model_child = "forked from the judge"
    return child


def grade_language_model(handin: Extraction, work: Path, timeout: float,
                         full_marks_ppl: float, zero_marks_ppl: float,
                         model_child: parked_child.ParkedChild | None = None) -> tuple[float, dict]:
    """Rebuild and evaluate the handed-in model in a child process; return (points, details).
    The child is ``model_child`` (from :func:`park_model_child`) when given, else a fresh
    ``python -m autograder.judging.grade_model``: the same arguments, environment, folder and limits.

    The student sees the perplexity to 2 decimals, the points and a likely cause; the details
    (for details.json and the staff) hold the full measurement and what it was compared with.
    """
    missing = [name for name in (CONFIG_FILE, STATE_DICT_FILE) if name not in handin.files]
    if missing:
        message = (f"the handin has no {' and no '.join(missing)}: run `make handin` after "
                   f"training")
        print(f"  {message}. 0 points")
        return 0, {"message": message}
    result_path = work / "lm" / "result.json"
    reported = self_reported_perplexity(handin)
    card = read_card(handin)
    compare, compare_note = compare_arguments(reported, card)
    arguments = ["--handin", str(work / "handin"), "--hidden-set", str(HIDDEN_SET),
                 "--out", str(result_path), *compare]
    environment = child_environment(work, [AUTOGRADE_ROOT])
    if model_child is not None:
        run = model_child.run(arguments, AUTOGRADE_ROOT, environment, timeout, model_limits())
    else:
        run = processes.run_process([sys.executable, "-m", MODEL_CHILD_MODULE, *arguments],
                                    cwd=AUTOGRADE_ROOT, env=environment, timeout=timeout,
                                    limits=model_limits())
    print(indent(run.output))
    if run.timed_out:
        message = f"evaluating the model took more than the {timeout:g} s limit"
        print(f"  {message}. 0 points")
        return 0, {"message": message, "timed_out": True}
    result = read_untrusted_json(result_path)
    perplexity = result.get("perplexity_char") if isinstance(result, dict) else None
    if run.returncode != 0 or not isinstance(perplexity, float):
        error = result.get("error") if isinstance(result, dict) else None
        quoted = processes.printable(str(error))[:processes.MAX_ERROR_CHARS]
        message = (f"the model could not be evaluated: {quoted}" if error
                   else "the model could not be evaluated (see above)")
        print(f"  {message}. 0 points")
        return 0, {"message": message}
    points = rubric.lm_score(perplexity, full_marks_ppl, zero_marks_ppl)
    # Two decimals: more of the hidden set's perplexity, submission after submission, would tell
    # the hidden text's statistics.
    message = (f"per-character perplexity on the hidden test set: {perplexity:.2f} "
               f"(full marks <= {full_marks_ppl}, none >= {zero_marks_ppl}, linear in between) "
               f"-> {points}/{rubric.LM_POINTS}")
    print(f"  {message}   [{run.seconds:.1f} s]")
    compared = result.get("compared_perplexity_char")
    compared = compared if isinstance(compared, float) else None
    compare_note = compare_note or str(result.get("compare_note") or "")
    sample = result.get("compared_sample") if isinstance(result.get("compared_sample"),
                                                         dict) else None
    if sample is not None:
        compared, compare_note = sampled_comparison(card, sample)
    elif compared is not None:
        compare_note = (f"{RUN_CARD_FILE}'s per-transcript losses are not as make handin writes "
                        f"them" if has_card_losses(card) else
                        f"{RUN_CARD_FILE} has no per-transcript losses (an older make handin)"
                        ) + ": the whole test set it names was re-measured"
    report_self_reported_metrics(reported, compared, compare_note,
                                 "" if sample is None else
                                 f" (the sum of {RUN_CARD_FILE}'s losses of each transcript; "
                                 f"{len(sample['indices'])} of them re-measured here agree)")
    details = {"message": message, "perplexity_char": perplexity, "seconds": round(run.seconds, 3),
               "phase_seconds": result.get("phase_seconds"),
               "reported_perplexity_char": reported, "compared_perplexity_char": compared,
               "compare_note": compare_note, "compared_sample": sample,
               "num_parameters": result.get("num_parameters"),
               "token_type": result.get("token_type"),
               "state_dict_sha256": result.get("state_dict_sha256"),
               "config_sha256": result.get("config_sha256"),
               "weights_fingerprint": result.get("weights_fingerprint")}
    disagreements = card_disagreements(card, details)
    hint = lm_hint(perplexity, full_marks_ppl, reported, compared,
                   card.get("val_perplexity_char") if isinstance(card, dict) else None,
                   REPORTED_TOLERANCE, bool(disagreements), result.get("dropout_active"))
    if hint:
        print(indent(hint, "  likely cause: "))
    return points, {**details, "hint": hint}


def compare_arguments(reported: float | None, card) -> tuple[list[str], str]:
    """(the model child's arguments that also measure the test set the run card names, "") or
    ([], why nothing is compared). The card comes from the handin: only a positive count and a
    sha256 in hex reach the child's command line. A card that records each transcript's loss
    gets a fresh seed (``secrets``) on every call: the child measures only the transcripts it
    draws; an older card, the whole set."""
    test_set = card.get("test_set") if isinstance(card, dict) else None
    if reported is None:
        return [], f"{METRICS_FILE} has no usable perplexity_char"
    if not (isinstance(test_set, dict) and type(test_set.get("transcripts")) is int
            and test_set["transcripts"] > 0 and isinstance(test_set.get("sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", test_set["sha256"])):
        return [], f"{RUN_CARD_FILE} does not name the test set {METRICS_FILE} measured"
    if not PUBLIC_SET.is_dir():
        return [], "this autograder has no copy of the public test split"
    sample = ["--sample-seed", str(secrets.randbits(63))] if card_losses(card) is not None else []
    return ["--public-set", str(PUBLIC_SET), "--compare", str(test_set["transcripts"]),
            test_set["sha256"], *sample], ""


def has_card_losses(card) -> bool:
    """True when the card's test_set carries any of the per-transcript fields make handin writes
    (well formed or not)."""
    test_set = card.get("test_set") if isinstance(card, dict) else None
    return isinstance(test_set, dict) and any(
        key in test_set for key in ("transcript_nll", "transcript_tokens", "total_nll"))


def sampled_comparison(card, sample: dict) -> tuple[float | None, str]:
    """(the perplexity the card's per-transcript losses give on the set the child verified, "")
    when they add up to the card's total and every transcript the child re-measured agrees with
    them; else (None, why they are not what these weights give)."""
    problems = card_loss_problems(card, sample)
    if problems:
        return None, (f"{RUN_CARD_FILE}'s per-transcript losses disagree with these weights "
                      f"(the staff have the details)")
    nll, _, _ = card_losses(card)
    return card_perplexity(math.fsum(nll), sample["characters"]), ""


def card_loss_problems(card, sample: dict) -> list[str]:
    """Facts, each with both numbers, where the card's per-transcript losses are not what the
    weights give: unreadable, not adding up to their total, or a re-measured transcript of the
    child's ``sample`` more than REPORTED_TOLERANCE apart in per-character perplexity (or with
    another token count). [] when they agree."""
    found = card_losses(card)
    if found is None:
        return [f"{RUN_CARD_FILE}'s per-transcript losses are not one finite non-negative loss and "
                f"one token count per transcript it counts: not as make handin writes them"]
    nll, tokens, total = found
    problems = []
    if abs(math.fsum(nll) - total) > 1e-9 * max(1.0, abs(total)):
        problems.append(f"{RUN_CARD_FILE}'s per-transcript losses add up to "
                        f"{math.fsum(nll):.6g} nats, its total_nll is {total:.6g} (make handin "
                        f"writes their sum)")
    disagree = []
    for index, name, measured, count, chars in zip(sample["indices"], sample["names"],
                                                   sample["nll"], sample["tokens"],
                                                   sample["chars"]):
        gap = (nll[index] - measured) / max(chars, 1)  # an empty transcript still has its [EOS]
        apart = abs(math.expm1(gap)) if gap < 700 else math.inf
        if apart > REPORTED_TOLERANCE or tokens[index] != count:
            disagree.append(f"#{index} {name}: {nll[index]:.6g} nats over {tokens[index]} tokens "
                            f"in {RUN_CARD_FILE}, these weights {measured:.6g} over {count} "
                            f"({apart:.1%} apart in per-character perplexity)")
    if disagree:
        listed = "; ".join(disagree[:MAX_LISTED_TRANSCRIPTS])
        more = len(disagree) - MAX_LISTED_TRANSCRIPTS
        problems.append(f"{len(disagree)} of the {len(sample['indices'])} test transcripts "
                        f"re-measured here (a fresh random sample of {len(sample['drawn'])} of the "
                        f"{sample['transcripts']} {RUN_CARD_FILE} records, seed {sample['seed']}, "
                        f"and the {len(sample['lowest'])} whose recorded loss per character is "
                        f"lowest) disagree with it by more than {REPORTED_TOLERANCE:.0%}: {listed}"
                        + (f"; and {more} more" if more > 0 else ""))
    return problems


def model_limits() -> dict[int, int]:
    """Limits of the model child: no core dumps, no big files. Its memory is bounded by the checks
    on the config and the state dict it does before allocating anything."""
    import resource

    return {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: MODEL_FILE_BYTES,
            resource.RLIMIT_AS: resource.getrlimit(resource.RLIMIT_AS)[1]}  # not the judge's cap


def read_card(handin: Extraction):
    """The parsed run_card.json of the handin, or None."""
    path = handin.files.get(RUN_CARD_FILE)
    return read_untrusted_json(path) if path is not None else None


def self_reported_perplexity(handin: Extraction) -> float | None:
    """The perplexity_char of the handin's own test_metrics.json, when usable."""
    path = handin.files.get(METRICS_FILE)
    reported = read_untrusted_json(path) if path is not None else None
    value = reported.get("perplexity_char") if isinstance(reported, dict) else None
    return finite_number(value)


def report_self_reported_metrics(reported: float | None, compared: float | None,
                                 note: str, how: str = "") -> None:
    """Echo the student's own test_metrics.json next to what the weights give on the same test
    transcripts (the public split's, not the hidden set's; ``how``: how that was known, after the
    number); it never counts."""
    if reported is None:
        print("  (no usable perplexity_char in test_metrics.json; only the measurement above counts)")
        return
    measured = (f"; these weights give {compared:.4f} on the same transcripts{how}"
                if compared is not None else f"; not compared with these weights: {note}")
    print(f"  (your test_metrics.json reports {reported:.4f}{measured}; only the measurement above "
          f"counts)")


def card_disagreements(card, lm: dict) -> list[str]:
    """Facts where the handin's files differ from the run_card.json make handin wrote, each with
    both values: the weights, the config, the metrics. A handin with none is consistent."""
    if not isinstance(card, dict):
        return []
    found = []
    for key, name, what in (("state_dict_sha256", STATE_DICT_FILE, "sha256"),
                            ("config_sha256", CONFIG_FILE, "model and tokenizer digest")):
        if lm.get(key) and card.get(key) != lm[key]:
            found.append(f"{name}'s {what} is {short(lm[key])}, {RUN_CARD_FILE} records "
                         f"{short(card.get(key))}: not the file make handin packed")
    reported, carded = lm.get("reported_perplexity_char"), finite_number(
        card.get("test_perplexity_char"))
    if reported is not None and carded is not None and not close(reported, carded):
        found.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}, {RUN_CARD_FILE} "
                     f"{carded:.4f}: the metrics changed after packing")
    return found


def integrity_flags(handin: Extraction, lm: dict) -> list[str]:
    """Facts for the course staff, each with both numbers: where the handin disagrees with its
    run_card.json (replaced weights or config, metrics edited after packing, per-transcript losses
    that are not what the weights give on the transcripts re-measured) and where
    test_metrics.json is more than REPORTED_TOLERANCE from what the weights give on the very
    transcripts it measured (re-measured whole for an older card, else the card's per-transcript
    losses summed), and, whatever the card says, where test_metrics.json is more than
    HIDDEN_MARGIN below the hidden set's measurement. Nothing is flagged that honest work packed by
    make handin can show: a report that cannot be compared like with like is a note
    (``compare_note``), not a flag."""
    if not handin.files:
        return []
    hidden = below_hidden_set(lm)
    card = read_card(handin)
    if not isinstance(card, dict):
        return [f"no readable {RUN_CARD_FILE}: the handin was not packed by make handin", *hidden]
    flags = card_disagreements(card, lm) + hidden
    test_set = card.get("test_set") if isinstance(card.get("test_set"), dict) else {}
    where = (f"on the same {test_set.get('transcripts')} transcripts (split "
             f"{short(test_set.get('split'))}, subset {short(test_set.get('subset'))})")
    reported, compared = lm.get("reported_perplexity_char"), lm.get("compared_perplexity_char")
    sample = lm.get("compared_sample")
    if isinstance(sample, dict):
        problems = card_loss_problems(card, sample)
        flags += problems
        found = card_losses(card)
        if isinstance(reported, float) and found is not None:
            carded = card_perplexity(math.fsum(found[0]), sample["characters"])
            source = (f"these weights give {carded:.4f} {where} (the sum of {RUN_CARD_FILE}'s "
                      f"per-transcript losses; the {len(sample['indices'])} of them re-measured "
                      f"here agree)" if not problems else
                      f"{RUN_CARD_FILE}'s per-transcript losses give {carded:.4f} {where}")
            if not close(reported, carded):
                flags.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; "
                             f"{source}: {abs(reported - carded) / carded:.1%} apart, more than "
                             f"{REPORTED_TOLERANCE:.0%}")
    elif has_card_losses(card) and card_losses(card) is None:
        flags.append(card_loss_problems(card, {})[0])
    if sample is None and isinstance(reported, float) and isinstance(compared, float) and not close(
            reported, compared):
        flags.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; these weights "
                     f"give {compared:.4f} {where}: {abs(reported - compared) / compared:.1%}"
                     f" apart, more than {REPORTED_TOLERANCE:.0%}")
    return flags


def below_hidden_set(lm: dict) -> list[str]:
    """[the fact] when test_metrics.json reports a perplexity more than HIDDEN_MARGIN below what
    the same weights give on the hidden set, whatever the run card says; else []. The hidden-set
    number keeps the two decimals the student's feedback shows."""
    reported, measured = lm.get("reported_perplexity_char"), lm.get("perplexity_char")
    if not (isinstance(reported, float) and isinstance(measured, float) and reported > 0
            and measured > reported * (1 + HIDDEN_MARGIN)):
        return []
    return [f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; these weights give "
            f"{measured:.2f} on the hidden test set, {measured / reported - 1:.0%} above it "
            f"(honest runs: at most {HIDDEN_MARGIN:.0%} above their report)"]


def close(reported: float, measured: float) -> bool:
    """Within REPORTED_TOLERANCE (relative to ``measured``)."""
    return abs(reported - measured) <= REPORTED_TOLERANCE * abs(measured)


def short(value) -> str:
    """A value from the handin, quoted short (it could be anything)."""
    text = repr(value)
    return text if len(text) <= 20 else text[:17] + "..."


def remove_secrets(work: Path, autograde_tar: Path | None) -> None:
    """Delete every copy of the hidden material on disk once the model is graded, before any
    student code runs: the hidden test set, the hidden mytorch tests (imported at the start), the
    reference solution and the archive they came in.

    So that no mode of the sandbox, however weak, leaves them readable to the worker.
    """
    for path in (HIDDEN_SET, HIDDEN_TESTS, REFERENCE_HW4LIB, work / "lm"):
        file_trees.remove_tree(path)
    if autograde_tar is not None and autograde_tar.is_file():
        autograde_tar.unlink()


def write_results(path: Path, scores: dict[str, float],
                  report: grading_report.GradingReport) -> None:
    """The report with the scores, as its JSON form (autograder/judging/report.py), for the Gradescope
    adapter and the class tools."""
    try:
        report.scores = dict(scores)
        grading_report.write(path, report)
    except (OSError, TypeError, ValueError) as error:
        print(f"could not write {path}: {error}")


def indent(text: str, prefix: str = "    | ") -> str:
    """Text from elsewhere (child output, messages), each line prefixed so that it cannot be
    mistaken for the grader's own lines."""
    if not text.strip():
        return prefix + "(no output)"
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def print_summary(scores: dict[str, float]) -> None:
    section("Summary")
    for category, points in rubric.RUBRIC.items():
        print(f"  {category:<28s} {scores[category]:>6g}/{points}")
    total = round(sum(scores.values()), 2)
    print(f"  {'Total':<28s} {total:>6g}/{sum(rubric.RUBRIC.values())}", flush=True)


if __name__ == "__main__":
    main()
