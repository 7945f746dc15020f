"""nbgrader's exchange without a shared filesystem: ngshare on a real JupyterHub (issue 37, part 3).

The hub of tests/hubclass.py (deploy/jupyterhub/jupyterhub_config.py unchanged, its formgrader
service registered, as on Kubernetes, by its token only: grader-service.yaml runs it there) gets one
more service, ngshare (PyPI), started by the hub on 127.0.0.1 as deploy/z2jh/config.yaml registers it
on Kubernetes. The course account uses deploy/z2jh/nbgrader_config.py unchanged, with the grader
service's token (as in that service's terminal); the students use the
nbgrader configuration deploy/z2jh/config.yaml mounts in their servers (singleuser.extraFiles),
read from that file, with their own tokens. Nothing goes through a folder: the file exchange of
deploy/jupyterhub stays empty.

The course account creates the course in ngshare (ngshare-course-management, as ngshare's admin),
releases 00_welcome (`course release`, `nbgrader release_assignment`); ada and bo fetch it and
submit (ada the solution, bo the blank release) through ngshare_exchange; a student may not list
the submissions; the course account collects both and `course grade` grades them: 2 and 0 of 2.

Then issue 37's semester with variants, on 03_self_attention: released with a variant per student
(`course release --variants`, its exchange release `variant-release/`, one folder for the class),
through ngshare; each student's kernel shows their own visible parameters; both submit the solution,
`course grade` grades them (each checker with that student's stored seed), both are held (alike), the
instructor accepts ada's and grades the written answers; `course export --format canvas` and
`--format lti-ags --post` to a fake LTI platform give ada's scores as the gradebook has them and leave
bo's held 03 blank (PendingManual), never 0.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import yaml

from course_grader.course import Course
from course_utils.cells import fill_answers, read, solution_code
from course_grader.authoring.release import prepare_scratch_course
from course_grader.grading.scores import read_scores

from tests.conftest import ROOT
from tests.hubclass import COURSE, GRADER, Hub, Users, free_port, missing_hub_tools, open_folder, shut_down

# found, not imported: ngshare_exchange reads JUPYTERHUB_USER or USER when imported
for _package in ("ngshare", "ngshare_exchange"):
    if importlib.util.find_spec(_package) is None:
        pytest.skip(f"{_package} (PyPI) is not installed: `make setup` installs it", allow_module_level=True)
# ngshare 0.6.0 (PyPI's latest) saves nothing under SQLAlchemy 2 (it relies on 1.4's backref cascade;
# fixed on its master, unreleased); its image pins its own. Here it runs with SQLAlchemy 1.4 and an
# alembic that supports it, from a folder of their own (`make setup`: NGSHARE_SQLALCHEMY_SPEC) put
# first on its PYTHONPATH; the course's environment keeps SQLAlchemy 2.
NGSHARE_LIBS = Path(sys.prefix) / "ngshare-sqlalchemy1"
if not (NGSHARE_LIBS / "sqlalchemy").is_dir():
    pytest.skip(f"{NGSHARE_LIBS} is missing (SQLAlchemy 1.4 for ngshare): `make setup` installs it", allow_module_level=True)
if missing_hub_tools():
    pytest.skip(missing_hub_tools(), allow_module_level=True)

pytestmark = pytest.mark.slow

Z2JH = ROOT / "deploy" / "z2jh"
W = "00_welcome"
V = "03_self_attention"  # released with a variant per student
STUDENTS = {"ada": "solution", "bo": "blank"}

# ngshare binds every interface (it expects to sit behind the hub's proxy in a pod); here it listens
# on 127.0.0.1 only, otherwise unchanged (its own `main`, the arguments after -c)
NGSHARE = """\
from tornado.httpserver import HTTPServer
listen = HTTPServer.listen
HTTPServer.listen = lambda self, port, address="", **kw: listen(self, port, "127.0.0.1", **kw)
from ngshare.ngshare import main
main()
"""

# the hub service deploy/z2jh/config.yaml registers (hub.services.ngshare), here started by the hub
HUB_EXTRA = """
# tests/course/test_ngshare_exchange.py: ngshare, as deploy/z2jh/config.yaml's hub.services.ngshare
c.JupyterHub.services.append({{"name": "ngshare", "url": "http://127.0.0.1:{port}", "oauth_no_confirm": True,
                              "command": {command!r}, "environment": {{"PYTHONPATH": {libs!r}}}}})
# the grader service as Z2JH has it (hub.services.attention-transformers): registered with its token and
# run elsewhere (grader-service.yaml). Here nothing serves it, so it has no URL either (the hub would wait
# 30 s for it at start); the course account's commands hold its token.
grader = c.JupyterHub.services[0]
for key in ("command", "user", "cwd", "environment", "url"):
    grader.pop(key, None)
