"""Held until an instructor decides: ``course review``.

A graded submission is **held** when the static scan flagged it (``course flags``,
:func:`course_grader.grading.scores.submission_flags`) or when one of its answer cells is
similar to the package's public reference or to another student's answer
(:mod:`course_grader.grading.similarity`, at or above its threshold). A held submission has no
final score in the export (``status`` = ``held``, the score columns empty) and gets no
feedback (``course feedback`` skips it, and removes an earlier copy so that
``nbgrader release_feedback`` cannot release it) until the instructor decides:

    course review [A]                               held submissions and their evidence
    course review A S --accept [--reason R]         the autograded score stands
    course review A S --zero --reason R             every graded cell 0
    course review A S --score N --reason R          total N, each cell N/max of its points

A decision is kept in the gradebook through nbgrader's own API, so formgrader shows it and
it lives wherever the gradebook lives (sqlite or PostgreSQL): each graded cell's
``manual_score`` (which nbgrader's ``Grade.score`` prefers to the autograder's, and which
re-grading keeps) and one line in the ``manual_comment`` of the submission's first answer
cell, ``[course review] <action> <score>/<max> by <who> at <UTC time>: <reason>`` (``who``:
``--by``, else the login name). The comment is part of the student's feedback. The latest
decision replaces an earlier one; a decided submission is final whatever its evidence.
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from course_grader.grading.similarity import (
    THRESHOLD,
    ClassComparison,
    Pair,
    compare_class_saved,
    write_similarity_csv,
)

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = [
    "MARK",
    "ACTIONS",
    "Decision",
    "Review",
    "read_decisions",
    "record_decision",
    "decide",
    "review_submissions",
    "held",
    "format_review",
]

MARK = "[course review]"
ACTIONS = ("accept", "zero", "score")

_DECISION = re.compile(
    r"^\[course review\] (?P<action>accept|zero|score) (?P<score>[-+\d.e]+)/(?P<max>[-+\d.e]+) by (?P<by>.+?) "
    r"at (?P<when>\d{4}-\d\d-\d\dT[\d:.]+Z?): ?(?P<reason>.*)$",
    re.M,
)


@dataclass(frozen=True)
class Decision:
    """An instructor's decision on one held submission, as recorded in the gradebook."""

    assignment: str
    student: str
    action: str
    score: float
    max_score: float
    by: str
    when: str
    reason: str = ""

    def comment(self) -> str:
        """The line kept in nbgrader's ``manual_comment``."""
        reason = " ".join(self.reason.split())
        return f"{MARK} {self.action} {self.score:g}/{self.max_score:g} by {self.by} at {self.when}: {reason}"

    def __str__(self) -> str:
        text = f"{self.action}: {self.score:g} / {self.max_score:g}, by {self.by} at {self.when}"
        return text + (f" ({self.reason})" if self.reason else "")


@dataclass
class Review:
    """One submission's evidence and decision. ``held`` while it has evidence and no decision."""

    assignment: str
    student: str
    flags: list[Any] = field(default_factory=list)
    similar: list[Pair] = field(default_factory=list)
    decision: Decision | None = None

    @property
    def held(self) -> bool:
        return bool(self.flags or self.similar) and self.decision is None

    @property
    def key(self) -> tuple[str, str]:
        return (self.assignment, self.student)

    def evidence(self) -> list[str]:
        """One line per flag (cell, line, rule) and per similar pair (with whom, score)."""
        lines = [f"flag: {flag}" for flag in self.flags]
        lines += [f"similar: {pair.describe(self.student)}" for pair in self.similar]
        return lines


# ---------------------------------------------------------------------------------------------
# The gradebook


def _gradebook(db_url: str):
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    return Gradebook(db_url)


