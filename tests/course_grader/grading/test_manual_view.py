"""The manual-grading view (``grader/src/course_grader/grading/manual_view.py``): written answers beside the student's own run.

Unit tests render views from the course's own notebooks (no kernel; a planted output stands for
the run); one slow test executes a 05_masking submission in the ``cpu`` profile, as a student's
laptop would, grades it with real nbgrader (``ci`` profile) and reads the view `course grade` wrote.
"""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.cells import fill_answers, nbgrader_meta, read, solution_code
from course_utils.cells import split_hidden
from course_utils.layout import assignments
from course_grader.course import Course
from course_grader.grading.manual_view import render_view, view_path, written_questions
from course_grader.authoring.release import generate_release, prepare_scratch_course

from tests.helpers.sandbox import needs_bwrap  # course grade refuses to grade without the sandbox

ROOT = Path(__file__).resolve().parents[3]
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


def test_nbgraders_formgrader_and_feedback_pages_sanitize_a_submissions_html():
    """Second blind red team: raw HTML in a markdown cell and a text/html output survived into
    nbgrader's formgrade page (classic template) as live script in the instructor's origin."""
    import re

    from nbconvert import HTMLExporter

    from course_grader.grading.gradebook import nbgrader_config

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('My answer <img src=x onerror="document.title=1"> is **bold**.'),
                nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output(
                    "display_data", data={"text/html": "<b>a table</b><script>steal()</script><img src=y onerror='a()'>",
                                          "text/plain": "a table"})])]
    page, _ = HTMLExporter(config=nbgrader_config(ROOT), template_name="classic").from_notebook_node(nb)
    assert not re.search(r"<img[^>]*onerror", page) and "<script>steal()" not in page, "live script in the page"
    assert "<strong>bold</strong>" in page and "<b>a table</b>" in page, "the answer's own formatting stays"


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


def test_the_view_shows_the_model_answer_and_the_rubric():
    """Issue 34 item 8: the model answer (the solution's written cell, never in the student's release)
    and the points rubric beside the student's answer, one rubric per answer: the one the model answer
    ends with ("**Rubric (2 points).** ..."), else a cell's own (metadata), else the default levels (the
    third blind review saw 05's own rubric and the default one disagree on one page)."""
    question = written_questions(_source(M))[0]
    model_line = next(line for line in question.model_answer.splitlines() if len(line.strip()) > 30)
    assert model_line not in nbformat.writes(_release(M)), "the model answer is in the release"
    assert "Rubric" not in question.model_answer and question.rubric_text.startswith("1 point: ")
    page = render_view(M, "ada", _source(M), _student_run(M, CPU_LINE))
    assert html.escape(model_line) in page and "The model answer" in page
    assert page.count(f"Rubric ({question.points:g} points)") == 1 and html.escape(question.rubric_text[:40]) in page
    assert "own printed numbers" not in page, "the default rubric beside the model answer's own"
    plain = "03_self_attention"  # its model answer states no rubric: the default levels
    (without,) = written_questions(_source(plain))
    assert without.rubric_text == "" and "own printed numbers" in render_view(plain, "ada", _source(plain), _student_run(plain, CPU_LINE))
    source = _source(M)
    for cell in source.cells:
        if nbgrader_meta(cell).get("grade_id") == question.grade_id:
            cell.metadata.setdefault("course", {})["rubric"] = [[2, "names the NaN row and why"], [0, "anything else"]]
    page = render_view(M, "ada", source, _student_run(M, CPU_LINE))
    assert "names the NaN row and why" in page and "own printed numbers" not in page and "1 point: identifies" not in page


@pytest.mark.parametrize("run, answer, flagged", [
    ("device: cpu (1 thread) | torch 2.13.0 | profile: ci (COURSE_PROFILE) | seed: 0", "My numbers.", True),
    ("device: cpu (2 threads) | torch 2.13.0 | profile: cpu | seed: 0", "My numbers.", False),
    ("device: cuda | torch 2.13.0 | profile: gpu | seed: 0", "", False),
    ("", "device: cpu | profile: ci | seed: 0\nMy numbers.", True),    # only the header pasted in the answer
    ("", "My numbers.", True),                                          # no profile anywhere: said so
])
def test_a_run_in_a_smaller_profile_than_the_question_asks_is_flagged(run, answer, flagged):
    """01's written question asks for the `cpu` profile or larger: a ci run (from the setup line, or the
    header pasted in the answer) is flagged, a cpu or gpu run is not; a question asking for none never is."""
    from course_grader.grading.manual_view import profile_warning

    (question,) = written_questions(_source("01_rnn_bottleneck"))
    assert question.profile == "cpu"
    warning = profile_warning(question, run, answer)
    assert bool(warning) is flagged, warning
    if flagged and run:
        assert "the ci profile" in warning
    (other,) = written_questions(_source("03_self_attention"))
    assert other.profile is None and profile_warning(other, run, answer) == ""
    nb = _student_run("01_rnn_bottleneck", CPU_LINE)
    if run:
        nb.cells.insert(0, nbformat.v4.new_code_cell("setup()", outputs=[nbformat.v4.new_output("stream", name="stdout", text=run + "\n")]))
    for cell in nb.cells:
        if _is_written_cell(cell):
            cell.source = answer
    page = render_view("01_rnn_bottleneck", "ada", _source("01_rnn_bottleneck"), nb)
    assert ("class=warn" in page) is flagged


