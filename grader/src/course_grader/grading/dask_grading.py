"""Autograde on a Dask ``distributed`` cluster: one task per (student, notebook).

``course grade A --scheduler tcp://HOST:8786`` splits grading the way
:mod:`course_grader.grading.parallel` does, with Dask workers in place of local groups:

1. **execute** (on the workers): each task carries one student's submission and is given the
   assignment's :class:`AssignmentBundle` (its source folder, a sqlite gradebook holding its
   definition only, and the course's nbgrader settings), sent once as a task of its own. The
   worker grades it with nbgrader's API in a private scratch course, each kernel in the
   sandbox (``SandboxedExecute``: the executor of ``course grade``), and returns plain data
   (:class:`SubmissionResult`): nbgrader's outcome, the executed notebook, its scores per cell,
   the checker's flags. No worker sees the course's gradebook or another assignment.
2. **record** (the client, serially): the executed notebooks are recorded in the real course
   by :func:`course_grader.grading.recording.record_executed_notebooks` (nbgrader's Gradebook
   API in this process, opened once per batch: no kernel, no nbgrader process), in batches as
   results arrive, with the course's own ``db_url``.

Dask does the rest: a worker that dies has its task run again elsewhere
(``distributed.scheduler.allowed-failures``). A task that ends cancelled or lost rather than in
error (the client lost its scheduler under load and Dask cancelled every future; a worker's memory
lost; an operator's ``client.cancel``) is submitted again, at most ``MAX_RESUBMITS`` times, and
recorded once; only an error raised by the task itself, or a submission cancelled every time,
reports the student as failed. Tasks run longest notebook first (``priority``:
the median seconds recorded for that notebook by earlier runs); tqdm shows progress and ETA.
Every recorded submission is journalled in ``build/grading/<assignment>.jsonl`` with the digest
of the submission and of the assignment: a run that was interrupted, re-run, grades only what
is missing. A task past ``wall_limit`` seconds has its kernel stopped and fails with that reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from course_grader.course import STEPS, Course, GradingSettings
from course_grader.grading.outcome import GradingRun, StudentResult, student_result
from course_grader.grading.recording import read_tree as _read_tree, write_tree as _write_tree

__all__ = [
    "AssignmentBundle",
    "SubmissionTask",
    "SubmissionResult",
    "assignment_bundle",
    "execute_submission",
    "autograde_dask",
    "grade_on_dask",
    "journal_path",
    "MAX_RESUBMITS",
]

# How many times a submission whose task ended cancelled or lost (not errored) is submitted again
# before it is reported failed: Dask's own bound for a task whose worker dies
# (distributed.scheduler.allowed-failures, 3 by default). What cancels or loses a task comes from
# outside the submission (a client that lost its scheduler for a moment, a worker's lost memory,
# an operator's cancel), so a new attempt normally succeeds; a cause that repeats (a scheduler that
# keeps dropping its client, a task cancelled on purpose) must not loop for ever, and each attempt
# may cost a whole notebook (up to the wall limit): 3 bounds the waste at 3 notebooks per submission.
MAX_RESUBMITS = 3


@dataclass(frozen=True)
class AssignmentBundle:
    """What a worker needs for one assignment, and nothing of the others.

    ``source``: relative path -> bytes of ``solutions/<assignment>/``; ``gradebook``: a sqlite
    file with the assignment's definition (cells, points, hidden tests) and no student;
    ``config``: nbgrader's settings as the client resolved them (no root, db_url or exchange).
    """

    assignment: str
    digest: str
    source: dict[str, bytes]
    gradebook: bytes
    config: dict[str, Any]


@dataclass(frozen=True)
class SubmissionTask:
    """One student's submission of one assignment: ``files`` is ``submitted/<student>/<assignment>/``."""

    assignment: str
    student: str
    digest: str
    files: dict[str, bytes]
    settings: GradingSettings = GradingSettings()  # the course's: profile, sandbox, wall limit


