"""Prove, quickly, that the test cells reject every curated mistake.

Grading one student per mistake with ``nbgrader autograde`` executes the whole notebook for
each mistake, which made the test suite slow. Here one kernel runs the solution notebook once;
then, for each mistake, the cells from the mistaken answer cell to the last test cell that must
reject it are re-run with the wrong answer in place (so cells in between that use the answer see
it, as they would in a student's notebook), the test cells that raise are recorded, and the same
range is re-run with the right answer to restore the kernel, checking that the tests pass again.
A wrong answer that changes state those cells cannot restore (a global defined earlier, changed in
place) fails that check, or says so with ``fresh_kernel=True``: then a fresh kernel runs the
solution again before the next candidate, so later candidates never see its damage.

The real ``nbgrader autograde`` still grades the solutions, the blank release and one student
holding a mistake in every exercise (:mod:`course_grader.demo`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import nbformat
from nbclient import NotebookClient

from course_utils.cells import grading_cells, nbgrader_meta, read, strip_solution_markers
from course_grader.grading.checker import CheckResult, check_cell, checker_enabled, grade_test_cell, prelude_from_source
from course_utils.cells import split_hidden
from course_utils.layout import KERNEL_NAME, notebook_paths
from course_grader.authoring.mistakes import Accepted, Mistake

__all__ = ["Rejection", "check_rejections"]


@dataclass(frozen=True)
class Rejection:
    """What happened to one mistake (or, with ``mistake=None``, to the solution run)."""

    assignment: str
    mistake: Mistake | Accepted | None
    failed_tests: tuple[str, ...]
    problem: str = ""
    errors: dict[str, str] = field(default_factory=dict)  # (the solution run) each failed test cell's error
    visible: tuple[str, ...] = ()  # the failed test cells whose visible part already failed: seen before submitting

    @property
    def ok(self) -> bool:
        if self.problem:
            return False
        if self.mistake is None or isinstance(self.mistake, Accepted):
            return not self.failed_tests
        return set(self.mistake.rejected_by) <= set(self.failed_tests)

    def describe(self) -> str:
        if isinstance(self.mistake, Accepted):
            what = f"right answer {self.mistake.name!r} in {self.mistake.cell}"
        else:
            what = "solution" if self.mistake is None else f"mistake {self.mistake.name!r} in {self.mistake.cell}"
        if self.problem:
            return f"{self.assignment}: {what}: {self.problem}"
        if self.mistake is None:
            why = "".join(f"\n    {gid}: {self.errors.get(gid, '')[:400]}" for gid in self.failed_tests if self.errors.get(gid))
            return f"{self.assignment}: solution fails {list(self.failed_tests)}{why}"
        if isinstance(self.mistake, Accepted):
            return f"{self.assignment}: {what} is rejected by {list(self.failed_tests)}"
        kept = sorted(set(self.mistake.rejected_by) - set(self.failed_tests))
        return f"{self.assignment}: {what} passes {kept} (failed only {list(self.failed_tests)})"


def _error(cell: nbformat.NotebookNode) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename')}: {output.get('evalue')}"
    return None


class _Kernel:
    """One kernel running one notebook's cells on demand (between :meth:`start` and :meth:`stop`)."""

    def __init__(self, nb: nbformat.NotebookNode, cwd: Path, timeout: int, assignment: str = "") -> None:
        self.nb = nb
        self._open = ExitStack()
        self.checked = checker_enabled(assignment)
        self.timeout = timeout
        self.prelude = prelude_from_source(
            [c.source for c in nb.cells if c.cell_type == "code" and not nbgrader_meta(c).get("solution")
             and not nbgrader_meta(c).get("grade")],
            [c.source for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c).get("solution")])
        self.client = NotebookClient(
            nb, timeout=timeout, kernel_name=KERNEL_NAME, allow_errors=True,
            resources={"metadata": {"path": str(cwd)}},
        )
        self.connection: dict | None = None  # set by attach(); else the kernel manager's
        self.visible_failed = False  # the last graded test cell failed in its visible part (course check sees it)

    def start(self, solutions: dict[int, str], tests: set[str]) -> tuple[list[str], str]:
        """Start the kernel and run the solution top to bottom: (test cells that failed, problem)."""
        self._open.enter_context(self.client.setup_kernel())
        failed: list[str] = []
        self.errors: dict[str, str] = {}
        for index in sorted(solutions):
            error = self.run(index, solutions[index])
            grade_id = nbgrader_meta(self.nb.cells[index]).get("grade_id")
            if error and grade_id in tests:
                failed.append(grade_id)
                self.errors[grade_id] = error
            elif error:
                return failed, f"cell {index} of the solution raised {error}"
        return failed, ""

    def attach(self, connection: dict) -> None:
        """Use a kernel that has just run the solution notebook top to bottom (nbval's, in `make
        test`) instead of starting one: the solution run is not repeated. Its owner stops it."""
        from jupyter_client.asynchronous import AsyncKernelClient

        client = AsyncKernelClient()
        client.load_connection_info(connection)
        client.start_channels()
        self.client.kc = client
        self.connection = connection
        self._open.callback(client.stop_channels)

    def stop(self) -> None:
        self._open.close()

    def run(self, index: int, source: str, check: bool = True) -> str | None:
        """Run ``source`` as cell ``index``; return the error (``"ename: evalue"``) or None. A test
        cell is graded as in grading (:func:`~course_grader.grading.checker.grade_test_cell`);
        ``check=False``: its visible part only, without the checker (the checker changes nothing
        in the kernel's namespace, so restoring the kernel does not need it)."""
        cell = self.nb.cells[index]
        meta = nbgrader_meta(cell)
        self.visible_failed = False
        if not (meta.get("grade") and not meta.get("solution") and self.checked):
            return self.execute(index, source)
        if not check:
            return self.execute(index, split_hidden(source))
        result = grade_test_cell(_TestCell(self, index), source)
        return None if result.ok else f"{result.ename}: {result.evalue}"

    def execute(self, index: int, source: str) -> str | None:
        """Run ``source`` as cell ``index`` in the kernel: its error (``"ename: evalue"``) or None."""
        cell = self.nb.cells[index]
        full = cell.source
        cell.source = source
        try:
            self.client.execute_cell(cell, index)
        except Exception as failure:  # noqa: BLE001 - a timeout or a dead kernel is a result too
            return f"{type(failure).__name__}: {failure}"
        finally:
            cell.source = full
        return _error(cell)


