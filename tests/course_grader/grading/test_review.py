"""Held until an instructor decides (``course review``) and the similarity that holds a submission.

Unit tests build gradebooks with nbgrader's Gradebook API and submissions from the course's
own notebooks (no kernel); one slow test grades two students of 00_welcome with real nbgrader,
another records a decision in a PostgreSQL gradebook (skipped without pgserver).
"""

from __future__ import annotations

import csv
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_grader.course import Course
from course_grader import cli
from course_grader.grading import similarity
from course_utils.cells import fill_answers, nbgrader_meta, read, solution_code
from course_grader.grading.scores import NotebookScore, CellScore, read_scores
from course_grader.grading.tables import export_grades
from course_grader.authoring.mistakes import load_accepted
from course_grader.authoring.release import prepare_scratch_course
from course_grader.grading.review import (
    MARK,
    held,
    read_decisions,
    record_decision,
    review_submissions,
)
from course_grader.grading.similarity import (
    REFERENCE,
    THRESHOLD,
    calibration,
    compare_answers,
    fingerprint,
    normalise,
    reference_paths,
    stub_sources,
    trivial,
)

from tests import gradedclass
from tests.conftest import ROOT

MOE = "12_vit_moe"


def _source(name: str):
    return read(ROOT / "solutions" / name / f"{name}.ipynb")


def _accepted(name: str, cell: str, label: str) -> str:
    solution = solution_code(_source(name))[cell]
    return next(a.apply(solution) for a in load_accepted(ROOT, name) if a.cell == cell and a.name == label)


# ----------------------------------------------------------------------------- normalisation


def test_normalise_drops_names_literals_docstrings_and_formatting():
    one = '''
def softmax_rows(x, dim=-1):
    """Softmax."""
    shifted = x - x.amax(dim=dim, keepdim=True)  # stable
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
'''
    renamed = '''
def my_softmax(values: torch.Tensor, axis: int = 1) -> torch.Tensor:
    z = values - values.amax(dim=axis,
                             keepdim=True)
    ex = torch.exp(z)

    return ex / ex.sum(dim=axis, keepdim=True)
'''
    other_api = one.replace("x.amax", "x.max")
    assert normalise(one) == normalise(renamed)
    assert normalise(one) != normalise(other_api)
    assert "softmax_rows" not in normalise(one) and "Softmax." not in " ".join(normalise(one))
    assert ".amax" in normalise(one) and "dim=" in normalise(one)  # the API called stays
    # attributes the code assigns are local names: self.query vs self.q is a rename
    module = "class A(nn.Module):\n    def __init__(self):\n        self.query = nn.Linear(2, 2)\n"
    assert normalise(module) == normalise(module.replace("query", "q"))
    assert normalise("x = (") == ()  # a syntax error compares as nothing


def test_blank_stub_and_short_answers_are_not_compared():
    source = _source(MOE)
    stubs = stub_sources(source)
    assert "raise NotImplementedError()" in stubs["capacity_keep"] and "BEGIN SOLUTION" not in stubs["capacity_keep"]
    for gid, stub in stubs.items():
        assert fingerprint(stub, stub) == frozenset() and trivial(fingerprint(stub, stub)), gid
    welcome = _source("00_welcome")
    answer = solution_code(welcome)["count_parameters"]  # one line: every right answer is that line
    assert trivial(fingerprint(answer, stub_sources(welcome)["count_parameters"]))
    assert not trivial(fingerprint(solution_code(source)["capacity_keep"], stubs["capacity_keep"]))


def test_references_come_from_own_work():
    paths = reference_paths(_source("03_self_attention"))
    assert "course_utils.attention.SelfAttentionHead" in paths["self_attention_module"]
    assert "course_utils.attention.SelfAttentionHead.forward" in paths["self_attention_module"]  # its methods too
    assert paths["stable_softmax"] == ["course_utils.attention.softmax"]
    masking = reference_paths(_source("05_masking"))
    assert masking["causal_mask"] == ["course_utils.masking.causal_mask"]  # own_work("course_utils.masking")
    assert "course_utils.moe.top_k_gating" in reference_paths(_source(MOE))["top_k_gating"]


