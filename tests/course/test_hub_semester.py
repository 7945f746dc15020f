"""One short semester on a real JupyterHub, configured by deploy/jupyterhub/ unchanged.

Components: JupyterHub (PyPI) and configurable-http-proxy (npm, `make setup`); real local users
(as root, with a course Python other users can run: the course account and three students made
with useradd, each server running as its user; else the simple spawner, see tests/hubclass.py);
nbgrader's exchange in a scratch folder; the formgrader as a hub service under the course account;
a real PostgreSQL gradebook (pgserver). The hub loads deploy/jupyterhub/jupyterhub_config.py and
the course directory is deploy/jupyterhub/nbgrader_config.py over the repository's config, both
reached through the environment variables they read.

The semester, on 00_welcome and 03_self_attention in the ci profile: the course account releases
both (`course release`, `nbgrader release_assignment`); ada, bo and cy fetch and submit both
through the hub (their servers' nbgrader endpoints and contents API, with tokens of their own):
ada the solutions, bo the blank release, cy the solutions with one curated mistake in 03
(tests/mistakes/03_self_attention.py); the course account collects and runs `course grade` (the
three students at once, in the sandbox where it works). ada's and cy's 03 are held for review
(alike: cy's is ada's with one change) and the instructor accepts them (`course review`). The
formgrader, reached through the hub, shows the same scores from PostgreSQL and refuses a student;
the instructor grades ada's written answer there through its REST API (manual score and comment).
`course feedback` and `nbgrader release_feedback`; each student fetches feedback that is their own
(the comment only in ada's) and carries no hidden test; `course export` has the scores, the manual
one included. Nothing stays running.

This is also the course's PostgreSQL test (it replaced tests/test_postgres.py): grading before the
release is refused, parallel grading records its scores there, no sqlite gradebook appears.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course_grader.course import Course
from course_utils.cells import fill_answers, read, solution_code
from course_grader.grading.feedback import hidden_lines
from course_grader.grading.gradebook import course_db_url
from course_grader.grading.scores import read_scores
from course_grader.authoring.mistakes import load_mistakes
from course_grader.authoring.release import prepare_scratch_course

from tests.conftest import ROOT
from tests.hubclass import CLASS_MODE, COURSE, GRADER, Hub, Users, missing_hub_tools, open_folder, shut_down

pgserver = pytest.importorskip("pgserver", reason="pgserver (PyPI) is not installed: pip install -e .[dev]")
pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed: pip install -e .[dev]")
if missing_hub_tools():
    pytest.skip(missing_hub_tools(), allow_module_level=True)

pytestmark = pytest.mark.slow

W, S = "00_welcome", "03_self_attention"
ASSIGNMENTS = (W, S)
STUDENTS = {"ada": "solution", "bo": "blank", "cy": "mistake"}
MISTAKE = "output not permuted"  # tests/mistakes/03_self_attention.py: costs test_equivariance_gap (2 points)
WRITTEN = "written_saturation"  # 03's manually graded written answer (2 points)
MANUAL = (1.5, "Right about the variance; say why the softmax then saturates.")


class Semester:
    def __init__(self, scratch: Path, users: Users, course: Path, env: dict[str, str], hub: Hub) -> None:
        self.scratch, self.users, self.course, self.env, self.hub = scratch, users, course, env, hub
        self.names = {student: users.add(f"{student}{os.getpid() % 100000}") for student in STUDENTS}

    def instructor(self, *args: str):
        """A command of the course account in the course directory (``course ...`` or ``nbgrader ...``)."""
        program = {"course": [sys.executable, "-m", "course_utils.cli"], "python": [sys.executable],
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
        course = prepare_scratch_course(ROOT, open_folder(scratch / "course"), ASSIGNMENTS)
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
        leftovers = shut_down(hub, users)
        if server is not None:
            server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
        assert not leftovers, "still running after the hub stopped:\n" + "\n".join(leftovers)


def _lap(step: str, started: list[float]) -> None:
    """Print how long the semester's step took (pytest shows it with -s or on failure)."""
    now = time.monotonic()
    print(f"[semester] {step}: {now - started[-1]:.1f} s", flush=True)
    started.append(now)


def _autograded(course: Path) -> dict[tuple[str, str], float]:
    """``(assignment, student) -> points of its test cells`` (the written answer left out)."""
    return {(r.assignment, r.student): sum(c.score for gid, c in r.cells.items() if gid != WRITTEN)
            for r in read_scores(Course.open(course))}


