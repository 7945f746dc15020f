"""Curated wrong answers: plausible mistakes that the tests must be shown to reject.

Each assignment may have ``tests/mistakes/<assignment>.py`` defining ``MISTAKES``, a list
of :class:`Mistake`. A mistake edits the solution of one answer cell; grading a
submission that holds it (and is otherwise perfect) must cost points in every test cell
named in ``rejected_by``.
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Mistake", "load_mistakes", "mistakes_path"]


@dataclass(frozen=True)
class Mistake:
    """One wrong answer to one exercise.

    cell:        grade_id of the answer cell it changes.
    name:        what the student got wrong, in a few words ("softmax over the wrong axis").
    rejected_by: grade_ids of the test cells that must lose points.
    replace:     (old, new) text edits applied to the solution code, in order;
    source:      or the whole wrong answer, when an edit would be clumsy.
    """

    cell: str
    name: str
    rejected_by: tuple[str, ...]
    replace: tuple[tuple[str, str], ...] = field(default=())
    source: str | None = None

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


def mistakes_path(root: Path, assignment: str) -> Path:
    return root / "tests" / "mistakes" / f"{assignment}.py"


def load_mistakes(root: Path, assignment: str) -> list[Mistake]:
    """The curated mistakes of an assignment (empty if it has none)."""
    path = mistakes_path(root, assignment)
    if not path.is_file():
        return []
    mistakes = runpy.run_path(str(path)).get("MISTAKES")
    if not isinstance(mistakes, list) or not all(isinstance(m, Mistake) for m in mistakes):
        raise TypeError(f"{path} must define MISTAKES, a list of course_utils.tooling.mistakes.Mistake")
    return mistakes
