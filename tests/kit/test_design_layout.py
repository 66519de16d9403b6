# hw4p1: instructor-only
"""docs/design.md's layout names every file of the repository, so a reader finds each file's
purpose there (a new file without a line fails this test, naming it)."""
import fnmatch
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


def unnamed(files: list[str], layout: str) -> list[str]:
    """The files ``layout`` names neither by file name, nor by stem as a word, nor as a collection."""
    missing = []
    for path in files:
        collection = next((words for pattern, words in COLLECTIONS.items()
                           if fnmatch.fnmatch(path, pattern)), None)
        if collection is not None:
            if collection not in layout:
                missing.append(f"{path} (described as {collection!r})")
            continue
        name = Path(path).name
        stem = Path(path).stem
        if name not in layout and not re.search(rf"(?<![\w.]){re.escape(stem)}(?![\w])", layout):
            missing.append(path)
    return missing


def test_the_check_finds_an_unnamed_file():
    layout = "hw4lib/model/   masks, kv_cache\ntests/   one test_*.py per component\n"
    files = ["hw4lib/model/masks.py", "hw4lib/model/kv_cache.py", "hw4lib/model/rope.py",
             "tests/test_masks.py", "tools/mutant_catalogue/x.yaml"]
    assert unnamed(files, layout) == ["hw4lib/model/rope.py",
                                      "tools/mutant_catalogue/x.yaml (described as 'mutant_catalogue/')"]


def test_the_design_layout_names_every_file():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    files = [line for line in listed.stdout.splitlines() if (REPO / line).is_file()]
    layout = layout_block((REPO / "docs" / "design.md").read_text(encoding="utf-8"))
    missing = unnamed(files, layout)
    assert not missing, ("docs/design.md's layout does not name these files; add each to its "
                         "folder's line, saying what it holds:\n  " + "\n  ".join(missing))
