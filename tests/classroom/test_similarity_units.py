# hw4p1: instructor-only
"""The similarity (autograder/classroom/similarity.py) on small hand-made classes, fast: which
pairs are compared (past students with current ones only), the boilerplate left out, the flag at
its threshold, each pair's shares and k-grams in the direction of its larger share, the report's
length and contents, the CSVs and the printed summary of ``main``; and the bounded child each
handin is read in (its wall-clock, CPU-time and address-space limits, read by value).

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_units.py
"""
import csv
import hashlib
import multiprocessing
import os
import resource
import time

import numpy as np
import pytest

from autograder.classroom import similarity
from tests.classroom.similarity_classes import class_folder, unique_lines

pytest.importorskip("copydetect")
PATH = "mytorch/nn/linear.py"
EXTRA = "mytorch/nn/extra.py"
GIB = 2**30


def code(text: str, others: dict[str, str] | None = None) -> similarity.Code:
    """The Code of a handin whose part is PATH (``text``), with the files ``others`` beside it."""
    files = {PATH: text, **(others or {})}
    return similarity.code_of({path: similarity.fingerprint(source)
                               for path, source in files.items()}, [PATH], {})


def pairs_of(rows: list[dict]) -> dict[frozenset, dict]:
    return {frozenset((row["student_a"], row["student_b"])): row for row in rows}


def test_every_current_pair_and_each_current_student_with_each_past_one(tmp_path):
    """Three current students (one named after the past ones in sort order) and two past ones
    holding the same code: 3 current pairs and 3 x 2 with the past, never the two past ones
    together; only the copies of a past student's code are flagged."""
    copied = unique_lines(0, 20)
    documents = {"ann": code(copied), "bob": code(unique_lines(1, 20)),
                 "zed": code(unique_lines(2, 20))}
    past = {"p1": code(copied), "p2": code(copied)}
    rows = similarity.compare(documents, {}, tmp_path, past=past)
    assert set(pairs_of(rows)) == {frozenset(pair) for pair in [
        ("ann", "bob"), ("ann", "zed"), ("bob", "zed"), ("ann", "past:p1"), ("ann", "past:p2"),
        ("bob", "past:p1"), ("bob", "past:p2"), ("past:p1", "zed"), ("past:p2", "zed")]}
    assert len(rows) == 9
    assert {pair for pair, row in pairs_of(rows).items() if row["flagged"]} == {
        frozenset(("ann", "past:p1")), frozenset(("ann", "past:p2"))}


def test_a_pair_is_flagged_at_its_threshold_and_not_above_it(tmp_path):
    """Two identical handins share all of their code: flagged at a threshold of exactly 1.0,
    not at 1.0001."""
    documents = {"a": code(unique_lines(0, 10)), "b": code(unique_lines(0, 10))}
    [at] = similarity.compare(documents, {}, tmp_path, threshold=1.0)
    [above] = similarity.compare(documents, {}, tmp_path, threshold=1.0001)
    assert at["similarity"] == 1.0 and at["flagged"] is True and above["flagged"] is False


def test_the_handouts_code_is_left_out_of_every_share(tmp_path):
    """Two students who each add 10 lines of their own to 60 lines of the handout share only
    the few windows across the handout's end (under 0.1), not flagged; compared without the
    handout, 60 of their 70 lines (0.857), flagged."""
    handout = unique_lines(5, 60)
    documents = {"a": code(handout + unique_lines(1, 10)), "b": code(handout + unique_lines(2, 10))}
    [apart] = similarity.compare(documents, {PATH: handout}, tmp_path)
    [whole] = similarity.compare(documents, {}, tmp_path)
    assert apart["similarity"] < 0.1 and not apart["flagged"], apart
    assert whole["similarity"] == pytest.approx(60 / 70, abs=0.01) and whole["flagged"], whole
    for number in ("similarity", "share_of_a", "share_of_b"):  # written to 4 decimals
        assert round(whole[number], 4) == whole[number] != round(whole[number], 3), whole


