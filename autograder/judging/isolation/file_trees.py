"""Walk and remove folder trees of any depth without following a symbolic link. Standard library
only: the Gradescope adapter (``grading_run.py``) removes its grading folders with it too."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def tree_entries(folder: Path) -> Iterator[os.DirEntry]:
    """Every entry under ``folder``, each folder before what it holds, never following a symbolic
    link. A loop over a stack, not recursion: no tree is too deep for it."""
    stack = [os.fspath(folder)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                yield entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and everything under it (nothing when it does not exist), whatever its
    depth (:func:`tree_entries`); a symbolic link is removed, never followed."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    folders = [os.fspath(path)]
    for entry in tree_entries(path):
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
        else:
            os.unlink(entry.path)
    for folder in reversed(folders):  # each folder after everything it held
        os.rmdir(folder)
