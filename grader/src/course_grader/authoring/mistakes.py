"""Curated wrong answers: plausible mistakes that the tests must be shown to reject.

Each assignment may have ``tests/mistakes/<assignment>.py`` defining ``MISTAKES``, a list
of :class:`Mistake`. A mistake edits the solution of one answer cell; grading a
submission that holds it (and is otherwise perfect) must cost points in every test cell
named in ``rejected_by``. Each mistake records its ``kind`` (see :data:`KINDS`), so the
course can say which classes of mistakes its tests are proven against.

The same file may define ``ACCEPTED``, a list of :class:`Accepted`: alternative *right*
answers, written in other styles than the solution, that every test must accept.
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["KINDS", "Mistake", "Accepted", "load_mistakes", "load_accepted", "mistakes_path"]

#: The classes of mistakes students really make (issue 12); every curated mistake names one.
KINDS = (
    "device",      # a tensor created without device= (fails on a GPU kernel)
    "dtype",       # the output's dtype does not follow the input's
    "autograd",    # the backward pass breaks or is cut (in-place op, detach, no_grad)
    "argument",    # an argument or a promise of the docstring is ignored
    "boundary",    # ties, thresholds, empty or length-1 inputs, extreme values
    "statistics",  # randomness drawn at the wrong granularity, wrong rates
    "structure",   # wrong module structure, aliasing, wrong return type
    "ban",         # a banned function reached another way
    "logic",       # wrong axis, transpose, off-by-one, missing scale...
    "reference",   # the course's own implementation imported instead of written
)


@dataclass(frozen=True)
class Mistake:
    """One wrong answer to one exercise.

    cell:        grade_id of the answer cell it changes.
    name:        what the student got wrong, in a few words ("softmax over the wrong axis").
    rejected_by: grade_ids of the test cells that must lose points.
    replace:     (old, new) text edits applied to the solution code, in order;
    source:      or the whole wrong answer, when an edit would be clumsy.
    kind:        the class of mistake, one of :data:`KINDS`.
    fresh_kernel: the wrong answer changes notebook state that re-running its cells cannot
                 restore (``K.transpose_()`` on a global ``X`` defined earlier); the harness
                 starts a fresh kernel after it. A failed restore does the same on its own.
    """

    cell: str
    name: str
    rejected_by: tuple[str, ...]
    replace: tuple[tuple[str, str], ...] = field(default=())
    source: str | None = None
    kind: str | None = None
    fresh_kernel: bool = False

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"mistake {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def apply(self, solution: str) -> str:
        """The wrong answer: ``source``, or ``solution`` with every edit made.

        Raises ValueError when an edit's ``old`` text is not in the solution, so a
        mistake can never silently turn back into the right answer.
        """
        if self.source is not None:
            return self.source
        wrong = solution
        for old, new in self.replace:
            if old not in wrong:
                raise ValueError(f"mistake {self.name!r}: {old!r} is not in the solution of cell {self.cell!r}")
            wrong = wrong.replace(old, new)
        if wrong == solution:
            raise ValueError(f"mistake {self.name!r} leaves the solution of cell {self.cell!r} unchanged")
        return wrong

    @property
    def slug(self) -> str:
        """A short student-id-safe name."""
        text = "".join(ch if ch.isalnum() else "-" for ch in self.name.lower())
        return "-".join(part for part in text.split("-") if part)[:40]


@dataclass(frozen=True)
class Accepted:
    """An alternative right answer to one exercise: every test in ``checked_by`` must pass.

    cell:       grade_id of the answer cell it replaces.
    name:       the style ("einsum instead of matmul", "loop over heads").
    replace / source: as for :class:`Mistake`.
    checked_by: grade_ids of the test cells that must pass (default: the first test cell
                after the answer cell).
    fresh_kernel: as for :class:`Mistake`.
    """

    cell: str
    name: str
    replace: tuple[tuple[str, str], ...] = field(default=())
    source: str | None = None
    checked_by: tuple[str, ...] = ()
    fresh_kernel: bool = False

    def apply(self, solution: str) -> str:
        """The alternative answer (same rules as :meth:`Mistake.apply`)."""
        return Mistake(self.cell, self.name, (), self.replace, self.source).apply(solution)

    @property
    def slug(self) -> str:
        return Mistake(self.cell, self.name, ()).slug


def mistakes_path(root: Path, assignment: str) -> Path:
    return root / "tests" / "mistakes" / f"{assignment}.py"


def load_mistakes(root: Path, assignment: str) -> list[Mistake]:
    """The curated mistakes of an assignment (empty if it has none)."""
    path = mistakes_path(root, assignment)
    if not path.is_file():
        return []
    mistakes = runpy.run_path(str(path)).get("MISTAKES")
    if not isinstance(mistakes, list) or not all(isinstance(m, Mistake) for m in mistakes):
        raise TypeError(f"{path} must define MISTAKES, a list of course_grader.authoring.mistakes.Mistake")
    return mistakes


def load_accepted(root: Path, assignment: str) -> list[Accepted]:
    """The alternative right answers of an assignment (empty if it has none)."""
    path = mistakes_path(root, assignment)
    if not path.is_file():
        return []
    accepted = runpy.run_path(str(path)).get("ACCEPTED", [])
    if not isinstance(accepted, list) or not all(isinstance(a, Accepted) for a in accepted):
        raise TypeError(f"{path}: ACCEPTED must be a list of course_grader.authoring.mistakes.Accepted")
    return accepted