def test_course_objects_read_from_the_source_are_those_importing_every_module_finds():
    """similarity._course_objects reads the names from the modules' source (importing every module cost
    seconds of each command that compares a class); the definition it follows is this one."""
    import importlib
    import inspect
    import pkgutil

    import course_utils

    imported: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(course_utils.__path__):
        if info.ispkg or info.name in ("checks", "session", "plotting", "profiles", "seeding", "device"):
            continue
        module = importlib.import_module(f"course_utils.{info.name}")  # every public module imports here
        for name, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == module.__name__:
                imported.setdefault(name, []).append(f"{module.__name__}.{name}")
    assert similarity._course_objects() == imported
    assert "course_utils.lora.count_parameters" in imported["count_parameters"]


def test_threshold_separates_copies_from_answers_written_separately():
    """The numbers of similarity.py's docstring: near-copies (curated mistakes and alternatives
    made by editing the solution) mostly reach the threshold, answers written whole rarely."""
    scores = calibration(ROOT)
    near, separate = scores["near-copy"], scores["separate"]
    assert len(near) > 150 and len(separate) > 250
    assert sum(s >= THRESHOLD for s in near) / len(near) > 0.65
    assert sum(s >= THRESHOLD for s in separate) / len(separate) < 0.08
    assert statistics.median(near) > 0.75 > THRESHOLD > 0.3 > statistics.median(separate)


# ----------------------------------------------------------------------------- a class


def _moe_answers() -> dict[str, dict[str, str]]:
    """12_vit_moe: a copier of the public reference (the solution is the package's code), two
    students sharing their own answer (one renamed and reformatted), one writing other right
    answers of their own, one blank."""
    source = _source(MOE)
    stubs = stub_sources(source)
    solution = solution_code(source)
    own = _accepted(MOE, "capacity_keep", "scatter of ranks per expert, loop over experts")
    renamed = re.sub(r"\bcounts\b", "per_expert", own).replace("\n", "\n\n")
    return {
        "copier": {g: solution[g] for g in stubs},
        "twin-a": {**stubs, "capacity_keep": own},
        "twin-b": {**stubs, "capacity_keep": renamed},
        "honest": {**stubs,
                   "capacity_keep": _accepted(MOE, "capacity_keep", "Python counters, result on the input's device"),
                   "load_balancing_loss": _accepted(MOE, "load_balancing_loss", "histc counts"),
                   "top_k_gating": _accepted(MOE, "top_k_gating", "log_softmax, topk, gather, exp"),
                   "patchify": _accepted(MOE, "patchify", "list of patches stacked")},
        "blank": dict(stubs),
    }


def test_compare_answers_pairs_copies_and_leaves_separate_work_alone():
    source = _source(MOE)
    answers = _moe_answers()
    assert answers["twin-b"]["capacity_keep"] != answers["twin-a"]["capacity_keep"]
    result = compare_answers(MOE, answers, stub_sources(source), similarity.reference_sources(source))
    pairs = {(p.cell, p.student, p.other): p for p in result.pairs}
    for cell in ("top_k_gating", "load_balancing_loss", "capacity_keep"):  # identical to course_utils.moe
        pair = pairs[(cell, "copier", REFERENCE)]
        assert pair.score == 1.0 and pair.reference == f"course_utils.moe.{cell}"
        assert "public reference course_utils.moe" in pair.describe()
    assert pairs[("capacity_keep", "twin-a", "twin-b")].score == 1.0
    assert "to twin-a's answer" in pairs[("capacity_keep", "twin-a", "twin-b")].describe("twin-b")
    assert result.students == {"copier", "twin-a", "twin-b"}, result.pairs
    assert result.trivial["capacity_keep"] >= 1  # the blank stub
    assert all(p.score >= THRESHOLD for p in result.pairs)
    assert [p.score for p in result.pairs] == sorted((p.score for p in result.pairs), reverse=True)


def test_canonical_cells_are_compared_between_students_only():
    """Where the model answer is the package's own code (12's gating, loss and capacity cells score 1.0 against
    course_utils.moe), an honest student who writes it scores what a copier does: no reference pairs there,
    the cells are named, and students are still paired with each other."""
    source = _source(MOE)
    answers = _moe_answers()
    result = compare_answers(MOE, answers, stub_sources(source), similarity.reference_sources(source),
                             solutions=solution_code(source))
    assert set(result.canonical) >= {"top_k_gating", "load_balancing_loss", "capacity_keep"}
    assert all(score >= THRESHOLD for score in result.canonical.values())
    assert not [p for p in result.pairs if p.other == REFERENCE]
    assert result.students == {"twin-a", "twin-b"}, result.pairs


