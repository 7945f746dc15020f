"""``course_utils.limits``: one place for the seconds a cell may run, graded or executed."""

from __future__ import annotations

import nbformat
import pytest

from course_utils.limits import execution_timeout, grading_cell_timeout

from tests.conftest import ROOT


class _NoKernel:
    """Stands in for nbclient's ``NotebookClient``: records the per-cell limit it is given, runs nothing."""

    timeouts: list[int | None] = []

    def __init__(self, nb, *, timeout=None, **_):
        self.timeouts.append(timeout)

    def execute(self, **_):
        pass


@pytest.fixture
def cell_limits(monkeypatch) -> list[int | None]:
    """The per-cell limits the notebooks run in the test were given (no kernel starts)."""
    import nbclient

    monkeypatch.setattr(nbclient, "NotebookClient", _NoKernel)
    monkeypatch.setattr(_NoKernel, "timeouts", [])
    return _NoKernel.timeouts


def test_grading_gives_a_cell_120_s_in_ci_and_900_s_at_full_size(monkeypatch):
    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    assert grading_cell_timeout("ci") == 120
    assert grading_cell_timeout("cpu") == grading_cell_timeout("gpu") == 900
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    assert grading_cell_timeout() == 120, "without an argument the profile comes from COURSE_PROFILE"
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "33")
    assert grading_cell_timeout("ci") == grading_cell_timeout("cpu") == 33


@pytest.mark.parametrize("profile,seconds", [("ci", 120), ("cpu", 900)])
def test_nbgrader_and_course_check_use_the_same_limit(monkeypatch, cell_limits, tmp_path, profile, seconds):
    from traitlets.config.loader import PyFileConfigLoader

    from course_utils.cli import build_parser
    from course_utils.selfcheck import check_notebook

    monkeypatch.delenv("COURSE_CELL_TIMEOUT", raising=False)
    monkeypatch.setenv("COURSE_PROFILE", profile)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.Execute.timeout == seconds == grading_cell_timeout(profile)
    notebook = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    check_notebook(notebook, profile=profile)
    args = build_parser(plugins=[]).parse_args(["check", str(notebook)])
    args.handler(args)  # `course check` checks as the grader grades: in ci
    assert cell_limits == [seconds, grading_cell_timeout("ci")]


def test_the_course_notebooks_execute_without_a_limit_at_full_size(cell_limits, tmp_path):
    from course_grader.authoring.execute import execute_solutions

    assert execution_timeout("ci") == 600
    assert execution_timeout("cpu") is None and execution_timeout("gpu") is None
    for profile in ("cpu", "ci"):  # what `course execute` and `course demo` give each cell
        execute_solutions(ROOT, ["00_welcome"], profile=profile, out_dir=tmp_path / profile, verbose=False)
    assert cell_limits == [None, 600]
