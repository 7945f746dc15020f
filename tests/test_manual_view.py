"""The manual-grading view (``tooling/manual_view.py``): written answers beside the student's own run.

Unit tests render views from the course's own notebooks (no kernel); one slow test grades a
05_masking submission whose outputs came from a ``cpu`` run with real nbgrader and reads the
view `course grade` wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.tooling.cells import fill_answers, nbgrader_meta, read, solution_code
from course_utils.tooling.checker import split_hidden
from course_utils.tooling.layout import assignments
from course_utils.tooling.manual_view import render_view, view_path, written_questions
from course_utils.tooling.release import generate_release, prepare_scratch_course

ROOT = Path(__file__).resolve().parents[1]
M = "05_masking"
CPU_LINE = "PROFILE cpu | loss 0.4137 after 3000 steps (planted: the student run)"


def _source(name: str):
    return read(ROOT / "solutions" / name / f"{name}.ipynb")


def _release(name: str):
    return read(ROOT / "notebooks" / name / f"{name}.ipynb")


def _hidden_lines(name: str) -> list[str]:
    """Every distinctive line of the notebook's hidden tests."""
    lines = []
    for cell in _source(name).cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            visible = set(split_hidden(cell.source).splitlines())
            lines += [line.strip() for line in cell.source.splitlines()
                      if line not in visible and len(line.strip()) > 25 and "HIDDEN TESTS" not in line]
    return lines


def _student_run(name: str, planted: str) -> nbformat.NotebookNode:
    """The release with the solution's answers, a written answer, and ``planted`` as the printed
    output of every cell a written question draws on (what a cpu run would have left)."""
    nb = fill_answers(_release(name), solution_code(_source(name)))
    ids = {cell_id for q in written_questions(_source(name)) for cell_id, _ in q.run_cells}
    for cell in nb.cells:
        if cell.get("id") in ids:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=planted + "\n")]
        meta = nbgrader_meta(cell)
        if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            cell.source = "My loss was 0.4137: the NaN weights spread to every row."
    return nb


def test_every_written_question_draws_on_cells_that_print():
    """Each notebook's written questions name at least one ordinary code cell (not a test) to show."""
    for name in assignments(ROOT):
        for q in written_questions(_source(name)):
            assert q.run_cells, f"{name}: written question {q.grade_id} draws on no cell; set metadata.course.run_cells"
            ids = {c.get("id") for c in _source(name).cells}
            assert all(cell_id in ids for cell_id, _ in q.run_cells), (name, q.grade_id)


def test_the_view_shows_the_submitted_outputs_and_escapes_them():
    nb = _student_run(M, CPU_LINE)
    for cell in nb.cells:  # a hostile output: HTML with a script, and a test cell's output
        if cell.get("id") == written_questions(_source(M))[0].run_cells[0][0]:
            cell.outputs.append(nbformat.v4.new_output("display_data", data={
                "text/html": "<script>alert(1)</script>", "text/plain": "<script>alert(2)</script>"}))
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="TEST-CELL-OUTPUT\n")]
    page = render_view(M, "ada", _source(M), nb)
    assert CPU_LINE in page
    assert "My loss was 0.4137" in page
    assert "the student's own run, unverified" in page
    assert "<script>" not in page and "&lt;script&gt;alert(2)" in page
    assert "TEST-CELL-OUTPUT" not in page


def test_a_cell_the_student_moved_or_renumbered_is_found_by_its_source():
    nb = _student_run(M, CPU_LINE)
    for cell in nb.cells:
        cell.pop("id", None)  # an older nbformat: no ids
    assert CPU_LINE in render_view(M, "bo", _source(M), nb)


def test_a_missing_cell_says_so():
    nb = _student_run(M, CPU_LINE)
    wanted = {cell_id for q in written_questions(_source(M)) for cell_id, _ in q.run_cells}
    nb.cells = [c for c in nb.cells if c.get("id") not in wanted]
    page = render_view(M, "cy", _source(M), nb)
    assert "cell not found in the submission" in page and CPU_LINE not in page


@pytest.mark.slow
def test_grading_a_cpu_run_keeps_its_numbers_for_the_manual_grader(tmp_path):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [M])
    generate_release(course, [M], verbose=False)
    folder = course / "submitted" / "ada" / M
    folder.mkdir(parents=True)
    nbformat.write(_student_run(M, CPU_LINE), str(folder / f"{M}.ipynb"))
    env = dict(os.environ, COURSE_ROOT=str(course), COURSE_CELL_TIMEOUT="60", COURSE_PROFILE="ci")
    graded = subprocess.run([sys.executable, "-m", "course_utils.tooling.cli", "grade", M], cwd=course, env=env,
                            capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert f"build/manual/{M}" in graded.stdout
    page = view_path(course, M, "ada").read_text()
    assert CPU_LINE in page, "the view must show the outputs as submitted (the cpu run), not the ci re-run"
    leaked = [line for line in _hidden_lines(M) if line in page]
    assert not leaked, f"hidden test lines in the manual-grading view: {leaked[:3]}"
    autograded = read(course / "autograded" / "ada" / M / f"{M}.ipynb")
    assert CPU_LINE not in str([c.get("outputs") for c in autograded.cells]), "grading re-ran the notebook"
    review = subprocess.run([sys.executable, "-m", "course_utils.tooling.cli", "review", M], cwd=course, env=env,
                            capture_output=True, text=True, timeout=300)
    assert f"build/manual/{M}/ada.html" in review.stdout, review.stdout[-2000:]
