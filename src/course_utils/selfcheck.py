"""``course check``: a student runs their own notebook and sees which exercises pass.

The notebook runs top to bottom in a fresh kernel (``ci`` profile), exactly as the
autograder will run it, but on the student's copy: only the visible tests are there. They probe each
exercise's conventions on their own inputs (``tests/course/test_rules_visible.py``), and every call they
make of an answer's function is held to the In-place rule as the grader holds it
(:mod:`course_utils.checks.in_place`).
``course check --rules`` runs nothing: it lists, for each exercise, the rules of 00's
"Conventions the tests check" its text links, which its tests (hidden ones included) enforce
(``tests/course/test_rules_stated.py`` proves that every rule a test checks is stated there).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course_utils.cells import nbgrader_meta
from course_utils.execute import execute_notebook
from course_utils.limits import grading_cell_timeout

__all__ = ["ExerciseResult", "ExerciseRules", "check_notebook", "exercise_rules", "format_report", "format_rules"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Same rule as nbgrader_config.py's IgnorePattern: stderr that is only a warning is harmless.
_HARMLESS_STDERR = re.compile(r"(Warning|warnings\.warn|it/s\]|s/it\]|\d+%\|)")


@dataclass(frozen=True)
class ExerciseResult:
    grade_id: str
    points: float
    status: str  # "PASS", "FAIL", "TODO" (not attempted), "MANUAL", or "ERROR" (a non-test cell raised)
    message: str = ""


# 00's rule headings (their JupyterLab anchors), in the order 00 states them, and the name printed for each
RULE_ANCHORS = {"Shape-rule": "shape", "Device-rule": "device", "Dtype-rule": "dtype", "Gradient-rule": "gradient",
                "In-place-rule": "in-place", "Mode-rule": "mode", "Generator-rule": "generator", "Error-rule": "error",
                "Banned-call-rule": "banned calls", "Own-work-rule": "own work"}
_RULE_LINK = re.compile(r"\]\((?:\.\./00_welcome/)?(?:00_welcome\.ipynb)?#([A-Za-z-]+-rule)\)")


@dataclass(frozen=True)
class ExerciseRules:
    """One exercise (its answer cell's grade_id) and the rules its text links, in 00's order."""

    grade_id: str
    rules: tuple[str, ...]


def exercise_rules(path: Path) -> list[ExerciseRules]:
    """The rules each autograded exercise of the notebook at ``path`` links, read from its text (the markdown
    after the previous exercise's test cells, up to its own last test cell), without running anything."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    found: list[tuple[str, list[str], bool]] = []   # grade_id, its prose, has tests
    prose: list[str] = []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "markdown" and not meta.get("solution"):
            prose.append(cell.source)
        elif cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            found.append((meta.get("grade_id", "?"), prose, False))
            prose = []
        elif cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and found:
            grade_id, text, _ = found[-1]
            found[-1] = (grade_id, text + prose, True)
            prose = []
    result = []
    for grade_id, text, has_tests in found:
        if has_tests:
            linked = set(_RULE_LINK.findall("\n".join(text)))
            result.append(ExerciseRules(grade_id, tuple(name for anchor, name in RULE_ANCHORS.items() if anchor in linked)))
    return result


def format_rules(path: Path, exercises: list[ExerciseRules]) -> str:
    """One line per exercise: the rules its tests check, as its text links them."""
    lines = [f"{path}: the rules each exercise's tests check, hidden tests included "
             "(00_welcome, section 'Conventions the tests check', says what each means):"]
    width = max((len(e.grade_id) for e in exercises), default=10)
    for exercise in exercises:
        lines.append(f"  {exercise.grade_id:<{width}}  {', '.join(exercise.rules) or 'values only (no convention linked)'}")
    if not exercises:
        lines.append("  no autograded exercise")
    else:  # the grader compares every argument of every call before and after, linked or not
        lines.append("  and in every exercise, linked or not: the in-place rule (never change an argument), except where "
                     "the exercise's function is meant to change what it is given (00_welcome, 'In-place rule')")
    return "\n".join(lines)


def _cell_result(cell) -> ExerciseResult:
    meta = nbgrader_meta(cell)
    grade_id, points = meta["grade_id"], float(meta.get("points", 0))
    if cell.cell_type == "markdown":
        answered = "YOUR ANSWER HERE" not in cell.source
        return ExerciseResult(grade_id, points, "MANUAL", "answered; graded by hand" if answered else "not answered yet")
    outputs = cell.get("outputs", [])
    if cell.get("execution_count") is None and not outputs:
        return ExerciseResult(grade_id, points, "FAIL", "did not run (an earlier cell stopped the notebook?)")
    for output in outputs:
        if output.get("output_type") == "error":
            name, value = output.get("ename", "Error"), _ANSI.sub("", output.get("evalue", ""))
            if name == "NotImplementedError":
                return ExerciseResult(grade_id, points, "TODO", "not attempted yet (NotImplementedError)")
            return ExerciseResult(grade_id, points, "FAIL", f"{name}: {value}".strip())
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            if not _HARMLESS_STDERR.search(output.get("text", "")):
                return ExerciseResult(
                    grade_id, points, "FAIL",
                    "the test cell wrote to stderr, which the autograder scores 0: " + output.get("text", "").strip()[:200],
                )
    return ExerciseResult(grade_id, points, "PASS")


def check_notebook(path: Path, *, profile: str = "ci", timeout: int | None = None) -> list[ExerciseResult]:
    """Run a copy of the notebook in its own folder and grade its visible tests; ``timeout``: seconds per
    cell (default: the grader's limit in ``profile``, :func:`course_utils.limits.grading_cell_timeout`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    with tempfile.TemporaryDirectory(prefix="course-check-") as scratch:
        copy = Path(scratch) / path.name
        _write_watched_copy(path, copy)
        # run in the notebook's own folder so relative paths behave as in JupyterLab
        limit = grading_cell_timeout(profile) if timeout is None else timeout
        nb, _ = execute_notebook(copy, profile=profile, timeout=limit, allow_errors=True, cwd=path.parent)
    return _results(nb.cells[1:])  # the watch's own first cell left out


def _results(cells: list) -> list[ExerciseResult]:
    """One result per graded cell of the executed ``cells``, then one ERROR per other code cell that raised."""
    results: list[ExerciseResult] = []
    unfinished: int | None = None   # the last cell outside the tests stopped by an unfinished exercise
    defined_by: dict[str, str] = {}  # function or class name -> the answer cell (grade_id) that defines it
    own = ""                         # the answer cell of the exercise the next test cell tests
    for index, cell in enumerate(cells):
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            own = str(meta.get("grade_id", ""))
            defined_by.update(dict.fromkeys(_DEFINED.findall(cell.source), own))
        if meta.get("grade"):
            result = _cell_result(cell)
            raiser = _raised_in(cell) if result.status == "TODO" else None
            owner = defined_by.get(raiser.split(".")[0]) if raiser else None   # a method: its class's exercise
            if owner is not None and owner != own:  # attempted; an earlier exercise is not written
                result = ExerciseResult(result.grade_id, result.points, "FAIL",
                                        f"NotImplementedError from {raiser}, which exercise {owner!r} "
                                        "defines and is not written yet: finish that one first (this exercise's own "
                                        "code may be right; its tests cannot run without it)")
            results.append(result)
        elif cell.cell_type == "code":
            first_line = next((line for line in cell.source.splitlines() if line.strip()), "")[:60]
            if _stopped_unfinished(cell):
                unfinished = index + 1
                raiser = _raised_in(cell)
                results.append(ExerciseResult(
                    f"cell {index + 1}", 0.0, "ERROR",
                    f"NotImplementedError from {raiser or 'an unfinished exercise'}: this cell has no fallback to the "
                    f"course's version, so Run All stops here until that exercise is written   [{first_line}]"))
            error = _cell_error(cell)
            if error:  # a cell outside the tests raised: the notebook does not run top to bottom
                if error.startswith("NameError") and unfinished is not None:
                    error += (f" (cell {unfinished} stopped earlier at an unfinished exercise, NotImplementedError, "
                              "and left this name undefined: finish that exercise first)")
                results.append(ExerciseResult(f"cell {index + 1}", 0.0, "ERROR", f"{error}   [{first_line}]"))
    return results


_DEFINED = re.compile(r"^(?:def|class)\s+(\w+)", re.M)
_FUNCTION = re.compile(r"^def\s+(\w+)", re.M)


def _write_watched_copy(path: Path, copy: Path) -> None:
    """``path`` copied to ``copy`` with one cell in front that holds, as the grader does, every call the test
    cells make of a function the answer cells define to the In-place rule
    (:func:`course_utils.checks.in_place.watch_calls`)."""
    import nbformat

    from course_utils.checks.in_place import cell_digest

    nb = nbformat.read(str(path), as_version=4)
    functions = sorted({name for cell in nb.cells if cell.cell_type == "code"
                        and nbgrader_meta(cell).get("solution") and not nbgrader_meta(cell).get("grade")
                        for name in _FUNCTION.findall(cell.source)})
    tests = sorted(cell_digest(cell.source) for cell in nb.cells
                   if cell.cell_type == "code" and nbgrader_meta(cell).get("grade"))
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        "from course_utils.checks.in_place import watch_calls as _course_watch_calls\n"
        f"_course_watch_calls(get_ipython(), {functions!r}, {tests!r})\n"
        "del _course_watch_calls"))
    nbformat.write(nb, str(copy))
# IPython's traceback: "Cell In[3], line 2, in causal_mask(T, device)", or "..., in GQAttention.forward(self, x)"
_FRAME = re.compile(r", in ([\w.]+)\(")


def _raised_in(cell) -> str | None:
    """The function whose frame raised the test cell's error (the innermost of its traceback), if named."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            frames = _FRAME.findall(_ANSI.sub("", "\n".join(output.get("traceback", []))))
            return frames[-1] if frames else None
    return None


def _stopped_unfinished(cell) -> bool:
    """The code cell raised NotImplementedError: an exercise it calls is not written yet."""
    return any(output.get("output_type") == "error" and output.get("ename") == "NotImplementedError"
               for output in cell.get("outputs", []))


def _cell_error(cell) -> str | None:
    """``"ename: evalue"`` of a code cell that raised (an unfinished exercise is not an error here)."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") != "NotImplementedError":
            return f"{output.get('ename', 'Error')}: {_ANSI.sub('', output.get('evalue', ''))}".strip()[:300]
    return None


def format_report(path: Path, results: list[ExerciseResult]) -> str:
    """One line per exercise, then the total of the visible tests."""
    lines = [f"{path}:"]
    width = max((len(r.grade_id) for r in results), default=10)
    for result in results:
        message = f"  {result.message}" if result.message else ""
        lines.append(f"  {result.status:<6} {result.grade_id:<{width}} ({result.points:g} pt){message}")
    errors = [r for r in results if r.status == "ERROR"]
    if errors:
        lines.append(f"  {len(errors)} cell(s) outside the tests raised an error: the notebook does not run top to "
                     "bottom, and the autograder will run it the same way. Fix the first one first.")
    auto = [r for r in results if r.status not in ("MANUAL", "ERROR")]
    passed = sum(r.points for r in auto if r.status == "PASS")
    total = sum(r.points for r in auto)
    lines.append(
        f"  visible tests: {passed:g} / {total:g} points. They check each exercise's conventions (device, dtype, "
        "gradients, generator, mode; `course check --rules` lists them) on their own inputs, and every call they "
        "make for the In-place rule, as the grader does; the hidden tests check values on inputs you do not see, and "
        "in many exercises sizes of one (a batch or a sequence of one: try x[:1] yourself)."
    )
    return "\n".join(lines)
