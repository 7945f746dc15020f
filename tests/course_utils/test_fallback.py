"""course_utils.fallback: the course's version only while the student's raises NotImplementedError."""

from __future__ import annotations

import pytest

from course_utils.fallback import yours_or_course
from course_utils.withheld import ReferenceWithheld


def _unfinished(x: int) -> int:
    raise NotImplementedError()


def test_the_students_function_is_used_when_it_is_done(capsys):
    calls = []

    def course(x: int) -> int:
        calls.append(x)
        return -1

    wrapped = yours_or_course(lambda x: x + 1, course, "Exercise 1")
    assert wrapped(2) == 3 and calls == []   # the reference is never called on the normal path
    assert capsys.readouterr().out == ""


def test_an_unfinished_exercise_falls_back_once_with_a_notice(capsys):
    wrapped = yours_or_course(_unfinished, lambda x: 10 * x, "Exercise 2 (f)")
    assert wrapped(3) == 30 and wrapped(x=4) == 40
    out = capsys.readouterr().out
    assert out.count("Exercise 2 (f) is not done yet") == 1
    assert wrapped.__name__ == "_unfinished"


def test_other_errors_and_a_withheld_reference_are_not_hidden():
    def broken(x: int) -> int:
        raise ValueError("bug")

    def withheld(x: int) -> int:
        raise ReferenceWithheld("course_utils.m.f")

    with pytest.raises(ValueError):
        yours_or_course(broken, lambda x: x, "Exercise 3")(1)
    with pytest.raises(ReferenceWithheld):
        yours_or_course(_unfinished, withheld, "Exercise 3")(1)


def test_the_notice_names_the_unfinished_function_the_exercise_calls(capsys):
    """05: combined_mask is written but calls causal_mask (Exercise 1), still unfinished: the notice names
    causal_mask, not combined_mask (which `course check` passes)."""
    notebook: dict = {"__name__": "__main__"}   # what a notebook's cells run in
    exec("def causal_mask(t):\n    raise NotImplementedError\n"
         "def combined_mask(t):\n    return causal_mask(t)\n"
         "class Tiled:\n    def forward(self, x):\n        return tiled(x)\n    def backward(self, g):\n        raise NotImplementedError\n"
         "def tiled(x):\n    raise NotImplementedError\n", notebook)
    wrapped = yours_or_course(notebook["combined_mask"], lambda t: -t, "Exercise 4 (combined_mask)")
    assert wrapped(2) == -2
    assert capsys.readouterr().out == ("causal_mask, which Exercise 4 (combined_mask) calls, is not done yet: "
                                       "using the course's version of Exercise 4 (combined_mask) until it is.\n")
    # its own method raising: the exercise itself is unfinished
    own = yours_or_course(notebook["Tiled"]().backward, lambda g: g, "Exercise 5 (Tiled)")
    assert own(1) == 1 and capsys.readouterr().out.startswith("Exercise 5 (Tiled) is not done yet")
    calls = yours_or_course(notebook["Tiled"]().forward, lambda x: x, "Exercise 5 (Tiled)")
    assert calls(1) == 1 and capsys.readouterr().out.startswith("tiled, which Exercise 5 (Tiled) calls")
