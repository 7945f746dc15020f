"""The red team, graded through `course grade` in the sandbox, serially and in parallel.

One class per worker setting: an honest student; a blank one, the wrong-answer baseline (every
attacker's own answers are blank or ``catalogue.WRONG``, each of which fails a visible test); the
sandbox attacks of issue 17 on 00_welcome (read the gradebook or a classmate, rewrite grades, leak
the environment, leave a daemon, ...); and the red team of ``tests/attacks/catalogue.py`` on
00_welcome and 03_self_attention (both decided by the trusted checker): checks switched off through
aliases, an AST transformer, flagged code laundered through a file or a magic, the reference
implementation behind a switched-off profiler or pasted verbatim, and hidden-test leaks through
frames and ``gc``, printed plain, base64 and reversed and put in exception messages and reprs.

Whatever an attacker does:
- no score above the wrong-answer baseline reaches the export as *final* (held is fine: a held
  row has no score until the instructor decides);
- no hidden-test line is recoverable, plain, base64 or reversed, from any feedback page (held
  attackers get none; then they are accepted, as `course review A S --accept` does, and checked)
  or from any output of any autograded notebook;
- the honest classmate keeps full marks, is neither flagged nor held, and in the parallel run
  finishes within ``HONEST_SECONDS``;
- nobody reaches the gradebook, a classmate's files or the grader's environment, and no process
  outlives grading.

Cost: each attack has two spellings; the serial run grades spelling "a" of every attack and the
parallel run spelling "b", so each run holds every attack once (COURSE_RED_TEAM=full grades both
spellings in both runs). Every problem found is collected and reported together, one line each,
with the class's table (raw score, export status and score, flag rules) and the stage timings.
"""

from __future__ import annotations

import csv
import html
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from tests.attacks.catalogue import (
    A00,
    A03,
    ASSIGNMENTS,
    SPELLINGS,
    STAMP,
    Attack,
    attacks,
    recovered,
)
from course_grader.course import Course
from course_utils.cells import answer_cells, fill_answers, nbgrader_meta, read, solution_code
from course_grader.grading.feedback import hidden_lines
from course_grader.grading.scores import read_scores
from course_grader.authoring.mistakes import load_accepted
from course_grader.authoring.release import generate_release, prepare_scratch_course

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

MARKER = "course-attack-marker-7f3a"
SECRET = "grader-secret-5d1c"
BLANK_ANSWER = "def count_parameters(module):\n    return 0\n"
# attacks the sandbox cannot stop, or that name what they are doing: the scan must flag them.
# (The others -- reading or overwriting files through computed paths -- are stopped by the
# sandbox; a flag is welcome there but not required.)
# (So must the red team's spellings "a" of the AST transformer, the frame leak and the %%capture
# laundering: Attack.must_flag.)
MUST_FLAG = {"patch-checks", "rewrite-grades", "environment", "daemon"}  # (and Attack.must_flag below)
# The honest classmate's notebooks, from their first cell to their last, in the parallel run. On a
# quiet 2-core machine 03_self_attention takes 7 s (its cells and the checker's questions for its six
# test cells) and 00_welcome 3 s, serially and in parallel alike (measured); with the machine busy
# with other suites (load average 4-5) 10-15 s. In the parallel run two grading workers share the two
# cores with each other and, under `make test`, with a second pytest worker: about three busy
# processes per two cores. 60 s is 4x the worst time measured and 8x the quiet one, and half of the
# ci profile's 120-s cell limit, where a slowed honest notebook would start losing points: an
# attacker that stalls a classmate for longer fails this bound.
HONEST_SECONDS = 60.0
HONEST_SOFTMAX = "movedim to last axis and back"
FULL = os.environ.get("COURSE_RED_TEAM", "") == "full"


def _sandbox_missing() -> str | None:
    from course_grader.sandbox.bubblewrap import sandbox_problem

    return sandbox_problem()


