"""A generated class that proves the grading works.

For each assignment the class has a student who submits the solutions, one who submits
the untouched release, and students whose answers hold the curated mistakes (the
solutions with wrong answers put in). Grading it with real ``nbgrader autograde`` must
give full marks, zero, and lost points in the tests each mistake names; a student who could
not be graded, or whose grades hold no points at all (0/0), fails every expectation.

The class is the course's own code, so it is graded in the sandbox where one works and
unsandboxed (saying so, :attr:`DemoReport.unsandboxed`) where none does; students' real
submissions never are, unless the instructor asks (``course grade --no-sandbox``).
"""

from __future__ import annotations

import copy
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import nbformat

from course_utils.cells import answer_cells, fill_answers, nbgrader_meta, read, solution_code
from course_grader.course import Course
from course_grader.grading.pipeline import grade
from course_grader.grading.feedback import generate_feedback
from course_grader.grading.scores import NotebookScore, read_scores
from course_grader.authoring.mistakes import Mistake, load_mistakes
from course_grader.grading.runner import NbgraderError
from course_grader.authoring.release import generate_release, prepare_scratch_course

__all__ = ["DemoStudent", "Verdict", "DemoReport", "demo_students", "write_submissions", "grade_demo_class",
           "sandbox_choice"]

SOLUTION_STUDENT = "ada-solutions"
BLANK_STUDENT = "bo-blank"
MISTAKES_STUDENT = "cy-mistakes"


@dataclass(frozen=True)
class DemoStudent:
    """A generated student: ``kind`` is "solution", "blank" or "mistake"; a mistake student
    submits the solutions with each of ``mistakes`` made (at most one per answer cell)."""

    student_id: str
    kind: str
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """One expectation about the grades, and whether it held."""

    assignment: str
    student: str
    expectation: str
    ok: bool
    detail: str = ""


@dataclass
class DemoReport:
    rows: list[NotebookScore]
    verdicts: list[Verdict] = field(default_factory=list)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)
    unsandboxed: str = ""  # why the class was graded without the sandbox ("": in the sandbox)

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts) and not self.failed


def demo_students(mistakes: Sequence[Mistake], *, isolated: bool = False, baseline: bool = True) -> list[DemoStudent]:
    """The solution student, the blank student, and the mistakes.

    ``isolated=False`` (the demo): one student holding the first mistake of every exercise.
    ``isolated=True`` (the tests): one student per mistake, so each test cell is shown to
    reject each mistake on its own, with every other answer right.
    """
    students = [DemoStudent(SOLUTION_STUDENT, "solution"), DemoStudent(BLANK_STUDENT, "blank")] if baseline else []
    if isolated:
        for index, mistake in enumerate(mistakes, 1):
            students.append(DemoStudent(f"mistake{index:02d}-{mistake.slug}", "mistake", (mistake,)))
    elif mistakes:
        first_per_cell: dict[str, Mistake] = {}
        for mistake in mistakes:
            first_per_cell.setdefault(mistake.cell, mistake)
        students.append(DemoStudent(MISTAKES_STUDENT, "mistake", tuple(first_per_cell.values())))
    return students


def write_submissions(course: Course, assignment: str, students: Sequence[DemoStudent]) -> None:
    """Write ``submitted/<student>/<assignment>/<notebook>.ipynb`` for every student."""
    sources = sorted(course.path("source", assignment=assignment).glob("*.ipynb"))
    for student in students:
        folder = course.path("submitted", student.student_id, assignment)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    for source_path in sources:
        release = read(course.path("release", assignment=assignment) / source_path.name)
        answers = solution_code(read(source_path))
        for student in students:
            if student.kind == "blank":
                submission = forging_blank(release)
            else:
                student_answers = dict(answers)
                for mistake in student.mistakes:
                    if mistake.cell in answers:
                        student_answers[mistake.cell] = mistake.apply(answers[mistake.cell])
                submission = fill_answers(release, student_answers)
            nbformat.write(submission, str(course.path("submitted", student.student_id, assignment) / source_path.name))
    known = {nbgrader_meta(c)["grade_id"] for p in sources for c in answer_cells(read(p))}
    for student in students:
        for mistake in student.mistakes:
            if mistake.cell not in known:
                raise KeyError(f"{assignment}: mistake {mistake.name!r} names cell {mistake.cell!r}, which is not an answer cell")


