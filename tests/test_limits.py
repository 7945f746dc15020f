"""``course_utils.limits``: one place for the seconds a cell may run, graded or executed."""

from __future__ import annotations

import pytest

from course_utils.limits import execution_timeout, grading_cell_timeout

from conftest import ROOT


def test_grading_gives_a_cell_120_s_in_ci_and_900_s_at_full_size(monkeypatch):
    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    assert grading_cell_timeout("ci") == 120
    assert grading_cell_timeout("cpu") == grading_cell_timeout("gpu") == 900
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    assert grading_cell_timeout() == 120, "without an argument the profile comes from COURSE_PROFILE"
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "33")
    assert grading_cell_timeout("ci") == grading_cell_timeout("cpu") == 33


@pytest.mark.parametrize("profile,seconds", [("ci", 120), ("cpu", 900)])
def test_nbgrader_and_course_check_use_the_same_limit(monkeypatch, profile, seconds):
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    monkeypatch.setenv("COURSE_PROFILE", profile)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.Execute.timeout == seconds == grading_cell_timeout(profile)


def test_the_course_notebooks_execute_without_a_limit_at_full_size():
    assert execution_timeout("ci") == 600
    assert execution_timeout("cpu") is None and execution_timeout("gpu") is None