grader["api_token"] = {grader_token!r}
"""


def _student_config() -> str:
    """The nbgrader configuration deploy/z2jh/config.yaml mounts in every student's server."""
    values = yaml.safe_load((Z2JH / "config.yaml").read_text())
    files = values["singleuser"]["extraFiles"]
    (config,) = [f["stringData"] for f in files.values() if f["mountPath"] == "/etc/jupyter/nbgrader_config.py"]
    return config


class Class:
    def __init__(self, scratch: Path, users: Users, course: Path, hub: Hub, env: dict[str, str], grader_token: str,
                 student_config: Path) -> None:
        self.scratch, self.users, self.course, self.hub, self.env = scratch, users, course, hub, env
        self.grader_token, self.student_config = grader_token, student_config
        self.names = {student: users.add(f"{student}{os.getpid() % 100000}") for student in STUDENTS}

    def instructor(self, *args: str) -> str:
        """A command of the course account in the course directory, with the grader service's token
        (ngshare-course-management with the name it asks for, as README's `JUPYTERHUB_USER=...`)."""
        env = {**self.env, "JUPYTERHUB_API_TOKEN": self.grader_token}
        if args[0] == "ngshare-course-management":
            env["JUPYTERHUB_USER"] = COURSE
        return _ok(self.users.run(GRADER, _program(args), self.course, env))

    def student(self, name: str, token: str, *args: str) -> str:
        """A command in ``name``'s home, as in their server's terminal (their token, the students' config)."""
        env = {key: value for key, value in self.env.items() if key not in ("COURSE_ROOT", "COURSE_DB_URL")}
        env.update(JUPYTERHUB_API_TOKEN=token, JUPYTERHUB_USER=name, JUPYTER_CONFIG_PATH=str(self.student_config),
                   HOME=str(self.users.home(name)))
        return _ok(self.users.run(name, _program(args), self.users.home(name), env))


def _program(args: tuple[str, ...]) -> list[str]:
    bin_dir = Path(sys.executable).parent
    return {"course": [sys.executable, "-m", "course_utils.cli"], "nbgrader": [str(bin_dir / "nbgrader")],
            "python": [sys.executable],
            "ngshare-course-management": [str(bin_dir / "ngshare-course-management")]}[args[0]] + list(args[1:])


def _ok(result) -> str:
    """The output of a command that succeeded. ngshare_exchange exits 0 when ngshare refused: its log says so."""
    out = result.stdout + result.stderr
    failed = result.returncode != 0 or any(marker in out for marker in ("| ERROR]", "Failed to", "returned failure"))
    assert not failed, f"{' '.join(result.args[-3:])} (exit {result.returncode}):\n{out[-3000:]}"
    return out