# The blank student also tries to write its own grade, the three ways a kernel can put an
# ``execute_result`` into a test cell (nbgrader would read the first one as the cell's score):
# each stub calls ``sys.displayhook`` and sends one on iopub before it raises, and a thread started
# by the first answer cell publishes one every 50 ms into whatever cell runs. It must still score 0:
# a test cell's points are the checker's verdict alone (course_grader.grading.verdict).
_FORGE_STUB = ("import sys; sys.displayhook('full marks'); _k = get_ipython().kernel; "
               "_k.session.send(_k.iopub_socket, 'execute_result', {'data': {'text/plain': '1000'}, 'metadata': {}, "
               "'execution_count': 1}, parent=_k.get_parent()); raise NotImplementedError()")
_FORGE_THREAD = (
    "import threading as _threading, time as _time\n"
    "def _forge_forever():\n"
    "    while True:\n"
    "        _time.sleep(0.05)\n"
    "        try:\n"
    "            get_ipython().displayhook('full marks')\n"
    "        except Exception:\n"
    "            pass\n"
    "_threading.Thread(target=_forge_forever, daemon=True).start()\n")


def forging_blank(release: Any) -> Any:
    """The release as a blank student hands it in, each stub trying to forge its cell's score."""
    blank = copy.deepcopy(release)
    first = True
    for cell in blank.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        cell.source = "\n".join(line.replace("raise NotImplementedError()", _FORGE_STUB) for line in cell.source.split("\n"))
        if first:
            cell.source = _FORGE_THREAD + cell.source
            first = False
    return blank


def _expectation(student: DemoStudent) -> str:
    if student.kind == "solution":
        return "solutions score full marks"
    if student.kind == "blank":
        return "blank release scores zero"
    return "rejected: " + "; ".join(m.name for m in student.mistakes)


def _verdicts(
    assignment: str,
    students: Sequence[DemoStudent],
    rows: Sequence[NotebookScore],
    failed: dict[tuple[str, str], str] | None = None,
) -> list[Verdict]:
    """One verdict per student. A student nbgrader could not grade (``failed``: the reason),
    without grades, or whose grades hold no autograded points (0/0) fails, with the reason."""
    failed = failed or {}
    by_student: dict[str, list[NotebookScore]] = {}
    for row in rows:
        if row.assignment == assignment:
            by_student.setdefault(row.student, []).append(row)
    verdicts = []
    for student in students:
        expectation = _expectation(student)
        graded = by_student.get(student.student_id)
        if (assignment, student.student_id) in failed:
            verdicts.append(Verdict(assignment, student.student_id, expectation, False,
                                    f"not graded: {failed[(assignment, student.student_id)]}"))
            continue
        if not graded:
            verdicts.append(Verdict(assignment, student.student_id, expectation, False, "not graded: no grades in the gradebook"))
            continue
        cells = {gid: cell for row in graded for gid, cell in row.cells.items()}
        auto = {gid: c for gid, c in cells.items() if not c.needs_manual_grade}
        score = sum(c.score for c in auto.values())
        best = sum(c.max_score for c in auto.values())
        if best <= 0:
            verdicts.append(Verdict(assignment, student.student_id, expectation, False,
                                    f"{score:g}/{best:g}: no autograded points in the gradebook, so nothing was checked"))
            continue
        if student.kind == "solution":
            lost = [gid for gid, c in auto.items() if c.score < c.max_score]
            verdicts.append(Verdict(assignment, student.student_id, "solutions score full marks", not lost,
                                    f"{score:g}/{best:g}" + (f"; lost points in {lost}" if lost else "")))
        elif student.kind == "blank":
            scored = [gid for gid, c in auto.items() if c.score > 0]
            verdicts.append(Verdict(assignment, student.student_id, "blank release scores zero", not scored,
                                    f"{score:g}/{best:g}" + (f"; scored in {scored}" if scored else "")))
        else:
            targets = sorted({gid for mistake in student.mistakes for gid in mistake.rejected_by})
            missing = [gid for gid in targets if gid not in cells]
            kept = [gid for gid in targets if gid in cells and cells[gid].score >= cells[gid].max_score]
            detail = f"{score:g}/{best:g}"
            if missing:
                detail += f"; no test cell {missing}"
            if kept:
                detail += f"; full marks kept in {kept}"
            verdicts.append(Verdict(assignment, student.student_id, expectation, not missing and not kept, detail))
    return verdicts


def sandbox_choice(sandbox: bool | None = None) -> str:
    """Why the demo class is graded without the sandbox, "" when it is graded in it.

    ``sandbox``: None uses it where it works here (:func:`sandbox_problem`), False never,
    True always (grading then fails where it does not work). ``COURSE_SANDBOX=off`` wins."""
    from course_grader.sandbox.bubblewrap import sandbox_enabled, sandbox_problem

    if not sandbox_enabled():
        return "COURSE_SANDBOX=off is set"
    if sandbox is None:
        return sandbox_problem() or ""
    return "" if sandbox else "asked for"


