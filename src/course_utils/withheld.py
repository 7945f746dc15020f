"""The course's reference answers, withheld while the notebook they answer is graded.

While a notebook is graded, the grading sandbox mounts a copy of ``course_utils`` in which the
functions and classes that answer *that* notebook's exercises raise :class:`ReferenceWithheld`
(later notebooks' grading still sees them: they import what earlier notebooks built), and so
are the modules of later notebooks that no notebook up to it imports. A cell
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
            f"{name} is not available{where}: it answers one of this notebook's exercises, or belongs to a "
            "later notebook. Use your own function (finish the exercise if it is this notebook's); the rest of "
            "the notebook is graded as usual.")
        self.name = name
