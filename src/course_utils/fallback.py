"""The course's version of an unfinished exercise, so that the rest of a notebook still runs.

A cell after an exercise that uses the student's answer (a plot, a training run) would stop the
whole notebook while that exercise still raises ``NotImplementedError``. Notebooks 03-06 write
``try: yours(...) except NotImplementedError: course's(...)`` inline; later notebooks wrap the
student's function once::

    mask_tokens_ = yours_or_course(mask_tokens, course_mask_tokens, "Exercise 1 (mask_tokens)")

and call the wrapper. The course's version is called **only** when the student's raises
``NotImplementedError``, and a one-line notice says so the first time. While a notebook is graded
the references of its own exercises raise :class:`course_utils.withheld.ReferenceWithheld`, so a
finished exercise never touches them, and an unfinished one fails that cell with a message that
names it. No test cell may depend on a wrapper's result.
"""

from __future__ import annotations

import functools
from typing import Callable, ParamSpec, TypeVar

__all__ = ["yours_or_course"]

P = ParamSpec("P")
R = TypeVar("R")


def yours_or_course(yours: Callable[P, R], course: Callable[P, R], exercise: str) -> Callable[P, R]:
    """``yours`` with the same arguments, or ``course``'s result where ``yours`` raises
    ``NotImplementedError`` (the exercise ``exercise`` is not done yet; printed once)."""
    told = False

    @functools.wraps(yours)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal told
        try:
            return yours(*args, **kwargs)
        except NotImplementedError:
            if not told:
                print(f"{exercise} is not done yet: using the course's version until it is.")
                told = True
            return course(*args, **kwargs)

    return call
