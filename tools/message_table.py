"""Before/after table of the messages a student reads for catalogue bugs: each entry is applied
to a copy of two trees (``--before``, e.g. a checkout of an earlier commit with this tree's data
linked, and this repository), its test module runs there as a student runs it, and the first
failure's message (its lines as the rubric report prints them) goes in a Markdown row.

    python -m tools.message_table --before /path/to/old/tree ID [ID ...]
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tools import mutants as catalogue

MAX_LINES = 9  # of a failure's message, in a table cell


def failure_block(output: str) -> list[str]:
    """The lines of the first FAILED test in a rubric report: its name, then its message up to
    the next test or category line."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "  FAILED  " in line), None)
    if start is None:
        return ["(no test failed)"]
    block = [lines[start].split("  FAILED  ", 1)[1].strip()]
    for line in lines[start + 1:]:
        if line.startswith(("  passed  ", "  FAILED  ", "  => ", "-" * 20)):
            break
        block.append(line.strip())
    return block


def messages(root: Path, mutants: list[catalogue.Mutant],
             timeout_s: float) -> dict[str, list[str]]:
    """{entry id: its first failure's lines} with each entry applied to a copy of ``root``."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="hw4p1-messages-") as scratch:
        copy = Path(scratch)
        catalogue.make_copy(copy, catalogue.tree_files(root), root)
        for mutant in mutants:
            path = copy / mutant.file
            original = path.read_text()
            try:
                path.write_text(catalogue.mutate(original, mutant))
                outcome = catalogue.run_test(copy, mutant.test, timeout_s)
            finally:
                path.write_text(original)
            found[mutant.id] = failure_block(outcome.output)
    return found


def cell(lines: list[str]) -> str:
    shown = lines[:MAX_LINES] + (["..."] if len(lines) > MAX_LINES else [])
    return "<br>".join(line.replace("|", "\\|") for line in shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree before the change")
    parser.add_argument("--timeout", type=float, default=catalogue.DEFAULT_TIMEOUT_S)
    parser.add_argument("ids", nargs="+", help="catalogue entries, in the table's order")
    args = parser.parse_args(argv)
    entries = {m.id: m for m in
               catalogue.load_catalogue(sorted(catalogue.CATALOGUE_DIR.glob("*.yaml")))}
    unknown = [name for name in args.ids if name not in entries]
    if unknown:
        parser.error(f"not in the catalogue: {unknown}")
    chosen = [entries[name] for name in args.ids]
    before = messages(args.before.resolve(), chosen, args.timeout)
    after = messages(catalogue.REPO_ROOT, chosen, args.timeout)
    print("| bug (catalogue entry, test module) | before | after |")
    print("| --- | --- | --- |")
    for mutant in chosen:
        print(f"| {mutant.bug.replace('|', '/')} (`{mutant.id}`, `{mutant.test}`) | "
              f"{cell(before[mutant.id])} | {cell(after[mutant.id])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
