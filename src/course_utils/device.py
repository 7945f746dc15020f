"""Device choice: CUDA, then Apple MPS, then CPU."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["get_device", "describe_device", "cpu_threads", "experiment_threads"]


def get_device(prefer: str | None = None) -> torch.device:
    """Return the best available device.

    ``prefer`` (or the environment variable ``COURSE_DEVICE``) forces one, e.g. ``"cpu"``
    to run on the CPU even when a GPU is present.
    """
    forced = prefer or os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device | None = None) -> str:
    """One line saying which device, torch version and (for CPU) how many threads."""
    device = device or get_device()
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        name = torch.cuda.get_device_name(index)
        memory_gib = torch.cuda.get_device_properties(index).total_memory / 2**30
        detail = f"{name}, {memory_gib:.0f} GiB"
    elif device.type == "mps":
        detail = "Apple Metal"
    else:
        n = torch.get_num_threads()
        detail = f"{n} thread{'' if n == 1 else 's'}"
    return f"device: {device.type} ({detail}) | torch {torch.__version__}"


def experiment_threads(measured_at: int | None) -> int | None:
    """The torch thread count for an experiment whose ranges were measured at ``measured_at`` threads.

    ``COURSE_THREADS``, when set, wins: it is the student's explicit choice (say, to compare a run at
    another thread count with the course's ranges). Otherwise ``measured_at`` (``None``: unchanged).
    """
    chosen = os.environ.get("COURSE_THREADS")
    return int(chosen) if chosen else measured_at


@contextmanager
def cpu_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch CPU threads, then restore the previous count (``None``: unchanged).

    Small models and elementwise work are as fast on one thread, and far faster on a busy machine,
    where extra threads mostly wait for each other.
    """
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
