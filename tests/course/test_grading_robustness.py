"""Grading that survives a real class: real `nbgrader autograde` through `course grade`.

A generated class on notebook 00 holds every kind of bad submission next to good ones.
It is graded serially, then again in parallel (the same course: the serial run has set
renamed and stray notebooks aside): the grades are asserted after each run, so one class
shows that serial grading is right, that parallel grading equals it, and that grading
twice gives the same grades.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from course_grader.course import Course
from course_utils.cells import fill_answers, grading_cells, nbgrader_meta, read, solution_code
from course_grader.grading.scores import read_scores
from course_grader.authoring.release import generate_release, prepare_scratch_course

from tests.conftest import ROOT
from tests.helpers.sandbox import needs_bwrap  # course grade refuses to grade without the sandbox

pytestmark = pytest.mark.slow

A = "00_welcome"
TEST = "test_count_parameters"
# the looping student costs this much per run. Every other cell must finish well within it: at 8 s a
# clean-clone CI on a busy 2-core machine timed out cells importing torch, and the students whose cells
# were interrupted came back as needing manual grading. COURSE_TEST_CELL_TIMEOUT overrides it.
CELL_TIMEOUT = os.environ.get("COURSE_TEST_CELL_TIMEOUT", "20")

# student -> (expected score of the test cell, or "FAILED", and words the report must show)
EXPECTED = {
    "ok": (2, None),
    "loop": (2, None),                      # the looping answer cell is interrupted; its function was defined
    "crash": ("FAILED", "kernel died"),
    "badjson": ("FAILED", "is not valid notebook JSON"),
    "missing": (0, "missing notebook '00_welcome.ipynb'"),
    "renamed": (2, "was renamed: graded it as '00_welcome.ipynb'"),
    "extra": (2, "extra file 'notes.txt' ignored"),
    "scratchnb": (2, "'scratch.ipynb' is not part of the assignment"),
    "deleted-wrong": (0, None),             # test cell deleted: restored with its hidden tests
    "deleted-right": (2, None),
    "edited": (0, None),                    # test cell edited to pass: restored from the source
    "warns": (2, None),                     # warnings on stderr do not zero a right answer
    "flood": (2, None),                     # 100k printed lines: truncated, still graded
}


def _build_class(course: Path) -> None:
    prepare_scratch_course(ROOT, course, [A])
    generate_release(Course.open(course), [A], verbose=False)
    release = read(course / "notebooks" / A / f"{A}.ipynb")
    answer = solution_code(read(course / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    frozen_mistake = answer.replace(" if p.requires_grad", "")

    def submit(student: str, nb=None, name: str = f"{A}.ipynb") -> Path:
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True, exist_ok=True)
        if nb is not None:
            nbformat.write(nb, str(folder / name))
        return folder

    def with_answer(code: str):
        return fill_answers(release, {"count_parameters": code})

    def without_test_cell(nb):
        nb = nbformat.from_dict(nb)
        nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != TEST]
        return nb

    submit("ok", with_answer(answer))
    # an endless loop that sleeps: the cell limit interrupts it as it does a busy one (test_sandbox interrupts a
    # busy `while True: pass` at its cell limit), without burning a core for CELL_TIMEOUT in each of the two runs
    submit("loop", with_answer(answer + "\nimport time\nwhile True:\n    time.sleep(0.1)\n"))
    submit("crash", with_answer("import os\nos._exit(1)\n"))
    (submit("badjson") / f"{A}.ipynb").write_text('{"cells": [ this is not json')
    submit("missing")
    submit("renamed", with_answer(answer), name=f"{A}-Copy1.ipynb")
    (submit("extra", with_answer(answer)) / "notes.txt").write_text("my notes")
    submit("scratchnb", with_answer(answer))
    submit("scratchnb", with_answer(answer), name="scratch.ipynb")
    submit("deleted-wrong", without_test_cell(with_answer(frozen_mistake)))
    submit("deleted-right", without_test_cell(with_answer(answer)))
    edited = with_answer(frozen_mistake)
    next(grading_cells(edited)).source = "print('all tests passed, promise')"
    submit("edited", edited)
    submit("warns", with_answer(
        "import warnings\n" + answer.replace('    """Number', '    warnings.warn("just a warning")\n'
                                             '    torch.tensor(torch.ones(1))  # torch warns: copy-construct\n    """Number')))
    submit("flood", with_answer("for i in range(100_000):\n    print('line', i)\n" + answer))


