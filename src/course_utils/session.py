"""The first call of every notebook: seed, pick the device, say what was picked."""

from __future__ import annotations

import torch

from course_utils.device import describe_device, get_device
from course_utils.profiles import describe_profile
from course_utils.seeding import seed_everything

__all__ = ["start"]


def start(seed: int = 0, quiet: bool = False) -> torch.device:
    """Seed everything, choose the device and print one line about both.

    >>> device = start(seed=0)   # doctest: +SKIP
    device: cpu (2 threads) | torch 2.13.0 | profile: ci (COURSE_PROFILE) | seed: 0
    """
    seed_everything(seed)
    device = get_device()
    if not quiet:
        print(f"{describe_device(device)} | {describe_profile()} | seed: {seed}")
    return device
