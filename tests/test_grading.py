"""Real `nbgrader autograde` on a generated class per assignment: the solutions score full marks,
the blank release scores zero, and a student holding the first curated mistake of every
exercise loses points in every test those mistakes name.

Each curated mistake on its own is checked in test_mistakes.py (one kernel per notebook, much
faster than one nbgrader run per mistake).
"""

from __future__ import annotations

import pytest

from course_utils.tooling.democlass import MISTAKES_STUDENT, grade_demo_class
from course_utils.tooling.mistakes import load_mistakes

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", assignment_names())
def test_autograde_demo_class(assignment, tmp_path):
    report = grade_demo_class(ROOT, tmp_path / "course", [assignment], feedback=False, verbose=False)
    assert not report.failed, f"nbgrader could not grade: {report.failed}"
    wrong = [f"{v.student}: {v.expectation} ({v.detail})" for v in report.verdicts if not v.ok]
    assert not wrong, "grading did not behave:\n" + "\n".join(wrong)
    kinds = {v.expectation for v in report.verdicts}
    assert {"solutions score full marks", "blank release scores zero"} <= kinds
    if load_mistakes(ROOT, assignment):
        assert any(v.student == MISTAKES_STUDENT for v in report.verdicts)
