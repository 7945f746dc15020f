"""Seconds a notebook cell may run, in one place.

- **Graded** (:func:`grading_cell_timeout`): ``nbgrader_config.py`` gives it to nbgrader, and
  ``course check`` runs a student's notebook under the same limit. In the ``ci`` profile, where
  grading runs, 120 s leaves room for training cells on a slow CPU and still stops an infinite
  loop quickly; the full-size profiles get 900 s. ``COURSE_CELL_TIMEOUT`` overrides both.
- **Executed** (:func:`execution_timeout`): the course's own solution notebooks (``course execute``,
  ``make demo``): a generous limit in ``ci`` stops a hung cell, and the ``cpu`` and ``gpu`` runs take
  as long as the machine needs.

Imports nothing heavy: nbgrader loads it with its configuration.
"""

from __future__ import annotations

import os

__all__ = ["GRADING_CELL_TIMEOUTS", "EXECUTION_TIMEOUTS", "grading_cell_timeout", "execution_timeout"]

GRADING_CELL_TIMEOUTS: dict[str, int] = {"ci": 120, "cpu": 900, "gpu": 900}
EXECUTION_TIMEOUTS: dict[str, int | None] = {"ci": 600, "cpu": None, "gpu": None}


def grading_cell_timeout(profile: str | None = None) -> int:
    """Seconds per cell while graded in ``profile`` (default ``COURSE_PROFILE``; none set: 900)."""
    override = os.environ.get("COURSE_CELL_TIMEOUT")
    if override:
        return int(override)
    return GRADING_CELL_TIMEOUTS.get(profile or os.environ.get("COURSE_PROFILE", ""), 900)


def execution_timeout(profile: str | None = None) -> int | None:
    """Seconds per cell when executing the course's notebooks in ``profile``; ``None``: no limit."""
    return EXECUTION_TIMEOUTS.get(profile or os.environ.get("COURSE_PROFILE", ""), None)
