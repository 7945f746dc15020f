"""One course, resolved once per command: where it is, its gradebook, its folders, the profile
submissions run in and the limits they run under.

Every verb builds a :class:`Course` with :meth:`Course.open` and passes it on, so the gradebook URL
(nbgrader's configuration, loaded in-process) is read once, and the folders have one spelling.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from course_utils.layout import UnknownAssignment, find_root, select_assignments

__all__ = ["Course", "GRADING_PROFILE", "UnknownAssignment"]

# The profile submissions are graded in unless the instructor says otherwise (`course grade --profile`):
# the grading limits of nbgrader_config.py are sized for it, whatever COURSE_PROFILE says in the shell.
GRADING_PROFILE = "ci"


_ENVIRONMENT_LOCK = threading.Lock()  # the demo class opens its scratch courses from several threads


@dataclass(frozen=True)
class Course:
    """A course directory (nbgrader's root) and what grading needs to know about it.

    ``db_url``: the gradebook nbgrader's configuration names (sqlite or PostgreSQL);
    ``profile``: the profile submissions run in; ``cell_timeout``: seconds a cell may run while
    graded (nbgrader's ``Execute.timeout``; ``COURSE_CELL_TIMEOUT`` in nbgrader_config.py).
    """

    root: Path
    db_url: str
    profile: str = GRADING_PROFILE
    cell_timeout: int | None = None

    @classmethod
    def open(cls, root: Path | None = None, *, profile: str | None = None) -> Course:
        """The course at ``root`` (default: found from the working directory), its configuration read once."""
        from course_grader.grading.gradebook import course_db_url, nbgrader_config

        root = find_root() if root is None else Path(root).resolve()
        profile = profile or GRADING_PROFILE
        with _ENVIRONMENT_LOCK:
            previous = os.environ.get("COURSE_PROFILE")
            os.environ["COURSE_PROFILE"] = profile  # nbgrader_config.py sizes its limits by the profile
            try:
                config = nbgrader_config(root)
                timeout = config.Execute.timeout if "Execute" in config and "timeout" in config.Execute else None
                return cls(root, course_db_url(root), profile, int(timeout) if timeout else None)
            finally:
                if previous is None:
                    os.environ.pop("COURSE_PROFILE", None)
                else:
                    os.environ["COURSE_PROFILE"] = previous

    # nbgrader's folders (CourseDirectory's defaults, which nbgrader_config.py keeps apart from
    # source and release: solutions/ and notebooks/)
    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def release(self) -> Path:
        return self.root / "notebooks"

    @property
    def submitted(self) -> Path:
        return self.root / "submitted"

    @property
    def autograded(self) -> Path:
        return self.root / "autograded"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback"

    @property
    def build(self) -> Path:
        """Where the course's commands write what is not nbgrader's (executed copies, flags, reviews)."""
        return self.root / "build"

    def assignments(self, requested: Sequence[str] = ()) -> list[str]:
        """``requested`` (all of ``solutions/`` when empty), each checked to exist (:class:`UnknownAssignment`)."""
        return select_assignments(self.root, requested)
