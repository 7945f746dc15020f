"""A student in a real browser, on a real JupyterHub configured by deploy/jupyterhub/.

Chromium is the Debian package (`make setup` installs it: .ci/install-hub-tools), driven by
playwright from PyPI with ``executable_path``: no browser build is ever downloaded. The hub is
started as in tests/test_hub_semester.py (tests/hubclass.py). The course account releases 00_welcome
through the exchange (the committed release in notebooks/, so no generate step is repeated here).

The student, in the browser: logs in (the dummy authenticator), fetches 00_welcome from the
Assignments tab, opens it in JupyterLab on the kernel "Python 3 (attention-course)", types the
answer, runs the notebook and sees "Visible tests passed.", validates it with nbgrader's Validate
button and submits it from the Assignments tab. The course account then sees the submission in the
exchange (`nbgrader list --inbound`). Screenshots of each step go to build/browser/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from course_utils.tooling.cells import read, solution_code
from course_utils.tooling.release import prepare_scratch_course

from conftest import ROOT
from hubclass import COURSE, GRADER, Hub, Users, missing_hub_tools, open_folder

if missing_hub_tools():
    pytest.skip(missing_hub_tools(), allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) is not installed: pip install -e .[dev]")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
if CHROMIUM is None:
    note = ROOT / ".venv" / ".hub-tools-missing"
    pytest.skip("no chromium on PATH" + (f" ({note.read_text().strip()})" if note.is_file() else "")
                + ": `make setup` installs the Debian package (.ci/install-hub-tools)", allow_module_level=True)

pytestmark = pytest.mark.slow

A = "00_welcome"
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
        users.chown(users.home(hub.student) / ".jupyter", hub.student)
        hub.inbound = lambda: users.run(GRADER, [*nbgrader, "list", "--inbound"], course, env)
        yield hub
    finally:
        leftovers = []
        if hub is not None:
            hub.stop()
            leftovers = hub.leftovers()
        leftovers += users.leftover_processes()
        users.remove()
        shutil.rmtree(scratch, ignore_errors=True)
        assert not leftovers, "still running after the hub stopped:\n" + "\n".join(leftovers)


def test_a_student_in_the_browser(hub):
    student = hub.student
    answer = solution_code(read(ROOT / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
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

            # 2. fetch 00_welcome from the Assignments tab (nbgrader's lab extension)
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

            # 4. type the answer into the answer cell (inserted as text: no auto-indent or brackets)
            cell = page.locator(".jp-CodeCell").filter(has_text="raise NotImplementedError()").first
            cell.locator(".cm-content").click()
            page.keyboard.press("Control+a")
            page.keyboard.insert_text(answer)
            shot("answer")

            # 5. run the whole notebook: the visible test says it passed
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            passed = page.locator(".jp-OutputArea-output", has_text="Visible tests passed.")
            passed.wait_for(timeout=120_000)
            idle()
            passed.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # the notebook renders the cells it scrolled to
            shot("visible_tests_passed")

            # 6. saved, then nbgrader's Validate button
            page.keyboard.press("Control+s")
            page.locator(".jp-mod-current.jp-mod-dirty").wait_for(state="detached")
            page.get_by_role("button", name="Validate").click()
            dialog = page.locator(".jp-Dialog")
            dialog.wait_for(timeout=120_000)
            dialog.get_by_text(re.compile("Success|passes all the tests", re.I)).wait_for(timeout=120_000)
            shot("validated")
            dialog.get_by_role("button").last.click()

            # 7. submit from the Assignments tab
            page.get_by_role("menuitem", name="Nbgrader").click()
            page.get_by_text("Assignment List").click()
            fetched = page.locator("#fetched_assignments_list")
            fetched.get_by_role("button", name="Submit").click()
            page.locator("#submitted_assignments_list").get_by_text(A).first.wait_for()
            shot("submitted")
        except Exception:
            shot("failure")
            raise
        finally:
            browser.close()

    # 8. the instructor's side: the submission is in the exchange, under the student's name
    inbound = hub.inbound()
    assert inbound.returncode == 0 and f"{COURSE} {student} {A}" in inbound.stdout + inbound.stderr, inbound
    hub.api("DELETE", f"/hub/api/users/{student}/server")
