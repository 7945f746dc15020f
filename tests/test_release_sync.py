"""notebooks/ is exactly what nbgrader generates from solutions/ (never edited by hand)."""

from __future__ import annotations

import json

import pytest

from course_grader.authoring.release import generate_release, prepare_scratch_course

from conftest import ROOT, assignment_names

pytestmark = pytest.mark.slow


def test_release_folder_has_no_strays():
    released = sorted(p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir())
    assert released == assignment_names(), "notebooks/ must hold exactly the assignments in solutions/"


@pytest.mark.parametrize("assignment", assignment_names())
def test_release_is_in_sync_with_solutions(assignment, tmp_path):
    course = prepare_scratch_course(ROOT, tmp_path / "course", [assignment])
    generate_release(course, [assignment], verbose=False)
    fresh = sorted((course / "notebooks" / assignment).rglob("*"))
    committed = sorted((ROOT / "notebooks" / assignment).rglob("*"))
    assert [p.relative_to(course / "notebooks") for p in fresh] == [p.relative_to(ROOT / "notebooks") for p in committed]
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
