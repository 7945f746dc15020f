"""Real `nbgrader autograde` (sandboxed) on a generated class per assignment: the solutions
score full marks and the blank release scores zero.

Where the rest of the demo class is proven:

- each curated mistake, on its own, rejected by the tests it names: test_mistakes.py (one
  kernel per notebook re-runs the cells from the answer to its tests with the wrong answer);
- a student holding the first curated mistake of every exercise losing points in every test
  those mistakes name, under real nbgrader: the main job's class on 00_welcome
  (test_cli.py::test_main_job_on_notebook_00: `course demo` grades the solution, blank and
  mistakes students with this same code, feedback on top). A mistakes student here would run
  each notebook a third time (after test_mistakes and the solution student) to show again that
  a test cell that raises scores zero, which the blank student shows for every test cell.

00_welcome's solution and blank students are the main job's too, so it is not graded here.
"""

from __future__ import annotations

import pytest

from course_grader.demo import grade_demo_class

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow

COVERED_BY_THE_MAIN_JOB_TEST = "00_welcome"


@pytest.mark.parametrize("assignment", [a for a in assignment_names() if a != COVERED_BY_THE_MAIN_JOB_TEST])
def test_autograde_demo_class(assignment, tmp_path):
    report = grade_demo_class(ROOT, tmp_path / "course", [assignment], with_mistakes=False, feedback=False,
                              verbose=False)
    assert not report.failed, f"nbgrader could not grade: {report.failed}"
    wrong = [f"{v.student}: {v.expectation} ({v.detail})" for v in report.verdicts if not v.ok]
    assert not wrong, "grading did not behave:\n" + "\n".join(wrong)
    kinds = {v.expectation for v in report.verdicts}
    assert kinds == {"solutions score full marks", "blank release scores zero"}
