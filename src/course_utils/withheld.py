"""The course's reference answers, withheld while the notebook they answer is graded.

While a notebook is graded, the grading sandbox mounts a copy of ``course_utils`` in which the
functions and classes that answer *that* notebook's exercises raise :class:`ReferenceWithheld`
(later notebooks' grading still sees them: they import what earlier notebooks built). A cell
that falls back to the course's version of an unfinished exercise therefore fails while graded,
with this error, and every other cell goes on.
"""

from __future__ import annotations

__all__ = ["ReferenceWithheld"]


class ReferenceWithheld(RuntimeError):
    """The course's reference of an exercise, called while that exercise's notebook is graded."""

    def __init__(self, name: str, assignment: str = "") -> None:
        where = f" while {assignment} is graded" if assignment else " while this notebook is graded"
        super().__init__(
            f"{name} is not available{where}: it answers one of this notebook's exercises. "
            "Finish that exercise (your own function is used then); the rest of the notebook is graded as usual.")
        self.name = name
