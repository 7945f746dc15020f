"""Generate the student release (``notebooks/``) from the nbgrader sources (``solutions/``)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Sequence

from course_utils.cells import HiddenMarkerError, hidden_marker_problems, read
from course_grader.course import Course
from course_grader.grading.runner import run_nbgrader, write_course_config

__all__ = ["EXCHANGE_RELEASE_DIR", "VARIANTS_DIR", "check_hidden_markers", "exchange_cell_source", "generate_release",
           "prepare_scratch_course", "release_variants", "variant_cell_source"]


def check_hidden_markers(course: Course, names: Sequence[str]) -> None:
    """Refuse a hidden-test marker the one grammar does not accept (:mod:`course_utils.cells`):
    nbgrader would hide a line that merely *contains* the marker in the release, and the checker
    would then run that block in the student's kernel. Raises ``HiddenMarkerError`` naming
    notebook, cell and line of each."""
    problems = []
    for name in names:
        for path in sorted(course.path("source", assignment=name).glob("*.ipynb")):
            for index, cell in enumerate(read(path).cells):
                if cell.cell_type == "code":
                    problems += [f"{path.relative_to(course.root)}, cell {index}, {p}" for p in hidden_marker_problems(cell.source)]
    if problems:
        raise HiddenMarkerError("hidden-test markers the release does not accept:\n  " + "\n  ".join(problems))


def prepare_scratch_course(root: Path, course_dir: Path, names: Sequence[str]) -> Path:
    """A throw-away course directory holding copies of the given assignments' sources (the course at
    ``root`` configures it: its folder names, its limits; its own gradebook).

    Demo classes and tests grade there, so the instructor's own gradebook and
    submissions at the repository root are never touched.
    """
    course_dir.mkdir(parents=True, exist_ok=True)
    write_course_config(course_dir, root / "nbgrader_config.py")
    origin, scratch = Course.open(root), Course.open(course_dir)
    for name in names:
        target = scratch.path("source", assignment=name)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(origin.path("source", assignment=name), target, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return course_dir


def generate_release(
    course: Course,
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
    names = list(names or course.assignments())
    check_hidden_markers(course, names)
    if one_process and len(names) > 1:
        if sorted(names) != course.assignments():
            raise ValueError(f"one_process releases every assignment of {course.root}, not only {names}")
        started = time.perf_counter()
        run_nbgrader(["generate_assignment", "*", "--force"], course.root)
        if verbose:
            print(f"[release] {', '.join(names)}  ({time.perf_counter() - started:.1f} s)", flush=True)
        return [course.path("release", assignment=name) for name in names]
    released = []
    for index, name in enumerate(names, 1):
        started = time.perf_counter()
        run_nbgrader(["generate_assignment", name, "--force"], course.root)
        released.append(course.path("release", assignment=name))
        if verbose:
            print(f"[release {index}/{len(names)}] {name}  ({time.perf_counter() - started:.1f} s)", flush=True)
    return released


VARIANTS_DIR = "variants"  # <course>/variants/<student>/<assignment>/: each student's own release
# <course>/variant-release/<assignment>/: one release for an exchange (nbgrader's, ngshare), every student's
# visible parameters in its variants.json, each kernel picking its hub user's (`nbgrader release_assignment A
# --CourseDirectory.release_directory=variant-release`)
EXCHANGE_RELEASE_DIR = "variant-release"


def variant_cell_source(assignment: str, visible: dict) -> str:
    """The code of the cell a variant release adds after the notebook's first code cell: the
    student's visible parameters, for the visible tests in their kernel (never the seed, never
    a hidden parameter: the checker computes those from the gradebook)."""
    shown = {exercise: values for exercise, values in sorted(visible.items()) if values}
    lines = [f"{exercise}: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())) for exercise, values in shown.items()]
    summary = "; ".join(lines) or "the course's own visible tests"
    return ("# Your variant of this notebook (generated by `course release --variants`): the shapes and seeds of your\n"
            "# visible tests; your hidden tests are your own too. The grader computes your variant itself: editing this\n"
            "# cell changes what your visible tests use here, never how you are graded.\n"
            "from course_utils import variants\n\n"
            f"variants.use({assignment!r}, {shown!r})\n"
            f"print({('your variant: ' + summary)!r})")


def exchange_cell_source(assignment: str) -> str:
    """The cell an exchange's variant release adds after the first code cell: the hub user's own visible
    parameters, from the class's ``variants.json`` beside the notebook."""
    return ("# Your variant of this notebook (generated by `course release --variants`): the shapes and seeds of your\n"
            "# visible tests, picked by your hub user name; your hidden tests are your own too. The grader computes your\n"
            "# variant itself: editing this cell or variants.json changes what your visible tests use here, never how\n"
            "# you are graded.\n"
            "from course_utils import variants\n\n"
            f"print(variants.use_own({assignment!r}))")


