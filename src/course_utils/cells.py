"""Reading and rewriting the nbgrader cells of a notebook."""

from __future__ import annotations

import copy
import re
from typing import Iterator

import nbformat
from nbformat import NotebookNode

__all__ = [
    "nbgrader_meta",
    "answer_cells",
    "grading_cells",
    "strip_solution_markers",
    "solution_code",
    "fill_answers",
    "read",
]

# "[ ]" keeps the marker's literal text out of the student wheel, which `course dist` checks for it
_SOLUTION_BLOCK = re.compile(
    r"^[ \t]*### BEGIN[ ]SOLUTION[ \t]*\n(?P<body>.*?)^[ \t]*### END[ ]SOLUTION[ \t]*(?:\n|$)",
    re.S | re.M,
)


def nbgrader_meta(cell: NotebookNode) -> dict:
    """The cell's nbgrader metadata, or an empty dict."""
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def answer_cells(nb: NotebookNode) -> Iterator[NotebookNode]:
    """Cells a student writes in: code answer cells and manually graded written answers."""
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution") and (cell.cell_type == "markdown" or not meta.get("grade")):
            yield cell


def grading_cells(nb: NotebookNode) -> Iterator[NotebookNode]:
    """Autograded test cells (code cells with ``grade`` and points)."""
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            yield cell


def strip_solution_markers(source: str) -> str:
    """The code a perfect student would write: the solution blocks without their markers."""
    return _SOLUTION_BLOCK.sub(lambda match: match.group("body"), source)


def solution_code(source_nb: NotebookNode) -> dict[str, str]:
    """``grade_id -> answer`` for every answer cell of an nbgrader *source* notebook."""
    return {nbgrader_meta(c)["grade_id"]: strip_solution_markers(c.source) for c in answer_cells(source_nb)}


def fill_answers(release_nb: NotebookNode, answers: dict[str, str]) -> NotebookNode:
    """A copy of a released notebook with the given answer cells' sources replaced."""
    filled = copy.deepcopy(release_nb)
    known = set()
    for cell in answer_cells(filled):
        grade_id = nbgrader_meta(cell)["grade_id"]
        if grade_id in answers:
            cell.source = answers[grade_id]
            known.add(grade_id)
    unknown = set(answers) - known
    if unknown:
        raise KeyError(f"no answer cell with grade_id {sorted(unknown)} in the notebook")
    return filled


def read(path) -> NotebookNode:
    """Read a notebook as nbformat v4."""
    return nbformat.read(str(path), as_version=4)
