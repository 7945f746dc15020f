"""Autograde with nbgrader and read the results back: score tables, CSV export, feedback."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from course_utils.tooling.nbgrader_runner import run_nbgrader

__all__ = [
    "CellScore",
    "NotebookScore",
    "GradingRun",
    "autograde",
    "failed_students",
    "read_scores",
    "scores_table",
    "export_grades",
    "generate_feedback",
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


@dataclass
class GradingRun:
    """What one ``nbgrader autograde`` call did: its exit code and the students it failed."""

    assignment: str
    returncode: int
    failed: dict[str, str]
    log: str


_FAILED_STUDENT = re.compile(r"There was an error processing assignment '[^']*' for student '(?P<student>[^']+)'")
_DEAD_KERNEL = re.compile(r"DeadKernelError|Kernel died|kernel .*(died|restarted)", re.I)
_TIMEOUT = re.compile(r"UnresponsiveKernelError|the kernel became unresponsive", re.I)


def failed_students(log: str) -> dict[str, str]:
    """``student -> reason`` for every submission an nbgrader log says it could not grade."""
    reason = "nbgrader could not grade this submission"
    if _DEAD_KERNEL.search(log):
        reason = "the kernel died while running the notebook (e.g. os._exit, a segfault, out of memory)"
    elif _TIMEOUT.search(log):
        reason = "the kernel stopped responding and could not be interrupted"
    return {match.group("student"): reason for match in _FAILED_STUDENT.finditer(log)}


def autograde(
    course_dir: Path,
    assignment: str,
    students: Sequence[str] | None = None,
    *,
    profile: str = "ci",
    force: bool = True,
) -> GradingRun:
    """``nbgrader autograde`` one assignment for all (or some) students; never raises on a
    student's failure: those are listed in the result."""
    base = ["autograde", assignment, *(["--force"] if force else [])]
    calls = [base + [f"--student={student}"] for student in students] if students else [base]
    returncode, log = 0, ""
    for args in calls:
        result = run_nbgrader(args, course_dir, profile=profile, check=False)
        returncode = returncode or result.returncode
        log += result.stdout + result.stderr
    return GradingRun(assignment, returncode, failed_students(log), log)


def read_scores(course_dir: Path, db_url: str | None = None) -> list[NotebookScore]:
    """Every graded notebook in the course's gradebook, sorted by assignment then student."""
    from nbgrader.api import Gradebook  # imported late: nbgrader is slow to import

    db_url = db_url or f"sqlite:///{(course_dir / 'gradebook.db').resolve()}"
    rows: list[NotebookScore] = []
    with Gradebook(db_url) as gradebook:
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


def scores_table(rows: Sequence[NotebookScore], failed: dict[tuple[str, str], str] | None = None) -> str:
    """A plain-text table: one line per student, one column per assignment (score / max)."""
    failed = failed or {}
    assignments = sorted({r.assignment for r in rows} | {a for a, _ in failed})
    students = sorted({r.student for r in rows} | {s for _, s in failed})
    by_key = {(r.assignment, r.student): r for r in rows}
    header = ["student", *assignments]
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
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(text)


def export_grades(rows: Sequence[NotebookScore], path: Path) -> Path:
    """Write one CSV row per student and assignment, with a column per graded cell and totals."""
    cell_ids = sorted({(r.assignment, gid) for r in rows for gid in r.cells})
    columns = ["student", "assignment", "notebook", "score", "max_score", "needs_manual_grade"]
    columns += [f"{assignment}:{gid}" for assignment, gid in cell_ids]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            record = {
                "student": row.student,
                "assignment": row.assignment,
                "notebook": row.notebook,
                "score": f"{row.score:g}",
                "max_score": f"{row.max_score:g}",
                "needs_manual_grade": " ".join(row.needs_manual_grade),
            }
            for gid, cell in row.cells.items():
                record[f"{row.assignment}:{gid}"] = f"{cell.score:g}"
            writer.writerow(record)
    return path


def generate_feedback(course_dir: Path, assignment: str, students: Sequence[str] | None = None) -> Path:
    """``nbgrader generate_feedback``: HTML feedback per student under ``feedback/``."""
    base = ["generate_feedback", assignment, "--force"]
    for args in [base + [f"--student={student}"] for student in students] if students else [base]:
        run_nbgrader(args, course_dir)
    return course_dir / "feedback"
