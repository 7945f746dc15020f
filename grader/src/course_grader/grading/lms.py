"""Grades into the LMS: ``course export --format canvas | moodle | lti-ags [--post]``.

The scores are the gradebook's (:func:`course_grader.grading.scores.read_scores`), and a submission
held for review (:mod:`course_grader.grading.review`) is never exported as a number: every format
leaves it pending, as it does a submission with a written answer nobody has graded yet.

- **Canvas** (gradebook import CSV): ``Student, ID, SIS User ID, SIS Login ID, Section``, then one
  column per assignment, ``Name (canvas id)``, and a ``Points Possible`` row. Students are matched
  to the roster (Canvas's own gradebook export serves) by SIS User ID, then SIS Login ID, then
  name; a pending cell is blank, which Canvas reads as "no change", never as 0.
- **Moodle** (grade import CSV): an identifier column (``ID number`` from the roster, else
  ``Username``: nbgrader's student id) and one column per assignment, optionally a
  ``Name (Feedback)`` column each; a pending cell is blank (Moodle's import skips it).
- **LTI 1.3 AGS**: one score object per student and assignment (``userId``, ``scoreGiven``,
  ``scoreMaximum``, ``activityProgress``, ``gradingProgress``, ``timestamp``); a pending one is
  ``PendingManual`` with no ``scoreGiven``. :func:`post_scores` sends them to each line item's
  ``/scores`` endpoint with an OAuth2 token (client credentials, a JWT assertion signed with the
  tool's key), through ``pylti1p3`` (the grader's ``lms`` extra).

Which LMS item each assignment is, and the platform's registration, come from a small JSON file
(:func:`read_lms_config`)::

    {"assignments": {"03_self_attention": {"name": "Self-attention", "canvas_id": "1234",
                                            "lineitem": "https://lms.example/api/lti/courses/1/line_items/7"}},
     "platform": {"client_id": "...", "token_url": "https://lms.example/login/oauth2/token",
                  "private_key_file": "tool-private.pem", "kid": "...", "audience": "..."}}
"""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from course_grader.course import Course
    from course_grader.grading.scores import NotebookScore

__all__ = [
    "FORMATS",
    "FINAL",
    "HELD",
    "UNGRADED",
    "SCORE_MEDIA_TYPE",
    "SCORE_SCOPE",
    "AssignmentGrade",
    "RosterEntry",
    "RosterProblem",
    "RosterMatch",
    "LmsItem",
    "Platform",
    "LmsConfig",
    "LmsExport",
    "PostReport",
    "assignment_grades",
    "read_roster",
    "match_roster",
    "read_lms_config",
    "write_canvas",
    "parse_canvas",
    "write_moodle",
    "parse_moodle",
    "ags_scores",
    "write_ags",
    "post_scores",
    "write_problems",
    "export_lms",
]

FORMATS = ("canvas", "moodle", "lti-ags")
FINAL, HELD, UNGRADED = "final", "held", "ungraded"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "    Points Possible"  # as Canvas's own export writes it


# ---------------------------------------------------------------------------------------------
# Grades, per student and assignment


@dataclass(frozen=True)
class AssignmentGrade:
    """One student's grade on one assignment (its notebooks summed), as an LMS should see it.

    ``status``: ``final`` (``score`` is the grade), ``held`` (awaiting ``course review``) or
    ``ungraded`` (a written answer still to grade by hand); ``score`` is None unless final."""

    student: str
    assignment: str
    status: str
    score: float | None
    max_score: float

    @property
    def final(self) -> bool:
        return self.status == FINAL