def test_a_part_that_is_all_handout_shares_nothing(tmp_path):
    """A student whose part is the handout's code alone has no code of their own to share, and
    no k-gram of it in common."""
    handout = unique_lines(5, 20)
    documents = {"a": code(handout), "b": code(handout + unique_lines(1, 5))}
    [row] = similarity.compare(documents, {PATH: handout}, tmp_path)
    assert (row["share_of_a"], row["share_of_b"], row["kgrams"], row["flagged"]) == (
        0.0, 0.0, 0, False), row


def test_the_pairs_rank_most_similar_first(tmp_path):
    """Shares of 1.0, about 0.5 and 0.0 come out in that order, whatever the names' order (in
    an output folder made with its parents)."""
    half = unique_lines(0, 20)
    documents = {"a": code(half + unique_lines(1, 20)), "b": code(half + unique_lines(2, 20)),
                 "c": code(half + unique_lines(1, 20)), "d": code(unique_lines(3, 40))}
    similarities = [row["similarity"] for row in similarity.compare(documents, {},
                                                                     tmp_path / "new" / "out")]
    assert similarities[0] == 1.0 and similarities[-1] == 0.0
    assert similarities == sorted(similarities, reverse=True), similarities


def test_a_pair_reads_its_larger_share_and_its_kgrams(tmp_path):
    """a's part (X) is whole in b's part; b's part (X then Z) is whole in a's handin, Z in a's
    other file: both shares 1.0, and the pair reads a's k-grams (X's), not b's (X's and Z's), and
    the report shows a's part against b's files; with a's part only half in b (and X in another
    file of a's too), the pair reads b's share and k-grams, and the report shows b's part
    against every file of a's that holds it."""
    first, second = unique_lines(0, 15), unique_lines(1, 15)
    count = {text: len(similarity.fingerprint(text).kgrams.hashes) for text in (first, second)}
    documents = {"a": code(first, {EXTRA: second}), "b": code(first + second)}
    [row] = similarity.compare(documents, {}, tmp_path / "equal")
    assert (row["share_of_a"], row["share_of_b"]) == (1.0, 1.0), row
    assert row["kgrams"] == count[first] < count[first] + count[second], row
    report = (tmp_path / "equal/report.html").read_text()
    assert f"# file: {EXTRA}" not in report  # a's side: its part, the larger share's
    documents = {"a": code(first + unique_lines(2, 15), {EXTRA: first}), "b": code(first)}
    [row] = similarity.compare(documents, {}, tmp_path / "apart")
    assert row["share_of_a"] < row["share_of_b"] == row["similarity"] == 1.0, row
    assert row["kgrams"] == count[first], row
    report = (tmp_path / "apart/report.html").read_text()
    assert f"# file: {EXTRA}" in report  # a's side: every file of a's that holds b's part


def test_the_csv_holds_every_pair_with_its_numbers(tmp_path):
    """pairs.csv: the columns by name, one row a pair, each number as compare returned it."""
    documents = {"a": code(unique_lines(0, 10)), "b": code(unique_lines(0, 10)),
                 "c": code(unique_lines(1, 10))}
    rows = similarity.compare(documents, {}, tmp_path)
    with open(tmp_path / "pairs.csv", newline="") as file:
        reader = csv.DictReader(file)
        written = list(reader)
    assert reader.fieldnames == ["student_a", "student_b", "similarity", "share_of_a",
                                 "share_of_b", "kgrams", "flagged"]
    assert written == [{key: str(value) for key, value in row.items()} for row in rows]
    assert written[0] == {"student_a": "a", "student_b": "b", "similarity": "1.0",
                          "share_of_a": "1.0", "share_of_b": "1.0",
                          "kgrams": str(len(documents["a"].hashes)), "flagged": "True"}