def test_similar_pairs_finds_exactly_what_comparing_every_pair_finds():
    """The prefix filter compares a handful of classmates, not the class, and misses no pair: random
    classes of variants, near-copies and edits, at thresholds around the one used, against every pair."""
    import random
    from itertools import combinations

    rng = random.Random(0)
    for trial in range(200):
        vocab = rng.randint(5, 80)
        answers = [frozenset((rng.randrange(vocab),) for _ in range(rng.randint(1, 40))) for _ in range(rng.randint(1, 5))]
        prints: dict[str, frozenset] = {}
        for i in range(rng.randint(2, 40)):
            grams = set(rng.choice(answers))
            for _ in range(rng.randint(0, 10)):  # each student's own edits
                if grams and rng.random() < 0.5:
                    grams.discard(rng.choice(sorted(grams)))
                else:
                    grams.add((rng.randrange(vocab),))
            prints[f"s{i:02d}"] = frozenset(grams)
        threshold = rng.choice([0.0, 0.3, 0.5, 2 / 3, 0.7, 0.75, 0.9, 1.0])
        every_pair = sorted((a, b, similarity.similarity(prints[a], prints[b]))
                            for a, b in combinations(sorted(prints), 2)
                            if similarity.similarity(prints[a], prints[b]) >= threshold)
        assert similarity.similar_pairs(prints, threshold) == every_pair, (trial, threshold)


def test_common_code_of_a_large_class_does_not_pair_students():
    """Twelve students who all wrote the same answer: the class's common code, not copying."""
    source = _source(MOE)
    stubs = stub_sources(source)
    own = _accepted(MOE, "capacity_keep", "scatter of ranks per expert, loop over experts")
    answers = {f"s{i:02d}": {"capacity_keep": own} for i in range(12)}
    assert compare_answers(MOE, answers, stubs, {}).pairs == []
    assert len(compare_answers(MOE, dict(list(answers.items())[:3]), stubs, {}).pairs) == 3


# ----------------------------------------------------------------------------- gradebook


def _register(db_url: str, name: str, scores: dict[str, float]) -> None:
    """The assignment's definition and one submission per student (every autograded cell at
    ``score`` x its points) through nbgrader's Gradebook API, as autograding leaves them."""
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    source = _source(name)
    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(name)
        gb.update_or_create_notebook(name, name)
        for cell in source.cells:
            meta = nbgrader_meta(cell)
            if meta.get("grade"):
                gb.update_or_create_grade_cell(meta["grade_id"], name, name, max_score=meta["points"],
                                               cell_type=cell.cell_type)
            if meta.get("solution"):
                gb.update_or_create_solution_cell(meta["grade_id"], name, name)
        for student, fraction in scores.items():
            gb.update_or_create_student(student)
            submission = gb.add_submission(name, student)
            for grade in submission.notebooks[0].grades:
                if grade.cell.cell_type == "code":
                    grade.auto_score = fraction * grade.max_score
                    grade.needs_manual_grade = False
        gb.db.commit()


def _totals(db_url: str, name: str) -> dict[str, float]:
    return {r.student: r.score for r in read_scores(Course(Path("."), db_url)) if r.assignment == name}


