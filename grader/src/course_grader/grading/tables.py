"""The instructor's views of the scores: a plain-text table (``course grade``) and the CSV export
(``course export``)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from course_grader.grading.scores import NotebookScore

__all__ = ["Flags", "scores_table", "export_grades"]

Flags = Mapping[tuple[str, str], Sequence[Any]]


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
