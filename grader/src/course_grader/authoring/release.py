"""Generate the student release (``notebooks/``) from the nbgrader sources (``solutions/``)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Sequence

from course_utils.cells import HiddenMarkerError, hidden_marker_problems, read
from course_utils.layout import assignments as list_assignments
from course_grader.grading.runner import run_nbgrader, write_course_config

__all__ = ["generate_release", "prepare_scratch_course", "check_hidden_markers"]


def check_hidden_markers(course_dir: Path, names: Sequence[str]) -> None:
    """Refuse a hidden-test marker the one grammar does not accept (:mod:`course_utils.cells`):
    nbgrader would hide a line that merely *contains* the marker in the release, and the checker
    would then run that block in the student's kernel. Raises ``HiddenMarkerError`` naming
    notebook, cell and line of each."""
    problems = []
    for name in names:
        for path in sorted((course_dir / "solutions" / name).glob("*.ipynb")):
            for index, cell in enumerate(read(path).cells):
                if cell.cell_type == "code":
                    problems += [f"{path.relative_to(course_dir)}, cell {index}, {p}" for p in hidden_marker_problems(cell.source)]
    if problems:
        raise HiddenMarkerError("hidden-test markers the release does not accept:\n  " + "\n  ".join(problems))


def prepare_scratch_course(root: Path, course_dir: Path, names: Sequence[str]) -> Path:
    """A throw-away course directory holding copies of the given assignments' sources.

    Demo classes and tests grade there, so the instructor's own gradebook and
    submissions at the repository root are never touched.
    """
    course_dir.mkdir(parents=True, exist_ok=True)
    write_course_config(course_dir, root / "nbgrader_config.py")
    for name in names:
        target = course_dir / "solutions" / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(root / "solutions" / name, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return course_dir


def generate_release(
    course_dir: Path,
    names: Sequence[str] | None = None,
    *,
    verbose: bool = True,
    one_process: bool = False,
) -> list[Path]:
    """Run ``nbgrader generate_assignment`` for each assignment; return the release folders.

    This also records each assignment and its graded cells in the course's gradebook,
    which autograding needs.

    ``one_process``: one ``nbgrader generate_assignment '*'`` releases them all, so nbgrader
    starts once instead of once per assignment (seconds each). Only where ``names`` are every
    assignment of the course (a scratch course); otherwise a ValueError.
    """
    names = list(names or list_assignments(course_dir))
    check_hidden_markers(course_dir, names)
    if one_process and len(names) > 1:
        if sorted(names) != list_assignments(course_dir):
            raise ValueError(f"one_process releases every assignment of {course_dir}, not only {names}")
        started = time.perf_counter()
        run_nbgrader(["generate_assignment", "*", "--force"], course_dir)
        if verbose:
            print(f"[release] {', '.join(names)}  ({time.perf_counter() - started:.1f} s)", flush=True)
        return [course_dir / "notebooks" / name for name in names]
    released = []
    for index, name in enumerate(names, 1):
        started = time.perf_counter()
        run_nbgrader(["generate_assignment", name, "--force"], course_dir)
        released.append(course_dir / "notebooks" / name)
        if verbose:
            print(f"[release {index}/{len(names)}] {name}  ({time.perf_counter() - started:.1f} s)", flush=True)
    return released
