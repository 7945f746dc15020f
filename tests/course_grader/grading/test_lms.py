"""Grades into the LMS (course_grader.grading.lms): Canvas and Moodle import CSVs against golden files
written from their documented formats, the roster match, a 1,000-student round trip, LTI AGS score
objects checked against the spec's Score schema (tests/data/lms/ags-score.schema.json) and ``--post``
to a fake platform on 127.0.0.1 (token endpoint and line items) started here. Offline; seconds.

Regenerate a golden file after a deliberate format change: ``LMS_GOLDEN=update pytest tests/course_grader/grading/test_lms.py``.
"""

from __future__ import annotations

import csv
import json
import os
import random
from datetime import datetime, timezone

import pytest

from course_grader import cli
from course_grader.grading.lms import (
    HELD,
    SCORE_MEDIA_TYPE,
    UNGRADED,
    AssignmentGrade,
    LmsConfig,
    LmsItem,
    Platform,
    RosterEntry,
    ags_scores,
    assignment_grades,
    match_roster,
    parse_canvas,
    parse_moodle,
    post_scores,
    read_roster,
    write_ags,
    write_canvas,
    write_moodle,
)
from course_grader.grading.scores import CellScore, NotebookScore

from tests.conftest import ROOT
from tests.helpers.lms import FakePlatform, rsa_key_pair

DATA = ROOT / "tests" / "data" / "lms"
SA, MASK = "03_self_attention", "05_masking"
NOW = datetime(2025, 3, 14, 15, 9, 26, 535000, tzinfo=timezone.utc)
# nbgrader id -> full name in the gradebook
NAMES = {"ada": "Ada Lovelace", "S-0002": "", "ghopper": "", "en": "", "jsmith": "Jo Smith", "zed": "Zed Nobody"}


def _row(student: str, assignment: str, score: float, points: float, manual: bool = False) -> NotebookScore:
    cells = {"test_a": CellScore("test_a", score, points, False)}
    if manual:
        cells["written"] = CellScore("written", 0.0, 0.0, True)
    return NotebookScore(student, assignment, assignment, cells)


def _class() -> tuple[list[NotebookScore], set[tuple[str, str]]]:
    rows = [
        _row("ada", SA, 7.5, 10), _row("ada", MASK, 4, 6),
        _row("S-0002", SA, 10, 10), _row("S-0002", MASK, 6, 6),  # held on 05
        _row("ghopper", SA, 8, 10, manual=True), _row("ghopper", MASK, 6, 6),  # a written answer to grade on 03
        _row("en", SA, 0, 10),  # a real zero stays 0
        _row("jsmith", SA, 9, 10), _row("zed", SA, 9, 10),
    ]
    return rows, {(MASK, "S-0002")}


CONFIG = LmsConfig({SA: LmsItem("Self-attention", "1234", "https://lms.example/api/lti/courses/1/line_items/7"),
                    MASK: LmsItem("Masking")})


def _golden(name: str, text: str) -> None:
    path = DATA / name
    if os.environ.get("LMS_GOLDEN") == "update":
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from the golden file (LMS_GOLDEN=update regenerates it)"


# ----------------------------------------------------------------------------- grades and roster


def test_held_and_ungraded_have_no_score_and_notebooks_sum():
    rows, held = _class()
    rows.append(NotebookScore("ada", SA, "second_notebook", {"t": CellScore("t", 2, 5, False)}))
    grades = {(g.assignment, g.student): g for g in assignment_grades(rows, held)}
    assert grades[(SA, "ada")] == AssignmentGrade("ada", SA, "final", 9.5, 15)
    assert (grades[(MASK, "S-0002")].status, grades[(MASK, "S-0002")].score) == (HELD, None)
    assert (grades[(SA, "ghopper")].status, grades[(SA, "ghopper")].score) == (UNGRADED, None)
    assert grades[(SA, "en")].score == 0 and grades[(SA, "en")].final


