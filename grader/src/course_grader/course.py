"""One course, resolved once per command: where it is, its gradebook, its folders, the profile
submissions run in and the limits they run under.

Every verb builds a :class:`Course` with :meth:`Course.open` and passes it on, so the gradebook URL
(nbgrader's configuration, loaded in-process) is read once, and the folders have one spelling.
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from course_grader.grading.variants import SECRET_ENV
from course_utils.layout import UnknownAssignment, find_root, select_assignments
from course_utils.variants import ENV_SEED

__all__ = ["BUILD_KINDS", "Course", "GRADER_SECRETS", "GRADING_PROFILE", "GradingSettings", "STEPS", "UnknownAssignment", "WALL_LIMIT"]

# The profile submissions are graded in unless the instructor says otherwise (`course grade --profile`):
# the grading limits of nbgrader_config.py are sized for it, whatever COURSE_PROFILE says in the shell.
GRADING_PROFILE = "ci"
# Seconds one notebook may take on a Dask worker, kernel start to last cell, before its kernel is
# stopped (`course grade --wall-limit`; the one default of the CLI, `grade()` and the Dask path)
WALL_LIMIT = 3600.0


# nbgrader's steps, each kept in the folder ``CourseDirectory.<step>_directory`` names
STEPS = ("source", "release", "submitted", "autograded", "feedback")
_PER_ASSIGNMENT = ("source", "release")  # the others are kept per student
# what the course's own commands keep under build/ (Course.build_dir)
BUILD_KINDS = ("executed", "flags", "manual", "grading", "demo-class", "student-dist")


def _nbgrader_default(step: str) -> str:
    from nbgrader.coursedir import CourseDirectory

    return str(CourseDirectory.class_traits()[f"{step}_directory"].default_value)


def _directories(config: Any) -> tuple[tuple[str, str], ...]:
    """Each step's folder as nbgrader would read it from ``config`` (its default where it names none)."""
    section = config.CourseDirectory if "CourseDirectory" in config else {}
    return tuple((step, str(section.get(f"{step}_directory", _nbgrader_default(step)))) for step in STEPS)


# Never handed to nbgrader's processes nor the kernels they start (an unsandboxed kernel inherits
# their environment): grading reads each student's stored variant seed, never the secret that made
# it, and hands a seed to that student's checker only (grading.variants.checker_environment).
GRADER_SECRETS = frozenset({SECRET_ENV, ENV_SEED})

_ENVIRONMENT_LOCK = threading.Lock()  # the demo class opens its scratch courses from several threads


