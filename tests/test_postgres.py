"""The course against a real PostgreSQL gradebook, configured as deploy/jupyterhub does.

A PostgreSQL server is started for the test by ``pgserver`` (PyPI: PostgreSQL binaries that
start without root in seconds; as root it runs them as a ``pgserver`` system user), and
nbgrader reaches it through ``psycopg2-binary``. The course's nbgrader_config.py is
deploy/jupyterhub/nbgrader_config.py unchanged, with ``COURSE_DB_URL`` pointing at the
server. Then: release 00_welcome, grade a solution and a blank student serially and in
parallel, read the scores and export them. No sqlite gradebook may appear.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_utils.tooling.cells import fill_answers, read, solution_code
from course_utils.tooling.gradebook import course_db_url
from course_utils.tooling.grading import read_scores
from course_utils.tooling.release import prepare_scratch_course

from conftest import ROOT

pgserver = pytest.importorskip("pgserver", reason="pgserver (PyPI) is not installed: pip install -e .[dev]")
pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed: pip install -e .[dev]")

pytestmark = pytest.mark.slow

A = "00_welcome"
TEST = "test_count_parameters"


@pytest.fixture(scope="module")
def postgres_url():
    """A fresh PostgreSQL server and database; its SQLAlchemy URL (unix socket, no password)."""
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    try:
        server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
    except Exception as error:  # noqa: BLE001 - no usable PostgreSQL binaries on this platform
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL: {error}")
    try:
        server.psql("CREATE DATABASE attention_transformers;")
        yield server.get_uri("attention_transformers").replace("postgresql://", "postgresql+psycopg2://", 1)
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def hub_course(tmp_path, postgres_url, monkeypatch):
    """A course directory with deploy/jupyterhub's nbgrader config and the PostgreSQL gradebook."""
    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    shutil.copy2(ROOT / "deploy" / "jupyterhub" / "nbgrader_config.py", course / "nbgrader_config.py")
    env = {
        "COURSE_BASE_CONFIG": str(ROOT / "nbgrader_config.py"),
        "COURSE_ROOT": str(course),
        "COURSE_DB_URL": postgres_url,
        "NBGRADER_EXCHANGE": str(tmp_path / "exchange"),
        "COURSE_PROFILE": "ci",
        "COURSE_CELL_TIMEOUT": "30",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return course


def _course(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "course_utils.tooling.cli", *args], cwd=course, env=dict(os.environ),
                          capture_output=True, text=True, timeout=900)


def _sandbox_args() -> list[str]:
    """Grade in the sandbox where it works (the gradebook must not matter to it)."""
    try:
        from course_utils.tooling.sandbox import sandbox_problem
    except ImportError:
        return ["--no-sandbox"]
    return [] if sandbox_problem() is None else ["--no-sandbox"]


def _submit(course: Path) -> None:
    release = read(course / "notebooks" / A / f"{A}.ipynb")
    answer = solution_code(read(course / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    for student, nb in {"ada": fill_answers(release, {"count_parameters": answer}), "bo": release}.items():
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(folder / f"{A}.ipynb"))


def _scores(course: Path) -> dict[str, float]:
    return {r.student: r.cells[TEST].score for r in read_scores(course) if r.assignment == A}


def test_grading_with_a_postgresql_gradebook(hub_course, postgres_url, tmp_path):
    course = hub_course
    assert course_db_url(course) == postgres_url

    result = _course("grade", A, "--no-sandbox", course=course)
    assert result.returncode != 0 and f"Run `course release {A}` first" in result.stderr, result.stderr

    released = _course("release", A, course=course)
    assert released.returncode == 0, released.stdout[-2000:] + released.stderr[-2000:]
    _submit(course)

    for workers in ("1", "2"):
        result = _course("grade", A, "--workers", workers, *_sandbox_args(), course=course)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "could not be graded" not in result.stdout, result.stdout
        assert _scores(course) == {"ada": 2.0, "bo": 0.0}, f"workers={workers}\n{result.stdout}"
        assert (course / "autograded" / "ada" / A / f"{A}.ipynb").is_file()

    out = tmp_path / "grades.csv"
    exported = _course("export", "--out", str(out), course=course)
    assert exported.returncode == 0, exported.stderr[-2000:]
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert rows["ada"]["score"] == "2" and rows["bo"][f"{A}:{TEST}"] == "0"
    assert "flags" in rows["ada"]

    feedback = _course("feedback", A, course=course)
    assert feedback.returncode == 0, feedback.stderr[-2000:]
    assert (course / "feedback" / "ada" / A / f"{A}.html").is_file()

    assert not list(course.rglob("gradebook.db")), "everything goes to PostgreSQL, no sqlite gradebook"
