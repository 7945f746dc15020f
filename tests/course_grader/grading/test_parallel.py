"""Unit tests of course_grader.grading.parallel: grading a class in groups of students, each group in a
scratch course of its own, with real nbgrader on 00_welcome (seconds).

Elsewhere: serial and parallel grading of a class with bad submissions give the same grades
(tests/course/test_grading_robustness.py), and the Dask path (tests/course_grader/grading/test_dask_grading.py).
"""

from __future__ import annotations

import json

import pytest

from course_grader.course import Course
from course_utils.cells import read, solution_code
from course_grader.grading.scores import read_scores

from tests.conftest import ROOT, build_small_class
from tests.helpers.sandbox import needs_bwrap  # course grade refuses to grade without the sandbox

A = "00_welcome"
TEST = "test_count_parameters"


def solution_answer() -> str:
    return solution_code(read(ROOT / "solutions" / A / f"{A}.ipynb"))["count_parameters"]


@pytest.mark.slow
@needs_bwrap
def test_a_dead_kernel_stays_with_its_student_in_a_parallel_group(tmp_path):
    """One worker, one group: the crashing student fails alone, the others are graded."""
    from course_grader.grading.parallel import autograde_parallel

    course = tmp_path / "course"
    build_small_class(course, {"a-first": solution_answer(), "b-crash": "import os\nos._exit(1)\n",
                               "c-after": solution_answer()})
    run = autograde_parallel(Course.open(course), A, workers=1)
    by_student = {r.student: r for r in run.results}
    assert by_student["b-crash"].status == "failed" and "kernel died" in by_student["b-crash"].reason
    assert by_student["a-first"].status == "graded" and by_student["c-after"].status == "graded", run.results
    scores = {r.student: r.cells[TEST].score for r in read_scores(Course.open(course))}
    assert scores["a-first"] == 2 and scores["c-after"] == 2
    assert not any(p.name.startswith("course-grade-") for p in course.iterdir()), "scratch courses stay outside"
    # the execute step's own record of where its time went (benchmarks/bench_grading.py --part ratio reads it)
    graded = json.loads((course / "autograded" / "a-first" / A / f"{A}.ipynb").read_text())
    seconds = graded["metadata"]["course_grade"]["seconds"]
    assert seconds["kernel_start"] > 0 and seconds["test_cells"] > 0 and seconds["answer_cells"] >= 0, seconds
    assert seconds["execute"] >= seconds["kernel_start"] + seconds["answer_cells"] + seconds["test_cells"], seconds
