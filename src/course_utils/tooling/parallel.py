"""Autograde a class on every core, with grades equal to a serial run.

nbgrader grades serially and its sqlite gradebook is not safe for concurrent writers.
So the work is split in two phases:

1. **execute** (parallel): the class is dealt into ``workers`` groups; each group is graded
   by one ``nbgrader autograde`` in a private scratch course (a copy of the course's
   gradebook, the assignment's source and the group's submissions). nbgrader goes on after a
   student it cannot grade, so a crash fails that student alone.
2. **record** (serial, no kernels): the executed notebooks are handed to one
   ``nbgrader autograde`` in the real course with ``Execute`` and ``ClearOutput``
   disabled, which restores the test cells from the gradebook, reads the outputs, and
   writes the grades and ``autograded/`` exactly as a serial run would.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from course_utils.tooling.grading import GradingRun, failed_students
from course_utils.tooling.nbgrader_runner import run_nbgrader, write_course_config
from course_utils.tooling.submissions import submitted_students

__all__ = ["autograde_parallel", "default_workers"]


def default_workers() -> int:
    """One worker per core (``os.sched_getaffinity`` where it exists)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def _grade_group(
    course_dir: Path, scratch: Path, assignment: str, group: Sequence[str], profile: str
) -> tuple[dict[str, Path], dict[str, str], str]:
    """One ``nbgrader autograde`` over ``group`` in a private scratch course.

    Returns the executed notebook folders of the students it graded, the students it
    could not grade (with a reason) and its log.
    """
    write_course_config(scratch, course_dir / "nbgrader_config.py")
    shutil.copy2(course_dir / "gradebook.db", scratch / "gradebook.db")
    shutil.copytree(course_dir / "solutions" / assignment, scratch / "solutions" / assignment)
    for student in group:
        shutil.copytree(course_dir / "submitted" / student / assignment, scratch / "submitted" / student / assignment)
    result = run_nbgrader(["autograde", assignment, "--force"], scratch, profile=profile, check=False)
    log = result.stdout + result.stderr
    failed = failed_students(log)
    executed = {}
    for student in group:
        folder = scratch / "autograded" / student / assignment
        if student not in failed and folder.is_dir():
            executed[student] = folder
        elif student not in failed:
            failed[student] = "nbgrader could not grade this submission"
    return executed, failed, log


def autograde_parallel(
    course_dir: Path,
    assignment: str,
    students: Sequence[str] | None = None,
    *,
    workers: int | None = None,
    profile: str = "ci",
) -> GradingRun:
    """Grade ``assignment`` for all (or the given) students of ``course_dir`` in parallel."""
    submitted = course_dir / "submitted"
    students = submitted_students(course_dir, assignment, students)
    workers = workers or default_workers()
    failed: dict[str, str] = {}
    logs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="course-grade-", dir=course_dir) as scratch_name:
        scratch_root = Path(scratch_name)
        # one nbgrader process per worker, each grading its share of the class in turn:
        # nbgrader's start-up (seconds) is paid once per worker, not once per student
        groups = [students[i::workers] for i in range(workers) if students[i::workers]]
        with ThreadPoolExecutor(max_workers=len(groups) or 1) as pool:  # threads only wait on subprocesses
            results = list(pool.map(
                lambda item: _grade_group(course_dir, scratch_root / f"worker{item[0]}", assignment, item[1], profile),
                enumerate(groups),
            ))
        staging = scratch_root / "_executed"
        for executed, group_failed, log in results:
            logs.append(log)
            failed.update(group_failed)
            for student, folder in executed.items():
                target = staging / student / assignment
                shutil.copytree(folder, target)
                timestamp = submitted / student / assignment / "timestamp.txt"
                if timestamp.is_file():
                    shutil.copy2(timestamp, target / "timestamp.txt")
        graded = sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []
        returncode = 1 if failed else 0
        if graded:
            record = run_nbgrader(
                [
                    "autograde", assignment, "--force",
                    f"--CourseDirectory.submitted_directory={staging}",
                    "--Execute.enabled=False",
                    "--ClearOutput.enabled=False",
                ],
                course_dir,
                profile=profile,
                check=False,
            )
            logs.append(record.stdout + record.stderr)
            failed.update({s: why for s, why in failed_students(record.stdout + record.stderr).items() if s not in failed})
            returncode = returncode or record.returncode
    return GradingRun(assignment, returncode, failed, "\n".join(logs))
