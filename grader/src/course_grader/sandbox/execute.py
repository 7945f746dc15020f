"""nbgrader's ``Execute`` preprocessor with each kernel in the grading sandbox.

Kept apart from :mod:`course_grader.sandbox.bubblewrap` (which never imports this module) because
nbgrader and nbclient take seconds to import and ``course grade`` checks the sandbox
(:func:`~course_grader.sandbox.bubblewrap.sandbox_problem`) before grading starts.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import os
import time
from pathlib import Path
from typing import Any

import nbformat

from nbclient.exceptions import DeadKernelError
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute

from course_grader.grading.checker import checker_enabled
from course_utils.cells import grading_cells, is_test_cell
from course_grader.grading.runner import PIPELINE_ENV
from course_grader.sandbox.bubblewrap import (
    GiB,
    MiB,
    SandboxError,
    SandboxKernelManager,
    SandboxLimits,
    sandbox_enabled,
    sandbox_problem,
)
from course_grader.sandbox.withheld import course_withheld_paths, package_dir, withheld_package

__all__ = ["SandboxLimitError", "SandboxedExecute"]


class SandboxLimitError(DeadKernelError):
    """The sandboxed kernel died; the message says why (which limit, or how it ended).

    Subclasses nbclient's ``DeadKernelError``: nbgrader treats it as a dead kernel and goes on
    with the next submission. The message starts with ``Kernel died``.
    """


# ---------------------------------------------------------------- nbgrader's Execute, sandboxed


_LIMIT_ERRORS = {
    "MemoryError": "memory",
    "OutOfMemoryError": "memory",
}


class SandboxedExecute(Execute):
    """nbgrader's ``Execute`` with each notebook's kernel in a :class:`SandboxKernelManager`.

    The kernel's working directory is a private copy of the notebook (hidden tests cleared),
    never the notebook's folder in the course. A kernel that dies raises
    :class:`SandboxLimitError` saying why; an error a limit caused inside a cell
    (``MemoryError``, ``File too large``, no more processes) gets the limit appended.
    Unsandboxed only when ``COURSE_SANDBOX=off``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if sandbox_enabled():
            kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
            # the notebook is done and nothing of the kernel is kept: kill it with its sandbox at once, not a
            # graceful shutdown_request and a wait for it to exit (1-2.5 s per graded notebook)
            kwargs.setdefault("shutdown_kernel", "immediate")
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):  # type: ignore[override]
        started = time.perf_counter()
        # where this notebook's execute step spent its time (benchmarks/bench_grading.py --part ratio reads it)
        self._seconds = dict.fromkeys(("checker_start", "kernel_start", "answer_cells", "test_cells", "kernel_stop"), 0.0)
        self._sandbox_resources = resources or {}
        for stale in ("_prelude", "_withheld_paths", "_kernel_stopped"):
            if hasattr(self, stale):
                delattr(self, stale)
        iopub = (self.raise_on_iopub_timeout, self.iopub_timeout)  # a stopped kernel changes them: this notebook only
        try:
            graded = self._sandbox_resources.get("nbgrader", {})
            assignment = graded.get("assignment")
            self._checker_env: dict[str, str] = {}
            if checker_enabled(assignment) and next(grading_cells(nb), None) is not None:
                from course_grader.grading.checker import CheckerProcess
                from course_grader.grading.variants import checker_environment

                # the student's variant seed, from the gradebook: the checker's alone (never the kernel's)
                checker_started = time.perf_counter()
                self._checker_env = checker_environment(graded.get("db_url"), graded.get("student"), assignment)
                # starts (or forks) while the kernel starts, not at the first test, and imports what the tests use then
                self._checker = CheckerProcess(self._checker_env, self._checker_prelude())
                self._add_seconds("checker_start", checker_started)
            nb, resources = self._preprocess(nb, resources, km)
            self._seconds["execute"] = time.perf_counter() - started
            nb.metadata[PIPELINE_MARK] = {"pipeline": os.environ.get(PIPELINE_ENV) == "1",
                                          "seconds": {k: round(v, 3) for k, v in self._seconds.items()}}
            return nb, resources
        finally:
            self.raise_on_iopub_timeout, self.iopub_timeout = iopub
            if getattr(self, "_checker", None) is not None:
                self._checker.close()
                self._checker = None

    def _preprocess(self, nb, resources=None, km=None):  # type: ignore[no-untyped-def]
        if not sandbox_enabled() or km is not None:
            return super().preprocess(nb, resources, km)
        problem = sandbox_problem()
        if problem:
            raise SandboxError(problem + " (COURSE_SANDBOX=off grades unsandboxed)")
        self._sandbox_notebook = nb
        self._sandbox_resources = resources or {}
        self._sandbox_name = ((resources or {}).get("nbgrader", {}).get("notebook") or "notebook") + ".ipynb"
        self._sandbox_km: SandboxKernelManager | None = None
        original = resources if resources is not None else {}
        # never the notebook's folder in the course as the kernel's cwd (the kernel has its own)
        resources = dict(original)
        resources["metadata"] = {k: v for k, v in original.get("metadata", {}).items() if k != "path"}
        try:
            nb, _ = super().preprocess(nb, resources, km)
            return nb, original
        except DeadKernelError as error:
            managed = self._sandbox_km
            reason = managed.death_reason() if managed is not None else str(error)
            raise SandboxLimitError(f"Kernel died: {reason} (sandbox limits: {self._limits_text()})") from error
        except RuntimeError as error:
            managed = self._sandbox_km
            if managed is not None and ("Kernel didn't respond" in str(error) or "Kernel died before" in str(error)):
                raise SandboxError(f"the sandboxed kernel did not start: {error}\n{managed.startup_log()}") from error
            raise

    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        started = time.perf_counter()  # the sandbox and the kernel's process
        try:
            await super().async_start_new_kernel(**kwargs)
        finally:
            self._add_seconds("kernel_start", started)

    start_new_kernel = run_sync(async_start_new_kernel)

    async def _async_cleanup_kernel(self) -> None:  # type: ignore[override]
        started = time.perf_counter()  # the kernel shut down, its sandbox and cgroup removed
        try:
            await super()._async_cleanup_kernel()
        finally:
            self._add_seconds("kernel_stop", started)

    _cleanup_kernel = run_sync(_async_cleanup_kernel)

    async def async_start_new_kernel_client(self):  # type: ignore[override]
        started = time.perf_counter()  # until the kernel answers
        kc = await super().async_start_new_kernel_client()
        if isinstance(self.km, SandboxKernelManager):
            self.km.seal_ipc()
        self._add_seconds("kernel_start", started)
        return kc

    def _add_seconds(self, part: str, started: float) -> None:
        seconds = getattr(self, "_seconds", None)
        if seconds is not None:
            seconds[part] = seconds.get(part, 0.0) + time.perf_counter() - started

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):  # type: ignore[override]
        """A test cell: the kernel runs its visible part; the checker runs all of it and decides.

        The cell's points are the verdict recorded here (:mod:`course_grader.grading.verdict`);
        what the kernel printed stays for the student to read, but no ``execute_result`` or
        ``display_data`` of the kernel is kept in a test cell. Once the kernel has been stopped
        (it ignored an interrupt, or a test's deadline passed) no cell runs: each fails at once.
        """
        self._executing = cell_index
        assignment = getattr(self, "_sandbox_resources", {}).get("nbgrader", {}).get("assignment")
        test_cell = is_test_cell(cell)
        from course_grader.grading.checker import CheckResult, grade_test_cell

        stopped = getattr(self, "_kernel_stopped", None)
        if stopped and cell.cell_type == "code":
            cell.outputs = [_error_output("KernelStopped", stopped)]
            if test_cell:
                record_check(cell, CheckResult(False, "KernelStopped", stopped), show=False)
            return cell
        started = time.perf_counter()
        if not test_cell or not checker_enabled(assignment):
            try:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            finally:
                self._add_seconds("test_cells" if test_cell else "answer_cells", started)
        if getattr(self, "_checker", None) is None:
            from course_grader.grading.checker import CheckerProcess

            self._checker = CheckerProcess(getattr(self, "_checker_env", None))
        result = await asyncio.to_thread(grade_test_cell, _GradedKernel(self, asyncio.get_running_loop(), cell, cell_index,
                                                                        execution_count, store_history), cell.source)
        record_check(cell, result)
        self._add_seconds("test_cells", started)
        if result.timed_out:
            await self._stop_kernel("a test of this cell ran past its time limit; the kernel was stopped, "
                                    "and the notebook's remaining cells were not run")
        return cell

    async def _async_handle_timeout(self, timeout, cell=None):  # type: ignore[override]
        """A cell ran past its limit: nbclient interrupts the kernel. A kernel that does not
        answer within :data:`INTERRUPT_GRACE` seconds (it swallows interrupts) is stopped, and every
        later cell fails at once instead of costing a cell limit each."""
        reply = await super()._async_handle_timeout(timeout, cell)
        if not await self._answers_interrupt():
            await self._stop_kernel(f"a cell ran past its {timeout} s limit and the kernel did not stop when "
                                    "interrupted; it was stopped, and the notebook's remaining cells were not run")
        return reply

    async def _answers_interrupt(self) -> bool:
        """Whether the interrupted cell's execute reply arrives within the grace period."""
        import time
        from queue import Empty

        from nbclient.util import ensure_async

        end = time.monotonic() + INTERRUPT_GRACE
        while (left := end - time.monotonic()) > 0:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=left))
            except (Empty, asyncio.TimeoutError):
                return False
            if msg.get("msg_type") == "execute_reply":
                return True
        return False

    async def _stop_kernel(self, reason: str) -> None:
        self._kernel_stopped = reason
        self.raise_on_iopub_timeout = False  # the stopped kernel's last outputs never come: do not wait
        self.iopub_timeout = 1
        km = self.km
        try:
            if isinstance(km, SandboxKernelManager):
                km._kill_sandbox()
            else:
                from nbclient.util import ensure_async

                await ensure_async(km.interrupt_kernel())
                await ensure_async(km.shutdown_kernel(now=True))
        except Exception:  # noqa: BLE001 - the kernel is already gone
            pass

    def _withheld(self) -> list[str]:
        """The references the graded notebook's sandbox withholds (the checker lends them by
        callback instead of asking the kernel to import them)."""
        if not hasattr(self, "_withheld_paths"):
            source = source_notebook(self.config, getattr(self, "_sandbox_resources", {}))
            self._withheld_paths = course_withheld_paths(source) if source is not None and sandbox_enabled() else []
        return self._withheld_paths

    execute_cell = run_sync(async_execute_cell)  # nbclient binds the sync name to its own coroutine

    async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):  # type: ignore[override]
        """nbclient's loop over the kernel's outputs, dropping a message that does not deserialize (a
        kernel that sends from several threads at once can garble or replay one: "Duplicate Signature")
        instead of failing the whole submission."""
        from nbclient.exceptions import CellExecutionComplete
        from nbclient.util import ensure_async

        while True:
            try:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=None))
            except ValueError:
                continue
            if msg["parent_header"].get("msg_id") == parent_msg_id:
                try:
                    self.process_message(msg, cell, cell_index)
                except CellExecutionComplete:
                    return

    def _update_display_id(self, display_id: str, msg: dict) -> None:  # type: ignore[override]
        """``update_display`` reaches only the cell running now: a later cell rewriting an earlier
        answer's output (whose outputs feedback shows) would carry what it saw of the hidden tests
        there (red team, issue 25)."""
        mapping = self._display_id_map.get(display_id, {})
        current = getattr(self, "_executing", None)
        others = {index: outputs for index, outputs in mapping.items() if index != current}
        for index in others:
            del mapping[index]
        try:
            super()._update_display_id(display_id, msg)
        finally:
            mapping.update(others)

    def _checker_prelude(self) -> str:
        if not hasattr(self, "_prelude"):
            self._prelude = source_prelude(self.config, getattr(self, "_sandbox_resources", {}))
        return self._prelude

    def _limits_text(self) -> str:
        return self._sandbox_km.limits.describe() if self._sandbox_km is not None else SandboxLimits.from_env().describe()

    def create_kernel_manager(self):  # type: ignore[override]
        km = super().create_kernel_manager()
        if isinstance(km, SandboxKernelManager):
            km.work_files = {self._sandbox_name: _public_copy(self._sandbox_notebook)}
            paths = self._withheld()
            if paths:  # this notebook's answers, withheld from its kernel
                assignment = self._sandbox_resources.get("nbgrader", {}).get("assignment") or "this notebook"
                km.overlays = {str(package_dir()): str(withheld_package(assignment, paths))}
            self._sandbox_km = km
        return km

    def on_cell_executed(self, **kwargs: Any) -> None:
        super().on_cell_executed(**kwargs)
        if not sandbox_enabled():
            return
        for output in kwargs["cell"].get("outputs", []):
            if output.get("output_type") == "error":
                note = self._limit_note(output.get("ename", ""), output.get("evalue", ""))
                if note and note not in output.get("evalue", ""):
                    output["evalue"] = f"{output.get('evalue', '')} [{note}]"
                    output["traceback"] = [*output.get("traceback", []), note]

    def _limit_note(self, ename: str, evalue: str) -> str | None:
        manager = getattr(self, "_sandbox_km", None)
        limits = manager.limits if manager is not None else SandboxLimits.from_env()
        if _LIMIT_ERRORS.get(ename) == "memory" or "can't allocate memory" in evalue or "Cannot allocate memory" in evalue:
            if limits.memory is not None:
                return f"grading sandbox: the notebook's memory limit is {limits.memory / GiB:g} GiB"
        if f"[Errno {errno.EFBIG}]" in evalue or "File too large" in evalue:
            return f"grading sandbox: files are limited to {limits.file_size / MiB:g} MiB"
        if f"[Errno {errno.ENOSPC}]" in evalue:
            return f"grading sandbox: the working directory and /tmp hold at most {limits.tmp_size / MiB:g} MiB each"
        if f"[Errno {errno.EAGAIN}]" in evalue and ename in {"BlockingIOError", "OSError"}:
            return f"grading sandbox: the notebook may run at most {limits.processes} processes/threads"
        return None