@dataclass
class SubmissionResult:
    """What a worker sends back, as plain data.

    ``outcome``: nbgrader's ``{"success", "error", "log"}`` for this student (``wall_limit``: True
    when the task was stopped); ``executed``: relative path -> bytes of the autograded folder;
    ``scores``: notebook -> grade_id -> ``[score, max_score]``; ``flags``: the checker's evidence.
    """

    assignment: str
    student: str
    digest: str
    outcome: dict[str, Any]
    executed: dict[str, bytes] = field(default_factory=dict)
    scores: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    worker: str = ""


# ----------------------------------------------------------------------------- files as data


def _digest(*parts: Mapping[str, bytes] | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        items = part.items() if isinstance(part, Mapping) else [("", part.encode())]
        for name, data in sorted(items):
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


# ----------------------------------------------------------------------------- the client's side: bundles


def assignment_bundle(course: Course, assignment: str) -> AssignmentBundle:
    """The :class:`AssignmentBundle` of ``assignment``: built once per run, sent to the cluster once."""
    from course_grader.grading.gradebook import copy_assignment_definition

    config = json.loads(json.dumps(course.nbgrader_config()))  # read in the grading profile, as a local run's nbgrader
    for key in ("root", "db_url"):
        config.get("CourseDirectory", {}).pop(key, None)
    for section in ("Exchange", "ExchangeFactory"):
        config.pop(section, None)
    source = _read_tree(course.path("source", assignment=assignment))
    with tempfile.TemporaryDirectory(prefix="course-bundle-") as scratch:
        path = Path(scratch) / "gradebook.db"
        copy_assignment_definition(course.db_url, f"sqlite:///{path}", assignment)
        gradebook = path.read_bytes()
    digest = _digest(source, json.dumps(config, sort_keys=True))
    return AssignmentBundle(assignment, digest, source, gradebook, config)


def submission_task(course: Course, assignment: str, student: str) -> SubmissionTask:
    files = _read_tree(course.path("submitted", student, assignment))
    return SubmissionTask(assignment, student, _digest(files), files, course.settings)


# ----------------------------------------------------------------------------- the worker's side


_ONE_AT_A_TIME = threading.Lock()  # nbgrader reads its course from the working directory


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _wall_limit(seconds: float | None) -> Iterator[threading.Event]:
    """Past ``seconds``, stop every process this task started (the kernel, in its sandbox) until
    the task ends; the event tells whether it had to. Workers run one task per process."""
    import psutil

    fired, done = threading.Event(), threading.Event()
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}

    def watch() -> None:
        if seconds is None or done.wait(seconds):
            return
        fired.set()
        while not done.is_set():
            for child in me.children(recursive=True):
                if child.pid not in before:
                    with contextlib.suppress(psutil.Error):
                        child.kill()
            done.wait(0.5)

    watcher = threading.Thread(target=watch, name="course-wall-limit", daemon=True)
    watcher.start()
    try:
        yield fired
    finally:
        done.set()
        watcher.join()


