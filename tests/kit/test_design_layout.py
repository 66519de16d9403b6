# hw4p1: instructor-only
"""docs/design.md's layout names every file of the repository, so a reader finds each file's
purpose there (a new file without a line fails this test, naming it)."""
import fnmatch
import posixpath
import re
import subprocess
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
# Files the layout describes as a collection: {pattern: the words that describe them there}.
COLLECTIONS = {"tests/test_*.py": "test_*.py", "tests/*/test_*.py": "test_*.py",
               "datagen/lexicon/*.ini": "lexicon/*.ini",
               "tools/mutant_catalogue/*.yaml": "mutant_catalogue/",
               "hw4lib/data/tokenizer_jsons/*": "tokenizer_jsons/", "figures/*": "figures/",
               "*/__init__.py": "", "configs/*.yaml": "configs/"}


def layout_block(text: str) -> str:
    """The code block under ``## Layout``."""
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def entries(layout: str) -> list[tuple[str, str]]:
    """(the folder an entry describes, its text) of each entry of the layout: a line starting at
    its first column and the indented lines under it. An entry headed by a file describes that
    file's folder; one headed by a file at the top, the top ('')."""
    found = []
    for line in layout.splitlines():
        if line[:1].strip():
            head = line.split()[0]
            found.append([head if head.endswith("/") else posixpath.dirname(head) + "/", line])
        elif found:
            found[-1][1] += "\n" + line
    return [("" if folder == "/" else folder, text) for folder, text in found]


def unnamed(files: list[str], layout: str) -> list[str]:
    """The files ``layout`` names neither by path, nor by file name or stem (as a word) in an
    entry of their own folder or a folder above, nor as a collection."""
    missing = []
    described = entries(layout)
    for path in files:
        collection = next((words for pattern, words in COLLECTIONS.items()
                           if fnmatch.fnmatch(path, pattern)), None)
        if collection is not None:
            if collection not in layout:
                missing.append(f"{path} (described as {collection!r})")
            continue
        name, stem = Path(path).name, Path(path).stem
        folder = posixpath.dirname(path) + "/" if "/" in path else ""
        near = "\n".join(text for where, text in described
                          if (folder.startswith(where) if where else folder == ""))
        if path not in layout and name not in near and not re.search(
                rf"(?<![\w.]){re.escape(stem)}(?![\w])", near):
            missing.append(path)
    return missing


def test_the_check_finds_an_unnamed_file():
    layout = ("hw4lib/model/   masks, kv_cache\n    and the rope's report\n"
              "tests/   one test_*.py per component\nMakefile  make report\n"
              "tools/x.py  and its helper y.py\n")
    files = ["hw4lib/model/masks.py", "hw4lib/model/kv_cache.py", "hw4lib/model/rope.py",
             "tests/test_masks.py", "tools/mutant_catalogue/x.yaml", "tools/report.py",
             "tools/y.py", "tools/deep/y.py", "report.py", "hw4lib/model/x.py"]
    # A word names a file only in an entry of its folder or one above: "report" names report.py
    # (the Makefile's entry is the top's) but not tools/report.py; "x" names no hw4lib/model/x.py.
    assert unnamed(files, layout) == ["tools/mutant_catalogue/x.yaml (described as 'mutant_catalogue/')",
                                      "tools/report.py", "hw4lib/model/x.py"]


def test_the_design_layout_names_every_file():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    files = [line for line in listed.stdout.splitlines() if (REPO / line).is_file()]
    layout = layout_block((REPO / "docs" / "design.md").read_text(encoding="utf-8"))
    missing = unnamed(files, layout)
    assert not missing, ("docs/design.md's layout does not name these files; add each to its "
                         "folder's line, saying what it holds:\n  " + "\n  ".join(missing))