PIPELINE_MARK = "course_grade"  # notebook metadata: which grading path autograded it (see runner.PIPELINE_ENV)
INTERRUPT_GRACE = 5.0  # seconds an interrupted kernel has to answer before it is stopped


def record_check(cell: Any, result: Any, show: bool = True) -> None:
    """Write the checker's verdict into the executed cell's metadata (the cell's points:
    :func:`course_grader.grading.verdict.verdict_score`), its evidence beside it, and, when it
    failed and ``show``, an error output the student reads."""
    from course_grader.grading.verdict import VERDICT_KEY

    cell.setdefault("metadata", {})[VERDICT_KEY] = {"ok": bool(result.ok), "evidence": list(result.evidence)}
    if not result.ok and show:
        cell.setdefault("outputs", []).append(_error_output(result.ename or "CheckFailed", result.evalue))


def _error_output(ename: str, evalue: str) -> Any:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class _GradedKernel:
    """The sandboxed kernel as :func:`~course_grader.grading.checker.grade_test_cell` grades a test
    cell in it (called from a worker thread: the kernel's run goes back to the executor's loop)."""

    def __init__(self, executor: Any, loop: asyncio.AbstractEventLoop, cell: Any, index: int,
                 execution_count: Any, store_history: bool) -> None:
        self.executor, self.loop, self.cell = executor, loop, cell
        self.index, self.execution_count, self.store_history = index, execution_count, store_history

    def run_visible(self, source: str) -> Any:
        from course_grader.grading.checker import CheckResult

        executor: SandboxedExecute = self.executor
        cell, full = self.cell, self.cell.source
        run = super(SandboxedExecute, executor).async_execute_cell(cell, self.index, self.execution_count, self.store_history)
        cell.source = source
        try:
            asyncio.run_coroutine_threadsafe(run, self.loop).result()
        finally:
            cell.source = full
        # What the kernel wrote is the student's to forge: no execute_result or display_data of it stays
        # in a test cell (nbgrader would read one as the score), and no error of it either (its message
        # is the kernel's to choose: hidden inputs it saw earlier, a fake check message). The checker
        # runs the whole cell, the visible tests included, and its verdict is the one shown.
        kernel_errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
        timed_out = any(o.get("ename") in ("CellTimeoutError", "KeyboardInterrupt") for o in kernel_errors)
        stopped = getattr(executor, "_kernel_stopped", None)
        if timed_out or stopped:  # the visible tests ran past the cell's limit (the checker would only wait as long again)
            reason = stopped or "the visible tests ran past the cell's time limit"
            return CheckResult(False, "CellTimeoutError" if timed_out else "KernelStopped", reason)
        return None

    def check(self, source: str) -> Any:
        executor = self.executor
        return executor._checker.check(executor.km.get_connection_info(), source, executor._checker_prelude(),
                                       float(executor.timeout or 120), executor._withheld())