class _TestCell:
    """A test cell of a curated mistake's run, graded as grading does. The kernel runs the course's
    own candidates, so a visible test that fails there is final (grading never takes a kernel's word:
    there the checker decides every cell)."""

    def __init__(self, kernel: _Kernel, index: int) -> None:
        self.kernel, self.index = kernel, index

    def run_visible(self, source: str) -> CheckResult | None:
        error = self.kernel.execute(self.index, source)
        self.kernel.visible_failed = error is not None
        if error is None:
            return None
        ename, _, evalue = error.partition(": ")
        return CheckResult(False, ename, evalue)

    def check(self, source: str) -> CheckResult:
        kernel = self.kernel
        connection = kernel.connection or kernel.client.km.get_connection_info()
        return check_cell(connection, source, kernel.prelude, float(kernel.timeout))


def check_rejections(
    root: Path,
    assignment: str,
    mistakes: Sequence[Mistake | Accepted],
    *,
    profile: str = "ci",
    timeout: int = 300,
    running: dict | None = None,
) -> list[Rejection]:
    """Run the solution notebook of ``assignment`` once, then every mistake; one result each.

    The first result is the solution run (``mistake=None``): every test cell must pass.
    An :class:`Accepted` alternative in ``mistakes`` must pass the tests it is checked by.
    ``running``: the connection info of a kernel that has just run the solution notebook top to
    bottom without an error (nbval's in `make test`); the mistakes then run in it, and the
    solution run is not repeated (its result is nbval's).
    """
    (path,) = notebook_paths(root, assignment)
    source_nb = read(path)
    nb = nbformat.v4.new_notebook(metadata=source_nb.metadata)
    nb.cells = [nbformat.from_dict(dict(cell)) for cell in source_nb.cells]
    solutions: dict[int, str] = {}
    positions: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id:
            positions[grade_id] = index
        if cell.cell_type == "code":
            solutions[index] = strip_solution_markers(cell.source)
    tests = {nbgrader_meta(c)["grade_id"] for c in grading_cells(nb)}

    previous = os.environ.get("COURSE_PROFILE")
    os.environ["COURSE_PROFILE"] = profile
    workdir = Path(tempfile.mkdtemp(prefix=f"rejection-{assignment}-"))
    try:
        shutil.copytree(path.parent, workdir, dirs_exist_ok=True)
        kernel = _Kernel(nb, workdir, timeout, assignment)
        failed: list[str]
        try:
            if running is not None:
                kernel.attach(running)
                failed, problem = [], ""
            else:
                failed, problem = kernel.start(solutions, tests)
            results = [Rejection(assignment, None, () if problem else tuple(failed), problem,
                                 errors=dict(getattr(kernel, "errors", {})))]
            if failed or problem:
                return results
            for mistake in mistakes:
                result, recovered = _check_one(kernel, assignment, mistake, solutions, positions, tests)
                results.append(result)
                if recovered and not mistake.fresh_kernel:
                    continue
                kernel.stop()  # its damage outlives its cells: the next candidate gets a fresh kernel
                kernel = _Kernel(nb, workdir, timeout, assignment)
                failed, problem = kernel.start(solutions, tests)
                if failed or problem:
                    results[-1] = Rejection(assignment, mistake, result.failed_tests,
                                            f"the solution fails in the fresh kernel after it ({problem or failed})")
                    return results
            return results
        finally:
            kernel.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if previous is None:
            os.environ.pop("COURSE_PROFILE", None)
        else:
            os.environ["COURSE_PROFILE"] = previous


