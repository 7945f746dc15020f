"""notebooks/ is exactly what nbgrader generates from solutions/ (never edited by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from course_grader.authoring.author_marks import AUTHOR_MARK, strip_author_marks
from course_grader.course import Course
from course_grader.authoring.release import generate_release, prepare_scratch_course

from tests.conftest import ROOT, assignment_names

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
    generate_release(Course.open(course), names, verbose=False, one_process=True)
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


@pytest.mark.parametrize("assignment", assignment_names())
def test_release_prose_carries_no_authors_marks(assignment):
    """The <!--q-->/<!--nq--> marks ``course quoted`` reads stay in solutions/; a student never sees them."""
    source = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    for path in (ROOT / "notebooks" / assignment).glob("*.ipynb"):
        written = {c["id"]: "".join(c["source"]) for c in json.loads(source.read_text())["cells"]
                   if not c["metadata"].get("nbgrader", {}).get("solution")}  # answer cells are cleared anyway
        prose = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]
        assert not [c["id"] for c in prose if AUTHOR_MARK.search("".join(c["source"]))], f"{path.relative_to(ROOT)}: marks left"
        changed = [c["id"] for c in prose if c["id"] in written and "".join(c["source"]) != strip_author_marks(written[c["id"]])]
        assert not changed, f"{path.relative_to(ROOT)}: prose other than the marks changed in cells {changed}"
        assert sum(c["id"] in written for c in prose) > len(prose) / 2



def test_one_process_release_refuses_part_of_a_course(tmp_path):
    """``'*'`` would release every assignment of the course, so a part of them is refused (nbgrader never starts)."""
    names = assignment_names()[:3]
    course = prepare_scratch_course(ROOT, tmp_path / "course", names)
    with pytest.raises(ValueError, match="every assignment"):
        generate_release(Course.open(course), names[:2], verbose=False, one_process=True)
    assert not (course / "notebooks").exists()


# ----------------------------------------------------------------------------- one grammar for hidden blocks (issue 33)


@pytest.mark.parametrize("marker", ["### BEGIN HIDDEN TESTS (edge cases)", "## BEGIN HIDDEN TESTS", "#### begin hidden tests",
                                    "# BEGIN HIDDEN TESTS", "### BEGIN  HIDDEN TESTS"])
def test_a_marker_spelt_otherwise_is_refused_and_fails_closed(marker):
    from course_utils.cells import hidden_marker_problems, split_hidden

    source = f"check(f(1) == 2)\n{marker}\ncheck(f(-5) == -10)\n### END HIDDEN TESTS\n"
    problems = hidden_marker_problems(source)
    assert problems and problems[0].startswith("line 2:"), problems
    assert "f(-5)" not in split_hidden(source), "a malformed block is hidden from the kernel all the same"


def test_well_formed_blocks_parse_the_same_everywhere():
    from course_grader.grading.checker.cell import split_hidden as checker_split
    from course_grader.grading.feedback import hidden_lines, hide_hidden_tests
    from course_utils.cells import hidden_block_lines, hidden_marker_problems, split_hidden

    source = ("check(f(1) == 2)\n  ### BEGIN HIDDEN TESTS  \ncheck(f(-5) == -10, 'negative')\n### END HIDDEN TESTS\n"
              "print('after')\n### BEGIN HIDDEN TESTS\ncheck(f(0) == 0, 'zero input')\n### END HIDDEN TESTS\n")
    assert hidden_marker_problems(source) == []
    assert checker_split is split_hidden
    assert split_hidden(source) == "check(f(1) == 2)\nprint('after')\n"
    assert hidden_block_lines(source) == ["check(f(-5) == -10, 'negative')", "check(f(0) == 0, 'zero input')"]
    assert hidden_lines([source]) == {"check(f(-5) == -10, 'negative')", "check(f(0) == 0, 'zero input')"}
    assert hide_hidden_tests(source).count("hidden tests ran here") == 2 and "f(-5)" not in hide_hidden_tests(source)
    for broken in ("### BEGIN HIDDEN TESTS\nx\n", "### END HIDDEN TESTS\n", "### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\n"
                   "### END HIDDEN TESTS\n"):
        assert hidden_marker_problems(broken), broken


def test_release_refuses_a_malformed_marker_naming_notebook_cell_and_line(tmp_path):
    from course_grader.authoring.release import check_hidden_markers
    from course_utils.cells import HiddenMarkerError

    folder = tmp_path / "solutions" / "99_x"
    folder.mkdir(parents=True)
    (tmp_path / "nbgrader_config.py").write_text('c.CourseDirectory.source_directory = "solutions"\n')
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# x"), nbformat.v4.new_code_cell("check(1)\n### BEGIN HIDDEN TESTS: more\ncheck(2)\n")]
    nbformat.write(nb, str(folder / "99_x.ipynb"))
    with pytest.raises(HiddenMarkerError, match=r"solutions/99_x/99_x.ipynb, cell 1, line 2"):
        check_hidden_markers(Course.open(tmp_path), ["99_x"])
    check_hidden_markers(Course.open(ROOT), [p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()])  # the course's own are fine
