"""The course's version of an unfinished exercise, so that the rest of a notebook still runs.

A cell after an exercise that uses the student's answer (a plot, a training run) would stop the
whole notebook while that exercise still raises ``NotImplementedError``. A notebook wraps the
student's function once (a few cells of 03 and 11 write ``try: ... except NotImplementedError:``
inline instead)::

    mask_tokens_ = yours_or_course(mask_tokens, course_mask_tokens, "Exercise 1 (mask_tokens)")

and call the wrapper. The course's version is called **only** when the student's raises
``NotImplementedError``, and a one-line notice says so the first time. Where the error comes from
another of the notebook's functions that the exercise calls (an earlier exercise, say), the notice
names that one: the exercise itself may be finished. While a notebook is graded
the references of its own exercises raise :class:`course_utils.withheld.ReferenceWithheld`, so a
finished exercise never touches them, and an unfinished one fails that cell with a message that
names it. No test cell may depend on a wrapper's result.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Callable, ParamSpec, TypeVar

__all__ = ["yours_or_course"]

P = ParamSpec("P")
R = TypeVar("R")


def yours_or_course(yours: Callable[P, R], course: Callable[P, R], exercise: str) -> Callable[P, R]:
    """``yours`` with the same arguments, or ``course``'s result where ``yours`` raises
    ``NotImplementedError`` (the exercise ``exercise`` is not done yet; printed once)."""
    told = False
    own = getattr(yours, "__qualname__", "").split(".")[0]   # a function's name, or a method's class

    @functools.wraps(yours)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal told
        try:
            return yours(*args, **kwargs)
        except NotImplementedError as error:
            if not told:
                raiser = notebook_function_that_raised(error.__traceback__)
                root = raiser.split(".")[0] if raiser else ""
                if raiser is None or root == own or f"({root})" in exercise:
                    print(f"{exercise} is not done yet: using the course's version until it is.")
                else:
                    print(f"{raiser}, which {exercise} calls, is not done yet: using the course's version of "
                          f"{exercise} until it is.")
                told = True
            return course(*args, **kwargs)

    return call


def notebook_function_that_raised(tb: TracebackType | None) -> str | None:
    """The qualified name of the innermost function defined in the notebook (module ``__main__``) on the
    traceback ``tb``, e.g. ``"causal_mask"`` or ``"TiledAttention.backward"``; None if there is none."""
    name = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__") == "__main__" and frame.f_code.co_name != "<module>":
            name = frame.f_code.co_qualname
        tb = tb.tb_next
    return name
