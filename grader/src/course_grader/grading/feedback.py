"""Feedback that tells students what failed without handing them the hidden tests, and the
command that writes it (:func:`generate_feedback`).

nbgrader's feedback HTML shows every graded cell as it ran: hidden tests, their tracebacks,
and whatever student code printed while a test called it. Student code can read the test
that calls it (its caller's frame, ``linecache``, IPython's ``In``) and print it, or put it
in an exception message. This preprocessor, run by ``nbgrader generate_feedback`` (see
nbgrader_config.py), therefore:

- removes the hidden-test block from each test cell's source;
- keeps, of a test cell's outputs, only the error's name and message (length-capped):
  nothing printed or displayed while the test ran reaches the feedback (pass/fail and the
  check's own message are what the student reads);
- redacts, in every output of every cell, any line of any hidden test (of this notebook
  and, when the course's source directory is readable, of every assignment), e.g. an
  answer cell that prints ``In[12]``.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterable, Sequence

import nbformat

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Int, Unicode

from course_utils.cells import HIDDEN_BEGIN, hidden_block_lines, hidden_flags, is_test_cell

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = ["HideHiddenTests", "generate_feedback", "hide_hidden_tests", "hidden_lines", "redact", "REDACTED"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_MARKERS = re.compile(r"#+\s*(BEGIN|END)\s+(HIDDEN\s+TESTS|SOLUTION)", re.I)

REDACTED = "[hidden test line removed]"
MIN_LINE = 8  # shorter hidden lines (`)`, `else:`, `x = 1`) say nothing and would redact honest output


def hide_hidden_tests(source: str) -> str:
    """The test cell's source with each hidden block replaced by a one-line note (the one grammar of
    :func:`course_utils.cells.split_hidden`: a malformed marker hides everything after it)."""
    out, in_block = [], False
    for line, hidden in hidden_flags(source):
        if hidden and not in_block:
            out.append("# (hidden tests ran here)\n")
        elif not hidden:
            out.append(line)
        in_block = hidden
    return "".join(out)


def hidden_lines(sources: Iterable[str]) -> set[str]:
    """Every meaningful line (stripped, at least ``MIN_LINE`` characters) of the hidden blocks."""
    lines: set[str] = set()
    for source in sources:
        for line in hidden_block_lines(source):
            line = line.strip()
            if len(line) >= MIN_LINE and not line.startswith("#"):
                lines.add(line)
    return lines


def _line_pattern(lines: Iterable[str]) -> re.Pattern[str] | None:
    """One regex matching any of the lines, whitespace-insensitive, longest first."""
    parts = []
    variants = set(lines) | {html.escape(line) for line in lines}  # text/html outputs hold escaped text
    for line in sorted(variants, key=len, reverse=True):
        tokens = [re.escape(t) for t in line.split()]
        parts.append(r"\s*".join(tokens))
    return re.compile("|".join(parts)) if parts else None


def redact(text: str, pattern: re.Pattern[str] | None) -> str:
    """``text`` with every hidden-test line and every hidden/solution marker replaced."""
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return _MARKERS.sub(REDACTED, text)


@lru_cache(maxsize=8)
def _course_hidden_lines(source_dir: str, stamp: float) -> frozenset[str]:
    """Hidden-test lines of every notebook under ``source_dir`` (cached per modification time)."""
    import nbformat

    sources: list[str] = []
    for path in sorted(Path(source_dir).glob("*/*.ipynb")):
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:  # noqa: BLE001 - an unreadable source adds nothing
            continue
        sources.extend(c.source for c in nb.cells if c.cell_type == "code")
    return frozenset(hidden_lines(sources))


_HIDDEN_MARK = HIDDEN_BEGIN


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class HideHiddenTests(Preprocessor):
    """Strip hidden tests, test-time output and tracebacks from autograded notebooks before feedback."""

    enabled = Bool(True, help="on by default: nbconvert preprocessors are off unless enabled").tag(config=True)
    max_message = Int(800, help="longest error message shown for a test cell (characters)").tag(config=True)
    source_directory = Unicode(
        "solutions", help="nbgrader source directory (relative to the working directory): its hidden tests are "
        "redacted from every output too, when it is readable"
    ).tag(config=True)

    def preprocess(self, nb, resources):
        sources = [c.source for c in nb.cells if is_test_cell(c)]
        lines = hidden_lines(sources)
        folder = Path(self.source_directory)
        if folder.is_dir():
            stamp = max((p.stat().st_mtime for p in folder.glob("*/*.ipynb")), default=0.0)
            lines |= _course_hidden_lines(str(folder.resolve()), stamp)
        self._pattern = _line_pattern(lines)
        self._silenced = self._cells_without_outputs(nb, resources)
        return super().preprocess(nb, resources)

    def _cells_without_outputs(self, nb, resources) -> set[int]:
        """Cells whose outputs feedback never shows: every cell a student added (its source is in
        no cell of the source notebook), and every answer or plain cell after the first test cell
        that holds hidden tests (what ran after hidden tests is not the student's to see)."""
        info = (resources or {}).get("nbgrader", {})
        path = Path(self.source_directory) / str(info.get("assignment", "")) / f"{info.get('notebook', '')}.ipynb"
        known: set[str] | None = None
        if info.get("assignment") and path.is_file():
            source = nbformat.read(str(path), as_version=4)
            known = {c.source.strip() for c in source.cells if c.cell_type == "code"}
        silenced, hidden_seen = set(), False
        for index, cell in enumerate(nb.cells):
            if cell.get("cell_type") != "code":
                continue
            graded = bool(cell.get("metadata", {}).get("nbgrader"))
            if is_test_cell(cell):
                hidden_seen = hidden_seen or _HIDDEN_MARK in cell.source
                continue
            if not graded and (known is None or cell.source.strip() not in known):
                silenced.add(index)  # added by the student (or no source to tell): never shown
            elif hidden_seen:
                silenced.add(index)
        return silenced

    def preprocess_cell(self, cell, resources, index):
        pattern = getattr(self, "_pattern", None)
        if cell.get("cell_type") != "code":
            return cell, resources
        if is_test_cell(cell):
            cell.source = hide_hidden_tests(cell.source)
            kept = []
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    name = _clip(redact(_ANSI.sub("", str(output.get("ename", "Error"))), pattern), 80)
                    message = _clip(redact(_ANSI.sub("", str(output.get("evalue", ""))), pattern), self.max_message)
                    output["ename"], output["evalue"] = name, message
                    output["traceback"] = [f"{name}: {message}"]
                    kept.append(output)
            cell["outputs"] = kept
        elif index in getattr(self, "_silenced", set()):
            cell["outputs"] = []
        else:
            for output in cell.get("outputs", []):
                self._redact_output(output, pattern)
        return cell, resources

    @staticmethod
    def _redact_output(output, pattern) -> None:
        if "text" in output:
            text = output["text"]
            output["text"] = redact("".join(text) if isinstance(text, list) else str(text), pattern)
        for key in ("ename", "evalue"):
            if key in output:
                output[key] = redact(str(output[key]), pattern)
        if "traceback" in output:
            output["traceback"] = [redact(_ANSI.sub("", str(line)), pattern) for line in output["traceback"]]
        data = output.get("data") or {}
        for mime, value in list(data.items()):
            if isinstance(value, list):
                value = "".join(value)
            if isinstance(value, str):
                data[mime] = redact(value, pattern)
            else:  # JSON payloads (widgets, application/json): only the text forms are safe to keep
                del data[mime]


def generate_feedback(
    course: Course,
    assignment: str,
    students: Sequence[str] | None = None,
    skip: Collection[str] = (),
) -> Path:
    """``nbgrader generate_feedback``: HTML feedback per student under ``feedback/``, written through
    :class:`HideHiddenTests` (nbgrader_config.py puts it in nbgrader's feedback pipeline).

    ``skip``: students whose submission is held for review: no feedback is generated for
    them, and an earlier copy (``feedback/<student>/<assignment>/``) is removed so that
    ``nbgrader release_feedback`` cannot release it.

    Raises :class:`~course_grader.grading.gradebook.AssignmentNotReleased` when the assignment is
    not in the gradebook."""
    import shutil

    from course_grader.grading.gradebook import require_assignment
    from course_grader.grading.runner import run_nbgrader

    require_assignment(course.db_url, assignment)
    skip = set(skip)
    for student in sorted(skip):
        shutil.rmtree(course.path("feedback", student, assignment), ignore_errors=True)
    base = ["generate_feedback", assignment, "--force"]
    if students:
        runs = [base + [f"--student={student}"] for student in students if student not in skip]
    else:
        runs = [base + ([f"--CourseDirectory.student_id_exclude={','.join(sorted(skip))}"] if skip else [])]
    for args in runs:
        run_nbgrader(args, course.root)
    return course.path("feedback")
