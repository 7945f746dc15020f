"""An adversarial class, graded through `course grade` in the sandbox, serially and in parallel.

One student per kind of attack an instructor must survive (issue 17), beside two honest
students. Whatever an attacker does, it must either gain no points or be flagged; no
honest student's grade may move; no hidden-test line may reach any feedback; a
submission that opens the gradebook gets an error; and no process outlives grading.
"""

from __future__ import annotations

import csv
import html
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_utils.tooling.cells import fill_answers, read, solution_code
from course_utils.tooling.grading import read_scores
from course_utils.tooling.release import generate_release, prepare_scratch_course

from conftest import ROOT

pytestmark = pytest.mark.slow

A = "00_welcome"
TEST = "test_count_parameters"
MARKER = "course-attack-marker-7f3a"
SECRET = "grader-secret-5d1c"
BLANK_ANSWER = "def count_parameters(module):\n    return 0\n"
# attacks the sandbox cannot stop, or that name what they are doing: the scan must flag them.
# (The others -- reading or overwriting files through computed paths -- are stopped by the
# sandbox; a flag is welcome there but not required.)
MUST_FLAG = {"patch-checks", "ast-transformer", "rewrite-grades", "environment", "daemon", "leak-hidden"}


def _sandbox_missing() -> str | None:
    from course_utils.tooling.sandbox import sandbox_problem

    return sandbox_problem()


def _attacks(course: Path, answer: str) -> dict[str, str]:
    """student -> code of the answer cell. Each tries to get points it did not earn."""
    gradebook = course / "gradebook.db"
    solutions = course / "solutions" / A / f"{A}.ipynb"
    classmate = course / "submitted" / "honest" / A / f"{A}.ipynb"
    return {
        # switch the checks off for the rest of the notebook
        "patch-checks": (
            "import course_utils.checks as c\n"
            "c.check = lambda *a, **k: None\n"
            "c.check_type = lambda *a, **k: None\n" + BLANK_ANSWER
        ),
        # wrap every later cell in try/except
        "ast-transformer": (
            "import ast\n"
            "class Swallow(ast.NodeTransformer):\n"
            "    def visit_Module(self, node):\n"
            "        handler = ast.ExceptHandler(type=ast.Name('BaseException', ast.Load()), name=None, body=[ast.Pass()])\n"
            "        node.body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])]\n"
            "        return ast.fix_missing_locations(node)\n"
            "get_ipython().ast_transformers.append(Swallow())\n" + BLANK_ANSWER
        ),
        # read the gradebook (every hidden test), the solutions and a classmate's work; and say
        # where it runs (a private copy of its own notebook, not the course)
        "read-private": (
            "import os\n"
            "print('CWD', os.getcwd(), os.listdir('.'))\n"
            "for path in [%r, %r, %r, '../../../gradebook.db']:\n"
            "    try:\n"
            "        print('READ', path, len(open(path, 'rb').read()))\n"
            "    except Exception as error:\n"
            "        print('BLOCKED', path, type(error).__name__)\n" % (str(gradebook), str(solutions), str(classmate))
            + BLANK_ANSWER
        ),
        # give itself and others full marks in the gradebook
        "rewrite-grades": (
            "import sqlite3\n"
            "try:\n"
            "    db = sqlite3.connect(%r)\n"
            "    db.execute('update grade set manual_score = 100')\n"
            "    db.commit()\n"
            "    print('WROTE gradebook')\n"
            "except Exception as error:\n"
            "    print('BLOCKED', type(error).__name__)\n" % str(gradebook)
            + BLANK_ANSWER
        ),
        # leak the grader's environment into its own output
        "environment": "import os\nprint('ENV', dict(os.environ))\n" + BLANK_ANSWER,
        # leave a process behind, in a new session and double-forked
        "daemon": (
            "import os, subprocess\n"
            f"subprocess.Popen(['sleep', '600', '{MARKER}'], start_new_session=True)\n"
            "if os.fork() == 0:\n"
            "    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '601', '{MARKER}'])\n"
            "    os._exit(0)\n" + answer
        ),
        # print the hidden tests from the test cell's frame and from IPython's history
        "leak-hidden": (
            "import sys\n"
            "def count_parameters(module):\n"
            "    frame = sys._getframe(1)\n"
            "    print('LEAK', frame.f_globals.get('_ih', [])[-1])\n"
            "    return sum(p.numel() for p in module.parameters() if p.requires_grad)\n"
        ),
        # overwrite a classmate's submission (parallel grading shares a machine)
        "tamper-classmate": (
            "import json\n"
            "try:\n"
            "    open(%r, 'w').write('{}')\n"
            "    print('TAMPERED')\n"
            "except Exception as error:\n"
            "    print('BLOCKED', type(error).__name__)\n" % str(classmate) + BLANK_ANSWER
        ),
    }