def _answers(course: Path, assignment: str, kind: str) -> dict[str, str]:
    """The answer cells a student of ``kind`` writes: the solution's, or with the curated mistake in 03."""
    answers = solution_code(read(course / "solutions" / assignment / f"{assignment}.ipynb"))
    if kind == "mistake" and assignment == S:
        mistake = next(m for m in load_mistakes(ROOT, S) if m.name == MISTAKE)
        answers[mistake.cell] = mistake.apply(answers[mistake.cell])
    return answers


def test_a_semester_on_jupyterhub(semester: Semester, monkeypatch):
    s, hub = semester, semester.hub
    clock = [time.monotonic()]
    ada, bo, cy = (s.names[k] for k in STUDENTS)
    for key, value in s.env.items():  # read_scores and course_db_url read the course's gradebook here too
        monkeypatch.setenv(key, value)
    assert course_db_url(s.course) == s.env["COURSE_DB_URL"]

    # 1. the students' servers start (the hub spawns them while) the course account releases 00 and 03;
    #    grading before the release is refused with the fix
    hub.request_servers(list(s.names.values()))
    early = s.instructor("course", "grade", W, "--no-sandbox")
    assert early.returncode != 0 and f"Run `course release {W}` first" in early.stderr, early.stderr
    s.ok("course", "release", *ASSIGNMENTS)
    for a in ASSIGNMENTS:
        s.ok("nbgrader", "release_assignment", a)

    _lap("release", clock)

    # 2. three students fetch both and submit through the hub, each with a token of their own:
    #    ada the solutions, bo the blank release, cy the solutions with one curated mistake in 03
    tokens = hub.wait_for_servers(list(s.names.values()))
    for student, name in s.names.items():
        token = tokens[name]
        listed = hub.api("GET", f"/user/{name}/assignments?course_id={COURSE}", token=token)
        assert sorted((a["assignment_id"], a["status"]) for a in listed["value"]) == \
            [(a, "released") for a in ASSIGNMENTS], listed
        for a in ASSIGNMENTS:
            fetched = hub.api("POST", f"/user/{name}/assignments/fetch?course_id={COURSE}&assignment_id={a}",
                              token=token)
            assert fetched["success"], fetched
            if STUDENTS[student] != "blank":
                path = f"/user/{name}/api/contents/{a}/{a}.ipynb"
                notebook = nbformat.from_dict(hub.api("GET", path, token=token)["content"])
                filled = fill_answers(notebook, _answers(s.course, a, STUDENTS[student]))
                hub.api("PUT", path, {"type": "notebook", "format": "json", "content": filled}, token=token)
            submitted = hub.api("POST", f"/user/{name}/assignments/submit?course_id={COURSE}&assignment_id={a}",
                                token=token)
            assert submitted["success"], submitted
    assert hub.request("GET", f"/user/{bo}/api/contents/{W}", token=tokens[ada])[0] == 403, "ada reads bo's files"

    _lap("fetch and submit", clock)

    # 3. the course account collects and grades: the three students of each assignment at once
    #    (parallel grading, recorded in PostgreSQL; three workers on two cores leave no core idle)
    for a in ASSIGNMENTS:
        s.ok("nbgrader", "collect", a)
    out = s.ok("course", "grade", *ASSIGNMENTS, "--workers", "3", *_sandbox_args(s))
    assert "could not be graded" not in out, out
    expected = {(W, ada): 2.0, (W, bo): 0.0, (W, cy): 2.0, (S, ada): 14.0, (S, bo): 0.0, (S, cy): 12.0}
    assert _autograded(s.course) == expected, out
    wrong = {r.student: r.cells["test_equivariance_gap"].score for r in read_scores(Course.open(s.course)) if r.assignment == S}
    assert wrong == {ada: 2.0, bo: 0.0, cy: 0.0}, "the mistake costs the test that names it"

    print(out[-700:])
    _lap("collect and grade", clock)

    # 4. ada's and cy's 03 are held for review: alike (cy's is ada's with one change). The
    #    instructor accepts both (their autograded scores stand; the written answer is left to a person)
    review = s.ok("course", "review", S)
    assert f"HELD {ada}" in review and f"HELD {cy}" in review and f"HELD {bo}" not in review, review
    for name in (ada, cy):
        s.ok("course", "review", S, name, "--accept", "--reason", "the course's own solution, given in class")

    # 5. the formgrader service, through the hub, reads the same gradebook; a student may not use it.
    #    The instructor grades ada's written answer there (manual score and comment, nbgrader's REST API).
    instructor = hub.token_of("instructor")
    formgrader = f"/services/{COURSE}/formgrader/api"
    graded = {row["student"]: row["score"] for row in hub.api("GET", f"{formgrader}/submissions/{S}", token=instructor)}
    assert graded == {ada: 14.0, bo: 0.0, cy: 12.0}, graded
    assert hub.request("GET", f"{formgrader}/submissions/{W}", token=tokens[bo])[0] == 403
    notebooks = hub.api("GET", f"{formgrader}/submitted_notebooks/{S}/{S}", token=instructor)
    submission = next(n["id"] for n in notebooks if n["student"] == ada)
    grade = next(g for g in hub.api("GET", f"{formgrader}/grades?submission_id={submission}", token=instructor)
                 if g["name"] == WRITTEN)
    comment = next(c for c in hub.api("GET", f"{formgrader}/comments?submission_id={submission}", token=instructor)
                   if c["name"] == WRITTEN)
    assert grade["needs_manual_grade"] and grade["max_score"] == 2.0, grade
    body = json.dumps({"manual_score": MANUAL[0]}).encode()
    assert hub.request("PUT", f"{formgrader}/grade/{grade['id']}", tokens[bo], body)[0] == 403, "a student grades"
    graded = hub.api("PUT", f"{formgrader}/grade/{grade['id']}", {"manual_score": MANUAL[0]}, token=instructor)
    assert graded["manual_score"] == MANUAL[0] and not graded["needs_manual_grade"], graded
    hub.api("PUT", f"{formgrader}/comment/{comment['id']}", {"manual_comment": MANUAL[1]}, token=instructor)

    _lap("formgrader", clock)

    # 6. feedback, released through the exchange; each student fetches their own
    s.ok("course", "feedback", *ASSIGNMENTS)
    for a in ASSIGNMENTS:
        s.ok("nbgrader", "release_feedback", a)
    hidden = hidden_lines(cell.source for a in ASSIGNMENTS
                          for cell in read(s.course / "solutions" / a / f"{a}.ipynb").cells)
    assert hidden
    feedback = {}
    for name, token in tokens.items():
        for a in ASSIGNMENTS:
            got = hub.api("POST", f"/user/{name}/assignments/fetch_feedback?course_id={COURSE}&assignment_id={a}",
                          token=token)
            assert got["success"], got
            folders = hub.api("GET", f"/user/{name}/api/contents/{a}/feedback", token=token)["content"]
            assert len(folders) == 1, folders
            files = hub.api("GET", f"/user/{name}/api/contents/{folders[0]['path']}", token=token)["content"]
            assert [f["name"] for f in files] == [f"{a}.html"], files
            feedback[name, a] = hub.api("GET", f"/user/{name}/api/contents/{files[0]['path']}", token=token)["content"]
    own = {(ada, W): "2.0 / 2.0", (bo, W): "0.0 / 2.0", (cy, W): "2.0 / 2.0",
           (ada, S): "15.5 / 16.0", (bo, S): "0.0 / 16.0", (cy, S): "12.0 / 16.0"}
    for (name, a), score in own.items():
        assert f"{a} (Score: {score})" in feedback[name, a], f"{name}'s {a} feedback is not their own ({score})"
    assert MANUAL[1] in feedback[ada, S] and not any(MANUAL[1] in page for key, page in feedback.items()
                                                     if key != (ada, S)), "the comment goes to ada only"
    for (name, a), page in feedback.items():
        leaked = [line for line in hidden if line in page]
        assert not leaked, f"{name}'s {a} feedback shows hidden tests: {leaked[:3]}"

    _lap("feedback", clock)

    # 7. the export has the autograded scores and the manual one
    out = s.course / "grades.csv"  # written by the course account, in its folder
    s.ok("course", "export", "--out", str(out))
    rows = {(r["student"], r["assignment"]): r for r in csv.DictReader(out.open())}
    assert {key: r["score"] for key, r in rows.items()} == {
        (ada, W): "2", (bo, W): "0", (cy, W): "2", (ada, S): "15.5", (bo, S): "0", (cy, S): "12"}, rows
    assert rows[ada, S][f"{S}:{WRITTEN}"] == "1.5" and rows[cy, S][f"{S}:test_equivariance_gap"] == "0", rows
    assert WRITTEN in rows[cy, S]["needs_manual_grade"] and not rows[ada, S]["needs_manual_grade"], rows
    assert "flags" in rows[ada, W]
    assert not list(s.course.rglob("gradebook.db")), "everything goes to PostgreSQL, no sqlite gradebook"

    _lap("export", clock)
    for name in tokens:
        hub.api("DELETE", f"/hub/api/users/{name}/server")


def _sandbox_args(s: Semester) -> list[str]:
    """Grade in the sandbox where it works for the course account (the hub must not matter to it)."""
    check = s.instructor("python", "-c", "from course_grader.sandbox.bubblewrap import sandbox_problem as p; print(p() or '')")
    return [] if check.returncode == 0 and not check.stdout.strip() else ["--no-sandbox"]

