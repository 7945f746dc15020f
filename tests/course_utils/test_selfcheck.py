"""course_utils.selfcheck: what `course check` reports, read from an executed notebook's cells."""

from __future__ import annotations

import nbformat

from course_utils.selfcheck import _results


def _answer(grade_id: str, source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True, "grade": False}
    return cell


def _test(grade_id: str, traceback_line: str | None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("check(...)", execution_count=2)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": True, "solution": False, "points": 2}
    if traceback_line:
        cell.outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="",
                                               traceback=["---", traceback_line])]
    return cell


def test_an_unfinished_class_method_is_traced_to_its_exercise():
    """11: exercise 8 written, GQAttention (exercise 7) not: FAIL naming exercise 7, not 'not attempted' (eighth review)."""
    cells = [_answer("GQAttention", "class GQAttention(nn.Module):\n    def forward(self, x):\n        raise NotImplementedError\n"),
             _test("test_GQAttention", "Cell In[1], line 3, in GQAttention.forward(self, x)"),
             _answer("MyLlama", "class MyLlama(nn.Module):\n    ..."),
             _test("test_llama_forward", "Cell In[1], line 3, in GQAttention.forward(self, x)")]
    own, later = _results(cells)
    assert own.status == "TODO"
    assert later.status == "FAIL" and "GQAttention.forward" in later.message and "'GQAttention'" in later.message


def test_a_cell_outside_the_tests_that_stops_at_an_unfinished_exercise_is_named():
    cells = [_answer("f", "def f():\n    raise NotImplementedError\n"),
             nbformat.v4.new_code_cell("plot(f())", execution_count=3,
                                       outputs=[nbformat.v4.new_output("error", ename="NotImplementedError", evalue="",
                                                                       traceback=["Cell In[1], line 2, in f()"])])]
    (stopped,) = _results(cells)
    assert stopped.status == "ERROR" and stopped.grade_id == "cell 2" and "NotImplementedError from f" in stopped.message
