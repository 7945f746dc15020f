"""The grading pipeline's contracts: nbgrader's configured gradebook, results as data, clear
messages, the sandbox gate (a dead kernel in a parallel group: tests/course_grader/grading/test_parallel.py).

The first tests need no kernel; the last ones grade 00_welcome with real nbgrader (seconds).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_grader import cli
from course_grader.course import Course
from course_utils.cells import read
from course_grader.grading.gradebook import (
    AssignmentNotReleased,
    copy_assignment_definition,
    course_db_url,
    require_assignment,
)
from course_grader.grading.outcome import GradingRun, StudentResult, student_result
from course_grader.grading.scores import CellScore, NotebookScore
from course_grader.grading.tables import export_grades, scores_table
from course_grader.grading.runner import write_course_config
from course_grader.authoring.release import prepare_scratch_course

from tests.conftest import ROOT

A = "00_welcome"
TEST = "test_count_parameters"


# ----------------------------------------------------------------------------- no kernel


def test_course_db_url_is_nbgraders_configured_gradebook(tmp_path, monkeypatch):
    course = tmp_path / "course"
    write_course_config(course, ROOT / "nbgrader_config.py")
    assert course_db_url(course) == f"sqlite:///{course.resolve() / 'gradebook.db'}"

    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "c.CourseDirectory.db_url = 'sqlite:////elsewhere/gb.db'\n")
    assert course_db_url(course) == "sqlite:////elsewhere/gb.db"

    # deploy/jupyterhub: PostgreSQL from COURSE_DB_URL, with the repository's config as base
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "nbgrader_config.py").write_text((ROOT / "deploy" / "jupyterhub" / "nbgrader_config.py").read_text())
    monkeypatch.setenv("COURSE_BASE_CONFIG", str(ROOT / "nbgrader_config.py"))
    monkeypatch.setenv("COURSE_ROOT", str(hub))
    monkeypatch.setenv("COURSE_DB_URL", "postgresql+psycopg2://grader@db:5432/course")
    assert course_db_url(hub) == "postgresql+psycopg2://grader@db:5432/course"


def test_scratch_course_config_keeps_its_own_gradebook(tmp_path, monkeypatch):
    """A parallel worker's scratch course never writes to the real (e.g. PostgreSQL) gradebook."""
    base = tmp_path / "base_config.py"
    base.write_text("c = get_config()\nc.CourseDirectory.root = '/srv/x'\n"
                    "c.CourseDirectory.db_url = 'postgresql+psycopg2://u@h/db'\n")
    scratch = tmp_path / "scratch"
    write_course_config(scratch, base, own_gradebook=True)
    assert course_db_url(scratch) == f"sqlite:///{scratch.resolve() / 'gradebook.db'}"


def test_assignment_definition_copied_through_the_gradebook_api(tmp_path):
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()  # as grading does (alone, without .venv/bin on PATH, nbgrader's `alembic` is not found)
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with Gradebook(source) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("nb", "hw")
        gb.add_grade_cell("t1", "nb", "hw", max_score=3, cell_type="code")
        gb.add_solution_cell("s1", "nb", "hw")
        gb.add_source_cell("t1", "nb", "hw", cell_type="code", locked=True, source="assert f()", checksum="abc")
        gb.add_task_cell("w1", "nb", "hw", max_score=2, cell_type="markdown")
        gb.add_student("someone")
    with pytest.raises(AssignmentNotReleased, match=r"course release hw"):
        require_assignment(target, "hw")
    copy_assignment_definition(source, target, "hw")
    require_assignment(target, "hw")
    with Gradebook(target) as gb:
        notebook = gb.find_notebook("nb", "hw")
        assert [(c.name, c.max_score) for c in notebook.grade_cells] == [("t1", 3)]
        assert [c.name for c in notebook.solution_cells] == ["s1"]
        assert [(c.source, c.checksum, c.locked) for c in notebook.source_cells] == [("assert f()", "abc", True)]
        assert [(c.name, c.max_score) for c in notebook.task_cells] == [("w1", 2)]
        assert gb.students == []  # definitions only


