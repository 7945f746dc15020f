"""Run nbgrader in a subprocess, in a given course directory, the way the course needs it.

A subprocess keeps nbgrader's logging, its database session and any crash away from the
caller. The environment's ``bin`` goes on PATH (nbgrader shells out to ``alembic``), and
``COURSE_PROFILE`` defaults to ``ci`` so grading runs the notebooks at their fast size.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["NbgraderError", "grading_env", "run_nbgrader", "write_course_config"]


class NbgraderError(RuntimeError):
    """nbgrader exited non-zero; the message carries the end of its log."""


def grading_env(profile: str = "ci", extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for nbgrader and the kernels it starts."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("COURSE_PROFILE", profile)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("MPLBACKEND", "Agg")
    if extra:
        env.update(extra)
    return env


def run_nbgrader(
    args: Sequence[str],
    course_dir: Path,
    *,
    profile: str = "ci",
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``nbgrader ARGS`` with ``course_dir`` as working directory and course root."""
    command = [sys.executable, "-m", "nbgrader", *args]
    result = subprocess.run(
        command,
        cwd=course_dir,
        env=env or grading_env(profile),
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise NbgraderError(f"`nbgrader {' '.join(args)}` failed in {course_dir} (exit {result.returncode}):\n{tail}")
    return result


def write_course_config(course_dir: Path, base_config: Path) -> Path:
    """Give a scratch course directory (demo class, tests) the repository's nbgrader config."""
    course_dir.mkdir(parents=True, exist_ok=True)
    config = course_dir / "nbgrader_config.py"
    config.write_text(
        "# Generated: the course's own configuration, loaded unchanged.\n"
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(base_config.resolve())!r})  # noqa: F821\n"
    )
    return config
