"""Progress bars for long loops, and the one policy that decides when they show.

In the ``cpu`` and ``gpu`` profiles a training or evaluation loop can run for minutes; it shows
a ``tqdm.auto`` bar (a widget in JupyterLab, a text bar in a terminal). The ``ci`` profile and
grading stay silent: nbgrader scores a test cell that writes to stderr as zero, and output
checks compare text. Grading is recognised by ``NBGRADER_EXECUTION``, which nbgrader sets
while it autogrades or validates (and the sandbox passes on to the kernel)::

    for batch in progress(loader, total=steps, desc="training"):
        ...
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

from course_utils.profiles import get_profile

__all__ = ["progress", "progress_enabled"]

T = TypeVar("T")


def progress_enabled() -> bool:
    """Whether loops show a bar: not in the ``ci`` profile, not while nbgrader executes."""
    return get_profile() != "ci" and not os.environ.get("NBGRADER_EXECUTION")


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress(iterable: Iterable[T], total: int | None = None, desc: str | None = None) -> Iterable[T]:
    """``iterable`` itself when bars are off (see :func:`progress_enabled`), else a tqdm bar over it.

    In a Jupyter kernel the bar is a widget; where ipywidgets is missing it is text on stdout,
    never on stderr. ``total`` is the number of items when ``len(iterable)`` cannot tell.
    """
    if not progress_enabled():
        return iterable
    if _in_kernel():
        try:
            import ipywidgets  # noqa: F401 - tqdm.auto needs it for the widget
        except ImportError:
            from tqdm.std import tqdm as text_bar
            return text_bar(iterable, total=total, desc=desc, file=sys.stdout)
    from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc)