def _sandbox_attacks(course: Path, answer: str) -> dict[str, str]:
    """student -> answer cell of 00_welcome. Each tries to get points it did not earn, or out of the sandbox."""
    gradebook = course / "gradebook.db"
    solutions = course / "solutions" / A00 / f"{A00}.ipynb"
    classmate = course / "submitted" / "honest" / A00 / f"{A00}.ipynb"
    return {
        # switch the checks off for the rest of the notebook
        "patch-checks": (
            "import course_utils.checks as c\n"
            "c.check = lambda *a, **k: None\n"
            "c.check_type = lambda *a, **k: None\n" + BLANK_ANSWER
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


def _with_cells(nb: nbformat.NotebookNode, cells: tuple[tuple[str | None, str], ...]) -> nbformat.NotebookNode:
    """``nb`` with code cells added before the answer cell ``before`` (``None``: at the end)."""
    nb = nbformat.from_dict(nb)
    for before, source in cells:
        index = len(nb.cells) if before is None else next(
            i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == before)
        nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def _light(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` without the instructor's figures, which no test needs (a student may delete any cell
    nbgrader does not restore): what every submission but the honest one sends, to keep the class
    cheaper to grade. (03's training run stays: it imports SelfAttentionHead for a later test, and
    an edited copy of it would be the student's own import of a reference.)"""
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and not nbgrader_meta(c) and "plt." in c.source
                                            and "optimiser" not in c.source)]
    return nb


def _build_class(course: Path, spellings: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], list[Attack]]:
    """Write every submission; return ``student -> assignments submitted`` and the red team."""
    prepare_scratch_course(ROOT, course, list(ASSIGNMENTS))
    generate_release(Course.open(course), list(ASSIGNMENTS), verbose=False, one_process=True)  # nbgrader starts once
    full_release = {a: read(course / "notebooks" / a / f"{a}.ipynb") for a in ASSIGNMENTS}
    release = {a: _light(nb) for a, nb in full_release.items()}
    solution = {a: solution_code(read(course / "solutions" / a / f"{a}.ipynb")) for a in ASSIGNMENTS}
    # the honest classmate writes 03's stable_softmax in a curated alternative style (the model answer is
    # the package's softmax, similarity 0.76: a canonical cell, compared between students only)
    solution[A03]["stable_softmax"] = next(alt.source for alt in load_accepted(ROOT, A03)
                                           if alt.name == HONEST_SOFTMAX)
    notebooks: dict[tuple[str, str], nbformat.NotebookNode] = {}
    for a in ASSIGNMENTS:
        honest = fill_answers(full_release[a], solution[a])  # the whole notebook, as a student sends it
        first_code = next(i for i, c in enumerate(honest.cells) if c.cell_type == "code")
        honest.cells.insert(first_code, nbformat.v4.new_code_cell(STAMP))
        honest.cells.append(nbformat.v4.new_code_cell(STAMP))
        notebooks[("honest", a)] = honest
        notebooks[("blank", a)] = release[a]
    for student, code in _sandbox_attacks(course, solution[A00]["count_parameters"]).items():
        notebooks[(student, A00)] = fill_answers(release[A00], {"count_parameters": code})
    red = attacks(spellings)
    for attack in red:
        for a, submission in attack.submissions.items():
            notebooks[(attack.student, a)] = _with_cells(fill_answers(release[a], submission.answers), submission.cells)
    submitted: dict[str, tuple[str, ...]] = {}
    for (student, a), nb in notebooks.items():
        folder = course / "submitted" / student / a
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(folder / f"{a}.ipynb"))
        submitted[student] = (*submitted.get(student, ()), a)
    return submitted, red


def _course(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SANDBOX"}  # always sandboxed
    env = dict(env, COURSE_ROOT=str(course), COURSE_PROFILE="ci", COURSE_CELL_TIMEOUT="30",
               GRADER_SECRET=SECRET)
    return subprocess.run([sys.executable, "-m", "course_utils.cli", *args], cwd=course, env=env,
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


def _public_lines(course: Path) -> set[str]:
    """Every line a student can read anyway: the release notebooks and the course_utils package
    (the sandboxed kernel imports it)."""
    lines = set()
    for path in sorted((course / "notebooks").glob("*/*.ipynb")):
        lines |= {line.strip() for c in read(path).cells for line in c.source.splitlines()}
    for path in sorted((ROOT / "src" / "course_utils").rglob("*.py")):
        lines |= {line.strip() for line in path.read_text().splitlines()}
    return lines


def _secret_lines(course: Path) -> list[str]:
    """The hidden tests' lines (``### BEGIN HIDDEN TESTS`` blocks of solutions/) that are long
    enough to mean something and appear nowhere public, not even inside a public line (a hidden
    ``equivariance_gap(head, x, perm)`` is in the visible ``gap = equivariance_gap(head, x, perm)``)."""
    sources = [c.source for a in ASSIGNMENTS for c in read(course / "solutions" / a / f"{a}.ipynb").cells
               if c.cell_type == "code"]
    public = "\n".join(" ".join(line.split()) for line in _public_lines(course))
    lines = sorted(line for line in hidden_lines(sources) if len(line) > 25 and " ".join(line.split()) not in public)
    assert len(lines) > 40, lines
    return lines


def _output_text(output: dict) -> str:
    """One output as text: what was printed, raised (name, message, traceback) or displayed."""
    parts = [str(output.get(key, "")) for key in ("text", "ename", "evalue")]
    parts += [str(line) for line in output.get("traceback", [])]
    parts += [value if isinstance(value, str) else repr(value) for value in (output.get("data") or {}).values()]
    return "\n".join(parts)


def _outputs(nb: nbformat.NotebookNode) -> str:
    """Every output of every cell, no source."""
    return "\n".join(_output_text(o) for cell in nb.cells for o in cell.get("outputs", []))


def _page_text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _stamps(nb: nbformat.NotebookNode) -> list[float]:
    return [float(m) for m in re.findall(r"STAMP (\d+\.\d+)", _outputs(nb))]


def _written_answers(course: Path, assignment: str) -> set[str]:
    """Grade ids of the answers a person grades (markdown answer cells): always waiting for a person."""
    nb = read(course / "solutions" / assignment / f"{assignment}.ipynb")
    return {nbgrader_meta(c)["grade_id"] for c in answer_cells(nb) if c.cell_type == "markdown"}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_attack_class_gains_nothing_unflagged_and_leaks_nothing(tmp_path, workers):
    """(Named as before the red team grew, so that tests/durations.json still schedules it early; a
    flagged submission is now held: "unflagged" reads "final".)"""
    missing = _sandbox_missing()
    if missing:
        pytest.skip(f"no sandbox: {missing}")
    course = tmp_path / "course"
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(stage: str) -> None:
        timings[stage] = round(time.perf_counter() - started - sum(timings.values()), 1)

    spellings = SPELLINGS if FULL else (SPELLINGS[0],) if workers == "1" else (SPELLINGS[1],)
    submitted, red = _build_class(course, spellings)
    lap("release and class")
    result = _course("grade", *ASSIGNMENTS, "--workers", workers, course=course)
    report = result.stdout + result.stderr
    lap("grade")
    assert result.returncode == 0, report[-4000:]
    problems: list[str] = []  # every way the class was not survived, reported together

    # -- the checker's (raw, autograded) scores; the honest student, the baselines
    raw = {(r.assignment, r.student): r for r in read_scores(Course.open(course))}
    assert {(a, s) for s, submitted_to in submitted.items() for a in submitted_to} <= set(raw), report[-3000:]
    baseline = {}
    for a in ASSIGNMENTS:
        honest = raw[(a, "honest")]
        assert honest.score == honest.auto_max_score > 0, f"honest lost points in {a}: {honest.cells}\n{report[-3000:]}"
        assert raw[(a, "blank")].score == 0, f"blank scored in {a}: {raw[(a, 'blank')].cells}"
        # the attackers' own answers are blank or wrong (each WRONG answer fails a visible test, so
        # without an attack it scores what blank scores): a point above blank's is a point gained
        baseline[a] = raw[(a, "blank")].score
    for (a, student), row in raw.items():  # nobody reached the gradebook: no manual score appeared
        if set(row.needs_manual_grade) - _written_answers(course, a) or any(
                c.score > c.max_score for c in row.cells.values()):
            problems.append(f"{student} / {a}: the gradebook changed: {row.cells}")

    # -- the export: no attacker's score above the baseline is final
    out = tmp_path / "grades.csv"
    exported = _course("export", "--out", str(out), course=course)
    assert exported.returncode == 0, exported.stderr[-3000:]
    rows = {(r["assignment"], r["student"]): r for r in csv.DictReader(out.open())}
    lap("export")
    for a in ASSIGNMENTS:
        for student in ("honest", "blank"):
            row = rows[(a, student)]
            assert not row["flags"], f"{student} / {a} must not be flagged: {row['flags']}"
            assert row["status"] == "final", f"{student} / {a} must not be held: {row}"
        assert float(rows[(a, "honest")]["score"]) == raw[(a, "honest")].score
    must_flag = {attack.student for attack in red if attack.must_flag}
    held: list[tuple[str, str]] = []
    lines = []  # the red team's table: raw score, export status and score, flag rules
    for (a, student), row in sorted(rows.items()):
        if student in ("honest", "blank"):
            continue
        rules = sorted(set(re.findall(r"\[([a-z-]+)\]", row["flags"])))
        lines.append(f"{student:18} {a:18} raw {raw[(a, student)].score:4g}  {row['status']:5} {row['score'] or '-':>4}  "
                     f"{','.join(rules) or '-'}")
        if row["status"] == "held":
            assert row["score"] == "" and all(row[k] == "" for k in row if k.startswith(f"{a}:")), row
            held.append((a, student))
        elif float(row["score"]) > baseline[a]:
            gained = {k.split(":", 1)[1]: v for k, v in row.items() if k.startswith(f"{a}:") and v not in ("", "0")}
            problems.append(f"GAIN {student} / {a}: final {row['score']} > baseline {baseline[a]:g}, cells {gained}")
        if (student in MUST_FLAG or student in must_flag) and not row["flags"]:
            problems.append(f"{student} / {a} should be flagged for the instructor")
    table = "\n".join(lines)

    # -- the sandbox (00_welcome)
    def output_of(student: str, a: str = A00) -> str:
        return _outputs(read(course / "autograded" / student / a / f"{a}.ipynb"))

    assert "READ" not in output_of("read-private") and output_of("read-private").count("BLOCKED") == 4
    for private in (course / "gradebook.db", course / "submitted" / "honest" / A00 / f"{A00}.ipynb"):
        assert f"BLOCKED {private} FileNotFoundError" in output_of("read-private"), "the course is not even visible"
    cwd = next(line for line in output_of("read-private").splitlines() if line.startswith("CWD "))
    assert cwd.startswith(f"CWD {tempfile.gettempdir()}/course-sandbox-") and f"{A00}.ipynb" in cwd, \
        f"the kernel runs in a private copy of its notebook: {cwd}"
    assert "WROTE" not in output_of("rewrite-grades") and "BLOCKED" in output_of("rewrite-grades")
    assert "TAMPERED" not in output_of("tamper-classmate")
    assert SECRET not in output_of("environment") and "ENV" in output_of("environment")
    assert read(course / "submitted" / "honest" / A00 / f"{A00}.ipynb").cells, "the classmate's notebook is intact"
    assert not _surviving_processes(), "a process started by a submission outlived grading"

    # -- the honest classmate's time
    honest_seconds = {}
    for a in ASSIGNMENTS:
        stamps = _stamps(read(course / "autograded" / "honest" / a / f"{a}.ipynb"))
        assert len(stamps) == 2, f"the honest notebook of {a} did not run to its end: {stamps}"
        honest_seconds[a] = round(stamps[1] - stamps[0], 1)
        if workers != "1" and honest_seconds[a] > HONEST_SECONDS:
            problems.append(f"honest / {a} took {honest_seconds[a]:g} s beside the attackers (> {HONEST_SECONDS:g} s)")
    table += f"\nhonest notebooks, first to last cell (s): {honest_seconds}"

    # -- feedback: none for a held submission; accepted, no hidden line in any form
    for a in ASSIGNMENTS:  # asked for the held ones alone: each is refused, and nbgrader never runs
        on_hold = [student for held_a, student in held if held_a == a]
        if not on_hold:
            continue
        said = _course("feedback", a, *(f"--student={s}" for s in on_hold), course=course)
        assert said.returncode == 0, said.stdout[-2000:] + said.stderr[-2000:]
        for student in on_hold:
            assert f"{a}: no feedback for {student}: held" in said.stdout, said.stdout[-3000:]
            assert not (course / "feedback" / student / a).exists(), f"{student} / {a} is held but has feedback"
    from course_grader.grading.review import decide

    for a, student in held:  # what `course review A S --accept` records
        decide(Course.open(course), a, student, "accept", reason="red team: feedback must stay clean", by="test_attacks")
    said = _course("feedback", *ASSIGNMENTS, course=course)
    assert said.returncode == 0, said.stdout[-2000:] + said.stderr[-2000:]
    lap("feedback, review --accept, feedback")
    secret = _secret_lines(course)
    for student, submitted_to in sorted(submitted.items()):
        for a in submitted_to:
            page = course / "feedback" / student / a / f"{a}.html"
            assert page.is_file(), f"no feedback for {student} / {a} (accepted or never held)"
            leaked = recovered(secret, _page_text(page))
            if leaked:
                problems.append(f"LEAK feedback of {student} / {a}: {len(leaked)} hidden line(s), e.g. {leaked[0]!r}")
            leaked = recovered(secret, output_of(student, a))
            if leaked:
                problems.append(f"LEAK autograded outputs of {student} / {a}: {len(leaked)} hidden line(s), "
                                f"e.g. {leaked[0]!r}")

    # -- the attacks did what they meant to (else the checks above prove nothing): those that switch
    # the kernel's checks off reached the checker, which recorded a verdict for every test cell
    for attack in red:
        for a in attack.submissions if attack.fools_kernel else ():
            nb = read(course / "autograded" / attack.student / a / f"{a}.ipynb")
            unjudged = [nbgrader_meta(c)["grade_id"] for c in nb.cells
                        if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")
                        and "course_checker" not in c.get("metadata", {})]
            assert not unjudged, f"{attack.student} / {a}: no verdict recorded for {unjudged}"
    # the leakers ran, and what they planted decodes (so the leak checks above prove something)
    visible = {a: sorted({line.strip() for c in read(course / "notebooks" / a / f"{a}.ipynb").cells
                          if nbgrader_meta(c).get("grade") for line in c.source.splitlines()
                          if len(line.strip()) > 25}) for a in ASSIGNMENTS}
    for attack in red:
        if not attack.plants_leaks:
            continue
        for a in attack.submissions:
            text = output_of(attack.student, a)
            for form in ("LEAK-B64 ", "LEAK-REV "):
                planted = "\n".join(part.split("LEAK-", 1)[0] for part in text.split(form)[1:])
                assert recovered(visible[a], planted), \
                    f"{attack.student} / {a}: its {form.strip()} output decodes to no visible test line: the leak did not run"
            nb = read(course / "autograded" / attack.student / a / f"{a}.ipynb")
            if attack.channel == "exception":  # issue 33: a test cell keeps no error of the kernel's
                carried = [nbgrader_meta(c).get("grade_id") for c in nb.cells for o in c.get("outputs", [])
                           if o.get("output_type") == "error" and "LEAK-B64" in _output_text(o)]
                if carried:
                    problems.append(f"LEAK {attack.student} / {a}: the kernel's exception message reached {carried}")
            else:
                assert any(o.get("output_type") == "execute_result" and "LEAK-B64" in _output_text(o)
                           for c in nb.cells for o in c.get("outputs", [])), \
                    f"{attack.student} / {a}: nothing planted reached an output through its {attack.channel}"

    # issue 33: what the kernel raises while the tests run it reaches the student as its type and a fixed
    # sentence, never its text (a CheckFailed of the kernel's is not a check message); the code of what
    # the tests hand it never enters the kernel at all
    for attack in red:
        if attack.attack != "test-source":
            continue
        text = output_of(attack.student, A03)
        assert "your code raised" in text, f"{attack.student}: the spy never reached the checker: the test proves nothing"
        said = re.compile(r"LEAK-ZB64 [A-Za-z0-9+/]{16,}")  # what it raised (its source, shown in feedback, has none)
        if said.search(text):
            problems.append(f"LEAK {attack.student}: the kernel's own message reached the graded outputs")
        if said.search(_page_text(course / "feedback" / attack.student / A03 / f"{A03}.html")):
            problems.append(f"LEAK {attack.student}: the kernel's own message reached the feedback")
    lap("leak checks")
    print(f"red team, workers {workers}, spellings {spellings}:\n{table}\ntimings (s): {timings}")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems) + "\n\nstudent / assignment / raw / " \
        f"export / rules:\n{table}\ntimings (s): {timings}"