@dataclass(frozen=True)
class GradingSettings:
    """How submissions are graded, decided once per command (its flags first, then the environment,
    the documented way in) and passed down with the :class:`Course`; pickled to Dask workers.

    ``profile``: the profile submissions run in; ``cell_timeout``: seconds a cell may run (nbgrader's
    ``Execute.timeout``); ``sandbox``: every kernel in the grading sandbox (False only for trusted
    code: ``--no-sandbox``, the demo class where none works); ``wall_limit``: seconds per notebook on
    a Dask worker (None: none). They become environment only where a process starts
    (:meth:`environment`: nbgrader's processes and the kernels they start)."""

    profile: str = GRADING_PROFILE
    cell_timeout: int | None = None
    sandbox: bool = True
    wall_limit: float | None = WALL_LIMIT

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (a process's environment) with these settings written into it, and without the
        course's secrets (:data:`GRADER_SECRETS`)."""
        env = {name: value for name, value in base.items() if name not in GRADER_SECRETS}
        env["COURSE_PROFILE"] = self.profile  # the grading profile, whatever the shell says
        if self.sandbox:
            env.pop("COURSE_SANDBOX", None)
        else:
            env["COURSE_SANDBOX"] = "off"
        return env


@dataclass(frozen=True)
class Course:
    """A course directory (nbgrader's root) and what grading needs to know about it.

    ``db_url``: the gradebook nbgrader's configuration names (sqlite or PostgreSQL);
    ``settings``: how its submissions are graded (:class:`GradingSettings`; ``profile`` and
    ``cell_timeout`` read them); ``directories``: the folder each nbgrader step is kept in
    (:meth:`path`), as its configuration names them; ``config``: that configuration as
    :meth:`open` read it (:meth:`nbgrader_config` hands out copies).
    """

    root: Path
    db_url: str
    settings: GradingSettings = GradingSettings()
    directories: tuple[tuple[str, str], ...] = ()  # (step, folder name) as nbgrader's configuration sets them
    config: Any = field(default=None, compare=False, repr=False)  # nbgrader's traitlets Config, read in the profile

    @property
    def profile(self) -> str:
        """The profile submissions run in."""
        return self.settings.profile

    @property
    def cell_timeout(self) -> int | None:
        """Seconds a cell may run while graded (``COURSE_CELL_TIMEOUT`` in nbgrader_config.py)."""
        return self.settings.cell_timeout

    @classmethod
    def open(cls, root: Path | None = None, *, profile: str | None = None, sandbox: bool | None = None,
             wall_limit: float | None = WALL_LIMIT) -> Course:
        """The course at ``root`` (default: found from the working directory), its configuration read once.

        ``profile``: default ``ci`` (:data:`GRADING_PROFILE`), whatever COURSE_PROFILE says;
        ``sandbox``: default on unless ``COURSE_SANDBOX=off``; ``wall_limit``: seconds per notebook on Dask."""
        from course_grader.grading.gradebook import configured_db_url, nbgrader_config
        from course_grader.sandbox.bubblewrap import sandbox_enabled  # the sandbox's own reading of COURSE_SANDBOX

        root = find_root() if root is None else Path(root).resolve()
        profile = profile or GRADING_PROFILE
        sandbox = sandbox_enabled() if sandbox is None else sandbox
        with _ENVIRONMENT_LOCK:
            previous = os.environ.get("COURSE_PROFILE")
            os.environ["COURSE_PROFILE"] = profile  # nbgrader_config.py sizes its limits by the profile
            try:
                config = nbgrader_config(root)
                timeout = config.Execute.timeout if "Execute" in config and "timeout" in config.Execute else None
                settings = GradingSettings(profile, int(timeout) if timeout else None, sandbox, wall_limit)
                return cls(root, configured_db_url(config, root), settings, _directories(config), config)
            finally:
                if previous is None:
                    os.environ.pop("COURSE_PROFILE", None)
                else:
                    os.environ["COURSE_PROFILE"] = previous

    def nbgrader_config(self) -> Any:
        """A copy of nbgrader's configuration for this course, as :meth:`open` read it once in the grading
        profile (nbgrader_config.py sizes the limits by the profile)."""
        if self.config is None:
            raise ValueError(f"this Course ({self.root}) was built without nbgrader's configuration: use Course.open")
        return copy.deepcopy(self.config)

    # nbgrader's folders, by step: the names nbgrader_config.py gives CourseDirectory (solutions/ and
    # notebooks/ for source and release), nbgrader's own defaults where it gives none
    def path(self, step: str, student: str | None = None, assignment: str | None = None) -> Path:
        """Where nbgrader keeps ``step`` (nbgrader's ``CourseDirectory.format_path``, read with its
        ``{nbgrader_step}/{student_id}/{assignment_id}`` structure): ``source`` and ``release`` hold
        ``<assignment>/``, ``submitted``, ``autograded`` and ``feedback`` hold ``<student>/<assignment>/``.
        Left out, ``student`` and ``assignment`` give the folder above."""
        if step not in STEPS:
            raise ValueError(f"no nbgrader step {step!r} (known: {', '.join(STEPS)})")
        if student is not None and step in _PER_ASSIGNMENT:
            raise ValueError(f"nbgrader's {step} folder is not kept per student")
        if assignment is not None and student is None and step not in _PER_ASSIGNMENT:
            raise ValueError(f"nbgrader's {step} folder holds an assignment per student: name the student")
        folder = self.root / self._directory(step)
        for part in (student, assignment):
            if part is not None:
                folder = folder / part
        return folder

    def _directory(self, step: str) -> str:
        named = dict(self.directories)
        return named[step] if step in named else _nbgrader_default(step)

    @property
    def solutions(self) -> Path:
        return self.path("source")

    @property
    def release(self) -> Path:
        return self.path("release")

    @property
    def submitted(self) -> Path:
        return self.path("submitted")

    @property
    def autograded(self) -> Path:
        return self.path("autograded")

    @property
    def feedback(self) -> Path:
        return self.path("feedback")

    @property
    def build(self) -> Path:
        """Where the course's commands write what is not nbgrader's (executed copies, flags, reviews)."""
        return self.root / "build"

    def build_dir(self, kind: str) -> Path:
        """One of the course's own folders under ``build/`` (:data:`BUILD_KINDS`): ``executed``
        (``<profile>/`` each: the solutions run by `course execute`), ``flags`` (scan and similarity
        CSVs), ``manual`` (``<assignment>/<student>.html`` manual-grading views), ``grading`` (the Dask
        path's ``<assignment>.jsonl`` record), ``demo-class`` (the demo class's scratch course),
        ``student-dist`` (what students get)."""
        if kind not in BUILD_KINDS:
            raise ValueError(f"no build folder {kind!r} (known: {', '.join(BUILD_KINDS)})")
        return self.build / kind

    def assignments(self, requested: Sequence[str] = ()) -> list[str]:
        """``requested`` (all of ``solutions/`` when empty), each checked to exist (:class:`UnknownAssignment`)."""
        return select_assignments(self.root, requested)