def source_notebook(config: Any, resources: dict) -> Path | None:
    """The instructor's source of the notebook being graded (never the student's copy)."""
    info = resources.get("nbgrader", {}) if isinstance(resources, dict) else {}
    assignment, notebook = info.get("assignment"), info.get("notebook")
    if not assignment or not notebook:
        return None
    course = config.get("CourseDirectory", {}) if hasattr(config, "get") else {}
    root = Path(course.get("root") or os.getcwd())
    path = root / course.get("source_directory", "source") / assignment / f"{notebook}.ipynb"
    return path if path.exists() else None


def source_prelude(config: Any, resources: dict) -> str:
    """The import statements of the instructor's code cells, read from the *source* notebook
    (a student can edit the cells of their copy that nbgrader does not restore)."""
    from course_utils.cells import nbgrader_meta
    from course_grader.grading.checker import prelude_from_source

    path = source_notebook(config, resources)
    if path is None:
        return ""
    source = nbformat.read(str(path), as_version=4)
    return prelude_from_source(
        [c.source for c in source.cells if c.cell_type == "code" and not nbgrader_meta(c).get("solution")
         and not nbgrader_meta(c).get("grade")],
        [c.source for c in source.cells if c.cell_type == "code" and nbgrader_meta(c).get("solution")])


def _public_copy(nb: Any) -> bytes:
    """The notebook as the student could have it: hidden tests and outputs cleared."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput

    public = copy.deepcopy(nb)
    public, _ = ClearHiddenTests().preprocess(public, {})
    public, _ = ClearOutput().preprocess(public, {})
    return nbformat.writes(public).encode()