def test_student_result_comes_from_that_students_outcome():
    assert student_result("a", A, {"success": True}) == StudentResult("a", A, "graded")
    dead = student_result("b", A, {"success": False, "log": "nbclient.exceptions.DeadKernelError: Kernel died"})
    assert dead.status == "failed" and "kernel died" in dead.reason
    limit = student_result("c", A, {"success": False, "log": (
        "course_grader.sandbox.execute.SandboxLimitError: Kernel died: out of memory (limit 6 GiB)")})
    assert limit.reason == "the kernel died while running the notebook: out of memory (limit 6 GiB) (SandboxLimitError)"
    other = student_result("d", A, {"success": False, "log": "ValueError: bad cell\n",
                                     "error": "nbgrader.apps.baseapp.NbGraderException: Please see the log"})
    assert other.reason == "nbgrader could not grade this submission (ValueError: bad cell)"
    missing = student_result("e", A, {"success": False, "log": f"No assignment with ID '{A}' exists in the database"})
    assert f"course release {A}" in missing.reason
    with pytest.raises(ValueError):
        StudentResult("f", A, "lost")
    run = GradingRun(A, [StudentResult("a", A, "graded"), dead, StudentResult("g", A, "malformed", "bad json")])
    assert run.failed == {"b": dead.reason, "g": "bad json"} and run.returncode == 1


def test_flags_column_in_table_and_export(tmp_path):
    class Flag:
        rule = "reference"

        def __str__(self) -> str:
            return "cell 3 (f) line 1: [reference] imports course_utils.attention"

    row = NotebookScore("ada", A, A, {TEST: CellScore(TEST, 2, 2, False)})
    clean = NotebookScore("bo", A, A, {TEST: CellScore(TEST, 0, 2, False)})
    flags = {(A, "ada"): [Flag()]}
    table = scores_table([row, clean], {}, flags).splitlines()
    assert table[0].split() == ["student", A, "flags"]
    assert table[2].startswith("ada") and table[2].endswith("1 (reference)")
    assert scores_table([row, clean]).splitlines()[0].split() == ["student", A]  # no flags, no column
    records = list(csv.DictReader(export_grades([row, clean], tmp_path / "g.csv", flags).open()))
    assert records[0]["flags"] == str(Flag()) and records[1]["flags"] == ""


def _fake_sandbox(monkeypatch, problem):
    # the real module with its check replaced: a stand-in module in sys.modules could outlive the
    # test in this worker (later tests then saw a sandbox where there was none)
    from course_grader.sandbox import bubblewrap as sandbox

    monkeypatch.setattr(sandbox, "sandbox_problem", lambda: problem)


def test_grade_refuses_without_a_sandbox(tmp_path, monkeypatch, capsys):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    monkeypatch.setenv("COURSE_ROOT", str(course))
    monkeypatch.setenv("COURSE_SANDBOX", "")  # recorded, so whatever the CLI sets is undone
    monkeypatch.delenv("COURSE_SANDBOX")
    _fake_sandbox(monkeypatch, "bwrap not found: apt-get install bubblewrap")
    assert cli.main(["grade", A]) != 0
    assert "bwrap not found: apt-get install bubblewrap" in capsys.readouterr().err

    monkeypatch.setenv("COURSE_SANDBOX", "off")  # only the explicit flag turns it off
    _fake_sandbox(monkeypatch, None)
    assert cli.main(["grade", A]) != 0
    assert "--no-sandbox" in capsys.readouterr().err