def _check_decisions(db_url: str) -> None:
    _register(db_url, MOE, {"ada": 1.0, "bo": 0.5})
    assert _totals(db_url, MOE) == {"ada": 13.0, "bo": 6.5}  # 13 autograded points, 3 written
    assert read_decisions(db_url) == {}

    accepted = record_decision(db_url, MOE, "bo", "accept", by="prof", when="2025-01-02T03:04:05Z",
                               cell_order=["patchify", "patch_embed"])
    assert (accepted.score, accepted.max_score, accepted.by) == (6.5, 16.0, "prof")
    zero = record_decision(db_url, MOE, "ada", "zero", reason="copied the reference", by="prof",
                           when="2025-01-02T03:05:00Z", cell_order=["patchify"])
    assert zero.score == 0 and _totals(db_url, MOE) == {"ada": 0.0, "bo": 6.5}
    decided = read_decisions(db_url)
    assert decided[(MOE, "ada")] == zero and decided[(MOE, "bo")] == accepted

    changed = record_decision(db_url, MOE, "ada", "score", score=8, reason="partly own work", by="ta",
                              when="2025-01-03T00:00:00Z", cell_order=["patch_embed"])
    assert changed.score == pytest.approx(8) and _totals(db_url, MOE)["ada"] == pytest.approx(8)
    assert read_decisions(db_url)[(MOE, "ada")] == changed  # the latest decision replaces the earlier one

    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        notebook = gb.find_submission_notebook(MOE, MOE, "ada")
        marked = {c.name: c.manual_comment for c in notebook.comments if MARK in (c.manual_comment or "")}
        assert list(marked) == ["patch_embed"] and "by ta at 2025-01-03T00:00:00Z: partly own work" in marked["patch_embed"]
        points = {g.name: (g.manual_score, g.max_score) for g in notebook.grades}
        assert points["test_patchify"] == (pytest.approx(1.0), 2) and points["written_moe"] == (pytest.approx(1.5), 3)
        bo = {g.name: (g.manual_score, g.needs_manual_grade) for g in gb.find_submission_notebook(MOE, MOE, "bo").grades}
        assert bo["test_top_k_gating"] == (1.5, False) and bo["written_moe"] == (None, True)  # left to formgrader

    with pytest.raises(ValueError, match="between 0 and 16"):
        record_decision(db_url, MOE, "ada", "score", score=17)
    with pytest.raises(LookupError, match="grade it first"):
        record_decision(db_url, MOE, "nobody", "accept")
    with pytest.raises(ValueError):
        record_decision(db_url, MOE, "ada", "pardon")


def test_decisions_recorded_as_nbgrader_manual_scores_and_comments(tmp_path):
    _check_decisions(f"sqlite:///{tmp_path / 'gradebook.db'}")


def test_export_has_a_status_and_no_score_while_held(tmp_path):
    rows = [NotebookScore("ada", MOE, MOE, {"t": CellScore("t", 2, 3, False)}),
            NotebookScore("bo", MOE, MOE, {"t": CellScore("t", 3, 3, False)})]
    path = export_grades(rows, tmp_path / "g.csv", {}, held={(MOE, "ada")})
    records = {r["student"]: r for r in csv.DictReader(path.open())}
    assert (records["ada"]["status"], records["ada"]["score"], records["ada"][f"{MOE}:t"]) == ("held", "", "")
    assert (records["bo"]["status"], records["bo"]["score"], records["bo"][f"{MOE}:t"]) == ("final", "3", "3")
    assert records["ada"]["max_score"] == "3"


@pytest.fixture()
def moe_class(tmp_path, monkeypatch):
    """A course with 12_vit_moe's sources, the class of :func:`_moe_answers` submitted (plus
    one who looks at the environment: a scan flag) and registered in its sqlite gradebook."""
    course = prepare_scratch_course(ROOT, tmp_path / "course", [MOE])
    source = _source(MOE)
    answers = _moe_answers()
    answers["snoop"] = {**stub_sources(source), "patchify": "import os\nHOME = os.environ.get('HOME')\n"}
    for student, cells in answers.items():
        folder = course / "submitted" / student / MOE
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(source, cells), str(folder / f"{MOE}.ipynb"))
    _register(f"sqlite:///{course / 'gradebook.db'}", MOE, dict.fromkeys(answers, 1.0))
    monkeypatch.setenv("COURSE_ROOT", str(course))
    return course


