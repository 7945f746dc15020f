"""Real `nbgrader autograde` on generated classes: the solutions score full marks, the blank
release scores zero, and every curated mistake, on its own, loses points where it should.

Each assignment's class is split into chunks of about six students so pytest-xdist can
grade them on both cores; every chunk has its own scratch course and gradebook.
"""

from __future__ import annotations

import math

import pytest

from course_utils.tooling.democlass import grade_demo_class
from course_utils.tooling.mistakes import load_mistakes

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow

STUDENTS_PER_CHUNK = 6


def _chunks():
    for assignment in assignment_names():
        n_mistakes = len(load_mistakes(ROOT, assignment))
        n_chunks = max(1, math.ceil((2 + n_mistakes) / STUDENTS_PER_CHUNK))
        for chunk in range(n_chunks):
            yield pytest.param(assignment, chunk, n_chunks, id=f"{assignment}-{chunk + 1}of{n_chunks}")


@pytest.mark.parametrize("assignment,chunk,n_chunks", _chunks())
def test_autograde_demo_class(assignment, chunk, n_chunks, tmp_path):
    report = grade_demo_class(
        ROOT,
        tmp_path / "course",
        [assignment],
        isolated=True,
        baseline=chunk == 0,
        mistake_filter=lambda index, _mistake: index % n_chunks == chunk,
        feedback=False,
        verbose=False,
    )
    assert not report.failed, f"nbgrader could not grade: {report.failed}"
    assert report.verdicts, "nothing was graded"
    wrong = [f"{v.student}: {v.expectation} ({v.detail})" for v in report.verdicts if not v.ok]
    assert not wrong, "grading did not behave:\n" + "\n".join(wrong)
    if chunk == 0:
        kinds = {v.expectation for v in report.verdicts}
        assert {"solutions score full marks", "blank release scores zero"} <= kinds
    expected_mistakes = [m for i, m in enumerate(load_mistakes(ROOT, assignment)) if i % n_chunks == chunk]
    assert sum(v.expectation.startswith("rejected:") for v in report.verdicts) == len(expected_mistakes)
