"""Execute one notebook top to bottom with the course kernel (``course check`` and the grader's
``course execute``).

The kernel talks to us over IPC sockets in a private temporary folder (no TCP port, so no
"running over TCP without encryption" warning); ``kernel_log`` sends the kernel's own log (its
stderr: warnings, crashes) to a file. nbclient is imported inside :func:`execute_notebook` only.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.layout import KERNEL_NAME
from course_utils.limits import execution_timeout

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["ExecutionResult", "execute_notebook"]



@dataclass
class ExecutionResult:
    path: Path
    output: Path | None
    seconds: float
    error: str | None = None
    kernel_log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def execute_notebook(
    path: Path,
    output: Path | None = None,
    *,
    profile: str | None = None,
    timeout: int | None = None,
    allow_errors: bool = False,
    cwd: Path | None = None,
    kernel_log: Path | None = None,
    figures: bool = False,
) -> tuple[NotebookNode, ExecutionResult]:
    """Run ``path`` in ``cwd`` (default: its own folder); write the executed copy to ``output``.

    ``profile`` sets ``COURSE_PROFILE`` for the kernel (``None`` keeps the caller's).
    ``figures``: the kernel draws figures inline into the copy even where ``MPLBACKEND`` names another
    backend (under ``Agg``, as CI and headless machines set it, ``plt.show()`` draws nothing: an executed
    copy made there had no figure at all).
    ``timeout`` is the limit per cell in seconds: ``None`` takes the profile's
    (:func:`course_utils.limits.execution_timeout`), ``0`` means none. ``kernel_log`` receives the kernel's
    stderr (default: this process's stderr).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    nb = nbformat.read(str(path), as_version=4)
    if timeout is None:
        timeout = execution_timeout(profile)
    previous = os.environ.get("COURSE_PROFILE")
    if profile is not None:
        os.environ["COURSE_PROFILE"] = profile
    started = time.perf_counter()
    error = None
    log_handle = None
    try:
        with tempfile.TemporaryDirectory(prefix="course-kernel-") as sockets:
            config = Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}})
            client = NotebookClient(
                nb,
                timeout=timeout or None,
                kernel_name=KERNEL_NAME,
                allow_errors=allow_errors,
                resources={"metadata": {"path": str(cwd or path.parent)}},
                config=config,
            )
            kwargs: dict = {}
            if figures and "inline" not in os.environ.get("MPLBACKEND", "inline"):
                kwargs["env"] = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # ipykernel's inline default
            if kernel_log is not None:
                kernel_log.parent.mkdir(parents=True, exist_ok=True)
                log_handle = kernel_log.open("w")
                kwargs["stderr"] = log_handle
            client.execute(**kwargs)
    except CellExecutionError as failure:
        error = str(failure).strip().splitlines()[-1] if str(failure).strip() else repr(failure)
    except Exception as failure:  # noqa: BLE001 - a dead kernel, a timeout: report, go on
        error = f"{type(failure).__name__}: {failure}"
    finally:
        if log_handle is not None:
            log_handle.close()
        if profile is not None:
            if previous is None:
                os.environ.pop("COURSE_PROFILE", None)
            else:
                os.environ["COURSE_PROFILE"] = previous
    seconds = time.perf_counter() - started
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(output))
    return nb, ExecutionResult(path, output, seconds, error, kernel_log)
