"""The client's recorder (course_grader.grading.recording) against nbgrader's own recording.

nbgrader records a small class with Execute off (``parallel.record_executed``, the path the Dask
client and the local parallel path took before); its autograded folders, sent again as a worker would send them, are recorded
into a fresh copy of the class by the Gradebook API. Every gradebook field and every file must be
the same, with a late submission and a failing test cell among them, and recording twice changes
nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from course_grader.course import Course
from course_grader.grading.parallel import record_executed
from course_grader.grading.recording import read_tree, record_executed_notebooks

from tests.conftest import build_small_class

A = "00_welcome"
DUE, LATE = "2030-01-01 00:00:00.000000 UTC", "2030-01-02 00:00:00.000000 UTC"


def gradebook_state(course: Path) -> tuple[list[tuple], dict[str, tuple[bytes, int]]]:
    """Every field nbgrader's autograde writes for the class, and every autograded file with its mode."""
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import course_db_url

    rows: list[tuple] = []
    with Gradebook(course_db_url(course)) as gradebook:
        rows.append(("students", tuple(sorted(s.id for s in gradebook.students))))
        for submission in gradebook.find_assignment(A).submissions:
            student = submission.student_id
            rows.append(("submission", student, str(submission.timestamp), submission.total_seconds_late))
            for notebook in submission.notebooks:
                rows.append(("notebook", student, notebook.name, notebook.score, notebook.late_submission_penalty))
                rows += [("grade", student, g.name, g.auto_score, g.manual_score, g.needs_manual_grade)
                         for g in notebook.grades]
                rows += [("comment", student, c.name, c.auto_comment) for c in notebook.comments]
    files = {p.relative_to(course).as_posix(): (p.read_bytes(), p.stat().st_mode)
             for p in sorted((course / "autograded").rglob("*")) if p.is_file()}
    return sorted(rows, key=repr), files


@pytest.mark.slow
def test_the_gradebook_api_records_what_nbgrader_records(tmp_path):
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import course_db_url

    by_nbgrader = build_small_class(tmp_path / "nbgrader", {"a-late": None, "b-failing": None})
    with Gradebook(course_db_url(by_nbgrader)) as gradebook:
        gradebook.update_or_create_assignment(A, duedate=DUE)
    (by_nbgrader / "submitted" / "a-late" / A / "timestamp.txt").write_text(LATE)
    path = by_nbgrader / "submitted" / "b-failing" / A / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    test_cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("points"))
    test_cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="wrong", traceback=[])]
    nbformat.write(nb, path)
    by_api = tmp_path / "api"
    shutil.copytree(by_nbgrader, by_api)

    shutil.copytree(by_nbgrader / "submitted", tmp_path / "staging")
    recorded, _ = record_executed(Course.open(by_nbgrader), A, tmp_path / "staging")
    executed = {s: read_tree(by_nbgrader / "autograded" / s / A) for s in recorded}
    results = record_executed_notebooks(Course.open(by_api), A, executed)

    assert {s: r.status for s, r in results.items()} == {s: r.status for s, r in recorded.items()} == \
        {"a-late": "graded", "b-failing": "graded"}
    expected = gradebook_state(by_nbgrader)
    assert gradebook_state(by_api) == expected
    assert ("grade", "b-failing", test_cell.metadata.nbgrader.grade_id, 0, None, False) in expected[0]
    assert any(row[:2] == ("submission", "a-late") and row[3] == 86400 for row in expected[0])  # a day late
    record_executed_notebooks(Course.open(by_api), A, executed)  # again, as a re-run client would
    assert gradebook_state(by_api) == expected
