"""The profile switch: how big every run in the course is.

``ci``  -- seconds per notebook: continuous integration, nbval, autograding.
``cpu`` -- a laptop: minutes per notebook, results worth reading.
``gpu`` -- full size, real datasets when online.

The environment variable ``COURSE_PROFILE`` chooses; without it the profile follows the
device (``gpu`` on CUDA, ``cpu`` otherwise).
"""

from __future__ import annotations

import os
from typing import TypeVar

import torch

__all__ = ["PROFILES", "get_profile", "choose", "describe_profile"]

PROFILES = ("ci", "cpu", "gpu")
T = TypeVar("T")


def get_profile() -> str:
    """The current profile name: ``COURSE_PROFILE`` if set, else one that suits the device."""
    value = os.environ.get("COURSE_PROFILE", "").strip().lower()
    if value:
        if value not in PROFILES:
            raise ValueError(
                f"COURSE_PROFILE={value!r} is not a profile; choose one of {', '.join(PROFILES)}"
            )
        return value
    return "gpu" if torch.cuda.is_available() else "cpu"


def choose(*, ci: T, cpu: T, gpu: T | None = None) -> T:
    """Pick the value for the current profile: ``steps = choose(ci=50, cpu=2000, gpu=20000)``.

    ``gpu`` defaults to the ``cpu`` value.
    """
    profile = get_profile()
    if profile == "ci":
        return ci
    if profile == "gpu" and gpu is not None:
        return gpu
    return cpu


def describe_profile() -> str:
    """One line naming the profile and where it came from."""
    source = "COURSE_PROFILE" if os.environ.get("COURSE_PROFILE") else "default for this device"
    return f"profile: {get_profile()} ({source})"
