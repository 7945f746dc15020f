"""Real `nbgrader autograde` (sandboxed) on a generated class: for every assignment, the solutions
score full marks and the blank release scores zero.

One class in one scratch course holds every assignment (one nbgrader process releases them all;
each assignment is then autograded by its own nbgrader run, as `course grade` does); one test per
assignment reads that assignment's verdicts. The tests are one xdist group, so one worker grades
the class once.

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

from course_grader.demo import DemoReport, grade_demo_class

from tests.conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow

COVERED_BY_THE_MAIN_JOB_TEST = "00_welcome"
GRADED = [a for a in assignment_names() if a != COVERED_BY_THE_MAIN_JOB_TEST]


@pytest.fixture(scope="module")
def demo_class(tmp_path_factory) -> DemoReport:
    """The solution and blank students of every assignment in ``GRADED``, graded in one scratch course."""
    return grade_demo_class(ROOT, tmp_path_factory.mktemp("grading") / "course", GRADED, with_mistakes=False,
                            feedback=False, verbose=True)


@pytest.mark.xdist_group("grading")  # one worker grades the class all of them read
@pytest.mark.parametrize("assignment", GRADED)
def test_autograde_demo_class(assignment, demo_class):
    failed = {key: why for key, why in demo_class.failed.items() if key[0] == assignment}
    assert not failed, f"nbgrader could not grade {assignment}: {failed}"
    verdicts = [v for v in demo_class.verdicts if v.assignment == assignment]
    wrong = [f"{v.student}: {v.expectation} ({v.detail})" for v in verdicts if not v.ok]
    assert not wrong, f"grading {assignment} did not behave:\n" + "\n".join(wrong)
    kinds = {v.expectation for v in verdicts}
    assert kinds == {"solutions score full marks", "blank release scores zero"}, (assignment, kinds)
