"""Autograde with nbgrader and read the results back: score tables, CSV export, feedback.

Grading returns each student's outcome as data (:class:`StudentResult`), taken from
nbgrader's Python API per student (``NbGraderAPI.autograde``: success, error, log), never
from one log shared by several students. The gradebook is the one nbgrader is configured
with (:func:`course_grader.grading.gradebook.course_db_url`).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from course_grader.grading.gradebook import AssignmentNotReleased, require_assignment
from course_grader.grading.runner import autograde_jobs

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = [
    "CellScore",
    "NotebookScore",
    "StudentResult",
    "GradingRun",
    "AssignmentNotReleased",
    "autograde",
    "student_result",
    "read_scores",
    "submission_flags",
    "scores_table",
    "export_grades",
]

STATUSES = ("graded", "failed", "missing", "malformed")


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


@dataclass(frozen=True)
class StudentResult:
    """What grading did with one student's submission of one assignment.

    ``status``: ``graded`` (grades are in the gradebook), ``failed`` (nbgrader could not grade
    it: ``reason`` says why), ``missing`` (nothing submitted: recorded as 0) or
    ``malformed`` (not a readable notebook: not graded).
    """

    student: str
    assignment: str
    status: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")


@dataclass
class GradingRun:
    """What grading one assignment did: one :class:`StudentResult` per student."""

    assignment: str
    results: list[StudentResult]
    log: str = ""

    @property
    def failed(self) -> dict[str, str]:
        """``student -> reason`` for the submissions that could not be graded."""
        return {r.student: r.reason for r in self.results if r.status in ("failed", "malformed")}

    @property
    def returncode(self) -> int:
        return 1 if self.failed else 0


_DEAD_KERNEL = re.compile(r"DeadKernelError|Kernel died|kernel .*(died|restarted)", re.I)
_TIMEOUT = re.compile(r"UnresponsiveKernelError|the kernel became unresponsive", re.I)
_SANDBOX_ERROR = re.compile(r"(?:[\w.]+\.)?(?P<kind>SandboxLimitError|SandboxError): (?P<message>.+)")
_NOT_RELEASED = re.compile(r"No assignment with ID '[^']*' exists in the database")
# the last line of a traceback: ``module.Name: message`` (any exception class, e.g.
# jupyter_client.kernelspec.NoSuchKernel), or a bare ``NameError: message`` of a builtin
_EXCEPTION_LINE = re.compile(
    r"^(?:(?P<module>(?:[a-z_]\w*\.)+)(?P<qualified>[A-Z]\w*)|(?P<name>[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception))"
    r"(?::\s*(?P<message>.*))?$"
)
# nbgrader's own wrap-up ("Please see the error log"), never the underlying error
_WRAPPERS = {"NbGraderException"}
MAX_MESSAGE = 300


def _last_exception(text: str) -> str:
    """The last ``SomeError: message`` line of a traceback in ``text``, without its module
    (``NoSuchKernel: No such kernel named attention-course``) and without nbgrader's own
    wrap-up; "" when there is none. Long messages are cut at ``MAX_MESSAGE`` characters."""
    found = ""
    for line in text.splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if not match:
            continue
        name = match.group("qualified") or match.group("name")
        if name in _WRAPPERS:
            continue
        message = (match.group("message") or "").strip()
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE] + " ..."
        found = f"{name}: {message}" if message else name
    return found


def _with_error(explanation: str, error: str) -> str:
    """``explanation (Name: message)``: what happened, and the underlying error when known."""
    return f"{explanation} ({error})" if error and error not in explanation else explanation


def student_result(student: str, assignment: str, outcome: Mapping[str, Any], db_url: str = "") -> StudentResult:
    """A :class:`StudentResult` from nbgrader's ``NbGraderAPI.autograde`` outcome for this
    student alone (``success``, ``error``, ``log``).

    A failed result's ``reason`` says what happened and carries the underlying error, its
    exception's name and message (``... (NoSuchKernel: No such kernel named attention-course)``),
    so that the score table shows it and not only nbgrader's log."""
    if outcome.get("success"):
        return StudentResult(student, assignment, "graded")
    text = f"{outcome.get('log', '')}\n{outcome.get('error', '')}"
    error = _last_exception(text)
    sandbox = _SANDBOX_ERROR.search(text)
    if outcome.get("process_died"):
        reason = _with_error(str(outcome["error"]), _last_exception(str(outcome.get("log", ""))))
    elif _NOT_RELEASED.search(text):
        reason = str(AssignmentNotReleased(assignment, db_url or "the configured gradebook"))
    elif sandbox and sandbox.group("kind") == "SandboxLimitError":
        detail = re.sub(r"^Kernel died:\s*", "", sandbox.group("message").strip())
        reason = f"the kernel died while running the notebook: {detail} (SandboxLimitError)"
    elif sandbox:
        reason = f"the grading sandbox failed (SandboxError: {sandbox.group('message').strip()})"
    elif _DEAD_KERNEL.search(text):
        reason = _with_error("the kernel died while running the notebook (e.g. os._exit, a segfault, out of memory)",
                             error or "DeadKernelError")
    elif _TIMEOUT.search(text):
        reason = _with_error("the kernel stopped responding and could not be interrupted", error)
    else:
        reason = _with_error("nbgrader could not grade this submission",
                             error or "no exception in nbgrader's log; see the log of `nbgrader autograde`")
    return StudentResult(student, assignment, "failed", reason)


