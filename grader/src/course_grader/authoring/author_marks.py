"""The authors' marks, taken out of the student's release.

The prose of ``solutions/`` marks each number it quotes from a run (``96.8%<!--q held-out-->``) and each
number that only looks like one (``4.5<!--nq-->``), for ``course quoted`` (:mod:`course_grader.authoring.quoted`).
Rendered, the marks are invisible; in a markdown cell a student double-clicks to copy a formula they are
noise. ``nbgrader generate_assignment`` runs :class:`StripAuthorMarks` first (nbgrader_config.py), so the
release, its checksums and the gradebook's copy of each cell hold the prose without them.
"""

from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

__all__ = ["AUTHOR_MARK", "StripAuthorMarks", "strip_author_marks"]

# <!--q-->, <!--q LABEL-->, <!--nq-->, <!-- quoted PROFILE cell-NNN: "LINE" -->
AUTHOR_MARK = re.compile(r"<!--\s*(?:n?q|quoted)(?:\s(?:(?!-->).)*?)?\s*-->", re.S)


def strip_author_marks(text: str) -> str:
    """``text`` without the authors' marks (nothing else changes)."""
    return AUTHOR_MARK.sub("", text)


class StripAuthorMarks(Preprocessor):
    """Remove the authors' marks from every markdown cell of a notebook being released."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):  # type: ignore[no-untyped-def]
        if cell.cell_type == "markdown":
            cell.source = strip_author_marks(cell.source)
        return cell, resources
