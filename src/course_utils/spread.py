"""Your run beside the course's seeds: the one-line verdict a notebook prints under a result.

The prose of a notebook states a result as the range the course measured over several seeds
(the tables behind each range are listed for instructors in ``docs/ranges/``). A cell that
prints a result also prints where the student's own number falls::

    print(beside_range("test accuracy", 100 * acc, 96.9, 100.0, seeds="0-4", unit="%"))
    # test accuracy 98.4%: the course's seeds 0-4 gave 96.9%-100.0%, yours is inside

so that a student on another machine reads a verdict, not a number to match.
"""

from __future__ import annotations

__all__ = ["beside_range", "inside"]


def inside(yours: float, low: float, high: float, *, slack: float = 0.0) -> bool:
    """Whether ``yours`` lies in ``[low - slack, high + slack]`` (``low <= high``)."""
    if low > high:
        raise ValueError(f"the range is empty: low {low} > high {high}")
    return low - slack <= yours <= high + slack


def beside_range(what: str, yours: float, low: float, high: float, *, seeds: str = "0-2", unit: str = "",
                 digits: int = 1, slack: float = 0.0, outside: str = "look again at your run") -> str:
    """One line: ``what`` and ``yours``, the course's range over ``seeds``, and ``inside`` or
    ``OUTSIDE: <outside>``. ``slack`` widens the range on both sides (a few seeds do not show a
    spread's tails); ``digits`` decimals, ``unit`` appended to every number."""
    def number(x: float) -> str:
        return f"{x:.{digits}f}{unit}"

    verdict = "inside" if inside(yours, low, high, slack=slack) else f"OUTSIDE: {outside}"
    return f"{what} {number(yours)}: the course's seeds {seeds} gave {number(low)}-{number(high)}, yours is {verdict}"