def test_held_submissions_listed_exported_and_decided(moe_class, capsys):
    course = moe_class
    reviews = review_submissions(Course.open(course), [MOE], csv_dir=course / "build" / "flags")
    # 12's referenced cells are canonical (the model answer is course_utils.moe's code): the copier of the
    # reference scores what a student writing the model answer alone would, so is compared with students only
    assert held(reviews) == {(MOE, s) for s in ("twin-a", "twin-b", "snoop")}
    assert {f.rule for f in reviews[(MOE, "snoop")].flags} == {"environment"}
    rows = list(csv.DictReader((course / "build" / "flags" / f"{MOE}-similarity.csv").open()))
    assert {(r["cell"], r["student"], r["other"]) for r in rows} >= {
        ("capacity_keep", "twin-a", "twin-b")}
    assert not any(r["other"] == REFERENCE for r in rows)

    assert cli.main(["review", MOE]) == 0
    out = capsys.readouterr().out
    assert f"{MOE}: 3 held, 0 decided" in out
    assert "HELD snoop" in out and "[environment]" in out and "line 2" in out
    assert "compared between students only" in out and "top_k_gating (1.00)" in out and "HELD copier" not in out
    assert "HELD twin-b" in out and "to twin-a's answer" in out
    assert "HELD honest" not in out and "HELD blank" not in out

    out_csv = course / "grades.csv"
    assert cli.main(["export", "--out", str(out_csv)]) == 0
    status = {r["student"]: (r["status"], r["score"]) for r in csv.DictReader(out_csv.open())}
    assert status["twin-b"] == ("held", "") and status["honest"] == ("final", "13") == status["copier"]

    assert cli.main(["review", MOE, "twin-b", "--zero"]) == 2  # a reason is required
    assert "--reason" in capsys.readouterr().err
    assert cli.main(["review", MOE, "twin-b", "--zero", "--reason", "twin-a's code", "--by", "prof"]) == 0
    assert cli.main(["review", MOE, "snoop", "--accept", "--by", "prof"]) == 2  # accepting needs a reason too
    assert "--accept needs --reason" in capsys.readouterr().err
    assert cli.main(["review", MOE, "snoop", "--accept", "--reason", "checked by hand", "--by", "prof"]) == 0
    assert cli.main(["review", MOE, MOE]) == 2  # an assignment where a student belongs: said, not "0 held"
    assert "is an assignment, not a student" in capsys.readouterr().err
    assert cli.main(["review", MOE, "twin-a", "--score", "99", "--reason", "x"]) == 1
    assert "between 0 and 16" in capsys.readouterr().err
    assert cli.main(["export", "--out", str(out_csv)]) == 0
    status = {r["student"]: (r["status"], r["score"]) for r in csv.DictReader(out_csv.open())}
    assert status["twin-b"] == ("final", "0") and status["snoop"] == ("final", "13")
    assert status["twin-a"] == ("held", "")
    capsys.readouterr()
    assert cli.main(["review", MOE]) == 0
    out = capsys.readouterr().out
    assert "1 held, 2 decided" in out and "decided twin-b: zero: 0 / 16, by prof" in out


def test_the_class_comparison_is_computed_once_and_again_when_a_submission_changes(moe_class, monkeypatch):
    """Issue 35: the similarity evidence is computed once (by `course grade`'s review) and saved; review,
    export and the LMS exports read it back; a changed submission (or threshold) computes it again."""
    course = Course.open(moe_class)
    first = review_submissions(course, [MOE])
    assert similarity.saved_comparison_path(course, MOE).is_file()
    computed = []
    real = similarity.compare_class
    monkeypatch.setattr(similarity, "compare_class", lambda *a, **k: computed.append(a) or real(*a, **k))
    assert review_submissions(course, [MOE]) == first and computed == [], "computed again with nothing changed"
    twin_b = moe_class / "submitted" / "twin-b" / MOE / f"{MOE}.ipynb"
    honest = read(moe_class / "submitted" / "honest" / MOE / f"{MOE}.ipynb")
    nbformat.write(honest, str(twin_b))  # twin-b resubmits honest's work: twin-a alone, honest and twin-b alike
    again = review_submissions(course, [MOE])
    assert len(computed) == 1
    assert again != first and any(p.involves("honest") for p in again[(MOE, "twin-b")].similar), again
    review_submissions(course, [MOE], threshold=0.99)
    assert len(computed) == 2, "another threshold is another comparison"


def test_feedback_skips_held_submissions(moe_class, monkeypatch, capsys):
    from course_grader.grading import runner

    calls = []
    monkeypatch.setattr(runner, "run_nbgrader", lambda args, course_dir: calls.append(args))
    stale = moe_class / "feedback" / "twin-b" / MOE
    stale.mkdir(parents=True)
    (stale / f"{MOE}.html").write_text("old feedback")
    assert cli.main(["feedback", MOE]) == 0
    out = capsys.readouterr().out
    assert f"{MOE}: no feedback for twin-b: held for review" in out
    assert calls == [["generate_feedback", MOE, "--force",
                      "--CourseDirectory.student_id_exclude=snoop,twin-a,twin-b"]]
    assert not stale.exists()  # nbgrader release_feedback cannot release an old copy
    calls.clear()
    assert cli.main(["feedback", MOE, "--student", "honest", "--student", "twin-a"]) == 0
    assert calls == [["generate_feedback", MOE, "--force", "--student=honest"]]


