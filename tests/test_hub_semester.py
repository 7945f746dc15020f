"""One short semester on a real JupyterHub, configured by deploy/jupyterhub/ unchanged.

Components: JupyterHub (PyPI) and configurable-http-proxy (npm, `make setup`); real local users
(as root: the course account and two students made with useradd, each server running as its
user); nbgrader's exchange in a scratch folder; the formgrader as a hub service under the course
account; a real PostgreSQL gradebook (pgserver). The hub loads deploy/jupyterhub/jupyterhub_config.py
and the course directory is deploy/jupyterhub/nbgrader_config.py over the repository's config,
both reached through the environment variables they read (see tests/hubclass.py).

The semester, on 00_welcome in the ci profile: the course account releases (`course release`,
`nbgrader release_assignment`); ada and bo fetch and submit through the hub (their servers'
nbgrader endpoints and contents API, with tokens of their own): ada the solution's answer, bo the
blank release; the course account collects and runs `course grade` (parallel, in the sandbox where
it works); the formgrader, reached through the hub, shows the same scores from PostgreSQL and
refuses a student; `course feedback` and `nbgrader release_feedback`; each student fetches feedback
that is their own and carries no hidden test; `course export` has the scores. Nothing stays running.

This is also the course's PostgreSQL test (it replaced tests/test_postgres.py): grading before the
release is refused, parallel grading records its scores there, no sqlite gradebook appears.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.tooling.cells import fill_answers, read, solution_code
from course_utils.tooling.feedback import hidden_lines
from course_utils.tooling.gradebook import course_db_url
from course_utils.tooling.grading import read_scores
from course_utils.tooling.release import prepare_scratch_course

from conftest import ROOT
from hubclass import CLASS_MODE, COURSE, GRADER, Hub, Users, missing_hub_tools, open_folder

pgserver = pytest.importorskip("pgserver", reason="pgserver (PyPI) is not installed: pip install -e .[dev]")
pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed: pip install -e .[dev]")
if missing_hub_tools():
    pytest.skip(missing_hub_tools(), allow_module_level=True)

pytestmark = pytest.mark.slow

A = "00_welcome"
TEST = "test_count_parameters"
STUDENTS = {"ada": "solution", "bo": "blank"}


class Semester:
    def __init__(self, scratch: Path, users: Users, course: Path, env: dict[str, str], hub: Hub) -> None:
        self.scratch, self.users, self.course, self.env, self.hub = scratch, users, course, env, hub
        self.names = {student: users.add(f"{student}{os.getpid() % 100000}") for student in STUDENTS}

    def instructor(self, *args: str):
        """A command of the course account in the course directory (``course ...`` or ``nbgrader ...``)."""
        program = {"course": [sys.executable, "-m", "course_utils.tooling.cli"], "python": [sys.executable],
                   "nbgrader": [str(Path(sys.executable).parent / "nbgrader")]}[args[0]]
        return self.users.run(GRADER, [*program, *args[1:]], self.course, self.env)

    def ok(self, *args: str) -> str:
        result = self.instructor(*args)
        assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def semester():
    scratch = open_folder(Path(tempfile.mkdtemp(prefix="course-hub-")))
    users = Users(scratch)
    server = hub = None
    try:
        try:
            server = pgserver.get_server(open_folder(scratch / "pg") / "pgdata", cleanup_mode="delete")
        except Exception as error:  # noqa: BLE001 - no usable PostgreSQL binaries on this platform
            pytest.skip(f"pgserver could not start PostgreSQL: {error}")
        server.psql("CREATE DATABASE attention_transformers;")
        # its socket lives in the data folder (0700, PostgreSQL's user): the course account must reach it
        (scratch / "pg" / "pgdata").chmod(0o711)
        db_url = server.get_uri("attention_transformers").replace("postgresql://", "postgresql+psycopg2://", 1)
        users.add(GRADER)
        course = prepare_scratch_course(ROOT, open_folder(scratch / "course"), [A])
        shutil.copy2(ROOT / "deploy" / "jupyterhub" / "nbgrader_config.py", course / "nbgrader_config.py")
        users.chown(course, GRADER)
        exchange = scratch / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)  # as nbgrader's exchange requires (deploy/jupyterhub/README.md)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "COURSE_BASE_CONFIG": str(ROOT / "nbgrader_config.py"),
            "COURSE_ROOT": str(course),
            "COURSE_DB_URL": db_url,
            "NBGRADER_EXCHANGE": str(exchange),
            "COURSE_PROFILE": "ci",
            "COURSE_CELL_TIMEOUT": "30",
            "MPLBACKEND": "Agg",
        }
        started = time.monotonic()
        hub = Hub(scratch / "hub", users, env)
        print(f"[semester] hub up in {time.monotonic() - started:.1f} s ({CLASS_MODE})")
        yield Semester(scratch, users, course, env, hub)
    finally:
        leftovers = []
        if hub is not None:
            hub.stop()
            leftovers = hub.leftovers()
        leftovers += users.leftover_processes()
        users.remove()
        if server is not None:
            server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
        assert not leftovers, "still running after the hub stopped:\n" + "\n".join(leftovers)


def _lap(step: str, started: list[float]) -> None:
    """Print how long the semester's step took (pytest shows it with -s or on failure)."""
    now = time.monotonic()
    print(f"[semester] {step}: {now - started[-1]:.1f} s", flush=True)
    started.append(now)


