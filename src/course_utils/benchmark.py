"""Small, honest measurements of time and memory, for the cost sections of the notebooks.

:class:`PeakMemory` counts the bytes of tensor storage created inside a ``with`` block and
still alive, and keeps the peak. It sees every tensor an operator returns (through a
``TorchDispatchMode``), on any device, so it measures what the *algorithm* allocates
(e.g. the ``T x T`` attention matrix), not the allocator's caching. Do not time code
inside it: the bookkeeping is slow.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["PeakMemory", "peak_memory", "synchronize", "time_call"]


class PeakMemory(TorchDispatchMode):
    """``with PeakMemory() as m: f(x)`` then ``m.peak`` (bytes) and ``m.total`` (all bytes created)."""

    def __enter__(self) -> "PeakMemory":
        self.live: dict[tuple[str, int], int] = {}
        self.now = self.peak = self.total = 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if not isinstance(value, torch.Tensor):
                continue
            storage = value.untyped_storage()
            key, nbytes = (str(value.device), storage.data_ptr()), storage.nbytes()
            if nbytes == 0 or key in self.live:
                continue  # a view of a storage already counted
            self.live[key] = nbytes
            self.now += nbytes
            self.total += nbytes
            self.peak = max(self.peak, self.now)
            weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key: tuple[str, int]) -> None:
        nbytes = self.live.pop(key, None)
        if nbytes is not None:
            self.now -= nbytes


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes of new tensor storage alive while ``fn()`` runs (its result included)."""
    with PeakMemory() as meter:
        result = fn()
        del result
    return meter.peak


def synchronize(device: torch.device | str | None) -> None:
    """Wait for queued CUDA work on ``device`` (nothing to wait for on the CPU)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1, device: torch.device | str | None = None) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs (after ``warmup`` runs);
    synchronises CUDA so GPU time is counted."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]