# ----------------------------------------------------------------------------- real nbgrader


W = gradedclass.A


def _course_cli(*args: str, course: Path) -> subprocess.CompletedProcess[str]:
    return gradedclass.course_cli(*args, course=course, timeout=600)


@pytest.mark.slow
@pytest.mark.xdist_group(gradedclass.GROUP)  # the worker that grades the shared class
def test_end_to_end_a_flagged_student_is_held_until_accepted(welcome_class, tmp_path):
    """ada (the model answer) and eve (the same after reading $HOME) in the class of tests/gradedclass.py,
    graded through `course grade` (sandboxed where it works) and given feedback once; the decision is
    taken in a copy of that course."""
    assert welcome_class.graded.returncode == 0
    course = welcome_class.copy(tmp_path / "course")  # the decision changes it
    out = tmp_path / "grades.csv"
    assert _course_cli("export", "--out", str(out), course=course).returncode == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert (rows["ada"]["status"], rows["ada"]["score"]) == ("final", "2")
    assert (rows["eve"]["status"], rows["eve"]["score"]) == ("held", "")
    feedback = welcome_class.feedback  # the class's first `course feedback`, before any decision
    assert feedback.returncode == 0, feedback.stderr[-2000:]
    assert "no feedback for eve: held for review" in feedback.stdout
    assert (course / "feedback" / "ada" / W / f"{W}.html").is_file()
    assert not (course / "feedback" / "eve").exists()
    listed = _course_cli("review", W, course=course)
    assert "HELD eve" in listed.stdout and "[environment]" in listed.stdout, listed.stdout

    decided = _course_cli("review", W, "eve", "--accept", "--reason", "environment read by the course's own code",
                          "--by", "prof", course=course)
    assert decided.returncode == 0, decided.stderr
    assert _course_cli("export", "--out", str(out), course=course).returncode == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert (rows["eve"]["status"], rows["eve"]["score"]) == ("final", "2")
    assert _course_cli("feedback", W, "--student", "eve", course=course).returncode == 0
    html = (course / "feedback" / "eve" / W / f"{W}.html").read_text()
    assert "[course review] accept 2/2 by prof" in html  # the decision's comment reaches the student


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.mark.slow
def test_decisions_on_a_postgresql_gradebook():
    pgserver = pytest.importorskip("pgserver", reason="pgserver (PyPI) is not installed: pip install -e .[dev]")
    pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed: pip install -e .[dev]")
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    try:
        server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
    except Exception as error:  # noqa: BLE001 - no usable PostgreSQL binaries on this platform
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL: {error}")
    try:
        server.psql("CREATE DATABASE review_decisions;")
        url = server.get_uri("review_decisions").replace("postgresql://", "postgresql+psycopg2://", 1)
        _check_decisions(url)
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_package_pasted_verbatim_is_held_even_where_the_model_answer_is_the_package():
    """Issue 33: normalised scores cannot tell a pasted reference from the canonical answer; the package's
    own text (comments, docstrings, exact lines) can, short cells and canonical cells included."""
    import inspect

    from course_grader.grading.similarity import REFERENCE, compare_answers
    import course_utils.attention as attention

    reference = inspect.getsource(attention.softmax)
    stub = 'def stable_softmax(x, dim=-1):\n    """Softmax of x along dim."""\n    raise NotImplementedError()\n'
    honest = ("def stable_softmax(x, dim=-1):\n    z = x - x.max(dim=dim, keepdim=True).values\n"
              "    e = z.exp()\n    return e / e.sum(dim=dim, keepdim=True)\n")
    pasted_whole = reference.replace("def softmax(", "def stable_softmax(")
    result = compare_answers("03", {"honest": {"c": honest}, "copier": {"c": pasted_whole}}, {"c": stub},
                             {"c": {"course_utils.attention.softmax": reference}}, solutions={"c": reference})
    held = {p.student for p in result.pairs if p.other == REFERENCE}
    assert held == {"copier"}, result.pairs
    assert "pasted from the public reference" in next(p for p in result.pairs if p.student == "copier").describe()