def test_the_report_shows_at_most_25_flagged_pairs_and_the_findings(tmp_path):
    """Eight students with one code: 28 pairs flagged, 25 shown by default, as many as ``top``
    asks otherwise; no pair flagged: said so; each student's findings listed, escaped."""
    documents = {f"s{index}": code(unique_lines(0, 10)) for index in range(8)}
    similarity.compare(documents, {}, tmp_path / "default")
    report = (tmp_path / "default/report.html").read_text()
    assert "25 of 28 pairs shown" in report and report.count("<h2>") == 25
    similarity.compare(documents, {}, tmp_path / "two", top=2)
    assert "2 of 28 pairs shown" in (tmp_path / "two/report.html").read_text()
    apart = {"a": code(unique_lines(0, 10)), "b": code(unique_lines(1, 10))}
    similarity.compare(apart, {}, tmp_path / "none", findings={"a": ["x <y>", "z"]})
    report = (tmp_path / "none/report.html").read_text()
    assert "No pair at or above the threshold 0.75." in report
    assert "<h2>Findings</h2>" in report and "<li>a: x &lt;y&gt;</li>" in report
    assert "<li>a: z</li>" in report
    similarity.compare(apart, {}, tmp_path / "clean")
    assert "Findings" not in (tmp_path / "clean/report.html").read_text()


def test_fingerprints_already_known_are_read_by_their_digest():
    """A text fingerprinted before is sent back as its SHA-256 digest and read from ``known``;
    a new one is fingerprinted and added to ``known``; the Code's k-grams are every file's."""
    first, second = unique_lines(0, 10), unique_lines(1, 10)
    digest = hashlib.sha256(first.encode("utf-8")).hexdigest()
    assert similarity.digest(first) == digest
    found = similarity.fingerprints({PATH: first, EXTRA: second}, {digest})
    assert found[PATH] == digest and found[EXTRA].source == second
    before = similarity.fingerprint(first)
    known = {digest: before}
    handin = similarity.code_of(found, [PATH], known)
    assert handin.files[PATH] is before and handin.part == (PATH,)
    assert known[similarity.digest(second)] is found[EXTRA]
    assert handin.hashes == before.kgrams.hashes | found[EXTRA].kgrams.hashes


def test_a_class_folder_is_read_handin_by_handin(tmp_path, capsys):
    """Each readable handin becomes a Code (one already seen read by its digest); one that is
    not an archive, or holds no mytorch code, is left out and named; code built at run time is
    named with its line."""
    own = "class Linear:\n    def forward(self, x):\n        return x @ self.W\n"
    trees = {"ann": {PATH: own}, "bob": {"notes.txt": "hi"}, "cat": {PATH: own},
             "dan": {PATH: "import base64\nbase64.b64decode('')\n" + own}}
    handins = class_folder(tmp_path, trees)
    (handins / "abe").mkdir()  # first in name order: the rest are read after it
    (handins / "abe" / "handin.tar").write_bytes(b"not a tar")
    documents, runtime, findings = similarity.class_documents(handins)
    assert sorted(documents) == ["ann", "cat", "dan"]
    assert documents["cat"].files[PATH] is documents["ann"].files[PATH]
    assert runtime == {"dan": [f"base64.b64decode ({PATH}:2)"]}
    assert sorted(findings) == ["ann", "cat", "dan"]  # no mytorch/nn/__init__.py binds Linear
    printed = capsys.readouterr().out
    assert "left out bob: no mytorch code" in printed
    assert "left out abe: handin.tar is not a tar archive" in printed


