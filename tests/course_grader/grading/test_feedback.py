"""Hidden tests stay hidden: no feedback carries a hidden test's source, whatever student code prints."""

from __future__ import annotations

import html

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_utils.cells import grading_cells, read
from course_grader.grading.feedback import REDACTED, HideHiddenTests, hidden_lines

from tests import gradedclass
from tests.conftest import ROOT
from tests.helpers.sandbox import needs_bwrap  # course grade refuses to grade without the sandbox

HIDDEN = "check(secret_case(-5) == -10, 'negative inputs')"
TEST_SOURCE = f"check(f(1) == 2, 'one')\nprint('Visible tests passed.')\n### BEGIN HIDDEN TESTS\n{HIDDEN}\n### END HIDDEN TESTS\n"


def _meta(grade_id: str, **flags) -> dict:
    return {"nbgrader": {"grade_id": grade_id, "schema_version": 3, "points": 1 if flags.get("grade") else 0,
                         "solution": False, "grade": False, "locked": False, **flags}}


def _graded_notebook() -> nbformat.NotebookNode:
    """An autograded notebook whose student code leaked the hidden test everywhere it could."""
    leak = f"    {HIDDEN}\n"
    return new_notebook(cells=[
        new_code_cell("def f(x):\n    return 2 * x", metadata=_meta("f", solution=True),
                      outputs=[new_output("stream", name="stdout", text="my own output\n" + leak)]),
        new_code_cell(TEST_SOURCE, metadata=_meta("test_f", grade=True, locked=True), outputs=[
            new_output("stream", name="stdout", text="frame says:\n" + leak + "Visible tests passed.\n"),
            new_output("display_data", data={"text/plain": leak, "text/html": f"<pre>{html.escape(leak)}</pre>"}),
            new_output("error", ename="ValueError", evalue="x" * 5000 + leak, traceback=["\x1b[31mTraceback", leak]),
        ]),
        new_code_cell("print(In[2])", outputs=[
            new_output("stream", name="stdout", text="check(secret_case(-5)   ==  -10, 'negative inputs')\n"),
            new_output("execute_result", data={"text/html": f"<b>{html.escape(HIDDEN)}</b>",
                                               "application/json": {"leak": HIDDEN}}, execution_count=3),
            new_output("error", ename="RuntimeError", evalue=HIDDEN, traceback=[HIDDEN]),
        ]),
    ])


def test_hidden_lines_are_the_meaningful_lines_of_the_hidden_blocks():
    assert hidden_lines([TEST_SOURCE]) == {HIDDEN}
    assert hidden_lines(["### BEGIN HIDDEN TESTS\nx = 1\n# a comment here\n### END HIDDEN TESTS\n"]) == set()


def test_feedback_keeps_only_the_error_name_and_a_capped_message_in_test_cells():
    nb, _ = HideHiddenTests(source_directory="no-such-dir").preprocess(_graded_notebook(), {})
    test = nb.cells[1]
    assert "BEGIN HIDDEN" not in test.source and "secret_case" not in test.source
    (error,) = test.outputs  # stdout and display output of the test run are gone
    assert error.output_type == "error" and error.ename == "ValueError"
    assert len(error.evalue) <= 800 and error.traceback == [f"ValueError: {error.evalue}"]


def test_every_output_of_every_cell_is_redacted():
    nb, _ = HideHiddenTests(source_directory="no-such-dir").preprocess(_graded_notebook(), {})
    text = nbformat.writes(nb)
    assert "secret_case" not in text and "negative inputs" not in text
    assert REDACTED in nb.cells[0].outputs[0].text and "my own output" in nb.cells[0].outputs[0].text
    assert nb.cells[2].outputs == []  # a cell the student added shows nothing (issue 25, item 5)


def test_outputs_after_the_first_hidden_test_and_of_added_cells_are_not_shown(tmp_path):
    source = tmp_path / "solutions" / "a" / "nb.ipynb"
    source.parent.mkdir(parents=True)
    instructor = new_code_cell("print('a figure of the instructor')")
    nbformat.write(new_notebook(cells=[new_code_cell("def f(x):\n    return 2 * x"), instructor]), source)
    graded = _graded_notebook()
    shown = new_code_cell(instructor.source, outputs=[new_output("stream", name="stdout", text="instructor output\n")])
    graded.cells.insert(0, shown)  # before the first hidden test: shown
    graded.cells.append(new_code_cell(instructor.source, outputs=[new_output("stream", name="stdout", text="late\n")]))
    graded.cells.append(new_code_cell("def g():\n    pass", metadata=_meta("g", solution=True),
                                      outputs=[new_output("stream", name="stdout", text="late answer\n")]))
    nb, _ = HideHiddenTests(source_directory=str(tmp_path / "solutions")).preprocess(
        graded, {"nbgrader": {"assignment": "a", "notebook": "nb"}})
    assert nb.cells[0].outputs[0].text == "instructor output\n"
    assert nb.cells[3].outputs == []          # added by the student
    assert nb.cells[4].outputs == [] and nb.cells[5].outputs == []  # after the first test cell with hidden tests


