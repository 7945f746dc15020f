"""Autograde a class on every core, with grades equal to a serial run.

nbgrader grades serially and its sqlite gradebook is not safe for concurrent writers.
So the work is split in two phases:

1. **execute** (parallel): the class is dealt into ``workers`` groups; each group is graded
   by one nbgrader process (``NbGraderAPI.autograde`` per student) in a private scratch
   course: the assignment's source, the group's submissions, and a scratch sqlite
   gradebook holding only the assignment's definition, copied from the course's configured
   gradebook (sqlite or PostgreSQL) through nbgrader's Gradebook API. The scratch courses
   live in a private temporary folder outside the course directory, which no sandboxed
   kernel can see. Each student's outcome is nbgrader's own for that student.
2. **record** (serial, no kernels, in this process): the executed folders, read only from that
   scratch folder, are recorded in the real course in batches by nbgrader's Gradebook API
   (:func:`~course_grader.grading.recording.record_executed_notebooks`, as the Dask client does):
   the grades (to the configured ``db_url``) and ``autograded/`` exactly as a serial run writes them
   (tests/course_grader/grading/test_recording.py holds it against :func:`record_executed`,
   nbgrader's own recording with Execute off, which this path used before: a process of its own,
   seconds per batch).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from course_grader.course import Course
from course_grader.grading.gradebook import copy_assignment_definition, require_assignment
from course_grader.grading.outcome import GradingRun, StudentResult, student_result
from course_grader.grading.recording import read_tree, record_executed_notebooks
from course_grader.grading.runner import autograde_students, write_course_config
from course_grader.grading.submissions import submitted_students

__all__ = ["autograde_parallel", "grade_on_cores", "default_workers", "record_executed", "RECORD_ONLY"]

# executed folders read and recorded together (the Dask client's batch): a class is never all in memory
RECORD_BATCH = 20
# nbgrader settings of its own recording (record_executed): read the outputs, run nothing.
RECORD_ONLY: dict[str, dict[str, Any]] = {
    "Execute": {"enabled": False},
    "SandboxedExecute": {"enabled": False},
    "ClearOutput": {"enabled": False},
}


def default_workers() -> int:
    """One worker per core (``os.sched_getaffinity`` where it exists)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def _grade_group(
    course: Course, scratch_dir: Path, assignment: str, group: Sequence[str]
) -> tuple[dict[str, Path], list[StudentResult], str]:
    """Execute ``group``'s notebooks in a private scratch course (the course's folder names, its
    own sqlite gradebook).

    Returns the executed notebook folders of the students nbgrader graded, the results of
    those it could not grade, and the log.
    """
    scratch = Course(scratch_dir, f"sqlite:///{scratch_dir / 'gradebook.db'}", course.settings, course.directories)
    write_course_config(scratch.root, course.root / "nbgrader_config.py", own_gradebook=True)
    copy_assignment_definition(course.db_url, scratch.db_url, assignment)
    shutil.copytree(course.path("source", assignment=assignment), scratch.path("source", assignment=assignment))
    for student in group:
        shutil.copytree(course.path("submitted", student, assignment), scratch.path("submitted", student, assignment))
    outcomes, log = autograde_students(scratch.root, assignment, group, settings=course.settings)
    executed: dict[str, Path] = {}
    failed: list[StudentResult] = []
    for student in group:
        result = student_result(student, assignment, outcomes[student])
        folder = scratch.path("autograded", student, assignment)
        if result.status == "graded" and folder.is_dir():
            executed[student] = folder
        elif result.status == "graded":
            failed.append(StudentResult(student, assignment, "failed", "nbgrader wrote no graded notebook"))
        else:
            failed.append(result)
    return executed, failed, log


def record_executed(course: Course, assignment: str, staging: Path) -> tuple[dict[str, StudentResult], str]:
    """nbgrader's own recording of the executed notebooks in ``staging/<student>/<assignment>/`` (a
    private folder) in the real course: its autograde with Execute off, in a process of its own; each
    student's submitted ``timestamp.txt`` goes with them. Returns ``student -> result`` and nbgrader's
    log. Grading records in-process (:func:`record_executed_notebooks`); this is what that is tested
    and benchmarked against."""
    graded = sorted(p.parent.name for p in staging.glob(f"*/{assignment}") if p.is_dir()) if staging.is_dir() else []
    if not graded:
        return {}, ""
    for student in graded:
        timestamp = course.path("submitted", student, assignment) / "timestamp.txt"
        if timestamp.is_file():
            target = staging / student / assignment / "timestamp.txt"
            target.unlink(missing_ok=True)  # nbgrader's copy there is read-only (0444): a grader who is not root cannot overwrite it
            shutil.copy2(timestamp, target)
    config: dict[str, dict[str, Any]] = {**RECORD_ONLY, "CourseDirectory": {"submitted_directory": str(staging)}}
    outcomes, log = autograde_students(course.root, assignment, graded, settings=course.settings, config=config)
    return {s: student_result(s, assignment, outcomes[s]) for s in graded}, log


def autograde_parallel(
    course: Course,
    assignment: str,
    students: Sequence[str] | None = None,
    *,
    workers: int | None = None,
) -> GradingRun:
    """Grade ``assignment`` for all (or the given) students of ``course`` in ``course.profile``, in
    parallel.

    Raises :class:`~course_grader.grading.gradebook.AssignmentNotReleased` when the
    assignment is not in the gradebook.
    """
    require_assignment(course.db_url, assignment)
    return grade_on_cores(course, assignment, submitted_students(course, assignment, students),
                          workers or default_workers())


def grade_on_cores(course: Course, assignment: str, students: Sequence[str], workers: int) -> GradingRun:
    """:func:`autograde_parallel` of ``students`` as given: the assignment released and the students'
    submissions found by the caller (:func:`~course_grader.grading.pipeline.grade` checks both once)."""
    results: dict[str, StudentResult] = {}
    logs: list[str] = []
    # private (0700) and outside the course directory: kernels never see it
    scratch_root = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        # one nbgrader process per worker, each grading its share of the class in turn:
        # nbgrader's start-up (seconds) is paid once per worker, not once per student
        groups = [students[i::workers] for i in range(workers) if students[i::workers]]
        with ThreadPoolExecutor(max_workers=len(groups) or 1) as pool:  # threads only wait on subprocesses
            done = list(pool.map(
                lambda item: _grade_group(course, scratch_root / f"worker{item[0]}", assignment, item[1]),
                enumerate(groups),
            ))
        executed: dict[str, Path] = {}
        for group_executed, group_failed, log in done:
            logs.append(log)
            results.update({r.student: r for r in group_failed})
            executed.update(group_executed)
        names = sorted(executed)
        for start in range(0, len(names), RECORD_BATCH):
            batch = names[start:start + RECORD_BATCH]
            results.update(record_executed_notebooks(course, assignment, {s: read_tree(executed[s]) for s in batch}))
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    return GradingRun(assignment, [results[s] for s in students], "\n".join(logs))