def test_a_question_asking_for_your_run_in_a_profile_names_that_profile():
    """06 asks for "the numbers of *your* run in the `cpu` profile": a ci run is flagged there too."""
    from course_grader.grading.manual_view import profile_warning

    (question,) = written_questions(_source("06_positional_encoding"))
    assert question.profile == "cpu"
    assert "the ci profile" in profile_warning(question, "device: cpu | profile: ci | seed: 0", "")
    assert profile_warning(question, "device: cpu | profile: cpu | seed: 0", "") == ""


def _is_written_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "markdown" and bool(meta.get("solution")) and bool(meta.get("grade"))


def _executed_in_the_cpu_profile(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    """What the student's own run leaves in the notebook: executed top to bottom, cpu profile."""
    from nbclient import NotebookClient

    from course_utils.layout import KERNEL_NAME

    previous = os.environ.get("COURSE_PROFILE")
    os.environ["COURSE_PROFILE"] = "cpu"  # the kernel inherits it, as from a student's shell
    try:
        NotebookClient(nb, timeout=300, kernel_name=KERNEL_NAME, allow_errors=True,
                       resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        os.environ["COURSE_PROFILE"] = previous if previous is not None else "ci"
    return nb


@pytest.mark.slow
@needs_bwrap
def test_grading_a_cpu_run_keeps_its_numbers_for_the_manual_grader(tmp_path):
    """A 05_masking submission executed in the cpu profile (as a student's laptop runs it), then
    graded (ci profile): the view holds the cpu run's outputs, never the re-run's, and no hidden line."""
    course = prepare_scratch_course(ROOT, tmp_path / "course", [M])
    generate_release(Course.open(course), [M], verbose=False)
    folder = course / "submitted" / "ada" / M
    folder.mkdir(parents=True)
    nb = fill_answers(_release(M), solution_code(_source(M)))
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            cell.source = "My own run: every row of values_left.grad[1] is NaN."
    nb = _executed_in_the_cpu_profile(nb, folder)
    nbformat.write(nb, str(folder / f"{M}.ipynb"))
    cpu_header = next(line for cell in nb.cells[:8] for output in cell.get("outputs", [])
                      for line in "".join(output.get("text", "")).splitlines() if "profile: cpu" in line)
    run_cell = written_questions(_source(M))[0].run_cells[0][0]
    cpu_output = "".join(o.get("text", "") for c in nb.cells if c.get("id") == run_cell for o in c.outputs).strip()
    assert cpu_output, "the cell the question draws on printed nothing in the cpu run"

    env = dict(os.environ, COURSE_ROOT=str(course), COURSE_CELL_TIMEOUT="60", COURSE_PROFILE="ci")
    graded = subprocess.run([sys.executable, "-m", "course_utils.cli", "grade", M], cwd=course, env=env,
                            capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert f"build/manual/{M}" in graded.stdout
    page = view_path(Course.open(course), M, "ada").read_text()
    assert html.escape(cpu_header) in page, "the view must show the submitted run's setup line (cpu profile)"
    assert html.escape(cpu_output.splitlines()[0]) in page and "My own run" in page
    autograded = read(course / "autograded" / "ada" / M / f"{M}.ipynb")
    assert "profile: cpu" not in str([c.get("outputs") for c in autograded.cells]), "grading re-ran it (ci profile)"
    assert "profile: ci" not in page, "the view shows the grader's re-run, not the student's run"
    leaked = [line for line in _hidden_lines(M) if line in page or html.escape(line) in page]
    assert not leaked, f"hidden test lines in the manual-grading view: {leaked[:3]}"
    review = subprocess.run([sys.executable, "-m", "course_utils.cli", "review", M], cwd=course, env=env,
                            capture_output=True, text=True, timeout=300)
    assert f"build/manual/{M}/ada.html" in review.stdout, review.stdout[-2000:]
