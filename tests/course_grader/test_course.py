"""``course_grader.course.Course``: one course, resolved once per command."""

from __future__ import annotations

import shutil

import pytest

from course_grader.course import Course, UnknownAssignment

from tests.conftest import ROOT


@pytest.fixture
def course_dir(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    (tmp_path / "solutions" / "00_welcome").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "00_welcome" / "00_welcome.ipynb", tmp_path / "solutions" / "00_welcome")
    return tmp_path


def test_a_course_knows_its_gradebook_folders_profile_and_cell_limit(course_dir, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")  # left in the instructor's shell: grading stays in ci
    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    course = Course.open(course_dir)
    assert course.root == course_dir.resolve()
    assert course.db_url == f"sqlite:///{course_dir.resolve() / 'gradebook.db'}"
    assert course.profile == "ci" and course.cell_timeout == 120
    assert (course.solutions, course.release, course.submitted) == (
        course.root / "solutions", course.root / "notebooks", course.root / "submitted")
    assert (course.autograded, course.feedback) == (course.root / "autograded", course.root / "feedback")
    import os

    assert os.environ["COURSE_PROFILE"] == "cpu", "opening a course leaves the shell's profile as it was"


def test_a_course_opened_in_another_profile_gets_that_profiles_limit(course_dir, monkeypatch):
    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    course = Course.open(course_dir, profile="cpu")
    assert course.profile == "cpu" and course.cell_timeout == 900


def test_a_course_keeps_the_configuration_it_read_once_in_its_profile(course_dir, monkeypatch):
    """Recording and the Dask bundle use the configuration `Course.open` read (in the grading profile,
    whatever the shell says), not a second reading of nbgrader_config.py in the shell's profile."""
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    course = Course.open(course_dir)
    config = course.nbgrader_config()
    assert config.Execute.timeout == course.cell_timeout == 120  # ci's limit, not cpu's 900
    config.Execute.timeout = 5
    assert course.nbgrader_config().Execute.timeout == 120, "each caller gets a copy"
    with pytest.raises(ValueError, match="use Course.open"):
        Course(course.root, course.db_url).nbgrader_config()


def test_a_course_names_its_assignments_and_refuses_unknown_ones(course_dir):
    course = Course.open(course_dir)
    assert course.assignments() == ["00_welcome"]
    assert course.assignments(["00_welcome"]) == ["00_welcome"]
    with pytest.raises(UnknownAssignment, match="no assignment 99_nope .*known: 00_welcome"):
        course.assignments(["99_nope"])


def test_a_courses_cell_limit_is_the_one_nbgrader_is_given(course_dir, monkeypatch):
    """``cell_timeout`` is read from nbgrader's configuration, not worked out again: an override in the
    environment or a limit set in the course's nbgrader_config.py is what the course reports."""
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "33")
    assert Course.open(course_dir).cell_timeout == Course.open(course_dir, profile="cpu").cell_timeout == 33
    monkeypatch.delenv("COURSE_CELL_TIMEOUT")
    with (course_dir / "nbgrader_config.py").open("a") as config:
        config.write("\nc.Execute.timeout = 77\n")
    assert Course.open(course_dir, profile="cpu").cell_timeout == 77


def test_a_course_finds_each_nbgrader_step_where_its_configuration_puts_it(course_dir):
    """``path(step, student, assignment)`` is nbgrader's ``format_path``: the folder names come from the
    course's nbgrader_config.py (source and release renamed there), nbgrader's defaults elsewhere; the old
    properties say the same; and a folder renamed in the configuration moves every path with it."""
    course = Course.open(course_dir)
    root = course.root
    assert course.path("source") == course.solutions == root / "solutions"
    assert course.path("release", assignment="00_welcome") == root / "notebooks" / "00_welcome"
    assert course.path("submitted", "ada", "00_welcome") == course.submitted / "ada" / "00_welcome"
    assert course.path("autograded", "ada") == root / "autograded" / "ada"
    assert course.path("feedback", "ada", "00_welcome") == root / "feedback" / "ada" / "00_welcome"
    for wrong in (lambda: course.path("solutions"), lambda: course.path("source", "ada"),
                  lambda: course.path("submitted", assignment="00_welcome")):
        with pytest.raises(ValueError):
            wrong()
    with (course_dir / "nbgrader_config.py").open("a") as config:
        config.write('\nc.CourseDirectory.submitted_directory = "inbox"\n')
    moved = Course.open(course_dir)
    assert moved.path("submitted", "ada", "00_welcome") == moved.submitted / "ada" / "00_welcome" == (
        root / "inbox" / "ada" / "00_welcome")
    assert moved.path("release") == root / "notebooks", "only the renamed step moves"


def test_a_courses_own_build_folders_keep_their_place(course_dir):
    course = Course.open(course_dir)
    assert {kind: course.build_dir(kind).relative_to(course.root).as_posix() for kind in
            ("executed", "flags", "manual", "grading", "demo-class", "student-dist")} == {
        "executed": "build/executed", "flags": "build/flags", "manual": "build/manual",
        "grading": "build/grading", "demo-class": "build/demo-class", "student-dist": "build/student-dist"}
    with pytest.raises(ValueError, match="no build folder 'reviews'"):
        course.build_dir("reviews")