def assignment_grades(rows: Sequence[NotebookScore], held: Collection[tuple[str, str]] = ()) -> list[AssignmentGrade]:
    """One :class:`AssignmentGrade` per (assignment, student) of the gradebook's ``rows``; a held
    submission, or one with a cell that still needs a manual grade, has no score."""
    held = set(held)
    scores: dict[tuple[str, str], float] = defaultdict(float)
    maxima: dict[tuple[str, str], float] = defaultdict(float)
    manual: set[tuple[str, str]] = set()
    for row in rows:
        key = (row.assignment, row.student)
        scores[key] += row.score
        maxima[key] += row.max_score
        if row.needs_manual_grade:
            manual.add(key)
    grades = []
    for key in sorted(scores):
        status = HELD if key in held else UNGRADED if key in manual else FINAL
        grades.append(AssignmentGrade(key[1], key[0], status, scores[key] if status == FINAL else None, maxima[key]))
    return grades


def _points(value: float) -> str:
    """A score as the LMS reads it: up to 4 decimals, no trailing zeros."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _maxima(grades: Iterable[AssignmentGrade]) -> dict[str, float]:
    """Each assignment's points possible (the largest total any student's notebooks carry)."""
    found: dict[str, float] = {}
    for grade in grades:
        found[grade.assignment] = max(found.get(grade.assignment, 0.0), grade.max_score)
    return dict(sorted(found.items()))


# ---------------------------------------------------------------------------------------------
# The roster


@dataclass(frozen=True)
class RosterEntry:
    """One student of the LMS roster (Canvas's columns; ``lti_user_id``: the LTI ``sub``, optional)."""

    name: str
    canvas_id: str = ""
    sis_id: str = ""
    login: str = ""
    section: str = ""
    lti_user_id: str = ""


@dataclass(frozen=True)
class RosterProblem:
    """A graded student the roster cannot place: ``unmatched``, ``ambiguous`` or ``no identifier``."""

    student: str
    problem: str
    candidates: tuple[str, ...] = ()


@dataclass
class RosterMatch:
    """nbgrader student id -> roster entry, and the students that could not be matched."""

    matched: dict[str, RosterEntry] = field(default_factory=dict)
    problems: list[RosterProblem] = field(default_factory=list)


def read_roster(path: Path) -> list[RosterEntry]:
    """The students of a roster CSV with Canvas's columns (``Student``, ``ID``, ``SIS User ID``,
    ``SIS Login ID``, ``Section``; extra columns ignored, ``LTI User ID`` kept). Canvas's own
    gradebook export serves as it is: its ``Points Possible`` and test-student rows are skipped."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "Student" not in reader.fieldnames:
            raise ValueError(f"{path}: a roster needs a 'Student' column and {', '.join(CANVAS_COLUMNS[1:])} "
                             f"(Canvas's gradebook export has them)")
        entries = []
        for row in reader:
            name = (row.get("Student") or "").strip()
            if not name or name == "Points Possible" or name.lower() in ("student, test", "test student"):
                continue
            entries.append(RosterEntry(name, *((row.get(column) or "").strip() for column in
                                               ("ID", "SIS User ID", "SIS Login ID", "Section", "LTI User ID"))))
    return entries


def _name_key(name: str) -> tuple[str, ...]:
    """A name for matching: accents, case, punctuation and word order dropped ("Lovelace, Ada" = "ada lovelace")."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    return tuple(sorted(re.findall(r"\w+", text)))


def match_roster(students: Mapping[str, str], roster: Sequence[RosterEntry]) -> RosterMatch:
    """Match each nbgrader student (``id -> full name``, "" when unknown) to one roster entry:
    by SIS User ID, then SIS Login ID (or its part before ``@``), then name. More than one
    candidate at the first step that finds any, or two students on one entry, is ambiguous."""
    by_sis: dict[str, list[RosterEntry]] = defaultdict(list)
    by_login: dict[str, list[RosterEntry]] = defaultdict(list)
    by_local: dict[str, list[RosterEntry]] = defaultdict(list)
    by_name: dict[tuple[str, ...], list[RosterEntry]] = defaultdict(list)
    for entry in roster:
        if entry.sis_id:
            by_sis[entry.sis_id].append(entry)
        if entry.login:
            by_login[entry.login.casefold()].append(entry)
            if "@" in entry.login:
                by_local[entry.login.split("@")[0].casefold()].append(entry)
        by_name[_name_key(entry.name)].append(entry)
    result = RosterMatch()
    claimed: dict[int, list[str]] = defaultdict(list)
    for student in sorted(students):
        key = _name_key(students[student]) if students[student] else ()
        for candidates in (by_sis.get(student), by_login.get(student.casefold()),
                           by_local.get(student.casefold()), by_name.get(key) if key else None):
            if candidates:
                break
        else:
            result.problems.append(RosterProblem(student, "unmatched"))
            continue
        if len(candidates) > 1:
            result.problems.append(RosterProblem(student, "ambiguous", tuple(_describe(e) for e in candidates)))
            continue
        result.matched[student] = candidates[0]
        claimed[id(candidates[0])].append(student)
    for students_on_entry in claimed.values():
        if len(students_on_entry) > 1:  # two nbgrader students, one person in the LMS
            entry = result.matched[students_on_entry[0]]
            for student in students_on_entry:
                del result.matched[student]
                others = tuple(s for s in students_on_entry if s != student)
                result.problems.append(RosterProblem(student, "ambiguous",
                                                     (f"{_describe(entry)} also matched by {', '.join(others)}",)))
    result.problems.sort(key=lambda p: p.student)
    return result


def _describe(entry: RosterEntry) -> str:
    ids = ", ".join(f"{label} {value}" for label, value in
                    (("SIS", entry.sis_id), ("login", entry.login), ("id", entry.canvas_id)) if value)
    return f"{entry.name} ({ids})" if ids else entry.name


def write_problems(problems: Sequence[RosterProblem], path: Path) -> Path:
    """The side file: one row per student the export could not place (``student, problem, candidates``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "problem", "candidates"])
        for problem in problems:
            writer.writerow([problem.student, problem.problem, "; ".join(problem.candidates)])
    return path


# ---------------------------------------------------------------------------------------------
# Which LMS item each assignment is, and the platform


@dataclass(frozen=True)
class LmsItem:
    """An assignment in the LMS: its ``name`` there, Canvas's id, the AGS line item URL."""

    name: str
    canvas_id: str = ""
    lineitem: str = ""


@dataclass(frozen=True)
class Platform:
    """The tool's LTI 1.3 registration on the platform (what an access token needs)."""

    client_id: str
    token_url: str
    private_key: str = field(repr=False)
    kid: str = ""
    audience: str = ""


@dataclass
class LmsConfig:
    items: dict[str, LmsItem] = field(default_factory=dict)
    platform: Platform | None = None

    def item(self, assignment: str) -> LmsItem:
        return self.items.get(assignment) or LmsItem(assignment)


def read_lms_config(path: Path | None) -> LmsConfig:
    """The JSON file of the module's docstring (``private_key_file`` relative to it); an empty
    configuration when ``path`` is None."""
    if path is None:
        return LmsConfig()
    path = Path(path)
    data = json.loads(path.read_text())
    items = {name: LmsItem(str(item.get("name") or name), str(item.get("canvas_id") or ""), str(item.get("lineitem") or ""))
             for name, item in (data.get("assignments") or {}).items()}
    platform = None
    if data.get("platform"):
        spec = data["platform"]
        missing = [key for key in ("client_id", "token_url", "private_key_file") if not spec.get(key)]
        if missing:
            raise ValueError(f"{path}: platform needs {', '.join(missing)}")
        key_file = Path(spec["private_key_file"])
        key_file = key_file if key_file.is_absolute() else path.parent / key_file
        platform = Platform(str(spec["client_id"]), str(spec["token_url"]), key_file.read_text(),
                            str(spec.get("kid") or ""), str(spec.get("audience") or ""))
    return LmsConfig(items, platform)


# ---------------------------------------------------------------------------------------------
# Canvas


def _canvas_header(item: LmsItem) -> str:
    return f"{item.name} ({item.canvas_id})" if item.canvas_id else item.name


def write_canvas(grades: Sequence[AssignmentGrade], match: RosterMatch, config: LmsConfig, path: Path) -> Path:
    """Canvas's gradebook import CSV: the roster's columns, one column per assignment
    (``Name (canvas id)``), a ``Points Possible`` row, one row per matched student (roster
    order by name); a held or ungraded cell is blank."""
    maxima = _maxima(grades)
    assignments = list(maxima)
    by_key = {(g.assignment, g.student): g for g in grades}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_COLUMNS, *(_canvas_header(config.item(a)) for a in assignments)])
        writer.writerow([POINTS_POSSIBLE, "", "", "", "", *(_points(maxima[a]) for a in assignments)])
        for student, entry in sorted(match.matched.items(), key=lambda item: (item[1].name, item[0])):
            cells = []
            for assignment in assignments:
                grade = by_key.get((assignment, student))
                cells.append(_points(grade.score) if grade is not None and grade.score is not None else "")
            writer.writerow([entry.name, entry.canvas_id, entry.sis_id, entry.login, entry.section, *cells])
    return path


