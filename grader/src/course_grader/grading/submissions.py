"""Look at collected submissions before nbgrader does, and say clearly what is wrong.

nbgrader's own reaction to a bad submission is a stack trace in a long log (malformed
JSON), a crash of that student's grading (a renamed notebook), or silence (a missing
notebook scores 0 with a warning). Here each problem becomes one line that names the
student and the file, and the fixable ones are fixed the way a careful instructor would.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import nbformat

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = ["SubmissionProblem", "submitted_students", "inspect_submissions", "format_problems", "record_zero"]

SET_ASIDE_FOLDER = ".set-aside-by-course"


@dataclass(frozen=True)
class SubmissionProblem:
    """``blocking`` problems keep the student out of grading (reported as failed);
    ``zero`` ones too, but the student is recorded with 0 points (nothing was submitted)."""

    student: str
    assignment: str
    problem: str
    blocking: bool = False
    zero: bool = False


def _expected_notebooks(course: Course, assignment: str) -> list[str]:
    release = course.path("release", assignment=assignment)
    source = course.path("source", assignment=assignment)
    folder = release if release.is_dir() else source
    return sorted(p.name for p in folder.glob("*.ipynb"))


def _notebook_error(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return f"cannot be read ({error})"
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"is not valid notebook JSON ({error.msg} at line {error.lineno}, column {error.colno})"
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # noqa: BLE001 - nbformat raises several kinds
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"is not a valid notebook ({first_line})"
    return None


def submitted_students(course: Course, assignment: str, only: Sequence[str] | None = None) -> list[str]:
    """Students with a ``submitted/<student>/<assignment>/`` folder, sorted (restricted to ``only`` if given)."""
    submitted = course.path("submitted")
    everyone = sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir()) if submitted.is_dir() else []
    return [s for s in everyone if not only or s in only]


def inspect_submissions(
    course: Course,
    assignment: str,
    students: list[str] | None = None,
    *,
    fix_renamed: bool = True,
) -> list[SubmissionProblem]:
    """Check ``submitted/<student>/<assignment>/`` for every (or the given) student.

    A single unexpected notebook beside a single missing one is taken as renamed: with
    ``fix_renamed`` it is copied to the expected name and graded. Other unexpected
    notebooks are moved out of nbgrader's way (nbgrader would fail the whole submission).
    Originals are kept in ``.set-aside-by-course/``. Malformed notebooks are blocking;
    missing notebooks are not (nbgrader scores them 0); extra files are reported.
    """
    expected = _expected_notebooks(course, assignment)
    submitted = course.path("submitted")
    problems: list[SubmissionProblem] = []
    folders = sorted(submitted.glob(f"*/{assignment}")) if submitted.is_dir() else []
    for folder in folders:
        student = folder.parent.name
        if students and student not in students:
            continue
        if not folder.is_dir():
            problems.append(SubmissionProblem(student, assignment, f"{folder} is not a folder", True))
            continue
        present = sorted(p.name for p in folder.glob("*.ipynb"))
        missing = [name for name in expected if name not in present]
        unknown = [name for name in present if name not in expected]
        set_aside = folder / SET_ASIDE_FOLDER
        if len(missing) == 1 and len(unknown) == 1 and fix_renamed:
            set_aside.mkdir(exist_ok=True)
            shutil.copy2(folder / unknown[0], folder / missing[0])
            shutil.move(str(folder / unknown[0]), set_aside / unknown[0])
            problems.append(SubmissionProblem(
                student, assignment, f"notebook {unknown[0]!r} was renamed: graded it as {missing[0]!r}"))
            missing, unknown = [], []
        nothing_left = not any((folder / name).is_file() for name in expected)
        for name in missing:
            # nbgrader zeroes a missing notebook only when another one is there to grade
            problems.append(SubmissionProblem(student, assignment, f"missing notebook {name!r}: it scores 0", zero=nothing_left))
        for name in unknown:
            # nbgrader would fail the whole submission on a notebook it does not know
            set_aside.mkdir(exist_ok=True)
            shutil.move(str(folder / name), set_aside / name)
            problems.append(SubmissionProblem(
                student, assignment,
                f"notebook {name!r} is not part of the assignment (expected {', '.join(expected)}): set aside, not graded"))
        for name in expected:
            if (folder / name).is_file():
                error = _notebook_error(folder / name)
                if error:
                    problems.append(SubmissionProblem(student, assignment, f"{name} {error}", True))
        extras = sorted(
            p.name for p in folder.iterdir()
            if p.suffix != ".ipynb" and p.name not in {"timestamp.txt", SET_ASIDE_FOLDER} and not p.name.startswith(".")
        )
        for name in extras:
            problems.append(SubmissionProblem(student, assignment, f"extra file {name!r} ignored"))
    return problems


def format_problems(problems: list[SubmissionProblem]) -> str:
    """One line per problem: ``student / assignment: problem``."""
    return "\n".join(
        f"  {'BLOCKED' if p.blocking else 'note   '} {p.student} / {p.assignment}: {p.problem}" for p in problems
    )


def record_zero(course: Course, assignment: str, student: str) -> None:
    """Put a submission with 0 in every graded cell in the gradebook (nothing was submitted)."""
    from nbgrader.api import Gradebook, MissingEntry

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    with Gradebook(course.db_url) as gradebook:
        gradebook.update_or_create_student(student)
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            submission = gradebook.add_submission(assignment, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = 0
                grade.manual_score = None
                grade.needs_manual_grade = False
        gradebook.db.commit()