def test_hidden_lines_of_other_assignments_are_redacted_too():
    other = read(ROOT / "solutions" / "00_welcome" / "00_welcome.ipynb")
    line = sorted(hidden_lines(c.source for c in grading_cells(other)))[0]
    nb = _graded_notebook()
    nb.cells[0].outputs[0].text = f"from the gradebook: {line}\n"
    cleaned, _ = HideHiddenTests(source_directory=str(ROOT / "solutions")).preprocess(nb, {})
    assert line not in cleaned.cells[0].outputs[0].text


# -- end to end: real `course grade` (sandboxed nbgrader autograde) and `course feedback` -------------

# the class (00_welcome, graded through `course grade` and `course feedback` once) is tests/gradedclass.py's,
# shared with test_review.py's end-to-end test; its leakers ("frame", "raise", "history") are this test's
A = gradedclass.A


def _outputs(nb: nbformat.NotebookNode) -> str:
    """Every output of every cell as text (what student code printed, raised or displayed), no source."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            parts += [str(output.get(key, "")) for key in ("text", "ename", "evalue")]
            parts += [str(line) for line in output.get("traceback", [])]
            parts += [str(value) for value in (output.get("data") or {}).values()]
    return "\n".join(parts)


@pytest.mark.slow
@needs_bwrap
@pytest.mark.xdist_group(gradedclass.GROUP)  # the worker that grades the shared class
def test_students_who_print_the_hidden_tests_get_none_of_them_in_feedback(welcome_class, tmp_path):
    """Each leaker is flagged, so held without feedback; accepted, its feedback carries no hidden line
    (tests/course/test_attacks.py checks the autograded outputs too, and encoded leaks)."""
    assert welcome_class.sandboxed, "graded without the sandbox"
    students = gradedclass.LEAKERS
    said = welcome_class.feedback.stdout  # `course feedback` before any decision
    for student in students:  # flagged (frames, linecache, In/_ih): held, so no feedback at all
        assert f"no feedback for {student}: held" in said, said
        assert not (welcome_class.course / "feedback" / student / A).exists(), f"{student} is held but has feedback"
    course = welcome_class.copy(tmp_path / "course")  # the decisions and the second feedback change it

    def course_cli(*command: str) -> str:
        result = gradedclass.course_cli(*command, course=course)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    for student in students:  # the instructor accepts them: now their feedback is written
        course_cli("review", A, student, "--accept", "--reason", "leak test: feedback must stay clean", "--by", "test")
    course_cli("feedback", A)

    secret = hidden_lines(c.source for c in grading_cells(read(course / "solutions" / A / f"{A}.ipynb")))
    assert secret
    for student in students:
        graded = _outputs(read(course / "autograded" / student / A / f"{A}.ipynb"))
        marker = {"frame": "LEAK-FRAME", "raise": "LEAK-RAISE", "history": "LEAK-IN"}[student]
        if student == "raise":  # issue 33: an error of the student's code during a test shows its type only
            assert "your code raised ValueError" in graded, "raise: the attack did not run, so the test proves nothing"
            assert marker not in graded, "raise: the kernel's own exception message reached the graded outputs"
        else:
            assert marker in graded, f"{student}: the attack did not run, so the test proves nothing"
        page = (course / "feedback" / student / A / f"{A}.html").read_text()
        for line in secret:
            assert line not in page and html.escape(line) not in page and html.escape(line, quote=False) not in page, \
                f"{student}: hidden line in feedback: {line}"
        assert "BEGIN HIDDEN TESTS" not in page
        assert "[course review] accept" in html.unescape(page), f"{student}: the decision is part of the feedback"
        if student == "frame":  # printed while the test ran (the test cell's visible first line): dropped
            assert "LEAK-FRAME from course_utils.checks" in graded
            assert "LEAK-FRAME from course_utils.checks" not in page
