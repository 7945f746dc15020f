"""``course_grader.course.Course``: one course, resolved once per command."""

from __future__ import annotations

import shutil

import pytest

from course_grader.course import Course, UnknownAssignment

from conftest import ROOT


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


def test_a_course_names_its_assignments_and_refuses_unknown_ones(course_dir):
    course = Course.open(course_dir)
    assert course.assignments() == ["00_welcome"]
    assert course.assignments(["00_welcome"]) == ["00_welcome"]
    with pytest.raises(UnknownAssignment, match="no assignment 99_nope .*known: 00_welcome"):
        course.assignments(["99_nope"])