@pytest.fixture(scope="module")
def klass():
    scratch = open_folder(Path(tempfile.mkdtemp(prefix="course-ngshare-")))
    users = Users(scratch)
    hub = None
    try:
        users.add(GRADER)
        course = prepare_scratch_course(ROOT, open_folder(scratch / "course"), (W, V))
        shutil.copy2(Z2JH / "nbgrader_config.py", course / "nbgrader_config.py")
        users.chown(course, GRADER)
        folder_exchange = open_folder(scratch / "exchange")  # deploy/jupyterhub's file exchange: must stay empty
        student_config = open_folder(scratch / "student-jupyter-config")
        (student_config / "nbgrader_config.py").write_text(_student_config())
        ngshare = open_folder(scratch / "ngshare")
        port = free_port()
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "COURSE_BASE_CONFIG": str(ROOT / "nbgrader_config.py"),
            "COURSE_HUB_CONFIG": str(ROOT / "deploy" / "jupyterhub" / "nbgrader_config.py"),
            "COURSE_ROOT": str(course),
            "COURSE_DB_URL": f"sqlite:///{course}/gradebook.db",
            "NBGRADER_EXCHANGE": str(folder_exchange),
            "COURSE_PROFILE": "ci",
            "COURSE_CELL_TIMEOUT": "30",
            "MPLBACKEND": "Agg",
        }
        grader_token = os.urandom(16).hex()
        command = [sys.executable, "-c", NGSHARE, "--database", f"sqlite:///{ngshare}/ngshare.db",
                   "--storage", f"{ngshare}/files/", "--admins", COURSE]
        started = time.monotonic()
        hub = Hub(scratch / "hub", users, env, extra_config=HUB_EXTRA.format(port=port, command=command, libs=str(NGSHARE_LIBS),
                                                                             grader_token=grader_token))
        print(f"[ngshare] hub {time.monotonic() - started:.1f} s")
        env["NGSHARE_URL"] = f"{hub.url}/services/ngshare"  # through the hub's proxy, as http://proxy-public/...
        hub._wait(lambda: _healthy(port), 60, "ngshare")
        print(f"[ngshare] hub and ngshare up in {time.monotonic() - started:.1f} s")
        yield Class(scratch, users, course, hub, env, grader_token, student_config)
    finally:
        leftovers = shut_down(hub, users)
        shutil.rmtree(scratch, ignore_errors=True)
        assert not leftovers, "still running after the hub stopped:\n" + "\n".join(leftovers)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_release_fetch_submit_collect_grade_through_ngshare(klass: Class, monkeypatch):
    k, hub = klass, klass.hub
    started, clock = time.monotonic(), [time.monotonic()]

    def lap(step: str) -> None:
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"[ngshare] {step}: {time.monotonic() - clock[-1]:.1f} s (commands' CPU so far {cpu.ru_utime + cpu.ru_stime:.1f} s)",
              flush=True)
        clock.append(time.monotonic())

    tokens = {name: hub.token_of(name) for name in k.names.values()}
    ada, bo = (k.names[s] for s in STUDENTS)

    # the course in ngshare: created by its admin (the grader service), which is its instructor; the roster.
    # Meanwhile (it needs no exchange) `course release` generates the release, and the sandbox is tried
    background = ThreadPoolExecutor(2)
    released = background.submit(k.instructor, "course", "release", W, V)
    sandbox = background.submit(_sandbox_args, k)
    k.instructor("ngshare-course-management", "create_course", COURSE, COURSE)
    roster = k.course / "roster.csv"
    roster.write_text("student_id,first_name,last_name,email\n" + "".join(f"{name},,,\n" for name in tokens))
    k.instructor("ngshare-course-management", "add_students", COURSE, str(roster), "--no-gb")
    lap("course and roster in ngshare")

    # release through ngshare
    released.result()
    k.instructor("nbgrader", "release_assignment", W)
    lap("release")

    # each student fetches and submits from their own server, with their own token: both at once
    def fetch_and_submit(student: str, name: str) -> None:
        fetched = k.student(name, tokens[name], "nbgrader", "fetch_assignment", W)
        notebook = k.users.home(name) / W / f"{W}.ipynb"
        assert notebook.is_file(), f"{name} fetched nothing:\n{fetched[-3000:]}"
        if STUDENTS[student] == "solution":
            answers = solution_code(read(k.course / "solutions" / W / f"{W}.ipynb"))
            nbformat.write(fill_answers(read(notebook), answers), str(notebook))
        k.student(name, tokens[name], "nbgrader", "submit", W)

    with ThreadPoolExecutor(len(k.names)) as pool:
        for done in [pool.submit(fetch_and_submit, student, name) for student, name in k.names.items()]:
            done.result()
    lap("fetch and submit")

    # a student may not see the class's submissions
    status, body = hub.request("GET", f"/services/ngshare/submissions/{COURSE}/{W}", token=tokens[bo])
    assert status == 403, (status, body[:300])

    # the course account collects both and grades them
    k.instructor("nbgrader", "collect", W)
    assert sorted(p.name for p in (k.course / "submitted").iterdir()) == sorted(tokens), "collected"
    lap("collect")
    out = k.instructor("course", "grade", W, "--workers", "2", *sandbox.result())
    background.shutdown()
    lap("grade")
    assert "could not be graded" not in out, out
    for key, value in k.env.items():
        monkeypatch.setenv(key, value)
    scores = {r.student: sum(c.score for c in r.cells.values()) for r in read_scores(Course.open(k.course)) if r.assignment == W}
    assert scores == {ada: 2.0, bo: 0.0}, out[-2000:]
    assert not any(Path(k.env["NBGRADER_EXCHANGE"]).iterdir()), "a file went through the folder exchange"
    print(f"[ngshare] course, release, fetch, submit, collect and grade: {time.monotonic() - started:.1f} s")
    _semester_with_variants(k, tokens, monkeypatch, lap)


