"""What grading keeps of a checked test cell, and whether the checker decides at all.

Torch-free on purpose: nbgrader's process (``SandboxedExecute``) reads verdicts and starts
checkers but never runs one, so it must not pay for importing torch; only the checker's own
process (:mod:`.checker`, forked from :mod:`.process`'s fork server) does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["CheckResult", "checker_enabled"]


@dataclass
class CheckResult:
    """One test cell, checked: ``ok``, or the error the student sees; plus evidence for a flag."""

    ok: bool
    ename: str = ""
    evalue: str = ""
    evidence: list[str] = field(default_factory=list)
    timed_out: bool = False  # the deadline passed: the kernel is stopped (it may never answer again)


def checker_enabled(assignment: str | None = None) -> bool:
    """Whether the trusted checker decides the test cells of ``assignment``: always, for every
    assignment (each one's solution and curated mistakes are proven through it by `course
    mistakes`), unless ``COURSE_CHECKER=off`` runs whole test cells in the kernel (authors only)."""
    return os.environ.get("COURSE_CHECKER", "").lower() not in {"off", "0", "no"}
