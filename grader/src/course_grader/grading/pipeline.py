"""The one grading pipeline: ``grade(course, assignments, students, workers | scheduler) -> GradeReport``.

``course grade`` (and the hub's service, which runs it), the demo class and the Dask path all grade
through :func:`grade`. For each assignment it:

1. inspects the submissions (:mod:`~course_grader.grading.submissions`): a malformed one is left
   out with its reason, a missing one is recorded as 0;
2. autogrades the rest in the course's profile: serially through nbgrader (``workers=1``), on every
   core (:mod:`~course_grader.grading.parallel`), or on a Dask cluster (``scheduler``,
   :mod:`~course_grader.grading.dask_grading`, every assignment's tasks at once);
3. writes the written answers beside each student's own run (:mod:`~course_grader.grading.manual_view`);

the report reads the scores back from the gradebook, and the flags from the scan and the checker's
evidence, when asked. It prints progress through ``say`` and never prints a table: the caller does
(:mod:`course_grader.cli`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

from course_grader.course import Course
from course_grader.grading.outcome import GradingRun, StudentResult
from course_grader.grading.scores import NotebookScore, read_scores, submission_flags

__all__ = ["GradeReport", "grade"]


@dataclass
class GradeReport:
    """What one :func:`grade` call did: every student's result, the submissions it could not grade
    (``failed``: the reason), and, read when first asked for (the demo class never asks), the scores
    it left in the gradebook for them (``rows``) and the flags."""

    course: Course
    assignments: Sequence[str]
    students: Sequence[str] | None = None
    results: list[StudentResult] = field(default_factory=list)

    @property
    def failed(self) -> dict[tuple[str, str], str]:
        """``(assignment, student) -> reason`` for the submissions nbgrader could not grade."""
        return {(r.assignment, r.student): r.reason for r in self.results if r.status in ("failed", "malformed")}

    @cached_property
    def rows(self) -> list[NotebookScore]:
        """The gradebook's scores of the graded submissions (the failed ones left out)."""
        failed, names = self.failed, set(self.assignments)
        return [r for r in read_scores(self.course)
                if r.assignment in names and (r.assignment, r.student) not in failed
                and (not self.students or r.student in self.students)]

    @cached_property
    def flags(self) -> dict[tuple[str, str], list[Any]]:
        """``(assignment, student) -> flags`` from the scan and the checker's evidence."""
        return submission_flags(self.course, sorted({(r.assignment, r.student) for r in self.results}))


def grade(
    course: Course,
    assignments: Sequence[str],
    students: Sequence[str] | None = None,
    *,
    workers: int = 1,
    scheduler: Any = None,
    manual_views: bool = True,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
) -> GradeReport:
    """Grade ``assignments`` for all (or the given) ``students`` of ``course`` as ``course.settings``
    say (profile, sandbox, cell limit, the wall limit per notebook on Dask).

    ``workers``: students graded at once on this machine (1: serial nbgrader); ``scheduler``: a
    Dask scheduler address or client instead.
    Raises :class:`~course_grader.grading.gradebook.AssignmentNotReleased` when an assignment is
    not in the gradebook.
    """
    from course_grader.grading.gradebook import require_assignment
    from course_grader.grading.manual_view import write_views
    from course_grader.grading.submissions import format_problems, inspect_submissions, record_zero, submitted_students

    for name in assignments:  # before anything is inspected or recorded; the backends trust it
        require_assignment(course.db_url, name)
    only = list(students) if students else None
    report = GradeReport(course, list(assignments), only)
    to_grade: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    first: dict[str, list[StudentResult]] = {}  # each assignment's malformed and missing, before its graded
    for name in assignments:
        problems = inspect_submissions(course, name, only)
        if problems:
            say(f"{name}: problems found in the submissions\n{format_problems(problems)}")
        blocked = {p.student for p in problems if p.blocking}
        missing[name] = sorted({p.student for p in problems if p.zero} - blocked)
        first[name] = [StudentResult(p.student, name, "malformed", p.problem) for p in problems if p.blocking]
        first[name] += [StudentResult(s, name, "missing", "nothing submitted: recorded as 0") for s in missing[name]]
        to_grade[name] = [s for s in submitted_students(course, name, only) if s not in blocked | set(missing[name])]
        if not to_grade[name]:
            say(f"{name}: no submissions to grade")
    graded = {name: names for name, names in to_grade.items() if names}
    if not graded:
        runs: dict[str, GradingRun] = {}
    elif scheduler is not None:
        runs = _on_dask(course, graded, say, scheduler=scheduler)
    elif workers > 1:
        runs = _on_cores(course, graded, say, workers=workers)
    else:
        runs = _serial(course, graded, say)
    for name in assignments:  # every backend's results recorded, and the written answers viewed, the same way
        report.results += first[name]
        if name in runs:
            report.results += runs[name].results
            if manual_views:
                views = write_views(course, name, graded[name])
                if views:
                    say(f"{name}: written answers beside each student's own run: {views[0].parent}/<student>.html")
        for student in missing[name]:
            record_zero(course, name, student)
    return report


# The grading backends: each grades ``assignment -> students`` of a course (the release checked and the
# students resolved by grade(), which trusts nothing else they say), configured by its keywords, and returns
# ``assignment -> GradingRun``; grade() records what they return the one same way.
Say = Callable[[str], None]


def _serial(course: Course, graded: Mapping[str, Sequence[str]], say: Say) -> dict[str, GradingRun]:
    """One nbgrader process for every assignment, one student after another."""
    from course_grader.grading.scores import autograde_many

    for name, names in graded.items():
        say(f"autograding {name}: {len(names)} students, 1 worker, profile {course.profile!r} ...")
    return autograde_many(course, graded)


def _on_cores(course: Course, graded: Mapping[str, Sequence[str]], say: Say, *, workers: int) -> dict[str, GradingRun]:
    """``workers`` students at once on this machine (:mod:`~course_grader.grading.parallel`)."""
    from course_grader.grading.parallel import grade_on_cores

    runs = {}
    for name, names in graded.items():
        say(f"autograding {name}: {len(names)} students, {workers} worker(s), profile {course.profile!r} ...")
        runs[name] = grade_on_cores(course, name, names, workers)
    return runs


def _on_dask(course: Course, graded: Mapping[str, Sequence[str]], say: Say, *, scheduler: Any) -> dict[str, GradingRun]:
    """Every notebook of every assignment on the Dask cluster at ``scheduler`` at once."""
    from course_grader.grading.dask_grading import grade_on_dask

    say(f"autograding {', '.join(graded)} on the Dask cluster at {scheduler}: "
        f"{sum(map(len, graded.values()))} notebooks, profile {course.profile!r} ...")
    return {run.assignment: run for run in grade_on_dask(course, graded, scheduler)}
