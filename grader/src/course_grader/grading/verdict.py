"""A test cell's points: the trusted checker's verdict, never the kernel's outputs.

nbgrader scores a code test cell from its outputs (an error: 0; the first ``execute_result``
that is a number: that many points; anything else: full points). Every output of a test cell
is written by the student's kernel, so a kernel could print its own grade
(``sys.displayhook("done")`` in a stub scored full points). :class:`SaveVerdicts` replaces
nbgrader's ``SaveAutoGrades``: a test cell scores its points when the verdict that
:func:`course_grader.sandbox.execute.record_check` wrote into the cell's metadata (from the
grader's side, never from the kernel) says it passed, and 0 when it failed or when no verdict
was recorded (the cell never ran, the kernel died, ...). Answer cells and written answers are
nbgrader's as before. With ``COURSE_CHECKER=off`` (authors only) nbgrader's own rule applies.
"""

from __future__ import annotations

from typing import Any

from nbgrader import utils
from nbgrader.preprocessors import SaveAutoGrades

__all__ = ["VERDICT_KEY", "verdict_score", "SaveVerdicts"]

VERDICT_KEY = "course_checker"  # the cell metadata key the grader writes the verdict under


def verdict_score(cell: Any) -> float | None:
    """The points of a graded cell: the checker's verdict for a code test cell, nbgrader's rule
    for the rest (None: needs manual grading)."""
    from course_grader.grading.checker import checker_enabled

    meta = cell.metadata.get("nbgrader", {})
    if cell.cell_type != "code" or meta.get("solution") or not checker_enabled():
        return utils.determine_grade(cell)[0]
    verdict = cell.metadata.get(VERDICT_KEY)
    passed = isinstance(verdict, dict) and verdict.get("ok") is True
    return float(meta.get("points", 0)) if passed else 0.0


class SaveVerdicts(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades`` with test cells scored by :func:`verdict_score`."""

    def _add_score(self, cell: Any, resources: Any) -> None:
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        grade.auto_score = verdict_score(cell)
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
        self.gradebook.db.commit()