def autograde(course: Course, assignment: str, students: Sequence[str] | None = None) -> GradingRun:
    """Autograde one assignment for all (or the given) students in ``course.profile``, one student
    at a time through nbgrader's API; never raises on a student's failure (see ``results``).

    Raises :class:`AssignmentNotReleased` when the assignment is not in the gradebook.
    """
    from course_grader.grading.submissions import submitted_students

    students = submitted_students(course, assignment, students)
    return autograde_many(course, {assignment: students})[assignment]


def autograde_many(course: Course, students: Mapping[str, Sequence[str]]) -> dict[str, GradingRun]:
    """:func:`autograde` for several assignments (``assignment -> students``) in one nbgrader process:
    ``assignment -> GradingRun``. Raises :class:`AssignmentNotReleased` before grading anything when
    one of them is not in the gradebook."""
    for assignment in students:
        require_assignment(course.db_url, assignment)
    jobs = [(assignment, student) for assignment, names in students.items() for student in names]
    outcomes, log = autograde_jobs(course.root, jobs, settings=course.settings)
    return {assignment: GradingRun(assignment, [student_result(s, assignment, outcomes[(assignment, s)], course.db_url)
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


Flags = Mapping[tuple[str, str], Sequence[Any]]


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


def _flags_text(flags: Flags, student: str, assignments: Sequence[str]) -> str:
    """The table's short form: the rules that fired, per assignment."""
    parts = []
    for assignment in assignments:
        found = list(flags.get((assignment, student), ()))
        if found:
            rules = sorted({str(getattr(flag, "rule", flag)) for flag in found})
            prefix = f"{assignment}: " if len(assignments) > 1 else ""
            parts.append(f"{prefix}{len(found)} ({', '.join(rules)})")
    return "; ".join(parts)


def scores_table(
    rows: Sequence[NotebookScore],
    failed: dict[tuple[str, str], str] | None = None,
    flags: Flags | None = None,
) -> str:
    """A plain-text table: one line per student, one column per assignment (score / max),
    and a ``flags`` column when the scan flagged anything. Below it, one line per submission
    that could not be graded (``FAILED`` in the table) with its reason, the underlying error
    included."""
    failed = failed or {}
    flags = flags or {}
    assignments = sorted({r.assignment for r in rows} | {a for a, _ in failed})
    students = sorted({r.student for r in rows} | {s for _, s in failed})
    by_key = {(r.assignment, r.student): r for r in rows}
    with_flags = any(flags.get((a, s)) for a in assignments for s in students)
    header = ["student", *assignments, *(["flags"] if with_flags else [])]
    lines = [header]
    for student in students:
        line = [student]
        for assignment in assignments:
            row = by_key.get((assignment, student))
            if (assignment, student) in failed:
                line.append("FAILED")
            elif row is None:
                line.append("-")
            else:
                manual = f" (+{len(row.needs_manual_grade)} manual)" if row.needs_manual_grade else ""
                line.append(f"{row.score:g} / {row.auto_max_score:g}{manual}")
        if with_flags:
            line.append(_flags_text(flags, student, assignments))
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * width for width in widths))
    if failed:
        text += ["", f"{len(failed)} submission(s) could not be graded:"]
        text += [f"  FAILED {student} / {assignment}: {why}" for (assignment, student), why in sorted(failed.items())]
    return "\n".join(text)


def export_grades(
    rows: Sequence[NotebookScore],
    path: Path,
    flags: Flags | None = None,
    held: Collection[tuple[str, str]] = (),
) -> Path:
    """Write one CSV row per student and assignment: ``status``, totals, the scan's ``flags``
    and a column per graded cell. A submission in ``held`` (``(assignment, student)``: waiting
    for the instructor's decision, see :mod:`course_grader.grading.review`) has status ``held``
    and no score at all; every other one is ``final``."""
    flags = flags or {}
    held = set(held)
    cell_ids = sorted({(r.assignment, gid) for r in rows for gid in r.cells})
    columns = ["student", "assignment", "notebook", "status", "score", "max_score", "needs_manual_grade", "flags"]
    columns += [f"{assignment}:{gid}" for assignment, gid in cell_ids]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            on_hold = (row.assignment, row.student) in held
            record = {
                "student": row.student,
                "assignment": row.assignment,
                "notebook": row.notebook,
                "status": "held" if on_hold else "final",
                "score": "" if on_hold else f"{row.score:g}",
                "max_score": f"{row.max_score:g}",
                "needs_manual_grade": " ".join(row.needs_manual_grade),
                "flags": "; ".join(str(flag) for flag in flags.get((row.assignment, row.student), ())),
            }
            for gid, cell in row.cells.items():
                record[f"{row.assignment}:{gid}"] = "" if on_hold else f"{cell.score:g}"
            writer.writerow(record)
    return path
