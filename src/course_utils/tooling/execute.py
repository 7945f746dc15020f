"""Execute notebooks top to bottom with the course kernel, saving executed copies."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_utils.tooling.layout import KERNEL_NAME, assignments as list_assignments, notebook_paths

__all__ = ["ExecutionResult", "execute_notebook", "execute_solutions"]


@dataclass
class ExecutionResult:
    path: Path
    output: Path | None
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def execute_notebook(
    path: Path,
    output: Path | None = None,
    *,
    profile: str | None = None,
    timeout: int = 900,
    allow_errors: bool = False,
    cwd: Path | None = None,
) -> tuple[nbformat.NotebookNode, ExecutionResult]:
    """Run ``path`` in ``cwd`` (default: its own folder); write the executed copy to ``output``.

    ``profile`` sets ``COURSE_PROFILE`` for the kernel (``None`` keeps the caller's).
    """
    nb = nbformat.read(str(path), as_version=4)
    previous = os.environ.get("COURSE_PROFILE")
    if profile is not None:
        os.environ["COURSE_PROFILE"] = profile
    started = time.perf_counter()
    error = None
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=KERNEL_NAME,
            allow_errors=allow_errors,
            resources={"metadata": {"path": str(cwd or path.parent)}},
        )
        client.execute()
    except CellExecutionError as failure:
        error = str(failure).strip().splitlines()[-1] if str(failure).strip() else repr(failure)
    except Exception as failure:  # noqa: BLE001 - a dead kernel, a timeout: report, go on
        error = f"{type(failure).__name__}: {failure}"
    finally:
        if profile is not None:
            if previous is None:
                os.environ.pop("COURSE_PROFILE", None)
            else:
                os.environ["COURSE_PROFILE"] = previous
    seconds = time.perf_counter() - started
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(output))
    return nb, ExecutionResult(path, output, seconds, error)


def execute_solutions(
    root: Path,
    names: Sequence[str] | None = None,
    *,
    profile: str,
    out_dir: Path,
    verbose: bool = True,
) -> list[ExecutionResult]:
    """Execute every solution notebook of the given assignments into ``out_dir/<assignment>/``."""
    paths = [p for name in (names or list_assignments(root)) for p in notebook_paths(root, name)]
    results = []
    for index, path in enumerate(paths, 1):
        if verbose:
            print(f"[execute {index}/{len(paths)}] {path.parent.name}/{path.name} (profile {profile}) ...", end="", flush=True)
        _, result = execute_notebook(path, out_dir / path.parent.name / path.name, profile=profile)
        results.append(result)
        if verbose:
            status = "ok" if result.ok else f"FAILED: {result.error}"
            print(f" {status} ({result.seconds:.1f} s)", flush=True)
    return results
