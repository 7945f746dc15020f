"""nbgrader's ``Execute`` preprocessor with each kernel in the grading sandbox.

Kept apart from :mod:`course_utils.tooling.sandbox` (which re-exports both classes) because
nbgrader and nbclient take seconds to import and ``course grade`` checks the sandbox
(:func:`~course_utils.tooling.sandbox.sandbox_problem`) before grading starts.
"""

from __future__ import annotations

import copy
import errno
from typing import Any

from nbclient.exceptions import DeadKernelError
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute

from course_utils.tooling.sandbox import (
    GiB,
    MiB,
    SandboxError,
    SandboxKernelManager,
    SandboxLimits,
    sandbox_enabled,
    sandbox_problem,
)

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
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):  # type: ignore[override]
        if not sandbox_enabled() or km is not None:
            return super().preprocess(nb, resources, km)
        problem = sandbox_problem()
        if problem:
            raise SandboxError(problem + " (COURSE_SANDBOX=off grades unsandboxed)")
        self._sandbox_notebook = nb
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

    async def async_start_new_kernel_client(self):  # type: ignore[override]
        kc = await super().async_start_new_kernel_client()
        if isinstance(self.km, SandboxKernelManager):
            self.km.seal_ipc()
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _limits_text(self) -> str:
        return self._sandbox_km.limits.describe() if self._sandbox_km is not None else SandboxLimits.from_env().describe()

    def create_kernel_manager(self):  # type: ignore[override]
        km = super().create_kernel_manager()
        if isinstance(km, SandboxKernelManager):
            km.work_files = {self._sandbox_name: _public_copy(self._sandbox_notebook)}
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
        limits = self._sandbox_km.limits if getattr(self, "_sandbox_km", None) is not None else SandboxLimits.from_env()
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


def _public_copy(nb: Any) -> bytes:
    """The notebook as the student could have it: hidden tests and outputs cleared."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput

    public = copy.deepcopy(nb)
    public, _ = ClearHiddenTests().preprocess(public, {})
    public, _ = ClearOutput().preprocess(public, {})
    return nbformat.writes(public).encode()