def _grade_part(
    root: Path,
    course_dir: Path,
    assignments: Sequence[str],
    class_lists: dict[str, list[DemoStudent]],
    *,
    feedback: bool,
    report: DemoReport,
    progress: Callable[[Sequence[str], float], None] | None,
) -> list[NotebookScore]:
    """Release, submit and autograde ``assignments`` in the scratch course ``course_dir``, through the
    one grading pipeline (:func:`~course_grader.grading.pipeline.grade`), serially. The scratch course
    holds exactly these assignments, so one nbgrader process releases them all, and one grades them all."""
    prepare_scratch_course(root, course_dir, assignments)
    course = Course.open(course_dir, sandbox=not report.unsandboxed)
    generate_release(course, assignments, verbose=False, one_process=True)
    for name in assignments:
        write_submissions(course, name, class_lists[name])
    started = time.perf_counter()
    graded = grade(course, list(assignments), workers=1, manual_views=False, say=lambda line: None)
    report.failed.update(graded.failed)
    if progress is not None:
        progress(assignments, time.perf_counter() - started)
    for name in assignments if feedback else ():
        try:
            generate_feedback(course, name)
        except NbgraderError as error:
            print(f"  feedback for {name} failed: {error}", flush=True)
    return read_scores(course)


def grade_demo_class(
    root: Path,
    course_dir: Path,
    assignments: Sequence[str],
    *,
    with_mistakes: bool = True,
    isolated: bool = False,
    baseline: bool = True,
    mistake_filter: Callable[[int, Mistake], bool] | None = None,
    feedback: bool = True,
    verbose: bool = True,
    workers: int = 1,
    sandbox: bool | None = None,
) -> DemoReport:
    """Build the demo class in ``course_dir``, autograde it and check the grades.

    ``isolated`` gives every mistake its own student; ``mistake_filter(index, mistake)``
    keeps only some, and ``baseline=False`` leaves out the solution and blank students
    (the tests split one assignment's class across workers with these).

    ``workers > 1`` grades that many assignments at once, each share in its own scratch
    course ``course_dir/parts/<k>/`` (own gradebook: nbgrader's sqlite takes one writer);
    the feedback is gathered in ``course_dir/feedback/``.

    ``sandbox`` (see :func:`sandbox_choice`): by default the class is graded in the sandbox
    where one works and unsandboxed elsewhere (it is the course's own code);
    ``report.unsandboxed`` says why it was.
    """
    if course_dir.exists():
        shutil.rmtree(course_dir)
    report = DemoReport(rows=[], unsandboxed=sandbox_choice(sandbox))
    _grade_class(root, course_dir, assignments, report, with_mistakes=with_mistakes, isolated=isolated,
                 baseline=baseline, mistake_filter=mistake_filter, feedback=feedback, verbose=verbose, workers=workers)
    return report


def _grade_class(
    root: Path,
    course_dir: Path,
    assignments: Sequence[str],
    report: DemoReport,
    *,
    with_mistakes: bool,
    isolated: bool,
    baseline: bool,
    mistake_filter: Callable[[int, Mistake], bool] | None,
    feedback: bool,
    verbose: bool,
    workers: int,
) -> None:
    class_lists = {}
    for name in assignments:
        mistakes = load_mistakes(root, name) if with_mistakes else []
        if mistake_filter is not None:
            mistakes = [m for i, m in enumerate(mistakes) if mistake_filter(i, m)]
        class_lists[name] = demo_students(mistakes, isolated=isolated, baseline=baseline)
    done: list[str] = []
    lock = threading.Lock()

    def progress(names: Sequence[str], seconds: float) -> None:
        if verbose:
            with lock:
                done.extend(names)
                students = sum(len(class_lists[name]) for name in names)
                print(f"[autograde {len(done)}/{len(assignments)}] {', '.join(names)}: {students} notebooks ... "
                      f"done ({seconds:.1f} s)", flush=True)

    workers = max(1, min(workers, len(assignments)))
    if workers == 1:
        report.rows = _grade_part(root, course_dir, assignments, class_lists, feedback=feedback, report=report,
                                  progress=progress)
    else:
        shares = [list(assignments[k::workers]) for k in range(workers)]
        parts = [course_dir / "parts" / str(k) for k in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(_grade_part, root, part, share, class_lists, feedback=feedback, report=report,
                                   progress=progress)
                       for part, share in zip(parts, shares)]
            report.rows = sorted((row for future in futures for row in future.result()),
                                 key=lambda r: (r.assignment, r.student, r.notebook))
        for part in parts:
            if (part / "feedback").is_dir():
                shutil.copytree(part / "feedback", course_dir / "feedback", dirs_exist_ok=True)
    for name in assignments:
        report.verdicts.extend(_verdicts(name, class_lists[name], report.rows, report.failed))
