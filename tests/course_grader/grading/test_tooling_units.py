"""The pieces of the grading pipeline that need no kernel: cells, mistakes, tables, CSV."""

from __future__ import annotations

import csv

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_utils.cells import answer_cells, fill_answers, solution_code, strip_solution_markers, grading_cells
from course_grader.grading.scores import CellScore, NotebookScore
from course_grader.grading.tables import export_grades, scores_table
from course_grader.authoring.mistakes import Mistake, load_mistakes

from tests.conftest import ROOT, assignment_names


def _meta(grade_id, grade, solution, points=None):
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": grade and not solution, "grade_id": grade_id}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _notebook():
    return new_notebook(cells=[
        new_markdown_cell("# title"),
        new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n", metadata=_meta("f", False, True)),
        new_code_cell("assert f(1) == 2", metadata=_meta("test_f", True, False, 1)),
        new_markdown_cell("### BEGIN SOLUTION\nBecause.\n### END SOLUTION", metadata=_meta("why", True, True, 1)),
    ])


def test_strip_solution_markers_keeps_the_code_and_indentation():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    y = 2 * x\n    return y\n    ### END SOLUTION\n"
    assert strip_solution_markers(source) == "def f(x):\n    y = 2 * x\n    return y\n"


def test_cells_are_classified():
    nb = _notebook()
    assert [c.metadata.nbgrader.grade_id for c in answer_cells(nb)] == ["f", "why"]
    assert [c.metadata.nbgrader.grade_id for c in grading_cells(nb)] == ["test_f"]
    assert solution_code(nb) == {"f": "def f(x):\n    return 2 * x\n", "why": "Because.\n"}


def test_fill_answers_replaces_only_named_cells_and_rejects_unknown():
    nb = _notebook()
    filled = fill_answers(nb, {"f": "def f(x):\n    return 3 * x\n"})
    assert filled.cells[1].source == "def f(x):\n    return 3 * x\n"
    assert nb.cells[1].source.startswith("def f(x):\n    ### BEGIN")  # the original is untouched
    with pytest.raises(KeyError, match="nope"):
        fill_answers(nb, {"nope": ""})


def test_mistake_apply_and_its_guards():
    mistake = Mistake(cell="f", name="triples", rejected_by=("test_f",), replace=(("2 * x", "3 * x"),))
    assert mistake.apply("return 2 * x") == "return 3 * x"
    assert mistake.slug == "triples"
    with pytest.raises(ValueError, match="is not in the solution"):
        mistake.apply("return x + x")
    same = Mistake(cell="f", name="no-op", rejected_by=("test_f",), replace=(("x", "x"),))
    with pytest.raises(ValueError, match="unchanged"):
        same.apply("return x")
    assert Mistake(cell="f", name="whole", rejected_by=(), source="pass").apply("anything") == "pass"


@pytest.mark.parametrize("assignment", assignment_names())
def test_every_curated_mistake_applies_to_its_solution(assignment):
    """Each mistake names a real answer cell and real test cells, and changes the answer."""
    from course_utils.cells import read

    source = read(next((ROOT / "solutions" / assignment).glob("*.ipynb")))
    answers = solution_code(source)
    tests = {c.metadata.nbgrader.grade_id for c in grading_cells(source)}
    for mistake in load_mistakes(ROOT, assignment):
        assert mistake.cell in answers, f"{mistake.name}: no answer cell {mistake.cell}"
        assert set(mistake.rejected_by) <= tests and mistake.rejected_by, f"{mistake.name}: unknown test cells"
        assert mistake.apply(answers[mistake.cell]) != answers[mistake.cell]


def _rows():
    def row(student, a, b):
        r = NotebookScore(student, "03_x", "03_x")
        r.cells = {"t1": CellScore("t1", a, 2, False), "t2": CellScore("t2", b, 3, False), "w": CellScore("w", 0, 2, True)}
        return r

    return [row("ada", 2, 3), row("bo", 0, 0)]


def test_scores_table_and_failed_students():
    table = scores_table(_rows(), failed={("03_x", "cy"): "kernel died"})
    lines = table.splitlines()
    assert lines[0].split() == ["student", "03_x"]
    assert "5 / 5 (+1 manual)" in lines[2] and lines[2].startswith("ada")
    assert lines[4].split() == ["cy", "FAILED"]