def test_no_sandbox_warns_loudly_and_turns_the_sandbox_off(tmp_path, monkeypatch, capsys):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    monkeypatch.setenv("COURSE_ROOT", str(course))
    monkeypatch.setenv("COURSE_SANDBOX", "")  # recorded, so whatever the CLI sets is undone
    monkeypatch.delenv("COURSE_SANDBOX")
    _fake_sandbox(monkeypatch, "bwrap not found")
    opened = []
    monkeypatch.setattr(cli, "_not_released", lambda course, names: opened.append(course) or ["stop here"])  # no grading needed
    assert cli.main(["grade", A, "--no-sandbox"]) == 1
    err = capsys.readouterr().err
    assert "UNSANDBOXED" in err and "stop here" in err
    from course_grader.grading.runner import grading_env

    assert opened[0].settings.sandbox is False
    assert grading_env(opened[0].settings)["COURSE_SANDBOX"] == "off"  # what the nbgrader processes get
    assert "COURSE_SANDBOX" not in os.environ  # set only where nbgrader's processes start, never process-wide
    sandboxed = Course.open(course)
    assert sandboxed.settings.sandbox and "COURSE_SANDBOX" not in grading_env(sandboxed.settings)
    monkeypatch.setenv("COURSE_SANDBOX", "off")  # the environment stays the documented way in
    assert Course.open(course).settings.sandbox is False


# ----------------------------------------------------------------------------- real nbgrader


def _course_cli(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COURSE_ROOT=str(course), COURSE_CELL_TIMEOUT="20", COURSE_PROFILE="ci")
    return subprocess.run([sys.executable, "-m", "course_utils.cli", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_grade_before_release_says_so(tmp_path):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    folder = course / "submitted" / "ada" / A
    folder.mkdir(parents=True)
    nbformat.write(read(course / "solutions" / A / f"{A}.ipynb"), str(folder / f"{A}.ipynb"))
    result = _course_cli("grade", A, "--no-sandbox", course=course)
    assert result.returncode != 0
    assert f"assignment '{A}' is not in the gradebook" in result.stderr
    assert f"Run `course release {A}` first" in result.stderr
    assert "nbgrader could not grade" not in result.stdout + result.stderr
    assert "autograding" not in result.stdout  # grade() checks the release before any backend starts
    # ... the Dask backend too: no scheduler is contacted (none listens there), and its direct caller checks as well
    on_dask = _course_cli("grade", A, "--no-sandbox", "--scheduler", "tcp://127.0.0.1:9", course=course)
    assert on_dask.returncode != 0 and f"Run `course release {A}` first" in on_dask.stderr, on_dask.stderr
    assert "Dask" not in on_dask.stdout
    from course_grader.grading.dask_grading import autograde_dask
    with pytest.raises(AssignmentNotReleased, match=rf"course release {A}"):
        autograde_dask(Course.open(course), {A: ["ada"]}, "tcp://127.0.0.1:9")
    assert (folder / f"{A}.ipynb").is_file()  # nothing was moved or graded
    feedback = _course_cli("feedback", A, course=course)
    assert feedback.returncode != 0 and f"Run `course release {A}` first" in feedback.stderr


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_nbgrader_process_dies_with_the_course_grade_that_started_it(tmp_path):
    """A `course grade` killed mid-class (SIGKILL: no clean-up runs) must not leave its nbgrader process
    grading on and writing to the gradebook while the instructor starts again (runner.die_with_parent)."""
    import signal
    import time

    child_pid = tmp_path / "child.pid"
    (tmp_path / "child.py").write_text(
        "import os, time\n"
        "from course_grader.grading.runner import die_with_parent\n"
        "die_with_parent()\n"
        f"open({str(child_pid)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n")
    (tmp_path / "parent.py").write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(tmp_path / 'child.py')!r}])\n"
        "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")])
    try:
        deadline = time.monotonic() + 60
        while not (child_pid.is_file() and child_pid.read_text()):
            assert time.monotonic() < deadline and parent.poll() is None, "the child never started"
            time.sleep(0.1)
        pid = int(child_pid.read_text())
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), "the nbgrader side outlived the command that started it"
    finally:
        parent.kill()