def _scores(course: Path) -> dict[str, float]:
    return {r.student: r.cells[TEST].score for r in read_scores(course) if r.assignment == A}


def test_a_semester_on_jupyterhub(semester: Semester, monkeypatch):
    s, hub = semester, semester.hub
    clock = [time.monotonic()]
    ada, bo = s.names["ada"], s.names["bo"]
    for key, value in s.env.items():  # read_scores and course_db_url read the course's gradebook here too
        monkeypatch.setenv(key, value)
    assert course_db_url(s.course) == s.env["COURSE_DB_URL"]

    # 1. the students' servers start (the hub spawns them while) the course account releases;
    #    grading before the release is refused with the fix
    hub.request_servers([ada, bo])
    early = s.instructor("course", "grade", A, "--no-sandbox")
    assert early.returncode != 0 and f"Run `course release {A}` first" in early.stderr, early.stderr
    s.ok("course", "release", A)
    s.ok("nbgrader", "release_assignment", A)

    _lap("release", clock)

    # 2. two students fetch and submit through the hub, each with a token of their own
    tokens = hub.wait_for_servers([ada, bo])
    for name, token in tokens.items():
        listed = hub.api("GET", f"/user/{name}/assignments?course_id={COURSE}", token=token)
        assert [(a["assignment_id"], a["status"]) for a in listed["value"]] == [(A, "released")], listed
        fetched = hub.api("POST", f"/user/{name}/assignments/fetch?course_id={COURSE}&assignment_id={A}", token=token)
        assert fetched["success"], fetched
    path = f"/user/{ada}/api/contents/{A}/{A}.ipynb"
    notebook = nbformat.from_dict(hub.api("GET", path, token=tokens[ada])["content"])
    answer = solution_code(read(s.course / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    hub.api("PUT", path, {"type": "notebook", "format": "json",
                          "content": fill_answers(notebook, {"count_parameters": answer})}, token=tokens[ada])
    for name, token in tokens.items():
        submitted = hub.api("POST", f"/user/{name}/assignments/submit?course_id={COURSE}&assignment_id={A}",
                            token=token)
        assert submitted["success"], submitted
    assert hub.request("GET", f"/user/{bo}/api/contents/{A}", token=tokens[ada])[0] == 403, "ada reads bo's files"

    _lap("fetch and submit", clock)

    # 3. the course account collects and grades (two workers: parallel grading, recorded in PostgreSQL)
    s.ok("nbgrader", "collect", A)
    out = s.ok("course", "grade", A, "--workers", "2", *_sandbox_args(s))
    assert "could not be graded" not in out, out
    assert _scores(s.course) == {ada: 2.0, bo: 0.0}, out

    _lap("collect and grade", clock)

    # 4. the formgrader service, through the hub, reads the same gradebook; a student may not use it
    instructor = hub.token_of("instructor")
    formgrader = f"/services/{COURSE}/formgrader/api/submissions/{A}"
    graded = {row["student"]: row["score"] for row in hub.api("GET", formgrader, token=instructor)}
    assert graded == {ada: 2.0, bo: 0.0}, graded
    assert hub.request("GET", formgrader, token=tokens[bo])[0] == 403

    _lap("formgrader", clock)

    # 5. feedback, released through the exchange; each student fetches their own
    s.ok("course", "feedback", A)
    s.ok("nbgrader", "release_feedback", A)
    hidden = hidden_lines(cell.source for cell in read(s.course / "solutions" / A / f"{A}.ipynb").cells)
    assert hidden
    feedback = {}
    for name, token in tokens.items():
        got = hub.api("POST", f"/user/{name}/assignments/fetch_feedback?course_id={COURSE}&assignment_id={A}",
                      token=token)
        assert got["success"], got
        folders = hub.api("GET", f"/user/{name}/api/contents/{A}/feedback", token=token)["content"]
        assert len(folders) == 1, folders
        files = hub.api("GET", f"/user/{name}/api/contents/{folders[0]['path']}", token=token)["content"]
        assert [f["name"] for f in files] == [f"{A}.html"], files
        feedback[name] = hub.api("GET", f"/user/{name}/api/contents/{files[0]['path']}", token=token)["content"]
    assert f"{A} (Score: 2.0 / 2.0)" in feedback[ada] and f"{A} (Score: 0.0 / 2.0)" in feedback[bo], "each their own"
    for name, page in feedback.items():
        leaked = [line for line in hidden if line in page]
        assert not leaked, f"{name}'s feedback shows hidden tests: {leaked[:3]}"

    _lap("feedback", clock)

    # 6. the export
    out = s.course / "grades.csv"  # written by the course account, in its folder
    s.ok("course", "export", "--out", str(out))
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert rows[ada]["score"] == "2" and rows[bo][f"{A}:{TEST}"] == "0", rows
    assert "flags" in rows[ada]
    assert not list(s.course.rglob("gradebook.db")), "everything goes to PostgreSQL, no sqlite gradebook"

    _lap("export", clock)
    for name in tokens:
        hub.api("DELETE", f"/hub/api/users/{name}/server")


def _sandbox_args(s: Semester) -> list[str]:
    """Grade in the sandbox where it works for the course account (the hub must not matter to it)."""
    check = s.instructor("python", "-c", "from course_utils.tooling.sandbox import sandbox_problem as p; print(p() or '')")
    return [] if check.returncode == 0 and not check.stdout.strip() else ["--no-sandbox"]

