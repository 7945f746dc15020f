"""Every curated mistake is rejected by the test cells it names (one kernel per notebook).

See :mod:`course_utils.tooling.rejection`; the real nbgrader grading of the solutions, the blank
release and a student with one mistake per exercise is in test_grading.py.
"""

from __future__ import annotations

import pytest

from course_utils.tooling.mistakes import Mistake, load_mistakes
from course_utils.tooling.rejection import check_rejections

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", assignment_names())
def test_every_curated_mistake_is_rejected(assignment):
    mistakes = load_mistakes(ROOT, assignment)
    results = check_rejections(ROOT, assignment, mistakes)
    problems = [r.describe() for r in results if not r.ok]
    assert not problems, "\n".join(problems)
    assert len(results) == 1 + len(mistakes), "every mistake must be checked"


def test_a_mistake_the_tests_cannot_see_is_reported():
    """The checker itself can fail: an 'answer' that only adds a comment is not rejected."""
    harmless = Mistake(cell="count_parameters", name="adds a comment", rejected_by=("test_count_parameters",),
                       source=None, replace=(("def ", "# a comment\ndef "),))
    solution, result = check_rejections(ROOT, "00_welcome", [harmless])
    assert solution.ok
    assert not result.ok and "passes ['test_count_parameters']" in result.describe()
