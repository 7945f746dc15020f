"""The first call of every notebook: seed, pick the device, say what was picked."""

from __future__ import annotations

import torch

from course_utils.device import describe_device, experiment_threads, get_device
from course_utils.profiles import get_profile, describe_profile
from course_utils.seeding import seed_everything

__all__ = ["start"]


def start(seed: int = 0, quiet: bool = False, threads: int | None = None) -> torch.device:
    """Seed everything, choose the device and print one line about both.

    >>> device = start(seed=0, threads=1)   # doctest: +SKIP
    device: cpu (1 thread) | torch 2.13.0 | profile: cpu (default) | seed: 0

    ``threads`` is the CPU thread count the notebook's experiments were measured at (its ranges are
    comparable at that count); ``COURSE_THREADS`` overrides it. Without either, the ``ci`` profile
    uses one thread (the models are tiny, and grading and CI run several kernels side by side: two
    threads per kernel on a busy 2-core machine made small training steps many times slower) and
    the other profiles torch's default. The line printed is the count in force afterwards.
    """
    seed_everything(seed)
    device = get_device()
    chosen = experiment_threads(threads)
    if chosen is None and device.type == "cpu" and get_profile() == "ci":
        chosen = 1
    if chosen is not None and device.type == "cpu":
        torch.set_num_threads(chosen)
    if not quiet:
        print(f"{describe_device(device)} | {describe_profile()} | seed: {seed}")
    return device
