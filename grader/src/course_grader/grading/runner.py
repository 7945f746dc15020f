"""Run nbgrader in a subprocess, in a given course directory, the way the course needs it.

A subprocess keeps nbgrader's logging, its database session and any crash away from the
caller. The environment's ``bin`` goes on PATH (nbgrader shells out to ``alembic``), and
``COURSE_PROFILE`` is the grading profile (``ci`` unless the caller says otherwise: a
``COURSE_PROFILE`` left in the instructor's shell does not change what is graded).

:func:`autograde_students` grades through nbgrader's Python API instead of its command
line: one subprocess calls ``NbGraderAPI.autograde`` once per student and writes each
student's ``success``/``error``/``log`` as one JSON line, so every outcome belongs to the
student it was produced for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from course_grader.course import GradingSettings

DEFAULT_SETTINGS = GradingSettings()  # profile ci, sandboxed

__all__ = [
    "NbgraderError",
    "PIPELINE_ENV",
    "grading_env",
    "run_nbgrader",
    "write_course_config",
    "autograde_students",
]


# nbgrader imports jsonschema, which builds an RFC 3987 grammar at import (2-5 s of every
# nbgrader process) when the optional rfc3987_syntax is installed, only to check the "iri"
# string format, which no nbgrader or notebook schema uses. A None entry in sys.modules makes
# that optional import fail fast. And a new gradebook gets its schema revision in-process
# (course_grader.grading.gradebook.fast_gradebook_creation), not from an `alembic heads`
# subprocess. `python -m nbgrader ARGS`, without those costs:
NBGRADER_MAIN = ("import sys; sys.modules.setdefault('rfc3987_syntax', None); sys.argv[0] = 'nbgrader'; "
                 "from course_grader.grading.gradebook import fast_gradebook_creation; fast_gradebook_creation(); "
                 "from nbgrader.apps.nbgraderapp import main; main()")


# Set in the environment of every nbgrader process the pipeline starts; the execute step marks the
# autograded notebook with it (course_grader.sandbox.execute.PIPELINE_MARK). A notebook autograded
# without it (the formgrader's Autograde button runs nbgrader directly) is held until `course grade`
# grades it: only the pipeline scans it, compares it and writes its manual-grading views.
PIPELINE_ENV = "COURSE_GRADE_PIPELINE"


class NbgraderError(RuntimeError):
    """nbgrader exited non-zero; the message carries the end of its log."""


def grading_env(settings: GradingSettings = DEFAULT_SETTINGS, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for nbgrader and the kernels it starts: this process's, with the grading
    ``settings`` written into it (the one place they become environment)."""
    env = settings.environment(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env[PIPELINE_ENV] = "1"  # graded by `course grade`'s pipeline (not the formgrader's own button)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("MPLBACKEND", "Agg")
    if extra:
        env.update(extra)
    return env


def run_nbgrader(
    args: Sequence[str],
    course_dir: Path,
    *,
    settings: GradingSettings = DEFAULT_SETTINGS,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``nbgrader ARGS`` with ``course_dir`` as working directory and course root."""
    command = [sys.executable, "-c", NBGRADER_MAIN, *args]
    result = subprocess.run(
        command,
        cwd=course_dir,
        env=env or grading_env(settings),
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise NbgraderError(f"`nbgrader {' '.join(args)}` failed in {course_dir} (exit {result.returncode}):\n{tail}")
    return result


def write_course_config(course_dir: Path, base_config: Path, *, own_gradebook: bool = False) -> Path:
    """Give a scratch course directory (demo class, tests) the repository's nbgrader config.

    ``own_gradebook`` pins the scratch course to itself (its root and a sqlite gradebook
    inside it) even when the base config names another root or database (JupyterHub).
    """
    course_dir.mkdir(parents=True, exist_ok=True)
    config = course_dir / "nbgrader_config.py"
    text = (
        "# Generated: the course's own configuration, loaded unchanged.\n"
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(base_config.resolve())!r})  # noqa: F821\n"
    )
    if own_gradebook:
        root = course_dir.resolve()
        text += (
            "# A scratch course: its own root and its own sqlite gradebook, whatever the base says.\n"
            f"c.CourseDirectory.root = {str(root)!r}\n"
            f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}\n"
        )
    config.write_text(text)
    return config


def _outcome_of_dead_process(returncode: int, output: str) -> dict[str, Any]:
    tail = "\n".join(output.strip().splitlines()[-15:])
    return {
        "success": False,
        "error": f"the grading process stopped (exit {returncode}) while grading this submission",
        "log": tail,
        "process_died": True,
    }


def autograde_students(
    course_dir: Path,
    assignment: str,
    students: Sequence[str],
    *,
    settings: GradingSettings = DEFAULT_SETTINGS,
    config: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, dict[str, Any]], str]:
    """``NbGraderAPI.autograde(assignment, student)`` for each student, in a subprocess
    whose working directory is ``course_dir`` (nbgrader loads its config there).

    ``config`` adds traitlets settings (``{"Execute": {"enabled": False}}``). Returns
    ``student -> {"success", "error", "log"}`` as nbgrader's API gives it, and the
    subprocess's own output. If the process itself dies, the student it was grading is
    failed with that reason and the others are graded by a fresh process.
    """
    outcomes, output = autograde_jobs(course_dir, [(assignment, s) for s in students], settings=settings, config=config)
    return {student: outcome for (_, student), outcome in outcomes.items()}, output


def autograde_jobs(
    course_dir: Path,
    jobs: Sequence[tuple[str, str]],
    *,
    settings: GradingSettings = DEFAULT_SETTINGS,
    config: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[tuple[str, str], dict[str, Any]], str]:
    """:func:`autograde_students` for ``(assignment, student)`` pairs of several assignments, all in one
    nbgrader process (its start-up, and the checkers' fork server, paid once, not once per assignment):
    ``(assignment, student) -> outcome``, and the subprocess's output."""
    outcomes: dict[tuple[str, str], dict[str, Any]] = {}
    output = ""
    work = Path(tempfile.mkdtemp(prefix="course-autograde-"))  # private (0700), outside the course
    try:
        remaining: list[tuple[str, str]] = [(a, s) for a, s in jobs]
        while remaining:
            spec = work / "spec.json"
            results = work / "results.jsonl"
            results.unlink(missing_ok=True)
            spec.write_text(json.dumps({
                "course_dir": str(Path(course_dir).resolve()),
                "jobs": remaining,
                "config": config or {},
                "results": str(results),
            }))
            process = subprocess.run(
                [sys.executable, "-m", "course_grader.grading.runner", "autograde", str(spec)],
                cwd=course_dir, env=grading_env(settings), capture_output=True, text=True,
            )
            output += process.stdout + process.stderr
            done = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
            for record in done:
                outcomes[(record.pop("assignment"), record.pop("student"))] = record
            remaining = [job for job in remaining if job not in outcomes]
            if remaining and process.returncode == 0:
                raise NbgraderError(f"nbgrader's API returned without grading {remaining}:\n{output[-3000:]}")
            if remaining:  # the process died while grading remaining[0]
                outcomes[remaining[0]] = _outcome_of_dead_process(process.returncode, process.stdout + process.stderr)
                remaining = remaining[1:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return outcomes, output


def _autograde_main(spec_path: str) -> int:
    """The subprocess side of :func:`autograde_jobs` (a spec of ``jobs``, or of one ``assignment`` and its
    ``students``)."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from course_grader.grading.checker.process import warm_up
    from course_grader.grading.gradebook import fast_gradebook_creation, nbgrader_config

    spec = json.loads(Path(spec_path).read_text())
    if spec["config"].get("Execute", {}).get("enabled", True):
        warm_up()  # the checkers' fork server imports torch while nbgrader starts
    fast_gradebook_creation()
    jobs = spec.get("jobs") or [(spec["assignment"], student) for student in spec["students"]]
    os.chdir(spec["course_dir"])
    sys.path.insert(0, os.getcwd())  # as `nbgrader` does
    config = nbgrader_config(Path.cwd())
    config.merge(Config(spec["config"]))
    coursedir = CourseDirectory(config=config)
    api = NbGraderAPI(coursedir=coursedir, config=config)
    with open(spec["results"], "a") as results:
        for assignment, student in jobs:
            outcome = api.autograde(assignment, student, force=True, create=True)
            results.write(json.dumps({"assignment": assignment, "student": student, **outcome}) + "\n")
            results.flush()
    return 0


def die_with_parent() -> None:
    """Ask Linux to end this process when the one that started it ends (``PR_SET_PDEATHSIG``): a
    `course grade` that is killed takes its nbgrader process with it (and that process's kernels,
    each started to die with its parent), instead of leaving it grading and writing to the gradebook
    while the instructor starts again. Elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type] # see NBGRADER_MAIN
    if len(sys.argv) == 3 and sys.argv[1] == "autograde":
        die_with_parent()
        raise SystemExit(_autograde_main(sys.argv[2]))
    raise SystemExit(f"usage: python -m {__spec__.name if __spec__ else 'nbgrader_runner'} autograde SPEC.json")