def read_decisions(db_url: str) -> dict[tuple[str, str], Decision]:
    """``(assignment, student) -> latest decision`` found in the gradebook's comments."""
    from nbgrader.api import Comment

    found: dict[tuple[str, str], Decision] = {}
    with _gradebook(db_url) as gradebook:
        comments = gradebook.db.query(Comment).filter(Comment.manual_comment.contains(MARK)).all()
        for comment in comments:
            submission = comment.notebook.assignment
            key = (submission.assignment.name, submission.student_id)
            for match in _DECISION.finditer(comment.manual_comment or ""):
                decision = Decision(key[0], key[1], match["action"], float(match["score"]), float(match["max"]),
                                    match["by"], match["when"], match["reason"].strip())
                if key not in found or decision.when >= found[key].when:
                    found[key] = decision
    return found


def _strip_mark(text: str | None) -> str:
    return "\n".join(line for line in (text or "").splitlines() if not line.startswith(MARK)).strip()


def record_decision(
    db_url: str,
    assignment: str,
    student: str,
    action: str,
    *,
    score: float | None = None,
    reason: str = "",
    by: str | None = None,
    when: str | None = None,
    cell_order: Sequence[str] = (),
) -> Decision:
    """Record a decision in the gradebook (nbgrader's manual scores and manual comment).

    ``accept``: each autograded cell's manual score is its autograded score (cells only a
    person can grade are left to formgrader); ``zero``: every graded cell 0; ``score``: the
    total ``score``, each graded cell getting the same fraction of its points. The comment goes
    to the first answer cell of ``cell_order`` (else the first by name). Raises LookupError
    when the submission is not in the gradebook, ValueError for a wrong action or score."""
    from nbgrader.api import MissingEntry

    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if (action == "score") != (score is not None):
        raise ValueError("a score is given with --score, and only then")
    by = by or getpass.getuser()
    when = when or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with _gradebook(db_url) as gradebook:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            raise LookupError(f"no submission of {assignment} by {student} in the gradebook: grade it first "
                              f"(course grade {assignment} --student {student})") from None
        grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
        total_max = sum(float(grade.max_score or 0) for grade in grades)
        given = 0.0 if score is None else float(score)  # set exactly when action == "score" (checked above)
        if action == "score" and not 0 <= given <= total_max:
            raise ValueError(f"--score must be between 0 and {total_max:g} (the points of {assignment}), not {score:g}")
        decided = 0.0
        for grade in grades:
            points = float(grade.max_score or 0)
            if action == "accept":
                if grade.auto_score is None:  # a written answer: still graded by a person
                    decided += float(grade.manual_score or 0)
                    continue
                grade.manual_score = float(grade.auto_score)
            elif action == "zero":
                grade.manual_score = 0.0
            else:
                grade.manual_score = given * points / total_max if total_max else 0.0
            grade.needs_manual_grade = False
            decided += grade.manual_score + float(grade.extra_credit or 0)
        comments = [comment for notebook in submission.notebooks for comment in notebook.comments]
        if not comments:
            raise LookupError(f"{assignment} has no answer cell to record the decision in")
        rank = {name: index for index, name in enumerate(cell_order)}
        target = min(comments, key=lambda c: (rank.get(c.name, len(rank)), c.notebook.name, c.name))
        decision = Decision(assignment, student, action, round(decided, 6), total_max, by, when, reason.strip())
        for comment in comments:
            if comment is target:
                comment.manual_comment = "\n".join(filter(None, [_strip_mark(comment.manual_comment), decision.comment()]))
            elif MARK in (comment.manual_comment or ""):
                comment.manual_comment = _strip_mark(comment.manual_comment) or None
        gradebook.db.commit()
    return decision


def _answer_order(course: Course, assignment: str) -> list[str]:
    """The answer cells' grade ids in notebook order (where the decision's comment goes)."""
    from course_utils.cells import nbgrader_meta, read

    order = []
    for path in sorted(course.path("source", assignment=assignment).glob("*.ipynb")):
        try:
            order += [nbgrader_meta(c)["grade_id"] for c in read(path).cells
                      if nbgrader_meta(c).get("solution") and nbgrader_meta(c).get("grade_id")]
        except Exception:  # noqa: BLE001 - without the source, the first cell by name
            continue
    return order


