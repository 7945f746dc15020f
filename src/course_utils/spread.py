"""Your run beside the course's seeds: the one-line verdict a notebook prints under a result.

The prose of a notebook states a result as the range the course measured over several seeds
(the tables behind each range are listed for instructors in ``docs/ranges/``). A cell that
prints a result also prints where the student's own number falls::

    print(beside_range("test accuracy", 100 * acc, 96.9, 100.0, seeds="0-4", unit="%"))
    # test accuracy 98.4%: the course's seeds 0-4 gave 96.9%-100.0%, yours is inside
    print(beside_range("test accuracy", 95.2, 96.9, 100.0, seeds="0-4", unit="%", slack=2, measured="at one thread"))
    # test accuracy 95.2%: the course's seeds 0-4 at one thread gave 96.9%-100.0%, yours is near it (within
    # the slack of 2.0% allowed for other seeds and machines)

so that a student on another machine reads a verdict, not a number to match.
"""

from __future__ import annotations

import torch

__all__ = ["beside_range", "inside"]


def inside(yours: float, low: float, high: float, *, slack: float = 0.0) -> bool:
    """Whether ``yours`` lies in ``[low - slack, high + slack]`` (``low <= high``)."""
    if low > high:
        raise ValueError(f"the range is empty: low {low} > high {high}")
    return low - slack <= yours <= high + slack


def beside_range(what: str, yours: float, low: float, high: float, *, seeds: str = "0-2", unit: str = "",
                 digits: int = 1, slack: float = 0.0, measured: str = "",
                 outside: str = "look again at your run") -> str:
    """One line: ``what`` and ``yours``, the course's range over ``seeds`` (``measured``: how, e.g. "at
    one thread"), and a verdict: ``inside`` the range; ``near it`` (outside it by at most ``slack``: a few
    seeds do not show a spread's tails, nor one machine another's); or ``OUTSIDE: <outside>``. ``digits``
    decimals, ``unit`` appended to every number; ``yours`` is compared as printed (rounded to ``digits``).
    When the range was measured "at one thread" and this run uses another count, a verdict other than
    ``inside`` says so: another thread count moves a run as another seed does."""
    def number(x: float) -> str:
        return f"{x:.{digits}f}{unit}"

    yours = round(yours, digits)  # compared as printed: the ranges are written to ``digits`` decimals too
    if inside(yours, low, high):
        verdict = "inside"
    elif inside(yours, low, high, slack=slack):
        verdict = f"near it (within the slack of {number(slack)} allowed for other seeds and machines)"
    else:
        verdict = f"OUTSIDE: {outside}"
    threads = torch.get_num_threads()
    if verdict != "inside" and ("one thread" in measured or "one CPU thread" in measured) and threads != 1:
        verdict += f" (your run used {threads} threads, the range one: another thread count moves a run as another seed does)"
    course = f"the course's seeds {seeds}" + (f" {measured}" if measured else "")
    return f"{what} {number(yours)}: {course} gave {number(low)}-{number(high)}, yours is {verdict}"