def _insert_variant_cell(path: Path, source: str, metadata: dict) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), -1)
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["course-variant"]
    cell["id"] = "course-variant"
    nb.cells.insert(first + 1, cell)
    nb.metadata["course_variant"] = metadata
    nbformat.write(nb, path)


def release_variants(course: Course, assignment: str, students: Sequence[str], *, reroll: Sequence[str] = (),
                     by: str | None = None, verbose: bool = True) -> dict[str, Path]:
    """Each student's own release of ``assignment`` (``variants/<student>/<assignment>/``): the
    generic release (``notebooks/``, generated first) with a cell that carries their visible
    parameters; and one release for an exchange (``variant-release/<assignment>/``: the generic release,
    the class's visible parameters in ``variants.json``, a cell that picks the hub user's). Seeds are
    made (or, for ``reroll``, made anew) and stored in the gradebook. Returns each student's folder.
    A ValueError when the assignment has no variant parameters."""
    import json

    from course_utils.variants import TABLE_FILE
    from course_grader.grading.variants import assign_variants, course_secret, current_seeds, reroll_variant
    from course_utils.variants import SPECS, visible_parameters

    if assignment not in SPECS:
        raise ValueError(f"{assignment} has no variant parameters (course_utils.variants.SPECS has: {', '.join(SPECS)})")
    secret = course_secret(course.root, create=True)
    assert secret is not None
    for student in reroll:
        reroll_variant(course.db_url, secret, assignment, student, by)
    seeds = assign_variants(course.db_url, secret, assignment, list(students), by)
    released = {}
    ignore = shutil.ignore_patterns(".ipynb_checkpoints")
    for student, seed in seeds.items():
        target = course.root / VARIANTS_DIR / student / assignment
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(course.path("release", assignment=assignment), target, ignore=ignore)
        visible = visible_parameters(seed, assignment)
        for path in sorted(target.glob("*.ipynb")):
            _insert_variant_cell(path, variant_cell_source(assignment, visible),
                                 {"student": student, "assignment": assignment, "visible": visible})
        released[student] = target
        if verbose:
            print(f"[variant] {assignment} for {student}", flush=True)
    # the exchange's release: every student with a variant (not only this command's), read back from the gradebook
    shared = course.root / EXCHANGE_RELEASE_DIR / assignment
    if shared.exists():
        shutil.rmtree(shared)
    shutil.copytree(course.path("release", assignment=assignment), shared, ignore=ignore)
    table = {student: visible_parameters(seed, assignment) for student, seed in sorted(current_seeds(course.db_url, assignment).items())}
    (shared / TABLE_FILE).write_text(json.dumps({"assignment": assignment, "students": table}, indent=1, sort_keys=True) + "\n")
    for path in sorted(shared.glob("*.ipynb")):
        _insert_variant_cell(path, exchange_cell_source(assignment), {"assignment": assignment, "table": TABLE_FILE})
    if verbose:
        print(f"[variant] {assignment} for an exchange: {shared.relative_to(course.root)} ({len(table)} students; "
              f"`nbgrader release_assignment {assignment} --CourseDirectory.release_directory={EXCHANGE_RELEASE_DIR}`)",
              flush=True)
    return released
