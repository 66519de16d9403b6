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
   park it (``autograder.judging.scoring.model_child``), so that it needs no interpreter start and
   no ``import torch`` of its own; cap the judge's address space and choose its threads
   (``autograder.judging.isolation.judge_process``);
2. extract handin.tar safely into ``<work>/handin`` (``autograder.judging.intake.safe_tar``) and
   read its mytorch for the staff's flags, never run
   (``autograder.judging.intake.static_inspection``);
3. grade the language model (``autograder.judging.scoring.language_model``) in a child process
   (``autograder.judging.scoring.grade_model``): the reference model code rebuilds the handed-in
   weights and measures per-character perplexity on the hidden test set. No student code runs there.
   The student's self-reported metrics never count: they are echoed, and compared (for the
   staff's integrity flags) with what the weights give on the very test transcripts the run card
   says they were measured on (``autograder.judging.scoring.integrity``);
4. delete every copy of the hidden material on disk: the hidden test set, the hidden mytorch tests
   (already in memory), the reference ``hw4lib`` and the autograde.tar they came in
   (``autograder.judging.isolation.autograder_paths``);
5. lay out the worker's folders (``autograder.judging.isolation.worker_folders``), choose the
   strongest sandbox that works here (``autograder.judging.isolation.sandbox``: a frozen
   ``Sandbox``), then start one sandboxed worker in it (``autograder.sandboxed.worker``), which
   runs each mytorch category in a process of its own, send it each category's hidden tests'
   programs and judge each test on the arrays it returns
   (``autograder.judging.scoring.mytorch_categories``, ``autograder.judging.scoring.judge``). Each
   test earns its share of the category's points.

Whatever happens, every category's outcome and reason are printed and the last line is the scores
line, printed once every worker and every process they started is dead. What the student code
prints or returns is never echoed: the feedback is the judge's own words
(``autograder.judging.scoring.feedback``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from autograder.judging import command_line
from autograder.judging.isolation import (file_trees, judge_process, parked_child, processes,
                                          thread_policy)
from autograder.judging.scoring import judge, model_child, report as grading_report, rubric
from autograder.judging.isolation.autograder_paths import (AUTOGRADE_ROOT, BUILD_INFO,
                                                           remove_hidden_material)
from autograder.judging.scoring.feedback import (gradable_problem, print_summary, report_extraction,
                                         section, summarised)
from autograder.judging.scoring.language_model import grade_lm
from autograder.judging.scoring.mytorch_categories import (choose_sandbox, grade_mytorch,
                                                           skip_mytorch)
from autograder.judging.intake.safe_tar import Extraction, HandinError, extract_handin
from autograder.judging.intake.static_inspection import inspect_handin
from autograder.judging.isolation.worker_folders import prepare_sandbox
from hw4lib.file_io import file_sha256, read_untrusted_json
from hw4lib.handin_format import STATE_DICT_FILE


def main(argv: list[str] | None = None) -> None:
    args = command_line.parse(argv)
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
        parked = model_child.park_model_child(report)
        judge_process.limit_address_space()
        report.threads = judge_process.use_threads(threads)
        grade(args, scores, report, parked)
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
          parked: parked_child.ParkedChild | None = None) -> None:
    """Fill ``scores`` category by category (it stays valid if this stops half-way);
    ``parked``: see :func:`autograder.judging.scoring.language_model.grade_lm`."""
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
    handin = unpack(args.handin, work, report)
    grade_lm(handin, work, build_info.get("lm_thresholds", {}), args.model_timeout, scores, report,
             parked)
    remove_hidden_material(work, args.autograde_tar)
    layout = prepare_sandbox(handin, work)
    if layout is None:
        skip_mytorch("the handin has no mytorch/ .py files", report)
        return
    chosen = choose_sandbox(layout, args.sandbox, args.allow_unisolated, report)
    if chosen is not None:
        grade_mytorch(chosen, args.mytorch_timeout, scores, report)


def unpack(handin_tar: Path, work: Path, report: grading_report.GradingReport) -> Extraction:
    """Step 2: extract ``handin_tar`` into ``work/handin`` and print what it held; record its
    static findings (every file as handed in, before a foreign encoding drops one), notes, its
    weights' digest and whether it is gradable in ``report``."""
    section("Unpacking handin.tar")
    try:
        handin = extract_handin(handin_tar, work / "handin")
    except HandinError as error:
        print(f"  {error}")
        report.status = grading_report.Status.INVALID
        handin = Extraction()
    else:
        report.runtime_code, report.static_findings = inspect_handin(handin.files)
        judge.refuse_foreign_encodings(handin.files, handin.notes)
        report_extraction(handin)
    report.handin_notes = summarised(handin.notes)
    if STATE_DICT_FILE in handin.files:
        report.weights_sha256 = file_sha256(handin.files[STATE_DICT_FILE])
    problem = gradable_problem(handin)
    if problem:
        report.status = grading_report.Status.INVALID
        print(f"  {problem}")
    return handin


def write_results(path: Path, scores: dict[str, float],
                  report: grading_report.GradingReport) -> None:
    """The report with the scores, as its JSON form (autograder/judging/scoring/report.py), for the
    Gradescope adapter and the class tools."""
    try:
        report.scores = dict(scores)
        grading_report.write(path, report)
    except (OSError, TypeError, ValueError) as error:
        print(f"could not write {path}: {error}")


def exit_at_once() -> NoReturn:
    """End the judge once its scores line is out and its report written: flush, then ``os._exit``.
    The interpreter's own exit would first tear down every module torch loaded, for a noticeable
    share of each grading (docs/results.md, "Bulk regrade throughput", the judge's end) that nothing
    needs: every process the judge started is dead and every file it wrote is closed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
    exit_at_once()