def test_export_has_totals_and_one_column_per_exercise(tmp_path):
    path = export_grades(_rows(), tmp_path / "grades.csv")
    with path.open() as handle:
        records = list(csv.DictReader(handle))
    assert [r["student"] for r in records] == ["ada", "bo"]
    assert records[0]["score"] == "5" and records[0]["max_score"] == "7"
    assert records[0]["03_x:t2"] == "3" and records[1]["03_x:t1"] == "0"
    assert records[0]["needs_manual_grade"] == "w"


def test_feedback_hides_hidden_tests_and_tracebacks():
    from nbformat.v4 import new_output

    from course_grader.grading.feedback import HideHiddenTests, hide_hidden_tests

    source = "check(f(1) == 2)\n### BEGIN HIDDEN TESTS\ncheck(f(-5) == -10)\n### END HIDDEN TESTS\n"
    assert hide_hidden_tests(source) == "check(f(1) == 2)\n# (hidden tests ran here)\n"
    nb = _notebook()
    nb.cells[2].source = source
    nb.cells[2].outputs = [new_output("error", ename="CheckFailed", evalue="f(-5) is wrong",
                                      traceback=["\x1b[31mTraceback\x1b[0m", "check(f(-5) == -10)", "CheckFailed: f(-5) is wrong"])]
    cleaned, _ = HideHiddenTests().preprocess(nb, {})
    assert "f(-5) == -10" not in cleaned.cells[2].source
    assert cleaned.cells[2].outputs[0]["traceback"] == ["CheckFailed: f(-5) is wrong"]
    assert cleaned.cells[1].source == nb.cells[1].source  # answer cells untouched


def test_a_new_gradebook_gets_the_revision_alembic_heads_prints(tmp_path):
    """fast_gradebook_creation: the schema revision read in-process equals nbgrader's own (the
    first word `alembic heads` prints), and a gradebook created with it is stamped with it."""
    import subprocess
    import sys
    from pathlib import Path

    import nbgrader.api as api
    from nbgrader.dbutil import _temp_alembic_ini
    from sqlalchemy import text

    from course_grader.grading.gradebook import alembic_head, fast_gradebook_creation

    fast_gradebook_creation()
    assert api.get_alembic_version.in_process
    head = alembic_head()
    assert head and head == api.get_alembic_version()
    alembic = Path(sys.executable).with_name("alembic")  # what nbgrader runs, from the environment's bin
    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'unused.db'}") as ini:
        printed = subprocess.run([str(alembic) if alembic.exists() else "alembic", "-c", ini, "heads"],
                                 capture_output=True, text=True, check=True).stdout
    assert printed.split("\n")[0].split(" ")[0] == head
    with api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        assert gradebook.db.execute(text("SELECT version_num FROM alembic_version")).scalar() == head


def test_grading_runs_in_the_profile_it_is_given_whatever_the_shell_says(monkeypatch):
    """A COURSE_PROFILE=cpu left in the instructor's shell must not make grading run full-size notebooks."""
    from course_grader.course import Course, GradingSettings
    from course_grader.grading.runner import grading_env
    from course_utils import cli

    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    assert grading_env()["COURSE_PROFILE"] == "ci" and grading_env(GradingSettings("gpu"))["COURSE_PROFILE"] == "gpu"
    assert cli.build_parser().parse_args(["grade", "00_welcome"]).profile is None
    assert cli.build_parser().parse_args(["grade", "--profile", "cpu"]).profile == "cpu"
    assert Course.open(ROOT).profile == "ci" and Course.open(ROOT, profile="cpu").profile == "cpu"
    # and `course grade` opens its course in that profile (stopped right there: nothing is graded)
    from types import SimpleNamespace

    from course_grader import cli as grader_cli

    class Opened(Exception):
        pass

    def open_course(*args, **kwargs):
        raise Opened(Course.open(*args, **kwargs).profile)

    monkeypatch.setenv("COURSE_ROOT", str(ROOT))
    monkeypatch.setattr(grader_cli, "_sandbox_gate", lambda no_sandbox: None)
    monkeypatch.setattr(grader_cli, "Course", SimpleNamespace(open=open_course))
    for argv, profile in ((["grade", "00_welcome"], "ci"), (["grade", "00_welcome", "--profile", "gpu"], "gpu")):
        with pytest.raises(Opened) as opened:
            cli.main(argv)
        assert opened.value.args == (profile,), argv
