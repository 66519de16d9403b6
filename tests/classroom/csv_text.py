"""A helper of the class tools' unit tests: a file written from its text, as a TA saves it."""
from pathlib import Path


def written(folder: Path, text: str, name: str = "file.csv") -> Path:
    """``folder / name`` holding ``text`` (UTF-8)."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
