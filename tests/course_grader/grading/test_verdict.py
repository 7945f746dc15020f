"""A test cell's points are the checker's verdict alone (issue 33, course_grader.grading.verdict).

nbgrader's own rule reads the outputs, which the student's kernel writes: the first
``execute_result`` decides. A kernel that forges one (``sys.displayhook("done")``) would score
full points; here it scores the verdict. The whole path (sandboxed nbgrader, the demo class's blank
student forging its score three ways on every assignment) is proven by tests/course/test_grading.py and
tests/course/test_attacks.py.
"""

from __future__ import annotations

import nbformat
import pytest
from nbgrader import utils

from course_grader.grading.verdict import VERDICT_KEY, verdict_score


def _test_cell(outputs, verdict=None):
    cell = nbformat.v4.new_code_cell("check(answer() == 1)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 3, "locked": True,
                                 "schema_version": 3}
    cell.outputs = outputs
    if verdict is not None:
        cell.metadata[VERDICT_KEY] = verdict
    return cell


FORGED = [nbformat.v4.new_output("execute_result", data={"text/plain": "'done'"}, execution_count=1),
          nbformat.v4.new_output("error", ename="NotImplementedError", evalue="", traceback=[])]


def test_a_forged_execute_result_would_fool_nbgrader_but_not_the_verdict():
    assert utils.determine_grade(_test_cell(FORGED))[0] == 3, "nbgrader's rule changed: revisit verdict.py"
    assert verdict_score(_test_cell(FORGED)) == 0, "no verdict recorded: 0"
    assert verdict_score(_test_cell(FORGED, {"ok": False})) == 0


@pytest.mark.parametrize("verdict, points", [({"ok": True}, 3.0), ({"ok": "yes"}, 0.0), ({"ok": 1}, 0.0), ([], 0.0),
                                             ({"ok": False, "evidence": []}, 0.0)])
def test_only_a_recorded_pass_scores(verdict, points):
    assert verdict_score(_test_cell([], verdict)) == points


def test_answer_cells_keep_nbgrader_rules(monkeypatch):
    cell = nbformat.v4.new_markdown_cell("YOUR ANSWER HERE")
    cell.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": "w", "points": 2, "schema_version": 3}
    cell.metadata["nbgrader"]["checksum"] = utils.compute_checksum(cell)
    assert verdict_score(cell) == 0  # unchanged written answer
    monkeypatch.setenv("COURSE_CHECKER", "off")  # authors only: nbgrader's own rule
    assert verdict_score(_test_cell([])) == 3


def test_a_notebook_autograded_outside_the_pipeline_is_held(tmp_path):
    """Issue 33 item 5: the formgrader's Autograde button runs nbgrader directly (sandboxed, scored by the
    verdict, but never scanned or compared): its submission is held until `course grade` grades it."""
    from course_grader.grading.runner import PIPELINE_ENV, grading_env
    from course_grader.grading.scores import checker_evidence

    assert grading_env()[PIPELINE_ENV] == "1", "every nbgrader process of the pipeline carries the mark"
    nb = nbformat.v4.new_notebook()
    nb.cells = [_test_cell([], {"ok": True})]
    nbformat.write(nb, str(tmp_path / "03_x.ipynb"))
    assert [f.rule for f in checker_evidence(tmp_path)] == ["outside-pipeline"]
    nb.metadata["course_grade"] = {"pipeline": True}
    nbformat.write(nb, str(tmp_path / "03_x.ipynb"))
    assert checker_evidence(tmp_path) == []
