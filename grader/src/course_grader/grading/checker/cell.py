"""One test cell, graded: the one way both grading and `course mistakes` decide a test cell.

The kernel runs the cell's visible part (what the student sees anyway, so its prints are the
student's to read); the trusted checker then runs the whole cell, visible and hidden tests,
against the kernel, and its verdict is the cell's. Nothing the kernel itself reports (an error
message, a printed "passed") decides anything. A kernel that could not finish the visible part
(it ran past the cell's limit, or was stopped) is not asked again: the cell fails with the reason.
"""

from __future__ import annotations

from typing import Protocol

from course_grader.grading.checker.result import CheckResult
from course_utils.cells import split_hidden

__all__ = ["TestCellKernel", "grade_test_cell"]


class TestCellKernel(Protocol):
    """A student's kernel, as a test cell is graded in it."""

    def run_visible(self, source: str) -> CheckResult | None:
        """Run ``source`` (the cell's visible part) in the kernel. A failing result when the kernel
        cannot be judged (it ran past the cell's limit, it was stopped); None otherwise, whatever
        the visible tests did."""

    def check(self, source: str) -> CheckResult:
        """The checker's verdict on the whole cell ``source``, run against this kernel."""


def grade_test_cell(kernel: TestCellKernel, source: str) -> CheckResult:
    """The verdict on the test cell ``source`` (visible and hidden tests) in ``kernel``."""
    stopped = kernel.run_visible(split_hidden(source))
    if stopped is not None:
        return stopped
    return kernel.check(source)