def _semester_with_variants(k: Class, tokens: dict[str, str], monkeypatch, lap) -> None:
    from nbgrader.api import Gradebook

    from course_grader.grading.variants import variant_seed
    from course_utils.variants import TABLE_FILE, visible_parameters

    from course_grader.grading.lms import parse_canvas
    from tests.helpers.lms import FakePlatform, rsa_key_pair

    ada, bo = (k.names[s] for s in STUDENTS)
    # a variant per student; the exchange's release of it (one folder for the class) through ngshare
    k.instructor("course", "release", V, "--variants", "--students", ada, bo)
    k.instructor("nbgrader", "release_assignment", V, "--CourseDirectory.release_directory=variant-release")
    lap("release with variants")
    db_url = k.env["COURSE_DB_URL"]
    seeds = {name: variant_seed(db_url, name, V) for name in (ada, bo)}
    solution = solution_code(read(k.course / "solutions" / V / f"{V}.ipynb"))
    for name in (ada, bo):  # both submit the course's solution: alike, so both are held
        k.student(name, tokens[name], "nbgrader", "fetch_assignment", V)
        folder = k.users.home(name) / V
        assert json.loads((folder / TABLE_FILE).read_text())["students"][name] == visible_parameters(seeds[name], V)
        shown = k.student(name, tokens[name], "python", "-c",
                          f"import os; os.chdir({str(folder)!r}); from course_utils import variants; print(variants.use_own({V!r}))")
        assert f"your variant ({name})" in shown, shown
        notebook = folder / f"{V}.ipynb"
        nbformat.write(fill_answers(read(notebook), solution), str(notebook))
        k.student(name, tokens[name], "nbgrader", "submit", V)
    lap("fetch (own variant shown) and submit")
    k.instructor("nbgrader", "collect", V)
    out = k.instructor("course", "grade", V, "--workers", "2", *_sandbox_args(k))
    assert "could not be graded" not in out, out
    lap("grade with variants")
    review = k.instructor("course", "review", V)
    assert f"HELD {ada}" in review and f"HELD {bo}" in review, review
    k.instructor("course", "review", V, ada, "--accept", "--reason", "the course's own solution, given in class")
    for key, value in k.env.items():
        monkeypatch.setenv(key, value)
    with Gradebook(db_url) as gradebook:  # the written answers graded by hand; the students' LMS ids
        for name in (ada, bo):
            gradebook.update_or_create_student(name, lms_user_id=f"lti-{name}")
            for grade in gradebook.find_submission_notebook(V, V, name).grades:
                if grade.needs_manual_grade:
                    grade.manual_score, grade.needs_manual_grade = 1.0, False
        gradebook.db.commit()
    k.users.chown(k.course, GRADER)
    scores = {(r.student, r.assignment): sum(c.score for c in r.cells.values()) for r in read_scores(Course.open(k.course))}
    assert scores[(ada, V)] == scores[(bo, V)] > 0, scores  # full marks but for the written answer, in each variant

    roster = k.course / "canvas-roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n" + "".join(
        f"{name},{i},S{i},{name},A\n" for i, name in enumerate((ada, bo), 1)))
    canvas = k.course / "canvas.csv"
    k.instructor("course", "export", "--format", "canvas", "--roster", str(roster), "--out", str(canvas))
    _, students = parse_canvas(canvas)
    assert students == {"S1": {W: scores[(ada, W)], V: scores[(ada, V)]}, "S2": {W: scores[(bo, W)], V: None}}, students

    private, public = rsa_key_pair()
    (k.course / "tool.pem").write_text(private)
    with FakePlatform(public) as lms:
        (k.course / "lms.json").write_text(json.dumps({
            "assignments": {a: {"name": a, "lineitem": f"{lms.url}/lineitems/{a}"} for a in (W, V)},
            "platform": {"client_id": lms.CLIENT_ID, "token_url": f"{lms.url}/token", "private_key_file": "tool.pem",
                         "kid": lms.KID}}))
        k.users.chown(k.course / "tool.pem", GRADER)
        k.instructor("course", "export", "--format", "lti-ags", "--lms-config", str(k.course / "lms.json"),
                     "--out", str(k.course / "ags.json"), "--post")
    assert not lms.refused, lms.refused
    got = {(item.rsplit("/", 1)[-1], s["userId"]): (s["gradingProgress"], s.get("scoreGiven")) for item, s in lms.scores}
    assert got == {(W, f"lti-{ada}"): ("FullyGraded", scores[(ada, W)]), (W, f"lti-{bo}"): ("FullyGraded", scores[(bo, W)]),
                   (V, f"lti-{ada}"): ("FullyGraded", scores[(ada, V)]), (V, f"lti-{bo}"): ("PendingManual", None)}, got
    lap("review, canvas and lti-ags")


def _sandbox_args(k: Class) -> list[str]:
    """Grade in the sandbox where it works for the course account."""
    check = k.users.run(GRADER, [sys.executable, "-c", "from course_grader.sandbox.bubblewrap import sandbox_problem as p; "
                                 "print(p() or '')"], k.course, k.env)
    return [] if check.returncode == 0 and not check.stdout.strip() else ["--no-sandbox"]
