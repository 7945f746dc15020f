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
