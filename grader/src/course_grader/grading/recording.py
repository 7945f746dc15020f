"""Record notebooks executed elsewhere in the course's gradebook: in this process, no kernel.

A Dask worker grades a submission in a scratch course with nbgrader's own ``autograde`` (its
sanitizing preprocessors, then the execution and ``SaveAutoGrades``) and sends back the
autograded folder. :func:`record_executed_notebooks` writes a batch of such folders into the
real course through nbgrader's Gradebook API, opened once per batch, doing per submission what
``nbgrader autograde`` does to the course around an already executed notebook:

- the student and the submission (with its ``timestamp.txt``) are found or created;
- the folder replaces ``autograded/<student>/<assignment>/``, with nbgrader's file permissions
  (read-only): ``generate_feedback`` and the formgrader read it there;
- each grade cell gets its ``auto_score`` and ``needs_manual_grade``, each solution and task
  cell its ``auto_comment``, as ``SaveVerdicts`` (:mod:`course_grader.grading.verdict`) sets them; a notebook of the assignment that
  is not in the folder scores 0, and the late penalty is ``AssignLatePenalties``'s.

Each submission is committed on its own: one that cannot be recorded costs only that student.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from course_grader.grading.outcome import StudentResult

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = ["read_tree", "record_executed_notebooks", "write_tree"]

# never sent or recorded: editors' checkpoints, bytecode, what `course grade` set aside in a submission
_SKIPPED = {".ipynb_checkpoints", "__pycache__", ".set-aside-by-course"}


def read_tree(folder: Path) -> dict[str, bytes]:
    """relative path -> bytes of every file under ``folder`` (checkpoints and set-aside files left out)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not _SKIPPED.intersection(relative.parts):
            files[relative.as_posix()] = path.read_bytes()
    return files


def write_tree(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (relative path -> bytes) under ``folder``; no path may leave it."""
    for relative, data in files.items():
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            raise ValueError(f"refusing to write {relative!r} outside {folder}")
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def record_executed_notebooks(
    course: Course, assignment: str, executed: Mapping[str, Mapping[str, bytes]]
) -> dict[str, StudentResult]:
    """Record ``executed`` (student -> relative path -> bytes of an autograded folder) in
    ``course`` (its gradebook, ``course.db_url``); ``student -> StudentResult`` (``graded``, or
    ``failed`` with why)."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import AssignLatePenalties
    from sqlalchemy.exc import SAWarning

    from course_grader.grading.gradebook import _CWD_LOCK, fast_gradebook_creation

    config = course.nbgrader_config()
    db_url = course.db_url
    with _CWD_LOCK, contextlib.chdir(course.root):  # nbgrader's root defaults to the working directory
        coursedir = CourseDirectory(config=config)
        coursedir.root = str(Path(coursedir.root).resolve())  # the configured root, or this folder
    converter = Autograde(coursedir=coursedir, config=config)  # its output folders and permissions
    late = AssignLatePenalties(config=config)
    late.init_plugin()
    fast_gradebook_creation()
    results: dict[str, StudentResult] = {}
    # nbgrader's add_submission trips SQLAlchemy 2's autoflush warnings (its own processes run with
    # PYTHONWARNINGS=ignore); what it stores is unaffected
    with Gradebook(db_url, coursedir.course_id) as gradebook, warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SAWarning)
        for student, files in sorted(executed.items()):
            try:
                _record_one(gradebook, converter, late, assignment, student, files)
                results[student] = StudentResult(student, assignment, "graded")
            except Exception as error:  # noqa: BLE001 - this student's outcome, not the batch's
                gradebook.db.rollback()
                results[student] = StudentResult(student, assignment, "failed",
                                                  f"the client could not record it ({type(error).__name__}: {error})")
    return results


def _record_one(gradebook: Any, converter: Any, late: Any, assignment: str, student: str,
                files: Mapping[str, bytes]) -> None:
    import nbformat
    from nbgrader import utils

    definition = gradebook.find_assignment(assignment)
    known = {notebook.name for notebook in definition.notebooks}
    notebooks = {Path(path).stem: nbformat.reads(data.decode(), as_version=4)
                 for path, data in files.items() if "/" not in path and path.endswith(".ipynb")
                 and Path(path).stem in known}
    if not notebooks:
        raise ValueError(f"no notebook of {assignment} among the executed files {sorted(files)}")

    gradebook.update_or_create_student(student)
    stamp = files.get("timestamp.txt", b"").decode().strip()
    submission = gradebook.update_or_create_submission(
        assignment, student, **({"timestamp": utils.parse_utc(stamp)} if stamp else {}))

    folder = Path(converter._format_dest(assignment, student))
    if folder.exists():
        utils.rmtree(str(folder))  # as `autograde --force`: read-only files included
    write_tree(folder, files)
    converter.set_permissions(assignment, student)

    for name in known - notebooks.keys():  # not submitted: zero, as nbgrader scores it
        for grade in gradebook.find_submission_notebook(name, assignment, student).grades:
            grade.auto_score, grade.needs_manual_grade = 0, False
    for name, notebook in notebooks.items():
        for cell in notebook.cells:
            _save_autograde(gradebook, cell, name, assignment, student)
    gradebook.db.commit()

    for name in notebooks:  # AssignLatePenalties, with the course's plugin
        submitted = gradebook.find_submission_notebook(name, assignment, student)
        submitted.late_submission_penalty = None
        if submission.total_seconds_late > 0:
            penalty = late.plugin_inst.late_submission_penalty(student, submitted.score, submission.total_seconds_late)
            if penalty is not None:
                submitted.late_submission_penalty = late._check_late_penalty(submitted, penalty)
    gradebook.db.commit()


def _save_autograde(gradebook: Any, cell: Any, notebook: str, assignment: str, student: str) -> None:
    """What ``nbgrader.preprocessors.SaveAutoGrades`` writes for one cell (without its commit)."""
    from nbgrader import utils

    from course_grader.grading.verdict import verdict_score

    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    if utils.is_grade(cell):
        grade = gradebook.find_grade(grade_id, notebook, assignment, student)
        grade.auto_score = verdict_score(cell)  # a test cell: the checker's verdict alone
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
    if utils.is_solution(cell) or utils.is_task(cell):
        comment = gradebook.find_comment(grade_id, notebook, assignment, student)
        unchanged = cell.metadata.nbgrader.get("checksum", None) == utils.compute_checksum(cell)
        comment.auto_comment = "No response." if unchanged and not utils.is_task(cell) else None