def test_main_writes_every_file_and_prints_what_it_found(tmp_path, capsys):
    """The command line on a class of three (two with one code) and a past semester: the CSVs,
    the report (``--top`` pairs, the findings), the summary, each flagged pair, each student's
    run-time code and findings; another threshold, the bonus part (none handed in)."""
    own = "class Linear:\n    def forward(self, x):\n" + "".join(
        f"        {line}\n" for line in unique_lines(0, 5).splitlines()) + "        return x\n"
    handins = class_folder(tmp_path / "now", {
        "ann": {PATH: own}, "bob": {PATH: own},
        "dan": {PATH: "import base64\nbase64.b64decode('')\n"}})
    past = class_folder(tmp_path / "before", {"old": {PATH: own}})
    handout = tmp_path / "handout"
    (handout / "mytorch/nn").mkdir(parents=True)
    (handout / PATH).write_text("class Linear:\n    pass\n")
    out = tmp_path / "out"
    similarity.main([str(handins), "--handout", str(handout), "--out", str(out),
                     "--past", str(past), "--top", "1"])
    printed = capsys.readouterr().out
    report = (out / "report.html").read_text()
    assert "1 of 6 pairs shown" in report and "<li>dan: " in report
    with open(out / "pairs.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 3 + 3 and sum(row["flagged"] == "True" for row in rows) == 3
    assert f"6 pairs, 3 flagged (>= 0.75); {out / 'pairs.csv'}, {out / 'report.html'}" in printed
    assert "  1.00  ann  bob" in printed and "  1.00  ann  past:old" in printed
    assert f"  dan: its mytorch builds code at run time (base64.b64decode ({PATH}:2))" in printed
    assert f"  ann: {PATH} defines no graded class of its own" in printed
    with open(out / "runtime_code.csv", newline="") as file:
        assert list(csv.reader(file)) == [["student", "builds_code_at_run_time"],
                                          ["dan", f"base64.b64decode ({PATH}:2)"]]
    with open(out / "findings.csv", newline="") as file:
        findings = list(csv.reader(file))
    assert findings[0] == ["student", "finding"] and {row[0] for row in findings[1:]} == {
        "ann", "bob", "dan"}
    similarity.main([str(handins), "--handout", str(handout), "--out", str(out),
                     "--threshold", "1.01"])
    assert "3 pairs, 0 flagged (>= 1.01)" in capsys.readouterr().out
    similarity.main([str(handins), "--handout", str(handout), "--out", str(out),
                     "--part", "bonus"])
    assert "3 pairs, 0 flagged (>= 0.75)" in capsys.readouterr().out  # no bonus handed in


def test_a_missing_handout_names_the_make_target(tmp_path):
    with pytest.raises(SystemExit, match="make handout"):
        similarity.handout_document(tmp_path)


def sleep_then(seconds: float, value: object) -> object:
    time.sleep(seconds)
    return value


def spin() -> None:
    while True:
        pass


def allocate(size: int) -> int:
    """The size of an array of ``size`` bytes, allocated (not touched: address space only)."""
    return np.empty(size, np.uint8).nbytes


def test_a_bounded_child_returns_its_value_or_why_not():
    """The value comes back (after a second's sleep too); an exception, an unpicklable value and
    an exit each come back as why."""
    assert similarity.isolated(sleep_then, 1.0, [1, "two"]) == ([1, "two"], "")
    assert similarity.isolated(int, "x") == (None, "could not be inspected (ValueError: invalid "
                                                   "literal for int() with base 10: 'x')")
    value, finding = similarity.isolated(lambda: (lambda: 1))
    assert value is None and finding.startswith("could not be inspected (")
    assert similarity.isolated(os._exit, 3) == (
        None, "could not be inspected (its reading ended with exit status 3)")


def test_a_bounded_child_has_four_times_its_cpu_limit_of_wall_clock(monkeypatch):
    """INSPECTION_S of 0.5: a child asleep is given up after 2 s of wall-clock time."""
    monkeypatch.setattr(similarity, "INSPECTION_S", 0.5)
    started = time.monotonic()
    assert similarity.isolated(sleep_then, 60, None) == (
        None, "could not be inspected within 2 s")
    assert time.monotonic() - started < 30


def test_a_bounded_child_ends_at_its_cpu_limit(monkeypatch):
    """INSPECTION_S of 1 (the wall-clock limit out of the way): a spinning child ends at 1 s of
    CPU time, by SIGXCPU, named as such."""
    monkeypatch.setattr(similarity, "INSPECTION_S", 1.0)
    monkeypatch.setattr(similarity, "WALL_FACTOR", 300)
    assert similarity.isolated(spin) == (
        None, "could not be inspected within 1 s of CPU time")


def test_a_bounded_child_has_two_gib_more_address_space_than_its_parent():
    """With 3 GiB of address space held by the parent: 1.5 GiB more is allocated, 2.5 GiB is
    not (the limit counts from what the parent holds, not from zero nor its resident memory).
    The parent's soft limit is lifted to its hard one first: an earlier test of the same pytest
    worker may have lowered it (the judge's own limit_address_space lowers it so)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and hard < 6 * GIB:
        pytest.skip(f"cannot run here: a hard address-space limit of {hard} bytes")
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        try:
            ballast = np.empty(3 * GIB, np.uint8)
        except MemoryError:
            pytest.skip(f"cannot run here: 3 GiB of address space refused (RLIMIT_AS {soft}, "
                        f"{hard}; vm.overcommit_memory {overcommit_mode()})")
        assert similarity.isolated(allocate, 3 * GIB // 2) == (3 * GIB // 2, "")
        value, finding = similarity.isolated(allocate, 5 * GIB // 2)
        assert value is None and finding.startswith("could not be inspected (MemoryError"), finding
        del ballast
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def overcommit_mode() -> str:
    try:
        with open("/proc/sys/vm/overcommit_memory") as mode:
            return mode.read().strip()
    except OSError:
        return "unknown"


def under_a_hard_limit(send) -> None:
    """In a child whose hard address-space limit is 1 GiB above what it holds: what a bounded
    reading of 0.5 GiB and of 1.5 GiB more gives, sent back."""
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + GIB, used + GIB))
    send.send([similarity.isolated(allocate, GIB // 2), similarity.isolated(allocate, 3 * GIB // 2)])


def test_a_bounded_child_keeps_a_lower_hard_limit_it_inherits():
    """Under a hard limit 1 GiB above the parent's use (below the 2 GiB the child would get),
    the child keeps it: 0.5 GiB is allocated, 1.5 GiB is not."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=under_a_hard_limit, args=(send,))
    child.start()
    assert receive.poll(120), "the child under a hard limit sent nothing"
    small, large = receive.recv()
    child.join()
    assert small == (GIB // 2, "")
    assert large[0] is None and large[1].startswith("could not be inspected (MemoryError"), large


def test_a_bounded_child_writes_no_core_and_cannot_lift_its_cpu_limit():
    """In the child: a core limit of 0, hard too (a handin cannot raise it back); CPU time of
    INSPECTION_S (20 s), SIGXCPU there and the kill one second later."""
    assert similarity.isolated(resource.getrlimit, resource.RLIMIT_CORE) == ((0, 0), "")
    assert similarity.isolated(resource.getrlimit, resource.RLIMIT_CPU) == ((20, 21), "")


def test_the_report_keeps_three_lines_each_side_of_a_match_and_all_of_a_long_one():
    """Matches on the first and the last of ten lines: three lines after the first, three
    before the last, "..." between; a region of ten lines in one <mark> is kept whole."""
    lines = [f"l{index}" for index in range(1, 9)]
    assert similarity.around_marks("\n".join(["<mark>a</mark>", *lines, "<mark>b</mark>"])).split(
        "\n") == ["<mark>a</mark>", "l1", "l2", "l3", "...", "l6", "l7", "l8", "<mark>b</mark>"]
    region = ["<mark>a", *lines, "b</mark>", *lines]
    assert similarity.around_marks("\n".join(region)).split("\n") == region[:13]


def test_a_handin_that_cannot_be_read_is_its_finding_and_the_rest_are_read(tmp_path, capsys,
                                                                          monkeypatch):
    """The first handin's reading fails in its child (a reading that raises, injected for that
    archive alone): it is that student's finding, named when left out, and the next handin is
    read all the same."""
    real = similarity.read_archive

    def failing_for_ann(archive, work, part, known):
        if archive.parent.name == "ann":
            raise RuntimeError("unreadable")
        return real(archive, work, part, known)

    monkeypatch.setattr(similarity, "read_archive", failing_for_ann)
    own = "class Linear:\n    def forward(self, x):\n        return x @ self.W\n"
    documents, _, findings = similarity.class_documents(
        class_folder(tmp_path, {"ann": {PATH: own}, "bob": {PATH: own}}))
    assert sorted(documents) == ["bob"]
    assert findings["ann"] == ["its handin could not be inspected (RuntimeError: unreadable)"]
    assert "left out ann: its handin could not be inspected (RuntimeError: unreadable)" in \
        capsys.readouterr().out
