"""Reading and rewriting the nbgrader cells of a notebook."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # nbformat is imported where a notebook is read: the checker splits cells without it
    from nbformat import NotebookNode

__all__ = [
    "nbgrader_meta",
    "answer_cells",
    "grading_cells",
    "is_test_cell",
    "strip_solution_markers",
    "solution_code",
    "fill_answers",
    "read",
    "HIDDEN_BEGIN",
    "HIDDEN_END",
    "HiddenMarkerError",
    "hidden_marker_problems",
    "split_hidden",
    "hidden_flags",
    "hidden_block_lines",
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


def is_test_cell(cell: NotebookNode) -> bool:
    """Whether ``cell`` is an autograded test cell (a code cell with ``grade`` and no ``solution``)."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def grading_cells(nb: NotebookNode) -> Iterator[NotebookNode]:
    """Autograded test cells (code cells with ``grade`` and points)."""
    return (cell for cell in nb.cells if is_test_cell(cell))


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
    import nbformat

    return nbformat.read(str(path), as_version=4)


# ----------------------------------------------------------------------------- hidden tests
# One grammar for hidden blocks, used by the release check, the checker, feedback and the tools:
# a marker is a line that is exactly HIDDEN_BEGIN or HIDDEN_END (below) once
# stripped; any other line naming hidden tests is malformed (`course release` refuses it, naming
# notebook, cell and line), and so are a block left open, an END without a BEGIN and nested blocks.
# (Built from parts: the student wheel must not hold the markers' literal text.)
HIDDEN_BEGIN = "### BEGIN " + "HIDDEN TESTS"
HIDDEN_END = "### END " + "HIDDEN TESTS"
_MENTIONS_HIDDEN = re.compile(r"hidden[\s_-]*tests?", re.I)


class HiddenMarkerError(ValueError):
    """A hidden-test marker spelt otherwise than the one grammar accepts."""


def hidden_marker_problems(source: str) -> list[str]:
    """``"line N: why"`` for every malformed hidden-test marker of a test cell (empty: well formed)."""
    problems, open_at = [], None
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped == HIDDEN_BEGIN:
            if open_at is not None:
                problems.append(f"line {number}: a hidden block opens inside the one opened at line {open_at}")
            open_at = number
        elif stripped == HIDDEN_END:
            if open_at is None:
                problems.append(f"line {number}: {HIDDEN_END!r} without a {HIDDEN_BEGIN!r} before it")
            open_at = None
        elif stripped.startswith("#") and _MENTIONS_HIDDEN.search(stripped) and ("BEGIN" in stripped.upper()
                                                                                or "END" in stripped.upper()):
            problems.append(f"line {number}: {stripped[:60]!r} is not a marker: write exactly {HIDDEN_BEGIN!r} "
                            f"or {HIDDEN_END!r} on a line of its own")
    if open_at is not None:
        problems.append(f"line {open_at}: the hidden block opened here is never closed with {HIDDEN_END!r}")
    return problems


def hidden_flags(source: str) -> list[tuple[str, bool]]:
    """Each line (with its end) and whether it is hidden (markers count as hidden). Malformed
    markers fail closed: from the first one on, every line is hidden."""
    lines = source.splitlines(keepends=True)
    malformed = hidden_marker_problems(source)
    first_bad = min((int(p.split(":")[0].split()[1]) for p in malformed), default=None)
    flags, hidden = [], False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if first_bad is not None and number >= first_bad:
            flags.append((line, True))
        elif stripped == HIDDEN_BEGIN:
            hidden = True
            flags.append((line, True))
        elif stripped == HIDDEN_END:
            flags.append((line, True))
            hidden = False
        else:
            flags.append((line, hidden))
    return flags


def split_hidden(source: str) -> str:
    """The test cell as the kernel runs it and the release shows it: hidden blocks removed."""
    return "".join(line for line, hidden in hidden_flags(source) if not hidden)


def hidden_block_lines(source: str) -> list[str]:
    """The lines inside hidden blocks (markers excluded), in order."""
    return [line.rstrip("\n") for line, hidden in hidden_flags(source)
            if hidden and line.strip() not in (HIDDEN_BEGIN, HIDDEN_END)]
