"""Autograde with nbgrader and read the results back: the scores in the gradebook, and the flags
(the scan's and the checker's evidence) of graded submissions.

Grading returns each student's outcome as data (:class:`~course_grader.grading.outcome.StudentResult`),
taken from nbgrader's Python API per student (``NbGraderAPI.autograde``: success, error, log), never
from one log shared by several students. The tables and the CSV export are in
:mod:`course_grader.grading.tables`; feedback in :mod:`course_grader.grading.feedback`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from course_grader.grading.gradebook import AssignmentNotReleased, require_assignment
from course_grader.grading.outcome import GradingRun, student_result
from course_grader.grading.runner import autograde_jobs

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = [
    "CellScore",
    "NotebookScore",
    "AssignmentNotReleased",
    "autograde",
    "autograde_many",
    "read_scores",
    "submission_flags",
    "checker_evidence",
]


@dataclass(frozen=True)
class CellScore:
    grade_id: str
    score: float
    max_score: float
    needs_manual_grade: bool


@dataclass
class NotebookScore:
    student: str
    assignment: str
    notebook: str
    cells: dict[str, CellScore] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(c.score for c in self.cells.values())

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.cells.values())

    @property
    def auto_max_score(self) -> float:
        """Points the autograder can give (manually graded cells left out)."""
        return sum(c.max_score for c in self.cells.values() if not c.needs_manual_grade)

    @property
    def needs_manual_grade(self) -> list[str]:
        return [c.grade_id for c in self.cells.values() if c.needs_manual_grade]


def autograde(course: Course, assignment: str, students: Sequence[str] | None = None) -> GradingRun:
    """Autograde one assignment for all (or the given) students in ``course.profile``, one student
    at a time through nbgrader's API; never raises on a student's failure (see ``results``).

    Raises :class:`AssignmentNotReleased` when the assignment is not in the gradebook.
    """
    from course_grader.grading.submissions import submitted_students

    require_assignment(course.db_url, assignment)
    students = submitted_students(course, assignment, students)
    return autograde_many(course, {assignment: students})[assignment]


def autograde_many(course: Course, students: Mapping[str, Sequence[str]]) -> dict[str, GradingRun]:
    """:func:`autograde` for several assignments (``assignment -> students``) in one nbgrader process:
    ``assignment -> GradingRun``. The assignments released and the students found: the caller checks
    (:func:`autograde`, :func:`~course_grader.grading.pipeline.grade`)."""
    jobs = [(assignment, student) for assignment, names in students.items() for student in names]
    outcomes, log = autograde_jobs(course.root, jobs, settings=course.settings)
    return {assignment: GradingRun(assignment, [student_result(s, assignment, outcomes[(assignment, s)])
                                                for s in names], log)
            for assignment, names in students.items()}


def read_scores(course: Course) -> list[NotebookScore]:
    """Every graded notebook in the course's gradebook, sorted by assignment then student."""
    from nbgrader.api import Gradebook  # imported late: nbgrader is slow to import

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    rows: list[NotebookScore] = []
    with Gradebook(course.db_url) as gradebook:
        for assignment in gradebook.assignments:
            for submission in assignment.submissions:
                for notebook in submission.notebooks:
                    row = NotebookScore(submission.student_id, assignment.name, notebook.name)
                    for grade in notebook.grades:
                        row.cells[grade.name] = CellScore(
                            grade.name, float(grade.score), float(grade.max_score), bool(grade.needs_manual_grade)
                        )
                    rows.append(row)
    rows.sort(key=lambda r: (r.assignment, r.student, r.notebook))
    return rows


def submission_flags(course: Course, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[Any]]:
    """``(assignment, student) -> flags`` raised by the scan of the students' answer cells
    (``course_grader.grading.scan.scan_submissions``; each flag prints as one line and has a
    short ``rule``); only submissions with flags are listed."""
    try:
        from course_grader.grading.scan import scan_submissions
    except ImportError:  # the scan is not part of this installation
        return {}
    flags: dict[tuple[str, str], list[Any]] = {}
    for assignment in sorted({a for a, _ in pairs}):
        students = sorted({s for a, s in pairs if a == assignment})
        for student, found in scan_submissions(course, assignment, students).items():
            if found:
                flags[(assignment, student)] = list(found)
        for student in students:  # what the checker saw the kernel do (a watch switched off, ...)
            evidence = checker_evidence(course.path("autograded", student, assignment))
            if evidence:
                flags.setdefault((assignment, student), []).extend(evidence)
    return flags


def checker_evidence(folder: Path) -> list[Any]:
    """Flags from the evidence the trusted checker wrote into autograded notebooks' test cells."""
    from course_grader.grading.scan import Flag

    found: list[Any] = []
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        try:
            nb = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not (nb.get("metadata", {}).get("course_grade") or {}).get("pipeline"):
            found.append(Flag(index=0, cell=path.stem, line=0, rule="outside-pipeline",
                              text="autograded outside `course grade` (the formgrader's Autograde button?): no scan, "
                                   "no similarity, no manual views; `course grade` it to decide on its evidence"))
        for index, cell in enumerate(nb.get("cells", [])):
            meta = cell.get("metadata", {})
            for item in meta.get("course_checker", {}).get("evidence", []) or []:
                label = meta.get("nbgrader", {}).get("grade_id", "cell")
                found.append(Flag(index=index, cell=str(label), line=0, rule="checker", text=str(item)[:300]))
    return found
