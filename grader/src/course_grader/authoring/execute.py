"""``course execute``: run every solution notebook, saving executed copies in ``build/executed/<profile>/``.

One progress line per notebook; each kernel's own log (warnings, crashes) goes to a file beside
its executed copy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from course_utils.execute import ExecutionResult, execute_notebook
from course_utils.limits import execution_timeout
from course_utils.layout import assignments as list_assignments, notebook_paths

__all__ = ["execute_solutions"]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def execute_solutions(
    root: Path,
    names: Sequence[str] | None = None,
    *,
    profile: str,
    out_dir: Path,
    verbose: bool = True,
    timeout: int | None = None,
) -> list[ExecutionResult]:
    """Execute every solution notebook of the given assignments into ``out_dir/<assignment>/``.

    Prints one line per notebook (``verbose``), finished when the notebook is; each kernel's log goes to
    ``<notebook>.kernel.log`` beside its executed copy. ``timeout``: as in :func:`execute_notebook`.
    """
    paths = [p for name in (names or list_assignments(root)) for p in notebook_paths(root, name)]
    limit = execution_timeout(profile) if timeout is None else timeout
    if verbose:
        print(f"   {len(paths)} notebooks, cell time limit: {f'{limit} s' if limit else 'none'}; "
              f"kernel logs beside the executed copies", flush=True)
    results = []
    started = time.perf_counter()
    for index, path in enumerate(paths, 1):
        output = out_dir / path.parent.name / path.name
        if verbose:
            print(f"[execute {index}/{len(paths)}] {path.parent.name}/{path.name} (profile {profile}) ...", end="", flush=True)
        _, result = execute_notebook(path, output, profile=profile, timeout=timeout,
                                     kernel_log=output.with_suffix(".kernel.log"), figures=True)
        results.append(result)
        if verbose:
            status = "ok" if result.ok else f"FAILED: {result.error} (kernel log: {result.kernel_log})"
            print(f" {status} ({_duration(result.seconds)}; {_duration(time.perf_counter() - started)} in all)", flush=True)
    return results