def decide(course: Course, assignment: str, student: str, action: str, *, score: float | None = None,
           reason: str = "", by: str | None = None) -> Decision:
    """:func:`record_decision` in the course's configured gradebook."""
    return record_decision(course.db_url, assignment, student, action, score=score,
                           reason=reason, by=by, cell_order=_answer_order(course, assignment))


# ---------------------------------------------------------------------------------------------
# Evidence


def review_submissions(
    course: Course,
    assignments: Iterable[str],
    *,
    flags: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    threshold: float = THRESHOLD,
    csv_dir: Path | None = None,
    comparisons: dict[str, ClassComparison] | None = None,
) -> dict[tuple[str, str], Review]:
    """``(assignment, student) -> Review`` for every submission (in ``submitted/``) with
    evidence or a decision. ``flags``: the scan's, when the caller has them already.
    ``csv_dir``: write ``<assignment>-similarity.csv`` there. ``comparisons`` is filled with
    each assignment's :class:`ClassComparison`."""
    from course_grader.grading.scores import submission_flags
    from course_grader.grading.submissions import submitted_students

    names = list(dict.fromkeys(assignments))
    if flags is None:
        flags = submission_flags(course, [(a, s) for a in names for s in submitted_students(course, a)])
    reviews: dict[tuple[str, str], Review] = {}

    def get(key: tuple[str, str]) -> Review:
        return reviews.setdefault(key, Review(*key))

    for (assignment, student), found in flags.items():
        if assignment in names and found:
            get((assignment, student)).flags = list(found)
    for assignment in names:
        comparison = compare_class_saved(course, assignment, threshold=threshold)  # computed once per class state
        if comparisons is not None:
            comparisons[assignment] = comparison
        if csv_dir is not None:
            write_similarity_csv(comparison, Path(csv_dir) / f"{assignment}-similarity.csv")
        for pair in comparison.pairs:
            for student in pair.students:
                get((assignment, student)).similar.append(pair)
    for key, decision in read_decisions(course.db_url).items():
        if key[0] in names:
            get(key).decision = decision
    return dict(sorted(reviews.items()))


def held(reviews: Mapping[tuple[str, str], Review]) -> set[tuple[str, str]]:
    """The submissions still held (evidence, no decision)."""
    return {key for key, review in reviews.items() if review.held}


def format_review(reviews: Mapping[tuple[str, str], Review], assignments: Sequence[str],
                  comparisons: Mapping[str, ClassComparison] | None = None) -> str:
    """The instructor's view: per assignment, each held submission with its evidence, then
    the decided ones."""
    lines = []
    for assignment in assignments:
        mine = [r for (a, _), r in reviews.items() if a == assignment]
        waiting = [r for r in mine if r.held]
        decided = [r for r in mine if r.decision is not None]
        head = f"{assignment}: {len(waiting)} held, {len(decided)} decided"
        comparison = (comparisons or {}).get(assignment)
        if comparison is not None:
            compared = sum(comparison.compared.values())
            skipped = sum(comparison.trivial.values())
            head += (f" (similarity >= {comparison.threshold:g}: {compared} answer(s) compared, "
                     f"{skipped} too short or blank)")
            if comparison.canonical:
                head += ("; compared between students only, the model answer being the package's own code: "
                         + ", ".join(f"{cell} ({score:.2f})" for cell, score in sorted(comparison.canonical.items())))
        lines.append(head)
        for review in waiting:
            lines.append(f"  HELD {review.student}")
            lines.extend(f"    {line}" for line in review.evidence())
            lines.append(f"    decide: course review {assignment} {review.student} --accept | --zero | "
                         f"--score N --reason \"...\"")
        for review in decided:
            lines.append(f"  decided {review.student}: {review.decision}")
    return "\n".join(lines)