def parse_canvas(path: Path) -> tuple[dict[str, float], dict[str, dict[str, float | None]]]:
    """A Canvas gradebook CSV read back: ``(points possible per column, SIS User ID (else login)
    -> column -> score or None for a blank cell)``."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        columns = header[len(CANVAS_COLUMNS):]
        possible: dict[str, float] = {}
        students: dict[str, dict[str, float | None]] = {}
        for row in reader:
            values = row[len(CANVAS_COLUMNS):]
            if row[0].strip() == "Points Possible":
                possible = {c: float(v) for c, v in zip(columns, values) if v.strip()}
                continue
            key = row[2] or row[3]
            students[key] = {c: float(v) if v.strip() else None for c, v in zip(columns, values)}
    return possible, students


# ---------------------------------------------------------------------------------------------
# Moodle


def _feedback(grade: AssignmentGrade) -> str:
    if grade.status == HELD:
        return "held for review"
    if grade.status == UNGRADED:
        return "a written answer is still to be graded"
    return f"{_points(grade.score or 0.0)} / {_points(grade.max_score)} (course autograder)"


def write_moodle(grades: Sequence[AssignmentGrade], match: RosterMatch | None, config: LmsConfig, path: Path,
                 *, feedback: bool = False) -> Path:
    """Moodle's grade import CSV: an identifier column, then one column per assignment (and,
    with ``feedback``, ``Name (Feedback)`` after each). The identifier is the roster's SIS User
    ID (``ID number``; map it to "ID number" in Moodle's import) when a roster ``match`` is given,
    else nbgrader's student id (``Username``). A held or ungraded cell is blank. Matched students
    without a SIS User ID are added to ``match.problems``."""
    maxima = _maxima(grades)
    assignments = list(maxima)
    by_key = {(g.assignment, g.student): g for g in grades}
    identifiers: dict[str, str] = {}
    if match is None:
        id_column = "Username"
        identifiers = {g.student: g.student for g in grades}
    else:
        id_column = "ID number"
        for student, entry in match.matched.items():
            if entry.sis_id:
                identifiers[student] = entry.sis_id
            else:
                match.problems.append(RosterProblem(student, "no identifier", (f"{_describe(entry)} has no SIS User ID",)))
    header = [id_column]
    for assignment in assignments:
        name = config.item(assignment).name
        header += [name, f"{name} (Feedback)"] if feedback else [name]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for student, identifier in sorted(identifiers.items(), key=lambda item: item[1]):
            row = [identifier]
            for assignment in assignments:
                grade = by_key.get((assignment, student))
                row.append(_points(grade.score) if grade is not None and grade.score is not None else "")
                if feedback:
                    row.append(_feedback(grade) if grade is not None else "")
            writer.writerow(row)
    return path


def parse_moodle(path: Path) -> dict[str, dict[str, float | None]]:
    """A Moodle grade CSV read back: identifier -> grade column -> score (None: blank);
    feedback columns left out."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        keep = [i for i, name in enumerate(header) if i and not name.endswith(" (Feedback)")]
        return {row[0]: {header[i]: float(row[i]) if row[i].strip() else None for i in keep} for row in reader}


# ---------------------------------------------------------------------------------------------
# LTI Advantage: Assignment and Grade Services


def _timestamp(now: datetime | None) -> str:
    """ISO 8601 with milliseconds and the UTC offset (the AGS spec asks for sub-second precision)."""
    return (now or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="milliseconds")


def ags_scores(grades: Sequence[AssignmentGrade], user_ids: Mapping[str, str], config: LmsConfig,
               *, now: datetime | None = None) -> list[dict[str, Any]]:
    """One entry per assignment: ``assignment``, ``label``, ``lineitem`` (its URL, "" unless
    configured), ``scoreMaximum`` and ``scores``, the AGS score objects of the students in
    ``user_ids`` (nbgrader id -> LTI user id). A final grade is ``FullyGraded`` with its
    ``scoreGiven``; a held or ungraded one ``PendingManual`` without a score."""
    stamp = _timestamp(now)
    by_assignment: dict[str, list[AssignmentGrade]] = defaultdict(list)
    for grade in grades:
        if grade.student in user_ids:
            by_assignment[grade.assignment].append(grade)
    entries = []
    for assignment, maximum in _maxima(grades).items():
        item = config.item(assignment)
        scores = []
        for grade in by_assignment[assignment]:
            score: dict[str, Any] = {"userId": user_ids[grade.student]}
            if grade.score is not None:
                score["scoreGiven"] = round(grade.score, 4)
            score["scoreMaximum"] = grade.max_score or maximum
            score["activityProgress"] = "Completed" if grade.final else "Submitted"
            score["gradingProgress"] = "FullyGraded" if grade.final else "PendingManual"
            score["timestamp"] = stamp
            if grade.status == HELD:
                score["comment"] = "held for review"
            scores.append(score)
        entries.append({"assignment": assignment, "label": item.name, "lineitem": item.lineitem,
                        "scoreMaximum": maximum, "scores": scores})
    return entries


def write_ags(entries: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """The score objects as one JSON document (``{"lineitems": [...]}``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"lineitems": list(entries)}, indent=1) + "\n")
    return path


@dataclass
class PostReport:
    """What :func:`post_scores` sent: scores accepted, and one line per one refused or not sent."""

    posted: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def post_scores(entries: Sequence[Mapping[str, Any]], platform: Platform, *, session: Any = None) -> PostReport:
    """POST every score to its line item's ``/scores`` endpoint (``application/vnd.ims.lis.v1.score+json``,
    a bearer token fetched once with the client-credentials grant and a JWT assertion) through
    pylti1p3. ``session``: a ``requests.Session`` (tests pass one that ignores proxy settings)."""
    try:
        from pylti1p3.assignments_grades import AssignmentsGradesService
        from pylti1p3.exception import LtiException
        from pylti1p3.grade import Grade
        from pylti1p3.registration import Registration
        from pylti1p3.service_connector import ServiceConnector
    except ImportError as error:
        raise RuntimeError("posting scores needs pylti1p3: pip install -e './grader[lms]'") from error

    class _Registration(Registration):
        def get_kid(self) -> str | None:  # the kid the platform registered, not one derived from a public key
            return platform.kid or None

    registration = _Registration().set_client_id(platform.client_id).set_auth_token_url(platform.token_url)
    registration.set_tool_private_key(platform.private_key)
    if platform.audience:
        registration.set_auth_audience(platform.audience)
    connector = ServiceConnector(registration, session)
    report = PostReport()
    for entry in entries:
        if not entry["lineitem"]:
            report.failed.append(f"{entry['assignment']}: no line item URL in the LMS configuration "
                                 f"({len(entry['scores'])} score(s) not sent)")
            continue
        claim: Any = {"scope": [SCORE_SCOPE], "lineitem": entry["lineitem"]}  # the launch's AGS claim, as pylti1p3 takes it
        service = AssignmentsGradesService(connector, claim)
        for score in entry["scores"]:
            grade = (Grade().set_user_id(score["userId"]).set_score_maximum(score["scoreMaximum"])
                     .set_activity_progress(score["activityProgress"]).set_grading_progress(score["gradingProgress"])
                     .set_timestamp(score["timestamp"]))
            if "scoreGiven" in score:
                grade.set_score_given(score["scoreGiven"])
            if score.get("comment"):
                grade.set_comment(score["comment"])
            try:
                service.put_grade(grade)
                report.posted += 1
            except (LtiException, OSError) as error:
                report.failed.append(f"{entry['assignment']} / {score['userId']}: {error}")
    return report


# ---------------------------------------------------------------------------------------------
# The command


@dataclass
class LmsExport:
    """What ``course export --format ...`` wrote: the file, the side file of roster problems
    (None when there are none), the counts and, with ``--post``, what the platform accepted."""

    path: Path
    problems: list[RosterProblem]
    problems_path: Path | None
    final: int
    pending: int
    posted: PostReport | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and (self.posted is None or self.posted.ok)


def _student_names(db_url: str) -> dict[str, tuple[str, str]]:
    """nbgrader student id -> (full name, the LMS user id nbgrader's LTI integration stores), from the gradebook."""
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    with Gradebook(db_url) as gradebook:
        return {s.id: (" ".join(filter(None, [s.first_name, s.last_name])), s.lms_user_id or "") for s in gradebook.students}


def export_lms(course: Course, fmt: str, out: Path, *, roster: Path | None = None, config: Path | None = None,
               feedback: bool = False, post: bool = False, now: datetime | None = None,
               session: Any = None) -> LmsExport:
    """Read the course's gradebook and held submissions, and write ``out`` in ``fmt`` (one of
    :data:`FORMATS`); roster problems go to ``<out>-unmatched.csv``. With ``post`` (``lti-ags``),
    send the scores to the platform of ``config``."""
    from course_grader.grading.review import held, review_submissions
    from course_grader.grading.scores import read_scores, submission_flags

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "canvas" and roster is None:
        raise ValueError("--format canvas needs --roster ROSTER.csv (Canvas's gradebook export serves)")
    if post and fmt != "lti-ags":
        raise ValueError("--post sends LTI AGS scores: use it with --format lti-ags")
    settings = read_lms_config(config)
    if post and settings.platform is None:
        raise ValueError("--post needs --lms-config with a 'platform' (client_id, token_url, private_key_file)")
    rows = read_scores(course)
    flags = submission_flags(course, sorted({(r.assignment, r.student) for r in rows}))
    on_hold = held(review_submissions(course, sorted({r.assignment for r in rows}), flags=flags))
    grades = assignment_grades(rows, on_hold)
    people = _student_names(course.db_url)
    students = sorted({g.student for g in grades})
    match = match_roster({s: people.get(s, ("", ""))[0] for s in students}, read_roster(roster)) if roster else None
    out = Path(out)
    posted = None
    if fmt == "canvas":
        assert match is not None
        write_canvas(grades, match, settings, out)
    elif fmt == "moodle":
        write_moodle(grades, match, settings, out, feedback=feedback)
    else:
        if match is not None:
            user_ids = {s: e.lti_user_id or people.get(s, ("", ""))[1] or s for s, e in match.matched.items()}
        else:
            user_ids = {s: people.get(s, ("", ""))[1] or s for s in students}
        entries = ags_scores(grades, user_ids, settings, now=now)
        write_ags(entries, out)
        if post:
            assert settings.platform is not None
            posted = post_scores(entries, settings.platform, session=session)
    problems = list(match.problems) if match is not None else []
    side = write_problems(problems, out.with_name(f"{out.stem}-unmatched.csv")) if problems else None
    placed = set(match.matched) - {p.student for p in problems} if match is not None else set(students)
    final = sum(g.final and g.student in placed for g in grades)
    pending = sum(not g.final and g.student in placed for g in grades)
    return LmsExport(out, problems, side, final, pending, posted)
