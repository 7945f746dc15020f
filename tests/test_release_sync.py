"""notebooks/ is exactly what nbgrader generates from solutions/ (never edited by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_grader.authoring.release import generate_release, prepare_scratch_course

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow


def test_release_folder_has_no_strays():
    released = sorted(p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir())
    assert released == assignment_names(), "notebooks/ must hold exactly the assignments in solutions/"


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory) -> Path:
    """Every assignment released from solutions/ in one scratch course by one nbgrader process
    (nbgrader starts once, not once per assignment); the scratch course's notebooks/."""
    names = assignment_names()
    course = prepare_scratch_course(ROOT, tmp_path_factory.mktemp("release") / "course", names)
    generate_release(course, names, verbose=False, one_process=True)
    return course / "notebooks"


@pytest.mark.xdist_group("release_sync")  # one worker generates the release all of them compare
@pytest.mark.parametrize("assignment", assignment_names())
def test_release_is_in_sync_with_solutions(assignment, fresh_release):
    fresh = sorted((fresh_release / assignment).rglob("*"))
    committed = sorted((ROOT / "notebooks" / assignment).rglob("*"))
    assert [p.relative_to(fresh_release) for p in fresh] == [p.relative_to(ROOT / "notebooks") for p in committed]
    for new, old in zip(fresh, committed):
        if new.suffix == ".ipynb":
            assert json.loads(new.read_text()) == json.loads(old.read_text()), (
                f"{old.relative_to(ROOT)} is out of date: run `course release {assignment}` and commit notebooks/"
            )
        elif new.is_file():
            assert new.read_bytes() == old.read_bytes(), f"{old.relative_to(ROOT)} differs from its source"


@pytest.mark.parametrize("assignment", assignment_names())
def test_release_holds_no_solutions_or_hidden_tests(assignment):
    for path in (ROOT / "notebooks" / assignment).glob("*.ipynb"):
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{path.relative_to(ROOT)} leaks {marker!r}"
        nb = json.loads(text)
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), "release notebooks carry no outputs"


def test_one_process_release_refuses_part_of_a_course(tmp_path):
    """``'*'`` would release every assignment of the course, so a part of them is refused (nbgrader never starts)."""
    names = assignment_names()[:3]
    course = prepare_scratch_course(ROOT, tmp_path / "course", names)
    with pytest.raises(ValueError, match="every assignment"):
        generate_release(course, names[:2], verbose=False, one_process=True)
    assert not (course / "notebooks").exists()