def test_roster_matches_by_sis_id_then_login_then_name():
    roster = read_roster(DATA / "roster.csv")
    assert [e.name for e in roster][:2] == ["Lovelace, Ada", "Turing, Alan"]
    assert all(e.name not in ("Points Possible", "Student, Test") for e in roster)  # Canvas export's extra rows
    match = match_roster(NAMES, roster)
    assert {s: e.canvas_id for s, e in match.matched.items()} == {
        "S-0002": "1002",  # SIS User ID
        "ghopper": "1003",  # SIS Login ID
        "en": "1004",  # the login's part before @
        "ada": "1001",  # name: "Ada Lovelace" is "Lovelace, Ada"
    }
    problems = {p.student: p for p in match.problems}
    assert set(problems) == {"jsmith", "zed"}
    assert problems["zed"].problem == "unmatched"
    assert problems["jsmith"].problem == "ambiguous" and len(problems["jsmith"].candidates) == 2

    # two gradebook students on one LMS person: both ambiguous, neither exported
    twice = match_roster({"S-0001": "", "ada": "Ada Lovelace"}, roster)
    assert not twice.matched and {p.problem for p in twice.problems} == {"ambiguous"}
    # an SIS id wins over a name that would match someone else
    assert match_roster({"S-0004": "Ada Lovelace"}, roster).matched["S-0004"].name == "Noether, Emmy"


# ----------------------------------------------------------------------------- golden files


def test_canvas_import_csv_matches_the_golden_file(tmp_path):
    rows, held = _class()
    grades = assignment_grades(rows, held)
    match = match_roster(NAMES, read_roster(DATA / "roster.csv"))
    path = write_canvas(grades, match, CONFIG, tmp_path / "canvas.csv")
    _golden("canvas.csv", path.read_text())
    lines = list(csv.reader(path.open()))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Self-attention (1234)", "Masking"]
    assert lines[1][0] == "    Points Possible" and lines[1][5:] == ["10", "6"]
    possible, students = parse_canvas(path)
    assert possible == {"Self-attention (1234)": 10, "Masking": 6}
    assert students["S-0002"] == {"Self-attention (1234)": 10, "Masking": None}  # held: blank, not 0
    assert students["ghopper"] == {"Self-attention (1234)": None, "Masking": 6}  # ungraded written answer: blank
    assert students["S-0004"] == {"Self-attention (1234)": 0, "Masking": None}  # a zero is written; no submission blank
    assert students["S-0001"] == {"Self-attention (1234)": 7.5, "Masking": 4}


def test_moodle_import_csv_matches_the_golden_file(tmp_path):
    rows, held = _class()
    grades = assignment_grades(rows, held)
    match = match_roster(NAMES, read_roster(DATA / "roster.csv"))
    path = write_moodle(grades, match, CONFIG, tmp_path / "moodle.csv", feedback=True)
    _golden("moodle.csv", path.read_text())
    header = next(csv.reader(path.open()))
    assert header == ["ID number", "Self-attention", "Self-attention (Feedback)", "Masking", "Masking (Feedback)"]
    parsed = parse_moodle(path)
    assert parsed["S-0002"] == {"Self-attention": 10, "Masking": None}
    # ghopper has no SIS User ID: no Moodle "ID number", so listed as a problem, not exported
    assert "ghopper" in {p.student for p in match.problems if p.problem == "no identifier"}
    assert set(parsed) == {"S-0001", "S-0002", "S-0004"}
    plain = parse_moodle(write_moodle(grades, None, LmsConfig(), tmp_path / "plain.csv"))
    assert plain["zed"] == {SA: 9, MASK: None} and next(csv.reader((tmp_path / "plain.csv").open()))[0] == "Username"


