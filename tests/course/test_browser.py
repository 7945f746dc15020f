"""A student and the instructor in a real browser, on a real JupyterHub configured by deploy/jupyterhub/.

Chromium is the Debian package (`make setup` installs it: .ci/install-hub-tools), driven by
playwright from PyPI with ``executable_path``: no browser build is ever downloaded. The hub is
started as in tests/course/test_hub_semester.py (tests/hubclass.py). The course account releases
03_self_attention through the exchange (the committed release in notebooks/, so no generate step is
repeated here).

The student, in the browser: logs in (the dummy authenticator), fetches 03_self_attention from the
Assignments tab, opens it in JupyterLab on the kernel "Python 3 (attention-course)", types the
answers, runs the cells up to the first test cell and sees "Visible tests passed." there, validates
the notebook with nbgrader's Validate button and submits it from the Assignments tab. The course
account collects it (`nbgrader collect`), and the instructor, logged in through the hub, sees the
student's submission on the formgrader's Manage Submissions page. Screenshots of each step go to
build/browser/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

import pytest

from course_utils.cells import answer_cells, nbgrader_meta, read, solution_code
from course_grader.authoring.release import prepare_scratch_course

from tests.conftest import ROOT
from tests.hubclass import COURSE, GRADER, Hub, Users, missing_hub_tools, open_folder, shut_down

if missing_hub_tools():
    pytest.skip(missing_hub_tools(), allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) is not installed: pip install -e .[dev]")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
if CHROMIUM is None:
    note = ROOT / ".venv" / ".hub-tools-missing"
    pytest.skip("no chromium on PATH" + (f" ({note.read_text().strip()})" if note.is_file() else "")
                + ": `make setup` installs the Debian package (.ci/install-hub-tools)", allow_module_level=True)

pytestmark = pytest.mark.slow

A = "03_self_attention"
FIRST_TEST = '# "The big dog": queries = keys = X'  # the opening of test_scaled_scores
SHOTS = ROOT / "build" / "browser"
KERNEL = "Python 3 (attention-course)"


@pytest.fixture(scope="module")
def hub():
    scratch = open_folder(Path(tempfile.mkdtemp(prefix="course-browser-")))
    users = Users(scratch)
    hub = None
    try:
        users.add(GRADER)
        course = prepare_scratch_course(ROOT, open_folder(scratch / "course"), [A])
        shutil.copy2(ROOT / "deploy" / "jupyterhub" / "nbgrader_config.py", course / "nbgrader_config.py")
        shutil.copytree(ROOT / "notebooks" / A, course / "notebooks" / A)
        users.chown(course, GRADER)
        exchange = scratch / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "COURSE_BASE_CONFIG": str(ROOT / "nbgrader_config.py"),
            "COURSE_ROOT": str(course),
            "COURSE_DB_URL": f"sqlite:///{course}/gradebook.db",  # one grader here: sqlite will do
            "NBGRADER_EXCHANGE": str(exchange),
            "COURSE_PROFILE": "ci",
        }
        hub = Hub(scratch / "hub", users, env)
        nbgrader = [str(Path(sys.executable).parent / "nbgrader")]
        released = users.run(GRADER, [*nbgrader, "release_assignment", A], course, env)
        assert released.returncode == 0, released.stdout[-2000:] + released.stderr[-2000:]
        hub.student = users.add(f"cy{os.getpid() % 100000}")
        # no "Jupyter news?" toast over the screenshots
        settings = users.home(hub.student) / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        # every cell in the page (no windowing): the test finds the answer cells by their text
        tracker = settings.parent / "notebook-extension"
        tracker.mkdir()
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        users.chown(users.home(hub.student) / ".jupyter", hub.student)
        hub.collect = lambda: users.run(GRADER, [*nbgrader, "collect", A], course, env)
        yield hub
    finally:
        leftovers = shut_down(hub, users)
        shutil.rmtree(scratch, ignore_errors=True)
        assert not leftovers, "still running after the hub stopped:\n" + "\n".join(leftovers)


def test_a_student_in_the_browser(hub):
    student = hub.student
    answers = solution_code(read(ROOT / "solutions" / A / f"{A}.ipynb"))
    release = list(answer_cells(read(ROOT / "notebooks" / A / f"{A}.ipynb")))
    answer_ids = [nbgrader_meta(c)["grade_id"] for c in release]
    code_answers = {nbgrader_meta(c)["grade_id"] for c in release if c.cell_type == "code"}
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    step = iter(range(1, 100))

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)

        def shot(name: str) -> None:
            page.screenshot(path=str(SHOTS / f"{next(step):02d}_{name}.png"))

        def idle() -> None:
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=120_000)

        def run_menu(item: str) -> None:
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text(item, exact=True).click()

        try:
            # 1. log in (the dummy authenticator takes any password); the hub starts the server
            page.goto(hub.url + "/hub/login")
            page.fill("input[name=username]", student)
            page.fill("input[name=password]", "any")
            shot("login")
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url(re.compile(rf"/user/{student}/lab"), timeout=120_000)
            page.locator(".jp-LauncherCard").first.wait_for()
            shot("lab")

            # 2. fetch 03 from the Assignments tab (nbgrader's lab extension)
            page.get_by_role("menuitem", name="Nbgrader").click()
            page.get_by_text("Assignment List").click()
            released = page.locator("#released_assignments_list")
            released.get_by_text(A).first.wait_for()
            shot("assignments")
            released.get_by_role("button", name="Fetch").click()
            fetched = page.locator("#fetched_assignments_list")
            fetched.get_by_text(A).first.wait_for()
            shot("fetched")

            # 3. open it on the course kernel
            page.goto(f"{hub.url}/user/{student}/lab/tree/{A}/{A}.ipynb")
            page.locator(".jp-Notebook").wait_for()
            page.locator(".jp-Toolbar-kernelName", has_text=KERNEL).wait_for()
            idle()
            shot("notebook")

            # 4. type the answers, in order: each code answer into the cell that still raises
            #    NotImplementedError, the written answer into the Markdown cell that still says
            #    YOUR ANSWER HERE (inserted as text: no auto-indent or brackets)
            for number, grade_id in enumerate(answer_ids):
                if grade_id in code_answers:
                    cell = page.locator(".jp-CodeCell").filter(has_text="raise NotImplementedError()").first
                else:
                    cell = page.locator(".jp-MarkdownCell").filter(has_text="YOUR ANSWER HERE").first
                    cell.dblclick()  # a rendered Markdown cell opens its editor
                cell.locator(".cm-content").click()
                page.keyboard.press("Control+a")
                page.keyboard.insert_text(answers[grade_id])
                if grade_id not in code_answers:
                    page.keyboard.press("Shift+Enter")  # rendered again
                if number == 0:
                    shot("answer")
            shot("answers")

            # 5. run the cells above the first test cell, then the test cell: its visible test passed
            test = page.locator(".jp-CodeCell").filter(has_text=FIRST_TEST).first
            test.locator(".cm-content").click()
            run_menu("Run All Above Selected Cell")
            run_menu("Run Selected Cell")
            passed = test.locator(".jp-OutputArea-output", has_text="Visible tests passed.")
            passed.wait_for(timeout=120_000)
            idle()
            passed.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # the notebook renders the cells it scrolled to
            shot("visible_tests_passed")

            # 6. saved, then nbgrader's Validate button (it runs the whole notebook)
            page.keyboard.press("Control+s")
            page.locator(".jp-mod-current.jp-mod-dirty").wait_for(state="detached")
            page.get_by_role("button", name="Validate").click()
            dialog = page.locator(".jp-Dialog")
            dialog.wait_for(timeout=240_000)
            shot("validated")
            assert re.search("Success|passes all the tests", dialog.inner_text(), re.I), dialog.inner_text()
            dialog.get_by_role("button").last.click()

            # 7. submit from the Assignments tab
            page.get_by_role("menuitem", name="Nbgrader").click()
            page.get_by_text("Assignment List").click()
            fetched = page.locator("#fetched_assignments_list")
            fetched.get_by_role("button", name="Submit").click()
            page.locator("#submitted_assignments_list").get_by_text(A).first.wait_for()
            shot("submitted")

            # 8. the course account collects it; the instructor logs in (a browser session of their own)
            #    and sees the submission on the formgrader's Manage Submissions page
            collected = hub.collect()
            assert collected.returncode == 0 and student in collected.stdout + collected.stderr, collected
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            manage = f"/services/{COURSE}/formgrader/manage_submissions/{A}"
            page.goto(hub.url + "/hub/login?" + urllib.parse.urlencode({"next": manage}))
            page.fill("input[name=username]", "instructor")
            page.fill("input[name=password]", "any")
            page.click("input[type=submit], button[type=submit]")
            authorize = page.get_by_role("button", name=re.compile("Authorize", re.I))
            page.wait_for_url(re.compile(r"/formgrader/manage_submissions/|/oauth2/authorize"))
            if "/oauth2/authorize" in page.url:  # the hub asks the instructor to let the formgrader in
                shot("instructor_authorizes_formgrader")
                authorize.click()
            page.wait_for_url(re.compile(rf"/formgrader/manage_submissions/{A}"))
            page.locator("table").get_by_text(student).first.wait_for()
            shot("instructor_sees_submission")
        except Exception:
            shot("failure")
            raise
        finally:
            browser.close()

    hub.api("DELETE", f"/hub/api/users/{student}/server")
