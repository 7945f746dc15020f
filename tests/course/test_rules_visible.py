"""Rules a student can check before submitting (issue 34, item 5).

Each convention an exercise's hidden tests enforce by a probe that gives away no hidden value (device,
dtype, gradient, no-grad, in-place, mode, generator) is also checked by its visible tests, on the
visible tests' own inputs: a student who breaks it sees the failure, with its message, in the notebook
and in ``course check``, not only after grading. Value checks on hidden inputs stay hidden. The rules
are read from the test cells' code as ``test_rules_stated`` reads them; notebooks are parsed, never run.
"""

from __future__ import annotations

import textwrap

import nbformat
import pytest

from course_utils.cells import hidden_block_lines, split_hidden
from tests.course.test_rules_stated import _meta, _solution_notebooks, required

# the rules a probe checks without revealing a hidden input's value
LOCAL = {"device", "dtype", "gradient", "no_grad", "in_place", "mode", "generator"}


def _rules(source: str) -> set[str]:
    """The rules ``source`` checks; a part that does not parse alone (a block cut by the markers) is
    dedented, then read line by line."""
    source = source.strip("\n")
    for text in (source, textwrap.dedent(source)):
        try:
            return required(text)[0]
        except SyntaxError:
            continue
    found: set[str] = set()
    for line in source.splitlines():
        try:
            found |= required(line.strip())[0]
        except SyntaxError:
            continue
    return found


def unchecked_before_grading(path) -> list[str]:
    """One message per exercise whose hidden tests check a rule its visible tests do not."""
    nb = nbformat.read(str(path), as_version=4)
    problems = []
    exercise, visible, hidden = None, set(), set()

    def close() -> None:
        if exercise is not None:
            for rule in sorted((hidden & LOCAL) - visible):
                problems.append(f"{path.name}: exercise {exercise!r}: its hidden tests check the "
                                f"{rule.replace('_', ' ')} rule, its visible tests do not")

    for cell in nb.cells:
        meta = _meta(cell)
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            close()
            exercise, visible, hidden = meta.get("grade_id", "?"), set(), set()
        elif cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and exercise is not None:
            hidden |= _rules("\n".join(hidden_block_lines(cell.source)))
            visible |= _rules(split_hidden(cell.source))   # the cell as the release shows it
    close()
    return problems


@pytest.mark.parametrize("path", _solution_notebooks(), ids=lambda p: p.stem)
def test_every_rule_the_hidden_tests_probe_is_probed_visibly(path):
    problems = unchecked_before_grading(path)
    assert not problems, "\n".join(problems)


def test_a_rule_checked_only_in_hidden_tests_is_found(tmp_path):
    cell = nbformat.v4.new_code_cell(
        "y = f(x)\ncheck(y.shape == (2,), 'shape')\n### BEGIN HIDDEN TESTS\n"
        "check_device_dtype(f, x, name='f')\n### END HIDDEN TESTS\n",
        metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "test_f", "points": 1}})
    answer = nbformat.v4.new_code_cell("def f(x):\n    return x", metadata={"nbgrader": {
        "grade": False, "solution": True, "grade_id": "f"}})
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[answer, cell]), str(path))
    assert [p.split(": ", 2)[2] for p in unchecked_before_grading(path)] == [
        "its hidden tests check the device rule, its visible tests do not",
        "its hidden tests check the dtype rule, its visible tests do not"]
    cell.source = "check_device_dtype(f, x, name='f', check_dtype=False)\n" + cell.source
    nbformat.write(nbformat.v4.new_notebook(cells=[answer, cell]), str(path))
    assert [p.split(": ", 2)[2] for p in unchecked_before_grading(path)] == [
        "its hidden tests check the dtype rule, its visible tests do not"]