def _check_one(
    kernel: _Kernel,
    assignment: str,
    mistake: Mistake | Accepted,
    solutions: dict[int, str],
    positions: dict[str, int],
    tests: set[str],
) -> tuple[Rejection, bool]:
    """The candidate's result, and whether re-running its cells with the right answer restored the kernel."""
    if isinstance(mistake, Accepted):
        checked = mistake.checked_by
        if not checked and mistake.cell in positions:  # the first test cell after the answer
            later = sorted((i, gid) for gid, i in positions.items() if gid in tests and i > positions[mistake.cell])
            checked = (later[0][1],) if later else ()
    else:
        checked = mistake.rejected_by
    unknown = [gid for gid in (mistake.cell, *checked) if gid not in positions]
    if unknown:
        return Rejection(assignment, mistake, (), f"no cell with grade_id {unknown}"), True
    if not checked:
        return Rejection(assignment, mistake, (), "names no test cell"), True
    not_tests = [gid for gid in checked if gid not in tests]
    if not_tests:
        return Rejection(assignment, mistake, (), f"{not_tests} are not test cells"), True
    start = positions[mistake.cell]
    stop = max(positions[gid] for gid in checked)
    if stop < start:
        return Rejection(assignment, mistake, (), "its tests come before the answer cell"), True
    cells = [i for i in sorted(solutions) if start <= i <= stop]
    try:
        wrong = mistake.apply(solutions[start])
    except ValueError as error:
        return Rejection(assignment, mistake, (), str(error)), True
    failed: list[str] = []
    visible: list[str] = []
    for index in cells:
        raised = kernel.run(index, wrong if index == start else solutions[index])
        grade_id = nbgrader_meta(kernel.nb.cells[index]).get("grade_id")
        if raised and grade_id in tests:
            failed.append(grade_id)
            if kernel.visible_failed:
                visible.append(grade_id)
    recovered = True
    for index in cells:  # restore the right answer and everything computed from it
        if kernel.run(index, solutions[index], check=False):
            recovered = False  # state from before `start` was damaged: the caller starts a fresh kernel
    return Rejection(assignment, mistake, tuple(failed), visible=tuple(visible)), recovered
