"""Where things are in a course directory (the repository root is one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

__all__ = ["KERNEL_NAME", "KERNEL_DISPLAY_NAME", "UnknownAssignment", "find_root", "assignments", "select_assignments",
           "notebook_paths"]

KERNEL_NAME = "attention-course"
KERNEL_DISPLAY_NAME = "Python 3 (attention-course)"


def find_root(start: Path | None = None) -> Path:
    """The course root: ``$COURSE_ROOT``, else the nearest folder upwards holding
    ``nbgrader_config.py`` and ``solutions/``."""
    if os.environ.get("COURSE_ROOT"):
        return Path(os.environ["COURSE_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "nbgrader_config.py").is_file() and (folder / "solutions").is_dir():
            return folder
    raise FileNotFoundError(
        f"no course directory above {here}: expected a folder with nbgrader_config.py and solutions/. "
        "Run from the repository, or set COURSE_ROOT."
    )


def assignments(root: Path, source: str = "solutions") -> list[str]:
    """Assignment names in order: the sub-folders of ``source`` that hold a notebook."""
    folder = root / source
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


class UnknownAssignment(LookupError):
    """An assignment name that ``solutions/`` does not hold."""


def select_assignments(root: Path, requested: Sequence[str] = ()) -> list[str]:
    """``requested`` (every assignment of ``solutions/`` when empty), each checked to exist."""
    known = assignments(root)
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise UnknownAssignment(f"no assignment {', '.join(unknown)} in {root / 'solutions'}; known: {', '.join(known)}")
    return list(requested) or known


def notebook_paths(root: Path, assignment: str, source: str = "solutions") -> list[Path]:
    """The notebooks of one assignment, sorted."""
    return sorted((root / source / assignment).glob("*.ipynb"))
