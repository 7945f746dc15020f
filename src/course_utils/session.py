"""The first call of every notebook: seed, pick the device, say what was picked."""

from __future__ import annotations

import os

import torch

from course_utils.device import describe_device, get_device
from course_utils.profiles import get_profile, describe_profile
from course_utils.seeding import seed_everything

__all__ = ["start"]


def start(seed: int = 0, quiet: bool = False) -> torch.device:
    """Seed everything, choose the device and print one line about both.

    >>> device = start(seed=0)   # doctest: +SKIP
    device: cpu (1 thread) | torch 2.13.0 | profile: ci (COURSE_PROFILE) | seed: 0

    On the CPU in the ``ci`` profile torch uses one thread: the models are tiny, grading and
    CI run several kernels side by side, and two threads per kernel on a busy 2-core machine
    made small training steps many times slower. ``COURSE_THREADS`` sets the count explicitly.
    """
    seed_everything(seed)
    device = get_device()
    threads = os.environ.get("COURSE_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    elif device.type == "cpu" and get_profile() == "ci":
        torch.set_num_threads(1)
    if not quiet:
        print(f"{describe_device(device)} | {describe_profile()} | seed: {seed}")
    return device