def execute_submission(bundle: AssignmentBundle, task: SubmissionTask) -> SubmissionResult:
    """Grade one submission in a private scratch course on this worker; results as data.

    nbgrader runs in this process (imported once per worker, as once per group locally), through
    the same entry point as a local run (``nbgrader_runner``), with the course's preprocessors:
    every kernel in the grading sandbox unless the task's settings say ``sandbox=False`` (the worker's own
    environment never turns it off).
    """
    from course_grader.grading.scores import checker_evidence, read_scores
    from course_grader.grading.runner import _autograde_main, grading_env, write_course_config

    started = time.perf_counter()
    env = grading_env(task.settings)
    with _ONE_AT_A_TIME, tempfile.TemporaryDirectory(prefix="course-dask-") as scratch:
        # a scratch course of this one submission: the bundle's source folder, nbgrader's others
        folders = bundle.config.get("CourseDirectory", {})
        course = Course(Path(scratch) / "course", f"sqlite:///{Path(scratch) / 'course' / 'gradebook.db'}", task.settings,
                        directories=tuple((step, folders[f"{step}_directory"]) for step in STEPS
                                          if f"{step}_directory" in folders))
        course.root.mkdir(parents=True)
        (course.root / "gradebook.db").write_bytes(bundle.gradebook)
        _write_tree(course.path("source", assignment=bundle.assignment), bundle.source)
        _write_tree(course.path("submitted", task.student, task.assignment), task.files)
        base = Path(scratch) / "course_config.py"
        base.write_text("from traitlets.config import Config\n"
                        f"get_config().merge(Config({bundle.config!r}))  # noqa: F821\n")
        write_course_config(course.root, base, own_gradebook=True)
        spec = Path(scratch) / "spec.json"
        results = Path(scratch) / "results.jsonl"
        spec.write_text(json.dumps({"course_dir": str(course.root), "assignment": task.assignment,
                                    "students": [task.student], "config": {}, "results": str(results)}))
        path, cwd = list(sys.path), os.getcwd()
        try:
            with _environment(env), warnings.catch_warnings(), _wall_limit(task.settings.wall_limit) as stopped:
                warnings.simplefilter("ignore")  # PYTHONWARNINGS=ignore, as for nbgrader's process locally
                _autograde_main(str(spec))
            lines = results.read_text().splitlines() if results.is_file() else []
            outcome = json.loads(lines[-1]) if lines else {"success": False, "error": "nbgrader returned no outcome"}
        except Exception as error:  # noqa: BLE001 - nbgrader's own failure is this student's outcome
            outcome = {"success": False, "error": f"{type(error).__name__}: {error}", "log": ""}
        finally:
            os.chdir(cwd)
            sys.path[:] = path
        outcome.pop("student", None)
        if stopped.is_set():
            outcome = {"success": False, "wall_limit": True, "log": str(outcome.get("log", ""))[-2000:],
                       "error": f"past the wall limit of {task.settings.wall_limit:g} s per notebook: the kernel was stopped "
                                "(--wall-limit)"}
        folder = course.path("autograded", task.student, task.assignment)
        executed = _read_tree(folder) if outcome.get("success") and folder.is_dir() else {}
        scores: dict[str, dict[str, list[float]]] = {}
        if executed:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows = read_scores(course)
            for row in rows:
                scores[row.notebook] = {gid: [c.score, c.max_score] for gid, c in row.cells.items()}
        flags = [str(flag) for flag in checker_evidence(folder)] if executed else []
    outcome["log"] = str(outcome.get("log", ""))[-4000:]
    return SubmissionResult(task.assignment, task.student, task.digest, outcome, executed, scores, flags,
                            time.perf_counter() - started, f"{socket.gethostname()}:{os.getpid()}")


# ----------------------------------------------------------------------------- the journal


def journal_path(course: Course, assignment: str) -> Path:
    return course.build_dir("grading") / f"{assignment}.jsonl"


def _journal(course: Course, assignment: str) -> list[dict[str, Any]]:
    path = journal_path(course, assignment)
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entries.append(json.loads(line))
    return entries


