"""Shared fixtures. Every test runs in the `ci` profile on the CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("COURSE_PROFILE", "ci")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parents[1]


def assignment_names() -> list[str]:
    from course_utils.tooling.layout import assignments

    return assignments(ROOT)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
