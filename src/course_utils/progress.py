"""Progress bars for long loops, and the one policy that decides when they show.

In the ``cpu`` and ``gpu`` profiles a training or evaluation loop can run for minutes; it shows
a ``tqdm.auto`` bar (a widget in JupyterLab, a text bar in a terminal). The ``ci`` profile and
grading stay silent: nbgrader scores a test cell that writes to stderr as zero, and output
checks compare text. Grading is recognised by ``NBGRADER_EXECUTION``, which nbgrader sets
while it autogrades or validates (and the sandbox passes on to the kernel)::

    for batch in progress(loader, total=steps, desc="training"):
        ...

Where the lesson is the curve, :class:`LiveCurve` redraws a loss curve in place while the loop
runs (as d2l's ``Animator`` does), under the same policy.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import TYPE_CHECKING, Iterable, TypeVar

from course_utils.profiles import get_profile

if TYPE_CHECKING:
    from IPython.display import DisplayHandle
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["progress", "progress_enabled", "LiveCurve"]

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
            return _finishing(text_bar)(iterable, total=total, desc=desc, file=sys.stdout)
    from tqdm.auto import tqdm
    return _finishing(tqdm)(iterable, total=total, desc=desc)


@functools.cache
def _finishing(bar: type) -> type:
    """``bar`` (a tqdm class) whose loop, left early (a time budget spent, a ``break``), ends as a
    finished bar at the count reached, not as tqdm's red error bar."""

    class Finishing(bar):  # type: ignore[misc, valid-type]
        def __iter__(self):
            try:
                for item in self.iterable:
                    try:
                        yield item
                    except GeneratorExit:
                        self.update()  # the loop was left during this item: it was reached
                        raise
                    self.update()
            finally:
                if self.total and self.n < self.total:
                    self.total = self.n
                    container = getattr(self, "container", None)  # the widget: its bar ends full too
                    if container is not None:
                        container.children[1].max = max(self.n, 1)
                self.close()

    return Finishing


class LiveCurve:
    """Named series of points, redrawn in place in one figure while a loop runs::

        curve = LiveCurve(title="pretraining", ylabel="loss")
        for step in progress(range(steps)):
            ...
            curve.add("training", step, loss.item())
        curve.close()

    It draws only where bars show (:func:`progress_enabled`) and in a Jupyter kernel; elsewhere
    ``add`` does nothing, and the notebook's own figure after the loop stays the record. It redraws
    at most once every ``every`` seconds; ``close`` draws the final state.
    """

    def __init__(self, *, title: str = "", xlabel: str = "step", ylabel: str = "loss", every: float = 2.0) -> None:
        self.enabled = progress_enabled() and _in_kernel()
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self._labels = {"title": title, "xlabel": xlabel, "ylabel": ylabel}
        self._every, self._drawn_at = every, 0.0
        self._figure: Figure | None = None  # the three are made together, by the first _draw
        self._axes: Axes | None = None
        self._handle: DisplayHandle | None = None

    def add(self, name: str, x: float, y: float) -> None:
        """Append the point ``(x, y)`` to series ``name``; redraw when ``every`` seconds have passed."""
        if not self.enabled:
            return
        xs, ys = self.series.setdefault(name, ([], []))
        xs.append(float(x))
        ys.append(float(y))
        if time.perf_counter() - self._drawn_at >= self._every:
            self._draw()

    def close(self) -> None:
        """Draw the last points (the figure stays in the cell's output)."""
        if self.enabled and self.series:
            self._draw()

    def _draw(self) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        figure, axes, handle = self._figure, self._axes, self._handle
        if figure is None or axes is None or handle is None:
            figure, axes = plt.subplots(figsize=(7, 3.5))
            plt.close(figure)  # shown through its display handle only, not again at the end of the cell
            handle = display(figure, display_id=True)
            self._figure, self._axes, self._handle = figure, axes, handle
        axes.clear()
        for name, (xs, ys) in self.series.items():
            axes.plot(xs, ys, "o-" if len(xs) <= 20 else "-", label=name)
        axes.set(**self._labels)
        axes.legend(loc="best")   # clear of the curves as they grow (a fixed corner covered their ends)
        handle.update(figure)
        self._drawn_at = time.perf_counter()