def _course(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SANDBOX"}  # always sandboxed
    env = dict(env, COURSE_ROOT=str(course), COURSE_CELL_TIMEOUT=CELL_TIMEOUT, COURSE_PROFILE="ci")
    return subprocess.run([sys.executable, "-m", "course_utils.cli", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=1200)


def _grades(course: Path) -> dict[str, float]:
    return {row.student: row.cells[TEST].score for row in read_scores(Course.open(course))
            if row.assignment == A and TEST in row.cells}


def _assert_class_graded(course: Path, result: subprocess.CompletedProcess[str], notes: bool = True) -> dict[str, float]:
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    grades = _grades(course)
    failed = {s for s, (expected, _) in EXPECTED.items() if expected == "FAILED"}
    needs_manual = {row.student for row in read_scores(Course.open(course)) if row.needs_manual_grade} - failed
    assert not needs_manual, f"nothing here needs manual grading: {needs_manual}"
    for student, (expected, words) in EXPECTED.items():
        if expected == "FAILED":
            assert f"FAILED {student} / {A}" in out, f"{student} should be reported as failed:\n{out}"
        else:
            assert grades.get(student) == expected, f"{student}: expected {expected}, got {grades.get(student)}\n{out}"
        if words and (notes or expected == "FAILED"):
            line = next((text for text in out.splitlines() if f" {student} / {A}" in text and words in text), None)
            assert line, f"the report should say {words!r} for {student}:\n{out}"
    return {s: g for s, g in grades.items() if EXPECTED[s][0] != "FAILED"}


@needs_bwrap
def test_serial_then_parallel_grading_of_a_class_with_bad_submissions(tmp_path):
    course = tmp_path / "course"
    _build_class(course)
    result = _course("grade", A, "--workers", "1", course=course)
    serial = _assert_class_graded(course, result)
    assert "2 submission(s) could not be graded" in result.stdout
    assert serial == {s: float(e) for s, (e, _) in EXPECTED.items() if e != "FAILED"}

    flooded = read(course / "autograded" / "flood" / A / f"{A}.ipynb")
    longest = max(len("".join(o.get("text", "")).splitlines()) for c in flooded.cells for o in c.get("outputs", []))
    assert longest <= 1000, f"output flooding should be truncated, found {longest} lines"

    # feedback: which tests failed and their messages, never the hidden tests' code
    assert _course("feedback", A, course=course).returncode == 0
    edited = (course / "feedback" / "edited" / A / f"{A}.html").read_text()
    assert "frozen parameters (requires_grad=False) must not be counted" in edited
    assert "frozen[0].weight.requires_grad_" not in edited and "BEGIN HIDDEN TESTS" not in edited
    assert "hidden tests ran here" in edited

    # export: totals and one column per exercise
    out = tmp_path / "grades.csv"
    assert _course("export", "--out", str(out), course=course).returncode == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert rows["ok"][f"{A}:{TEST}"] == "2" and rows["edited"][f"{A}:{TEST}"] == "0"
    assert rows["ok"]["score"] == "2" and rows["ok"]["max_score"] == "2"

    # the same class again, in parallel: the same grades (notes were shown by the first run,
    # which set the renamed and stray notebooks aside; which notes a run prints does not
    # depend on the workers: the submissions are inspected before grading starts)
    parallel = _assert_class_graded(course, _course("grade", A, "--workers", "2", course=course), notes=False)
    assert parallel == serial, "parallel grading (and grading twice) must give the serial grades"


def test_jupyterhub_configuration_loads(monkeypatch):
    monkeypatch.setenv("COURSE_BASE_CONFIG", str(ROOT / "nbgrader_config.py"))
    folder = ROOT / "deploy" / "jupyterhub"
    nbgrader = PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()
    assert nbgrader.CourseDirectory.db_url.startswith("postgresql")
    assert nbgrader.Exchange.root and nbgrader.CourseDirectory.source_directory == "solutions"
    hub = PyFileConfigLoader("jupyterhub_config.py", path=str(folder)).load_config()
    assert hub.JupyterHub.services[0]["environment"]["COURSE_PROFILE"] == "ci"
    assert any(role["name"].startswith("formgrade-") for role in hub.JupyterHub.load_roles)