def _append(course: Course, assignment: str, entries: Sequence[dict[str, Any]]) -> None:
    path = journal_path(course, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.writelines(json.dumps(entry) + "\n" for entry in entries)


def expected_seconds(course: Course, assignments: Sequence[str]) -> dict[str, float]:
    """Median seconds of each notebook's recorded tasks (unknown: the median of the known ones, else 0)."""
    known = {}
    for name in assignments:
        seconds = [e["seconds"] for e in _journal(course, name) if e.get("seconds")]
        if seconds:
            known[name] = statistics.median(seconds)
    fallback = statistics.median(known.values()) if known else 0.0
    return {name: known.get(name, fallback) for name in assignments}


# ----------------------------------------------------------------------------- the client


def _record(course: Course, results: Sequence[SubmissionResult]) -> dict[tuple[str, str], StudentResult]:
    """Record one batch of executed notebooks in the real course (serial, no kernel) and journal them."""
    from course_grader.grading.recording import record_executed_notebooks

    recorded: dict[tuple[str, str], StudentResult] = {}
    for assignment in sorted({r.assignment for r in results}):
        batch = [r for r in results if r.assignment == assignment]
        outcomes = record_executed_notebooks(course, assignment, {r.student: r.executed for r in batch})
        entries = []
        for result in batch:
            outcome = outcomes.get(result.student) or StudentResult(result.student, assignment, "failed",
                                                                    "nbgrader recorded nothing for this submission")
            recorded[(assignment, result.student)] = outcome
            if outcome.status == "graded":
                entries.append({"student": result.student, "digest": result.digest, "status": "recorded",
                                "seconds": round(result.seconds, 2), "worker": result.worker})
        _append(course, assignment, entries)
    return recorded


def _failure(assignment: str, student: str, error: BaseException | None) -> StudentResult:
    name = type(error).__name__
    if name == "KilledWorker":
        reason = f"the Dask worker died each time it graded this submission ({name}: {error})"
    else:
        reason = f"the grading task failed on the worker ({name}: {error})"
    return StudentResult(student, assignment, "failed", reason)


def _gone(future: Any) -> str | None:
    """Why ``future`` (done, as :func:`distributed.as_completed` yields it) has no outcome of its own
    task: cancelled, its data lost, or an 'error' with no exception (seen after a worker was lost);
    None when it finished or its task raised."""
    import asyncio
    from concurrent.futures import CancelledError

    status = future.status
    if status == "finished":
        return None
    if status == "error":
        error = future.exception()
        if error is None:
            return "its task ended in error with no exception (a lost worker)"
        if isinstance(error, (CancelledError, asyncio.CancelledError)):
            return f"its task was cancelled ({type(error).__name__}: {error})"
        return None
    cancelled = getattr(getattr(future, "_state", None), "exception", None) if status == "cancelled" else None
    return f"its task was {status}" + (f" ({cancelled})" if cancelled else "")


def _bundle(bundle: AssignmentBundle) -> AssignmentBundle:
    """The task that holds an assignment's bundle on the cluster (recomputed if its worker dies)."""
    return bundle


def autograde_dask(course: Course, classes: Mapping[str, Sequence[str]], scheduler: Any,
                   **options: Any) -> list[GradingRun]:
    """:func:`grade_on_dask` after checking that every assignment of ``classes`` is released.

    Raises :class:`~course_grader.grading.gradebook.AssignmentNotReleased` when one is not in the
    gradebook (nothing is graded then).
    """
    from course_grader.grading.gradebook import require_assignment

    for name in classes:
        require_assignment(course.db_url, name)
    return grade_on_dask(course, classes, scheduler, **options)


def grade_on_dask(
    course: Course,
    classes: Mapping[str, Sequence[str]],
    scheduler: Any,
    *,
    progress: bool = True,
    batch: int = 20,
    batch_seconds: float = 30.0,
    execute: Callable[[AssignmentBundle, SubmissionTask], SubmissionResult] = execute_submission,
    resubmits: int = MAX_RESUBMITS,
) -> list[GradingRun]:
    """Grade ``classes`` (assignment -> students) of ``course`` on the Dask cluster at ``scheduler``
    (an address, or a ``distributed.Client``), as ``course.settings`` say (profile, sandbox, wall limit
    per notebook: the tasks carry them; the workers cannot see this process's environment); one
    :class:`GradingRun` per assignment.

    A task that ends cancelled or lost is submitted again, at most ``resubmits`` times (then the
    student is reported failed, saying so); each student is recorded at most once.

    Submissions recorded by an earlier run, unchanged since (same submission, same assignment),
    are not graded again. The assignments released and the students' submissions found are the
    caller's to check (:func:`~course_grader.grading.pipeline.grade` checks both once;
    :func:`autograde_dask` checks the release first).
    """
    from distributed import Client, as_completed
    from tqdm import tqdm

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    results: dict[tuple[str, str], StudentResult] = {}
    try:
        bundles = {name: assignment_bundle(course, name) for name in classes}
        priority = expected_seconds(course, list(classes))
        # future -> (assignment, student, attempt): not the submission's files, read again if it is resubmitted
        # (13 notebooks of 10,000 students held in the client would be gigabytes)
        owners: dict[Any, tuple[str, str, int]] = {}
        shared: dict[str, Any] = {}  # each assignment's bundle future, held until its tasks are done
        bundle_keys: dict[str, int] = {}

        def submit(name: str, task: SubmissionTask, attempt: int = 0) -> Any:
            if name not in shared or shared[name].status in ("cancelled", "lost", "error"):
                # a task, not scattered data: a worker lost with it has it computed again elsewhere
                # (data scattered to a worker that dies is gone, and every task needing it fails)
                n = bundle_keys[name] = bundle_keys.get(name, -1) + 1
                shared[name] = client.submit(_bundle, bundles[name],
                                             key=f"bundle-{name}-{bundles[name].digest[:12]}" + (f"-{n}" if n else ""))
            key = f"grade-{name}-{task.student}-{task.digest[-12:]}" + (f"-again{attempt}" if attempt else "")
            future = client.submit(execute, shared[name], task, key=key, priority=round(priority[name] * 1000),
                                   pure=False)
            owners[future] = (name, task.student, attempt)
            return future

        def read(name: str, student: str) -> SubmissionTask:
            task = submission_task(course, name, student)
            return dataclasses.replace(task, digest=f"{bundles[name].digest}:{task.digest}")

        for name, students in classes.items():
            done = {(e["student"], e["digest"]) for e in _journal(course, name) if e.get("status") == "recorded"}
            for student in students:
                task = read(name, student)
                if (student, task.digest) in done:
                    results[(name, student)] = StudentResult(student, name, "graded")  # recorded by an earlier run
                    continue
                submit(name, task)
        if progress and results:
            print(f"{len(results)} submission(s) unchanged since an earlier run recorded them (build/grading/): "
                  "not graded again", file=sys.stderr, flush=True)
        pending: list[SubmissionResult] = []
        last = time.monotonic()
        with tqdm(total=len(owners), unit="notebook", desc="grading", disable=not progress or not owners,
                  file=sys.stderr, smoothing=0.1) as bar:
            # every result finished meanwhile at once: while the client records, the next batch grows
            running = as_completed(list(owners))
            for finished in running.batches():
                for future in finished:
                    name, student, attempt = owners.pop(future)
                    gone, result, error = _gone(future), None, None
                    if gone is None and future.status == "finished":
                        try:
                            result = future.result()
                        except Exception as lost:  # noqa: BLE001 - its data lost between finishing and fetching
                            gone = f"its result could not be fetched ({type(lost).__name__}: {lost})"
                    elif gone is None:
                        error = future.exception()  # raised by the task itself: this student's failure
                    future.release()
                    if gone is not None:
                        if attempt < resubmits:
                            if progress:
                                print(f"{student} / {name}: {gone}; submitted again ({attempt + 1} of {resubmits})",
                                      file=sys.stderr, flush=True)
                            running.add(submit(name, read(name, student), attempt + 1))
                            continue
                        results[(name, student)] = StudentResult(
                            student, name, "failed",
                            f"the grading task was cancelled or lost {attempt + 1} times, never graded (last: {gone}); "
                            "grade it again")
                    elif result is None:
                        results[(name, student)] = _failure(name, student, error)
                    elif result.outcome.get("success"):
                        pending.append(result)
                    elif result.outcome.get("wall_limit"):
                        results[(name, student)] = StudentResult(student, name, "failed", result.outcome["error"])
                    else:
                        results[(name, student)] = student_result(student, name, result.outcome)
                    bar.update()
                # at most `batch` per recording: an interrupted client has lost at most one batch's work
                while len(pending) >= batch or (pending and time.monotonic() - last >= batch_seconds):
                    chunk, pending = pending[:batch], pending[batch:]
                    results.update(_record(course, chunk))
                    last = time.monotonic()
        if pending:
            results.update(_record(course, pending))
    finally:
        if client is not scheduler:
            client.close()
    return [GradingRun(name, [results[(name, s)] for s in students]) for name, students in classes.items()]