def _build_class(course: Path) -> dict[str, str]:
    prepare_scratch_course(ROOT, course, [A])
    generate_release(course, [A], verbose=False)
    release = read(course / "notebooks" / A / f"{A}.ipynb")
    answer = solution_code(read(course / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    students = {"honest": answer, "blank": None, **_attacks(course, answer)}
    for student, code in students.items():
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True, exist_ok=True)
        nb = release if code is None else fill_answers(release, {"count_parameters": code})
        if student == "leak-hidden":  # a cell after the test cell prints the input history
            nb = nbformat.from_dict(nb)
            nb.cells.append(nbformat.v4.new_code_cell("print('HISTORY', In)"))
        nbformat.write(nb, str(folder / f"{A}.ipynb"))
    return students


def _course(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SANDBOX"}  # always sandboxed
    env = dict(env, COURSE_ROOT=str(course), COURSE_PROFILE="ci", COURSE_CELL_TIMEOUT="30",
               GRADER_SECRET=SECRET)
    return subprocess.run([sys.executable, "-m", "course_utils.tooling.cli", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=1200)


def _surviving_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if MARKER in cmdline and "pytest" not in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


def _hidden_lines(course: Path) -> list[str]:
    source = read(course / "solutions" / A / f"{A}.ipynb")
    lines = []
    for cell in source.cells:
        text = cell.source
        if "### BEGIN HIDDEN TESTS" in text:
            hidden = text.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
            lines += [line.strip() for line in hidden.splitlines() if len(line.strip()) > 25]
    assert lines
    return lines


@pytest.mark.parametrize("workers", ["1", "2"])
def test_attack_class_gains_nothing_unflagged_and_leaks_nothing(tmp_path, workers):
    missing = _sandbox_missing()
    if missing:
        pytest.skip(f"no sandbox: {missing}")
    course = tmp_path / "course"
    students = _build_class(course)
    result = _course("grade", A, "--workers", workers, course=course)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]

    scores = {r.student: r for r in read_scores(course) if r.assignment == A}
    assert scores["honest"].score == 2 and scores["blank"].score == 0, report[-3000:]
    for row in scores.values():  # nobody reached the gradebook: no manual score appeared
        assert not row.needs_manual_grade, f"{row.student} changed the gradebook"

    out = tmp_path / "grades.csv"
    assert _course("export", "--out", str(out), course=course).returncode == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert not rows["honest"]["flags"] and not rows["blank"]["flags"], "honest code must not be flagged"
    for student in students:
        if student in ("honest", "blank"):
            continue
        gained = float(rows[student]["score"]) > 0
        assert not gained or rows[student]["flags"], f"{student} gained points without a flag: {rows[student]}"
        if student in MUST_FLAG:
            assert rows[student]["flags"], f"{student} should be flagged for the instructor"

    def output_of(student: str) -> str:
        nb = read(course / "autograded" / student / A / f"{A}.ipynb")
        return "\n".join(str(o.get("text", "")) + str(o.get("evalue", "")) for c in nb.cells for o in c.get("outputs", []))

    assert "READ" not in output_of("read-private") and output_of("read-private").count("BLOCKED") == 4
    for private in (course / "gradebook.db", course / "submitted" / "honest" / A / f"{A}.ipynb"):
        assert f"BLOCKED {private} FileNotFoundError" in output_of("read-private"), "the course is not even visible"
    cwd = next(line for line in output_of("read-private").splitlines() if line.startswith("CWD "))
    assert cwd.startswith(f"CWD {tempfile.gettempdir()}/course-sandbox-") and f"{A}.ipynb" in cwd, \
        f"the kernel runs in a private copy of its notebook: {cwd}"
    assert "WROTE" not in output_of("rewrite-grades") and "BLOCKED" in output_of("rewrite-grades")
    assert "TAMPERED" not in output_of("tamper-classmate")
    assert SECRET not in output_of("environment") and "ENV" in output_of("environment")
    assert read(course / "submitted" / "honest" / A / f"{A}.ipynb").cells, "the classmate's notebook is intact"
    assert not _surviving_processes(), "a process started by a submission outlived grading"

    assert _course("feedback", A, course=course).returncode == 0
    hidden = _hidden_lines(course)
    for student in students:
        page = (course / "feedback" / student / A / f"{A}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"hidden test source reached {student}'s feedback: {leaked[:2]}"
