"""Small, honest measurements of time and memory, for the cost sections of the notebooks.

:class:`PeakMemory` counts the bytes of tensor storage created inside a ``with`` block and
still alive, and keeps the peak. It sees every tensor an operator returns (through a
``TorchDispatchMode``), on any device, so it measures what the *algorithm* allocates
(e.g. the ``T x T`` attention matrix), not the allocator's caching. Do not time code
inside it: the bookkeeping is slow.
"""

from __future__ import annotations

import statistics
import time
import weakref
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_utils.device import cpu_threads as cpu_threads_for  # the argument below is named cpu_threads

__all__ = ["PeakMemory", "peak_memory", "synchronize", "time_call", "generation_speed"]


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


@torch.no_grad()
def generation_speed(
    model: torch.nn.Module, generate: Callable[..., torch.Tensor], prompt_len: int = 16, new_tokens: int | None = None, batch_size: int = 1,
    repeats: int = 3, device: torch.device | str = "cpu", seed: int = 0, cpu_threads: int | None = 1,
) -> dict:
    """Greedy generation tokens/s of ``generate(model, prompt, n, temperature=0, use_cache=...)`` with and
    without the KV cache (median of ``repeats``, interleaved); ``model.config`` gives ``block_size`` and
    ``vocab_size`` (notebook 10's GPT, Llama-style decoders alike).

    ``new_tokens`` defaults to filling the context (``block_size - prompt_len``), so the cache is never
    rebuilt. Returns ``{"with_cache", "without_cache", "speedup", "identical"}``.

    On the CPU both are timed with ``cpu_threads`` threads (default 1): batch-1 decoding of a small
    model is a chain of tiny operations, and extra threads only add synchronisation (on a busy
    machine, a lot of it). ``None`` keeps torch's setting.
    """
    new_tokens = model.config.block_size - prompt_len if new_tokens is None else new_tokens
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (batch_size, prompt_len), generator=gen).to(device)
    result, outputs = {}, {}
    times: dict[bool, list[float]] = {True: [], False: []}
    with cpu_threads_for(cpu_threads if torch.device(device).type == "cpu" else None):
        for repeat in range(repeats + 1):  # the first round warms up; then the two alternate, so a noisy
            for use_cache in (True, False):  # neighbour slows both alike
                synchronize(device)
                start = time.perf_counter()
                outputs[use_cache] = generate(model, prompt, new_tokens, temperature=0, use_cache=use_cache)
                synchronize(device)
                if repeat:
                    times[use_cache].append(time.perf_counter() - start)
    for use_cache, key in ((True, "with_cache"), (False, "without_cache")):
        result[key] = batch_size * new_tokens / statistics.median(times[use_cache])
    result["speedup"] = result["with_cache"] / result["without_cache"]
    result["identical"] = bool(torch.equal(outputs[True], outputs[False]))
    return result