def _schema_validator():
    import jsonschema

    schema = json.loads((DATA / "ags-score.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_ags_scores_match_the_golden_file_and_the_spec_schema(tmp_path):
    rows, held = _class()
    grades = assignment_grades(rows, held)
    entries = ags_scores(grades, {s: f"lti-{s}" for s in NAMES}, CONFIG, now=NOW)
    path = write_ags(entries, tmp_path / "ags.json")
    _golden("ags.json", path.read_text())
    validator = _schema_validator()
    scores = [score for entry in entries for score in entry["scores"]]
    assert len(scores) == 9
    for score in scores:
        validator.validate(score)
    by_user = {(e["assignment"], s["userId"]): s for e in entries for s in e["scores"]}
    assert by_user[(SA, "lti-ada")]["scoreGiven"] == 7.5 and by_user[(SA, "lti-ada")]["gradingProgress"] == "FullyGraded"
    held_score = by_user[(MASK, "lti-S-0002")]
    assert held_score["gradingProgress"] == "PendingManual" and "scoreGiven" not in held_score
    assert by_user[(SA, "lti-ghopper")]["gradingProgress"] == "PendingManual"
    assert by_user[(SA, "lti-en")]["scoreGiven"] == 0
    assert by_user[(SA, "lti-ada")]["timestamp"] == "2025-03-14T15:09:26.535+00:00"
    # the schema is not vacuous: what the spec forbids fails
    good = by_user[(SA, "lti-ada")]
    for bad in ({k: v for k, v in good.items() if k != "timestamp"}, {**good, "gradingProgress": "Done"},
                {k: v for k, v in good.items() if k != "scoreMaximum"}, {**good, "scoreGiven": -1},
                {**good, "timestamp": "2025-03-14 15:09"}, {**good, "scoreMaximum": 0}):
        assert not validator.is_valid(bad), bad


# ----------------------------------------------------------------------------- round trip


def _big_class(n: int, seed: int = 0) -> tuple[list[NotebookScore], set[tuple[str, str]], list[RosterEntry], dict[str, str]]:
    rng = random.Random(seed)
    rows, held, roster, names = [], set(), [], {}
    for i in range(n):
        student = f"s{i:05d}"
        way = i % 3  # matched by SIS id, by login, by name
        name = f"First{i} Last{i}"
        roster.append(RosterEntry(f"Last{i}, First{i}", str(100000 + i), student if way == 0 else f"SIS{i}",
                                  f"{student}@uni.example" if way == 1 else f"login{i}", f"S{i % 7}"))
        names[student] = name
        for assignment, points in ((SA, 10.0), (MASK, 6.0)):
            rows.append(_row(student, assignment, rng.randrange(0, int(points * 4) + 1) / 4, points))
            if rng.random() < 0.05:
                held.add((assignment, student))
    return rows, held, roster, names


def test_round_trip_of_a_thousand_students(tmp_path):
    """roster -> export -> parse gives the gradebook's scores back, held ones blank (the time: benchmarks/bench_lms.py)."""
    rows, held, roster, names = _big_class(1000)
    grades = assignment_grades(rows, held)
    match = match_roster(names, roster)
    assert not match.problems and len(match.matched) == 1000
    _, parsed = parse_canvas(write_canvas(grades, match, CONFIG, tmp_path / "canvas.csv"))
    columns = {SA: "Self-attention (1234)", MASK: "Masking"}
    key = {s: e.sis_id or e.login for s, e in match.matched.items()}
    expected = {(key[g.student], columns[g.assignment]): g.score for g in grades}
    got = {(k, column): value for k, cells in parsed.items() for column, value in cells.items()}
    assert got == expected and sum(v is None for v in got.values()) == len(held) > 0
    moodle = parse_moodle(write_moodle(grades, match, CONFIG, tmp_path / "moodle.csv"))
    assert {(k, {"Self-attention": SA, "Masking": MASK}[c]): v for k, cells in moodle.items() for c, v in cells.items()} \
        == {(match.matched[g.student].sis_id, g.assignment): g.score for g in grades}


# ----------------------------------------------------------------------------- --post to a fake platform


def _session():
    import requests

    session = requests.Session()
    session.trust_env = False  # never through a proxy to 127.0.0.1
    return session


def test_post_sends_scores_with_a_bearer_token_and_the_score_media_type():
    pytest.importorskip("pylti1p3", reason="the grader's lms extra")
    import requests

    private, public = rsa_key_pair()
    rows, held = _class()
    grades = assignment_grades(rows, held)
    with FakePlatform(public) as lms:
        config = LmsConfig({SA: LmsItem("Self-attention", lineitem=f"{lms.url}/lineitems/7"),
                            MASK: LmsItem("Masking", lineitem=f"{lms.url}/lineitems/8")})
        platform = Platform(lms.CLIENT_ID, f"{lms.url}/token", private, kid=lms.KID)
        entries = ags_scores(grades, {s: f"lti-{s}" for s in NAMES}, config, now=NOW)
        report = post_scores(entries, platform, session=_session())
        assert report.ok and report.posted == 9, report.failed
        assert lms.refused == [] and lms.tokens_issued == 1
        got = {(path, s["userId"]): (s["gradingProgress"], s.get("scoreGiven")) for path, s in lms.scores}
        assert got == {(f"/lineitems/{7 if g.assignment == SA else 8}", f"lti-{g.student}"):
                       ("FullyGraded" if g.final else "PendingManual", g.score) for g in grades}
        validator = _schema_validator()
        for _, score in lms.scores:
            validator.validate(score)

        # the platform's checks can fail: a wrong token, a wrong content type, a key it does not know
        assert requests.post(f"{lms.url}/lineitems/7/scores", json={}, headers={
            "Authorization": "Bearer guess", "Content-Type": SCORE_MEDIA_TYPE}, proxies={"http": ""}).status_code == 401
        assert requests.post(f"{lms.url}/lineitems/7/scores", json={}, headers={
            "Authorization": f"Bearer {lms.TOKEN}"}, proxies={"http": ""}).status_code == 415
        lms.scores.clear()
        stranger = Platform(lms.CLIENT_ID, f"{lms.url}/token", rsa_key_pair()[0], kid=lms.KID)
        refused = post_scores(entries, stranger, session=_session())
        assert not refused.ok and refused.posted == 0 and lms.scores == []
        assert any("assertion" in line for line in lms.refused)


def test_a_line_item_missing_from_the_configuration_is_reported_not_skipped():
    pytest.importorskip("pylti1p3", reason="the grader's lms extra")
    private, public = rsa_key_pair()
    rows, held = _class()
    with FakePlatform(public) as lms:
        entries = ags_scores(assignment_grades(rows, held), {"ada": "lti-ada"}, LmsConfig(), now=NOW)
        report = post_scores(entries, Platform(lms.CLIENT_ID, f"{lms.url}/token", private, kid=lms.KID), session=_session())
    assert report.posted == 0 and len(report.failed) == 2 and "no line item URL" in report.failed[0]


# ----------------------------------------------------------------------------- the command


WELCOME = "00_welcome"


@pytest.fixture()
def welcome_class(tmp_path, monkeypatch):
    """A scratch course of 00_welcome with four students in its sqlite gradebook: ada and bo graded
    (bo's written answer not yet), snoop flagged by the scan (held), zed not on the roster."""
    import nbformat
    from nbgrader.api import Gradebook

    from course_grader.authoring.release import prepare_scratch_course
    from course_grader.grading.gradebook import fast_gradebook_creation
    from course_utils.cells import fill_answers, read, solution_code

    course = prepare_scratch_course(ROOT, tmp_path / "course", [WELCOME])
    source = read(ROOT / "solutions" / WELCOME / f"{WELCOME}.ipynb")
    answers = {"ada": solution_code(source), "bo": {}, "zed": {},
               "snoop": {"count_parameters": "import os\nHOME = os.environ.get('HOME')\n"}}
    for student, cells in answers.items():
        folder = course / "submitted" / student / WELCOME
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(source, cells), str(folder / f"{WELCOME}.ipynb"))
    fast_gradebook_creation()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(WELCOME)
        gb.update_or_create_notebook(WELCOME, WELCOME)
        gb.update_or_create_grade_cell("test_count_parameters", WELCOME, WELCOME, max_score=2, cell_type="code")
        gb.update_or_create_grade_cell("written_welcome", WELCOME, WELCOME, max_score=1, cell_type="markdown")
        gb.update_or_create_solution_cell("count_parameters", WELCOME, WELCOME)
        gb.update_or_create_solution_cell("written_welcome", WELCOME, WELCOME)
        for student, first, last, score, written in (("ada", "Ada", "Lovelace", 2, 1), ("bo", "Bo", "Turing", 1, None),
                                                     ("snoop", "Sam", "Noop", 2, 1), ("zed", "Zed", "Nobody", 0, 0)):
            gb.update_or_create_student(student, first_name=first, last_name=last, lms_user_id=f"lti-{student}")
            notebook = gb.add_submission(WELCOME, student).notebooks[0]
            for grade in notebook.grades:
                if grade.name == "test_count_parameters":
                    grade.auto_score, grade.needs_manual_grade = score, False
                else:  # a written answer: graded by hand, or still waiting (needs_manual_grade)
                    grade.manual_score, grade.needs_manual_grade = written, written is None
        gb.db.commit()
    (course / "roster.csv").write_text('Student,ID,SIS User ID,SIS Login ID,Section\n'
                                       '"Lovelace, Ada",1,S1,ada,A\n"Turing, Bo",2,S2,bo,A\n"Noop, Sam",3,S3,snoop,B\n')
    monkeypatch.setenv("COURSE_ROOT", str(course))
    return course


def test_export_canvas_and_post_lti_ags_from_the_command(welcome_class, capsys, monkeypatch):
    pytest.importorskip("pylti1p3", reason="the grader's lms extra")
    course = welcome_class
    out = course / "canvas.csv"
    assert cli.main(["export", "--format", "canvas", "--roster", str(course / "roster.csv"), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "1 final, 2 pending" in captured.out and "canvas-unmatched.csv" in captured.err
    _, students = parse_canvas(out)
    assert students == {"S1": {WELCOME: 3}, "S2": {WELCOME: None}, "S3": {WELCOME: None}}  # bo ungraded, snoop held
    assert [r["student"] for r in csv.DictReader((course / "canvas-unmatched.csv").open())] == ["zed"]
    assert cli.main(["export", "--format", "canvas"]) == 2 and "needs --roster" in capsys.readouterr().err

    private, public = rsa_key_pair()
    (course / "tool.pem").write_text(private)
    with FakePlatform(public) as lms:
        (course / "lms.json").write_text(json.dumps({
            "assignments": {WELCOME: {"name": "Welcome", "lineitem": f"{lms.url}/lineitems/1"}},
            "platform": {"client_id": lms.CLIENT_ID, "token_url": f"{lms.url}/token", "private_key_file": "tool.pem",
                         "kid": lms.KID}}))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        ags = course / "ags.json"
        assert cli.main(["export", "--format", "lti-ags", "--lms-config", str(course / "lms.json"), "--out", str(ags),
                         "--post"]) == 0, capsys.readouterr().err
    assert "posted 4 score(s)" in capsys.readouterr().out
    got = {s["userId"]: (s["gradingProgress"], s.get("scoreGiven")) for _, s in lms.scores}
    assert got == {"lti-ada": ("FullyGraded", 3), "lti-bo": ("PendingManual", None),
                   "lti-snoop": ("PendingManual", None), "lti-zed": ("FullyGraded", 0)}
    assert json.loads(ags.read_text())["lineitems"][0]["lineitem"] == f"{lms.url}/lineitems/1"
